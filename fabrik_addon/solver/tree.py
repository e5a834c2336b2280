"""FABRIK for trees of joints with several end effectors (chains that share bones).

Tip-to-root, every joint that branches (a *sub-base*) takes the centroid of the positions its
branches propose for it, weighted by the effector weights below each branch; root-to-tip then runs
out through every branch (Aristidou and Lasenby's multiple end effector FABRIK). Solving the chains
one after another instead makes them fight over the shared bones.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from .checks import ZERO_LENGTH, check_finite, check_points
from .fabrik import (
    DEFAULT_MAX_ITERATIONS,
    DEFAULT_MIN_IMPROVEMENT,
    DEFAULT_TOLERANCE,
    STALL_PATIENCE,
    check_settings,
    pad3,
    turn_toward_pole,
)
from .limits import ConeLimit, HingeLimit, Limit, LimitFrames, hinges_face_the_normal, hinges_in_the_plane
from .prepare import EPS
from .rotations import matrix_from_two_vectors, skew
from .soft import (
    DEFAULT_MAX_STRETCH,
    DEFAULT_SOFTNESS,
    check_soft_arrays,
    ease_tree_targets,
    stretch_branches,
    tree_branches,
)
from .tree_fit import _exps, fit_tree, fits, pole_sides
from .tree_settle import children_of, nearest_pose, nearest_turns

# A limited pole branch whose bend lies more than this many degrees off its pole's side of the plane of its root,
# target and pole (:func:`off_plane`) is fitted again with the plane held (:func:`_held_to_planes`; goal 1 degree).
PLANE_SLACK = 0.1
# A held fit from the start pose that reaches with every such bend within this many degrees of its plane is kept
# without trying the passes' pose, which carries the inputs' float rounding: a Y on a coned 2-bone trunk ended
# 0.13 degree off from the start pose, 0.11 from the passes' pose, which put two rotation modes 2.1e-3 apart.
PLANE_HELD = 0.25
# A restart from an aimed start (:func:`_restarted`) replaces the pose kept so far only where it reaches every
# target or brings the farthest one nearer by more than this many tolerances. Beyond reach the fits of every start
# can settle on one family of poses, equally far (a torso, one arm's target beyond reach, its coned spine: five
# starts 0.971086 +- 1e-7 from it, each fit elsewhere on the family), and a strict comparison let the float
# rounding of the inputs pick the start: two rotation modes 0.35 apart.
RESTART_GAIN = 0.01


@dataclass(frozen=True)
class TreeResult:
    """Outcome of :func:`solve_tree`.

    Attributes
    ----------
    joints : ndarray, shape (J, D)
    errors : ndarray, shape (E,)
        Distance from each effector to its target.
    iterations : int
    reached : ndarray of bool, shape (E,)
        ``errors <= tolerance`` per effector.
    stretch : ndarray, shape (E,)
        Factor each effector's own branch was scaled by (ones without ``use_stretch``).
    bone_stretch : ndarray, shape (J,)
        Factor of the bone ending at each joint (entry 0 unused, ones where nothing stretched).
    converged : bool
        The solve settled, as :attr:`.SolveResult.converged`: every scored effector reached, or the
        passes stopped bringing them closer; False when the iterations ran out while still closing in.
    turns : ndarray, shape (J, 3, 3), or None
        With joint limits: the world turn, from the start pose, of the bone ending at each joint (row 0
        the identity) in the frames the limits were measured in (:func:`bone_turns`): the rolls a write
        must give the bones for the pose written to be the pose solved. None without limits (nothing
        fixes the rolls).
    continued : str
        Where the pose is the swing fit from :func:`solve_tree`'s ``near``: ``"held"`` (its limited pole branches
        held toward their poles' planes) or ``"fit"`` (not held); ``""`` otherwise.
    """

    joints: np.ndarray
    errors: np.ndarray
    iterations: int
    reached: np.ndarray
    stretch: np.ndarray = field(default=None)  # type: ignore[arg-type]
    bone_stretch: np.ndarray = field(default=None)  # type: ignore[arg-type]
    converged: bool = True
    turns: np.ndarray | None = None
    continued: str = ""

    def __post_init__(self) -> None:
        if self.stretch is None:
            object.__setattr__(self, "stretch", np.ones(len(self.errors)))
        if self.bone_stretch is None:
            object.__setattr__(self, "bone_stretch", np.ones(len(self.joints)))


def solve_tree(
    joints: object,
    parents: object,
    effectors: object,
    targets: object,
    *,
    weights: object = None,
    poles: object = None,
    rigid: object = None,
    limits: Sequence[Limit] | None = None,
    frames: object = None,
    rest_offsets: object = None,
    base_frame: object = None,
    tolerance: float = DEFAULT_TOLERANCE,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    min_improvement: float = DEFAULT_MIN_IMPROVEMENT,
    softness: object = DEFAULT_SOFTNESS,
    use_stretch: object = False,
    max_stretch: object = DEFAULT_MAX_STRETCH,
    near: object = None,
) -> TreeResult:
    """Solve a tree of joints that reaches for several targets at once.

    Parameters
    ----------
    joints : array_like, shape (J, D)
        Start pose, D = 2 or 3. Never mutated.
    parents : array_like of int, shape (J,)
        Parent joint of each joint; -1 for the one root, and every parent listed before its children.
        Bone lengths are the distances between each joint and its parent.
    effectors : array_like of int, shape (E,)
        Joints that reach for the targets (distinct, not the root).
    targets : array_like, shape (E, D)
    weights : array_like, shape (E,), optional
        Pull of each effector on shared joints, in [0, 1] (default 1). A weight of 0 leaves the other
        effectors solving as if that branch were not there.
    poles : array_like, shape (E, D), optional
        Rows of NaN mean no pole. A pole turns the joints between its effector and the nearest
        sub-base (or the root) toward it.
    rigid : sequence of int, optional
        Joints whose children are points on one rigid body (a bone whose children are offset from its
        tail): those children turn together, keeping their distances to each other, instead of each
        swinging on its own.
    limits : sequence of ConeLimit, HingeLimit or None, length J, optional
        ``limits[j]`` limits the bone ending at joint ``j`` (entry 0 is unused), measured as for chains:
        in the frame of the bone ending at its parent joint (``base_frame`` for bones leaving the root)
        turned by the bone's rest offset. Honoured in every root-to-tip pass, so the returned pose never
        breaks one. Children of a ``rigid`` joint move as one body and cannot carry limits.
    frames : ndarray, shape (J, 3, 3), optional
        Start-pose frame of the bone ending at each joint (row 0 unused). Default: parallel transport.
    rest_offsets : ndarray, shape (J, 3, 3), optional
        Rest rotation of each bone relative to its parent bone's frame. Default: the start pose is rest.
    base_frame : ndarray, shape (3, 3), optional
        Frame of the root's parent. Default: the identity (armature space).
    tolerance, max_iterations, min_improvement
        As in :func:`solve_chain`; judged on the largest error of the effectors with weight > 0.
    softness, use_stretch, max_stretch : number/bool or array_like, shape (E,)
        Soft IK and stretch per effector: the target eased as for the chain from the root to the
        effector (:func:`.soft.ease_tree_targets`); stretch scales only the effector's own branch
        (:func:`.soft.tree_branches`), never bones other branches hang from: after a first solve, each
        stretching branch is grown as a chain from where its root landed and the tree is solved
        again from there (:func:`.soft.stretch_branches`).
    near : array_like, shape (J, D), optional
        A pose of the same tree to continue from (the bones at their lengths, the root at ``joints[0]``; its limits
        need not hold): the same tree solved with some limits left out, say. With limits the swing fit handles
        (cones, hinges) and no stretch, the solve is first the fit from ``near`` (:func:`.tree_fit.fit_tree`: proximal
        rounds, pulled toward where they start), then, where limited branches have poles, the fit held toward their
        poles' planes from where the first left the tree. The held fit where it reaches every weighted target, else
        the first where it does, is returned (``continued``; 0 iterations): it follows ``near`` and the targets
        where the rounds keep to one path (docs/trees.md, "Continued from the first solve"). Where neither reaches,
        the solve is as without ``near``.

    Returns
    -------
    TreeResult
        The best pose seen when not every weighted effector was reached.
    """
    inputs = _check_inputs(joints, parents, effectors, targets, weights, poles, rigid,
                           (tolerance, max_iterations, min_improvement))
    start, parent, effector, tgt, weight, pole, rigid_set = (inputs.start, inputs.parent, inputs.effector,
                                                             inputs.targets, inputs.weights, inputs.poles, inputs.rigid)
    count, dim = start.shape
    resolved = None
    if limits is not None:
        resolved = _resolve_tree_limits(limits, frames, rest_offsets, base_frame, pad3(start), parent, rigid_set,
                                        planar=dim == 2)
        if dim == 2:  # every limit as a turn about the plane's normal, where no solve can leave the plane
            on_rigid = {j for j in range(1, count) if int(parent[j]) in rigid_set}
            resolved = hinges_in_the_plane(resolved, parent, on_rigid) or resolved

    pts = pad3(start)
    lengths = np.zeros(count)
    lengths[1:] = np.linalg.norm(pts[1:] - pts[parent[1:]], axis=1)
    if (lengths[1:] <= ZERO_LENGTH * max(float(lengths.max()), 1.0)).any():
        bad = int(np.flatnonzero(lengths[1:] <= ZERO_LENGTH * max(float(lengths.max()), 1.0))[0]) + 1
        raise ValueError(f"joints: the bone ending at joint {bad} has zero length")
    given, stretch, bone_stretch = tgt, None, None
    soft, grow, cap = check_soft_arrays(softness, use_stretch, max_stretch, len(effector), "E")
    grow &= weight > 0.0
    if soft.any():
        tgt = ease_tree_targets(pts[0], parent, lengths, effector, tgt, soft)
    near_pts = None if near is None else pad3(check_points(near, (count, dim), "near"))
    continued = None
    if near_pts is not None and resolved is not None and fits(resolved) and not grow.any():
        continued = _continued(near_pts, pts, (parent, lengths, effector, tgt, weight, pole, rigid_set, resolved,
                                               tolerance))
    if continued is not None:
        out, errors, fitted, how = continued
        iterations, settled = 0, True
    else:
        how = ""
        out, errors, iterations, settled, fitted = _run_restarting(pts, parent, lengths, effector, tgt, weight, pole,
                                                                   rigid_set, resolved, tolerance,
                                                                   int(max_iterations), min_improvement,
                                                                   planar=dim == 2)
    if grow.any():
        # Stretch: each stretching branch is grown as a chain from where the first solve put its root,
        # then the tree is solved again from that pose (the other branches barely move).
        branches = tree_branches(parent, effector, rigid_set)
        grown, tgt, stretch, bone_stretch = stretch_branches(out, parent, lengths, branches, given, tgt, soft, grow,
                                                             cap)
        lengths = lengths * bone_stretch
        out, errors, used, settled, fitted = _run_restarting(grown, parent, lengths, effector, tgt, weight, pole,
                                                             rigid_set, resolved, tolerance, int(max_iterations),
                                                             min_improvement, planar=dim == 2, reference=pts)
        iterations += used
    elif resolved is None and _settles(parent, effector, weight):
        out, errors = _settled(out, errors, pts, parent, lengths, effector, tgt, pole, rigid_set, tolerance)
    if tgt is not given:
        errors = np.linalg.norm(out[effector] - given, axis=1)
    reached = errors <= tolerance
    settled = settled or bool(reached[weight > 0.0].all())
    turns = None if resolved is None else bone_turns(out, pts, parent, rigid_set, resolved, *(fitted or ()))
    return TreeResult(out[:, :dim], errors, iterations, reached, stretch, bone_stretch, settled,  # type: ignore[arg-type]
                      turns, how)


def bone_turns(pose: np.ndarray, start: np.ndarray, parent: np.ndarray, rigid: set[int],
               limits: LimitFrames, bodies: dict[int, np.ndarray] | None = None,
               rolls: dict[int, float] | None = None) -> np.ndarray:
    """``(J, 3, 3)``: the world turn from ``start`` to ``pose`` of the bone ending at each joint, as the
    passes and the fit measure the limits in it: a rigid body's children turn with the body
    (:func:`_place_rigid`'s turn, exact for a pose whose body is rigid), a HINGE bone is its limit frame
    turned about X, any other bone follows its direction by the least turn from its start frame
    (:meth:`.LimitFrames.frame_at`). ``bodies``: rigid bodies' turns where the fit gave them (a body whose
    children leave one point rolls in the fit, which the pose does not record); ``rolls``: the roll (radians,
    about its direction) of each bone above a hinge that the fit rolled (:func:`.tree_fit.fit_tree`)."""
    count = len(pose)
    children = children_of(parent)
    xs, ys, zs = pose[:, 0].tolist(), pose[:, 1].tolist(), pose[:, 2].tolist()
    turns = np.tile(np.eye(3), (count, 1, 1))
    now: dict[int, np.ndarray] = {}
    for p in range(count):
        kids = children[p]
        if p in rigid and len(kids) >= 2:
            body = (kids, start[kids] - start[p], np.ones(len(kids)))
            turn = bodies[p] if bodies else _place_rigid(p, body, xs[:], ys[:], zs[:])
            for j in kids:
                turns[j], now[j] = turn, turn @ limits.frames[j]
            continue
        for j in kids:
            d = pose[j] - pose[p]
            d = d / np.linalg.norm(d)
            now[j] = limits.frame_at(now.get(p, limits.base_frame), j, d)
            if rolls and j in rolls:
                now[j] = _exps(rolls[j] * d) @ now[j]  # as the fit rolled it
            turns[j] = now[j] @ limits.frames[j].T
    return turns


def _settles(parent: np.ndarray, effector: np.ndarray, weight: np.ndarray) -> bool:
    """Whether the free tree's passes' pose is settled (:func:`_settled`): where every effector pulls and the tree
    is not one chain (some joint has several children, or an effector has one)."""
    counts = np.bincount(parent[1:], minlength=len(parent))
    return bool((weight > 0.0).all() and ((counts >= 2).any() or (counts[effector] >= 1).any()))


def _settled(out: np.ndarray, errors: np.ndarray, pts: np.ndarray, parent: np.ndarray, lengths: np.ndarray,
             effector: np.ndarray, tgt: np.ndarray, pole: np.ndarray | None, rigid: set[int],
             tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """A free fork's passes' pose settled by :func:`_nearest`, then each pole branch rolled to its pole."""
    out, errors = _nearest(out, pts, parent, lengths, effector, tgt, errors, rigid, tolerance)
    if pole is not None and not np.isnan(pole).all():
        # The settle leaves the poles out: each rolls its own branch after, as in the passes.
        xs, ys, zs = out[:, 0].tolist(), out[:, 1].tolist(), out[:, 2].tolist()
        _turn_branches(_pole_branches(parent, children_of(parent), effector, pole, rigid), pole, xs, ys, zs,
                       EPS * float(lengths.sum()))
        out = np.array([xs, ys, zs]).T
        errors = np.linalg.norm(out[effector] - tgt, axis=1)
    return out, errors


def _free_pose(pts: np.ndarray, args: tuple) -> np.ndarray:
    """The pose :func:`solve_tree` gives the tree with its limits left out: the passes, settled on a fork whose
    every effector pulls (:func:`_settled`); a function of the inputs, where limited passes are not."""
    parent, lengths, effector, tgt, weight, pole, rigid, _, tolerance, max_iterations, min_improvement = args
    out, errors, _, _ = _run(pts, parent, lengths, effector, tgt, weight, pole, rigid, None, tolerance, max_iterations,
                             min_improvement)
    if _settles(parent, effector, weight):
        out, errors = _settled(out, errors, pts, parent, lengths, effector, tgt, pole, rigid, tolerance)
    return out


def _nearest(out: np.ndarray, start: np.ndarray, parent: np.ndarray, lengths: np.ndarray, effector: np.ndarray,
             tgt: np.ndarray, errors: np.ndarray, rigid: set[int], tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """The pose the bones reach from the start by least-norm turns (:func:`.tree_settle.nearest_turns`)
    with the effectors on their targets; where that cannot be (a target out of reach), with the effectors
    the passes left outside the tolerance where they are. Where the turns do not get there, the passes'
    pose settled onto the one nearest the start in joint distances (:func:`.tree_settle.nearest_pose`).

    Every effector the passes brought within ``NEAR`` of the tree's length is first tried on its target,
    not only those within the tolerance: which effectors the passes had reached depended on the pass
    count and the tolerance (a 2-bone trunk's pose 1.7e-3 apart with 300 passes to 1e-5)."""
    children = children_of(parent)
    bodies = {p: (children[p], start[children[p]] - start[p], None) for p in rigid if len(children[p]) >= 2}
    near = errors <= max(tolerance, NEAR * float(lengths.sum()))
    tries = [{int(e): tgt[k] for k, e in enumerate(effector)}] if near.all() else []
    tries.append({int(e): (tgt[k] if errors[k] <= tolerance else out[e]) for k, e in enumerate(effector)})
    for fixed in tries:
        turned = nearest_turns(start, parent, fixed, rigid)
        if turned is not None:
            return turned, np.linalg.norm(turned[effector] - tgt, axis=1)
    for fixed in tries:
        settled = nearest_pose(out, start, parent, lengths, fixed, bodies)
        if settled is not out:
            break
    return settled, np.linalg.norm(settled[effector] - tgt, axis=1)


# :func:`_nearest` tries to put effectors the passes left this close (a fraction of the tree's length) on
# their targets.
NEAR = 0.01


@dataclass(eq=False)
class _TreeInputs:
    """:func:`solve_tree`'s arguments, checked; points in 3D."""

    start: np.ndarray  # (J, D) as given
    parent: np.ndarray  # (J,)
    effector: np.ndarray  # (E,)
    targets: np.ndarray  # (E, 3)
    weights: np.ndarray  # (E,)
    poles: np.ndarray | None  # (E, 3), NaN rows for none
    rigid: set[int]


def _check_inputs(joints: object, parents: object, effectors: object, targets: object, weights: object,
                  poles: object, rigid: object, settings: tuple[float, int, float]) -> _TreeInputs:
    """Check :func:`solve_tree`'s arguments (``settings``: tolerance, max_iterations, min_improvement),
    raising ``ValueError`` naming the first bad one."""
    start = np.array(joints, dtype=np.float64)
    if start.ndim != 2 or start.shape[1] not in (2, 3) or start.shape[0] < 2:
        raise ValueError(f"joints must have shape (J, 2) or (J, 3) with J >= 2, got {start.shape}")
    check_finite(start, "joints")
    count, dim = start.shape
    parent = _check_parents(parents, count)
    effector = np.array(effectors, dtype=np.int64).reshape(-1)
    if len(effector) == 0 or len(set(effector.tolist())) != len(effector):
        raise ValueError("effectors must list one or more distinct joints")
    if effector.min() < 0 or effector.max() >= count or (parent[effector] < 0).any():
        raise ValueError("effectors must be joint indices other than the root")
    tgt = pad3(check_points(targets, (len(effector), dim), "targets"))
    weight = np.ones(len(effector)) if weights is None else np.array(weights, dtype=np.float64).reshape(-1)
    if weight.shape != (len(effector),) or not np.isfinite(weight).all() or (weight < 0).any() or (weight > 1).any():
        raise ValueError(f"weights must be {len(effector)} numbers in [0, 1]")
    pole = None
    if poles is not None:
        pole = np.array(poles, dtype=np.float64)
        if pole.shape != (len(effector), dim):
            raise ValueError(f"poles must have shape {(len(effector), dim)}, got {pole.shape}")
        if np.isinf(pole).any():
            raise ValueError("poles contains infinity (use NaN rows for effectors without a pole)")
        pole = pad3(pole)
    check_settings(*settings)
    rigid_set = set() if rigid is None else {int(j) for j in np.array(rigid, dtype=np.int64).reshape(-1)}
    if any(not 0 <= j < count for j in rigid_set):
        raise ValueError("rigid must list joint indices")
    return _TreeInputs(start, parent, effector, tgt, weight, pole, rigid_set)


def _run_restarting(pts: np.ndarray, parent: np.ndarray, lengths: np.ndarray, effector: np.ndarray,
                    tgt: np.ndarray, weight: np.ndarray, pole: np.ndarray | None, rigid: set[int],
                    limits: TreeLimits | None, tolerance: float, max_iterations: int,
                    min_improvement: float, planar: bool = False,
                    reference: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, int, bool, tuple | None]:
    """:func:`_run`, and with limits again from aimed starts while short (``planar``: a 2D tree's, which stay in its
    plane); the kept pose's ``settled`` flag and, where it is a fit's, its rigid bodies' turns and rolls
    (:func:`.tree_fit.fit_tree`'s last two returns). ``reference``: the solve's start pose, which the limits' frames
    and the rigid bodies' turns belong to, where ``pts`` is another (a stretched tree's second solve); by default
    ``pts``."""
    args = (parent, lengths, effector, tgt, weight, pole, rigid, limits, tolerance, max_iterations, min_improvement)
    ref = pts if reference is None else reference
    out, errors, iterations, settled = _run(pts, *args, reference=ref)
    scored = weight > 0.0
    if limits is None:
        return out, errors, iterations, settled, None
    fitted = None
    if not (errors[scored] <= tolerance).all():
        out, errors, iterations, settled, fitted = _restarted(out, errors, iterations, settled, pts, args, planar, ref)
    if pole is not None and fits(limits):
        out, errors, fitted = _held_to_planes(out, errors, fitted, pts, args, ref)
    return out, errors, iterations, settled, fitted


def _restarted(out: np.ndarray, errors: np.ndarray, iterations: int, settled: bool, pts: np.ndarray, args: tuple,
               planar: bool, reference: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, bool, tuple | None]:
    """:func:`_run_restarting`'s limited passes that left the tree short (``out``), fitted and restarted (from
    ``pts``; ``reference`` as there)."""
    parent, lengths, effector, tgt, weight, pole, rigid, limits, tolerance = args[:9]
    scored = weight > 0.0
    # As for chains, limited FABRIK can settle short depending on where it starts: start again from the
    # tree turned to aim at the targets, rolled a quarter turn at a time, keep the best. Each pose the
    # passes leave short is fitted in swing coordinates (cones only: :mod:`.tree_fit`).
    fit = fits(limits)
    fitted = None
    if fit:
        out, errors, settled, fitted = _fitted(out, errors, settled, reference, parent, lengths, effector, tgt,
                                               weight, rigid, limits, tolerance)
    for start in _aimed_starts(pts, effector, tgt, planar) if not (errors[scored] <= tolerance).all() else []:
        again, again_errors, used, again_settled = _run(start, *args, reference=reference)
        iterations += used
        again_fitted = None
        if fit and not (again_errors[scored] <= tolerance).all():
            again, again_errors, again_settled, again_fitted = _fitted(again, again_errors, again_settled, reference,
                                                                       parent, lengths, effector, tgt, weight, rigid,
                                                                       limits, tolerance)
        farthest = again_errors[scored].max(initial=0.0)  # the kept pose misses a target (the loop's condition)
        if farthest <= tolerance or farthest < errors[scored].max(initial=0.0) - RESTART_GAIN * tolerance:
            out, errors, settled, fitted = again, again_errors, again_settled, again_fitted
        if (errors[scored] <= tolerance).all():
            break
    return out, errors, iterations, settled, fitted


def _held_to_planes(out: np.ndarray, errors: np.ndarray, fitted: tuple | None, pts: np.ndarray,
                    args: tuple, reference: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple | None]:
    """The pose, or, where a limited pole branch's bend lies more than PLANE_SLACK off its pole's side of the
    plane of its root, target and pole (:func:`off_plane`), the swing fit that holds it there too
    (:func:`.tree_fit.fit_tree`'s ``planes``): from the start pose, then, while still off, from the free tree's
    pose (:func:`_free_pose`), then from the passes' pose; the one nearest the planes kept where it is nearer
    than the passes' pose and leaves no effector farther than the tolerance or than it was (``reference``: as
    for :func:`_run_restarting`).

    The passes turn each pole branch to its pole, then keep its limits: where its cones forbid the plane from
    where the shared bones are, the branch leaves it (a torso with coned upper arms: elbows 11.9 degrees off;
    with hinged forearms too, 41), though a pose of the shared bones exists from which it need not. The start
    pose first: the passes' pose carries the float rounding of the inputs further (the same torso in four
    rotation modes came out 5.7e-5 apart from the start pose, 0.14 from the passes'); from the passes' pose
    alone the fit also settled short of reaching in the plane on 2 of 40 coned Ys (targets and poles from poses
    inside the cones; branches of up to 4 bones), from both on none. The free pose before the passes': where
    the fit from the start settles short, the passes' pose depends on how many passes ran (a hinge-tipped Y,
    inputs 6e-8 apart: 30 and 13 passes, fits from them 2.9e-2 of the length apart), the free pose does not.
    """
    parent, lengths, effector, tgt, weight, pole, rigid, limits, tolerance = args[:9]
    planes = _limited_planes(parent, effector, pole, rigid, limits)
    before = _off_plane(out, planes, tgt, effector)
    best = (before, out, errors, fitted)
    scored = weight > 0.0
    budget = np.maximum(errors, tolerance)
    for start in _held_starts(pts, out, args):
        if best[0] <= PLANE_SLACK:
            break
        held, *turns = fit_tree(start, reference, parent, lengths, effector, tgt, weight,
                                _body_turns(start, reference, parent, rigid), limits, tolerance, planes, budget)
        held_errors = np.linalg.norm(held[effector] - tgt, axis=1)
        off = _off_plane(held, planes, tgt, effector)
        if (held_errors[scored] <= budget[scored]).all() and off < best[0]:
            best = (off, held, held_errors, tuple(turns))
            if off <= PLANE_HELD and (held_errors[scored] <= tolerance).all():
                break
    return best[1], best[2], best[3]


def _limited_planes(parent: np.ndarray, effector: np.ndarray, pole: np.ndarray | None, rigid: set[int],
                    limits: TreeLimits) -> list[tuple[list[int], np.ndarray]]:
    """The pole branches (path root first, pole) that carry a joint limit: :func:`.tree_fit.fit_tree`'s ``planes``."""
    if pole is None:
        return []
    return [(path, pole[k]) for path, k in _pole_branches(parent, children_of(parent), effector, pole, rigid)
            if any(limits.limits[j] is not None for j in path[1:])]


def _continued(near: np.ndarray, pts: np.ndarray, args: tuple) -> tuple | None:
    """:func:`solve_tree`'s fit from ``near`` (``pts``: the start pose, which the limits' frames and the rigid bodies'
    turns belong to), then, where there are limited pole branches, the fit held toward their planes from where that
    left the tree (from ``near`` where it missed); the pose, its errors, its fit's turns (as :func:`_fitted`) and
    ``"held"`` or ``"fit"`` for the held fit where it reaches every weighted target, else the first fit where it
    does; None where neither does.

    A tree's limited branches solved again as lone chains from where a solve without their limits put the shared
    bones reach only where those limits allow from there: on forward-kinematics walks (targets always reachable with
    every limit) they came to the edge of what their limits allowed, where a hinged branch's reaching roll jumped,
    then missed, where the tree solved with every limit from its pose without IK took another pose (torsos, coned Ys:
    9-71 degrees in a frame). Fitted from the first solve's pose instead, the pose moves on with it. The held fit
    straight from ``near`` (a free branch projected onto its limits lands up to 3e-2 of the tree's length from its
    target) crept 0.4 radian through its rounds on a coned Y with hinged tips and poles, and two frames 5e-3 apart
    ended 0.24 apart; from the first fit's pose, which reaches, 3e-3 apart (0.49 -> 6e-3 on another Y)."""
    parent, lengths, effector, tgt, weight, pole, rigid, limits, tolerance = args
    scored = weight > 0.0
    fitted, bodies, rolls = fit_tree(near, pts, parent, lengths, effector, tgt, weight,
                                     _body_turns(near, pts, parent, rigid), limits, tolerance)
    errors = np.linalg.norm(fitted[effector] - tgt, axis=1)
    reaches = bool((errors[scored] <= tolerance).all())
    planes = _limited_planes(parent, effector, pole, rigid, limits)
    if planes:
        start, bodies = (fitted, bodies) if reaches else (near, _body_turns(near, pts, parent, rigid))
        held, *held_turns = fit_tree(start, pts, parent, lengths, effector, tgt, weight, bodies, limits, tolerance,
                                     planes, np.full(len(effector), tolerance))
        held_errors = np.linalg.norm(held[effector] - tgt, axis=1)
        if (held_errors[scored] <= tolerance).all():
            return held, held_errors, tuple(held_turns), "held"
    return (fitted, errors, (bodies, rolls), "fit") if reaches else None


def _held_starts(pts: np.ndarray, out: np.ndarray, args: tuple) -> Iterator[np.ndarray]:
    """:func:`_held_to_planes`' starts in turn, the free pose solved only when asked for."""
    yield pts
    yield _free_pose(pts, args)
    yield out


def off_plane(joints: np.ndarray, target: np.ndarray, pole: np.ndarray) -> float:
    """How far (degrees, seen from the root ``joints[0]``) a chain's bend lies from where its pole puts it: the
    angle of the mean of the joints between its root and its tip ``joints[-1]`` off the pole's side of the plane
    through the root, the target and the pole (on the other side, from the line from the root to the target,
    the nearest point of that half). For two bones, the elbow's. 0 where the pole lies on that line, and for one
    bone (no bend)."""
    if len(joints) < 3:
        return 0.0
    root = joints[0]
    bend = joints[1:-1].mean(axis=0) - root
    lines, sides = pole_sides(root[None], target, pole)
    line, side = lines[0], sides[0]
    if not (np.linalg.norm(line) > 0.0 and np.linalg.norm(bend) > 0.0 and np.linalg.norm(side) > 0.0):
        return 0.0
    across = bend - (bend @ line) * line
    away = float(np.linalg.norm(across)) if across @ side < 0.0 else abs(float(bend @ np.cross(line, side)))
    return math.degrees(math.asin(min(1.0, away / float(np.linalg.norm(bend)))))


def _off_plane(pose: np.ndarray, planes: list[tuple[list[int], np.ndarray]], tgt: np.ndarray,
               effector: np.ndarray) -> float:
    """:func:`off_plane`'s largest angle over the pole branches ``planes`` (path root first, pole) of ``pose``."""
    row = {int(e): k for k, e in enumerate(effector)}
    return max((off_plane(pose[path], tgt[row[path[-1]]], at) for path, at in planes), default=0.0)


def _fitted(out: np.ndarray, errors: np.ndarray, settled: bool, pts: np.ndarray, parent: np.ndarray,
            lengths: np.ndarray, effector: np.ndarray, tgt: np.ndarray, weight: np.ndarray, rigid: set[int],
            limits: TreeLimits, tolerance: float) -> tuple[np.ndarray, np.ndarray, bool, tuple | None]:
    """The passes' pose, or where the swing fit (:func:`.tree_fit.fit_tree`) takes it when that brings the
    weighted effectors closer, with its rigid bodies' turns and rolls (None: the passes' pose). A kept fit has settled
    (it stops at its own fixed point): a target beyond reach is "out of reach" even where the passes it started
    from ran out of iterations."""
    fitted, *turns = fit_tree(out, pts, parent, lengths, effector, tgt, weight, _body_turns(out, pts, parent, rigid),
                              limits, tolerance)
    fitted_errors = np.linalg.norm(fitted[effector] - tgt, axis=1)
    scored = weight > 0.0
    if fitted_errors[scored].max(initial=0.0) >= errors[scored].max(initial=0.0):
        return out, errors, settled, None
    return fitted, fitted_errors, True, tuple(turns)


def _body_turns(out: np.ndarray, pts: np.ndarray, parent: np.ndarray, rigid: set[int]) -> dict[int, np.ndarray]:
    """Each rigid body's turn from the start ``pts`` to the passes' pose ``out`` (:func:`_place_rigid`)."""
    children = children_of(parent)
    turns = {}
    for p in rigid:
        if len(children[p]) >= 2:
            xs, ys, zs = out[:, 0].tolist(), out[:, 1].tolist(), out[:, 2].tolist()  # each from the passes' pose
            turns[p] = _place_rigid(p, (children[p], pts[children[p]] - pts[p], np.ones(len(children[p]))),
                                    xs, ys, zs)
    return turns


def _aimed_starts(pts: np.ndarray, effector: np.ndarray, tgt: np.ndarray, planar: bool = False) -> list[np.ndarray]:
    """The start pose turned about the root so its effectors' centroid points at the targets'
    centroid, then rolled about that direction by 0, 90, 180 and 270 degrees; ``planar`` (a 2D tree, at z = 0):
    not rolled. Rolled a quarter turn, a 2D tree's start left the plane, and the passes from there kept a bone out
    of it, which the 2D pose then dropped (2D Ys with a rigid body and cones or hinges on their branches, targets
    from their own solves: 4 of 120 solves came back with bones shortened, by up to 0.26 of their length); rolled a
    half turn, it lay in the plane mirrored. (The limits such restarts broke there came from the rigid body's turn,
    measured from the restart's pose: :func:`_run`'s ``reference``.)"""
    root = pts[0]
    aim = pts[effector].mean(axis=0) - root
    goal = tgt.mean(axis=0) - root
    if np.linalg.norm(aim) <= EPS or np.linalg.norm(goal) <= EPS:
        return []
    u = goal / np.linalg.norm(goal)
    turn = matrix_from_two_vectors(aim / np.linalg.norm(aim), u)
    k = skew(u)
    starts = []
    for angle in (0.0,) if planar else (0.0, 0.5 * math.pi, math.pi, 1.5 * math.pi):
        roll = np.eye(3) + math.sin(angle) * k + (1.0 - math.cos(angle)) * k @ k
        starts.append(root + (pts - root) @ (roll @ turn).T)
    return starts


def _check_parents(parents: object, count: int) -> np.ndarray:
    parent = np.array(parents, dtype=np.int64).reshape(-1)
    if parent.shape != (count,):
        raise ValueError(f"parents must have one entry per joint ({count}), got {parent.shape[0]}")
    if parent[0] != -1 or (parent[1:] < 0).any():
        raise ValueError("joint 0 must be the only root (parent -1)")
    if (parent[1:] >= np.arange(1, count)).any():
        raise ValueError("every joint's parent must come before it")
    return parent


def _run(pts: np.ndarray, parent: np.ndarray, lengths: np.ndarray, effector: np.ndarray, tgt: np.ndarray,
         weight: np.ndarray, pole: np.ndarray | None, rigid: set[int], limits: TreeLimits | None,
         tolerance: float, max_iterations: int, min_improvement: float, *,
         reference: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """FABRIK passes over the tree from ``pts``: the best pose, its errors, the passes run and whether the
    passes stopped by reaching or stalling (False: all ``max_iterations`` used while still closing in);
    ``reference``: the solve's start pose, where ``pts`` is another (its rigid bodies' turns are measured from it).

    Where sub-bases average several pulls (``_Walk.forks``), the passes aim for ``SETTLE * tolerance``
    (and stop there or when they stall), and every pass whose move lines up with the one before is
    extrapolated (:class:`_Extrapolation`); the pose is judged reached against ``tolerance`` itself. A
    tree that is one chain runs the lone chains' passes unchanged.
    """
    walk = _Walk.of(pts, parent, lengths, effector, tgt, weight, pole, rigid, reference)
    xs, ys, zs = pts[:, 0].tolist(), pts[:, 1].tolist(), pts[:, 2].tolist()
    errors = walk.errors(xs, ys, zs, tgt)
    error = walk.largest(errors)
    if error <= tolerance and pole is None:
        return pts, errors, 0, True
    aim = SETTLE * tolerance if walk.forks else tolerance
    best: tuple | None = None
    best_error = math.inf
    previous = error
    stalled = 0
    iterations = 0
    settled = False
    jump = _Extrapolation(xs, ys, zs, walk.active)
    for iterations in range(1, max_iterations + 1):  # noqa: B007 (the count is returned)
        _backward(walk, xs, ys, zs, limits)
        # With limits the poles turn joints before the limited pass, so the pose it returns keeps every
        # limit; without, they turn them last, so the pose bends exactly to them.
        if limits is not None:
            _turn_branches(walk.branches, pole, xs, ys, zs, walk.tiny)
        _forward(walk, xs, ys, zs, limits)
        if limits is None:
            _turn_branches(walk.branches, pole, xs, ys, zs, walk.tiny)
        errors = walk.errors(xs, ys, zs, tgt)
        error = walk.largest(errors)
        if error < best_error:
            best_error, best = error, (xs[:], ys[:], zs[:], errors)
        stalled = stalled + 1 if previous - error < min_improvement * previous else 0
        if error <= aim or stalled >= STALL_PATIENCE:
            settled = True
            break
        previous = error
        if walk.forks:
            jump.next(xs, ys, zs)
    assert best is not None
    settled = settled or best_error <= tolerance
    return np.array(best[:3]).T, best[3], iterations, settled


# The passes aim this far inside the tolerance: where a tree's pose is not unique (a Y's trunk can lean
# anywhere both branches still reach from), the pose where the passes stop depends on how many they
# took; the closer they come to where they settle, the less a change in the pass count shows.
# Measured on a Y with branches at one point (400-frame walk at default settings): largest turn
# 1.27 degrees a frame stopping at the tolerance, 0.98 at 0.3 of it, 0.85 at 0.1 (converged: 0.78).
SETTLE = 0.1


@dataclass(eq=False)
class _Walk:
    """What every pass of :func:`_run` reads: the tree's shape, each joint's pull and its targets."""

    children: list[list[int]]
    kids: list[list[int]]  # children that pull
    active: list[bool]  # joints with a pulling effector at or below them
    parent: list[int]
    lengths: list[float]
    share: list[float]  # each joint's subtree pull
    own: list[float]  # an effector's own weight
    target_of: dict[int, tuple[float, float, float]]
    effector: np.ndarray
    scored: list[int]
    bodies: dict[int, tuple]  # rigid joint -> (children, start offsets, weights)
    start_dirs: list[tuple]
    root: tuple[float, float, float]
    branches: list[tuple[list[int], int]]  # pole branches (_pole_branches)
    tiny: float
    forks: bool  # some joint averages what several pulls propose (a sub-base; an effector with pulling children)

    @classmethod
    def of(cls, pts: np.ndarray, parent: np.ndarray, lengths: np.ndarray, effector: np.ndarray, tgt: np.ndarray,
           weight: np.ndarray, pole: np.ndarray | None, rigid: set[int], reference: np.ndarray | None = None) -> _Walk:
        count = len(pts)
        ref = pts if reference is None else reference
        children = children_of(parent)
        # Pull of each joint's subtree: the weights of the effectors at or below it.
        pull = np.zeros(count)
        for e, w in zip(effector, weight):
            j = int(e)
            while j >= 0:
                pull[j] += w
                j = int(parent[j])
        active = [bool(p > 0.0) for p in pull]
        share = pull.tolist()
        L = lengths.tolist()
        par = parent.tolist()
        # Rigid bodies: children offsets in the solve's start pose (``reference``: where the passes start from
        # an aimed restart, the pose the limits' frames belong to, so that a body's turn turns its children's
        # frames from those), weighted by their subtree's pull (a little for children that pull nothing, so they
        # still count).
        bodies = {p: (children[p], ref[children[p]] - ref[p], np.maximum(pull[children[p]], 1e-6))
                  for p in rigid if len(children[p]) >= 2}
        kids = [[c for c in children[j] if active[c]] for j in range(count)]
        target_of = {int(e): (float(t[0]), float(t[1]), float(t[2])) for e, t, w in zip(effector, tgt, weight) if w > 0}
        return cls(
            children=children, kids=kids,
            active=active, parent=par, lengths=L, share=share,
            own=[share[j] - sum(share[c] for c in children[j]) for j in range(count)],
            target_of=target_of,
            effector=effector, scored=[k for k in range(len(effector)) if weight[k] > 0.0], bodies=bodies,
            start_dirs=[(0.0, 0.0, 0.0)] + [tuple((pts[j] - pts[par[j]]) / L[j]) for j in range(1, count)],
            root=(float(pts[0, 0]), float(pts[0, 1]), float(pts[0, 2])),
            branches=_pole_branches(parent, children, effector, pole, rigid), tiny=EPS * float(lengths.sum()),
            forks=any(len(k) + (j in target_of) >= 2 for j, k in enumerate(kids)))

    def errors(self, xs: list[float], ys: list[float], zs: list[float], tgt: np.ndarray) -> np.ndarray:
        return np.array([math.dist((xs[e], ys[e], zs[e]), tgt[k]) for k, e in enumerate(self.effector)])

    def largest(self, errors: np.ndarray) -> float:
        return float(errors[self.scored].max()) if self.scored else 0.0


def _backward(walk: _Walk, xs: list[float], ys: list[float], zs: list[float], limits: TreeLimits | None) -> None:
    """Tip to root, children before parents: effectors on their targets, every other pulling joint at the
    weighted centroid of the positions its pulling children propose."""
    kids, L, tiny = walk.kids, walk.lengths, walk.tiny
    for j in range(len(xs) - 1, 0, -1):
        if not walk.active[j]:
            continue
        target = walk.target_of.get(j)
        if target is not None and not kids[j]:
            xs[j], ys[j], zs[j] = target
            continue
        sx = sy = sz = sw = 0.0
        if target is not None:
            w = walk.own[j]
            sx, sy, sz, sw = target[0] * w, target[1] * w, target[2] * w, w
        for c in kids[j]:
            if limits is not None and len(kids[c]) == 1 and limits.limits[kids[c][0]] is not None:
                px, py, pz = _toward_limited(c, kids[c][0], j, xs, ys, zs, L[c], walk.start_dirs[c], limits, tiny)
            else:
                px, py, pz = _toward(xs[c], ys[c], zs[c], xs[j], ys[j], zs[j], L[c], walk.start_dirs[c], -1.0, tiny)
            w = walk.share[c]
            sx, sy, sz, sw = sx + px * w, sy + py * w, sz + pz * w, sw + w
        xs[j], ys[j], zs[j] = sx / sw, sy / sw, sz / sw


def _forward(walk: _Walk, xs: list[float], ys: list[float], zs: list[float], limits: TreeLimits | None) -> None:
    """Root to tip, parents before children: every joint back at its length from its parent (rigid bodies
    turned as one, limits kept)."""
    L, tiny = walk.lengths, walk.tiny
    xs[0], ys[0], zs[0] = walk.root
    frame_now: dict[int, np.ndarray] = {}
    for p in range(len(xs)):
        if p in walk.bodies:
            turn = _place_rigid(p, walk.bodies[p], xs, ys, zs)
            if limits is not None:  # the body's children frames turn with the whole body
                for j in walk.children[p]:
                    frame_now[j] = turn @ limits.frames[j]
            continue
        for j in walk.children[p]:
            if limits is None:
                xs[j], ys[j], zs[j] = _toward(xs[p], ys[p], zs[p], xs[j], ys[j], zs[j], L[j], walk.start_dirs[j],
                                              1.0, tiny)
                continue
            d = _unit(xs, ys, zs, p, j, walk.start_dirs[j], tiny)
            d = limits.constrain(frame_now.get(p, limits.base_frame), j, d)
            xs[j], ys[j], zs[j] = xs[p] + float(d[0]) * L[j], ys[p] + float(d[1]) * L[j], zs[p] + float(d[2]) * L[j]
            frame_now[j] = limits.frame_at(frame_now.get(p, limits.base_frame), j, d)


# Extrapolation (:class:`_Extrapolation`): the two last moves must point this close to one way (cosine),
# and one jump goes at most this many moves ahead.
EXTRAPOLATE_COSINE = 0.999
EXTRAPOLATE_MOST = 50.0


class _Extrapolation:
    """Vector Aitken extrapolation of the passes: where two successive moves of the pulling joints point
    the same way and the second is ``r`` times the first (``r < 1``), the passes are closing in
    geometrically, and the next pass starts from ``r / (1 - r)`` moves ahead (at most
    :data:`EXTRAPOLATE_MOST`); then two plain passes before the next jump. The jump only changes where the
    next pass starts: every pose the passes return has come out of a whole pass (bone lengths and limits
    kept). Joints that pull nothing are left out, so an effector of weight 0 changes nothing.

    Where branches pull against each other, the sub-base centroids close in by a nearly constant ratio per
    pass (0.94-0.97 on a Y whose 2-bone branches reach to 99.9%: 70 passes on average, up to 110, to 1e-3
    of the chain's length). Extrapolated, the same Y needs 16 on average, 21 at most. Depends only on the
    passes of this solve, so the pose stays a function of the frame's inputs.
    """

    def __init__(self, xs: list[float], ys: list[float], zs: list[float], active: list[bool]) -> None:
        self.joints = [j for j, a in enumerate(active) if a]
        self.start = self._gather(xs, ys, zs)
        self.move: np.ndarray | None = None
        self.wait = 0

    def _gather(self, xs: list[float], ys: list[float], zs: list[float]) -> np.ndarray:
        return np.array([[xs[j], ys[j], zs[j]] for j in self.joints]).ravel()

    def next(self, xs: list[float], ys: list[float], zs: list[float]) -> None:
        """Move the pulling joints of the pose the last pass returned to where the next pass starts."""
        out = self._gather(xs, ys, zs)
        move = out - self.start
        self.start = out
        if self.move is not None and self.wait <= 0:
            now, before = float(np.linalg.norm(move)), float(np.linalg.norm(self.move))
            if 0.0 < now < before and float(move @ self.move) > EXTRAPOLATE_COSINE * now * before:
                ratio = now / before
                self.start = out + move * min(ratio / (1.0 - ratio), EXTRAPOLATE_MOST)
                self.wait = 2
                for n, j in enumerate(self.joints):
                    xs[j], ys[j], zs[j] = (float(v) for v in self.start[3 * n:3 * n + 3])
        self.wait -= 1
        self.move = move


def _turn_branches(branches: list, pole: np.ndarray | None, xs: list[float], ys: list[float], zs: list[float],
                   tiny: float) -> None:
    for path, k in branches:
        sub = [xs[i] for i in path], [ys[i] for i in path], [zs[i] for i in path]
        turn_toward_pole(sub[0], sub[1], sub[2], pole[k], tiny)  # type: ignore[index]
        for n, i in enumerate(path):
            xs[i], ys[i], zs[i] = sub[0][n], sub[1][n], sub[2][n]


def _toward_limited(c: int, g: int, j: int, xs: list[float], ys: list[float], zs: list[float], length: float,
                    fallback: tuple, limits: TreeLimits, tiny: float) -> tuple[float, float, float]:
    """Where joint j goes when placed from child c, turning bone c so that its placed child g sits
    inside g's limit (:meth:`.LimitFrames.fit_child`)."""
    d = np.array([xs[c] - xs[j], ys[c] - ys[j], zs[c] - zs[j]])
    norm = math.sqrt(float(d @ d))
    d = d / norm if norm > tiny else np.array(fallback)
    d = limits.fit_child(c, d, g, _unit(xs, ys, zs, c, g, limits.start_dirs[g], tiny))
    return xs[c] - float(d[0]) * length, ys[c] - float(d[1]) * length, zs[c] - float(d[2]) * length


def _unit(xs: list[float], ys: list[float], zs: list[float], p: int, j: int, fallback: tuple,
          tiny: float) -> np.ndarray:
    """Unit direction from joint p toward joint j (the start direction if they meet)."""
    d = np.array([xs[j] - xs[p], ys[j] - ys[p], zs[j] - zs[p]])
    norm = math.sqrt(float(d @ d))
    return d / norm if norm > tiny else np.array(fallback)


@dataclass(frozen=True)
class TreeLimits(LimitFrames):
    """Per-joint limits of a tree with the frames they are measured in (see :func:`solve_tree`);
    entry ``j`` is the bone ending at joint ``j``."""

    def violations(self, joints: np.ndarray, parents: np.ndarray) -> np.ndarray:
        """Per-joint excess of a pose ``(J, 3)`` over the limits (<= 0 means within), for trees without
        rigid joints (a rigid body's frames come from its best-fit turn, which a pose alone does not
        record)."""
        out = np.full(len(self.limits), -1.0)
        now: dict[int, np.ndarray] = {}
        for j in range(1, len(joints)):
            p = int(parents[j])
            d = joints[j] - joints[p]
            d = d / np.linalg.norm(d)
            limit = self.limits[j]
            if limit is not None:
                out[j] = limit.excess(self.limit_frame(now.get(p, self.base_frame), j).T @ d)
            now[j] = self.frame_at(now.get(p, self.base_frame), j, d)
        return out


def resolve_tree_limits(limits: Sequence[Limit], joints: object, parents: object, frames: object = None,
                        rest_offsets: object = None, base_frame: object = None) -> TreeLimits:
    """Public form of the limit set-up :func:`solve_tree` uses, e.g. to check a pose with ``violations``."""
    given = np.array(joints, dtype=np.float64)
    pts = pad3(given)
    return _resolve_tree_limits(limits, frames, rest_offsets, base_frame, pts, _check_parents(parents, len(pts)),
                                set(), planar=given.shape[-1] == 2)


def _resolve_tree_limits(limits: Sequence[Limit], frames: object, rest_offsets: object, base_frame: object,
                         pts: np.ndarray, parent: np.ndarray, rigid: set[int], planar: bool = False) -> TreeLimits:
    """The limits' frames and rest offsets, defaults filled in (``planar``: a 2D tree, whose default frames turn
    its hinges in the plane, :func:`.limits.hinges_face_the_normal`)."""
    count = len(pts)
    items = tuple(limits)
    if len(items) != count:
        raise ValueError(f"limits must give one entry per joint ({count}), got {len(items)}")
    for j, item in enumerate(items):
        if item is not None and not isinstance(item, ConeLimit | HingeLimit):
            raise ValueError(f"limits[{j}] must be ConeLimit, HingeLimit or None, got {type(item).__name__}")
        if item is not None and j > 0 and int(parent[j]) in rigid:
            raise ValueError(f"limits[{j}]: joint {j} hangs from rigid joint {int(parent[j])}, whose children "
                             "move as one body and cannot carry limits")
    dirs = np.zeros((count, 3))
    dirs[1:] = pts[1:] - pts[parent[1:]]
    dirs[1:] /= np.linalg.norm(dirs[1:], axis=1)[:, None]
    dirs[0] = (0.0, 1.0, 0.0)
    base = np.eye(3) if base_frame is None else _frames(base_frame, (3, 3), "base_frame")
    if frames is None:
        start = np.empty((count, 3, 3))
        start[0] = base
        for j in range(1, count):
            p = int(parent[j])
            above = dirs[p] if p > 0 else np.array([0.0, 1.0, 0.0])
            frame = start[p] if p > 0 else np.eye(3)
            start[j] = matrix_from_two_vectors(above, dirs[j], fallback_axis=frame[:, 0]) @ frame
        if planar:
            hinges_face_the_normal(start[1:], dirs[1:], items[1:])
    else:
        start = _frames(frames, (count, 3, 3), "frames")
    if rest_offsets is None:
        offsets = np.empty((count, 3, 3))
        offsets[0] = np.eye(3)
        for j in range(1, count):
            p = int(parent[j])
            offsets[j] = (start[p] if p > 0 else base).T @ start[j]
    else:
        offsets = _frames(rest_offsets, (count, 3, 3), "rest_offsets")
    return TreeLimits(items, start, dirs, offsets, base)


def _frames(value: object, shape: tuple[int, ...], name: str) -> np.ndarray:
    arr = np.array(value, dtype=np.float64)
    if arr.shape != shape or not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite with shape {shape}, got {arr.shape}")
    return arr


# A rigid body's children offsets this close to parallel (sine of the angle) count as one direction.
PARALLEL = 1e-5


def _place_rigid(p: int, body: tuple, xs: list[float], ys: list[float], zs: list[float]) -> np.ndarray:
    """Place the children of joint ``p`` as one rigid body: their start offsets turned by the rotation
    that best carries them toward where the children are now (weighted Kabsch); returns that rotation."""
    kids, offsets, weights = body
    now = np.array([[xs[c] - xs[p], ys[c] - ys[p], zs[c] - zs[p]] for c in kids])
    unit = offsets / np.linalg.norm(offsets, axis=1)[:, None]
    if np.abs(np.cross(unit[0], unit[1:])).max() <= PARALLEL and (unit[1:] @ unit[0]).min() > 0.0:
        # Children in one direction (branches from one point) fix no roll, which a best fit would take
        # from float noise: the least turn onto their weighted mean direction instead.
        mean = (now * weights[:, None]).sum(axis=0)
        norm = float(np.linalg.norm(mean))
        turn = matrix_from_two_vectors(unit[0], mean / norm) if norm > 0.0 else np.eye(3)
    else:
        u, _, vt = np.linalg.svd((offsets * weights[:, None]).T @ now)
        turn = vt.T @ np.diag([1.0, 1.0, np.sign(np.linalg.det(vt.T @ u.T))]) @ u.T
    placed = offsets @ turn.T
    for k, c in enumerate(kids):
        xs[c], ys[c], zs[c] = xs[p] + float(placed[k, 0]), ys[p] + float(placed[k, 1]), zs[p] + float(placed[k, 2])
    return turn


def _toward(ax: float, ay: float, az: float, bx: float, by: float, bz: float, length: float,
            fallback: tuple, sign: float, tiny: float) -> tuple[float, float, float]:
    """The point at ``length`` from a on the line toward b (or along ``sign * fallback`` if they meet)."""
    dx, dy, dz = bx - ax, by - ay, bz - az
    d = math.sqrt(dx * dx + dy * dy + dz * dz)
    if d > tiny:
        r = length / d
        return ax + dx * r, ay + dy * r, az + dz * r
    return ax + sign * fallback[0] * length, ay + sign * fallback[1] * length, az + sign * fallback[2] * length


def _pole_branches(parent: np.ndarray, children: list[list[int]], effector: np.ndarray,
                   pole: np.ndarray | None, rigid: set[int]) -> list[tuple[list[int], int]]:
    """For each effector with a pole: its joints up to the nearest sub-base or the root, root first.

    Below a rigid sub-base the branch starts at the sub-base's child: the body's children move together,
    so rolling one about the sub-base moved a torso's shoulder off it (elbows 27 degrees off the plane
    of shoulder, target and pole; 690 of 800 tip-frames short)."""
    if pole is None:
        return []
    out = []
    for k, e in enumerate(effector):
        if np.isnan(pole[k]).any():
            continue
        path = [int(e)]
        j = int(parent[e])
        while j > 0 and len(children[j]) == 1:
            path.append(j)
            j = int(parent[j])
        if j not in rigid:
            path.append(j)
        if len(path) >= 3:
            out.append((path[::-1], k))
    return out
