"""solve_two_bone with joint limits (issue 23): solved as solve_chain solves a limited two-bone chain, so the
pose is continuous in the inputs: start poses that differ by float32 rounding (a rig's rotation modes) give the
same pose. Limited FABRIK from the analytic pose, used before, put a hinged arm's joints up to 1.16 apart in Blender
for such inputs."""

import math

import numpy as np
import pytest

from fabrik_addon.solver import ConeLimit, HingeLimit, solve_chain, solve_two_bone
from rigkit.chains import lengths_of, random_chain

HINGE = HingeLimit(-1.3, 0.8)
CONE = ConeLimit(0.5, 0.5, 0.6, 0.4)
LIMITS = {"hinged": [None, HINGE], "coned": [CONE, CONE], "hinge below a cone": [CONE, HINGE]}


def fold_range(l1: float, l2: float, hinge: HingeLimit) -> tuple[float, float]:
    """The nearest and farthest the tip comes to the root with the hinge inside its range (a straight chain has
    angle 0)."""
    angles = np.linspace(hinge.min_angle, hinge.max_angle, 2001)
    reach = np.sqrt(l1 * l1 + l2 * l2 + 2.0 * l1 * l2 * np.cos(angles))
    return float(reach.min()), float(reach.max())


def cases(rng, limits, count: int):
    """Random 3D two-bone chains and targets at 0.2-1.6 of the chain's length from the root; for a hinged chain,
    not inside the sphere the hinge cannot fold into (there every direction is nearly as near: no pose is
    determined), nor within 5% of its radius."""
    out = []
    while len(out) < count:
        joints = random_chain(rng, 2, 3)
        l1, l2 = lengths_of(joints)
        direction = rng.normal(size=3)
        distance = rng.uniform(0.2, 1.6) * (l1 + l2)
        if any(isinstance(limit, HingeLimit) for limit in limits):
            inner, _ = fold_range(l1, l2, HINGE)
            if distance < 1.05 * inner:
                continue
        out.append((joints, joints[0] + distance * direction / np.linalg.norm(direction)))
    return out


@pytest.mark.parametrize("kind", list(LIMITS))
def test_a_limited_two_bone_chain_is_solved_as_solve_chain_solves_it(kind):
    rng = np.random.default_rng(3)
    for joints, target in cases(rng, LIMITS[kind], 40):
        ours = solve_two_bone(joints, target, limits=LIMITS[kind])
        chain = solve_chain(joints, target, limits=LIMITS[kind])
        np.testing.assert_array_equal(ours.joints, chain.joints)
        assert (ours.error, ours.reached) == (chain.error, chain.reached)


@pytest.mark.parametrize("kind", list(LIMITS))
def test_start_poses_that_differ_by_float32_rounding_give_one_pose(kind):
    """Each start pose and target rounded to float32 and back, and nudged by 1e-7 relative: the solved joints
    within 1e-5 of the chain's length (limited FABRIK from the analytic pose: up to 0.3 on the hinged chains)."""
    rng = np.random.default_rng(17)
    worst = 0.0
    for joints, target in cases(rng, LIMITS[kind], 60):
        length = float(sum(lengths_of(joints)))
        exact = solve_two_bone(joints, target, limits=LIMITS[kind], tolerance=1e-6 * length)
        for _ in range(3):
            nudged = joints.astype(np.float32).astype(float) * (1.0 + 1e-7 * rng.normal(size=joints.shape))
            rounded = solve_two_bone(nudged, target.astype(np.float32).astype(float), limits=LIMITS[kind],
                                     tolerance=1e-6 * length)
            worst = max(worst, float(np.abs(rounded.joints - exact.joints).max()) / length)
    assert worst <= 1e-5, worst


def test_the_hinge_keeps_its_range_and_the_chain_its_lengths():
    rng = np.random.default_rng(5)
    for joints, target in cases(rng, LIMITS["hinged"], 40):
        result = solve_two_bone(joints, target, limits=[None, HINGE])
        np.testing.assert_allclose(lengths_of(result.joints), lengths_of(joints), rtol=1e-9)
        assert math.isfinite(result.error)
