"""chain_turns: each bone's rotation from its start pose to its solved pose, roll included."""

import numpy as np
import pytest

from fabrik_addon.solver.orient import SIDE_WEIGHT, chain_turns, chains_turns, rest_side
from fabrik_addon.solver.rotations import matrix_from_two_vectors
from rigkit.chains import chain_from, random_chain, random_directions, random_lengths


def random_rotation(rng):
    q = rng.normal(size=4)
    w, x, y, z = q / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def axis_angle(m):
    """Rotation axis (unit, arbitrary for the identity) and angle of a rotation matrix."""
    angle = np.arccos(np.clip((np.trace(m) - 1.0) / 2.0, -1.0, 1.0))
    axis = np.array([m[2, 1] - m[1, 2], m[0, 2] - m[2, 0], m[1, 0] - m[0, 1]])
    norm = np.linalg.norm(axis)
    if norm < 1e-9:  # identity or a half turn
        if angle < 1e-6:
            return np.array([1.0, 0.0, 0.0]), 0.0
        values, vectors = np.linalg.eigh((m + np.eye(3)) / 2.0)
        return vectors[:, np.argmax(values)], angle
    return axis / norm, angle


def planar_chain(rng, n, plane):
    """A chain bent one way in the plane spanned by the columns of ``plane`` (3, 2)."""
    angles = np.cumsum(np.concatenate([[rng.uniform(0, 2 * np.pi)], rng.uniform(0.1, 0.8, n - 1)]))
    dirs = np.stack([np.cos(angles), np.sin(angles)], axis=1) @ plane.T
    return chain_from(rng.uniform(-2, 2, 3), random_lengths(rng, n), dirs)


def directions(joints):
    d = np.diff(joints, axis=0)
    return d / np.linalg.norm(d, axis=1)[:, None]


@pytest.mark.parametrize("n", [1, 2, 3, 6, 12])
def test_turns_are_rotations_that_carry_each_start_direction_onto_the_solved_one(n):
    rng = np.random.default_rng(300 + n)
    for _ in range(100):
        before = random_chain(rng, n, 3)
        after = chain_from(rng.uniform(-2, 2, 3), np.linalg.norm(np.diff(before, axis=0), axis=1),
                           random_directions(rng, n, 3))
        pole = rng.uniform(-4, 4, 3) if rng.random() < 0.5 else None
        turns = chain_turns(before, after, pole)
        np.testing.assert_allclose(turns @ np.swapaxes(turns, 1, 2), np.broadcast_to(np.eye(3), turns.shape),
                                   atol=1e-9)
        np.testing.assert_allclose(np.linalg.det(turns), 1.0, atol=1e-9)
        np.testing.assert_allclose(np.einsum("kij,kj->ki", turns, directions(before)), directions(after), atol=1e-9)


@pytest.mark.parametrize("n", [1, 2, 4, 10])
def test_a_solve_that_moves_nothing_turns_nothing(n):
    rng = np.random.default_rng(310 + n)
    for _ in range(50):
        joints = random_chain(rng, n, 3)
        np.testing.assert_allclose(chain_turns(joints, joints), np.broadcast_to(np.eye(3), (n, 3, 3)), atol=1e-12)
        if n >= 2:  # a pole placed on the chain's own bend, as the add operator places it
            axis = (joints[-1] - joints[0]) / np.linalg.norm(joints[-1] - joints[0])
            bend = joints[1:-1].mean(axis=0) - joints[0]
            bend -= (bend @ axis) * axis
            pole = joints[0] + 0.5 * (joints[-1] - joints[0]) + 2.0 * bend / np.linalg.norm(bend)
            # The side weight pulls the start bend by up to (SIDE_WEIGHT * length / bend)^2 radians.
            length = np.linalg.norm(np.diff(joints, axis=0), axis=1).sum()
            pull = 2.0 * (SIDE_WEIGHT * length / np.linalg.norm(bend)) ** 2
            turns = chain_turns(joints, joints, pole)
            assert np.abs(turns - np.eye(3)).max() <= pull + 1e-12


