"""The plain-float entry points the Blender layer's few-chain path calls: same answers as the numpy API."""

from __future__ import annotations

import numpy as np
import pytest

from fabrik_addon.solver import solve_chain
from fabrik_addon.solver.fabrik import solve_points
from fabrik_addon.solver.two_bone import two_bone_points
from rigkit.chains import random_chain, reachable_target


@pytest.mark.parametrize("bones", [1, 2, 3, 7, 20])
def test_solve_points_equals_solve_chain(bones):
    rng = np.random.default_rng(40 + bones)
    for k in range(300):
        joints = random_chain(rng, bones, 3)
        target = reachable_target(rng, joints) if k % 3 else joints[0] + rng.normal(size=3) * 10.0
        pole = rng.normal(size=3) * 3.0 if k % 2 else None
        expected = solve_chain(joints, target, pole=pole, tolerance=1e-4, max_iterations=40)
        points, error, iterations = solve_points([tuple(p) for p in joints], tuple(target),
                                                 None if pole is None else tuple(pole), tolerance=1e-4,
                                                 max_iterations=40)
        np.testing.assert_allclose(np.array(points), expected.joints, rtol=0.0, atol=1e-9)
        assert error == pytest.approx(expected.error, abs=1e-9)
        reach = np.linalg.norm(np.diff(joints, axis=0), axis=1).sum()
        if abs(np.linalg.norm(target - joints[0]) - reach) > 1e-12 * reach:  # else "reachable" is a rounding call
            assert iterations == expected.iterations


def test_solve_points_straight_start_bends_like_solve_chain():
    joints = np.array([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 2.0, 0.0], [0.0, 3.0, 0.0]])
    target = np.array([0.0, 1.5, 0.0])  # on the chain's own axis
    expected = solve_chain(joints, target)
    points, error, _ = solve_points(joints.tolist(), target.tolist())
    np.testing.assert_allclose(np.array(points), expected.joints, atol=1e-12)
    assert error == pytest.approx(expected.error)
    assert expected.reached


@pytest.mark.parametrize("joints, target, message", [
    ([(0, 0, 0), (0, 0, 0), (0, 1, 0)], (1, 0, 0), "bone 0 has zero length"),
    ([(0, 0, 0), (0, 1, 0), (0, 2, 0)], (float("nan"), 0, 0), "NaN"),
    ([(0, 0, 0), (0, float("inf"), 0)], (1, 0, 0), "NaN"),
])
def test_solve_points_rejects_bad_input(joints, target, message):
    with pytest.raises(ValueError, match=message):
        solve_points(joints, target)


def test_two_bone_points_equal_the_law_of_cosines():
    rng = np.random.default_rng(7)
    for k in range(500):
        joints = random_chain(rng, 2, 3)
        l1, l2 = np.linalg.norm(np.diff(joints, axis=0), axis=1)
        target = joints[0] + rng.normal(size=3) * (l1 + l2) * 0.6
        pole = tuple(rng.normal(size=3)) if k % 2 else None
        root, elbow, tip = (np.array(p) for p in two_bone_points(joints.tolist(), tuple(target), pole, l1, l2))
        np.testing.assert_allclose(root, joints[0], atol=0.0)
        assert np.linalg.norm(elbow - root) == pytest.approx(l1, rel=1e-9)
        assert np.linalg.norm(tip - elbow) == pytest.approx(l2, rel=1e-9)
        d = np.linalg.norm(target - root)
        if abs(l1 - l2) < d < l1 + l2:
            np.testing.assert_allclose(tip, target, atol=1e-9)
            if pole is not None:  # the elbow on the pole's side of the root-target line
                u = (target - root) / d
                side = (np.array(pole) - root) - ((np.array(pole) - root) @ u) * u
                assert (elbow - root) @ side >= -1e-9
