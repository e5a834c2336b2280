"""Just beyond full reach (issue 23, solver/start.py ``beyond_reach``): a free chain whose target lies less than
``BEYOND_BAND`` of its length beyond full reach keeps its end bones leaning to the side it bends just inside reach
(``beyond_shortening`` of its length short), so the turn of a target crossing full reach splits over the frames
either side; the tip is at most ``BEYOND_SHORTEN`` of the length farther from the target than a
straight chain's; from the band on, the chain lies straight. Every solving path gives the same pose."""

import math

import numpy as np
import pytest

from fabrik_addon.solver import soft
from fabrik_addon.solver.fabrik import solve_chain, solve_points
from fabrik_addon.solver.fabrik_batch import solve_chains
from fabrik_addon.solver.start import (
    BEYOND_BAND,
    BEYOND_FROM,
    BEYOND_HOLD,
    BEYOND_RISE,
    BEYOND_SHORTEN,
    beyond_shortening,
)
from rigkit.chains import random_chain

# The Rigify metarig's left index finger at rest (armature space): three bones, not in one plane.
FINGER = [(0.746399998664856, 0.005100000184029341, 1.2482000589370728),
          (0.7717999815940857, 0.0013000000035390258, 1.2111999988555908),
          (0.7839999794960022, -0.0003000000142492354, 1.1857999563217163),
          (0.7892000079154968, 0.0006000000284984708, 1.163599967956543)]
POLE = (0.0, 2.0, 1.0)


def _planar_chain(n: int, degrees: float) -> np.ndarray:
    """A planar chain of ``n`` equal bones (2 long), each joint bent by ``degrees`` (as quality_bench's bent_chain)."""
    angles = np.radians(degrees) * np.arange(n)
    steps = 2.0 / n * np.stack([np.zeros(n), np.sin(angles), np.cos(angles)], axis=1)
    return np.concatenate([np.zeros((1, 3)), np.cumsum(steps, axis=0)])


def _chains() -> list[tuple[np.ndarray, tuple | None]]:
    """Planar chains of 2-10 bones bent 0 (straight), 2 and 15 degrees a joint, with and without a pole; random
    chains of 3-8 bones; the finger."""
    out: list[tuple[np.ndarray, tuple | None]] = [(_planar_chain(n, degrees), pole) for n in (2, 3, 4, 5, 6, 8, 10)
                                                  for degrees in (0.0, 2.0, 15.0) for pole in (None, POLE)]
    rng = np.random.default_rng(23)
    out += [(np.array(random_chain(rng, int(n), 3)), None) for n in rng.integers(3, 9, size=6)]
    return out + [(np.array(FINGER), None), (np.array(FINGER), (0.9, 0.2, 1.2))]


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def _solve(joints: np.ndarray, target: np.ndarray, pole) -> tuple[np.ndarray, float]:
    points, error, _ = solve_points(joints.tolist(), target.tolist(), pole)
    return np.array(points), error


def _direction(joints: np.ndarray) -> np.ndarray:
    """A target direction well off the chain's own root-to-tip line."""
    return _unit(_unit(joints[-1] - joints[0]) + np.array([0.3, -0.5, 0.2]))


def test_the_shortening_is_continuous_at_most_the_overshoot_and_gone_outside_the_band():
    overshoots = np.linspace(-1e-3, 3e-3, 400_001)  # steps of 1e-8
    sigma = np.array([beyond_shortening(float(e)) for e in overshoots])
    assert np.all(sigma[overshoots <= BEYOND_FROM] == 0.0)
    assert np.all(sigma[overshoots >= BEYOND_BAND] == 0.0)
    inside = (overshoots > BEYOND_FROM) & (overshoots < BEYOND_BAND)
    assert np.all(sigma[inside] > 0.0)
    assert np.all(sigma <= np.minimum(np.maximum(overshoots, 0.0), BEYOND_SHORTEN))
    assert BEYOND_SHORTEN < 1e-5  # the tip beyond reach within 1e-5 of the length of a straight chain's (issue 23)
    assert beyond_shortening(soft.BEYOND) == 0.0 and beyond_shortening(10.0 * soft.BEYOND) == 0.0
    held = (overshoots >= BEYOND_RISE + BEYOND_FROM) & (overshoots <= BEYOND_HOLD)
    assert np.all(sigma[held] == BEYOND_SHORTEN)
    # Float noise just beyond full reach leans nothing visible: the shortening grows as the overshoot squared there.
    rising = (overshoots > 0.0) & (overshoots < BEYOND_RISE)
    assert np.all(sigma[rising] <= BEYOND_SHORTEN * (overshoots[rising] / BEYOND_RISE) ** 2)
    assert beyond_shortening(1e-6) <= 1e-9
    # No jump: a step of the target moves the shortening by at most as much (slope <= 1).
    assert np.abs(np.diff(sigma)).max() <= 1.0000001 * 1e-8


