"""Coned chains beyond what their cones allow (solver.swing's beyond fit): the fit ends at a true minimum of its
own cost (no rim bone held where the descent draws it inward), so the pose moves smoothly along a smooth path."""

import math

import numpy as np
import pytest
from test_swing import ISSUE_CONE, arc, loop, turns

from fabrik_addon.solver import solve_chain, swing
from fabrik_addon.solver.limits import ConeLimit, resolve_limits

POLE = np.array([0.0, 2.0, 1.0])
NARROW_CONE = ConeLimit(0.25, 0.25, 0.3, 0.2)


def solve_loop(bones, pole, cone, frames=None):
    joints = arc(bones)
    targets = loop(joints, 400)
    picked = range(400) if frames is None else frames
    results = [solve_chain(joints, targets[k], pole=POLE if pole else None, limits=[cone] * bones) for k in picked]
    return joints, results


@pytest.mark.parametrize(("bones", "pole", "bound"), [(2, True, 1.0), (2, False, 1.0), (3, True, 2.5), (3, False, 2.5)],
                         ids=["2-pole", "2", "3-pole", "3"])
def test_beyond_the_cones_no_bone_jitters(bones, pole, bound):
    """The issue's cone on the benchmark loop (0.4% of the length a frame), on frames where the tip misses by over
    4 tolerances (beyond what the cones allow, away from the edge): the beyond fit stuck on a false fixed point on
    the rim on some frames and not on others; 2 bones alternated 0.15 and 2.5-2.9 degrees a frame (measured now:
    largest 0.60 with a pole, 0.62 without; turn change 0.28-0.41 a frame), 3 bones 2.1-2.2 (2.05 now). Whole loop:
    no bone turns 5 degrees (3 bones without a pole turned 9.1 at the edge of the cones; 3.2 now), no cone is left,
    every miss is settled."""
    joints, results = solve_loop(bones, pole, ISSUE_CONE)
    limits = resolve_limits([ISSUE_CONE] * bones, joints)
    length = 2.0
    step = [turns(a.frames, b.frames) for a, b in zip(results, results[1:])]
    beyond = [r.error > 4e-3 * length for r in results]  # default tolerance 1e-3 units: 4 tolerances = 2e-3 L
    inside = [k for k in range(len(step)) if beyond[k] and beyond[k + 1]]
    assert len(inside) > 200
    assert max(step[k] for k in inside) <= bound
    if bones == 2:
        change = [abs(step[k + 1] - step[k]) for k in inside if k + 1 in inside]
        assert max(change) <= 0.6
    assert max(step) < 5.0
    assert max(float(limits.violations(r.joints).max()) for r in results) <= 1e-9
    assert all(r.converged for r in results)


def _beyond_minimise_calls(monkeypatch):
    """Every call of the beyond fit's _minimise: (start, centre, mu, root, target, lengths, limits, result)."""
    calls = []
    beyond, minimise = swing._fit_beyond, swing._minimise

    def spy_beyond(*args, **kwargs):
        def spy_minimise(q, q_ref, mu, root, target, lengths, limits, *rest):
            out = minimise(q, q_ref, mu, root, target, lengths, limits, *rest)
            calls.append((q_ref, mu, root, target, lengths, limits, out[0]))
            return out
        monkeypatch.setattr(swing, "_minimise", spy_minimise)
        try:
            return beyond(*args, **kwargs)
        finally:
            monkeypatch.setattr(swing, "_minimise", minimise)

    monkeypatch.setattr(swing, "_fit_beyond", spy_beyond)
    return calls


@pytest.mark.parametrize(("bones", "pole", "cone"), [
    (2, True, ISSUE_CONE), (2, False, ISSUE_CONE), (3, False, ISSUE_CONE), (2, True, NARROW_CONE),
    (3, True, NARROW_CONE),
], ids=["2-pole", "2", "3", "2-pole-narrow", "3-pole-narrow"])
def test_the_beyond_fit_ends_at_a_minimum_of_its_cost(monkeypatch, bones, pole, cone):
    """Frames 44-64 of the loop, beyond the cones: no allowed pose within 2e-3 radians of the beyond fit's
    (random nudges, each projected into the cones) has a lower cost |tip - target|**2 / length**2 + mu * |q -
    centre|**2. Before, a rim bone the descent drew inward was held on its rim: at frame 53 (2 bones, pole)
    moving it 1% inward lowered the cost by 2e-5."""
    calls = _beyond_minimise_calls(monkeypatch)
    solve_loop(bones, pole, cone, range(44, 65))
    assert len(calls) >= 10
    rng = np.random.default_rng(7)
    for centre, mu, root, target, lengths, limits, q in calls:
        scale = 1.0 / float(lengths.sum())

        def cost(x, centre=centre, mu=mu, root=root, target=target, lengths=lengths, limits=limits, scale=scale):
            e = (swing.tip_of(x, root, lengths, limits) - target) * scale
            return float(e @ e) + mu * float(((x - centre) ** 2).sum())

        best = cost(q)
        nudges = rng.normal(size=(200, *q.shape)) * 2e-3
        lowest = min(cost(swing._project(q + d, limits)) for d in nudges)
        assert lowest >= best - 1e-10 * max(best, 1e-3)


@pytest.mark.parametrize(("bones", "pole"), [(2, True), (2, False), (3, True), (4, True)])
def test_beyond_the_cones_the_tip_is_near_the_nearest_allowed_pose(bones, pole):
    """Every 25th frame of the loop beyond the issue's cones: the tip within 0.15 of the chain's length of the
    nearest pose the cones allow (a dozen descents of the distance alone from random allowed swings), within 0.03
    where that pose misses by under 0.1 (the pull toward the free pose, which keeps one pose, grows with the
    shortfall). Measured: at most 0.135 (4 bones, frame 150, the nearest 0.221 short), 0.027 where the nearest
    misses by under 0.1 (4 bones, frame 100; the fit held on the rim: 0.066)."""
    joints = arc(bones)
    length = 2.0
    lengths = np.linalg.norm(np.diff(joints, axis=0), axis=1)
    limits = resolve_limits([ISSUE_CONE] * bones, joints)
    targets = loop(joints, 400)
    rng = np.random.default_rng(3)
    checked = 0
    for k in range(25, 400, 25):
        result = solve_chain(joints, targets[k], pole=POLE if pole else None, limits=[ISSUE_CONE] * bones)
        if result.reached:
            continue
        nearest = math.inf
        for _ in range(12):
            start = swing._project(rng.uniform(-0.6, 0.6, size=(bones, 2)), limits)
            q, _, _ = swing._minimise(start, start, 1e-12, joints[0], targets[k], lengths, limits)
            nearest = min(nearest, float(np.linalg.norm(swing.tip_of(q, joints[0], lengths, limits) - targets[k])))
        assert result.error >= nearest - 1e-6 * length, k  # the descents found the nearest
        assert result.error <= nearest + (0.03 if nearest < 0.1 * length else 0.15) * length, k
        checked += 1
    assert checked >= 8
