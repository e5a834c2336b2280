"""Near full reach (issue 23): past the curl's peak the curled start straightens (solver/start.py), so every
target up to full reach is reached by the start itself, continuously, with a bend that keeps one direction
all the way to straight (the side a straight chain rolls to: start.straight_side); the batched start
(solver/start_batch.py) is the single-chain one there too."""

import math

import numpy as np
import pytest

from fabrik_addon.solver import start
from fabrik_addon.solver.fabrik import solve_points
from fabrik_addon.solver.start import curled_start, straight_side
from fabrik_addon.solver.start_batch import curled_starts
from rigkit.chains import random_chain

# The Rigify metarig's left index finger at rest (armature space): three bones, not in one plane.
FINGER = [(0.746399998664856, 0.005100000184029341, 1.2482000589370728),
          (0.7717999815940857, 0.0013000000035390258, 1.2111999988555908),
          (0.7839999794960022, -0.0003000000142492354, 1.1857999563217163),
          (0.7892000079154968, 0.0006000000284984708, 1.163599967956543)]


def _lengths(joints: np.ndarray) -> np.ndarray:
    return np.linalg.norm(np.diff(joints, axis=0), axis=1)


def _peak(joints: np.ndarray) -> float:
    """How far from the root the curl alone brings the tip, at most."""
    pose = tuple(tuple(joints[:, i].tolist()) for i in range(3)) + (tuple(_lengths(joints).tolist()),)
    shape = start._shape(*pose, None)
    return math.hypot(shape.p, abs(start._horner_sum(shape.across, start._peak(shape))))


