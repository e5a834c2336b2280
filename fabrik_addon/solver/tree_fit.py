"""A cone-limited tree that its passes left short, fitted in its bones' swing coordinates.

Limited FABRIK on a tree stalls short of targets the limits allow (random 20-90 degree cones on every
bone, target pairs from limit-respecting poses: 86% of 300 reached, every miss a stall, none the pass
cap): each joint limit is met by projecting one bone at a time, the sub-base centroids average pulls
that those projections then undo, and the passes settle where neither branch can move its tip closer
alone. Here the whole tree moves at once: the least-squares fit of every effector to its target over
the swings of every bone (as :mod:`.swing` fits a lone chain: a cone is a convex region in its bone's
swing coordinates, projected onto without a rim jump) and the turn of every rigid body, by projected
Levenberg-Marquardt steps with the rims' normals held (:func:`.swing._constrained_step`), from the
passes' best pose. Asked to (``planes``), it also turns limited pole branches' bends onto their poles' sides of
the planes through their roots and targets, moving the shared bones so that the branches' limits allow it.

Coordinates: a bone whose parent joint is not rigid points along its limit frame (its parent bone's
current frame turned by its rest offset) turned by its swing ``(u, v)``, and its frame follows its
direction by the minimal turn from its start frame (:meth:`.LimitFrames.bone_frame`), as the passes
measure it (a HINGE bone's frame is its limit frame turned about X by its angle, as on lone chains:
:meth:`.LimitFrames.frame_at`); the children of a rigid joint are their start offsets turned by the body's turn
``exp(w) T0`` (``T0`` the turn the passes left it at), their frames with them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .limits import ConeLimit, HingeLimit, LimitFrames, ResolvedLimits
from .rotations import matrices_from_two_vectors, perpendicular, turns_x
from .swing import (
    STEP_TOL,
    _locals,
    _project,
    _rim_terms,
    _stencil,
    _turned,
    central_differences,
    damped_step,
    swing_of,
)

# Pull toward the passes' coordinates (per unit of squared swing radians against the effectors' squared
# distance over the tree's length squared): picks, among the poses that fit equally well, the one nearest
# the passes' pose; tiny, so a reachable pair is reached (bias ~ pull * turn / leverage).
PULL = 1e-9
# The fit stops once every weighted effector is within this fraction of the tolerance (from there on it
# crawled: 100 steps, 0.5 s, on 3-branch forks, for distances of 1e-8 of the length) or when no coordinate
# moves more than :data:`.swing.STEP_TOL` (radians) in an accepted step, within MAX_STEPS steps.
AIM = 0.01
MAX_STEPS = 100
# Weight of a pole branch's mean bend's offset from the pole's side of the plane of its root, target and pole
# (against the effectors': both are lengths over the tree's length), where the fit is asked to hold it (``planes``).
PLANE = 1.0
# Where the targets can be reached, the fit is rounds of fits each pulled toward the last one's pose by 1e-3, until
# a round moves no coordinate more than SETTLED (radians) or ROUNDS have run: a fixed point of the effectors' (and held
# planes') cost alone, reached along a path that is a continuous function of the start (each round's cost is convex
# enough near its start to settle in a few steps). One fit pulled toward the start by 1e-5 instead often ran out of
# its 100 steps still moving: along the directions only that pull fixed, the damping the planes' curvature called for
# left steps of 1e-3 to 1e-2 of the way. Pole trees in the solver (Ys with cones, with hinged tips, torsos, 3-branch
# forks; 80 of each), their start poses moved by 6e-8 of themselves (float32 rounding): 39 of 320 ended more than
# 1e-4 of the length apart (up to 5.1e-2); with rounds 1 (its passes already apart; docs/trees.md). The same trees
# without poles, fitted where the passes stopped: 4 of 320 with one fit pulled toward its start by 1e-5, 1 with
# rounds (the one whose passes part).
# Where the rounds run out still moving and short of a target by at most CREEPING tolerances (held at a rim, each round
# creeping on), rounds again from there with a pull a hundredth as strong: the coned torso with hinged forearms of the
# rotation-mode probe (docs/trees.md) ran its 100 rounds 2-3 tolerances short of a target on two seeds, and the fit
# on from there stopped wherever it first came within its aim: 5.7e-4 and 2.8e-4 apart across rotation modes; with
# the weaker rounds 4.7e-6 and 6.9e-6. Rounds at a tenth first, then a hundredth, gave the probe's seeds 5, 6, 8, 9
# the same spreads to the printed digit in 6% more CPU time (426 s against 402), the seed-7 torso test 108-112 s
# against 88, and a rig whose targets lie a few tolerances beyond its limits (where no weaker round reaches) 73-76 s
# against 67. Not farther out: beyond reach the rounds seldom settle, and ungated the suite's tree file stalled on its
# torsos with a target thrown out of reach (12 of its 42 tests in 21 minutes; gated, those tests take 97-150 s each).
PROXIMAL = (1e-3, 1e-5)
ROUNDS = 100
SETTLED = 1e-7
CREEPING = 10.0
# A rigid body's children offsets this close to parallel (sine of the angle) leave along one direction
# (as :data:`.tree.PARALLEL`).
PARALLEL = 1e-5
# A fit the caller will discard (``budget``) need not run its rounds to their cap. Where a pole branch cannot bend in
# its pole's plane toward a target the tree reaches without the plane (the Y whose limited branch misses in
# tests/blender/test_tree_branches.py; coned Ys whose poles sit a half turn from their bends), the held fits from each
# of their three starts crept through up to 100 rounds, ended 0.05-15 tolerances beyond the budget and were
# discarded: frames of 2.6-4.4 s. After GATE_ROUNDS rounds that have not settled, from a pose beyond its budget, the
# fit without the pull is tried from there; where it too ends beyond by more than MISSED tolerances it is the result.
# On every such fit logged (that rig, seeds 1, 3 and 4) it ended where the rounds and the fit after them did, to 1e-3
# tolerances, and every pose written stayed the same to the last bit: that rig's 80 frames (their solves 47.7 -> 19.0 s
# of CPU, the worst frame 4.41 -> 2.85 s on seed 4, at most 1.11 on the others), 160 solver trees with turned poles
# (412 -> 137 s), the torso probe's seeds 5, 7, 8.
# Beyond reach the rounds gain nothing either: a torso with a pole on each arm, both hands' targets out of reach, ran
# its three held fits' rounds to their cap, each ending as far short as the passes (8.0 s of CPU for one solve). Where
# the tree without the planes misses every target by more than CREEPING tolerances (the budget: the passes' pose, or its
# fit), a held fit still that short after BEYOND_ROUNDS rounds tries the fit without the pull from there and, where that
# is too, returns it. Seed-5 torsos with poles (tests/solver/test_tree_fit.py), one after the other on an idle machine:
# 20 with hinged forearms 68.3 -> 18.8 s of CPU, 20 coned 18.5 -> 7.0 s; 39 of the 40 poses the same to the last bit,
# the other 8e-7 of the length apart. Not where the tree reaches a target: the budget gate after 2 rounds instead of 10
# left a hinge-tipped Y whose targets and poles come from its own poses bent 8.5 degrees off a pole's plane (1 of 40,
# seed 3; within 1 degree with 10), and the rounds stay where one target is reached and another is not (a family of
# poses).
GATE_ROUNDS = 10
BEYOND_ROUNDS = 2
MISSED = 0.1


@dataclass(eq=False)
class _Coordinates:
    """The tree's coordinates: ``swung`` joints (2 swings each, first), then ``bodies`` (3 each)."""

    parent: list[int]
    lengths: np.ndarray  # (J,)
    root: np.ndarray  # (3,)
    limits: LimitFrames
    swung: list[int]
    slot: dict[int, int]  # swung joint -> its row of swings
    bodies: list[int]  # rigid joints, in joint order
    offsets: dict[int, np.ndarray]  # child joint of a rigid joint -> its start offset (3,)
    turn0: np.ndarray  # (B, 3, 3)
    framed: set[int]  # joints whose bone's frame a child's limit frame needs
    effector: np.ndarray  # (E,)
    cones: ResolvedLimits  # the swung joints' limits, in their order, for .swing's projection and rims
    locked: list[int]  # coordinates that never move: a hinge's u
    # Bodies whose children leave along one direction (branches from one point), as
    # :func:`.tree._place_rigid` turns them: the least turn from their start direction ``unit0`` onto
    # ``d = aim + u side[0] + v side[1]`` (their first two coordinates), then rolled about ``d`` by their
    # third. The roll moves no child, but it turns the frames their limits are measured in (a Y's hinged
    # branches bend in planes the trunk's roll sets; held at the least turn, 8 of 40 reachable tip-poses missed).
    single: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]  # body row -> (unit0, aim, side (2, 3))
    # Bones above a hinge on a pole branch whose plane the fit holds (``fit_tree``'s ``planes``), with their own
    # roll about their direction (a coordinate after the bodies' ones): a lone chain rolls such a bone so that
    # its hinge bends toward where the branch must go (.limits.ResolvedLimits), and the rig layer solves the
    # branch again as one. Held at the least turn, the hinge's plane stayed where the passes left it, and no
    # pose of the shared bones let the branch bend in its pole's plane (torso elbows 24 degrees off it).
    rolled: dict[int, int] = field(default_factory=dict)  # joint -> its roll's index among the rolls

    @property
    def size(self) -> int:
        return 2 * len(self.swung) + 3 * len(self.bodies) + len(self.rolled)

    def turns(self, x: np.ndarray) -> np.ndarray:
        """The bodies' turns ``(K, B, 3, 3)`` from the start pose at coordinates ``x (K, size)``."""
        start = 2 * len(self.swung)
        w = x[:, start:start + 3 * len(self.bodies)].reshape(len(x), len(self.bodies), 3)
        turns = _exps(w) @ self.turn0[None]
        for b, (unit0, aim, side) in self.single.items():
            d = aim + w[:, b, :2] @ side
            d /= np.sqrt(np.einsum("ki,ki->k", d, d))[:, None]
            turns[:, b] = _exps(w[:, b, 2:] * d) @ matrices_from_two_vectors(np.broadcast_to(unit0, d.shape), d)
        return turns

    def joints(self, x: np.ndarray) -> np.ndarray:
        """Joints ``(K, J, 3)`` of coordinates ``x (K, size)``: forward kinematics, batched over ``K``."""
        k = len(x)
        ns = len(self.swung)
        local = _locals(x[:, :2 * ns].reshape(k, ns, 2))
        turns = self.turns(x)
        body_of = {p: turns[:, b] for b, p in enumerate(self.bodies)}
        out = np.empty((k, len(self.parent), 3))
        out[:, 0] = self.root
        frames: dict[int, np.ndarray] = {}
        lim = self.limits
        for j in range(1, len(self.parent)):
            p = self.parent[j]
            if p in body_of:
                turn = body_of[p]
                out[:, j] = out[:, p] + turn @ self.offsets[j]
                if j in self.framed:
                    frames[j] = turn @ lim.frames[j]
                continue
            above = frames.get(p, lim.base_frame)
            carried = above @ lim.rest_offsets[j]
            d = carried @ local[:, self.slot[j], :, None] if above.ndim == 3 else local[:, self.slot[j]] @ carried.T
            d = d.reshape(k, 3)
            d /= np.sqrt(np.einsum("ki,ki->k", d, d))[:, None]
            out[:, j] = out[:, p] + self.lengths[j] * d
            if j in self.framed and isinstance(lim.limits[j], HingeLimit):
                # A hinge bone's frame is its limit frame turned about X (:meth:`.LimitFrames.frame_at`).
                along = local[:, self.slot[j]]
                frames[j] = carried @ turns_x(np.arctan2(along[:, 2], along[:, 1]))
            elif j in self.framed:
                frames[j] = _turned(lim.start_dirs[j], d, lim.frames[j], columns=True)
                if j in self.rolled:
                    roll = x[:, self.size - len(self.rolled) + self.rolled[j]]
                    frames[j] = _exps(roll[:, None] * d) @ frames[j]
        return out

    def effectors(self, x: np.ndarray) -> np.ndarray:
        return self.joints(x[None])[0, self.effector]


