"""Cone-limited chains solved as a least-squares fit in each bone's swing coordinates.

Limited FABRIK on cones stopped where its pass budget ran out, restarted from other poses and took
the nearest rim point by angle, which jumps where a direction passes behind a cone: on a smooth path
partly beyond what the cones allow a bone turned 29 degrees in one frame, and inputs differing by
float32 rounding (rotation modes) gave poses 0.3-1.6 units apart. Here the pose is a function of its
inputs instead:

1. reference: the free solve (the curled start and free FABRIK to its settle tolerance, or the analytic
   pose for two bones), continuous in the target and the pole, and the answer whenever it keeps every
   cone;
2. coordinates: bone ``i`` points along its limit frame (its parent's frame turned by its rest offset)
   turned by the swing ``q_i = theta * (cos phi, sin phi)`` (deflection ``theta`` from +Y, azimuth
   ``phi`` from +X toward +Z); its frame follows its direction by the minimal turn from its start frame
   (:meth:`.LimitFrames.bone_frame`). In these coordinates a cone is the convex region
   ``(u / a)**2 + (v / b)**2 <= 1`` (``a``, ``b`` the quadrant's angles), and the Euclidean projection
   onto a convex region is continuous: no rim jump;
3. fit: minimise ``|tip - target|**2 / length**2 + MU * |q - q_ref|**2`` over the cones by projected
   Levenberg-Marquardt from the reference's projection, to a fixed point (steps below ``STEP_TOL``
   radians), so that the pose does not depend on how many steps ran. ``MU`` is tiny: where the cones
   allow the target the tip reaches it (bias ~1e-8 of the length); the term only picks, among the poses
   that fit equally well, the one nearest the reference, which settles the chain's redundancy the way the
   free solve settles it (the pole included). From ``PROXIMAL_FROM`` bones the near fit is a fixed number of
   proximal steps, each pulled toward the last one's swings, and from ``PROXIMAL_POLISH_BELOW`` bones no stage
   is switched on by a threshold on the tip's distance (:func:`_fit_proximal`); from ``WIDE_PROXIMAL_FROM``
   bones the wide fit is proximal steps too (:func:`_wide_proximal`).

Deterministic (nothing is read from another frame) and continuous in the target, the pole and the pose
without IK wherever the fit's minimum is.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .limits import LIMIT_SLACK, ConeLimit, HingeLimit, ResolvedLimits
from .rotations import perpendicular, skew, turn_floats

# Weights of the pull toward the reference (swing radians squared against the tip's distance squared
# over the chain's length squared). The wide fit's pull is strong enough that a target beyond the cones
# does not flip the chain between two mirror poses equally near it (the coned leg flipped 9 degrees in a
# frame at 1e-4, 4 at 1e-3, none at 1e-2); the near fit then reaches the target from there when the
# cones allow it, moving as little as it can.
MU_WIDE = 1e-2
WIDE_STAGES = (1.0, 0.1, MU_WIDE)
# The fit's pulls and thresholds scale with the tolerance, and were tuned at the add-on's default, a thousandth of
# the chain's length: above it they stop at most this fraction of the length short of a target (the tolerance still
# says what counts as reached). Looser pulls made the pose depend on the tolerance, and popped where the default does
# not: the quality loops (pure solver, tolerance 0.003 / 0.01 of the length against 0.001), largest turn a frame,
# 4 bones in lopsided cones with a pole 11.6 / 17.0 against 3.9 (the polish reaching the target at one frame and
# stopping short of it at the next, a pose 17 degrees away), 3 bones in 60-degree cones 3.3 / 10.9 against 2.5, the
# 4-bone coned leg with a hinged knee and a pole 1.0 / 6.0 against 2.1; now as at 0.001 (the knee 2.04 at both).
FIT_TOLERANCE = 1e-3
# The near fit's pull, per unit of the tolerance over the chain's length: it keeps the tip within about a
# tenth of the tolerance where the cones allow the target (bias ~ pull * turn / leverage), and rounds the
# edge of what they allow, where the exact pose turns fast (a square root of the distance to the edge).
NEAR_PER_TOLERANCE = 1.0
MU_FLOOR = 1e-8
# The polish stops pulling once the tip is within this fraction of the tolerance.
POLISH_SLACK = 0.5
# The polish is up to POLISH_ROUNDS proximal fits, each pulled toward the last one's swings by POLISH_PER_TOLERANCE
# tolerances over the length, until the tip is within the tolerance or a round brings it less than POLISH_STALL
# tolerances nearer (beyond what the cones allow). One fit pulled by MU_FLOOR took whatever step landed within the
# slack: where the near fit missed by just over the tolerance it moved the pose far along the rims (3 bones in
# 60-degree cones: 6.3 degrees between targets 0.05 frames apart, 7.1 degrees in a frame of the quality loop).
# Rounds move it as little as they can: 0.84 and 4.9, the same targets reached (2.5 a frame with POLISH_CRAWL).
# Fewer or stronger rounds turn less but stop short of more (cones of 1.05 radians: a pull of 1, or 10 rounds,
# 1.8-4.0 degrees, 1-3 targets 1.04-1.07 tolerances short), more turn faster (40 rounds: 6.7).
POLISH_ROUNDS = 20
POLISH_PER_TOLERANCE = 0.3
POLISH_STALL = 3e-3
# ... or less than this fraction of what it still lacks: beyond the edge of what the cones allow the rounds crawl
# along a rim, a little nearer each, and a pose slid 20 rounds along it moved fast with the target (3 bones with a
# pole in 50-degree cones: 12.3 degrees a frame, 3.6 with this; 45/55/60 degrees 11.3/5.7/4.9 -> 8.0/4.6/2.5;
# the same targets reached). At 0.2 the 45-degree chain turned 2.6 but one target fewer was reached.
POLISH_CRAWL = 0.15
# ... and is tried only when the near fit misses by more than this many tolerances (4 bones, after their proximal
# steps: at 1 the coned leg turned 3.5-5.3 degrees a frame; 2 bones reach by their circle,
# :func:`two_bone_reach`) ...
POLISH_BEYOND = 3.0
# ... or, on 3 bones, this many: at 3 the near fit's pull left random 3-bone chains in random cones 1.06-1.17
# tolerances short of targets from poses inside their cones (3 of 1500), and the quality loop's 3-bone chain in
# the cones turned 4.48 degrees a frame (2.79 at 1; with a pole 3.94, 2.62).
POLISH_BEYOND_THREE = 1.0
# Beyond what the cones allow, the pull toward the free pose: MU_BEYOND * (shortfall / length)**BEYOND_POWER
# (0.4 at a shortfall of 0.2 of the length, strong enough to keep a 2-bone chain off its mirror poses; 5e-5 at
# 0.002, weak enough that the pose meets the reaching one at the edge of what the cones allow).
MU_BEYOND = 10.0
BEYOND_POWER = 2
# ... and no stronger than it is at 0.2 of the length: farther out, an ever stronger pull held the pose near the
# free one's projection, its tip up to 0.5-0.75 of the chain's length farther from the target than the nearest
# pose the cones allow (2-3 bones, targets 1.5 lengths out); capped, within 0.16, as continuous on the same paths.
MU_BEYOND_CAP = 0.4
# Cones wider to one side than the other (left != right): where the free pose, bending in its plane (local YZ:
# Blender's bones bend about X), leaves them, the poses that reach coil sideways, and with a reference in the
# plane the fit coiled to the side the target lay on, or stayed in the plane, so the pose popped as the target
# crossed the plane. The reference leans toward the wide side instead, by LEAN_PER_RADIAN times the free pose's
# largest excess over its cones (radians), at most the cones' sideways offset (:func:`_leaning`). Pure solver,
# the quality loop in cones left 0.3, right 0.9, up 0.2, down 0.7, largest turn a frame with a pole / without
# (before -> now): 2 bones 4.45 -> 0.58, 3 bones 25.4 -> 1.45, 4 bones 11.9 / 32.7 -> 3.89 / 3.78, 5 bones
# 59.7 -> 6.00 / 3.25, 6 bones 65.9 / 82.6 -> 6.92 / 5.28, 8 bones 108 / 128 -> 5.15 / 5.16 (every target reached,
# 330 / 357 before). At 3: 4 bones 5.04, 6 bones 26.8 / 73.3; at 30: 6 bones 8.6, 8 bones 7.7. Toward the
# cones' middle in both directions (up and down too) turned the issue's coned 5-bone leg 3.01 (1.82).
LEAN_PER_RADIAN = 10.0
# ... and a leaning reference sets the 4-bone proximal flow further from some reaching poses: its near steps ended
# 1.7 tolerances short of 2 of 160 random 4-bone chains' targets inside random cones (the polish then only past
# POLISH_BEYOND); polished past this instead, every one reached.
LEANING_POLISH_BEYOND = 1.0
# From this many bones the near fit is PROXIMAL_STEPS proximal steps with a pull of PROXIMAL_PER_TOLERANCE
# tolerances over the length, each toward the last one's swings, then the beyond fit from there, every stage
# on every solve: the polish switched on where the near fit missed by 3 tolerances, and the beyond fit restarted
# from the wide fit's pose where the polish fell short, turned 5-6 bones 9.4-13 degrees in a frame by the edge
# of what the cones allow (6.5 with the polish always on: holding the tip within the tolerance there makes the
# pose turn fast); 3.5-4.3 this way, the tip rounding that edge up to 6.6e-3 of the length short. On 4 bones
# the polished flow (one near fit, the polish only past POLISH_BEYOND, the beyond fit from the wide fit's pose)
# left 19 of 240 random chains in random cones 1.1-3.0 tolerances short of targets from poses inside their
# cones, and the quality loop's leg short of the 7 targets by the edge of what its cones allow; the proximal way
# reaches them all (with the polish past POLISH_BEYOND, below PROXIMAL_POLISH_BELOW bones). 2-3 bones keep the
# polished flow: proximal, the 3-bone chain in the cones turned 8.3 degrees a frame (2.6 polished).
PROXIMAL_FROM = 4
# From this many bones the wide fit is WIDE_PROXIMAL_STEPS proximal fits from the projected reference, each
# pulled toward the last one's swings by WIDE_PROXIMAL_PULL times the tip's distance over the length (never
# below MU_WIDE_FLOOR), instead of the stages pulled toward the reference: at 8-10 bones that fit, at a pull of
# 0.1-0.01, had two minima whose costs differ by 1e-7 and ended in either for inputs 1.5e-7 apart (1.1e-3 of the
# length apart on test_stability's 8-bone chains; 0.08 at 10 bones). A pull as strong as the tip's distance keeps
# each fit's cost convex near its start (the tip's curvature term is about that distance), so each has one
# minimum, a continuous function of the last: 1e-5 apart at most on 60 random 8-10 bone chains.
WIDE_PROXIMAL_FROM = 8
WIDE_PROXIMAL_STEPS = 6
WIDE_PROXIMAL_PULL = 1.0
MU_WIDE_FLOOR = 1e-3
# Two proximal steps, not three: each holds the tip nearer the target by the edge of what the cones allow,
# where the reaching pose turns fast. Pure solver, the quality loop in the cones, largest turn a frame
# with a pole / without, 3 steps -> 2: 4 bones 1.67/1.26 -> 1.29/1.02 (polished flow 1.15/1.03), 5 bones
# 4.08/4.04 -> 1.82/1.72, 6 bones 1.97/1.95 -> 1.17/1.18, 7 bones 1.05 -> 1.02; half the cones, 8 bones
# 2.24/2.35 -> 1.72/1.81, 10 bones 2.91/3.00 -> 2.18/2.25; hinged knee among cones (hinge_fit), 4 bones with a
# pole 3.47 -> 2.59, 5 bones 2.32 -> 1.78. The same targets reached but one (7 bones: 356 of 400, was 357). One
# step: 4 bones 5.07, and the 6-bone loop missed 12 targets more.
PROXIMAL_STEPS = 2
PROXIMAL_PER_TOLERANCE = 3.0
# Below this many bones the proximal flow polishes too, where its steps end more than POLISH_BEYOND tolerances
# short (a local minimum: 4 random coned chains of 240 stopped 1.1-6.5 tolerances short without it); from 5 bones
# the polish switching on turned the chains 5.6 degrees in a frame by the edge of their cones.
PROXIMAL_POLISH_BELOW = 5
# The fit has settled when no swing moves by more than this (radians) in an accepted step.
STEP_TOL = 1e-11
# Where the Hessian is indefinite, the damping is at least this many times its most negative eigenvalue's size
# (:func:`damped_step`).
INDEFINITE_MARGIN = 1.01
# Step budget of the fit (it settles in 5-40 steps on the benchmark paths).
MAX_STEPS = 200
# Central-difference step for the tip's derivatives (radians): truncation ~ H**2, rounding ~ 1e-16 / H**2.
H = 1e-4
# Two bones (:func:`two_bone_reach`): rolls sampled on the circle of poses that reach (3.75 degrees apart), then
# bisections to the limits' edge (3.75 degrees / 2**40: 6e-14 radians).
REACH_ROLLS = 96
REACH_BISECTIONS = 40
# Where no sample is allowed, the excess over the limits is minimised (golden-section search, at most
# NARROW_ARC_STEPS steps over two spacings, 7.5 degrees / 1.618**60: 2e-12 radians) about the NARROW_ARC_MINIMA
# samples that break them least among their neighbours: an allowed arc between two samples.
NARROW_ARC_MINIMA = 3
NARROW_ARC_STEPS = 60
NARROW_ARC_SLOPES = 2.0
# ... not for a target this near the root, or a circle this small (fractions of the chain's length).
REACH_DEGENERATE = 1e-6


@dataclass(frozen=True)
class SwingFit:
    """Result of :func:`fit_swings`: joints ``(N+1, 3)``, tip error, steps taken, whether it settled, and the
    swings ``(N, 2)`` they came from where the last stage was the beyond fit (None elsewhere)."""

    joints: np.ndarray
    error: float
    steps: int
    settled: bool
    swings: np.ndarray | None = None


@dataclass(frozen=True)
class Coordinates(ResolvedLimits):
    """Limits whose fit runs in coordinates of their own (a chain with hinges: :mod:`.hinge_fit`): passed to
    :func:`fit_swings` in place of the limits, they give the fit its walk (:meth:`of`, :meth:`joints`,
    :meth:`tip`, :meth:`derivatives`); the projection and rim terms take a HINGE bone's ``(0, angle)`` as its
    interval (:func:`_project`, :func:`_rim_terms`). Cone-only chains never see one."""

    # Whether a fit that settled far short is polished, from how many bones the near fit is proximal steps
    # (:func:`fit_swings`; None: PROXIMAL_FROM), and the beyond fit's pull weight (:func:`_fit_beyond`).
    polish: ClassVar[bool] = True
    proximal_from: ClassVar[int | None] = None
    mu_beyond: ClassVar[float] = MU_BEYOND

    def proximal_per_tolerance(self) -> float:
        """The near fit's proximal pull in tolerances over the length (:func:`_fit_proximal`)."""
        return PROXIMAL_PER_TOLERANCE

    def of(self, joints: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def hinge_u(self, bone: int, u: float) -> float:
        """A HINGE bone's ``u`` projected into the fit's region (held at 0 unless the coordinates give it a
        meaning of their own: :class:`.hinge_fit.HingeCoordinates`)."""
        return 0.0

    def joints(self, q: np.ndarray, root: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def tip(self, q: np.ndarray, root: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        return self.joints(q[None], root, lengths)[0, -1]

    def derivatives(self, q: np.ndarray, root: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return _tip_derivatives(q, root, lengths, self)


def cones_only(limits: ResolvedLimits) -> bool:
    """Whether every limit of the chain is a cone or none (hinges roll their parents: other solves)."""
    return all(limit is None or isinstance(limit, ConeLimit) for limit in limits.limits)


def swings_of(joints: np.ndarray, limits: ResolvedLimits) -> np.ndarray:
    """Swing coordinates ``(N, 2)`` of a pose ``(N+1, 3)`` (see the module)."""
    if isinstance(limits, Coordinates):
        return limits.of(joints)
    dirs = np.diff(joints, axis=0)
    dirs = dirs / np.linalg.norm(dirs, axis=1)[:, None]
    out = np.zeros((len(dirs), 2))
    parent = limits.base_frame
    for i, d in enumerate(dirs):
        x, y, z = limits.limit_frame(parent, i).T @ d
        out[i] = swing_of(x, y, z)
        parent = limits.bone_frame(i, d)
    return out


def swing_of(x: float, y: float, z: float) -> tuple[float, float]:
    """The swing ``(u, v)`` of a unit direction ``(x, y, z)`` in its limit frame (the inverse of :func:`_locals`):
    its angle from Y, split along X and Z; ``(0, 0)`` along Y."""
    side = math.hypot(x, z)
    if side > 0.0:
        theta = math.atan2(side, y)
        return theta * x / side, theta * z / side
    return 0.0, 0.0


def _carried(limits: ResolvedLimits) -> np.ndarray:
    """``(N, 3, 3)``: per bone, the matrix taking its local swing direction to its direction before its
    parent's turn (bone 0: the base frame turned by its rest offset; bone ``i``: its parent's start frame
    turned by its rest offset). Bone ``i``'s direction is that one turned by the minimal turn of bone
    ``i - 1`` from its start direction (:meth:`.LimitFrames.bone_frame`)."""
    parents = np.concatenate([limits.base_frame[None], limits.frames[:-1]])
    return np.einsum("nij,njk->nik", parents, limits.rest_offsets)


def _locals(q: np.ndarray) -> np.ndarray:
    """Unit directions ``(..., 3)`` of swings ``q (..., 2)`` in their limit frames."""
    u, v = q[..., 0], q[..., 1]
    theta = np.hypot(u, v)
    wide = theta > 1e-4
    k = np.where(wide, np.sin(theta) / np.where(wide, theta, 1.0), 1.0 - theta * theta / 6.0)
    return np.stack([u * k, np.cos(theta), v * k], axis=-1)


def joints_of(q: np.ndarray, root: np.ndarray, lengths: np.ndarray, limits: ResolvedLimits) -> np.ndarray:
    """Joints ``(..., N+1, 3)`` of swings ``q (..., N, 2)``: forward kinematics, batched over the leading axes
    (a few whole-array calls per bone: the local directions of every bone at once, then the turns)."""
    if isinstance(limits, Coordinates):
        return limits.joints(q, root, lengths)
    lead = q.shape[:-2]
    n = q.shape[-2]
    local = _locals(q.reshape(-1, n, 2))
    carried = _carried(limits)
    out = np.empty((local.shape[0], n + 1, 3))
    out[:, 0] = root
    d = np.empty(0)
    for i in range(n):
        carried_d = local[:, i] @ carried[i].T
        d = carried_d if i == 0 else _turned(limits.start_dirs[i - 1], d, carried_d)
        d /= np.sqrt(np.einsum("ki,ki->k", d, d))[:, None]
        out[:, i + 1] = out[:, i] + lengths[i] * d
    return out.reshape(*lead, n + 1, 3)


def _turned(a: np.ndarray, b: np.ndarray, x: np.ndarray, columns: bool = False) -> np.ndarray:
    """Vectors ``x (K, 3)`` turned by the minimal turns from unit ``a (3,)`` onto unit ``b (K, 3)``
    (:func:`.turn_floats` on arrays): with ``w = a x b`` and ``c = a.b``, ``x + w x x + w x (w x x) / (1 + c)``
    is ``c x + (a.x) b - (b.x) a + (w.x) w / (1 + c)``: a dozen whole-array calls, no cross products.

    With ``columns``, ``x (3, C)`` is one matrix (a start frame) whose columns every row's turn turns: ``(K, 3,
    C)``, the dot products with ``x`` taken once per row for all its columns: a tree fit's bone frames (one call
    instead of one a column: 160 limited pole trees in the solver 86 -> 65 s of CPU time; the rounding moved
    their poses by at most 6e-9 of the length; docs/trees.md)."""
    c = b @ a
    w = b @ skew(a).T
    opposite = c < -1.0 + 1e-12
    over = np.where(opposite, 1.0, 1.0 + c)
    if columns:
        out = (c[:, None, None] * x + b[:, :, None] * (a @ x) - a[:, None] * (b @ x)[:, None, :]
               + w[:, :, None] * ((w @ x) / over[:, None])[:, None, :])
        for row in np.flatnonzero(opposite):
            (ax, ay, az), (bx, by, bz) = a.tolist(), b[row].tolist()
            out[row] = np.array([turn_floats(ax, ay, az, bx, by, bz, *column) for column in x.T.tolist()]).T
        return out
    k = np.einsum("ki,ki->k", w, x) / over
    out = (c[:, None] * x + (x @ a)[:, None] * b - np.einsum("ki,ki->k", b, x)[:, None] * a
           + k[:, None] * w)
    for row in np.flatnonzero(opposite):
        (ax, ay, az), (bx, by, bz), (xx, xy, xz) = a.tolist(), b[row].tolist(), x[row].tolist()
        out[row] = turn_floats(ax, ay, az, bx, by, bz, xx, xy, xz)
    return out




def tip_of(q: np.ndarray, root: np.ndarray, lengths: np.ndarray, limits: ResolvedLimits) -> np.ndarray:
    """The tip ``(3,)`` of one pose's swings ``q (N, 2)``: :func:`joints_of`'s walk on plain floats (one
    pose through the batched walk costs about ten times as much)."""
    if isinstance(limits, Coordinates):
        return limits.tip(q, root, lengths)
    return np.array(_tip_floats(q.tolist(), root.tolist(), lengths.tolist(), _carried(limits).tolist(),
                                limits.start_dirs.tolist()))


def _tip_floats(q: list, root: list, lengths: list, carried: list, starts: list) -> tuple[float, float, float]:
    x, y, z = root
    px = py = pz = 0.0
    for i, ((u, v), length) in enumerate(zip(q, lengths)):
        theta = math.hypot(u, v)
        k = math.sin(theta) / theta if theta > 1e-4 else 1.0 - theta * theta / 6.0
        lx, ly, lz = u * k, math.cos(theta), v * k
        (m00, m01, m02), (m10, m11, m12), (m20, m21, m22) = carried[i]
        dx, dy, dz = m00 * lx + m01 * ly + m02 * lz, m10 * lx + m11 * ly + m12 * lz, m20 * lx + m21 * ly + m22 * lz
        if i > 0:
            sx, sy, sz = starts[i - 1]
            dx, dy, dz = turn_floats(sx, sy, sz, px, py, pz, dx, dy, dz)
        norm = math.sqrt(dx * dx + dy * dy + dz * dz)
        px, py, pz = dx / norm, dy / norm, dz / norm
        x, y, z = x + length * px, y + length * py, z + length * pz
    return x, y, z


def project_swing(limit: ConeLimit | None, u: float, v: float) -> tuple[float, float]:
    """The nearest point to ``(u, v)`` in the cone's swing region (itself when inside or unlimited).

    The region is a quarter ellipse per quadrant; its nearest point keeps the signs of ``(u, v)``, so it
    is the nearest point of that quadrant's ellipse: Newton's method on Eberly's root function
    ``F(t) = (a u / (t + a**2))**2 + (b v / (t + b**2))**2 - 1``, convex and falling for ``t >= 0``, so
    Newton from ``t = 0`` climbs to the root without overshooting.
    """
    if limit is None:
        return u, v
    a, b = limit.semi_axes(u, v)
    if a <= 0.0 or b <= 0.0:
        if a <= 0.0 and b <= 0.0:
            return 0.0, 0.0
        if a <= 0.0:
            return 0.0, min(max(v, -limit.down), limit.up)
        return min(max(u, -limit.left), limit.right), 0.0
    if (u / a) ** 2 + (v / b) ** 2 <= 1.0:
        return u, v
    a2, b2 = a * a, b * b
    au, bv = a * u, b * v
    t = 0.0
    for _ in range(100):
        p, r = au / (t + a2), bv / (t + b2)
        f = p * p + r * r - 1.0
        if f <= 0.0:
            break
        slope = -2.0 * (p * p / (t + a2) + r * r / (t + b2))
        step = -f / slope
        t += step
        if step <= 1e-15 * (t + a2 + b2):
            break
    pu, pv = a2 * u / (t + a2), b2 * v / (t + b2)
    # On the rim, from inside: the limit check then never sees a rounding's excess.
    scale = 1.0 / math.sqrt(max((pu / a) ** 2 + (pv / b) ** 2, 1.0))
    return pu * scale, pv * scale


def _project(q: np.ndarray, limits: ResolvedLimits) -> np.ndarray:
    out = q.copy()
    for i, limit in enumerate(limits.limits):
        if isinstance(limit, HingeLimit):  # a hinge's coordinates (:class:`Coordinates`): (0, its angle)
            u = limits.hinge_u(i, float(q[i, 0])) if isinstance(limits, Coordinates) else 0.0
            out[i] = u, min(max(float(q[i, 1]), limit.min_angle), limit.max_angle)
            continue
        out[i] = project_swing(limit, float(q[i, 0]), float(q[i, 1]))
    return out


def _rim_terms(q: np.ndarray, gradient: np.ndarray, hessian: np.ndarray,
               limits: ResolvedLimits) -> list[np.ndarray | None]:
    """Per bone: the outward unit normal (in swing coordinates) where the swing lies on its cone's rim.

    Adds the rim's curvature to ``hessian`` (in place) with the multiplier that holds the swing on the
    rim (the Lagrangian's Hessian), so that sliding along a curved rim converges as fast as a free step.
    """
    out: list[np.ndarray | None] = []
    for i, limit in enumerate(limits.limits):
        normal = None
        if isinstance(limit, ConeLimit):
            u, v = float(q[i, 0]), float(q[i, 1])
            a, b = limit.semi_axes(u, v)
            if a > 0.0 and b > 0.0 and (u / a) ** 2 + (v / b) ** 2 >= 1.0 - 1e-9:
                g = np.array([2.0 * u / (a * a), 2.0 * v / (b * b)])
                norm2 = float(g @ g)
                if norm2 > 0.0:
                    normal = g / math.sqrt(norm2)
                    multiplier = -float(gradient[2 * i:2 * i + 2] @ g) / norm2
                    if multiplier > 0.0:
                        hessian[2 * i, 2 * i] += multiplier * 2.0 / (a * a)
                        hessian[2 * i + 1, 2 * i + 1] += multiplier * 2.0 / (b * b)
        elif isinstance(limit, HingeLimit):
            # A hinge's angle at an end of its interval (:class:`Coordinates`): a straight rim, no curvature.
            v = float(q[i, 1])
            if v >= limit.max_angle:
                normal = np.array([0.0, 1.0])
            elif v <= limit.min_angle:
                normal = np.array([0.0, -1.0])
        out.append(normal)
    return out


# The last derivatives computed, by the value of every input: each stage of the fit starts where the last
# one settled, and its final step computed them there (a fifth of the fit's walks).
_LAST_DERIVATIVES: list[tuple[tuple[bytes, ...], tuple[np.ndarray, np.ndarray]]] = []


def _derivatives_at(q: np.ndarray, root: np.ndarray, lengths: np.ndarray,
                    limits: ResolvedLimits) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_tip_derivatives`, reusing the last ones when every input is the same (callers never
    modify the arrays)."""
    if isinstance(limits, Coordinates):
        return limits.derivatives(q, root, lengths)
    key = tuple(np.ascontiguousarray(x, dtype=float).tobytes() for x in (
        q, root, lengths, limits.frames, limits.start_dirs, limits.rest_offsets, limits.base_frame))
    if _LAST_DERIVATIVES and _LAST_DERIVATIVES[0][0] == key:
        return _LAST_DERIVATIVES[0][1]
    derivatives = _tip_derivatives(q, root, lengths, limits)
    _LAST_DERIVATIVES[:] = [(key, derivatives)]
    return derivatives


_STENCILS: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def _stencil(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_tip_derivatives`' probe offsets ``(4 M + 4 pairs + 1, M)`` for ``M`` swings (the centre
    last) and the pairs' indices, built once per size: ``+-H``, ``+-2H`` along each swing, then the four
    sign pairs ``+-H, +-H`` along each pair."""
    if m not in _STENCILS:
        i, j = np.triu_indices(m, 1)
        pairs = len(i)
        offsets = np.zeros((4 * m + 4 * pairs + 1, m))
        idx = np.arange(m)
        offsets[idx, idx] = H
        offsets[m + idx, idx] = -H
        offsets[2 * m + idx, idx] = 2.0 * H
        offsets[3 * m + idx, idx] = -2.0 * H
        for k, (si, sj) in enumerate(((1.0, 1.0), (1.0, -1.0), (-1.0, 1.0), (-1.0, -1.0))):
            rows = 4 * m + k * pairs + np.arange(pairs)
            offsets[rows, i] = si * H
            offsets[rows, j] = sj * H
        _STENCILS[m] = offsets, i, j
    return _STENCILS[m]


def _tip_derivatives(q: np.ndarray, root: np.ndarray, lengths: np.ndarray,
                     limits: ResolvedLimits) -> tuple[np.ndarray, np.ndarray]:
    """The tip's Jacobian ``(3, M)`` and second derivatives ``(3, M, M)`` in the swings (``M = 2N``), by
    central differences, every probe in one batched walk.

    The stencil decides the fit's path as well as its fixed point: a cheaper one (two probes per pair,
    the same ``O(H**2)``) moved the 7-bone benchmark chain into another local minimum on 10 targets."""
    n = len(lengths)
    probes = q.ravel()[None] + _stencil(2 * n)[0]
    return central_differences(joints_of(probes.reshape(-1, n, 2), root, lengths, limits)[:, -1], 2 * n)


def central_differences(values: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Jacobian ``(D, M)`` and second derivatives ``(D, M, M)`` of a function of ``M`` coordinates from its values
    ``(P, D)`` at the probes of :func:`_stencil` (in its order): the lone chain's tip (:func:`_tip_derivatives`)
    and a tree's effectors (:mod:`.tree_fit`)."""
    _, i, j = _stencil(m)
    pairs, idx, base = len(i), np.arange(m), 4 * m
    centre = values[-1]
    jac = ((values[:m] - values[m:2 * m]) / (2.0 * H)).T
    second = np.empty((values.shape[1], m, m))
    second[:, idx, idx] = ((values[2 * m:3 * m] - 2.0 * centre + values[3 * m:4 * m]) / (4.0 * H * H)).T
    pp, pm, mp, mm = (values[base + k * pairs:base + (k + 1) * pairs] for k in range(4))
    mixed = ((pp - pm - mp + mm) / (4.0 * H * H)).T
    second[:, i, j] = mixed
    second[:, j, i] = mixed
    return jac, second


def _solve(matrix: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``matrix^-1 rhs`` for a small square ``matrix``, by Gaussian elimination with partial pivoting on
    plain floats. LAPACK through numpy (``np.linalg.solve``) is 4-45 times faster a call at 8-22 unknowns,
    but OpenBLAS's second thread spins on the other core, which Blender's threads need: the issue's coned leg
    (``scripts/swing_timing.py``) took a median 45.9 ms of CPU time a solve with it, 25.6 with this."""
    size = len(rhs)
    rows = [row + [b] for row, b in zip(matrix.tolist(), rhs.tolist())]
    for col in range(size):
        column = [abs(rows[r][col]) for r in range(col, size)]
        pivot = col + column.index(max(column))
        if rows[pivot][col] == 0.0:
            raise np.linalg.LinAlgError("Singular matrix")
        rows[col], rows[pivot] = rows[pivot], rows[col]
        top = rows[col][col + 1:]
        inverse = 1.0 / rows[col][col]
        for r in range(col + 1, size):
            row = rows[r]
            factor = row[col] * inverse
            if factor != 0.0:
                row[col + 1:] = [x - factor * t for x, t in zip(row[col + 1:], top)]
    out = [0.0] * size
    for r in range(size - 1, -1, -1):
        row = rows[r]
        out[r] = (row[size] - sum([x * o for x, o in zip(row[r + 1:size], out[r + 1:])])) / row[r]
    return np.array(out)


def fit_swings(reference: np.ndarray, target: np.ndarray, lengths: np.ndarray, limits: ResolvedLimits,
               tolerance: float) -> SwingFit:
    """The pose near ``reference (N+1, 3)`` whose tip is nearest ``target``, every cone kept (see the module).

    The reference's root is the chain's root; ``limits``: cones or none only (:func:`cones_only`);
    ``tolerance``: the distance that counts as reached; the fit aims within FIT_TOLERANCE of the length at most.
    """
    root = reference[0]
    length = float(lengths.sum())
    tolerance = min(tolerance, FIT_TOLERANCE * length)
    q_ref, leaning = _leaning(swings_of(reference, limits), limits)
    # The wide fit approached from a strong pull (near the projected reference the fit has one minimum)
    # down to its own, each stage from the last: a path continuous in the inputs, where one damped Newton
    # descent from the projected reference could end in either of two minima for inputs 1e-7 apart.
    wide, steps, settled = _project(q_ref, limits), 0, True
    if len(lengths) >= WIDE_PROXIMAL_FROM:
        wide, steps, settled = _wide_proximal(wide, root, target, lengths, limits)
    else:
        for mu in WIDE_STAGES:
            wide, more, settled_stage = _minimise(wide, q_ref, mu, root, target, lengths, limits)
            steps, settled = steps + more, settled and settled_stage
    proximal_from = limits.proximal_from if isinstance(limits, Coordinates) else None
    if len(lengths) >= (PROXIMAL_FROM if proximal_from is None else proximal_from):
        return _fit_proximal(wide, q_ref, steps, settled, root, target, lengths, limits, tolerance,
                             LEANING_POLISH_BEYOND if leaning else POLISH_BEYOND)
    mu_near = max(NEAR_PER_TOLERANCE * tolerance / length, MU_FLOOR)
    near, more, settled_near = _minimise(wide, wide, mu_near, root, target, lengths, limits)
    steps, settled = steps + more, settled and settled_near
    joints = joints_of(near, root, lengths, limits)
    error = float(np.linalg.norm(joints[-1] - target))
    start = near
    polish_beyond = POLISH_BEYOND_THREE if len(lengths) == 3 else POLISH_BEYOND
    if error > polish_beyond * tolerance and (not isinstance(limits, Coordinates) or limits.polish):
        polished, polished_error, more, settled_polish = polish(near, root, target, lengths, limits, tolerance)
        steps += more
        if polished_error <= tolerance:
            return SwingFit(joints_of(polished, root, lengths, limits), polished_error, steps,
                            settled and settled_polish)
        # Short of a target the cones do not allow: the beyond fit starts from the polished pose, which meets
        # the reaching one at the edge of what the cones allow (from the wide fit's pose the 3-bone coned chain
        # turned 15 degrees in a frame, where the polish stopped reaching; 4.5 from the polished pose).
        start, error, settled = polished, polished_error, settled and settled_polish
    if error > tolerance or len(lengths) == 2:
        # Beyond what the cones allow: the nearest pose flips between mirror poses equally near the target
        # (2 bones: 12 degrees in a frame as the target crossed the bend plane). A pull toward the reference
        # (the free pose) that grows with the square of the shortfall, a continuous function of the target,
        # keeps one pose; near the edge it vanishes, so there the pose meets the one that reaches. Far out it
        # stops growing, so the tip still comes as near the target as the cones let it. Two bones run it on every
        # solve (within the tolerance its pull is zero: one more near step), as the proximal flow does: run from
        # the tolerance on, it halved the tip's distance there in one target's step (0.58 degrees in a tenth of a
        # frame of the quality loop with a pole; 2.18 -> 1.78 degrees a frame).
        beyond = _fit_beyond(start, q_ref, mu_near, error, root, target, lengths, limits, tolerance)
        return SwingFit(beyond.joints, beyond.error, steps + beyond.steps, settled and beyond.settled)
    return SwingFit(joints, error, steps, settled)


def _leaning(q_ref: np.ndarray, limits: ResolvedLimits) -> tuple[np.ndarray, bool]:
    """The reference swings ``q_ref`` moved sideways (their ``u``, local X) by LEAN_PER_RADIAN times their
    largest excess over their cones (radians, at most 1) times each lopsided cone's offset ``(right - left) / 2``:
    unchanged where the cones are as wide to either side or the reference keeps them; and whether it moved."""
    offsets = np.array([(limit.right - limit.left) / 2.0 if isinstance(limit, ConeLimit) else 0.0
                        for limit in limits.limits])
    if not offsets.any():
        return q_ref, False
    lean = min(1.0, LEAN_PER_RADIAN * float(np.abs(q_ref - _project(q_ref, limits)).max()))
    out = q_ref.copy()
    out[:, 0] += lean * offsets
    return out, lean > 0.0


def polish(near: np.ndarray, root: np.ndarray, target: np.ndarray, lengths: np.ndarray, limits: ResolvedLimits,
           tolerance: float) -> tuple[np.ndarray, float, int, bool]:
    """Far short: the fits may have settled in a local minimum short of a target the cones allow (or, in hinge
    coordinates where no bone rolls, held short by their pull: :func:`.fabrik._solve_hinged`). Move the pose
    from swings ``near``, as little as can be (proximal rounds, POLISH_ROUNDS, while they gain), until the tip is
    within the tolerance (not onto the target: by the edge of what the cones allow the exact pose turns fast;
    and not closer to that edge, where the near fit's own shortfall, its pull, rounds the edge off smoothly):
    (swings, tip distance, steps, settled)."""
    length = float(lengths.sum())
    slack = POLISH_SLACK * tolerance / length
    mu = max(POLISH_PER_TOLERANCE * tolerance / length, MU_FLOOR)
    polished, steps, settled = near, 0, True
    error = float(np.linalg.norm(tip_of(near, root, lengths, limits) - target))
    for _ in range(POLISH_ROUNDS):
        polished, more, settled_round = _minimise(polished, polished, mu, root, target, lengths, limits, slack)
        steps, settled = steps + more, settled and settled_round
        last, error = error, float(np.linalg.norm(tip_of(polished, root, lengths, limits) - target))
        if error <= tolerance or last - error < max(POLISH_STALL * tolerance, POLISH_CRAWL * (error - tolerance)):
            break
    return polished, error, steps, settled


def _wide_proximal(q: np.ndarray, root: np.ndarray, target: np.ndarray, lengths: np.ndarray,
                   limits: ResolvedLimits) -> tuple[np.ndarray, int, bool]:
    """WIDE_PROXIMAL_STEPS proximal fits from the projected reference ``q``, each pulled toward the last one's
    swings by WIDE_PROXIMAL_PULL times the tip's distance over the length (floored at MU_WIDE_FLOOR)."""
    scale = 1.0 / float(lengths.sum())
    steps, settled = 0, True
    for _ in range(WIDE_PROXIMAL_STEPS):
        distance = float(np.linalg.norm(tip_of(q, root, lengths, limits) - target)) * scale
        mu = max(WIDE_PROXIMAL_PULL * distance, MU_WIDE_FLOOR)
        q, more, settled_stage = _minimise(q, q, mu, root, target, lengths, limits)
        steps, settled = steps + more, settled and settled_stage
    return q, steps, settled


def _fit_proximal(wide: np.ndarray, q_ref: np.ndarray, steps: int, settled: bool, root: np.ndarray, target: np.ndarray,
                  lengths: np.ndarray, limits: ResolvedLimits, tolerance: float, polish_beyond: float) -> SwingFit:
    """:func:`fit_swings` from the wide fit's swings on: PROXIMAL_STEPS near fits, each pulled toward the last
    one's swings (each brings the tip nearer a target the cones allow; a fixed count keeps the pose a continuous
    function of the inputs), then the beyond fit, whose pull toward the reference grows with the shortfall past
    the tolerance: zero within it, where that fit is one more proximal step, so no switch between the two.
    Below PROXIMAL_POLISH_BELOW bones (cones; not where the coordinates forbid the polish) steps that end more
    than ``polish_beyond`` tolerances short are polished first, and the polished pose kept where it reaches."""
    length = float(lengths.sum())
    per_tolerance = limits.proximal_per_tolerance() if isinstance(limits, Coordinates) else PROXIMAL_PER_TOLERANCE
    mu_near = max(per_tolerance * tolerance / length, MU_FLOOR)
    near = wide
    for _ in range(PROXIMAL_STEPS):
        near, more, settled_near = _minimise(near, near, mu_near, root, target, lengths, limits)
        steps, settled = steps + more, settled and settled_near
    error = float(np.linalg.norm(tip_of(near, root, lengths, limits) - target))
    if (len(lengths) < PROXIMAL_POLISH_BELOW and error > polish_beyond * tolerance
            and (not isinstance(limits, Coordinates) or limits.polish)):
        polished, polished_error, more, settled_polish = polish(near, root, target, lengths, limits, tolerance)
        steps += more
        if polished_error <= tolerance:
            return SwingFit(joints_of(polished, root, lengths, limits), polished_error, steps,
                            settled and settled_polish)
    final = _fit_beyond(near, q_ref, mu_near, error, root, target, lengths, limits, tolerance)
    return SwingFit(final.joints, final.error, steps + final.steps, settled and final.settled, final.swings)


def two_bone_reach(fitted: np.ndarray, target: np.ndarray, lengths: np.ndarray, limits: ResolvedLimits,
                   tolerance: float) -> np.ndarray | None:
    """Joints ``(3, 3)`` of the two-bone pose that reaches ``target`` within every limit, its elbow rolled the
    least from where the pose ``fitted`` has it; None when the target is out of the bones' reach or no pose
    that reaches keeps the limits.

    Every pose that reaches has its elbow on one circle about the line from the root to the target: its roll
    ``phi`` about that line (0 at ``fitted``'s elbow) is sampled REACH_ROLLS times, and between the allowed
    sample nearest 0 and the one before it the edge of the limits is found by bisection (on its allowed side).
    A hinged first bone: :func:`_hinged_reach` (``tolerance``: how near its poses must come).
    """
    root = fitted[0]
    l1, l2 = float(lengths[0]), float(lengths[1])
    line = target - root
    d = float(np.linalg.norm(line))
    if d <= REACH_DEGENERATE * (l1 + l2):
        return None
    line = line / d
    along = (d * d + l1 * l1 - l2 * l2) / (2.0 * d)
    radius2 = l1 * l1 - along * along
    if radius2 <= (REACH_DEGENERATE * (l1 + l2)) ** 2:  # beyond reach, or folded or straight: one pose at most
        return None
    radius = math.sqrt(radius2)
    elbow = fitted[1] - root
    side = elbow - float(elbow @ line) * line
    side_length = float(np.linalg.norm(side))
    side = side / side_length if side_length > REACH_DEGENERATE * l1 else perpendicular(line)
    other = np.cross(line, side)

    def pose(phi: float) -> np.ndarray:
        return np.array([root, root + along * line + radius * (math.cos(phi) * side + math.sin(phi) * other),
                         target])

    def excess(phi: float) -> float:
        return float(limits.violations(pose(phi)).max())

    def allowed(phi: float) -> bool:
        return excess(phi) <= LIMIT_SLACK

    if limits.limits[0] is None and isinstance(limits.limits[1], HingeLimit):
        # A free bone above a hinge rolls to put the hinge in the bend's plane, and every roll on the circle bends
        # the elbow alike: all of them are allowed or none (no scan where the hinge cannot make the bend).
        return pose(0.0) if allowed(0.0) else None
    if isinstance(limits.limits[0], HingeLimit):
        return _hinged_reach(fitted, target, lengths, limits, tolerance)
    # Rolls 0, width, -width, 2 width, ...: nearest 0 first (on a tie, the positive one).
    width = 2.0 * math.pi / REACH_ROLLS
    order = np.array([0] + [sign * k for k in range(1, REACH_ROLLS // 2 + 1) for sign in (1, -1)][:REACH_ROLLS - 1])
    rolls = width * order
    middles = root + along * line + radius * (np.cos(rolls)[:, None] * side + np.sin(rolls)[:, None] * other)
    excesses = np.empty(REACH_ROLLS)
    if cones_only(limits):
        excesses[:] = _cone_excess(_two_bone_swings(middles, root, target, limits), limits)
        candidates = [int(k) for k in np.flatnonzero(excesses <= 0.0)]
    else:
        candidates = list(range(REACH_ROLLS))
    for k in candidates:
        phi = float(rolls[k])
        excesses[k] = excess(phi)
        if excesses[k] > LIMIT_SLACK:
            continue
        if k == 0:
            return pose(0.0)
        inner = phi - math.copysign(width, phi)  # one sample nearer 0: not allowed, or it would have been taken
        return pose(_edge(allowed, inner, phi))
    # No sample allowed: the allowed rolls, where a target lies near the edge of what the limits allow, can be
    # one arc narrower than the samples' spacing (a coned shoulder with a hinged knee and a pole: 2.6 degrees,
    # between two samples; the chain stopped 0.82 short, its bones turned 152 degrees from the frame before,
    # whose arc, 3.1 degrees, held a sample). Near the samples the limits are broken least, the excess is
    # minimised over the spacing either side; where it reaches zero, the edge of that arc nearest 0 is taken.
    found = _narrow_arc(excess, excesses, rolls, order, width)
    if found is None:
        return None
    inner = width * math.trunc(found / width)  # the sample at or nearer 0 than it: not allowed
    return pose(_edge(allowed, inner, found))


def _edge(allowed: Callable[[float], bool], inner: float, phi: float) -> float:
    """The roll between ``inner`` (not allowed) and ``phi`` (allowed) where the limits' edge lies, by
    REACH_BISECTIONS bisections (on its allowed side)."""
    for _ in range(REACH_BISECTIONS):
        middle = 0.5 * (inner + phi)
        if allowed(middle):
            phi = middle
        else:
            inner = middle
    return phi


def _narrow_arc(excess: Callable[[float], float], values: np.ndarray, rolls: np.ndarray, order: np.ndarray,
                width: float) -> float | None:
    """An allowed roll within a sample's spacing of the samples ``rolls`` (none of them allowed) where the largest
    excess over the limits, ``excess(roll)`` (``values`` at the samples), is least among its neighbours
    (NARROW_ARC_MINIMA of them, the least excess first): the minimum of the excess found by golden-section search
    over the spacing either side; of those allowed, the one nearest 0. None when none is."""
    by_angle = np.argsort(order)  # the samples around the circle
    around = values[by_angle]
    before, after = np.roll(around, 1), np.roll(around, -1)
    # A narrow arc next to a sample: the excess rises from the arc's edges, so the sample's excess is at most its
    # rise to the neighbour on its far side (slopes alike within a factor NARROW_ARC_SLOPES); a local minimum above
    # zero, where the limits meet nowhere near, is not searched. (Past a cone's zero side the excess is infinite:
    # infinity less infinity compares false, so such samples are never searched.)
    with np.errstate(invalid="ignore"):
        rise = np.maximum(before, after) - around
    low = np.flatnonzero((around <= before) & (around <= after) & (around <= NARROW_ARC_SLOPES * rise))
    best: float | None = None
    for k in by_angle[low[np.argsort(around[low], kind="stable")][:NARROW_ARC_MINIMA]]:
        a, b = float(rolls[k]) - width, float(rolls[k]) + width
        golden = 0.5 * (math.sqrt(5.0) - 1.0)
        c, d = b - golden * (b - a), a + golden * (b - a)
        fc, fd = excess(c), excess(d)
        for _ in range(NARROW_ARC_STEPS):
            if min(fc, fd) <= LIMIT_SLACK:
                break
            if fc <= fd:
                b, d, fd = d, c, fc
                c = b - golden * (b - a)
                fc = excess(c)
            else:
                a, c, fc = c, d, fd
                d = a + golden * (b - a)
                fd = excess(d)
        phi = c if fc <= fd else d
        if min(fc, fd) <= LIMIT_SLACK and (best is None or abs(phi) < abs(best)):
            best = phi
    return best


def _hinged_reach(fitted: np.ndarray, target: np.ndarray, lengths: np.ndarray, limits: ResolvedLimits,
                  tolerance: float) -> np.ndarray | None:
    """:func:`two_bone_reach` for a hinged first bone, whose elbow keeps to one circle in its hinge's plane: that
    circle meets the sphere of the second bone's length about the target at two elbows at most, solved for in
    closed form. Each is put inside the limits as a limited pass would put it (the hinge angle clamped into its
    range, the second bone, aimed at the target, into its own limit), so an elbow just beyond the hinge's end by
    float rounding of the inputs (targets from poses at the end of a hinge's range) is taken as that end, not
    dropped: the pose is continuous in the inputs. Of those that come within ``tolerance`` of the target, the one
    whose elbow is nearest ``fitted``'s; None when neither does."""
    root = fitted[0]
    l1, l2 = float(lengths[0]), float(lengths[1])
    frame = limits.limit_frame(limits.base_frame, 0)
    line = target - root
    # The elbow at hinge angle a is root + l1 (cos a Y + sin a Z) of that frame; it is l2 from the target where
    # cos a (line . Y) + sin a (line . Z) = (|line|^2 + l1^2 - l2^2) / (2 l1).
    y, z = float(line @ frame[:, 1]), float(line @ frame[:, 2])
    spread_cos = float(line @ line) + l1 * l1 - l2 * l2
    radius = math.hypot(y, z)
    if radius <= REACH_DEGENERATE * (l1 + l2) or abs(spread_cos) > 2.0 * l1 * radius:
        return None
    middle, spread = math.atan2(z, y), math.acos(spread_cos / (2.0 * l1 * radius))
    best: tuple[float, np.ndarray] | None = None
    for a in (middle - spread, middle + spread):
        bone = limits.constrain(limits.base_frame, 0, frame @ np.array([0.0, math.cos(a), math.sin(a)]))
        elbow = root + l1 * bone
        toward = target - elbow
        reach = float(np.linalg.norm(toward))
        if reach <= REACH_DEGENERATE * (l1 + l2):
            continue
        child = limits.constrain(limits.frame_at(limits.base_frame, 0, bone), 1, toward / reach)
        pose = np.array([root, elbow, elbow + l2 * child])
        if math.dist(pose[2], target) > tolerance:
            continue
        away = math.dist(elbow, fitted[1])
        if best is None or away < best[0]:
            best = (away, pose)
    return None if best is None else best[1]


def _two_bone_swings(middles: np.ndarray, root: np.ndarray, target: np.ndarray, limits: ResolvedLimits) -> np.ndarray:
    """Swings ``(K, 2, 2)`` of the two-bone poses from ``root`` through each of ``middles (K, 3)`` to ``target``:
    :func:`swings_of` on many poses at once. Bone 1's limit frame is bone 0's start frame turned by the minimal
    turn onto its direction; its transpose turns bone 1's direction back.

    A second copy of :func:`swings_of`'s walk, kept for speed: the scan runs on every frame a 2-bone chain's
    target lies beyond its cones, and through :func:`swings_of` it made the issue's 2-bone coned loop (pure
    solver, 400 frames, 328 beyond the cones) cost 12.2 ms a solve against 9.0 without the scan (one run); with
    this, 8.6-10.2 against 8.0-8.7 (two runs interleaved). The two agree to 3e-13
    (tests/solver/test_two_bone_limits.py)."""
    first = middles - root
    first /= np.sqrt(np.einsum("ki,ki->k", first, first))[:, None]
    second = target - middles
    second /= np.sqrt(np.einsum("ki,ki->k", second, second))[:, None]
    start = limits.start_dirs[0]
    c = first @ start
    w = np.cross(start, first)  # the minimal turn from start onto first: x -> c x + w x x + (w.x) w / (1 + c)
    back = (c[:, None] * second - np.cross(w, second)
            + (np.einsum("ki,ki->k", w, second) / np.maximum(1.0 + c, 1e-300))[:, None] * w)
    carried = _carried(limits)
    local = np.stack([first @ carried[0], back @ carried[1]], axis=1)
    opposite = np.flatnonzero(c < -1.0 + 1e-12)  # no unique minimal turn: the frames' own fallback
    x, y, z = local[..., 0], local[..., 1], local[..., 2]
    side = np.hypot(x, z)
    theta = np.arctan2(side, y)
    k = np.where(side > 0.0, theta / np.where(side > 0.0, side, 1.0), 0.0)
    out = np.stack([k * x, k * z], axis=-1)
    for row in opposite:
        out[row] = swings_of(np.array([root, middles[row], target]), limits)
    return out


def _cone_excess(q: np.ndarray, limits: ResolvedLimits) -> np.ndarray:
    """Per pose of swings ``q (K, N, 2)``, the largest ellipse value less 1 of its coned bones (the measure of
    :meth:`.ConeLimit.excess`; <= 0 inside every cone; -1 without a cone)."""
    out = np.full(len(q), -1.0)
    for i, limit in enumerate(limits.limits):
        if isinstance(limit, ConeLimit):
            out = np.maximum(out, cone_ratio(limit, q[:, i]) - 1.0)
    return out


def cone_ratio(limit: ConeLimit, swings: np.ndarray) -> np.ndarray:
    """Per swing of ``swings (K, 2)``, its ellipse value in ``limit``'s quadrant (<= 1 inside; inf past a zero side)."""
    u, v = swings[:, 0], swings[:, 1]
    a = np.where(u >= 0.0, limit.right, limit.left)
    b = np.where(v >= 0.0, limit.up, limit.down)
    return (np.divide(u, a, out=np.where(u == 0.0, 0.0, math.inf), where=a > 0.0) ** 2
            + np.divide(v, b, out=np.where(v == 0.0, 0.0, math.inf), where=b > 0.0) ** 2)


def _fit_beyond(start: np.ndarray, q_ref: np.ndarray, mu_near: float, error: float, root: np.ndarray,
                target: np.ndarray, lengths: np.ndarray, limits: ResolvedLimits, tolerance: float) -> SwingFit:
    """The beyond fit from swings ``start`` whose tip misses by ``error``: pulled toward ``start`` by ``mu_near``
    and toward the reference ``q_ref`` by MU_BEYOND (the coordinates' ``mu_beyond``) * (shortfall past the
    tolerance / length)**BEYOND_POWER, capped at MU_BEYOND_CAP (zero within the tolerance); its own steps and
    whether it settled."""
    weight = limits.mu_beyond if isinstance(limits, Coordinates) else MU_BEYOND
    pull = min(weight * (max(error - tolerance, 0.0) / float(lengths.sum())) ** BEYOND_POWER, MU_BEYOND_CAP)
    mu = mu_near + pull
    centre = (mu_near * start + pull * q_ref) / mu
    beyond, steps, settled = _minimise(start, centre, mu, root, target, lengths, limits)
    joints = joints_of(beyond, root, lengths, limits)
    return SwingFit(joints, float(np.linalg.norm(joints[-1] - target)), steps, settled, beyond)


def _minimise(q: np.ndarray, q_ref: np.ndarray, mu: float, root: np.ndarray, target: np.ndarray,
              lengths: np.ndarray, limits: ResolvedLimits, slack: float = 0.0) -> tuple[np.ndarray, int, bool]:
    """Swings inside the cones that minimise ``max(|tip - target| / length - slack, 0)**2 + mu * |q - q_ref|**2``,
    from the allowed swings ``q``, by damped Newton steps to a fixed point: (swings, steps, settled)."""
    n = len(lengths)
    scale = 1.0 / float(lengths.sum())

    def cost(tip: np.ndarray, swings: np.ndarray) -> float:
        e = (tip - target) * scale
        dq = swings - q_ref
        return max(math.sqrt(float(e @ e)) - slack, 0.0) ** 2 + mu * float(np.einsum("ij,ij->", dq, dq))

    def trial_of(at: np.ndarray, step: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        trial = _project(at + step.reshape(n, 2), limits)
        trial_tip = tip_of(trial, root, lengths, limits)
        return trial, trial_tip, cost(trial_tip, trial)

    tip = tip_of(q, root, lengths, limits)
    current = cost(tip, q)
    damping = 1e-6
    eye = np.eye(2 * n)
    steps, settled = 0, False
    for steps in range(1, MAX_STEPS + 1):  # noqa: B007 (the count is returned)
        jac, second = _derivatives_at(q, root, lengths, limits)
        residual = (tip - target) * scale
        jac = jac * scale
        # Newton's Hessian, the tip's curvature included: where the target is beyond the cones the residual
        # stays large and Gauss-Newton alone crawled (each step 0.6 of the last).
        curvature = np.einsum("k,kij->ij", residual, second) * scale
        hessian = jac.T @ jac + curvature
        gradient = jac.T @ residual
        if slack > 0.0:
            distance = math.sqrt(float(residual @ residual))
            if distance <= slack:
                hessian, gradient = 0.0 * hessian, 0.0 * gradient
            else:
                # Of (|e| - slack)**2: the part along e as for |e|**2, the rest scaled by 1 - slack / |e|.
                along = jac.T @ (residual / distance)
                keep = 1.0 - slack / distance
                hessian = keep * hessian + (1.0 - keep) * np.outer(along, along)
                gradient = keep * gradient
        gradient = 2.0 * (gradient + mu * (q - q_ref).ravel())
        hessian = 2.0 * (hessian + mu * eye)
        normals = _rim_terms(q, gradient, hessian, limits)
        accepted, damping, moved = damped_step(hessian, gradient, normals, eye, damping, current, q, trial_of)
        if accepted is not None:
            q, tip, current = accepted
        if moved <= STEP_TOL:
            settled = moved >= 0.0 or damping < 1e12
            break
    return q, steps, settled


def damped_step(hessian: np.ndarray, gradient: np.ndarray, normals: list[np.ndarray | None], eye: np.ndarray,
                damping: float, current: float, x: np.ndarray,
                trial_of: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, Any, float]]
                ) -> tuple[tuple[np.ndarray, Any, float] | None, float, float]:
    """One step of projected Levenberg-Marquardt (this module's fit and :mod:`.tree_fit`'s): raise the damping
    until the rim-held step (:func:`_constrained_step`) lowers the cost, lower it after a step that does; never
    below what makes the damped Hessian positive definite.

    ``trial_of(x, step)`` projects ``x + step`` into the limits and returns ``(trial, anything the caller keeps,
    its cost)``. Returns that triple for the accepted step (None when none lowered ``current`` before the
    step fell below STEP_TOL or the damping reached 1e12), the damping to go on with, and how far the
    accepted step moved a coordinate (-1 when none was accepted).
    """
    # Never less damping than the Hessian's most negative curvature: the damped matrix stays positive definite, so
    # every step descends. With less, where the tip's curvature makes the Hessian indefinite (a target far beyond
    # what the limits allow), the steps walked toward a saddle of the cost and crawled there (a hinged 2-bone arm
    # whose target lay inside the sphere its hinge cannot fold into: 200 steps of 1e-6 by a saddle with curvature
    # -0.18; the fit did not settle, limited FABRIK took over, and float32 rounding of the inputs moved the pose
    # 0.65 of the chain's length; now it settles, 1.5e-5).
    lowest = float(np.linalg.eigvalsh(hessian)[0])
    floor = -INDEFINITE_MARGIN * lowest if lowest < 0.0 else 0.0
    while damping < 1e12:
        step = _constrained_step(hessian + max(damping, floor) * eye, gradient, normals)
        if float(np.abs(step).max()) <= STEP_TOL:
            break
        accepted = trial_of(x, step)
        if accepted[2] < current:
            return accepted, max(damping * 0.1, 1e-15), float(np.abs(accepted[0] - x).max())
        damping = max(damping * 10.0, 1e-9)
    return None, damping, -1.0


def _constrained_step(matrix: np.ndarray, gradient: np.ndarray, normals: list[np.ndarray | None]) -> np.ndarray:
    """The damped Gauss-Newton step with each swing on its rim kept from moving outward (it slides
    along the rim's tangent instead); bones that would step inward stay free, and so do bones whose cost falls
    inward (the gradient points out of the cone: a negative multiplier). Held by the step's sign alone, a bone
    the other bones' coupling pushed outward stayed on its rim where leaving it inward lowered the cost:
    the fit settled where no step was left, not at a minimum, and its end depended on the path (a 2-bone chain
    far beyond its cones, no pole, took one of two such poses from targets 0.1 frames apart: 2.0-2.8 degrees)."""
    step = _solve(matrix, -gradient)
    blocked: set[int] = set()
    for _ in range(len(normals)):
        grew = False
        for i, normal in enumerate(normals):
            if (normal is not None and i not in blocked and float(step[2 * i:2 * i + 2] @ normal) > 0.0
                    and float(gradient[2 * i:2 * i + 2] @ normal) < 0.0):
                blocked.add(i)
                grew = True
        if not grew:
            break
        # Remove the normal direction of every blocked bone: solve in the remaining basis (a blocked bone's
        # two columns become its rim's tangent).
        basis = np.eye(len(gradient))
        for i in blocked:
            normal = normals[i]
            basis[2 * i, 2 * i], basis[2 * i + 1, 2 * i] = -normal[1], normal[0]  # type: ignore[index]
        # Column-major, as the products' rounding has been measured with.
        basis = np.asfortranarray(np.delete(basis, [2 * i + 1 for i in blocked], axis=1))
        reduced = _solve(basis.T @ matrix @ basis, -(basis.T @ gradient))
        step = basis @ reduced
    return step
