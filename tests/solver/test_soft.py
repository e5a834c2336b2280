"""Soft IK and stretch: the eased distance, stretch factors, and every entry point honouring them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fabrik_addon.solver import solve_chain, solve_chains, solve_tree, solve_two_bone
from fabrik_addon.solver.fabrik import solve_points
from fabrik_addon.solver.limits import resolve_limits
from fabrik_addon.solver.soft import eased_distance, eased_distances, settle_chains, settle_points, stretch_factor
from fabrik_addon.solver.two_bone import two_bone_points
from rigkit.chains import lengths_of, random_chain
from rigkit.limited import random_cones, random_rest_chain
from rigkit.trees import torso


def bends(joints: np.ndarray) -> np.ndarray:
    d = np.diff(joints, axis=0)
    d /= np.linalg.norm(d, axis=1)[:, None]
    return np.arccos(np.clip(np.einsum("ij,ij->i", d[:-1], d[1:]), -1.0, 1.0))


def arc_chain(bones: int, curve: float = 0.3) -> np.ndarray:
    angles = np.linspace(-curve, curve, bones)
    d = np.stack([np.sin(angles), np.cos(angles), 0.05 * np.sin(3.0 * angles)], axis=1)
    d /= np.linalg.norm(d, axis=1)[:, None]
    return np.vstack([np.zeros(3), np.cumsum(d / bones, axis=0)])


@pytest.mark.parametrize("softness", [0.01, 0.1, 0.25, 0.5])
def test_eased_distance_is_monotone_c1_and_only_tends_to_reach(softness):
    reach = 2.5
    d = np.linspace(0.0, 3.0 * reach, 30001)
    eased = np.array([eased_distance(x, reach, softness) for x in d])
    start = reach * (1.0 - softness)
    # Strictly increasing and below full reach while the steps are above rounding (12 zone widths).
    near = d < start + 12.0 * softness * reach
    assert (np.diff(eased[near]) > 0.0).all() and (np.diff(eased) >= 0.0).all()
    assert (eased[near] < reach).all() and (eased <= reach).all()
    np.testing.assert_array_equal(eased[d <= start], d[d <= start])
    # Slope 1 on both sides of the zone's start (C1), and no jump in value there.
    h = 1e-6 * softness * reach
    left = (eased_distance(start, reach, softness) - eased_distance(start - h, reach, softness)) / h
    right = (eased_distance(start + h, reach, softness) - eased_distance(start, reach, softness)) / h
    assert left == pytest.approx(1.0, abs=1e-6) and right == pytest.approx(1.0, abs=1e-6)
    assert eased_distance(50.0 * reach, reach, softness) == pytest.approx(reach, rel=1e-12)
    np.testing.assert_allclose(eased_distances(d, np.full_like(d, reach), np.full_like(d, softness)), eased,
                               rtol=0.0, atol=1e-15 * reach)


def test_hard_curve_and_stretch_factors():
    assert eased_distance(3.0, 2.0, 0.0) == 2.0 and eased_distance(1.0, 2.0, 0.0) == 1.0
    assert stretch_factor(2.6, 2.0, 0.0, 1.5) == pytest.approx(1.3, abs=1e-12)
    assert stretch_factor(4.0, 2.0, 0.0, 1.5) == 1.5
    assert stretch_factor(1.0, 2.0, 0.2, 1.5) == 1.0
    # With softness the chain starts stretching where the soft zone starts, continuously.
    assert stretch_factor(1.6 + 1e-9, 2.0, 0.2, 1.5) == pytest.approx(1.0, abs=1e-8)


@pytest.mark.parametrize("bones", [2, 3, 7])
def test_equal_to_hard_ik_below_the_soft_zone(bones):
    rng = np.random.default_rng(150 + bones)
    for k in range(100):
        joints = random_chain(rng, bones, 3)
        reach = lengths_of(joints).sum()
        u = rng.normal(size=3)
        target = joints[0] + u / np.linalg.norm(u) * reach * rng.uniform(0.05, 0.9)  # below 1 - 0.1
        pole = rng.normal(size=3) * 2.0 if k % 2 else None
        solve = solve_two_bone if bones == 2 else solve_chain
        hard = solve(joints, target, pole=pole)
        soft = solve(joints, target, pole=pole, softness=0.1, use_stretch=bool(k % 3), max_stretch=1.4)
        np.testing.assert_array_equal(soft.joints, hard.joints)
        assert soft.error == pytest.approx(hard.error, abs=1e-12) and soft.stretch == 1.0


@pytest.mark.parametrize("bones", [2, 3, 5, 10])
@pytest.mark.parametrize("with_pole", [False, True])
def test_soft_zone_tip_follows_the_curve_along_the_target_line(bones, with_pole):
    """Goal: the tip's distance from the root follows the soft curve within 1e-4 of reach, at the
    add-on's default tolerance and pass count (measured: within 1e-12)."""
    rng = np.random.default_rng(160 + bones + 10 * with_pole)
    solve = solve_two_bone if bones == 2 else solve_chain
    for _ in range(60):
        joints = random_chain(rng, bones, 3)
        reach = lengths_of(joints).sum()
        u = rng.normal(size=3)
        u /= np.linalg.norm(u)
        d = reach * rng.uniform(0.9, 1.6)
        pole = joints[0] + rng.normal(size=3) * reach if with_pole else None
        result = solve(joints, joints[0] + u * d, pole=pole, softness=0.1)
        tip = result.joints[-1] - joints[0]
        assert abs(np.linalg.norm(tip) - eased_distance(d, reach, 0.1)) <= 1e-4 * reach
        assert np.linalg.norm(np.cross(tip / np.linalg.norm(tip), u)) <= 1e-9
        np.testing.assert_allclose(lengths_of(result.joints), lengths_of(joints), rtol=1e-9)
        assert result.error == pytest.approx(d - np.linalg.norm(tip), abs=1e-9)
        assert result.reached == (result.error <= 1e-3)


