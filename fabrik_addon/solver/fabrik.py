"""FABRIK for one chain, in plain floats.

A numpy call costs about 1 us while a float operation costs about 0.07 us, so for one chain the
per-joint loop runs on Python floats; :mod:`.fabrik_batch` is its numpy twin across many chains.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from .analytic import law_of_cosines_points
from .checks import ZERO_LENGTH, bone_lengths, check_joints, check_points
from .hinge_fit import (
    HINGE_FIT_MAX_BONES,
    HingeCoordinates,
    fallback,
    free_roll,
    has_hinges,
    hinge_coordinates,
    scan_reach,
)
from .hinge_plane import planar_hinge_pose
from .limits import LIMIT_SLACK, ChainLimits, Limit, ResolvedLimits, hinges_in_the_plane, resolve_limits
from .prepare import EPS, prepare, straight_toward
from .result import SolveResult
from .rotations import matrix_from_two_vectors, roll_turn_floats
from .soft import (
    DEFAULT_MAX_STRETCH,
    DEFAULT_SOFTNESS,
    check_soft_options,
    ease_target,
    settle_points,
    stretch_about,
)
from .start import beyond_reach, curled_start
from .swing import SwingFit, cones_only, fit_swings, joints_of, polish, two_bone_reach

DEFAULT_TOLERANCE = 1e-3
DEFAULT_MAX_ITERATIONS = 30
# Stall rule: stop after STALL_PATIENCE iterations in a row that each improve the tip error by less than
# this fraction. One slow iteration is not enough: a chain folding past a near target speeds up again.
DEFAULT_MIN_IMPROVEMENT = 1e-3
STALL_PATIENCE = 3
# Without limits, FABRIK iterates until the tip is this close (relative to the chain's length) when the
# tolerance asks for less: where it stops then moves no joint by more than a tiny fraction of a frame's
# motion, so the pose does not depend on how many passes ran (nor on float noise in the inputs).
SETTLE = 1e-7
# Cone-limited chains: limited FABRIK is tried when the swing fit misses by more than this many tolerances.
FIT_FALLBACK = 10.0
# ... and where limited FABRIK misses too but stops nearer than this fraction of the fit's distance, the fit is run
# again from the pose without IK, kept when it reaches: the fit from the free pose had settled in a local minimum
# (random chains in random cones, targets from poses inside them, 4 seeds x 60 a size: 3 bones with a pole 134
# tolerances short where limited FABRIK stopped 13, 5 bones 692 against 49; the fit from the pose without IK reaches
# both). Beyond what the cones allow limited FABRIK lands at 0.59-1.0 of the fit's distance (the quality loops of 3,
# 4 and 8 coned bones, 344 solves), so there the refit does not run: run on every solve the fit misses, it cost
# 50% more time on those loops (3 bones 12.7 -> 18.7 ms a solve, 8 bones 64 -> 94).
FIT_REFIT_NEARER = 0.5
# Chains of fixed hinges (no bone rolls) polish the hinge fit's pose where it stops short by at most this many
# tolerances (:func:`_solve_hinged`): the polish rescued poses from 1.1-24.8 tolerances short (an excavator, a robot
# arm: targets from their own poses), never from farther (384, 588); from farther it costs a round or two and
# gives up, and the reach diagnosis solves such a chain again several times a frame (an excavator whose target
# circles behind its turret's stops, ~1000 tolerances short: 42 -> 72 ms a frame, polished at any distance).
FIXED_HINGES_POLISH_WITHIN = 30.0
# ... from this many bones (2-3 bone coned chains on limited FABRIK turned 11-28 degrees in a frame on the
# quality loop; through the fit 1.9-3.1, since the pull beyond the cones goes toward the free pose).
FIT_MIN_BONES = 2
# ... and up to this many (from 8 bones through the wide proximal fit, swing.WIDE_PROXIMAL_FROM; limited FABRIK
# turned 8-10 coned bones 3.1-7.7 degrees a frame on the quality loop, the free pose kept first 0.71-0.74);
# longer chains keep limited FABRIK.
FIT_MAX_BONES = 10

Point = tuple[float, float, float]


def check_settings(tolerance: float, max_iterations: int, min_improvement: float) -> None:
    if not (math.isfinite(tolerance) and tolerance >= 0.0):
        raise ValueError(f"tolerance must be a finite number >= 0, got {tolerance!r}")
    if int(max_iterations) != max_iterations or max_iterations < 1:
        raise ValueError(f"max_iterations must be a whole number >= 1, got {max_iterations!r}")
    if not (math.isfinite(min_improvement) and 0.0 <= min_improvement < 1.0):
        raise ValueError(f"min_improvement must be in [0, 1), got {min_improvement!r}")


def pad3(points: np.ndarray) -> np.ndarray:
    """2D points (..., 2) embedded at z = 0; 3D points returned as they are."""
    if points.shape[-1] == 3:
        return points
    return np.concatenate([points, np.zeros(points.shape[:-1] + (1,))], axis=-1)


def solve_chain(
    joints: object,
    target: object,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    pole: object = None,
    limits: ChainLimits | Sequence[Limit] | None = None,
    min_improvement: float = DEFAULT_MIN_IMPROVEMENT,
    softness: float = DEFAULT_SOFTNESS,
    use_stretch: bool = False,
    max_stretch: float = DEFAULT_MAX_STRETCH,
) -> SolveResult:
    """Solve one chain with FABRIK.

    Parameters
    ----------
    joints : array_like, shape (N+1, D)
        Start pose, D = 2 or 3, N >= 1 bones; ``joints[0]`` is the fixed root. Bone lengths are the
        distances between consecutive joints. Never mutated.
    target : array_like, shape (D,)
    tolerance : float
        Stop once the tip is this close to the target (scene units).
    max_iterations : int
        Upper bound on backward-forward passes (>= 1).
    pole : array_like, shape (D,), optional
        Interior joints turn toward it about the line through their neighbours. Without a pole the
        chain keeps the bend plane of its start pose.
    limits : ChainLimits or sequence of ConeLimit/HingeLimit/None (length N), optional
        Joint limits, honoured in every root-to-tip pass; the returned pose never violates them.
    min_improvement : float
        Stall rule: stop after ``STALL_PATIENCE`` iterations in a row that each improve the error by less
        than this fraction.
    softness : float
        In [0, 0.5]: the fraction of the chain's length over which the tip eases toward full extension
        (soft IK, see :mod:`.soft`); the direction to the target is kept. 0: hard IK.
    use_stretch : bool
        Scale every bone by one factor (``SolveResult.stretch``) so the tip reaches a target beyond the
        (softened) reach.
    max_stretch : float
        Largest stretch factor (>= 1); beyond it the chain reaches toward the target as without stretch.

    Returns
    -------
    SolveResult
        ``joints`` of shape (N+1, D); the best pose seen when the target was not reached. ``error`` and
        ``reached`` are measured to the given target, so a softened chain short of it is not reached.
    """
    start = check_joints(joints)
    dim = start.shape[1]
    tgt = pad3(check_points(target, (dim,), "target"))
    pole3 = None if pole is None else pad3(check_points(pole, (dim,), "pole"))
    check_settings(tolerance, max_iterations, min_improvement)
    start3 = pad3(start)
    lengths = bone_lengths(start3)
    check_soft_options(softness, use_stretch, max_stretch)
    goal, factor, eased_in = tgt, 1.0, False
    if softness or use_stretch:
        eased, factor, eased_in = ease_target(start3[0], tgt, float(lengths.sum()), softness, use_stretch,
                                              max_stretch)
        goal = np.array(eased)
        start3 = stretch_about(start3, start3[0], factor)
        lengths = bone_lengths(start3)
    resolved = None if limits is None else resolve_limits(limits, start3, planar=dim == 2)
    prep = prepare(start3[None], goal[None], None if pole3 is None else pole3[None], lengths[None], resolved is None)
    args: FabrikArgs = (goal, pole3, prep.dirs[0], lengths, bool(prep.unreachable[0]), tolerance,
                        int(max_iterations), min_improvement)
    frames = None
    if resolved is None:
        out, error, iterations = run_fabrik(prep.joints[0], *args, None)
        converged = bool(prep.unreachable[0]) or iterations < max_iterations
    else:
        # 2D: every limit as a turn about the plane's normal, where no solve can leave the plane, so the 3D
        # chain's last resorts (the two-bone circle, the scan) may run too.
        in_plane = hinges_in_the_plane(resolved) if dim == 2 else None
        out, error, iterations, converged, frames = _solve_limited(prep.joints[0], start3, args, in_plane or resolved,
                                                                   dim == 3 or in_plane is not None)
        if in_plane is not None:
            frames = resolved.frames_of(out)
        if prep.unreachable[0]:
            # Beyond the chain's length: out of reach whatever the passes, as for free chains (4 bones in cones with
            # zero sides, a target 1.5 lengths out: "did not converge" with 1-3 passes, where their fit did not
            # settle and limited FABRIK ran out of passes).
            converged = True
        elif converged and error > tolerance and max_iterations < DEFAULT_MAX_ITERATIONS:
            converged = not _reached_with_more_passes(joints, target, tolerance, pole, limits, min_improvement,
                                                      softness, use_stretch, max_stretch)
    if eased_in and resolved is None:
        out = np.array(settle_points(out.tolist(), goal.tolist()))
    if goal is not tgt:
        error = math.dist(out[-1], tgt)
    reached = error <= tolerance
    return SolveResult(out[:, :dim], error, iterations, reached, factor, reached or converged, frames)


def _reached_with_more_passes(joints: object, target: object, tolerance: float, pole: object,
                              limits: ChainLimits | Sequence[Limit] | None, min_improvement: float, softness: float,
                              use_stretch: bool, max_stretch: float) -> bool:
    """Whether the limited chain, solved with the default number of passes, reaches ``target``.

    A limited solve's fits run to their own fixed points whatever the budget, so they settle however few passes
    were allowed; its limited FABRIK fallback does not. Where the fits stop short and too few passes leave the
    fallback short too, the solve settles short of a target it reaches with more passes: a 5-bone chain (a coned
    hip, four hinges, a pole) reaches its own pose's tip with 3 passes and stopped 0.22 of its length short with 1
    or 2, saying "out of reach". Run only below the default budget, where that chain then says it did not
    converge: at the default and above, the fallback runs out of passes on most frames beyond the limits (123
    of 145 on the hinged-knee leg's quality loop), where more passes do not help."""
    return solve_chain(joints, target, tolerance=tolerance, max_iterations=DEFAULT_MAX_ITERATIONS, pole=pole,
                       limits=limits, min_improvement=min_improvement, softness=softness, use_stretch=use_stretch,
                       max_stretch=max_stretch).reached


# run_fabrik's arguments after the joints: target, pole, fallback directions, lengths, unreachable,
# tolerance, max_iterations, min_improvement.
FabrikArgs = tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray, bool, float, int, float]