def _exps(w: np.ndarray) -> np.ndarray:
    """Rotation matrices ``(..., 3, 3)`` of rotation vectors ``w (..., 3)`` (Rodrigues)."""
    angle = np.linalg.norm(w, axis=-1)[..., None, None]
    k = np.zeros((*w.shape[:-1], 3, 3))
    k[..., 0, 1], k[..., 0, 2], k[..., 1, 2] = -w[..., 2], w[..., 1], -w[..., 0]
    k[..., 1, 0], k[..., 2, 0], k[..., 2, 1] = w[..., 2], -w[..., 1], w[..., 0]
    small = angle < 1e-6
    safe = np.where(small, 1.0, angle)
    a = np.where(small, 1.0 - angle ** 2 / 6.0, np.sin(safe) / safe)
    b = np.where(small, 0.5 - angle ** 2 / 24.0, (1.0 - np.cos(safe)) / (safe * safe))
    return np.eye(3) + a * k + b * (k @ k)


def fits(limits: LimitFrames) -> bool:
    """Whether :func:`fit_tree` fits a tree with these limits: every one has swing coordinates here."""
    return all(limit is None or isinstance(limit, ConeLimit | HingeLimit) for limit in limits.limits[1:])


def fit_tree(pose: np.ndarray, start: np.ndarray, parent: np.ndarray, lengths: np.ndarray, effector: np.ndarray,
             targets: np.ndarray, weights: np.ndarray, bodies: dict[int, np.ndarray],
             limits: LimitFrames, tolerance: float,
             planes: list[tuple[list[int], np.ndarray]] | None = None, budget: np.ndarray | None = None
             ) -> tuple[np.ndarray, dict[int, np.ndarray], dict[int, float]]:
    """The pose near ``pose (J, 3)`` (every limit kept) whose weighted effectors are nearest their targets,
    each rigid body's turn from ``start`` in it (a body whose children leave one point rolls here, which
    its pose does not record) and the roll of each bone above a hinge that rolls here (below). With
    ``planes``, also the one whose pole branches bend nearest their poles' sides of the planes of their roots,
    targets and poles.

    Parameters
    ----------
    pose : ndarray, shape (J, 3)
        Where the passes left the tree (inside every limit).
    start : ndarray, shape (J, 3)
        The solve's start pose, which the rigid bodies' offsets and the limits' frames were taken from.
    parent : ndarray of int, shape (J,)
    lengths : ndarray, shape (J,)
    effector : ndarray of int, shape (E,)
    targets : ndarray, shape (E, 3)
    weights : ndarray, shape (E,)
    bodies : dict rigid joint -> ndarray (3, 3)
        The turn from ``start`` each rigid body (a joint with two or more children) has in ``pose``.
    limits : LimitFrames
        Cones, hinges or none. A HINGE bone's swing is ``(0, its angle)`` (its direction turned about its
        limit frame's X), as the passes project it; the lone chains' roll of the bone above a hinge is
        theirs (the rig layer solves hinged branches again as lone chains).
    tolerance : float
        The distance that counts as reached.
    planes : list of (path, pole), optional
        Pole branches: joint indices root first, ending at an effector (whose target is its row of
        ``targets``), and the pole. The mean of the joints between the root and the effector is held toward
        the pole's side of the plane through the root, the target and the pole (weight :data:`PLANE`), as a
        lone chain's pole turns its bend: where the branches' cones keep a branch out of that plane from where
        the passes put its root, the fit moves the shared bones so that it need not be. The bone above a
        hinge on such a branch rolls about its direction, as a lone chain's does, so that the hinge bends
        where the plane needs it.
    budget : ndarray, shape (E,), optional
        How far from its target each effector may end for the caller to keep the fit (it discards one that
        leaves any effector farther). Where the proximal rounds have not settled after GATE_ROUNDS and leave an
        effector more than MISSED tolerances beyond its budget, the fit without their pull is tried from there,
        and returned at once where it does too. Where the budget is more than CREEPING tolerances for every
        weighted effector (the tree misses every target), a held fit (``planes``) still more than CREEPING
        tolerances short after BEYOND_ROUNDS rounds does the same.

    Returns
    -------
    ndarray, shape (J, 3); dict rigid joint -> ndarray (3, 3); dict joint -> float
        The pose, the bodies' turns and the rolls (radians, about the bone's direction, after its least turn
        from its start frame) of the bones ending at the joints that roll.
    """
    par = [int(p) for p in parent]
    rigid = sorted(bodies)
    swung = [j for j in range(1, len(par)) if par[j] not in bodies]
    framed = {par[j] for j in swung if par[j] > 0}
    coords = _Coordinates(
        par, lengths, pose[0].copy(), limits, swung, {j: n for n, j in enumerate(swung)}, rigid,
        {j: start[j] - start[par[j]] for j in range(1, len(par)) if par[j] in bodies},
        np.array([bodies[p] for p in rigid]).reshape(-1, 3, 3), framed, effector,
        ResolvedLimits(tuple(limits.limits[j] for j in swung), limits.frames[swung], limits.start_dirs[swung],
                       limits.rest_offsets[swung], limits.base_frame),
        [2 * n for n, j in enumerate(swung) if isinstance(limits.limits[j], HingeLimit)], {})
    for b, p in enumerate(rigid):
        kids = [j for j in range(1, len(par)) if par[j] == p]
        unit = np.array([coords.offsets[j] / np.linalg.norm(coords.offsets[j]) for j in kids])
        if np.abs(np.cross(unit[0], unit[1:])).max() <= PARALLEL and (unit[1:] @ unit[0]).min() > 0.0:
            aim = coords.turn0[b] @ unit[0]
            first = perpendicular(aim)
            coords.single[b] = unit[0], aim, np.array([first, np.cross(aim, first)])
    for path, _ in planes or []:
        for j in path[1:]:
            p = par[j]
            if isinstance(limits.limits[j], HingeLimit) and p in coords.slot and p in framed and \
                    not isinstance(limits.limits[p], HingeLimit) and p not in coords.rolled:
                coords.rolled[p] = len(coords.rolled)
    x = _coordinates_of(pose, coords)
    length = float(lengths.sum())
    rows = {int(e): k for k, e in enumerate(effector)}
    held = [(path, targets[rows[path[-1]]], np.asarray(pole, dtype=np.float64)) for path, pole in planes or []]
    scale, aim = np.sqrt(weights)[:, None] / length, (AIM * tolerance / length) ** 2

    scored = weights > 0.0

    def distances(at: np.ndarray) -> np.ndarray:
        return np.linalg.norm(coords.effectors(at) - targets, axis=1)[scored]

    def reached(at: np.ndarray, tolerances: float = 1.0) -> bool:
        return bool((distances(at) <= tolerances * tolerance).all())

    def missed(at: np.ndarray, most: np.ndarray) -> bool:
        """Whether a weighted effector of ``at`` ends more than MISSED tolerances beyond its distance in ``most``."""
        return bool((distances(at) > most[scored] + MISSED * tolerance).any())

    def fitted(at: np.ndarray, pull: float = PULL) -> np.ndarray:
        return _minimise(at, coords, targets, scale, aim, held, PLANE / length, pull)

    # Where the targets can be reached, many poses reach them (and, with ``planes``, bend in the planes: a torso,
    # a Y), and a fit stopped wherever it first came within its aim, which a rotation mode's float rounding of the
    # pose without IK moves (a torso 0.14 apart, a Y on a coned trunk 6.1e-3). Proximal rounds (PROXIMAL) pick one:
    # held, always, with the fit on from their fixed point where they do not reach; free, where the fit reaches (the
    # rounds cost their steps only there). Beyond reach a free tree keeps the fit: where every target is missed
    # the minimum was one pose on the probes, but where one target is reached and another is not it can be a
    # family (a torso with one hand out of reach), on which each start's fit stays near where it began (which
    # start is kept: :data:`.tree.RESTART_GAIN`). A held tree that misses every target without its planes (the
    # budget) keeps the fit from its first rounds' pose where that misses too (BEYOND_ROUNDS).
    beyond = bool(held) and budget is not None and bool((budget[scored] > CREEPING * tolerance).all())

    def rounds(at: np.ndarray, pull: float) -> tuple[np.ndarray, str]:
        for n in range(1, ROUNDS + 1):
            last, at = at, fitted(at, pull)
            if float(np.abs(at - last).max()) <= SETTLED:
                return at, "settled"
            if n == BEYOND_ROUNDS and beyond and not reached(at, CREEPING):
                ahead = fitted(at)
                if not reached(ahead, CREEPING):
                    return ahead, "beyond"
            if n == GATE_ROUNDS and budget is not None and missed(at, budget):
                ahead = fitted(at)
                if missed(ahead, budget):
                    return ahead, "missed"
        return at, "moving"

    free = None if held else fitted(x)
    if free is not None and not reached(free):
        x = free
    else:
        for pull in PROXIMAL:
            x, state = rounds(x, pull)
            if state != "moving" or reached(x) or not reached(x, CREEPING):
                break
        if state not in ("missed", "beyond") and not reached(x):
            x = fitted(x)
    rolls = {j: float(x[coords.size - len(coords.rolled) + r]) for j, r in coords.rolled.items()}
    return coords.joints(x[None])[0], dict(zip(rigid, coords.turns(x[None])[0])), rolls