def _bend(points: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """The interior joints' mean offset from the root, across ``axis``."""
    m = points[1:-1].mean(axis=0) - points[0]
    return m - (m @ axis) * axis


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def _non_planar_chains(seed: int, count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [random_chain(rng, int(rng.integers(3, 11)), 3) for _ in range(count)]


def test_the_finger_cannot_curl_straight_and_reaches_every_target_up_to_full_reach_without_passes():
    joints = np.array(FINGER)
    length = float(_lengths(joints).sum())
    axis = _unit(joints[-1] - joints[0])
    assert _peak(joints) < length * (1.0 - 1e-4)  # the case FABRIK used to crawl in
    for gap in (3e-3, 1e-3, 3e-4, 1e-4, 3e-5, 1e-6, 1e-8):
        target = joints[0] + (1.0 - gap) * length * axis
        points, error, iterations = solve_points(joints.tolist(), target.tolist(), tolerance=1e-3 * length,
                                                 max_iterations=30)
        assert error <= 1e-7 * length, gap
        assert iterations == 0, gap  # reached by the start itself: no pass whose stopping point moves it


def test_the_finger_bends_one_way_all_the_way_to_straight():
    """The solved bend's direction, the roll the write-back gives the chain, stays within a degree of the
    pose without IK's own bend from 0.3% short of full reach to 1e-8 short (it swung by 118 degrees)."""
    joints = np.array(FINGER)
    length = float(_lengths(joints).sum())
    axis = _unit(joints[-1] - joints[0])
    rest = _unit(_bend(joints, axis))
    for gap in (3e-3, 1e-3, 3e-4, 1e-4, 3e-5, 1e-6, 1e-8):
        points, _, _ = solve_points(joints.tolist(), (joints[0] + (1.0 - gap) * length * axis).tolist(),
                                    tolerance=0.0, max_iterations=30)
        bend = _unit(_bend(np.array(points), axis))
        assert math.degrees(math.acos(min(1.0, bend @ rest))) < 1.0, gap


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_targets_past_the_curls_peak_are_reached_by_the_start(seed):
    for joints in _non_planar_chains(900 + seed, 30):
        lengths = _lengths(joints)
        length = float(lengths.sum())
        peak = _peak(joints)
        rng = np.random.default_rng(seed)
        direction = _unit(rng.normal(size=3))
        for r in np.linspace(peak, length, 7)[1:-1]:
            target = joints[0] + r * direction
            xs, ys, zs = curled_start(joints[:, 0].tolist(), joints[:, 1].tolist(), joints[:, 2].tolist(),
                                      lengths.tolist(), target.tolist(), None)
            tip = np.array([xs[-1], ys[-1], zs[-1]])
            assert np.linalg.norm(tip - target) <= 1e-7 * length
            assert np.allclose(np.linalg.norm(np.diff(np.array([xs, ys, zs]).T, axis=0), axis=1), lengths,
                               rtol=1e-12, atol=1e-12 * length)


@pytest.mark.parametrize("seed", [4, 5])
def test_the_start_is_continuous_as_the_target_moves_out_to_full_reach(seed):
    """Steps of 1e-5 of the length from 2% inside full reach to 1e-6 inside it: no joint moves further than
    the square-root law of straightening allows (a chain near straight bends as the root of the distance
    left), and never by a jump: neighbouring steps move joints by comparable amounts."""
    for joints in _non_planar_chains(950 + seed, 12):
        lengths = _lengths(joints)
        length = float(lengths.sum())
        direction = _unit(joints[-1] - joints[0])
        previous = None
        for r in np.arange(0.98, 1.0 - 1e-6, 1e-5) * length:
            xs, ys, zs = curled_start(joints[:, 0].tolist(), joints[:, 1].tolist(), joints[:, 2].tolist(),
                                      lengths.tolist(), (joints[0] + r * direction).tolist(), None)
            points = np.array([xs, ys, zs]).T
            if previous is not None:
                moved = np.linalg.norm(points - previous, axis=1).max()
                assert moved <= 4.0 * length * math.sqrt(1e-5), r / length
            previous = points


def test_a_straight_chain_rolls_to_where_the_start_straightens():
    """straight_side: the bend of the start just short of full reach, aimed at the target, faces the side
    straight_side gives (turned from its straightening direction onto the target's)."""
    from fabrik_addon.solver.rotations import turn_floats

    rng = np.random.default_rng(12)
    for joints in _non_planar_chains(980, 20) + [np.array(FINGER)]:
        lengths = _lengths(joints)
        length = float(lengths.sum())
        side = straight_side(joints.tolist())
        assert side is not None
        direction = _unit(rng.normal(size=3))
        xs, ys, zs = curled_start(joints[:, 0].tolist(), joints[:, 1].tolist(), joints[:, 2].tolist(),
                                  lengths.tolist(), (joints[0] + (1.0 - 1e-9) * length * direction).tolist(), None)
        bend = _unit(_bend(np.array([xs, ys, zs]).T, direction))
        expected = np.array(turn_floats(*side[:3], *direction.tolist(), *side[3:]))
        assert math.degrees(math.acos(min(1.0, bend @ expected))) < 0.1


@pytest.mark.parametrize("with_pole", [False, True])
def test_curled_starts_near_full_reach_are_the_single_chain_starts(with_pole):
    rng = np.random.default_rng(990 + with_pole)
    for n in (3, 6, 10):
        joints = np.stack([random_chain(rng, n, 3) for _ in range(24)])
        lengths = np.linalg.norm(np.diff(joints, axis=1), axis=2)
        directions = rng.normal(size=(24, 3))
        directions /= np.linalg.norm(directions, axis=1)[:, None]
        reach = lengths.sum(axis=1) * (1.0 - rng.uniform(1e-8, 0.05, 24))
        targets = joints[:, 0] + reach[:, None] * directions
        poles = joints[:, 0] + rng.normal(size=(24, 3)) * 2.0 if with_pole else None
        batch = curled_starts(joints, targets, poles, lengths)
        for c in range(len(joints)):
            xs, ys, zs = curled_start(joints[c, :, 0].tolist(), joints[c, :, 1].tolist(), joints[c, :, 2].tolist(),
                                      lengths[c].tolist(), targets[c].tolist(),
                                      None if poles is None else poles[c].tolist())
            np.testing.assert_allclose(batch[c], np.array([xs, ys, zs]).T, atol=1e-9)
            assert np.linalg.norm(batch[c, -1] - targets[c]) <= 1e-7 * lengths[c].sum()


def _planar_chain(n: int, degrees: float) -> np.ndarray:
    """A planar chain of ``n`` equal bones (2 long), each joint bent by ``degrees`` (as quality_bench's bent_chain)."""
    angles = np.radians(degrees) * np.arange(n)
    steps = 2.0 / n * np.stack([np.zeros(n), np.sin(angles), np.cos(angles)], axis=1)
    return np.concatenate([np.zeros((1, 3)), np.cumsum(steps, axis=0)])


def _start(joints: np.ndarray, target: np.ndarray, pole=None) -> np.ndarray:
    xs, ys, zs = curled_start(joints[:, 0].tolist(), joints[:, 1].tolist(), joints[:, 2].tolist(),
                              _lengths(joints).tolist(), target.tolist(), pole)
    return np.array([xs, ys, zs]).T


def _spread(points: np.ndarray) -> tuple[float, float]:
    """The bones' angles to the root-to-tip line: the largest and their root-mean-square (equal bones)."""
    axis = _unit(points[-1] - points[0])
    d = np.diff(points, axis=0)
    angles = np.arccos(np.clip(d @ axis / np.linalg.norm(d, axis=1), -1.0, 1.0))
    return float(angles.max()), float(np.sqrt(np.mean(angles ** 2)))


@pytest.mark.parametrize("n", [4, 6, 10])
@pytest.mark.parametrize("degrees", [2.0, 15.0])
def test_a_planar_chain_straightens_flattened_with_its_end_bones_near_the_rms(n, degrees):
    """Issue 23: near full reach a planar chain straightens too (start.STRAIGHTEN_NEAR), its bones' angles to the
    root-to-tip line flattened (start.STRAIGHT_SHAPE): the largest at most 1.25x their rms from 1e-4 of the length
    short of full reach on (a uniform curl: sqrt(3 (n-1)/(n+1)) = 1.34-1.57x), every target reached by the
    start, bone lengths kept."""
    joints = _planar_chain(n, degrees)
    length = float(_lengths(joints).sum())
    direction = _unit(np.array([0.0, 1.0, 1.0]))
    uniform = math.sqrt(3.0 * (n - 1) / (n + 1))
    for gap in (1e-4, 3e-5, 1e-5, 1e-6, 1e-8):
        target = joints[0] + (1.0 - gap) * length * direction
        points = _start(joints, target)
        assert np.linalg.norm(points[-1] - target) <= 1e-7 * length, gap
        np.testing.assert_allclose(_lengths(points), _lengths(joints), rtol=1e-12)
        largest, rms = _spread(points)
        assert largest <= 1.25 * rms < uniform * rms, gap
    # Where the straightening starts (15 degrees a joint) or past the band the curl is flattened in short of the
    # pose without IK's tip (2 degrees: start.FLATTEN_BAND), the bend is still the uniform curl's.
    tip = float(np.linalg.norm(joints[-1] - joints[0])) / length
    gap = 0.0049 if 1.0 - tip > 2.0 * start.FLATTEN_FROM else 1.0 - tip + start.FLATTEN_BAND + 1e-4
    largest, rms = _spread(_start(joints, joints[0] + (1.0 - gap) * length * direction))
    assert largest == pytest.approx(uniform * rms, rel=0.03)


@pytest.mark.parametrize("n", [3, 4, 5, 6, 8, 10])
@pytest.mark.parametrize("pole", [None, (0.0, 2.0, 1.0)])
def test_a_nearly_straight_planar_chain_is_flattened_short_of_its_pose_without_iks_tip_too(n, pole):
    """Issue 23: short of the tip of a pose without IK within start.FLATTEN_FROM of full reach, the curl's bones
    are flattened toward the straightening's shape (a target crossing full reach fast can leave its last frame
    inside reach there): the largest angle to the root-to-tip line goes from the uniform curl's at the pose's
    tip, down to at most 1.3x the rms a fifth of the way into the band, and back to the uniform curl's at its
    end; every target reached by the start, bone lengths kept, the batched start the single-chain one."""
    joints = _planar_chain(n, 2.0)
    lengths = _lengths(joints)
    length = float(lengths.sum())
    short = 1.0 - float(np.linalg.norm(joints[-1] - joints[0])) / length  # the pose without IK's tip, short of reach
    assert short < start.FLATTEN_FROM
    direction = _unit(np.array([0.0, 0.6, 1.0]))
    uniform = math.sqrt(3.0 * (n - 1) / (n + 1))
    gaps = short + start.FLATTEN_BAND * np.array([0.0, 0.2, 0.35, 0.5, 0.75, 1.0])
    targets = joints[0] + (1.0 - gaps)[:, None] * length * direction[None]
    ratios = []
    for target in targets:
        points = _start(joints, target, pole)
        assert np.linalg.norm(points[-1] - target) <= 1e-7 * length
        np.testing.assert_allclose(_lengths(points), lengths, rtol=1e-12)
        largest, rms = _spread(points)
        ratios.append(largest / rms)
    if n > 3:  # three bones at -a, 0, a: the flattening keeps the shape
        assert ratios[0] == pytest.approx(uniform, rel=1e-3)
        assert max(ratios[1:4]) <= 1.3 < uniform
    assert ratios[-1] == pytest.approx(uniform, rel=0.01)
    batch = curled_starts(np.repeat(joints[None], len(targets), axis=0), targets,
                          None if pole is None else np.repeat(np.array([pole]), len(targets), axis=0),
                          np.repeat(lengths[None], len(targets), axis=0))
    for c, target in enumerate(targets):
        np.testing.assert_allclose(batch[c], _start(joints, target, pole), atol=1e-9)


def test_a_pose_without_ik_far_from_full_reach_is_not_flattened_short_of_its_tip():
    """The flattening fades out as the pose without IK's tip falls short of full reach by FLATTEN_FROM to twice
    that: a chain bent 15 degrees a joint curls uniformly just short of its tip (as before issue 23's change)."""
    joints = _planar_chain(6, 15.0)
    length = float(_lengths(joints).sum())
    short = 1.0 - float(np.linalg.norm(joints[-1] - joints[0])) / length
    assert short > 2.0 * start.FLATTEN_FROM
    target = joints[0] + (1.0 - short - 0.002) * length * _unit(np.array([0.0, 1.0, 1.0]))
    largest, rms = _spread(_start(joints, target))
    assert largest / rms == pytest.approx(math.sqrt(3.0 * 5 / 7), rel=1e-3)


@pytest.mark.parametrize(("n", "degrees"), [(3, 2.0), (4, 2.0), (6, 2.0), (10, 1.5)])
def test_a_nearly_straight_pose_without_ik_is_kept_for_a_target_at_its_tip(n, degrees):
    """The straightening starts from the pose without IK itself when that is within STRAIGHTEN_NEAR of full
    reach: a target at its tip's distance (any direction) gets that pose, turned rigidly (the IK/FK snap)."""
    joints = _planar_chain(n, degrees)
    lengths = _lengths(joints)
    reach = float(np.linalg.norm(joints[-1] - joints[0]))
    assert reach > (1.0 - start.STRAIGHTEN_NEAR) * lengths.sum()
    for direction in (joints[-1] - joints[0], np.array([0.0, 1.0, 1.0]), np.array([1.0, -0.3, 0.2])):
        points = _start(joints, joints[0] + reach * _unit(direction))
        # the same shape: every joint's distance to every other kept
        inner = np.linalg.norm(points[:, None] - points[None], axis=2)
        np.testing.assert_allclose(inner, np.linalg.norm(joints[:, None] - joints[None], axis=2), atol=1e-9)


@pytest.mark.parametrize("n", [4, 6, 10])
@pytest.mark.parametrize("pole", [None, (0.0, 2.0, 1.0)])
def test_a_planar_chain_is_continuous_as_the_target_crosses_into_the_straightening(n, pole):
    """Steps of 1e-5 of the length from 2% inside full reach (where the curl is uniform) to 1e-6 inside, across
    the tip of the pose without IK and the straightening's start: no joint moves further than the square-root
    law allows, and the batched start is the single-chain one throughout."""
    for degrees in (2.0, 15.0):
        joints = _planar_chain(n, degrees)
        lengths = _lengths(joints)
        length = float(lengths.sum())
        direction = _unit(np.array([0.0, 0.6, 1.0]))
        radii = np.arange(0.98, 1.0 - 1e-6, 1e-5) * length
        targets = joints[0] + radii[:, None] * direction
        previous = None
        for r, target in zip(radii, targets):
            points = _start(joints, target, pole)
            if previous is not None:
                assert np.linalg.norm(points - previous, axis=1).max() <= 4.0 * length * math.sqrt(1e-5), r / length
            previous = points
        sample = targets[::97]
        count = len(sample)
        batch = curled_starts(np.repeat(joints[None], count, axis=0), sample,
                              None if pole is None else np.repeat(np.array([pole]), count, axis=0),
                              np.repeat(lengths[None], count, axis=0))
        for c in range(count):
            np.testing.assert_allclose(batch[c], _start(joints, sample[c], pole), atol=1e-9)