def _solve_limited(joints: np.ndarray, start3: np.ndarray, args: FabrikArgs, resolved: ResolvedLimits,
                   solid: bool) -> tuple[np.ndarray, float, int, bool, np.ndarray]:
    """A chain with joint limits (:func:`_solve_limits`); two bones (``solid``, see there) that miss a target within
    their reach then take the pose that reaches within the limits, its elbow rolled least from the solve's
    (:func:`.swing.two_bone_reach`): the fits can settle short of a target the limits allow (random 2-bone
    chains with a cone then a hinge and a pole, targets from poses within their limits: 25 of 300 missed, by
    up to 0.13 of the chain's length; in two cones 1-4 of 1000, up to 0.12; a hinge then a cone, a hinge or
    none, 67-124 of 800)."""
    out, error, iterations, converged, frames = _solve_limits(joints, start3, args, resolved, solid)
    goal, _, _, lengths, unreachable, tolerance, *_ = args
    if solid and len(lengths) == 2 and error > tolerance and not unreachable:
        reaching = two_bone_reach(out, goal, lengths, resolved, tolerance)
        if reaching is not None:
            return reaching, math.dist(reaching[2], goal), iterations, True, resolved.frames_of(reaching)
    return out, error, iterations, converged, frames


def _solve_limits(joints: np.ndarray, start3: np.ndarray, args: FabrikArgs, resolved: ResolvedLimits,
                  solid: bool) -> tuple[np.ndarray, float, int, bool, np.ndarray]:
    """A chain with joint limits: the analytic pose for two bones when the limits allow it, the bend-plane
    solve for a free bone above parallel hinges, else limited FABRIK (:func:`run_limited`). ``joints``:
    the prepared start; ``start3``: the pose without IK; ``args``: :func:`run_fabrik`'s arguments after
    the joints; ``solid``: the poses that the last resorts try (the two-bone circle, the scan) are ones the chain
    can take: a 3D chain, or a 2D one whose limits are hinges in the plane (not where their rolls and swings would
    leave it). Returns (joints, error, iterations, converged, the bones' frames as the
    limits measure them)."""
    goal, pole3, _, lengths, unreachable, *_ = args
    if cones_only(resolved) and FIT_MIN_BONES <= len(lengths) <= FIT_MAX_BONES:
        return _solve_cones(joints, start3, args, resolved)
    frames = None
    done = converged = False
    if len(lengths) == 2 and not unreachable:
        # Two bones: the analytic pose when the limits allow it (with a hinge below a free bone they
        # do whenever the hinge angle does, the upper bone rolling); FABRIK crawls near full extension.
        out, error, iterations = _two_bones(joints, goal, pole3, lengths)
        done = converged = bool(resolved.violations(out).max() <= LIMIT_SLACK)
    if not done and len(lengths) >= 3:
        # A free bone then hinges about parallel axes (a leg): solved in the bend plane, with no
        # passes whose stopping point would move the pose (.hinge_plane).
        planar = planar_hinge_pose(start3, goal, pole3, lengths, resolved)
        if planar is not None and (planar.matched or unreachable):
            out, error, iterations, frames = planar.joints, planar.error, 1, planar.frames
            done = converged = True
    if not done and has_hinges(resolved) and len(lengths) <= HINGE_FIT_MAX_BONES:
        return _solve_hinged(joints, start3, args, resolved, solid)
    if not done:
        out, error, iterations, converged = run_limited(joints, *args, resolved, None if unreachable else start3)
    if frames is None:
        frames = resolved.frames_of(out)
    return out, error, iterations, converged, frames