@pytest.mark.parametrize("n", [2, 3, 7])
def test_a_rigidly_moved_chain_turns_every_bone_by_that_rotation(n):
    rng = np.random.default_rng(320 + n)
    for _ in range(100):
        before = random_chain(rng, n, 3)
        rotation = random_rotation(rng)
        after = rng.uniform(-2, 2, 3) + (before - before[0]) @ rotation.T
        np.testing.assert_allclose(chain_turns(before, after), np.broadcast_to(rotation, (n, 3, 3)), atol=1e-3)


@pytest.mark.parametrize("n", [2, 3, 4, 10])
def test_planar_solves_turn_children_about_the_bend_normal_only(n):
    """Start and solved chains planar: every bone's turn carries the start bend normal onto the solved
    one, so a child's rotation relative to its parent is about that normal (a pure hinge turn)."""
    rng = np.random.default_rng(330 + n)
    for _ in range(100):
        plane = np.linalg.qr(rng.normal(size=(3, 2)))[0]
        before = planar_chain(rng, n, plane)
        lengths = np.linalg.norm(np.diff(before, axis=0), axis=1)
        other = np.linalg.qr(rng.normal(size=(3, 2)))[0]
        after = planar_chain(rng, n, other)
        after = before[0] + np.vstack([np.zeros(3), np.cumsum(lengths[:, None] * directions(after), axis=0)])
        axis = (after[-1] - after[0]) / np.linalg.norm(after[-1] - after[0])
        bend = after[1:-1].mean(axis=0) - after[0]
        pole = after[0] + 3.0 * (bend - (bend @ axis) * axis) + rng.uniform(-1, 1) * axis
        normal_before = np.cross(plane[:, 0], plane[:, 1])
        normal_after = np.cross(other[:, 0], other[:, 1])
        turns = chain_turns(before, after, pole)
        carried = turns @ normal_before
        # Exact but for the side weight's pull (no side given: a perpendicular off the plane).
        assert np.abs(np.abs(carried @ normal_after) - 1.0).max() < 1e-9
        np.testing.assert_allclose(carried, np.broadcast_to(carried[0], carried.shape), atol=1e-6)
        for i in range(1, n):
            relative = turns[i - 1].T @ turns[i]
            np.testing.assert_allclose(relative @ normal_before, normal_before, atol=1e-6)


@pytest.mark.parametrize("n", [3, 5])
def test_the_root_rolls_to_face_the_pole(n):
    """The solved chain's bend plane contains the pole: the start bend normal is carried onto the
    normal of the plane (root, tip, pole), on the pole's side."""
    rng = np.random.default_rng(340 + n)
    for _ in range(100):
        plane = np.linalg.qr(rng.normal(size=(3, 2)))[0]
        before = planar_chain(rng, n, plane)
        rotation = random_rotation(rng)
        after = before[0] + (before - before[0]) @ rotation.T
        axis = (after[-1] - after[0]) / np.linalg.norm(after[-1] - after[0])
        bend = after[1:-1].mean(axis=0) - after[0]
        bend -= (bend @ axis) * axis
        pole = after[0] + 2.0 * bend / np.linalg.norm(bend) + rng.uniform(-1, 1) * axis
        turns = chain_turns(before, after, pole)
        np.testing.assert_allclose(turns, np.broadcast_to(rotation, turns.shape), atol=1e-6)


@pytest.mark.parametrize("n", [2, 3, 6])
def test_non_planar_solves_twist_no_child_relative_to_its_parent(n):
    """Parallel transport: a child's rotation relative to its parent is a pure swing, its axis across
    the child's start direction (no twist about the bone's own axis)."""
    rng = np.random.default_rng(350 + n)
    for _ in range(100):
        before = random_chain(rng, n, 3)
        after = chain_from(before[0], np.linalg.norm(np.diff(before, axis=0), axis=1), random_directions(rng, n, 3))
        turns = chain_turns(before, after)
        d = directions(before)
        for i in range(1, n):
            axis, angle = axis_angle(turns[i - 1].T @ turns[i])
            if 1e-6 < angle < np.pi - 1e-3:
                assert abs(axis @ d[i]) < 1e-9


