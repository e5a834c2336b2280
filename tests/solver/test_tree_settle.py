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
