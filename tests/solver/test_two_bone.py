"""solve_two_bone: the analytic law-of-cosines solver."""

import numpy as np
import pytest

from fabrik_addon.solver import solve_two_bone
from rigkit.chains import lengths_of, random_chain


@pytest.mark.parametrize("dim", [2, 3])
def test_matches_the_law_of_cosines(dim):
    rng = np.random.default_rng(10 + dim)
    for _ in range(2000):
        joints = random_chain(rng, 2, dim)
        l1, l2 = lengths_of(joints)
        d = rng.uniform(abs(l1 - l2) * 1.001, (l1 + l2) * 0.999)
        direction = rng.normal(size=dim)
        target = joints[0] + d * direction / np.linalg.norm(direction)
        result = solve_two_bone(joints, target, tolerance=1e-9)
        assert result.reached
        np.testing.assert_allclose(result.joints[2], target, atol=1e-9)
        np.testing.assert_allclose(lengths_of(result.joints), [l1, l2], rtol=1e-9)
        upper = result.joints[1] - joints[0]
        cos_root = upper @ (target - joints[0]) / (l1 * d)
        assert cos_root == pytest.approx((l1 * l1 + d * d - l2 * l2) / (2 * l1 * d), abs=1e-9)


def test_too_far_lies_straight_toward_target():
    joints = np.array([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    result = solve_two_bone(joints, [0.0, 0.0, 5.0])
    assert not result.reached
    assert result.error == pytest.approx(3.0)
    np.testing.assert_allclose(result.joints, [[0, 0, 0], [0, 0, 1], [0, 0, 2]], atol=1e-12)


@pytest.mark.parametrize(("l1", "l2"), [(2.0, 0.5), (0.5, 2.0)])
def test_too_near_folds_fully_toward_target(l1, l2):
    joints = np.array([[0.0, 0.0, 0.0], [0.0, l1, 0.0], [0.0, l1 + l2, 0.0]])
    target = np.array([0.5, 0.0, 0.0])  # |l1 - l2| = 1.5 > 0.5
    result = solve_two_bone(joints, target)
    assert not result.reached
    np.testing.assert_allclose(result.joints[2], [1.5, 0.0, 0.0], atol=1e-12)
    assert result.error == pytest.approx(1.0)
    np.testing.assert_allclose(lengths_of(result.joints), [l1, l2], rtol=1e-12)


def test_elbow_lies_in_the_pole_plane_on_the_pole_side():
    rng = np.random.default_rng(12)
    for _ in range(1000):
        joints = random_chain(rng, 2, 3)
        l1, l2 = lengths_of(joints)
        d = rng.uniform(abs(l1 - l2) * 1.01, (l1 + l2) * 0.99)
        direction = rng.normal(size=3)
        target = joints[0] + d * direction / np.linalg.norm(direction)
        pole = rng.uniform(-4, 4, 3)
        result = solve_two_bone(joints, target, pole=pole)
        root, elbow = joints[0], result.joints[1]
        normal = np.cross(target - root, pole - root)
        normal /= np.linalg.norm(normal)
        assert abs((elbow - root) @ normal) < 1e-9
        u = (target - root) / d
        assert (elbow - root - ((elbow - root) @ u) * u) @ (pole - root - ((pole - root) @ u) * u) > 0


def test_without_pole_the_bend_does_not_flip_as_the_target_sweeps():
    joints = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.5], [2.0, 0.0, 0.0]])
    previous = None
    for angle in np.linspace(0.0, 0.9 * np.pi, 40):
        target = 1.5 * np.array([np.cos(angle), np.sin(angle), 0.0])
        elbow = solve_two_bone(joints, target).joints[1]
        assert elbow[2] > 0.0
        if previous is not None:
            assert np.linalg.norm(elbow - previous) < 0.2
        previous = elbow


def test_straight_start_with_target_on_axis_bends_deterministically():
    joints = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]])
    a = solve_two_bone(joints, [1.0, 0.0])
    b = solve_two_bone(joints, [1.0, 0.0])
    assert a.reached and np.isfinite(a.joints).all()
    np.testing.assert_array_equal(a.joints, b.joints)
    assert abs(a.joints[1, 1]) > 0.5


def test_target_at_root_is_finite():
    joints = np.array([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 2.0, 0.0]])
    result = solve_two_bone(joints, [0.0, 0.0, 0.0])
    assert np.isfinite(result.joints).all()
    assert result.reached


def test_needs_exactly_two_bones():
    with pytest.raises(ValueError, match=r"shape \(3, D\)"):
        solve_two_bone([[0, 0, 0], [0, 1, 0], [0, 2, 0], [0, 3, 0]], [1, 1, 0])