def test_a_chain_just_beyond_reach_keeps_its_lengths_and_its_tip_on_the_target_line_short_by_the_shortening():
    for joints, pole in _chains():
        lengths = np.linalg.norm(np.diff(joints, axis=0), axis=1)
        total = float(lengths.sum())
        direction = _direction(joints)
        for overshoot in (1e-9, 3e-6, 1e-5, 4e-4, 1.2e-3, 1.7e-3, BEYOND_BAND - 1e-6):
            distance = total * (1.0 + overshoot)
            points, error = _solve(joints, joints[0] + distance * direction, pole)
            assert np.all(np.isfinite(points))
            np.testing.assert_allclose(np.linalg.norm(np.diff(points, axis=0), axis=1), lengths, rtol=1e-9)
            tip = points[-1] - points[0]
            assert np.linalg.norm(tip - (tip @ direction) * direction) <= 1e-9 * total  # on the root-target line
            assert tip @ direction > 0.0
            shortening = beyond_shortening(distance / total - 1.0)
            assert abs(tip @ direction - total * (1.0 - shortening)) <= 1e-9 * total, overshoot
            # The tip's distance from the target: a straight chain's plus at most BEYOND_SHORTEN of the length.
            straight = distance - total
            assert straight - 1e-12 * total <= error <= straight + (BEYOND_SHORTEN + 1e-9) * total, overshoot
            assert error <= straight + 1e-5 * total  # issue 23's bound


def test_just_beyond_reach_the_end_bones_lean_either_way_to_the_side_the_chain_bends_just_inside():
    """Beyond full reach within the band, the bones between the first and the last lie along the root-target
    line; the first and last lean across it by one offset, to opposite sides, the first toward where the interior
    joints lie just inside full reach (the side a chain straightening toward the target bends to), by the offset
    that shortens the chain by beyond_shortening."""
    for joints, pole in _chains():
        lengths = np.linalg.norm(np.diff(joints, axis=0), axis=1)
        total = float(lengths.sum())
        direction = _direction(joints)
        near, _ = _solve(joints, joints[0] + total * (1.0 - 1e-4) * direction, pole)
        side = near[1:-1].mean(axis=0) - near[0]
        side = _unit(side - (side @ direction) * direction)
        for overshoot in (2e-5, 1e-4, 3e-4, 1e-3, 1.6e-3, 1.85e-3):
            points, _ = _solve(joints, joints[0] + total * (1.0 + overshoot) * direction, pole)
            offsets = points - points[0]
            across = offsets - (offsets @ direction)[:, None] * direction
            h = float(np.linalg.norm(across[1]))
            lean = across[1] / h
            assert lean @ side > 0.999, overshoot  # toward the side it bends just inside
            np.testing.assert_allclose(across[1:-1], np.repeat(across[1:2], len(lengths) - 1, axis=0),
                                       atol=1e-12 * total)  # the middle bones along the line
            assert np.linalg.norm(across[-1]) <= 1e-12 * total
            first, last = lengths[0], lengths[-1]
            short = (first - math.sqrt(first ** 2 - h * h)) + (last - math.sqrt(last ** 2 - h * h))
            assert short == pytest.approx(beyond_shortening(overshoot) * total, rel=1e-6, abs=1e-14 * total)


def test_from_the_band_on_the_chain_lies_straight_toward_the_target():
    for joints, pole in _chains():
        lengths = np.linalg.norm(np.diff(joints, axis=0), axis=1)
        total = float(lengths.sum())
        direction = _direction(joints)
        for overshoot in (BEYOND_BAND, BEYOND_BAND + 1e-6, 0.01, 0.5):
            distance = total * (1.0 + overshoot)
            points, error = _solve(joints, joints[0] + distance * direction, pole)
            expected = joints[0] + np.concatenate([[0.0], np.cumsum(lengths)])[:, None] * direction
            np.testing.assert_allclose(points, expected, atol=1e-12 * total)
            assert error == pytest.approx(distance - total, abs=1e-12 * total)


@pytest.mark.parametrize("n", [3, 5, 6, 10])
@pytest.mark.parametrize("pole", [None, POLE])
def test_the_pose_is_continuous_as_the_target_crosses_full_reach_and_the_band(n, pole):
    """Steps of 2e-6 of the length from 1e-4 inside full reach to past the band: no joint moves further than the
    square-root law of straightening allows for one step, and the largest move is near full reach, not at the
    band's edges."""
    for degrees in (2.0, 15.0):
        joints = _planar_chain(n, degrees)
        total = float(np.linalg.norm(np.diff(joints, axis=0), axis=1).sum())
        direction = _direction(joints)
        step = 2e-6
        previous, moves = None, []
        radii = np.arange(1.0 - 1e-4, 1.0 + BEYOND_BAND + 1e-4, step)
        for r in radii:
            points, _ = _solve(joints, joints[0] + r * total * direction, pole)
            if previous is not None:
                moves.append(np.linalg.norm(points - previous, axis=1).max())
            previous = points
        moves = np.array(moves)
        assert moves.max() <= 4.0 * total * math.sqrt(step)
        # Beyond full reach the lean rises and eases out: a step moves a joint by about 10 steps' length at most
        # (40-50 just inside full reach).
        beyond = radii[1:] - 1.0 > 0.0
        assert moves[beyond].max() <= 20.0 * step * total
        assert moves[beyond].max() > 0.0  # the band is there


