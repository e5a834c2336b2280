"""Chains with hinges that are not a planar leg (:mod:`.hinge_plane`), solved by the swing fit
(:func:`.swing.fit_swings`) in coordinates that hold the hinges.

Limited FABRIK (:func:`.fabrik.run_limited`), which took these chains before, stops where its pass budget
runs out and restarts from other poses: on the quality benchmark's paths a bone turned 57 degrees in one frame
on the 4-bone coned leg with a hinged knee, 178 on the 3-bone one, 179 on a hinged leg with a free foot, 78 on
a chain with a hinged first bone. The fit is a function of its inputs instead (0.5-2 degrees on the same paths).

Each bone has two coordinates ``q_i = (u, v)`` in a convex region:

- a bone with a cone or no limit: its swing in its limit frame, as in :mod:`.swing` (the cone's ellipse);
- a HINGE bone: ``v`` its hinge angle (the interval), ``u`` held at 0 (a pure local-X turn).

Frames follow :meth:`.ResolvedLimits.frame_for`: a hinge bone is its limit frame turned about X by its angle;
any other bone is its start frame turned by the minimal turn onto its direction, and a bone above a hinge is
then rolled about its own axis by the roll the reference pose (the free solve) gives it there (the hinge's
plane holding the reference's child: :meth:`.ResolvedLimits.frames_of`), so the hinge's plane follows the
pole as the free solve's bend does. A free roll (one more coordinate, pulled toward the reference's like the
others) let the fit reach targets the locked one misses by rolling the plane to one side or the other, a mirror
choice that flipped as the target crossed the plane: 155 degrees in one frame on the coned leg. From
FREE_ROLL_FROM bones the roll is free again, as the hinge's unused ``u`` (:attr:`HingeCoordinates.free_roll`): there
the locked plane held the fit short of targets the limits allow, and the free one does not flip on the benchmark.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import ClassVar

import numpy as np

from .limits import ConeLimit, HingeLimit, ResolvedLimits, hinge_roll
from .rotations import turn_floats
from .swing import PROXIMAL_PER_TOLERANCE, Coordinates, _locals, _project, _turned, swing_of

# Chains of this many bones at most take the fit; longer ones keep limited FABRIK. Measured on the quality loop
# (400 frames, pure solver; largest bone turn a frame, frames missed; limited FABRIK's in brackets): a coned leg
# with a hinged knee and a pole, 6 bones 1.27, 0 (18.1, 7), 7 bones 1.16, 0 (24.7, 0), 8 bones 0.69, 0 (8.5, 0),
# 10 bones 0.73, 0 (27.5, 0); without a pole 6: 1.24, 0 (21.3, 16), 8: 0.69 (7.3), 10: 0.72 (28.0); a hinged
# first bone 0.51-0.53 (178-179) and a free foot 0.55-0.57, 0 (180, 3-21) at 6, 8 and 10 bones. The fit costs
# more: 6-10 bones 66-490 ms a solve where limited FABRIK took 1-2 (median, a busy 2-core machine).
HINGE_FIT_MAX_BONES = 10
# From this many bones the hinges' planes roll with the fit (HingeCoordinates.free_roll): with the roll locked to
# the free pose's, the 6-bone coned leg's fit fell 6.6e-3 of the length short of 34 targets limited FABRIK
# reaches (its thigh cones on their rims, the knee's plane where the free pose, far outside the cones, put it);
# rolling, it misses none. Below it the roll stays locked: free, the 3-bone leg turned 3.5 degrees a frame
# (1.58 locked), the 4-bone 147 (3.0: the plane's mirror choice), the 5-bone 4.3 (2.2).
FREE_ROLL_FROM = 6
# The fit from the pose without IK, then limited FABRIK, are tried when the fit misses a target within the
# chain's length by more than this many tolerances (the first that reaches is kept), and from HINGE_FALLBACK_LONG_FROM
# bones (where the fit rounds the edge of what the limits allow, up to 6.6e-3 of the length short) by more than
# HINGE_FALLBACK_LONG. Measured on the quality loops (scripts/quality_bench.py, 400 frames):
# at 1 tolerance the 6-bone coned leg with a hinged knee turned 23.5 degrees in a frame where limited FABRIK
# took over by the edge (1.22 at 10; frames missed 6 against 34, limited FABRIK alone 6 and 18.1 degrees);
# at 10 the 4-bone one without a pole missed 3 frames more than at 1 (73 against 70, as limited FABRIK).
HINGE_FALLBACK = 1.0
HINGE_FALLBACK_LONG = 10.0
HINGE_FALLBACK_LONG_FROM = 5
# The beyond fit's pull toward the free pose (.swing.MU_BEYOND for cones): the hinges and the locked planes already
# keep a hinged chain off the mirror poses that pull holds cones from, so beyond the limits it only held the tip
# back. Quality loops (400 frames), largest distance to the target / largest turn a frame at 10 (the cones'), 3,
# 1: 4-bone coned leg with a hinged knee and a pole 0.62/2.95, 0.45/3.26, 0.31/3.36 (Blender 0.13/0.67), without
# a pole 0.62, 0.45, 0.31 (161.7 each: the knee's mirror choice, Blender 167), 5 bones 0.57/2.16, 0.41/2.24,
# 0.31/2.26, 3 bones 0.73/1.58, 0.71/0.71, 0.66/0.71; at 0.1, 0.30/3.41 and 0.64/0.82. The largest turns are where
# the target comes back within what the limits allow, where the reaching pose turns fast.
HINGE_MU_BEYOND = 1.0
# The near fit's proximal pull (.swing.PROXIMAL_PER_TOLERANCE for cones, 3): where the target comes back within what
# the limits allow the reaching pose turns fast, and a stronger pull rounds that edge. Pure solver, the quality loop,
# coned leg with a hinged knee and a pole, largest turn a frame at 3 / 4 / 5 / 6: 4 bones 2.59 / 2.08 / 1.79 / 1.57,
# 5 bones 1.78 / 1.44 / 1.20 / 1.05 (Blender's IK 0.67 and 0.75), the same 255 and 253 of 400 targets reached. From 5
# the fit rounds the edge farther than limited FABRIK's pose: 2.0-2.2 tolerances short where limited FABRIK stops
# 1.5 (test_hinge_fit's beyond-the-limits bound, 1.25 times limited FABRIK's distance: 1.21 at 3 and 4, 1.34 at 5,
# 1.45 at 6). Below FREE_ROLL_FROM bones only: at 6 the 6-bone leg, whose hinge's plane rolls with the fit, reached
# 373 of the loop's 400 targets (every one at 3). Cone chains keep 3: at 6, 4-6 of 240 random 4-5 bone chains
# stopped 1.1-4.5 tolerances short of targets their cones allow, against none.
HINGE_PROXIMAL_PER_TOLERANCE = 4.0

# Where the fit, its fallbacks and the polish stop short of a target within the chain's length, the fit (local) has
# settled in another basin than a pose that reaches, or (below FREE_ROLL_FROM bones) that pose rolls a bone above a
# hinge off the reference's roll, which the fit holds (:func:`scan_reach`, from :func:`.fabrik._solve_hinged`). A
# grid of at most SCAN_SAMPLES poses over the region (:func:`scan_grid`; the rolls too where no pole sets them) is
# walked at once; the SCAN_REFINE nearest the target take SCAN_REFINE_STEPS damped Gauss-Newton steps together
# (forward differences of SCAN_DIFFERENCE radians, damping SCAN_DAMPING of the normal matrix's mean diagonal), then
# the SCAN_KEEP nearest as many again (SCAN_ROUNDS in all). Random 3-4 bone chains, 100 targets from poses within
# their limits with a random pole and 100 without (tests/solver/test_hinge_fit.py): before, three hinges 18 / 8
# missed, a cone then two hinges 12 / 17, cone-hinge-cone 5 / 5, hinge-cone-hinge 6 / 0, a cone then three hinges
# 15 / 18 (by up to 1.0 of the length); after, 0 / 0, 9 / 0, 5 / 0, 3 / 0, 10 / 0 (with a pole the rest need a
# roll off the pole's plane). A robot arm's own poses 8 of 600 -> 0. With one round of 4 steps a robot arm's pose
# stayed 1.3 tolerances short, a cone-two-hinges one (rolling) 5.2; 4096 samples cost twice as much. Where nothing
# reaches it costs 5-14 ms a solve (the quality loops' 3-bone coned leg with a hinged knee beyond its limits, 60-80 ms
# a solve there, and a 3-hinge chain, 45). Chains of at most SCAN_MAX_COORDINATES coordinates (a hinge has one, two
# where it rolls its parent, any other bone two): from 7 the grid has 3 points an axis at most.
SCAN_SAMPLES = 1024
SCAN_REFINE = 24
SCAN_REFINE_STEPS = 4
SCAN_KEEP = 6
SCAN_ROUNDS = 2
SCAN_DIFFERENCE = 1e-6
SCAN_DAMPING = 1e-3
SCAN_MAX_COORDINATES = 6
# A free bone's grid covers swings up to this many radians from its start direction.
SCAN_FREE_SWING = 2.5


def fallback(bones: int) -> float:
    """Tolerances past which a hinged chain of ``bones`` tries the fit from the pose without IK, then limited
    FABRIK."""
    return HINGE_FALLBACK if bones < HINGE_FALLBACK_LONG_FROM else HINGE_FALLBACK_LONG


def free_roll(bones: int) -> bool:
    """Whether a hinged chain of ``bones`` fits with its hinges' planes free to roll
    (:attr:`HingeCoordinates.free_roll`)."""
    return bones >= FREE_ROLL_FROM


def has_hinges(limits: ResolvedLimits) -> bool:
    """Whether any bone of the chain is a hinge."""
    return any(isinstance(limit, HingeLimit) for limit in limits.limits)


@dataclass(frozen=True)
class HingeCoordinates(Coordinates):
    """:class:`.swing.Coordinates` of a chain with hinges (see the module): ``roll_angles (N,)`` the roll of each
    bone above a hinge, from its minimal-turn frame (zero for the others); build with :func:`hinge_coordinates`."""

    roll_angles: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # Whether a hinge's unused ``u`` rolls its parent (a bone above it that rolls) further about its own axis,
    # from the reference's roll: the hinge's plane then turns with the fit, pulled toward the reference's like
    # every coordinate (see :func:`hinge_coordinates`).
    free_roll: bool = False
    # With hinges, no polish in the fit: where the fit settles short, what reaches there rolls the hinge's plane
    # to one side or the other, a mirror choice that flipped with the target's side (155 degrees in one frame on
    # the quality benchmark's coned leg with a hinged knee; the polish turned the 6-bone one 32 degrees, between
    # local minima). Chains where no bone rolls are polished after it (.fabrik._solve_hinged).
    polish: ClassVar[bool] = False
    proximal_from: ClassVar[int | None] = 2
    mu_beyond: ClassVar[float] = HINGE_MU_BEYOND

    def proximal_per_tolerance(self) -> float:
        return HINGE_PROXIMAL_PER_TOLERANCE if len(self.limits) < FREE_ROLL_FROM else PROXIMAL_PER_TOLERANCE

    def bone_frames(self, q: np.ndarray) -> np.ndarray:
        """Bone frames ``(K, N, 3, 3)`` of coordinates ``q (K, N, 2)``."""
        k, n = q.shape[0], q.shape[1]
        out = np.empty((k, n, 3, 3))
        parent = np.broadcast_to(self.base_frame, (k, 3, 3))
        for i in range(n):
            frame = parent @ self.rest_offsets[i]
            if isinstance(self.limits[i], HingeLimit):
                angle = q[:, i, 1]
                c, s = np.cos(angle)[:, None], np.sin(angle)[:, None]
                out[:, i, :, 0] = frame[:, :, 0]
                out[:, i, :, 1] = frame[:, :, 1] * c + frame[:, :, 2] * s
                out[:, i, :, 2] = frame[:, :, 2] * c - frame[:, :, 1] * s
            else:
                d = np.einsum("kij,kj->ki", frame, _locals(q[:, i]))
                d /= np.sqrt(np.einsum("ki,ki->k", d, d))[:, None]
                x = _turned(self.start_dirs[i], d, np.broadcast_to(self.frames[i][:, 0], (k, 3)).copy())
                roll = float(self.roll_angles[i])
                if i + 1 < n and self._rolled(i):
                    angles = roll + q[:, i + 1, 0]
                    c0, s0 = np.cos(angles)[:, None], np.sin(angles)[:, None]
                    x = x * c0 + _cross(d, x) * s0 + d * (np.einsum("ki,ki->k", d, x)[:, None] * (1.0 - c0))
                elif roll != 0.0:
                    c0, s0 = math.cos(roll), math.sin(roll)
                    x = x * c0 + _cross(d, x) * s0 + d * (np.einsum("ki,ki->k", d, x)[:, None] * (1.0 - c0))
                x = x - np.einsum("ki,ki->k", d, x)[:, None] * d
                x /= np.sqrt(np.einsum("ki,ki->k", x, x))[:, None]
                out[:, i, :, 0], out[:, i, :, 1], out[:, i, :, 2] = x, d, _cross(x, d)
            parent = out[:, i]
        return out

    def of(self, joints: np.ndarray) -> np.ndarray:
        """Coordinates ``(N, 2)`` of a pose ``(N+1, 3)``: each hinge's angle of its direction's projection
        onto its plane, each other bone's swing; with :attr:`free_roll`, a hinge's ``u`` the roll of its parent
        from the reference's to the one the limits give it in this pose (:meth:`.ResolvedLimits.frame_for`)."""
        dirs = np.diff(joints, axis=0)
        dirs = dirs / np.linalg.norm(dirs, axis=1)[:, None]
        out = np.zeros((len(dirs), 2))
        parent = self.base_frame
        for i, d in enumerate(dirs):
            if isinstance(self.limits[i], HingeLimit) and self._rolled(i - 1):
                out[i, 0] = self._roll_to(parent, i, d)
                parent = self.bone_frames(out[None, :i + 1])[0, i - 1]
            x, y, z = self.limit_frame(parent, i).T @ d
            if isinstance(self.limits[i], HingeLimit):
                out[i, 1] = math.atan2(z, y)
            else:
                out[i] = swing_of(x, y, z)
            parent = self.bone_frames(out[None, :i + 1])[0, i]
        return out

    def _roll_to(self, parent: np.ndarray, bone: int, d: np.ndarray) -> float:
        """The roll of ``parent`` (the frame of HINGE ``bone``'s parent at the reference's roll) about its own axis
        that puts ``d`` in the hinge's plane (:func:`.limits.hinge_roll`, never faded), 0 where none does. Not
        :meth:`.ResolvedLimits.frame_for`'s, measured from the minimal-turn frame: by a nearly straight knee that
        one took either roll from frame to frame (180 degrees a frame, 8-bone coned leg with its knee second)."""
        hinge = self.limits[bone]
        assert isinstance(hinge, HingeLimit)
        rolled = hinge_roll(parent, parent[:, 1], self.rest_offsets[bone], hinge, d)
        return 0.0 if rolled is None else rolled[0]

    def _rolled(self, bone: int) -> bool:
        """Whether ``bone``'s roll takes its hinge child's ``u`` (:attr:`free_roll`)."""
        return self.free_roll and bone >= 0 and self.rolls(bone)

    def hinge_u(self, bone: int, u: float) -> float:
        """A hinge's ``u`` in the fit's region: its parent's roll where that is free, else held at 0."""
        return u if self._rolled(bone - 1) else 0.0

    @cached_property
    def _walk(self) -> tuple[list, list, list, list, list]:
        """The walk's constants on plain floats: base frame rows, rest offsets, start directions, start X
        axes, hinge flags."""
        return (self.base_frame.tolist(), self.rest_offsets.tolist(), self.start_dirs.tolist(),
                self.frames[:, :, 0].tolist(), [isinstance(limit, HingeLimit) for limit in self.limits])

    def tip(self, q: np.ndarray, root: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """The tip ``(3,)`` of one pose's coordinates ``q (N, 2)``: :meth:`bone_frames`' walk on plain floats
        (one pose through the batched walk costs about a hundred times as much)."""
        base, offsets, starts, start_x, hinges = self._walk
        p = base  # the parent frame's rows
        x0, y0, z0 = (float(v) for v in root)
        rows = q.tolist()
        rolls = self.roll_angles.tolist()
        if self.free_roll:
            rolls = [r + rows[i + 1][0] if self._rolled(i) else r for i, r in enumerate(rolls)]
        for (u, v), length, offset, start, sx, hinge, roll in zip(rows, lengths.tolist(), offsets, starts,
                                                                    start_x, hinges, rolls):
            f = [[sum(p[r][k] * offset[k][c] for k in range(3)) for c in range(3)] for r in range(3)]
            if hinge:
                c, s_ = math.cos(v), math.sin(v)
                xs = [f[r][0] for r in range(3)]
                ys = [f[r][1] * c + f[r][2] * s_ for r in range(3)]
                zs = [f[r][2] * c - f[r][1] * s_ for r in range(3)]
            else:
                theta = math.hypot(u, v)
                k = math.sin(theta) / theta if theta > 1e-4 else 1.0 - theta * theta / 6.0
                lx, ly, lz = u * k, math.cos(theta), v * k
                ys = [f[r][0] * lx + f[r][1] * ly + f[r][2] * lz for r in range(3)]
                norm = math.sqrt(ys[0] * ys[0] + ys[1] * ys[1] + ys[2] * ys[2])
                ys = [y / norm for y in ys]
                xs = list(turn_floats(*start, *ys, *sx))
                dx, dy, dz = ys
                if roll != 0.0:
                    c0, s0 = math.cos(roll), math.sin(roll)
                    along = dx * xs[0] + dy * xs[1] + dz * xs[2]
                    cx, cy, cz = dy * xs[2] - dz * xs[1], dz * xs[0] - dx * xs[2], dx * xs[1] - dy * xs[0]
                    t = along * (1.0 - c0)
                    xs = [xs[0] * c0 + cx * s0 + dx * t, xs[1] * c0 + cy * s0 + dy * t, xs[2] * c0 + cz * s0 + dz * t]
                along = dx * xs[0] + dy * xs[1] + dz * xs[2]
                xs = [xs[0] - along * dx, xs[1] - along * dy, xs[2] - along * dz]
                norm = math.sqrt(xs[0] * xs[0] + xs[1] * xs[1] + xs[2] * xs[2])
                xs = [x / norm for x in xs]
                zs = [xs[1] * dz - xs[2] * dy, xs[2] * dx - xs[0] * dz, xs[0] * dy - xs[1] * dx]
            p = [[xs[r], ys[r], zs[r]] for r in range(3)]
            x0, y0, z0 = x0 + length * ys[0], y0 + length * ys[1], z0 + length * ys[2]
        return np.array([x0, y0, z0])

    def derivatives(self, q: np.ndarray, root: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`.swing.Coordinates.derivatives`, reusing the last ones for the same coordinates and inputs
        (each stage of the fit starts where the last one settled, as :func:`.swing._derivatives_at`)."""
        key = (q.tobytes(), np.ascontiguousarray(root, dtype=float).tobytes(), lengths.tobytes())
        last = _LAST_DERIVATIVES
        if last and last[0][0] is self and last[0][1] == key:
            return last[0][2]
        derivatives = super().derivatives(q, root, lengths)
        last[:] = [(self, key, derivatives)]
        return derivatives

    def joints(self, q: np.ndarray, root: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        lead = q.shape[:-2]
        n = q.shape[-2]
        dirs = self.bone_frames(q.reshape(-1, n, 2))[:, :, :, 1]
        out = np.empty((dirs.shape[0], n + 1, 3))
        out[:, 0] = root
        out[:, 1:] = root + np.cumsum(lengths[None, :, None] * dirs, axis=1)
        return out.reshape(*lead, n + 1, 3)


_LAST_DERIVATIVES: list[tuple[HingeCoordinates, tuple[bytes, ...], tuple[np.ndarray, np.ndarray]]] = []


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cross products of ``(K, 3)`` arrays (np.cross costs several times as much on small rows)."""
    out = np.empty_like(a)
    out[:, 0] = a[:, 1] * b[:, 2] - a[:, 2] * b[:, 1]
    out[:, 1] = a[:, 2] * b[:, 0] - a[:, 0] * b[:, 2]
    out[:, 2] = a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]
    return out


def hinge_coordinates(limits: ResolvedLimits, reference: np.ndarray, free_roll: bool = False) -> HingeCoordinates:
    """The coordinates of a chain with hinges whose bones above hinges (not hinges themselves, whose roll is
    locked to their parent) roll as in ``reference (N+1, 3)``: from each one's minimal-turn frame to the one
    the limits give it there (the hinge's plane holding the reference's child, :meth:`.ResolvedLimits.frames_of`)."""
    n = len(limits.limits)
    rolls = np.zeros(n)
    frames = limits.frames_of(reference)
    for i in range(n):
        if limits.rolls(i):
            d = frames[i][:, 1]
            plain, rolled = limits.bone_frame(i, d)[:, 0], frames[i][:, 0]
            rolls[i] = math.atan2(float(np.cross(plain, rolled) @ d), float(plain @ rolled))
    return HingeCoordinates(limits.limits, limits.frames, limits.start_dirs, limits.rest_offsets, limits.base_frame,
                            rolls, free_roll)


def _moving(coordinates: HingeCoordinates) -> list[tuple[int, int]]:
    """The (bone, component) pairs of the coordinates the region moves: a hinge's angle (and its ``u``, its parent's
    roll, where that rolls with the fit), a cone's or free bone's swing."""
    return [(i, j) for i, limit in enumerate(coordinates.limits)
            for j in (((0, 1) if coordinates._rolled(i - 1) else (1,)) if isinstance(limit, HingeLimit) else (0, 1))]


def scan_grid(coordinates: HingeCoordinates) -> np.ndarray | None:
    """A grid ``(K, N, 2)`` over the fit's region, the same for any target (see SCAN_SAMPLES): each hinge's
    interval at ``g`` angles, ends included (and its parent's roll, where that rolls with the fit, at ``g`` turns
    of the circle), each other bone's cone (or a free bone's SCAN_FREE_SWING disc) at ``g x g`` swings (a square's
    grid mapped onto the disc, then onto the cone's quarter ellipses), ``g`` the most that keeps the grid within
    SCAN_SAMPLES poses; None above SCAN_MAX_COORDINATES coordinates."""
    limits = coordinates.limits
    count = len(_moving(coordinates))
    if count > SCAN_MAX_COORDINATES:
        return None
    g = int(SCAN_SAMPLES ** (1.0 / count) + 1e-9)
    square = np.linspace(-1.0, 1.0, g)
    x, y = (axis.ravel() for axis in np.meshgrid(square, square, indexing="ij"))
    disc_u, disc_v = x * np.sqrt(1.0 - y * y / 2.0), y * np.sqrt(1.0 - x * x / 2.0)
    per_bone = []
    for i, limit in enumerate(limits):
        if isinstance(limit, HingeLimit):
            angles = np.linspace(limit.min_angle, limit.max_angle, g)
            if coordinates._rolled(i - 1):
                rolls, angles = (axis.ravel() for axis in np.meshgrid(
                    2.0 * math.pi * np.arange(g) / g - math.pi, angles, indexing="ij"))
            else:
                rolls = np.zeros(g)
            per_bone.append(np.stack([rolls, angles], axis=1))
        elif isinstance(limit, ConeLimit):
            u = disc_u * np.where(disc_u >= 0.0, limit.right, limit.left)
            v = disc_v * np.where(disc_v >= 0.0, limit.up, limit.down)
            per_bone.append(np.stack([u, v], axis=1))
        else:
            per_bone.append(SCAN_FREE_SWING * np.stack([disc_u, disc_v], axis=1))
    index = np.indices([len(samples) for samples in per_bone]).reshape(len(per_bone), -1)
    return np.stack([samples[k] for samples, k in zip(per_bone, index)], axis=1)


def scan_reach(coordinates: HingeCoordinates, swings: np.ndarray, root: np.ndarray, target: np.ndarray,
               lengths: np.ndarray, tolerance: float, roll: bool) -> tuple[HingeCoordinates, np.ndarray, float] | None:
    """A pose that reaches ``target``, from :func:`scan_grid`'s poses (with ``roll``, the bones above hinges rolling
    too): the SCAN_REFINE whose tips lie nearest it take SCAN_REFINE_STEPS damped Gauss-Newton steps together (each
    kept in the region), the SCAN_KEEP nearest as many again, and of those that end within ``tolerance`` the one
    nearest ``swings`` (the fit's) is kept: (the coordinates it is in, its coordinates ``(N, 2)``, tip distance);
    None when none reaches (or the chain has too many coordinates)."""
    if roll and any(coordinates.rolls(i) for i in range(len(coordinates.limits))):
        coordinates = replace(coordinates, free_roll=True)
    grid = scan_grid(coordinates)
    if grid is None:
        return None
    distances = np.linalg.norm(coordinates.joints(grid, root, lengths)[:, -1] - target, axis=1)
    q = grid[np.argsort(distances, kind="stable")[:SCAN_REFINE]]
    for _ in range(SCAN_ROUNDS):
        q, distances = _refined(q, coordinates, root, target, lengths)
        nearest = np.argsort(distances, kind="stable")[:SCAN_KEEP]
        q, distances = q[nearest], distances[nearest]
    reaching = np.flatnonzero(distances <= tolerance)
    if not len(reaching):
        return None
    apart = q[reaching] - swings
    for i, j in _moving(coordinates):
        if j == 0 and isinstance(coordinates.limits[i], HingeLimit):  # a roll: the shorter way round
            apart[:, i, j] = np.remainder(apart[:, i, j] + math.pi, 2.0 * math.pi) - math.pi
    k = reaching[np.argmin((apart ** 2).sum(axis=(1, 2)))]
    return coordinates, q[k], float(distances[k])


def _refined(q: np.ndarray, coordinates: HingeCoordinates, root: np.ndarray, target: np.ndarray,
             lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Poses ``q (M, N, 2)`` after SCAN_REFINE_STEPS damped Gauss-Newton steps of their tips toward ``target``
    (forward differences of every coordinate the region moves: a hinge's angle, a cone's or free bone's swing),
    each step projected back into the region; and their tips' distances."""
    moving = _moving(coordinates)
    m, d = len(q), len(moving)
    eye = np.eye(d)
    for _ in range(SCAN_REFINE_STEPS):
        probes = np.repeat(q[:, None], d + 1, axis=1)
        for c, (i, j) in enumerate(moving):
            probes[:, c + 1, i, j] += SCAN_DIFFERENCE
        tips = coordinates.joints(probes.reshape(-1, *q.shape[1:]), root, lengths)[:, -1].reshape(m, d + 1, 3)
        jacobian = np.swapaxes(tips[:, 1:] - tips[:, :1], 1, 2) / SCAN_DIFFERENCE  # (M, 3, D)
        residual = target - tips[:, 0]
        normal = np.swapaxes(jacobian, 1, 2) @ jacobian
        damping = SCAN_DAMPING * np.trace(normal, axis1=1, axis2=2)[:, None, None] / d + 1e-12
        step = np.linalg.solve(normal + damping * eye, (np.swapaxes(jacobian, 1, 2) @ residual[:, :, None]))[:, :, 0]
        for c, (i, j) in enumerate(moving):
            q[:, i, j] += step[:, c]
        q = np.stack([_project(pose, coordinates) for pose in q])  # each kept in the fit's region
    return q, np.linalg.norm(coordinates.joints(q, root, lengths)[:, -1] - target, axis=1)