def test_a_straight_start_rolls_its_side_onto_the_solved_bend():
    """A straight start has no bend: ``side`` says which way it bends, and the root rolls it onto the
    solved bend (so a hinge rig bends about its hinge axis whatever plane the solve picked)."""
    rng = np.random.default_rng(360)
    before = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 2.0]])
    for _ in range(50):
        side = np.array([rng.normal(), rng.normal(), 0.0])
        side /= np.linalg.norm(side)
        plane = np.linalg.qr(rng.normal(size=(3, 2)))[0]
        after = planar_chain(rng, 2, plane)
        after = after - after[0]
        after = np.vstack([np.zeros(3), np.cumsum(directions(after), axis=0)])
        turns = chain_turns(before, after, side=side)
        bend = after[1] - after[0] - ((after[1] - after[0]) @ (after[2] / np.linalg.norm(after[2]))) * (
            after[2] / np.linalg.norm(after[2]))
        hinge = np.cross([0.0, 0.0, 1.0], side)  # the start's bend normal, had it bent to its side
        normal = np.cross(after[2], bend)
        normal /= np.linalg.norm(normal)
        np.testing.assert_allclose(turns @ hinge, np.broadcast_to(normal, (2, 3)), atol=1e-7)


def test_turns_are_continuous_in_the_solved_pose():
    rng = np.random.default_rng(370)
    for _ in range(100):
        before = random_chain(rng, 4, 3)
        after = chain_from(before[0], np.linalg.norm(np.diff(before, axis=0), axis=1), random_directions(rng, 4, 3))
        nudge = rng.normal(size=(4, 3)) * 1e-7
        dirs = directions(after) + nudge
        nudged = chain_from(after[0], np.linalg.norm(np.diff(after, axis=0), axis=1),
                            dirs / np.linalg.norm(dirs, axis=1)[:, None])
        pole = rng.uniform(-4, 4, 3)
        assert np.abs(chain_turns(before, after, pole) - chain_turns(before, nudged, pole)).max() < 1e-4


@pytest.mark.parametrize("n", [1, 2, 3, 8])
def test_one_chain_equals_its_row_of_the_batch(n):
    """The rule in floats and mathutils (rig/roll.py) is held equal to this one in tests/blender/test_roll.py."""
    rng = np.random.default_rng(380 + n)
    count = 40
    before = np.stack([random_chain(rng, n, 3) for _ in range(count)])
    after = np.stack([chain_from(b[0], np.linalg.norm(np.diff(b, axis=0), axis=1), random_directions(rng, n, 3))
                      for b in before])
    poles = rng.uniform(-4, 4, (count, 3))
    poles[::2] = np.nan
    sides = rng.normal(size=(count, 3))
    batch = chains_turns(before, after, poles, sides)
    for c in range(count):
        pole = None if np.isnan(poles[c]).any() else tuple(poles[c])
        np.testing.assert_allclose(chain_turns(before[c], after[c], pole, sides[c]), batch[c], atol=1e-12)


def test_rest_side_is_the_rest_bend_in_the_root_axes():
    straight = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 2.0]])
    np.testing.assert_array_equal(rest_side(straight, np.eye(3)), [0.0, 0.0, 1.0])
    bent = np.array([[0.0, 0.0, 0.0], [0.0, 0.3, 1.0], [0.0, 0.0, 2.0]])
    frame = matrix_from_two_vectors(np.array([0.0, 1.0, 0.0]), bent[1] / np.linalg.norm(bent[1]))
    side = rest_side(bent, frame)
    np.testing.assert_allclose(frame @ side, [0.0, 1.0, 0.0], atol=1e-12)