@pytest.mark.parametrize("with_pole", [False, True])
def test_every_solving_path_gives_the_same_pose_beyond_reach(with_pole):
    """solve_points (the few-chain path), solve_chain and solve_chains, scalar (few chains) and vectorised (many),
    on chains inside, just beyond and far beyond full reach."""
    rng = np.random.default_rng(7)
    for n in (3, 5, 8):
        joints = _planar_chain(n, 2.0)
        total = float(np.linalg.norm(np.diff(joints, axis=0), axis=1).sum())
        overshoots = np.concatenate([[-1e-3, 5e-6, 1e-3, 1.5e-3, 0.01], rng.uniform(-1e-4, 2.5e-3, size=15)])
        directions = np.array([_unit(d) for d in rng.normal(size=(len(overshoots), 3)) + [0.0, 0.0, 2.0]])
        targets = joints[0] + (1.0 + overshoots)[:, None] * total * directions
        poles = np.repeat(np.array([POLE]), len(targets), axis=0) if with_pole else None
        many = solve_chains(np.repeat(joints[None], len(targets), axis=0), targets, poles=poles)
        few = solve_chains(np.repeat(joints[None], 2, axis=0), targets[:2], poles=None if poles is None else poles[:2])
        for c, target in enumerate(targets):
            pole = POLE if with_pole else None
            points, error = _solve(joints, target, pole)
            one = solve_chain(joints, target, pole=pole)
            np.testing.assert_allclose(many.joints[c], points, atol=1e-9 * total)
            np.testing.assert_allclose(one.joints, points, atol=1e-9 * total)
            assert many.error[c] == pytest.approx(error, abs=1e-9 * total)
            assert one.reached == bool(many.reached[c])
            if c < 2:
                np.testing.assert_allclose(few.joints[c], points, atol=1e-9 * total)


@pytest.mark.parametrize("softness", [0.0, 0.1])
def test_a_stretched_or_soft_chain_at_full_extension_lies_straight_toward_the_target(softness):
    """Stretch (and soft IK, past the stretch cap) move a target at full extension 1e-12 beyond the (stretched)
    reach to mean "straight": the chain lies straight toward it, as before the end bones leaned beyond reach."""
    joints = _planar_chain(5, 2.0)
    lengths = np.linalg.norm(np.diff(joints, axis=0), axis=1)
    total = float(lengths.sum())
    direction = _direction(joints)
    for distance in ((1.2, 1.5, 1.999, 3.0) if softness == 0.0 else (3.0, 5.0)):  # soft: beyond the stretch cap
        distance *= total
        points, _, _ = solve_points(joints.tolist(), (joints[0] + distance * direction).tolist(), softness=softness,
                                    use_stretch=True, max_stretch=2.0)
        points = np.array(points)
        bones = np.diff(points, axis=0)
        np.testing.assert_allclose(bones / np.linalg.norm(bones, axis=1)[:, None],
                                   np.repeat(direction[None], len(bones), axis=0), atol=1e-12)


def test_a_single_bone_beyond_reach_points_straight_at_the_target():
    points, error = _solve(np.array([(0.0, 0.0, 0.0), (0.0, 0.0, 1.0)]), np.array([0.0, 0.6, 0.8 * 1.001]), None)
    np.testing.assert_allclose(points[1], _unit(np.array([0.0, 0.6, 0.8 * 1.001])), atol=1e-15)
    assert error == pytest.approx(math.hypot(0.6, 0.8 * 1.001) - 1.0, abs=1e-15)


@pytest.mark.parametrize("pole", [None, POLE])
def test_a_target_beyond_reach_says_so_even_where_only_the_lean_leaves_it_outside_the_tolerance(pole):
    """A target beyond full reach by a little less than the tolerance: a straight chain would be within it, the
    leaning one is not (its tip 9e-6 of the length shorter); the reason is the length (beyond reach), not the
    iterations; a little less still, it is reached."""
    from fabrik_addon.solver.reach import describe, explain

    joints = _planar_chain(5, 2.0)
    total = float(np.linalg.norm(np.diff(joints, axis=0), axis=1).sum())
    direction = _direction(joints)
    for tolerance in (1e-3, 5e-4):
        for overshoot, reached in ((tolerance - 0.5 * BEYOND_SHORTEN, False), (tolerance + 1e-6, False),
                                   (tolerance - 2.0 * BEYOND_SHORTEN, True), (0.5 * BEYOND_SHORTEN, True)):
            target = joints[0] + total * (1.0 + overshoot) * direction
            result = solve_chain(joints, target, tolerance=tolerance * total, pole=pole)
            assert result.reached == reached, overshoot
            why = explain(joints, target, result.joints, reached=result.reached, converged=result.converged,
                          tolerance=tolerance * total, max_iterations=100, pole=pole)
            assert why.reason == ('NONE' if reached else 'LENGTH'), overshoot
            assert reached or describe(why).startswith("Target") and "beyond reach" in describe(why)