@pytest.mark.parametrize("bones", [2, 3, 5, 10])
@pytest.mark.parametrize("use_stretch", [False, True])
def test_a_sweep_through_full_reach_does_not_pop(bones, use_stretch):
    """Goal: softness 0.1, the target moving 0.1% of reach per frame through full reach: no joint's bend
    changes more than 1 degree in a frame (hard IK: 5.1 degrees for two bones, 4-8 for FABRIK);
    stretch grows without a jump."""
    start = arc_chain(bones)
    reach = lengths_of(start).sum()
    u = np.array([0.6, 0.7, 0.2]) / np.linalg.norm([0.6, 0.7, 0.2])
    solve = solve_two_bone if bones == 2 else solve_chain
    previous = None
    worst_bend = worst_stretch = 0.0
    for d in np.arange(850, 1401) * 1e-3 * reach:
        result = solve(start, u * d, softness=0.1, use_stretch=use_stretch)
        bend = bends(result.joints)
        if previous is not None:
            worst_bend = max(worst_bend, float(np.abs(bend - previous[0]).max()))
            worst_stretch = max(worst_stretch, abs(result.stretch - previous[1]))
        previous = bend, result.stretch
        if use_stretch and result.stretch < 1.5:
            assert result.error <= 1e-3
    assert math.degrees(worst_bend) <= 1.0
    assert worst_stretch <= 1.01e-3  # the factor's slope is at most 1 per unit of reach
    hard = [bends(solve(start, u * d).joints) for d in (0.999 * reach, reach)]
    # The pop soft IK removes: hard IK unbends the last 0.1% of reach in one step (0.9 degrees a joint
    # for 10 bones curled evenly, 5.1 for two).
    assert math.degrees(np.abs(hard[1] - hard[0]).max()) > 0.5


@pytest.mark.parametrize("bones", [2, 3, 10])
def test_stretch_reaches_and_caps(bones):
    """Goal: at 1.3x reach every bone scales 1.3 (+-1e-4) and the tip is within tolerance; at 2x with
    max_stretch 1.5 the factor is exactly 1.5 and the chain points straight at the target."""
    rng = np.random.default_rng(170 + bones)
    solve = solve_two_bone if bones == 2 else solve_chain
    for k in range(40):
        joints = random_chain(rng, bones, 3)
        reach = lengths_of(joints).sum()
        u = rng.normal(size=3)
        u /= np.linalg.norm(u)
        pole = joints[0] + rng.normal(size=3) if k % 2 else None
        far = solve(joints, joints[0] + 1.3 * reach * u, pole=pole, use_stretch=True)
        assert far.stretch == pytest.approx(1.3, abs=1e-4) and far.reached
        np.testing.assert_allclose(lengths_of(far.joints) / lengths_of(joints), 1.3, atol=1e-4)
        capped = solve(joints, joints[0] + 2.0 * reach * u, pole=pole, use_stretch=True, max_stretch=1.5)
        assert capped.stretch == 1.5 and not capped.reached
        np.testing.assert_allclose(lengths_of(capped.joints) / lengths_of(joints), 1.5, rtol=1e-12)
        np.testing.assert_allclose(capped.joints[1:] - joints[0],
                                   np.cumsum(1.5 * lengths_of(joints))[:, None] * u, atol=1e-9 * reach)
        assert capped.error == pytest.approx(0.5 * reach, rel=1e-9)
        inside = solve(joints, joints[0] + 0.7 * reach * u, pole=pole, use_stretch=True)
        assert inside.stretch == 1.0


