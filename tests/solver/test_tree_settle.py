"""Trees settle onto the pose nearest their start (issue 23): the pose is a function of the targets, not of
how many passes the solve took, and moves continuously with them."""

import numpy as np
import pytest

import fabrik_addon.solver.tree as tree_module
from fabrik_addon.solver import solve_tree
from rigkit.trees import random_pose, random_y_tree, rigid_pose, torso


def lengths(joints, parents):
    return np.linalg.norm(joints[1:] - joints[np.array(parents[1:])], axis=1)


def reachable_case(rng, make=random_y_tree, spread=0.3):
    joints, parents, effectors = make(rng)
    targets = random_pose(rng, joints, parents, spread=spread)[effectors]
    return joints, parents, effectors, targets, 1e-3 * lengths(joints, parents).sum()


def test_a_forks_pose_does_not_depend_on_its_pass_count_or_tolerance():
    """The same targets solved with 30 or 300 passes, tolerance 1e-3 or 1e-5 of the length: one pose, to
    1e-9 of the length (before: the passes stopped where the tolerance met them, a Y's trunk 1e-3 apart)."""
    rng = np.random.default_rng(3)
    for _ in range(40):
        joints, parents, effectors, targets, tolerance = reachable_case(rng)
        a = solve_tree(joints, parents, effectors, targets, tolerance=tolerance, max_iterations=30)
        b = solve_tree(joints, parents, effectors, targets, tolerance=0.01 * tolerance, max_iterations=300)
        if a.reached.all() and b.reached.all():
            assert np.abs(a.joints - b.joints).max() <= 1e-6 * tolerance


@pytest.mark.parametrize("make", [random_y_tree, torso])
def test_the_settled_pose_keeps_lengths_reaches_exactly_and_is_no_farther_from_the_start(make, monkeypatch):
    """Where the least turns do not get there, the passes' pose settled in joint distances: every bone at
    its length, reached effectors on their targets (1e-9 of the length, the passes alone stop within the
    tolerance), and the pose no farther from the start than where the passes stopped (up to the tolerance
    the passes' effectors may sit off their targets)."""
    rng = np.random.default_rng(8)
    cases = [reachable_case(rng, make) for _ in range(30)]
    monkeypatch.setattr(tree_module, "nearest_turns", lambda *args: None)
    settled = [solve_tree(j, p, e, t, tolerance=tol) for j, p, e, t, tol in cases]
    monkeypatch.setattr(tree_module, "nearest_pose", lambda pts, *args: pts)
    passes = [solve_tree(j, p, e, t, tolerance=tol) for j, p, e, t, tol in cases]
    for (joints, parents, effectors, targets, tolerance), a, b in zip(cases, settled, passes):
        np.testing.assert_allclose(lengths(a.joints, parents), lengths(joints, parents), rtol=1e-9)
        if b.reached.all():
            assert np.abs(a.joints[effectors] - targets).max() <= 1e-6 * tolerance
        # The passes' effectors sit anywhere within the tolerance, the settled ones on their targets.
        assert np.linalg.norm(a.joints - joints) <= np.linalg.norm(b.joints - joints) + tolerance * len(joints)


@pytest.mark.parametrize(("make", "rigid"), [(random_y_tree, None), (torso, [2])], ids=["Y", "torso, rigid"])
def test_a_fork_moves_continuously_with_its_targets(make, rigid):
    """Targets moved in 200 steps of 0.1% of the tree's length: no joint moves more than 20 times the
    step (the passes stopping short at a tolerance moved joints by up to the tolerance itself, 1e-3)."""
    rng = np.random.default_rng(12)
    for _ in range(6):
        joints, parents, effectors = make(rng)
        pose = random_pose(rng, joints, parents, spread=0.3) if rigid is None else \
            rigid_pose(rng, joints, parents, set(rigid))
        start_targets = pose[effectors]
        total = lengths(joints, parents).sum()
        drift = rng.normal(size=start_targets.shape)
        drift *= 1e-3 * total / np.linalg.norm(drift, axis=1)[:, None]
        previous, worst = None, 0.0
        for k in range(200):
            targets = start_targets + drift * min(k, 200 - k)  # out and back
            result = solve_tree(joints, parents, effectors, targets, rigid=rigid, tolerance=1e-3 * total)
            if previous is not None and result.reached.all() and previous.reached.all():
                worst = max(worst, float(np.abs(result.joints - previous.joints).max()) / (1e-3 * total))
            previous = result
        assert worst <= 20.0


def test_branches_nearly_at_one_point_keep_the_trunks_roll():
    """A rigid trunk whose two branches leave 0.08 apart: the roll they hold by such short lever arms is
    weighed at the trunk's size, so a smooth target path gives a smooth pose (before: the whole tree spun
    6.4 degrees a frame), and the branch heads keep their spacing."""
    joints = np.array([[0, 0, 0], [0.04, 0, 1.0], [-0.04, 0, 1.0], [0.45, 0.25, 1.5], [-0.45, 0.25, 1.5],
                       [0.9, 0, 2.0], [-0.9, 0, 2.0]], dtype=float)
    parents, effectors = [-1, 0, 0, 1, 2, 3, 4], [5, 6]
    rng = np.random.default_rng(2)
    start = rigid_pose(rng, joints, parents, {0})
    end = rigid_pose(rng, joints, parents, {0})
    previous, worst = None, 0.0
    for s in np.linspace(0.0, 1.0, 101):
        targets = (1.0 - s) * start[effectors] + s * end[effectors]
        result = solve_tree(joints, parents, effectors, targets, rigid=[0], tolerance=1e-3 * 3.7)
        np.testing.assert_allclose(np.linalg.norm(result.joints[1] - result.joints[2]), 0.08, rtol=1e-9)
        if previous is not None:
            step = float(np.abs(targets - previous[1]).max())
            worst = max(worst, float(np.abs(result.joints - previous[0].joints).max()) / step)
        previous = (result, targets)
    assert worst <= 20.0


