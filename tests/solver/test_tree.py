"""solve_tree: chains that share bones, solved together with sub-base centroids."""

import warnings

import numpy as np
import pytest

from fabrik_addon.solver import ConeLimit, resolve_tree_limits, solve_tree
from fabrik_addon.solver.fabrik import DEFAULT_MIN_IMPROVEMENT, run_fabrik
from fabrik_addon.solver.tree import off_plane
from rigkit.chains import lengths_of, random_chain, reachable_target
from rigkit.limited import random_cones
from rigkit.trees import (
    limited_tree_pose,
    path_to,
    random_pose,
    random_y_tree,
    rigid_pose,
    solve_one_after_another,
    torso,
)


def lengths(joints, parents):
    return np.linalg.norm(joints[1:] - joints[np.array(parents[1:])], axis=1)


@pytest.mark.parametrize("make", [random_y_tree, torso])
def test_jointly_reachable_targets_are_both_reached_unlike_one_chain_after_another(make):
    """Goal: >= 95% of target pairs from forward kinematics both reached. Measured 100% over 300 draws
    each for Y trees and torsos, against 8% and 4% when each chain is solved alone in turn."""
    rng = np.random.default_rng(51)
    trials, both, sequential = 150, 0, 0
    for _ in range(trials):
        joints, parents, effectors = make(rng)
        targets = random_pose(rng, joints, parents)[effectors]
        tolerance = 1e-3 * lengths(joints, parents).sum()
        result = solve_tree(joints, parents, effectors, targets, tolerance=tolerance, max_iterations=200)
        np.testing.assert_allclose(lengths(result.joints, parents), lengths(joints, parents), rtol=1e-9)
        np.testing.assert_array_equal(result.joints[0], joints[0])
        assert np.isfinite(result.joints).all()
        both += bool(result.reached.all())
        alone = solve_one_after_another(joints, parents, effectors, targets, tolerance, 200)
        sequential += all(np.linalg.norm(alone[e] - t) <= tolerance for e, t in zip(effectors, targets))
    assert both >= 0.95 * trials
    assert sequential < both


def test_rigid_shoulders_turn_together_and_both_hands_reach():
    """Shoulders offset from the spine top are points on one bone. Measured 99.5% of 200 jointly
    reachable pairs within 100 iterations (95.5% within 30)."""
    rng = np.random.default_rng(60)
    trials, both = 100, 0
    for _ in range(trials):
        joints, parents, effectors = torso(rng)
        targets = rigid_pose(rng, joints, parents, {2})[effectors]
        tolerance = 1e-3 * lengths(joints, parents).sum()
        result = solve_tree(joints, parents, effectors, targets, rigid=[2], tolerance=tolerance,
                            max_iterations=100)
        shoulders = [j for j in range(len(parents)) if parents[j] == 2]
        np.testing.assert_allclose(np.linalg.norm(result.joints[shoulders[0]] - result.joints[shoulders[1]]),
                                   np.linalg.norm(joints[shoulders[0]] - joints[shoulders[1]]), rtol=1e-9)
        np.testing.assert_allclose(lengths(result.joints, parents), lengths(joints, parents), rtol=1e-9)
        both += bool(result.reached.all())
    assert both >= 0.95 * trials


def test_trees_with_limits_never_break_them():
    rng = np.random.default_rng(82)
    for _ in range(60):
        joints, parents, effectors = random_y_tree(rng)
        limits = [None, *random_cones(rng, len(joints) - 1)]
        pole = np.array([rng.uniform(-3, 3, 3), [np.nan] * 3]) if rng.random() < 0.5 else None
        result = solve_tree(joints, parents, effectors, rng.uniform(-3, 3, (2, 3)), limits=limits, poles=pole,
                            max_iterations=100)
        assert np.isfinite(result.joints).all()
        excess = resolve_tree_limits(limits, joints, parents).violations(result.joints, np.array(parents))
        assert excess.max() <= 1e-6
        np.testing.assert_allclose(lengths(result.joints, parents), lengths(joints, parents), rtol=1e-9)


def test_limit_respecting_target_pairs_are_mostly_reached():
    """Pairs from forward kinematics of poses inside random 20-90 degree cones. Measured 150 of 150 on this
    seed, 599 of 600 on seeds 81-86 (one start 50%, limits in the tip-to-root pass too 50% from 35%, aimed
    restarts 81-86%, the swing fit of the trees the passes leave short: solver/tree_fit.py)."""
    rng = np.random.default_rng(81)
    trials, both = 60, 0
    for _ in range(trials):
        joints, parents, effectors = random_y_tree(rng)
        limits = [None, *random_cones(rng, len(joints) - 1)]
        targets = limited_tree_pose(rng, joints, parents, resolve_tree_limits(limits, joints, parents))[effectors]
        tolerance = 1e-3 * lengths(joints, parents).sum()
        both += bool(solve_tree(joints, parents, effectors, targets, limits=limits, tolerance=tolerance,
                                max_iterations=100).reached.all())
    assert both == trials