def test_soft_and_stretch_together_reach_until_the_cap():
    joints = arc_chain(4)
    reach = lengths_of(joints).sum()
    u = np.array([0.0, 0.0, 1.0])
    for d in np.linspace(0.95, 1.4, 10) * reach:
        result = solve_chain(joints, u * d, softness=0.2, use_stretch=True, max_stretch=1.5)
        assert result.stretch == pytest.approx(d / eased_distance(d, reach, 0.2), rel=1e-12)
        assert result.reached
    result = solve_chain(joints, u * 3.0 * reach, softness=0.2, use_stretch=True, max_stretch=1.5)
    # Past the cap the chain keeps the soft curve's bend, 1.5 times as long: short of the target.
    assert result.stretch == 1.5
    assert np.linalg.norm(result.joints[-1]) == pytest.approx(1.5 * eased_distance(3.0 * reach, reach, 0.2))


@pytest.mark.parametrize("n", [2, 3, 10])
def test_batch_equals_single_with_per_chain_options(n):
    rng = np.random.default_rng(180 + n)
    count = 40
    joints = np.stack([random_chain(rng, n, 3) for _ in range(count)])
    reach = lengths_of(joints).sum(axis=1)
    u = rng.normal(size=(count, 3))
    u /= np.linalg.norm(u, axis=1)[:, None]
    targets = joints[:, 0] + u * (reach * rng.uniform(0.5, 2.0, count))[:, None]
    softness = rng.choice([0.0, 0.05, 0.3], count)
    use_stretch = rng.random(count) < 0.5
    max_stretch = rng.uniform(1.0, 1.8, count)
    poles = rng.uniform(-3, 3, (count, 3))
    for many in (count, 3):  # the numpy loop and the one-by-one float loop
        batch = solve_chains(joints[:many], targets[:many], poles=poles[:many], softness=softness[:many],
                             use_stretch=use_stretch[:many], max_stretch=max_stretch[:many])
        for c in range(many):
            single = solve_chain(joints[c], targets[c], pole=poles[c], softness=float(softness[c]),
                                 use_stretch=bool(use_stretch[c]), max_stretch=float(max_stretch[c]))
            np.testing.assert_allclose(batch.joints[c], single.joints, atol=1e-9)
            assert batch[c].stretch == pytest.approx(single.stretch, abs=1e-12)
            assert batch[c].error == pytest.approx(single.error, abs=1e-9)
            assert batch[c].reached == single.reached
    same = solve_chains(joints, targets, softness=0.1, use_stretch=True)
    for c in range(3):
        single = solve_chain(joints[c], targets[c], softness=0.1, use_stretch=True)
        np.testing.assert_allclose(same.joints[c], single.joints, atol=1e-9)


@pytest.mark.parametrize("bones", [1, 3, 8])
def test_float_entry_points_equal_the_numpy_ones(bones):
    rng = np.random.default_rng(190 + bones)
    for k in range(100):
        joints = random_chain(rng, bones, 3)
        reach = lengths_of(joints).sum()
        u = rng.normal(size=3)
        target = joints[0] + u / np.linalg.norm(u) * reach * rng.uniform(0.5, 1.8)
        pole = tuple(rng.normal(size=3)) if k % 2 else None
        options = {"softness": float(rng.choice([0.0, 0.1, 0.5])), "use_stretch": bool(k % 3),
                   "max_stretch": 1.3}
        expected = solve_chain(joints, target, pole=pole, **options)
        points, error, _ = solve_points(joints.tolist(), tuple(target), pole, **options)
        np.testing.assert_allclose(np.array(points), expected.joints, atol=1e-9)
        assert error == pytest.approx(expected.error, abs=1e-9)
        if bones == 1:
            continue
    rng = np.random.default_rng(199)
    for k in range(200):
        joints = random_chain(rng, 2, 3)
        l1, l2 = lengths_of(joints)
        u = rng.normal(size=3)
        target = joints[0] + u / np.linalg.norm(u) * (l1 + l2) * rng.uniform(0.5, 1.8)
        pole = tuple(rng.normal(size=3)) if k % 2 else None
        options = {"softness": 0.2, "use_stretch": bool(k % 3), "max_stretch": 1.4}
        expected = solve_two_bone(joints, target, pole=pole, **options)
        points = two_bone_points(joints.tolist(), tuple(target), pole, l1, l2, **options)
        np.testing.assert_allclose(np.array(points), expected.joints, atol=1e-9)