def _solve_cones(joints: np.ndarray, start3: np.ndarray, args: FabrikArgs,
                 resolved: ResolvedLimits) -> tuple[np.ndarray, float, int, bool, np.ndarray]:
    """A chain whose limits are cones (or none): the free pose when it keeps every cone, else the fit in
    swing coordinates nearest it (:mod:`.swing`); ``_solve_limits``'s arguments and returns."""
    goal, pole3, _, lengths, unreachable, *_ = args
    if len(lengths) == 2 and not unreachable:
        free, error, iterations = _two_bones(joints, goal, pole3, lengths)
    else:
        free, error, iterations = run_fabrik(joints, *args, None)
    if resolved.violations(free).max() <= LIMIT_SLACK:
        return free, error, iterations, True, resolved.frames_of(free)
    fit = fit_swings(free, goal, lengths, resolved, args[5])
    iterations += fit.steps
    if not fit.settled or (fit.error > FIT_FALLBACK * args[5] and not unreachable):
        # The fit settled far short: a local minimum, or a target beyond what the cones allow. Limited
        # FABRIK with its restarts is kept only when it reaches (a local minimum escaped), so beyond the
        # cones, where it never reaches, the pose stays the fit's, continuous in the target. Not tried
        # nearer: by the edge of what the cones allow, its exact pose differs from the fit's rounded one
        # (the coned leg turned 5.3 degrees in a frame where it took over at 1 tolerance). Where limited FABRIK
        # misses too but lands far nearer, the fit from the pose without IK (FIT_REFIT_NEARER), kept when it reaches.
        out, error, used, converged = run_limited(joints, *args, resolved, None if unreachable else start3)
        iterations += used
        if error > args[5] and error < FIT_REFIT_NEARER * fit.error and not unreachable:
            refit = fit_swings(start3, goal, lengths, resolved, args[5])
            iterations += refit.steps
            if refit.error <= args[5]:
                return refit.joints, refit.error, iterations, True, resolved.frames_of(refit.joints)
        if _limited_kept(error, fit, args[5]):
            return out, error, iterations, converged or error <= args[5], resolved.frames_of(out)
    return fit.joints, fit.error, iterations, fit.settled, resolved.frames_of(fit.joints)


