"""Why a chain did not reach its target: which length, limit or setting holds it, and by how much.

Computed after a solve, from its inputs and result, only when the tip stopped short (so it costs
nothing while everything reaches). Each reason is a counterfactual the caller can check: the target
lies beyond the (stretched) reach; the solve ran out of passes while still closing in; without
softness it reaches; without the pole it reaches (a hinge and the pole disagree); without one bone's
limit it reaches (that bone holds it). The re-solves call the chain's own solver with one setting
changed, so the answer is what the user would see after changing that setting.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from .fabrik import pad3, solve_chain
from .limits import ChainLimits, ConeLimit, HingeLimit, Limit, ResolvedLimits, resolve_limits
from .result import SolveResult
from .start import beyond_shortening
from .two_bone import solve_two_bone

# The values of ``FabrikChain.limited_by``, in the order of its enum items.
REASONS = ('NONE', 'LENGTH', 'LIMIT', 'SOFTNESS', 'ITERATIONS', 'POLE', 'SHARED')

# A bone sits on its limit when its direction is within this of the boundary (the ellipse value of a
# cone, radians for a hinge): the solver's projections land on it to ~1e-7.
ON_LIMIT = 1e-4

# A target farther than the stretched reach by more than this fraction of it is out of reach (the
# rounding of the bone lengths and of the root's position is far below it).
BEYOND = 1e-9


@dataclass(frozen=True)
class Shortfall:
    """Why one chain stops short of its target, with what the overlay draws.

    Attributes
    ----------
    reason : str
        One of :data:`REASONS`.
    gap : float
        Distance from the tip to the target.
    reach : float
        The chain's length (the sum of its bone lengths, unstretched).
    max_reach : float
        ``reach`` times the stretch cap (``reach`` without stretch).
    distance : float
        Distance from the root to the target.
    bone : int
        Index of the bone whose limit holds the tip (LIMIT; POLE: the hinge), else -1.
    side : str
        Which side of that limit the bone rests on: 'left', 'right', 'up', 'down' (cone), 'min', 'max'
        (hinge), or '' (POLE: the hinge's plane).
    angle : float
        That side's limit angle (radians).
    tip, target : ndarray, shape (3,)
        Where the tip stopped and where the target is.
    pole : ndarray, shape (3,), or None
    middle : ndarray, shape (3,)
        The chain's middle joint, where the pole line starts.
    limit : ConeLimit, HingeLimit or None
        The limit of ``bone``.
    limit_origin : ndarray, shape (3,), or None
        The head of ``bone``.
    limit_frame : ndarray, shape (3, 3), or None
        The frame ``bone``'s limit is measured in (columns X, Y, Z) in the solved pose.
    bone_length : float
        Length of ``bone`` (the radius the overlay draws its limit at).
    softness, max_stretch, iterations : float, float, int
        The settings the message quotes (``max_stretch`` 1 without stretch).
    """

    reason: str
    gap: float
    reach: float
    max_reach: float
    distance: float
    tip: np.ndarray
    target: np.ndarray
    middle: np.ndarray
    pole: np.ndarray | None = None
    bone: int = -1
    side: str = ''
    angle: float = 0.0
    limit: Limit = None
    limit_origin: np.ndarray | None = None
    limit_frame: np.ndarray | None = None
    bone_length: float = 0.0
    softness: float = 0.0
    max_stretch: float = 1.0
    iterations: int = 0


def explain(
    start: object,
    target: object,
    joints: object,
    *,
    reached: bool,
    converged: bool,
    tolerance: float,
    max_iterations: int,
    pole: object = None,
    limits: ChainLimits | Sequence[Limit] | None = None,
    softness: float = 0.0,
    use_stretch: bool = False,
    max_stretch: float = 1.0,
    two_bone: bool = False,
) -> Shortfall:
    """Why the solve of a chain from ``start`` toward ``target`` ended at ``joints``.

    Parameters
    ----------
    start : array_like, shape (N+1, D)
        The pose the solve started from (its bone lengths are the chain's); D = 2 or 3, as for
        :func:`.fabrik.solve_chain`.
    target : array_like, shape (D,)
    joints : array_like, shape (N+1, D)
        The solved pose.
    reached, converged : bool
        As :class:`.result.SolveResult` reported them.
    tolerance, max_iterations, pole, limits, softness, use_stretch, max_stretch
        The solve's settings, as given to :func:`.fabrik.solve_chain`.
    two_bone : bool
        The chain was solved by :func:`.two_bone.solve_two_bone` (the re-solves use it too).

    Returns
    -------
    Shortfall
        ``reason`` 'NONE' when the chain reached. Its points are 3D (a 2D chain's at z = 0), and a 2D chain's
        limit frames the ones its solve measures its limits in (:func:`.limits.resolve_limits`, ``planar``);
        the re-solves that find the holding limit are 2D solves, as the chain's own.
    """
    given_start = np.asarray(start, dtype=np.float64)
    given_target = np.asarray(target, dtype=np.float64)
    given_pole = None if pole is None else np.asarray(pole, dtype=np.float64)
    start, tgt, solved = pad3(given_start), pad3(given_target), pad3(np.asarray(joints, dtype=np.float64))
    pole3 = None if given_pole is None else pad3(given_pole)
    lengths = np.linalg.norm(np.diff(start, axis=0), axis=1)
    reach = float(lengths.sum())
    cap = float(max_stretch) if use_stretch else 1.0
    distance = float(np.linalg.norm(tgt - start[0]))
    gap = float(np.linalg.norm(tgt - solved[-1]))
    facts = Shortfall('NONE', gap, reach, reach * cap, distance, solved[-1].copy(), tgt.copy(),
                      solved[len(solved) // 2].copy(), pole3, softness=float(softness), max_stretch=cap,
                      iterations=int(max_iterations))
    if reached:
        return facts
    # A free chain just beyond reach leans its end bones (.start.beyond_reach): its tip falls that much shorter.
    lean = 0.0
    if limits is None and not two_bone and not softness:
        lean = beyond_shortening(distance / (reach * cap) - 1.0) * reach * cap
    if distance > reach * cap * (1.0 + BEYOND) + tolerance - lean or distance < _inner_reach(lengths) * cap - tolerance:
        return replace(facts, reason='LENGTH')
    if not converged:
        return replace(facts, reason='ITERATIONS')

    solver: Callable[..., SolveResult] = solve_two_bone if two_bone else solve_chain
    settings = {"tolerance": tolerance, "max_iterations": max_iterations, "pole": given_pole, "limits": limits,
                "softness": softness, "use_stretch": use_stretch, "max_stretch": max_stretch}

    def reaches(**changed: object) -> SolveResult:
        return solver(given_start, given_target, **{**settings, **changed})

    if softness and reaches(softness=0.0).reached:
        return replace(facts, reason='SOFTNESS')
    items = None if limits is None else list(limits.limits if isinstance(limits, ChainLimits) else limits)
    if limits is None or not items or all(item is None for item in items):
        return replace(facts, reason='ITERATIONS')  # settled short with nothing holding it: a stall
    resolved = resolve_limits(limits, start, planar=given_start.shape[-1] == 2)  # as the solve measures them
    frames, local = _limit_frames(resolved, solved)
    hinges = [i for i, item in enumerate(items) if isinstance(item, HingeLimit)]
    if given_pole is not None and hinges and reaches(pole=None).reached:
        # The hinge whose freedom the pole needs: without it, the chain reaches with the pole.
        bone = next((i for i in hinges if reaches(limits=_without(limits, items, i)).reached), hinges[0])
        return _held(facts, 'POLE', bone, items, frames, local, solved, lengths)
    order = sorted((i for i, item in enumerate(items) if item is not None),
                   key=lambda i: (not _on_limit(items[i], local[i]), -i))
    best, best_gap = order[0], math.inf
    for i in order:
        result = reaches(limits=_without(limits, items, i))
        if result.reached:
            best = i
            break
        if result.error < best_gap - tolerance:
            best, best_gap = i, result.error
    return _held(facts, 'LIMIT', best, items, frames, local, solved, lengths)


def _inner_reach(lengths: np.ndarray) -> float:
    """Nearest the tip can come to the root: the longest bone less all the others, when positive."""
    return max(0.0, 2.0 * float(lengths.max()) - float(lengths.sum()))


def _without(limits: ChainLimits | Sequence[Limit], items: list, bone: int) -> ChainLimits | list:
    kept = [None if k == bone else item for k, item in enumerate(items)]
    return replace(limits, limits=kept) if isinstance(limits, ChainLimits) else kept


def _limit_frames(resolved: ResolvedLimits, joints: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each bone's limit frame ``(N, 3, 3)`` in the pose ``joints`` and its direction in that frame
    ``(N, 3)``: the walk of :meth:`.limits.ResolvedLimits.violations`."""
    dirs = np.diff(joints, axis=0)
    dirs = dirs / np.linalg.norm(dirs, axis=1)[:, None]
    frames = np.empty((len(dirs), 3, 3))
    local = np.empty((len(dirs), 3))
    parent = resolved.base_frame
    for i, d in enumerate(dirs):
        frames[i] = resolved.limit_frame(parent, i)
        local[i] = frames[i].T @ d
        parent = resolved.frame_for(parent, i, d, dirs[i + 1] if i + 1 < len(dirs) else None)
    return frames, local


def _on_limit(limit: Limit, local: np.ndarray) -> bool:
    if isinstance(limit, ConeLimit):
        return limit.excess(local) > -ON_LIMIT
    if isinstance(limit, HingeLimit):
        alpha = limit.angle(local)
        return min(abs(alpha - limit.min_angle), abs(alpha - limit.max_angle)) < ON_LIMIT
    return False


def limit_side(limit: Limit, local: np.ndarray) -> tuple[str, float]:
    """The side of ``limit`` a bone pointing along unit ``local`` (in the limit's frame) rests on, and
    that side's angle: the cone's semi-axis its deflection fills most, or the hinge's nearer end."""
    if isinstance(limit, HingeLimit):
        alpha = limit.angle(local)
        if abs(alpha - limit.min_angle) <= abs(alpha - limit.max_angle):
            return 'min', limit.min_angle
        return 'max', limit.max_angle
    if isinstance(limit, ConeLimit):
        x, y, z = (float(c) for c in local)
        across = math.hypot(x, z)
        if across == 0.0:
            return '', 0.0
        theta = math.atan2(across, y)
        u, v = theta * x / across, theta * z / across
        sides = [('right', limit.right) if u >= 0.0 else ('left', limit.left),
                 ('up', limit.up) if v >= 0.0 else ('down', limit.down)]
        fills = [abs(u) / max(sides[0][1], 1e-12), abs(v) / max(sides[1][1], 1e-12)]
        return sides[0] if fills[0] >= fills[1] else sides[1]
    return '', 0.0


def _held(facts: Shortfall, reason: str, bone: int, items: list, frames: np.ndarray, local: np.ndarray,
          joints: np.ndarray, lengths: np.ndarray) -> Shortfall:
    side, angle = ('', 0.0) if reason == 'POLE' else limit_side(items[bone], local[bone])
    return replace(facts, reason=reason, bone=bone, side=side, angle=angle, limit=items[bone],
                   limit_origin=joints[bone].copy(), limit_frame=frames[bone].copy(),
                   bone_length=float(np.linalg.norm(joints[bone + 1] - joints[bone])))


def format_distance(value: float) -> str:
    """A distance in metres with three significant digits (rounding under 0.5%): m from 10 cm, cm
    from 1 mm, else mm."""
    size = abs(value)
    if size >= 0.1:
        return f"{value:.3g} m"
    if size >= 0.001:
        return f"{value * 100.0:.3g} cm"
    return f"{value * 1000.0:.3g} mm"


def out_of_iterations(iterations: int, gap: str) -> str:
    """The ITERATIONS sentence: ``iterations`` the chain's setting, ``gap`` the distance from tip to target as
    :func:`format_distance` gives it."""
    return f"Did not converge in {iterations} iterations: the tip stops {gap} short; raise Iterations"


def describe(why: Shortfall, bone_names: Sequence[str] = (), scale: float = 1.0) -> str:
    """One sentence saying why the chain stops short, with numbers; the first distance in it is the gap
    from the tip to the target (every distance times ``scale``: armature to world units)."""
    gap = format_distance(why.gap * scale)
    name = bone_names[why.bone] if 0 <= why.bone < len(bone_names) else f"bone {why.bone}"
    if why.reason == 'LENGTH':
        chain = format_distance(why.reach * scale)
        if why.distance < why.reach:
            return f"Target {gap} too near the root: the bones cannot fold closer (chain {chain})"
        cap = f", stretch capped at {why.max_stretch:.3g}" if why.max_stretch > 1.0 else ""
        return f"Target {gap} beyond reach (chain {chain}{cap})"
    if why.reason == 'ITERATIONS':
        return out_of_iterations(why.iterations, gap)
    if why.reason == 'SOFTNESS':
        share = why.distance / why.max_reach if why.max_reach > 0.0 else 0.0
        return (f"Softness {why.softness:.2f} holds the tip {gap} short by design (target at {share:.0%} of "
                "the chain's reach); lower Softness to reach it")
    if why.reason == 'SHARED':
        return f"The tree's other targets hold the bones this chain shares with them: the tip stops {gap} short"
    if why.reason == 'POLE':
        return (f"The pole and the hinge of '{name}' disagree: the tip stops {gap} short; move the pole "
                "into the hinge's plane or remove it")
    if why.reason == 'LIMIT':
        kind = "Hinge" if isinstance(why.limit, HingeLimit) else "Cone"
        side = f" ({why.side} {math.degrees(why.angle):.0f} degrees)" if why.side else ""
        return f"{kind} limit of '{name}'{side} holds the tip {gap} short"
    return ""