def test_limits_on_children_of_a_rigid_joint_are_refused():
    joints, parents, effectors = torso(np.random.default_rng(83))
    limits = [None] * len(joints)
    limits[3] = ConeLimit(0.5, 0.5, 0.5, 0.5)  # a shoulder: a child of the rigid spine top (joint 2)
    with pytest.raises(ValueError, match="rigid joint 2"):
        solve_tree(joints, parents, effectors, joints[effectors], rigid=[2], limits=limits)


def test_weight_zero_reproduces_the_single_chain_solve_of_the_other_effector():
    rng = np.random.default_rng(52)
    for _ in range(100):
        joints, parents, effectors = random_y_tree(rng)
        path = path_to(parents, effectors[0])
        targets = np.stack([reachable_target(rng, joints[path]), rng.uniform(-3, 3, 3)])
        tree = solve_tree(joints, parents, effectors, targets, weights=[1.0, 0.0], tolerance=1e-9,
                          max_iterations=100)
        out, iterations = chain_loop(joints[path], targets[0])
        np.testing.assert_allclose(tree.joints[path], out, atol=1e-12)
        assert tree.iterations == iterations


def chain_loop(start: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, int]:
    """The single-chain FABRIK loop run from ``start`` itself (tolerance 1e-9, below the loop's own settling
    distance, and 100 iterations). Trees iterate from the pose without IK; :func:`solve_chain` from a
    curled start (solver/start.py)."""
    lengths = lengths_of(start)
    unreachable = np.linalg.norm(target - start[0]) >= lengths.sum()
    out, _, iterations = run_fabrik(start, target, None, np.diff(start, axis=0) / lengths[:, None], lengths,
                                    bool(unreachable), 1e-9, 100, DEFAULT_MIN_IMPROVEMENT, None)
    return out, iterations


def test_unreachable_pairs_settle_on_a_weighted_compromise():
    joints, parents, effectors = torso(np.random.default_rng(53))
    far = np.array([[5.0, 0.0, 1.0], [-5.0, 0.0, 1.0]])  # both far out to the sides
    even = solve_tree(joints, parents, effectors, far)
    leaning = solve_tree(joints, parents, effectors, far, weights=[1.0, 0.2])
    for result in (even, leaning):
        assert np.isfinite(result.joints).all()
        assert not result.reached.any()
    # The spine top leans toward the heavier effector's side.
    assert leaning.joints[2, 0] > even.joints[2, 0]


def test_pole_bends_its_own_branch():
    """The branch from the sub-base to the effector bends toward its pole, whichever side it is on."""
    rng = np.random.default_rng(54)
    for _ in range(30):
        joints, parents, effectors = random_y_tree(rng)
        targets = random_pose(rng, joints, parents)[effectors]
        branch = path_to(parents, effectors[0])
        fork = max(j for j in branch if sum(p == j for p in parents) > 1)
        branch = branch[branch.index(fork):]
        if len(branch) < 3:
            continue
        for side in (1.0, -1.0):
            pole = np.array([[0.0, side * 5.0, 2.0], [np.nan, np.nan, np.nan]])
            j = solve_tree(joints, parents, effectors, targets, poles=pole, max_iterations=200).joints
            base, tip = j[branch[0]], j[branch[-1]]
            axis = (tip - base) / np.linalg.norm(tip - base)
            bend = j[branch[1:-1]].mean(axis=0) - base
            bend -= (bend @ axis) * axis
            toward = pole[0] - base - ((pole[0] - base) @ axis) * axis
            assert bend @ toward >= -1e-9


def test_chain_as_a_tree_equals_solve_chain():
    rng = np.random.default_rng(56)
    for _ in range(50):
        joints = random_chain(rng, 5, 3)
        target = reachable_target(rng, joints)
        tree = solve_tree(joints, [-1, 0, 1, 2, 3, 4], [5], [target], tolerance=1e-9, max_iterations=100)
        np.testing.assert_allclose(tree.joints, chain_loop(joints, target)[0], atol=1e-12)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"parents": [0, 0, 1]}, "only root"),
    ({"parents": [-1, 2, 0]}, "come before"),
    ({"effectors": [0]}, "other than the root"),
    ({"effectors": [2, 2]}, "distinct"),
    ({"weights": [1.5]}, "weights"),
    ({"targets": [[np.nan, 0, 0]]}, "targets contains NaN"),
])
def test_bad_trees_raise_value_error(kwargs, message):
    args = {"joints": [[0, 0, 0], [0, 0, 1], [0, 0, 2]], "parents": [-1, 0, 1], "effectors": [2],
            "targets": [[1, 0, 1]]}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        solve_tree(args.pop("joints"), args.pop("parents"), args.pop("effectors"), args.pop("targets"), **args)