def _limited_kept(error: float, fit: SwingFit, tolerance: float) -> bool:
    """Whether limited FABRIK, tried after a fit (cones or hinges) that settled far short or did not settle,
    is kept over it: when it reaches (``error``), or when the fit did not settle (cones with a zero side, whose
    rims have corners: 2-4 bones in cones of 0 and 180 degrees; a hinge at the end of its slider) and missed.
    A fit that reached but did not settle stays: the polish can end within the tolerance yet spend every step
    sliding along it (4 bones in lopsided cones), where limited FABRIK stopped 0.12-0.16 short and a bone
    turned 31.6 degrees in a frame."""
    return error <= tolerance or (not fit.settled and fit.error > tolerance)


def _solve_hinged(joints: np.ndarray, start3: np.ndarray, args: FabrikArgs, resolved: ResolvedLimits,
                  solid: bool) -> tuple[np.ndarray, float, int, bool, np.ndarray]:
    """A chain with hinges that is not a planar leg: the free pose when it keeps every limit, else the fit in
    hinge coordinates (:mod:`.hinge_fit`) from the free pose, then from the pose without IK, then limited
    FABRIK, each tried only when the last misses a target within the chain's length (by
    :func:`.hinge_fit.fallback` tolerances), the first that reaches kept, else the fit from the free pose (a
    fit that did not settle gives way to limited FABRIK unless it reached, as for cones), polished where no
    bone rolls and it stops short, and where it still misses a target within the chain's length, the pose
    that reaches found by :func:`.hinge_fit.scan_reach` (``solid``, 3 bones or more); ``_solve_limits``'s
    arguments and returns."""
    goal, pole3, _, lengths, unreachable, tolerance, *_ = args
    free, error, iterations = run_fabrik(joints, *args, None)
    if resolved.violations(free).max() <= LIMIT_SLACK:
        return free, error, iterations, True, resolved.frames_of(free)
    coordinates, fit = _fit_hinged(free, goal, lengths, resolved, tolerance)
    far = fallback(len(lengths)) * tolerance
    iterations += fit.steps
    if fit.error > far and not unreachable:
        again, refit = _fit_hinged(start3, goal, lengths, resolved, tolerance)
        iterations += refit.steps
        if refit.error <= tolerance:
            coordinates, fit = again, refit
    if not fit.settled or (fit.error > far and not unreachable):
        out, error, used, converged = run_limited(joints, *args, resolved, None if unreachable else start3)
        iterations += used
        if _limited_kept(error, fit, tolerance):
            return out, error, iterations, converged or error <= tolerance, resolved.frames_of(out)
    # The fit's own coordinates where it rolls the hinges' planes: the same joints re-read put the roll of a bone
    # above a nearly straight hinge on either side (the 8-bone leg with its knee second turned 180 degrees a frame).
    swings = fit.swings if coordinates.free_roll and fit.swings is not None else coordinates.of(fit.joints)
    if (tolerance < fit.error <= FIXED_HINGES_POLISH_WITHIN * tolerance and not unreachable
            and not any(resolved.rolls(i) for i in range(len(lengths)))):
        # No bone rolls (every hinge's plane is fixed by the bones above it: a crane, an excavator, a robot arm):
        # where the fit's pull holds the tip short of a pose that reaches, the polish's proximal rounds move it
        # there, and no mirror choice of a rolling plane makes them flip (.hinge_fit.HingeCoordinates.polish).
        # An excavator's turret, boom and stick, targets from its own poses: 63 of 600 missed by 1.1-6.7 tolerances
        # before, none after; a robot arm (one more hinge) 36 -> 8. Where nothing reaches it costs a round or two
        # (4 fixed hinges beyond what they allow, polished at any distance: 25 -> 35 ms a solve), so only from near.
        polished, polished_error, more, _ = polish(swings, fit.joints[0], goal, lengths, coordinates, tolerance)
        iterations += more
        if polished_error <= tolerance:
            return (joints_of(polished, fit.joints[0], lengths, coordinates), polished_error, iterations, True,
                    coordinates.bone_frames(polished[None])[0])
    if solid and len(lengths) >= 3 and fit.error > tolerance and not unreachable:
        # Still short of a target within the chain's length: the fit is local (see .hinge_fit.SCAN_SAMPLES).
        # A pole sets the hinges' planes (where it and a hinge disagree, the chain says so: .reach): with one, the
        # scan keeps the bones above hinges at the pole's roll; rolling them, the 3-bone coned leg with a hinged knee
        # reached 3 more frames of the quality loop by a pose 58 degrees away, and came back.
        scanned = scan_reach(coordinates, swings, fit.joints[0], goal, lengths, tolerance, pole3 is None)
        if scanned is not None:
            scanning, q, scanned_error = scanned
            return (joints_of(q, fit.joints[0], lengths, scanning), scanned_error, iterations, True,
                    scanning.bone_frames(q[None])[0])
    frames = coordinates.bone_frames(swings[None])[0]
    return fit.joints, fit.error, iterations, fit.settled, frames