@pytest.mark.parametrize("bones", [2, 3, 7])
def test_settle_chains_equals_settle_points_row_by_row(bones):
    """The float settle (one chain) and its numpy twin (many chains) put every tip on its target the same
    way, including chains they leave as they are (a target on the root)."""
    rng = np.random.default_rng(90 + bones)
    joints = np.stack([arc_chain(bones, curve) for curve in rng.uniform(0.05, 0.6, 24)])
    joints += rng.normal(scale=0.01, size=joints.shape) * (np.arange(bones + 1) > 0)[None, :, None]
    reach = lengths_of(joints[0]).sum()
    targets = joints[:, -1] * rng.uniform(0.97, 1.003, (24, 1))  # around full extension: the soft zone
    targets[0] = joints[0, 0]  # nothing to settle toward
    batch = settle_chains(joints, targets)
    moved = 0
    for c in range(len(joints)):
        single = np.array(settle_points(joints[c].tolist(), targets[c].tolist()))
        np.testing.assert_allclose(batch[c], single, atol=1e-12 * reach)
        moved += not np.array_equal(single, joints[c])
    assert moved >= 12  # most chains really were settled, not returned as they were


def test_limits_are_kept_with_soft_and_stretch():
    rng = np.random.default_rng(200)
    for _ in range(20):
        rest = random_rest_chain(rng, 5)
        cones = random_cones(rng, 5)
        reach = lengths_of(rest).sum()
        u = rng.normal(size=3)
        target = u / np.linalg.norm(u) * reach * rng.uniform(0.9, 1.5)
        result = solve_chain(rest, target, limits=cones, softness=0.1, use_stretch=True, max_stretch=1.2)
        assert resolve_limits(cones, rest).violations(result.joints).max() <= 1e-9
        np.testing.assert_allclose(lengths_of(result.joints) / lengths_of(rest), result.stretch, rtol=1e-9)


def test_tree_stretches_only_each_arm_and_softens_per_effector():
    rng = np.random.default_rng(210)
    joints, parents, effectors = torso(rng)
    rest = np.linalg.norm(joints[1:] - joints[np.array(parents[1:])], axis=1)
    # Hands pulled far out sideways: the arms (not the spine, not the rigid shoulder offsets) grow.
    targets = np.array([[1.8, 0.0, 1.2], [-1.8, 0.0, 1.2]])
    result = solve_tree(joints, parents, effectors, targets, rigid=[2], use_stretch=True, max_stretch=2.0,
                        tolerance=1e-3, max_iterations=200)
    grown = np.linalg.norm(result.joints[1:] - result.joints[np.array(parents[1:])], axis=1) / rest
    np.testing.assert_allclose(grown, result.bone_stretch[1:], rtol=1e-9)
    np.testing.assert_array_equal(result.bone_stretch[[1, 2, 3, 6]], 1.0)  # spine and shoulder offsets
    assert (result.stretch > 1.2).all()
    np.testing.assert_array_equal(result.bone_stretch[[4, 5]], result.stretch[0])
    assert result.reached.all()
    # Softness alone: each hand stops short of a target at full reach along its own path.
    soft = solve_tree(joints, parents, effectors, targets, rigid=[2], softness=[0.2, 0.0], max_iterations=200)
    np.testing.assert_array_equal(soft.stretch, 1.0)
    assert soft.errors[0] > soft.errors[1] > 0.0
    hard = solve_tree(joints, parents, effectors, targets * 0.3, rigid=[2])
    same = solve_tree(joints, parents, effectors, targets * 0.3, rigid=[2], softness=0.05)
    np.testing.assert_array_equal(same.joints, hard.joints)


@pytest.mark.parametrize("options, message", [
    ({"softness": -0.1}, "softness"),
    ({"softness": 0.6}, "softness"),
    ({"softness": float("nan")}, "softness"),
    ({"max_stretch": 0.9}, "max_stretch"),
    ({"max_stretch": float("inf")}, "max_stretch"),
    ({"use_stretch": "yes"}, "use_stretch"),
])
def test_bad_options_raise_naming_them(options, message):
    joints = arc_chain(3)
    with pytest.raises(ValueError, match=message):
        solve_chain(joints, [0.0, 2.0, 0.0], **options)
    with pytest.raises(ValueError, match=message):
        solve_two_bone(arc_chain(2), [0.0, 2.0, 0.0], **options)
    with pytest.raises(ValueError, match=message):
        solve_points(joints.tolist(), (0.0, 2.0, 0.0), **options)
    with pytest.raises(ValueError, match=message):
        solve_chains(joints[None], [[0.0, 2.0, 0.0]], **options)


def test_batch_option_arrays_must_match_the_chain_count():
    joints = np.stack([arc_chain(3)] * 3)
    with pytest.raises(ValueError, match=r"softness must be a number or have shape \(3,\)"):
        solve_chains(joints, np.zeros((3, 3)), softness=[0.1, 0.2])
    with pytest.raises(ValueError, match="use_stretch"):
        solve_chains(joints, np.zeros((3, 3)), use_stretch=[1, 0, 1])
    with pytest.raises(ValueError, match="max_stretch"):
        solve_chains(joints, np.zeros((3, 3)), max_stretch=[1.5, 0.5, 2.0])