@pytest.mark.parametrize("make", [random_y_tree, torso])
def test_a_tree_cut_short_by_its_iterations_says_it_did_not_converge(make):
    """Reachable targets (forward kinematics of the tree itself) with one pass allowed: the solve is
    still closing in, so it has not converged; with enough passes it reaches and has converged. (Forks
    the one pass leaves within 1% of the length are finished by the settle onto the nearest pose and
    reached: 17 of these 30 Ys, 7 torsos.)"""
    rng = np.random.default_rng(23)
    cut = 0
    for _ in range(30):
        joints, parents, effectors = make(rng)
        targets = random_pose(rng, joints, parents)[effectors]
        tolerance = 1e-6 * lengths(joints, parents).sum()
        short = solve_tree(joints, parents, effectors, targets, tolerance=tolerance, max_iterations=1)
        if not short.reached.all():
            assert not short.converged
            assert short.iterations == 1
            cut += 1
        full = solve_tree(joints, parents, effectors, targets, tolerance=tolerance, max_iterations=500)
        assert full.converged == (full.reached.all() or full.iterations < 500)
    assert cut >= 10


def test_a_tree_that_stalls_short_of_an_unreachable_target_has_converged():
    """Out of reach: the passes stop bringing the effectors closer, which is settling, not running out."""
    rng = np.random.default_rng(5)
    joints, parents, effectors = random_y_tree(rng)
    far = joints[effectors] + 100.0 * lengths(joints, parents).sum()
    result = solve_tree(joints, parents, effectors, far, tolerance=1e-6, max_iterations=500)
    assert not result.reached.any()
    assert result.converged and result.iterations < 500


def fork(rng: np.random.Generator, branches: int, trunk: int) -> tuple[np.ndarray, list[int], list[int]]:
    """A trunk of ``trunk`` bones up +Z forking into ``branches`` nearly straight branches of 2-3 bones
    (lengths unequal), spread around the trunk: the hard case for sub-base centroids, whose branches reach
    nearly to their full length in every pose near rest."""
    joints, parents = [np.zeros(3)], [-1]
    for _ in range(trunk):
        joints.append(joints[-1] + np.array([0.0, 0.0, rng.uniform(0.6, 1.0)]))
        parents.append(len(joints) - 2)
    top = len(joints) - 1
    effectors = []
    for b in range(branches):
        angle = 2.0 * np.pi * (b + rng.uniform(-0.15, 0.15)) / branches
        out = np.array([np.cos(angle), np.sin(angle), 1.1])
        previous = top
        for _ in range(int(rng.integers(2, 4))):
            step = out / np.linalg.norm(out) * rng.uniform(0.4, 0.8) + rng.normal(scale=0.03, size=3)
            joints.append(joints[previous] + step)
            parents.append(previous)
            previous = len(joints) - 1
        effectors.append(previous)
    return np.array(joints), parents, effectors


@pytest.mark.parametrize(("branches", "trunk", "misses"), [(2, 1, 0), (2, 3, 0), (3, 1, 0), (3, 2, 0), (4, 1, 0)])
def test_forks_reach_poses_from_their_own_walk_at_default_settings(branches, trunk, misses):
    """Issue 23: reachable targets reached at the default 30 iterations and tolerance 1e-3 of the chain's
    length, with nearly straight branches pulling against each other. Measured over these 40 trees each:
    0 missed (before the passes were extrapolated: 7, 5, 21, 20 and 28; with four branches, before the
    least-turn settle: 2, on a compromise of the sub-base centroids that more passes do not leave)."""
    rng = np.random.default_rng(100 + 10 * branches + trunk)
    missed = 0
    for _ in range(40):
        joints, parents, effectors = fork(rng, branches, trunk)
        targets = random_pose(rng, joints, parents, spread=0.15)[effectors]
        length = max(lengths(joints[path_to(parents, e)], [-1] + list(range(len(path_to(parents, e)) - 1))).sum()
                     for e in effectors)
        result = solve_tree(joints, parents, effectors, targets, tolerance=1e-3 * length)
        missed += not result.reached.all()
        assert result.iterations <= 30
        np.testing.assert_allclose(lengths(result.joints, parents), lengths(joints, parents), rtol=1e-9)
    assert missed <= misses


def test_a_one_bone_branch_is_never_off_its_poles_plane_and_raises_no_numpy_warning():
    """One bone has no bend for :func:`off_plane` to measure (it read the mean of no joints: numpy's "Mean of
    empty slice", seen in the Blender property fuzz, where a one-bone pole branch was checked)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert off_plane(np.array([[0.0, 0, 0], [0, 1, 0]]), np.array([0, 1.0, 0]), np.array([1.0, 0, 0])) == 0.0
        # Two bones still measure their bend: an elbow 90 degrees off the pole's side.
        joints = np.array([[0.0, 0, 0], [0, 0, 0.5], [1, 0, 0]])
        assert off_plane(joints, joints[-1], np.array([0.5, 1.0, 0])) == pytest.approx(90.0)