def _fit_hinged(reference: np.ndarray, goal: np.ndarray, lengths: np.ndarray, resolved: ResolvedLimits,
                tolerance: float) -> tuple[HingeCoordinates, SwingFit]:
    """The fit in hinge coordinates from ``reference``, the hinges' planes rolling as there; from
    :func:`.hinge_fit.free_roll` bones, then the fit from that pose with the planes free to roll from where the
    first stage held them: rolling from the first stage on, inputs 3e-6 apart (rotation modes) ended 1.5e-3
    apart on an 8-bone coned leg; from a pose that already fits, the rolling fit starts where its cost is convex.
    Returns the coordinates and the fit (its steps, both stages')."""
    coordinates = hinge_coordinates(resolved, reference)
    fit = fit_swings(reference, goal, lengths, coordinates, tolerance)
    if not free_roll(len(lengths)) or not fit.settled:
        return coordinates, fit
    rolling = replace(coordinates, free_roll=True)  # the planes' rolls measured from the first stage's
    rolled = fit_swings(fit.joints, goal, lengths, rolling, tolerance)
    return rolling, SwingFit(rolled.joints, rolled.error, fit.steps + rolled.steps, rolled.settled, rolled.swings)


def run_fabrik(
    joints: np.ndarray,
    target: np.ndarray,
    pole: np.ndarray | None,
    dirs: np.ndarray,
    lengths: np.ndarray,
    unreachable: bool,
    tolerance: float,
    max_iterations: int,
    min_improvement: float,
    limits: ResolvedLimits | None,
) -> tuple[np.ndarray, float, int]:
    """The iteration loop on a prepared 3D chain; returns (joints, error, iterations)."""
    if unreachable and limits is None:
        bent = beyond_reach(joints[:, 0].tolist(), joints[:, 1].tolist(), joints[:, 2].tolist(), lengths.tolist(),
                            target.tolist(), None if pole is None else pole.tolist())
        if bent is not None:
            out = np.array(bent).T
            return out, math.dist(out[-1], target), 0
        return straight_toward(joints[0], target, lengths), math.dist(joints[0], target) - float(lengths.sum()), 0
    (xs, ys, zs), error, iterations = iterate(
        joints[:, 0].tolist(), joints[:, 1].tolist(), joints[:, 2].tolist(), lengths.tolist(),
        (float(target[0]), float(target[1]), float(target[2])), pole, dirs, tolerance, max_iterations,
        min_improvement, limits)
    return np.array([xs, ys, zs]).T, error, iterations


def _two_bones(joints: np.ndarray, target: np.ndarray, pole: np.ndarray | Sequence[float] | None,
               lengths: np.ndarray | Sequence[float]) -> tuple[np.ndarray, float, int]:
    """Two bones: the analytic pose in the start's plane (its middle joint on the side it starts on, or
    rolled to the pole), where FABRIK converges; used for limited two-bone chains, where limited FABRIK
    crawls near full extension."""
    points = law_of_cosines_points(joints.tolist(), [float(c) for c in target],
                             None if pole is None else [float(c) for c in pole], float(lengths[0]), float(lengths[1]))
    return np.array(points), math.dist(points[2], target), 1


def solve_points(
    points: Sequence[Sequence[float]],
    target: Sequence[float],
    pole: Sequence[float] | None = None,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    min_improvement: float = DEFAULT_MIN_IMPROVEMENT,
    softness: float = DEFAULT_SOFTNESS,
    use_stretch: bool = False,
    max_stretch: float = DEFAULT_MAX_STRETCH,
) -> tuple[list[Point], float, int]:
    """:func:`solve_chain` without limits on plain floats: 3D joints ``[(x, y, z), ...]`` in and out.

    For callers that solve a few short chains and already hold floats (the Blender layer's few-chain
    path): validating and converting through numpy would cost more than the solve. Raises
    ``ValueError`` like :func:`solve_chain`. Returns ``(joints, error, iterations)``; with stretch the
    joints are those of the stretched chain, whose factor :func:`.soft.stretch_factor` gives.
    """
    xs, ys, zs = [float(p[0]) for p in points], [float(p[1]) for p in points], [float(p[2]) for p in points]
    n = len(xs) - 1
    tx, ty, tz = float(target[0]), float(target[1]), float(target[2])
    if not math.isfinite(sum(xs) + sum(ys) + sum(zs) + tx + ty + tz):
        raise ValueError("joints or target contain NaN or infinity")
    check_settings(tolerance, max_iterations, min_improvement)
    # Square roots of sums of squares in x, y, z order, as the numpy set-up computes them, so that
    # borderline cases (a target at exactly the chain's reach) are decided the same way.
    sqrt = math.sqrt
    lengths = [sqrt((xs[i + 1] - xs[i]) ** 2 + (ys[i + 1] - ys[i]) ** 2 + (zs[i + 1] - zs[i]) ** 2) for i in range(n)]
    limit = ZERO_LENGTH * max(max(lengths), 1.0)
    for i, length in enumerate(lengths):
        if length <= limit:
            raise ValueError(f"joints: bone {i} has zero length")
    total = sum(lengths)
    root = (xs[0], ys[0], zs[0])
    check_soft_options(softness, use_stretch, max_stretch)
    if softness or use_stretch:
        goal, factor, eased_in = ease_target(root, (tx, ty, tz), total, softness, use_stretch, max_stretch)
        if factor != 1.0:
            xs = [root[0] + (x - root[0]) * factor for x in xs]
            ys = [root[1] + (y - root[1]) * factor for y in ys]
            zs = [root[2] + (z - root[2]) * factor for z in zs]
        out, _, iterations = solve_points(list(zip(xs, ys, zs)), goal, pole, tolerance=tolerance,
                                          max_iterations=max_iterations, min_improvement=min_improvement)
        if eased_in:
            out = settle_points(out, goal)
        return out, math.dist(out[-1], (tx, ty, tz)), iterations
    return solve_floats(xs, ys, zs, lengths, (tx, ty, tz), pole, tolerance, int(max_iterations), min_improvement)