def turn(axis: np.ndarray, angle: float) -> np.ndarray:
    k = np.cross(np.eye(3), axis / np.linalg.norm(axis))
    return np.eye(3) + np.sin(angle) * k + (1.0 - np.cos(angle)) * k @ k


def walk(rng, joints, parents, rigid: set[int], steps: int, swing: float = 0.27) -> np.ndarray:
    """``(steps, J, 3)``: forward kinematics of a smooth closed walk, every bone (the children of a rigid
    joint together) turning relative to its parent bone by ``swing * sin(t + phase)`` about its own axis."""
    axes = rng.normal(size=(len(joints), 3))
    phases = rng.uniform(0.0, 2.0 * np.pi, len(joints))
    out = []
    for s in range(steps):
        t = 2.0 * np.pi * s / steps
        pose, into = joints.copy(), {0: np.eye(3)}  # world turn of the bone ending at each joint
        for j in range(1, len(joints)):
            p = parents[j]
            bone = p if p in rigid else j  # the children of a rigid joint share its turn
            if bone == p and j != min(c for c in range(1, len(joints)) if parents[c] == p):
                into[j] = into[min(c for c in range(1, len(joints)) if parents[c] == p)]
            else:
                into[j] = into[p] @ turn(axes[bone], swing * np.sin(t + phases[bone]))
            pose[j] = pose[p] + into[j] @ (joints[j] - joints[p])
        out.append(pose)
    return np.array(out)


def largest_direction_turn(a: np.ndarray, b: np.ndarray, parents) -> float:
    """Degrees: the largest turn of any bone's direction between poses a and b."""
    p = np.array(parents[1:])
    u, v = a[1:] - a[p], b[1:] - b[p]
    cos = (u * v).sum(axis=1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
    return float(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))).max())


@pytest.mark.parametrize(("make", "rigid"), [(random_y_tree, None), (torso, [2])], ids=["Y", "torso, rigid"])
def test_a_fork_spreads_its_turn_over_its_bones_as_its_walk_does(make, rigid):
    """Targets from a smooth walk of the tree's own forward kinematics (200 steps): no bone's direction
    turns more in a step than 1.6 times the walk's own largest (measured 0.85-1.51: the least turns spread
    the motion over the bones much as the walk does; before, the pose nearest the start in joint distances
    kept each branch's first bone still and swung its last: 1.7-8.0 times)."""
    rng = np.random.default_rng(5)
    for _ in range(4):
        joints, parents, effectors = make(rng)
        poses = walk(rng, joints, parents, set(rigid or []), 200)
        tolerance = 1e-3 * lengths(joints, parents).sum()
        previous, worst, walked = None, 0.0, 0.0
        for k, pose in enumerate(poses):
            result = solve_tree(joints, parents, effectors, pose[effectors], rigid=rigid, tolerance=tolerance)
            assert result.reached.all()
            if previous is not None:
                worst = max(worst, largest_direction_turn(previous, result.joints, parents))
                walked = max(walked, largest_direction_turn(poses[k - 1], pose, parents))
            previous = result.joints
        assert worst <= 1.6 * walked


@pytest.mark.parametrize(("make", "rigid"), [(random_y_tree, None), (torso, [2])], ids=["Y", "torso, rigid"])
def test_the_least_turns_keep_lengths_and_bodies_and_reach_exactly(make, rigid):
    """Reached effectors on their targets to 1e-9 of the length, every bone at its length and a rigid
    joint's children at their distances from each other, whatever the tolerance."""
    rng = np.random.default_rng(9)
    for _ in range(20):
        joints, parents, effectors = make(rng)
        pose = rigid_pose(rng, joints, parents, set(rigid or [])) if rigid else random_pose(rng, joints, parents, 0.3)
        total = lengths(joints, parents).sum()
        result = solve_tree(joints, parents, effectors, pose[effectors], rigid=rigid, tolerance=1e-3 * total)
        assert result.reached.all()
        assert np.abs(result.joints[effectors] - pose[effectors]).max() <= 1e-9 * total
        np.testing.assert_allclose(lengths(result.joints, parents), lengths(joints, parents), rtol=1e-9)
        for p in rigid or []:
            kids = [j for j in range(len(parents)) if parents[j] == p]
            np.testing.assert_allclose(np.linalg.norm(result.joints[kids[0]] - result.joints[kids[1:]], axis=1),
                                       np.linalg.norm(joints[kids[0]] - joints[kids[1:]], axis=1), rtol=1e-9)


def test_a_forks_pose_turns_with_the_whole_rig():
    """The start pose and the targets turned together about the root give the same pose turned (to 1e-9
    of the length): the pose follows the rig's geometry, not the axes it is measured in."""
    rng = np.random.default_rng(10)
    for _ in range(20):
        joints, parents, effectors, targets, tolerance = reachable_case(rng)
        spin = turn(rng.normal(size=3), rng.uniform(0.5, 3.0))
        a = solve_tree(joints, parents, effectors, targets, tolerance=tolerance)
        b = solve_tree(joints @ spin.T, parents, effectors, targets @ spin.T, tolerance=tolerance)
        assert a.reached.all() and b.reached.all()
        assert np.abs(a.joints @ spin.T - b.joints).max() <= 1e-9 * lengths(joints, parents).sum()
