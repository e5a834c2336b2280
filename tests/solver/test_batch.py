"""solve_chains: many chains at once equal each chain solved alone."""

import numpy as np
import pytest

from fabrik_addon.solver import solve_chain, solve_chains
from rigkit.chains import random_chain, reachable_target


@pytest.mark.parametrize("n", [1, 2, 3, 10, 30])
@pytest.mark.parametrize("with_poles", [False, True])
def test_batch_equals_single_solves(n, with_poles):
    rng = np.random.default_rng(20 + n)
    count = 60
    joints = np.stack([random_chain(rng, n, 3) for _ in range(count)])
    targets = np.stack([reachable_target(rng, j) for j in joints])
    # Mix in unreachable targets, targets at the root and targets already reached.
    targets[:5] = joints[:5, 0] + 100.0
    targets[5:8] = joints[5:8, 0]
    targets[8:10] = joints[8:10, -1]
    poles = rng.uniform(-5, 5, (count, 3)) if with_poles else None
    batch = solve_chains(joints, targets, tolerance=1e-4, max_iterations=50, poles=poles)
    assert len(batch) == count
    for c in range(count):
        single = solve_chain(joints[c], targets[c], tolerance=1e-4, max_iterations=50,
                             pole=None if poles is None else poles[c])
        np.testing.assert_allclose(batch.joints[c], single.joints, atol=1e-9)
        assert batch[c].iterations == single.iterations
        assert batch[c].reached == single.reached
        assert batch.error[c] == pytest.approx(single.error, abs=1e-9)


def test_batch_never_mutates_input_and_rejects_bad_shapes():
    rng = np.random.default_rng(21)
    joints = np.stack([random_chain(rng, 4, 3) for _ in range(3)])
    keep = joints.copy()
    solve_chains(joints, joints[:, -1] + 0.3)
    np.testing.assert_array_equal(joints, keep)
    with pytest.raises(ValueError, match=r"targets must have shape \(3, 3\)"):
        solve_chains(joints, np.zeros((2, 3)))
    with pytest.raises(ValueError, match="bone 2 in chain 1 has zero length"):
        bad = joints.copy()
        bad[1, 3] = bad[1, 2]
        solve_chains(bad, np.zeros((3, 3)))


@pytest.mark.parametrize("count", [3, 40])  # below and above the plain-float loop's crossover
def test_a_tolerance_per_chain_equals_each_chain_solved_with_its_own(count):
    rng = np.random.default_rng(22 + count)
    joints = np.stack([random_chain(rng, 4, 3) for _ in range(count)])
    targets = np.stack([reachable_target(rng, j) for j in joints])
    tolerances = 10.0 ** rng.uniform(-6, -1, count)
    batch = solve_chains(joints, targets, tolerance=tolerances, max_iterations=40)
    for c in range(count):
        single = solve_chain(joints[c], targets[c], tolerance=tolerances[c], max_iterations=40)
        np.testing.assert_allclose(batch.joints[c], single.joints, atol=1e-9)
        assert batch[c].iterations == single.iterations
        assert batch[c].reached == single.reached


def test_a_tolerance_per_chain_is_checked():
    rng = np.random.default_rng(23)
    joints = np.stack([random_chain(rng, 3, 3) for _ in range(3)])
    with pytest.raises(ValueError, match=r"tolerance must be a number or of shape \(3,\)"):
        solve_chains(joints, joints[:, -1], tolerance=[1e-3, 1e-3])
    with pytest.raises(ValueError, match="tolerance must be a finite number >= 0"):
        solve_chains(joints, joints[:, -1], tolerance=[1e-3, -1.0, 1e-3])
    with pytest.raises(ValueError, match="tolerance must be a finite number >= 0"):
        solve_chains(joints, joints[:, -1], tolerance=[1e-3, np.nan, 1e-3])