def solve_floats(xs: list[float], ys: list[float], zs: list[float], lengths: list[float], target: Point,
                 pole: Sequence[float] | None, tolerance: float, max_iterations: int,
                 min_improvement: float = DEFAULT_MIN_IMPROVEMENT) -> tuple[list[Point], float, int]:
    """:func:`solve_points` past its checks, without softness or stretch, for a caller that already holds
    what they check: finite joint coordinates ``xs, ys, zs`` (not changed), their bone ``lengths`` as
    :func:`solve_points` computes them (each above zero), a finite ``target`` of three floats and valid
    settings. The pole is still checked."""
    tx, ty, tz = target
    rx, ry, rz = xs[0], ys[0], zs[0]
    total = sum(lengths)
    sqrt = math.sqrt
    distance = sqrt((tx - rx) ** 2 + (ty - ry) ** 2 + (tz - rz) ** 2)
    if pole is not None:
        pole = (float(pole[0]), float(pole[1]), float(pole[2]))
        if not math.isfinite(sum(pole)):
            raise ValueError("pole contains NaN or infinity")
    if distance >= total:  # unreachable: laid straight toward the target (just beyond reach, nearly: beyond_reach)
        bent = beyond_reach(xs, ys, zs, lengths, target, pole)
        if bent is not None:
            out = list(zip(*bent))
            return out, math.dist(out[-1], target), 0
        ux, uy, uz = (tx - rx) / distance, (ty - ry) / distance, (tz - rz) / distance
        out, reach = [(rx, ry, rz)], 0.0
        for length in lengths:
            reach += length
            out.append((rx + reach * ux, ry + reach * uy, rz + reach * uz))
        return out, distance - total, 0
    cx, cy, cz = curled_start(xs, ys, zs, lengths, target, pole)
    if cx is xs:  # returned unchanged: iterate works on copies
        cx, cy, cz = xs[:], ys[:], zs[:]
    (cx, cy, cz), error, iterations = iterate(cx, cy, cz, lengths, target, pole, None, tolerance, max_iterations,
                                              min_improvement, None)
    return list(zip(cx, cy, cz)), error, iterations


def iterate(
    xs: list[float],
    ys: list[float],
    zs: list[float],
    L: list[float],
    target: Point,
    pole: np.ndarray | Sequence[float] | None,
    dirs: np.ndarray | Sequence[Sequence[float]] | None,
    tolerance: float,
    max_iterations: int,
    min_improvement: float,
    limits: ResolvedLimits | None,
) -> tuple[tuple[list[float], list[float], list[float]], float, int]:
    """The backward-forward passes on one reachable chain held as coordinate lists (changed in place).

    ``dirs``: each bone's unit direction, the fallback where a joint lands on the one it is pulled
    toward; None (without limits only): the directions of the given pose, worked out when needed.
    Returns the best pose seen as ``(xs, ys, zs)``, its tip error and the iterations used.
    """
    n = len(L)
    tx, ty, tz = target
    rx, ry, rz = xs[0], ys[0], zs[0]
    tiny = EPS * sum(L)
    sqrt = math.sqrt
    error = sqrt((xs[n] - tx) ** 2 + (ys[n] - ty) ** 2 + (zs[n] - tz) ** 2)
    if limits is None:
        tolerance = min(tolerance, SETTLE * math.fsum(L))
        if error <= tolerance:
            # The start (.start.curled_start) already faces the pole.
            return (xs, ys, zs), error, 0
        if dirs is None:
            dirs = [((xs[i + 1] - xs[i]) / L[i], (ys[i + 1] - ys[i]) / L[i], (zs[i + 1] - zs[i]) / L[i])
                    for i in range(n)]
    assert dirs is not None

    best: tuple[list[float], list[float], list[float]] | None = None
    best_error = math.inf
    previous = error
    stalled = 0
    iterations = 0
    for iterations in range(1, max_iterations + 1):  # noqa: B007 (the count is returned)
        # Tip to root: pin the tip on the target, pull each joint along toward its child.
        xs[n], ys[n], zs[n] = tx, ty, tz
        if limits is None:
            # The joint just placed is carried in locals (ax, ay, az): list indexing costs as much as math.
            ax, ay, az = tx, ty, tz
            for i in range(n - 1, -1, -1):
                dx, dy, dz = xs[i] - ax, ys[i] - ay, zs[i] - az
                d = sqrt(dx * dx + dy * dy + dz * dz)
                if d > tiny:
                    r = L[i] / d
                    ax = xs[i] = ax + dx * r
                    ay = ys[i] = ay + dy * r
                    az = zs[i] = az + dz * r
                else:
                    u = dirs[i]
                    ax = xs[i] = ax - u[0] * L[i]
                    ay = ys[i] = ay - u[1] * L[i]
                    az = zs[i] = az - u[2] * L[i]
        else:
            backward_limited(xs, ys, zs, L, np.asarray(dirs), limits, tiny)
        # With limits the pole turns joints before the limited pass, so the pose it returns keeps
        # every limit; without, it turns them last, so the returned pose bends exactly to the pole.
        if pole is not None and limits is not None:
            turn_toward_pole(xs, ys, zs, pole, tiny)
        # Root to tip: pin the root back, pull each joint toward its parent.
        xs[0], ys[0], zs[0] = rx, ry, rz
        if limits is None:
            ax, ay, az = rx, ry, rz
            for i in range(n):
                dx, dy, dz = xs[i + 1] - ax, ys[i + 1] - ay, zs[i + 1] - az
                d = sqrt(dx * dx + dy * dy + dz * dz)
                if d > tiny:
                    r = L[i] / d
                    ax = xs[i + 1] = ax + dx * r
                    ay = ys[i + 1] = ay + dy * r
                    az = zs[i + 1] = az + dz * r
                else:
                    u = dirs[i]
                    ax = xs[i + 1] = ax + u[0] * L[i]
                    ay = ys[i + 1] = ay + u[1] * L[i]
                    az = zs[i + 1] = az + u[2] * L[i]
            if pole is not None:
                turn_toward_pole(xs, ys, zs, pole, tiny, target)
        else:
            forward_limited(xs, ys, zs, L, np.asarray(dirs), limits, tiny)
        error = sqrt((xs[n] - tx) ** 2 + (ys[n] - ty) ** 2 + (zs[n] - tz) ** 2)
        if error < best_error:
            best_error, best = error, (xs[:], ys[:], zs[:])
        stalled = stalled + 1 if previous - error < min_improvement * previous else 0
        if error <= tolerance or stalled >= STALL_PATIENCE:
            break
        previous = error
    assert best is not None
    return best, best_error, iterations