def _coordinates_of(pose: np.ndarray, coords: _Coordinates) -> np.ndarray:
    """The swings of ``pose`` (its bodies at no turn from ``turn0``)."""
    lim = coords.limits
    x = np.zeros(coords.size)
    frames: dict[int, np.ndarray] = {}
    turns = dict(zip(coords.bodies, coords.turn0))
    for j in range(1, len(coords.parent)):
        p = coords.parent[j]
        if p in turns:
            frames[j] = turns[p] @ lim.frames[j]
            continue
        d = pose[j] - pose[p]
        d = d / np.linalg.norm(d)
        sx, sy, sz = lim.limit_frame(frames.get(p, lim.base_frame), j).T @ d
        x[2 * coords.slot[j]:2 * coords.slot[j] + 2] = swing_of(float(sx), float(sy), float(sz))
        frames[j] = lim.frame_at(frames.get(p, lim.base_frame), j, d)
    ns = len(coords.swung)
    x[:2 * ns] = _project(x[:2 * ns].reshape(ns, 2), coords.cones).ravel()
    return x


def pole_sides(root: np.ndarray, target: np.ndarray, pole: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For roots ``(K, 3)``: the unit direction from each root to ``target`` (0 where they meet) and the unit
    direction of the pole's offset across that line (0 where the pole lies on it), ``(K, 3)`` each: the pole's
    side of the plane through root, target and pole (:func:`_plane_residuals`, :func:`.tree.off_plane`)."""
    line = target - root
    line = line / np.maximum(np.sqrt(np.einsum("ki,ki->k", line, line)), np.finfo(float).tiny)[:, None]
    side = pole - root
    side = side - np.einsum("ki,ki->k", side, line)[:, None] * line
    size = np.sqrt(np.einsum("ki,ki->k", side, side))
    return line, side / np.where(size > 0.0, size, 1.0)[:, None] * (size > 0.0)[:, None]


def _plane_residuals(joints: np.ndarray, held: list[tuple[list[int], np.ndarray, np.ndarray]]) -> np.ndarray:
    """Residuals ``(K, 3 H)`` of the held branches of ``joints (K, J, 3)`` against their poles: the offset of each
    branch's mean bend (the mean of the joints between its root and its effector) from the pole's side of the
    plane through the root, the target and the pole. That is its part across the line from the root to the
    target less as long a step toward the pole: zero on the pole's side of the plane, twice its length across on
    the other (the plane alone held a nearly straight torso arm with its elbow mirrored). Only the mean: a lone
    chain's pole turns its bend rigidly to face the pole, so the joints of a branch that is not planar stay off
    the plane (held there too, coned Ys stayed 22 degrees off). Zero where the pole lies on that line (or the
    target on the root)."""
    out: list[np.ndarray] = []
    for path, target, pole in held:
        root = joints[:, path[0]]
        line, side = pole_sides(root, target, pole)
        bend = joints[:, path[1:-1]].mean(axis=1) - root
        across = bend - np.einsum("ki,ki->k", bend, line)[:, None] * line
        out.append(across - np.sqrt(np.einsum("ki,ki->k", across, across))[:, None] * side)
    return np.concatenate(out, axis=1) if out else np.zeros((len(joints), 0))


def _minimise(x: np.ndarray, coords: _Coordinates, targets: np.ndarray, scale: np.ndarray, aim: float,
              held: list[tuple[list[int], np.ndarray, np.ndarray]], plane_scale: float,
              pull: float = PULL) -> np.ndarray:
    """Coordinates inside the cones minimising ``sum |scale (effector - target)|**2 + sum (plane_scale
    residual)**2 + pull |x - x0|**2`` (the ``held`` branches' :func:`_plane_residuals`) from ``x0 = x``, by
    damped Newton steps to a fixed point or until every scaled effector's squared distance, and every scaled
    plane residual's square, is within ``aim``."""
    ns, m = len(coords.swung), coords.size
    centre = x.copy()
    offsets = _stencil(m)[0]
    effectors = 3 * len(coords.effector)

    def cost(residual: np.ndarray, at: np.ndarray) -> float:
        d = at - centre
        return float(residual @ residual) + pull * float(d @ d)

    def residuals(at: np.ndarray) -> np.ndarray:
        """Residuals ``(K, R)`` at coordinates ``at (K, size)``: the scaled effectors' offsets, then the held
        branches' scaled plane residuals."""
        joints = coords.joints(at)
        ends = ((joints[:, coords.effector] - targets) * scale).reshape(len(at), -1)
        return np.concatenate([ends, plane_scale * _plane_residuals(joints, held)], axis=1)

    def residual_of(at: np.ndarray) -> np.ndarray:
        return residuals(at[None])[0]

    def within(residual: np.ndarray) -> bool:
        return (float((residual[:effectors].reshape(-1, 3) ** 2).sum(axis=1).max(initial=0.0)) <= aim
                and float((residual[effectors:] ** 2).max(initial=0.0)) <= aim)

    def trial_of(at: np.ndarray, step: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        trial = at + step
        trial[:2 * ns] = _project(trial[:2 * ns].reshape(ns, 2), coords.cones).ravel()
        trial_residual = residual_of(trial)
        return trial, trial_residual, cost(trial_residual, trial)

    residual = residual_of(x)
    current = cost(residual, x)
    damping = 1e-6
    eye = np.eye(m)
    for _ in range(MAX_STEPS):
        if within(residual):
            break
        jac, second = central_differences(residuals(x[None] + offsets), m)
        gradient = 2.0 * (jac.T @ residual + pull * (x - centre))
        # Newton's Hessian, the effectors' curvature included, as the lone chain's fit (.swing._minimise): beyond
        # reach the residuals stay large, and Gauss-Newton alone crawled: 47 of 70 fits of coned Ys, forks and torsos
        # with targets 0.3-1.3 lengths out ran out of steps, still moving (solves of 0.74-1.6 s; now 1 of 70,
        # 73-185 ms). Where the fit reaches it costs 1.4-2.0x as much a fit (docs/trees.md).
        hessian = 2.0 * (jac.T @ jac + np.einsum("k,kij->ij", residual, second) + pull * eye)
        normals = _rim_terms(x[:2 * ns].reshape(ns, 2), gradient, hessian, coords.cones)
        for i in coords.locked:  # no step along these
            gradient[i] = 0.0
            hessian[i, :] = hessian[:, i] = 0.0
            hessian[i, i] = 1.0
        accepted, damping, moved = damped_step(hessian, gradient, normals, eye, damping, current, x, trial_of)
        if accepted is not None:
            x, residual, current = accepted
        if moved <= STEP_TOL:
            break
    return x