def run_limited(
    joints: np.ndarray,
    target: np.ndarray,
    pole: np.ndarray | None,
    dirs: np.ndarray,
    lengths: np.ndarray,
    unreachable: bool,
    tolerance: float,
    max_iterations: int,
    min_improvement: float,
    limits: ResolvedLimits,
    original: np.ndarray | None = None,
) -> tuple[np.ndarray, float, int, bool]:
    """:func:`run_fabrik` with limits, restarted from other poses when it settles short of the target.

    Limited FABRIK can settle where no pass moves it any more, depending on where it starts. When the
    given pose fails, it starts again from ``original`` (the pose without IK, when ``joints`` is the
    curled start), from that pose turned rigidly to aim at the target, then from the chain laid
    straight toward it, then refines the best pose by :func:`ccd_limited`, keeping the best. All fixed,
    so results stay deterministic; none of it runs when the first start reaches. Iterations (and CCD
    sweeps) are summed; ``converged`` is False when the final refinement ran out of sweeps.
    """
    out, error, iterations = run_fabrik(joints, target, pole, dirs, lengths, unreachable, tolerance,
                                        max_iterations, min_improvement, limits)
    if error <= tolerance:
        return out, error, iterations, True
    base = joints if original is None else original
    for start in ([] if original is None else [original]) + _restarts(base, target, lengths):
        again, again_error, used = run_fabrik(start, target, pole, dirs, lengths, unreachable, tolerance,
                                              max_iterations, min_improvement, limits)
        iterations += used
        if again_error < error:
            out, error = again, again_error
        if error <= tolerance:
            break
    if error > tolerance:
        # Constrained FABRIK's fixed points are not cyclic coordinate descent's: a few CCD sweeps from
        # the best pose free most of what is left (limit-respecting targets: 98.1% -> 99.7% reached).
        refined, refined_error, used = ccd_limited(out, target, dirs, lengths, tolerance, max_iterations,
                                                   min_improvement, limits)
        iterations += used
        if refined_error < error:
            out, error = refined, refined_error
        return out, error, iterations, error <= tolerance or used < max_iterations
    return out, error, iterations, True


def ccd_limited(joints: np.ndarray, target: np.ndarray, dirs: np.ndarray, lengths: np.ndarray,
                tolerance: float, max_iterations: int, min_improvement: float,
                limits: ResolvedLimits) -> tuple[np.ndarray, float, int]:
    """Cyclic coordinate descent with limits: each sweep turns the chain about every joint, tip to
    root, to swing the tip toward the target, each turn followed by a limited root-to-tip pass that
    puts every bone back inside its limit (lengths exact). Returns the best pose, its error and the
    sweeps used."""
    n = len(lengths)
    tiny = EPS * float(lengths.sum())
    xs, ys, zs = joints[:, 0].tolist(), joints[:, 1].tolist(), joints[:, 2].tolist()
    L = lengths.tolist()
    tx, ty, tz = (float(c) for c in target)
    best, best_error = joints, math.dist(joints[-1], target)
    previous, stalled, sweeps = best_error, 0, 0
    for sweeps in range(1, max_iterations + 1):  # noqa: B007 (the count is returned)
        for i in range(n - 1, -1, -1):
            px, py, pz = xs[i], ys[i], zs[i]
            a = np.array([xs[n] - px, ys[n] - py, zs[n] - pz])
            b = np.array([tx - px, ty - py, tz - pz])
            na, nb = math.sqrt(float(a @ a)), math.sqrt(float(b @ b))
            if na <= tiny or nb <= tiny:
                continue
            r = matrix_from_two_vectors(a / na, b / nb).tolist()
            for k in range(i + 1, n + 1):
                vx, vy, vz = xs[k] - px, ys[k] - py, zs[k] - pz
                xs[k] = px + r[0][0] * vx + r[0][1] * vy + r[0][2] * vz
                ys[k] = py + r[1][0] * vx + r[1][1] * vy + r[1][2] * vz
                zs[k] = pz + r[2][0] * vx + r[2][1] * vy + r[2][2] * vz
            # Back inside the limits after every turn, not once per sweep: each turn then starts from
            # a pose the limits allow (once per sweep freed almost nothing).
            forward_limited(xs, ys, zs, L, np.asarray(dirs), limits, tiny)
        error = math.sqrt((xs[n] - tx) ** 2 + (ys[n] - ty) ** 2 + (zs[n] - tz) ** 2)
        if error < best_error:
            best, best_error = np.array([xs, ys, zs]).T, error
        stalled = stalled + 1 if previous - error < min_improvement * previous else 0
        if error <= tolerance or stalled >= STALL_PATIENCE:
            break
        previous = error
    return best, best_error, sweeps


def _restarts(joints: np.ndarray, target: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
    root = joints[0]
    aim = joints[-1] - root
    goal = target - root
    if np.linalg.norm(goal) <= EPS * float(lengths.sum()):
        return []
    starts = []
    if np.linalg.norm(aim) > EPS * float(lengths.sum()):
        turn = matrix_from_two_vectors(aim / np.linalg.norm(aim), goal / np.linalg.norm(goal))
        starts.append(root + (joints - root) @ turn.T)
    starts.append(straight_toward(root, target, lengths))
    return starts


def turn_toward_pole(xs: list[float], ys: list[float], zs: list[float], pole: np.ndarray | Sequence[float],
                     tiny: float, target: Sequence[float] | None = None) -> None:
    """Roll the chain's bend to face the pole, without changing its shape or its root.

    The chain turns rigidly about the line from the root to ``target`` (default: to the tip, which then
    stays put) until its mean bend (the mean of the interior joints seen from the root, across that
    line) points to the pole's side. About the target's line, a chain whose plane holds the target
    keeps holding it, so planar solves stay planar to the last digit.

    A rigid roll and nothing else: the bend keeps the shape the passes gave it, so a planar chain stays
    planar (its bones keep bending about their hinge axes), and a pole placed on the chain's own mean
    bend moves nothing (where ``pose.fabrik_chain_add`` puts it). Swinging each joint toward the pole
    about its neighbours' line (seed 002's control-object method) reshaped non-planar chains: adding a
    pole there moved their joints by 4-13% of the chain's length.
    """
    n = len(xs) - 1
    if n < 2:
        return
    px, py, pz = (float(c) for c in pole)
    # Rigid roll about the axis k: the angle from the mean bend m to the pole direction w.
    ax, ay, az = xs[0], ys[0], zs[0]
    kx, ky, kz = xs[n] - ax, ys[n] - ay, zs[n] - az
    last = n
    if target is not None:
        gx, gy, gz = float(target[0]) - ax, float(target[1]) - ay, float(target[2]) - az
        if gx * gx + gy * gy + gz * gz > tiny * tiny:
            kx, ky, kz, last = gx, gy, gz, n + 1
    k = math.sqrt(kx * kx + ky * ky + kz * kz)
    if k <= tiny:
        return
    kx, ky, kz = kx / k, ky / k, kz / k
    mx = sum(xs[1:n]) / (n - 1) - ax
    my = sum(ys[1:n]) / (n - 1) - ay
    mz = sum(zs[1:n]) / (n - 1) - az
    turn = roll_turn_floats(mx, my, mz, px - ax, py - ay, pz - az, kx, ky, kz, tiny)
    if turn is None:
        return
    c, s = turn
    for i in range(1, last):
        # Rodrigues' rotation of the joint's offset from the root about unit axis k by (c, s).
        vx, vy, vz = xs[i] - ax, ys[i] - ay, zs[i] - az
        t = (vx * kx + vy * ky + vz * kz) * (1.0 - c)
        cx, cy, cz = ky * vz - kz * vy, kz * vx - kx * vz, kx * vy - ky * vx
        xs[i] = ax + vx * c + cx * s + kx * t
        ys[i] = ay + vy * c + cy * s + ky * t
        zs[i] = az + vz * c + cz * s + kz * t


def backward_limited(xs: list[float], ys: list[float], zs: list[float], L: list[float], dirs: np.ndarray,
                     limits: ResolvedLimits, tiny: float) -> None:
    """Tip-to-root pass that turns each bone so its already-placed child sits inside the child's limit
    (:meth:`.LimitFrames.fit_child`). The root-to-tip pass enforces the limits exactly; this pass keeps
    it from undoing them each time."""
    n = len(L)
    child = None
    for i in range(n - 1, -1, -1):
        d = np.array([xs[i + 1] - xs[i], ys[i + 1] - ys[i], zs[i + 1] - zs[i]])
        norm = math.sqrt(float(d @ d))
        d = d / norm if norm > tiny else dirs[i]
        if child is not None:
            d = limits.fit_child(i, d, i + 1, child)
        step = d * L[i]
        xs[i], ys[i], zs[i] = xs[i + 1] - float(step[0]), ys[i + 1] - float(step[1]), zs[i + 1] - float(step[2])
        child = d


def forward_limited(xs: list[float], ys: list[float], zs: list[float], L: list[float], dirs: np.ndarray,
                    limits: ResolvedLimits, tiny: float) -> None:
    """Root-to-tip pass that keeps every bone inside its limit, carrying bone frames along (a bone above a
    hinge rolls toward where its child points next: :meth:`.ResolvedLimits.frame_for`)."""
    parent = limits.base_frame
    n = len(L)
    for i in range(n):
        d = np.array([xs[i + 1] - xs[i], ys[i + 1] - ys[i], zs[i + 1] - zs[i]])
        norm = math.sqrt(float(d @ d))
        d = d / norm if norm > tiny else dirs[i]
        d = limits.constrain(parent, i, d)
        step = d * L[i]
        xs[i + 1], ys[i + 1], zs[i + 1] = xs[i] + float(step[0]), ys[i] + float(step[1]), zs[i] + float(step[2])
        child = None
        if i + 1 < n and limits.rolls(i):
            c = np.array([xs[i + 2] - xs[i + 1], ys[i + 2] - ys[i + 1], zs[i + 2] - zs[i + 1]])
            norm = math.sqrt(float(c @ c))
            child = c / norm if norm > tiny else dirs[i + 1]
        parent = limits.frame_for(parent, i, d, child)
