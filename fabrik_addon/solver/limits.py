"""Joint limits: four-angle elliptical cones and hinges, and the bone frames they are measured in.

A bone's local frame has X to the right, Y along the bone and Z up (Blender's bone axes). A limit is
measured in the *limit frame* of the bone: its parent's current frame turned by the bone's rest offset,
so the rest pose has zero deflection.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np

from .rotations import matrix_from_two_vectors, parallel_transport_frames, turn_x

# Limits count as met when exceeded by no more than this (ellipse value or radians).
LIMIT_SLACK = 1e-9
_TWO_PI = 2.0 * math.pi
_SAMPLES = 48


# Blender stores angles as float32: a slider at 180 degrees holds 3.1415927410125732, 8.7e-8 above
# math.pi. Values this close outside the range are the range's end, not an error.
_ANGLE_SLACK = 1e-6


def _check_angle(value: float, name: str, low: float, high: float) -> float:
    """``value`` as a float clamped into [low, high]; raises beyond the float32 rounding of the ends."""
    value = float(value)
    if not math.isfinite(value) or not low - _ANGLE_SLACK <= value <= high + _ANGLE_SLACK:
        raise ValueError(f"{name} must be a finite angle in [{low:.6g}, {high:.6g}] radians, got {value!r}")
    return min(max(value, low), high)


@dataclass(frozen=True)
class ConeLimit:
    """Elliptical cone from four angles (radians, each in [0, pi]).

    With deflection ``theta`` from the local +Y axis and azimuth ``phi`` measured from +X toward +Z, a
    direction is inside when ``(theta*cos(phi)/a)**2 + (theta*sin(phi)/b)**2 <= 1``, where ``a`` is
    ``right`` for +X and ``left`` for -X, and ``b`` is ``up`` for +Z and ``down`` for -Z.
    """

    left: float
    right: float
    up: float
    down: float

    def __post_init__(self) -> None:
        for name in ("left", "right", "up", "down"):
            object.__setattr__(self, name, _check_angle(getattr(self, name), f"ConeLimit.{name}", 0.0, math.pi))

    def excess(self, local: np.ndarray) -> float:
        """How far outside the cone a local unit direction is, as the ellipse value minus 1 (<= 0 inside)."""
        x, y, z = (float(c) for c in local)
        theta = math.atan2(math.hypot(x, z), y)
        if theta == 0.0:
            return -1.0
        u = theta * x / math.hypot(x, z)
        v = theta * z / math.hypot(x, z)
        a, b = self.semi_axes(u, v)
        return _ratio2(u, a) + _ratio2(v, b) - 1.0

    def semi_axes(self, u: float, v: float) -> tuple[float, float]:
        """The ellipse's semi-axes ``(a, b)`` in the quadrant of the swing ``(u, v)``: ``right`` or ``left`` by
        the sign of ``u``, ``up`` or ``down`` by the sign of ``v`` (zero counts as positive)."""
        return self.right if u >= 0.0 else self.left, self.up if v >= 0.0 else self.down

    def rim(self, s: float) -> tuple[float, float, float]:
        """Local unit direction on the cone's rim at ellipse parameter ``s``."""
        c, sn = math.cos(s), math.sin(s)
        a, b = self.semi_axes(c, sn)
        u, v = a * c, b * sn
        theta = math.hypot(u, v)
        if theta == 0.0:
            return 0.0, 1.0, 0.0
        k = math.sin(theta) / theta
        return u * k, math.cos(theta), v * k

    def project(self, local: np.ndarray) -> np.ndarray:
        """The nearest direction (by angle) inside the cone to local unit direction ``local``."""
        if self.excess(local) <= 0.0:
            return local
        x, y, z = (float(c) for c in local)

        def closeness(s: float) -> float:
            rx, ry, rz = self.rim(s)
            return rx * x + ry * y + rz * z

        # The rim is a closed curve: take the nearest of its cached samples, then refine on the cosine
        # of the angle to the rim, which is smooth and single-peaked between samples, by Brent's method
        # (parabolic steps, golden-section when they misbehave): about 10 rim evaluations where
        # golden-section alone took about 30, to the same 1e-7 in s (~1.6e-7 rad).
        best = int(np.argmax(_rim_samples(self) @ np.array((x, y, z))))
        step = _TWO_PI / _SAMPLES
        return np.array(self.rim(_brent_max(closeness, (best - 1) * step, (best + 1) * step, 1e-7)))


def _brent_max(f: Callable[[float], float], a: float, b: float, xtol: float) -> float:
    """Where ``f`` peaks on ``[a, b]`` (single-peaked), to about ``xtol``: Brent's method (1973).

    Keeps the best three points (x best, w second, v third); fits a parabola through them when the
    last steps shrank, else takes a golden-section step into the larger side.
    """
    golden = 0.5 * (3.0 - math.sqrt(5.0))
    x = w = v = a + golden * (b - a)
    fx = fw = fv = f(x)
    d = e = 0.0  # the last step and the one before
    while True:
        middle = 0.5 * (a + b)
        tol1 = 1.5e-8 * abs(x) + xtol / 3.0
        tol2 = 2.0 * tol1
        if abs(x - middle) <= tol2 - 0.5 * (b - a):
            return x
        parabolic = False
        if abs(e) > tol1:
            r = (x - w) * (fx - fv)
            q = (x - v) * (fx - fw)
            p = (x - v) * q - (x - w) * r
            q = 2.0 * (q - r)
            if q > 0.0:
                p = -p
            q = abs(q)
            previous, e = e, d
            if abs(p) < abs(0.5 * q * previous) and q * (a - x) < p < q * (b - x):
                d = p / q
                parabolic = True
                if (x + d) - a < tol2 or b - (x + d) < tol2:
                    d = tol1 if middle >= x else -tol1
        if not parabolic:
            e = (a - x) if x >= middle else (b - x)
            d = golden * e
        u = x + (d if abs(d) >= tol1 else math.copysign(tol1, d))
        fu = f(u)
        if fu >= fx:
            if u >= x:
                a = x
            else:
                b = x
            v, fv, w, fw, x, fx = w, fw, x, fx, u, fu
        else:
            if u < x:
                a = u
            else:
                b = u
            if fu >= fw or w == x:
                v, fv, w, fw = w, fw, u, fu
            elif fu >= fv or v == x or v == w:
                v, fv = u, fu


@functools.lru_cache(maxsize=1024)
def _rim_samples(cone: ConeLimit) -> np.ndarray:
    """Evenly spaced rim directions of a cone, ``(_SAMPLES, 3)`` (cones are immutable, so they are
    computed once; callers must not write to the array)."""
    step = _TWO_PI / _SAMPLES
    return np.array([cone.rim(k * step) for k in range(_SAMPLES)])


def _ratio2(value: float, semi_axis: float) -> float:
    """``(value / semi_axis)**2``; toward a zero side (``semi_axis`` 0) a swing of LIMIT_SLACK radians or less is on
    that side (0), more is infinitely outside. A pose held on a zero side comes back from its joints a rounding
    either side of it (1e-16 to 2e-14 rad seen), and read as outside, it failed the free pose's and the two-bone
    pose's check and every check of the result."""
    if semi_axis <= 0.0:
        return 0.0 if abs(value) <= LIMIT_SLACK else math.inf
    if value == 0.0:
        return 0.0
    return (value / semi_axis) ** 2


@dataclass(frozen=True)
class HingeLimit:
    """Rotation about the local X axis only, by an angle in ``[min_angle, max_angle]`` (right-hand rule).

    In a 2D chain with default frames a hinged bone's X axis is the plane's normal +Z
    (:func:`hinges_face_the_normal`): the hinge turns the bone in the plane, counterclockwise for positive angles.
    """

    min_angle: float
    max_angle: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "min_angle", _check_angle(self.min_angle, "HingeLimit.min_angle", -math.pi, math.pi))
        object.__setattr__(self, "max_angle", _check_angle(self.max_angle, "HingeLimit.max_angle", -math.pi, math.pi))
        if self.min_angle > self.max_angle:
            raise ValueError(f"HingeLimit.min_angle {self.min_angle} is greater than max_angle {self.max_angle}")

    def angle(self, local: np.ndarray) -> float:
        # Rotating +Y about +X by alpha gives (0, cos(alpha), sin(alpha)).
        return math.atan2(float(local[2]), float(local[1]))

    def excess(self, local: np.ndarray) -> float:
        """Radians outside the hinge: sideways tilt off the hinge plane or beyond the angle range."""
        x = float(local[0])
        tilt = math.asin(max(-1.0, min(1.0, abs(x))))
        alpha = self.angle(local)
        beyond = max(self.min_angle - alpha, alpha - self.max_angle, 0.0)
        return max(tilt, beyond) if (tilt > 0.0 or beyond > 0.0) else -1.0

    def project(self, local: np.ndarray) -> np.ndarray:
        """Nearest direction on the hinge's arc to local unit direction ``local``."""
        y, z = float(local[1]), float(local[2])
        alpha = math.atan2(z, y) if (y != 0.0 or z != 0.0) else 0.0
        if not self.min_angle <= alpha <= self.max_angle:
            to_min = abs(math.remainder(alpha - self.min_angle, _TWO_PI))
            to_max = abs(math.remainder(alpha - self.max_angle, _TWO_PI))
            alpha = self.min_angle if to_min <= to_max else self.max_angle
        return np.array([0.0, math.cos(alpha), math.sin(alpha)])


Limit = ConeLimit | HingeLimit | None


@dataclass(frozen=True)
class ChainLimits:
    """Per-bone limits of one chain with the frames they are measured in.

    Parameters
    ----------
    limits : sequence of ConeLimit, HingeLimit or None, length N
    frames : ndarray, shape (N, 3, 3), optional
        Each bone's frame (columns X, Y along the bone, Z) in the start pose. Default: parallel
        transport frames of the start pose; in 2D a hinged bone's X is the plane's normal instead.
    rest_offsets : ndarray, shape (N, 3, 3), optional
        Each bone's rest rotation relative to its parent's frame (bone 0: relative to ``base_frame``).
        Default: the start pose is the rest pose.
    base_frame : ndarray, shape (3, 3), optional
        Current frame of the chain root's parent (fixed during the solve). Default: bone 0's start frame
        turned back by its rest offset, i.e. bone 0 starts at rest.
    """

    limits: Sequence[Limit]
    frames: np.ndarray | None = None
    rest_offsets: np.ndarray | None = None
    base_frame: np.ndarray | None = None


@dataclass(frozen=True)
class LimitFrames:
    """Limits with every frame they are measured in, for chains and trees alike.

    Bone ``i``'s frame follows its direction: its start frame turned by the minimal rotation. Its limit
    is measured in its parent bone's current frame turned by its rest offset.
    """

    limits: tuple[Limit, ...]
    frames: np.ndarray  # (N, 3, 3) start-pose frames
    start_dirs: np.ndarray  # (N, 3)
    rest_offsets: np.ndarray  # (N, 3, 3)
    base_frame: np.ndarray  # (3, 3)

    def limit_frame(self, parent_frame: np.ndarray, bone: int) -> np.ndarray:
        return parent_frame @ self.rest_offsets[bone]

    def bone_frame(self, bone: int, direction: np.ndarray) -> np.ndarray:
        """Frame of ``bone`` pointing along ``direction``: its start frame turned by the minimal rotation."""
        start = self.frames[bone]
        return matrix_from_two_vectors(self.start_dirs[bone], direction, fallback_axis=start[:, 0]) @ start

    def frame_at(self, parent_frame: np.ndarray, bone: int, direction: np.ndarray) -> np.ndarray:
        """Frame of ``bone`` pointing along unit ``direction`` under ``parent_frame``: a HINGE bone's is its
        limit frame turned about X by its hinge angle (a pure local-X turn, twist locked to its parent);
        any other bone's follows its direction (:meth:`bone_frame`)."""
        if isinstance(self.limits[bone], HingeLimit):
            frame = self.limit_frame(parent_frame, bone)
            local = frame.T @ direction
            return frame @ turn_x(math.atan2(float(local[2]), float(local[1])))
        return self.bone_frame(bone, direction)

    def constrain(self, parent_frame: np.ndarray, bone: int, direction: np.ndarray) -> np.ndarray:
        """The nearest unit direction to ``direction`` that the bone's limit allows."""
        limit = self.limits[bone]
        if limit is None:
            return direction
        frame = self.limit_frame(parent_frame, bone)
        d = frame @ limit.project(frame.T @ direction)
        return d / math.sqrt(float(d @ d))  # exact unit length keeps bone lengths exact

    def fit_child(self, bone: int, direction: np.ndarray, child: int, child_direction: np.ndarray) -> np.ndarray:
        """Direction for ``bone`` near ``direction`` that puts its already-placed ``child`` (pointing
        along ``child_direction``) inside the child's limit: the tip-to-root use of limits.

        Projects the child's direction, seen from the limit frame ``bone`` would have, onto the limit,
        then turns the bone by the minimal rotation carrying the allowed direction onto the actual one.
        """
        limit = self.limits[child]
        if limit is None:
            return direction
        frame = self.limit_frame(self.bone_frame(bone, direction), child)
        allowed = frame @ limit.project(frame.T @ child_direction)
        d = matrix_from_two_vectors(allowed / np.linalg.norm(allowed), child_direction) @ direction
        return d / math.sqrt(float(d @ d))


# Below this sideways offset of a hinge's child from its parent's axis (sine of the angle), the
# parent rolls only in proportion: a straightening knee does not spin the thigh.
ROLL_FADE = math.sin(math.radians(1.0))


@dataclass(frozen=True)
class ResolvedLimits(LimitFrames):
    """:class:`ChainLimits` checked against a chain, with every default filled in.

    In a chain, hinges are pure local-X turns: a HINGE bone's frame is its limit frame turned about
    X by its hinge angle (twist locked to its parent), and the bone above a hinge (unless it is a hinge
    itself, whose roll is locked) rolls about its own axis so that the hinge's plane holds the hinge
    bone's direction: the hinge angle is solved in the bend plane, as a knee whose hip rolls.
    """

    def frame_for(self, parent_frame: np.ndarray, bone: int, direction: np.ndarray,
                  child_direction: np.ndarray | None) -> np.ndarray:
        """Frame of ``bone`` pointing along unit ``direction`` under ``parent_frame``, given where its
        child points (None: no child, or unknown)."""
        if isinstance(self.limits[bone], HingeLimit):
            return self.frame_at(parent_frame, bone, direction)
        frame = self.bone_frame(bone, direction)
        if child_direction is not None and self.rolls(bone):
            frame = self._roll_for_hinge(frame, bone, direction, child_direction)
        return frame

    def rolls(self, bone: int) -> bool:
        """Whether ``bone`` rolls to put its hinge child's direction in the hinge plane."""
        return (bone + 1 < len(self.limits) and isinstance(self.limits[bone + 1], HingeLimit)
                and not isinstance(self.limits[bone], HingeLimit))

    def _roll_for_hinge(self, frame: np.ndarray, bone: int, d: np.ndarray, c: np.ndarray) -> np.ndarray:
        """``frame`` (Y along ``d``) rolled about ``d`` by :func:`hinge_roll` for child ``bone + 1`` pointing
        along ``c``; only in proportion where ``c`` lies within ROLL_FADE of ``d``."""
        hinge = self.limits[bone + 1]
        assert isinstance(hinge, HingeLimit)
        rolled = hinge_roll(frame, d, self.rest_offsets[bone + 1], hinge, c)
        if rolled is None:
            return frame
        psi, sideways = rolled
        return _rotation(d, psi if sideways >= ROLL_FADE else psi * sideways / ROLL_FADE) @ frame

    def fit_child(self, bone: int, direction: np.ndarray, child: int, child_direction: np.ndarray) -> np.ndarray:
        """:meth:`LimitFrames.fit_child`, with the roll of a bone above a hinge."""
        limit = self.limits[child]
        if limit is None:
            return direction
        parent = self.bone_frame(bone, direction)
        if self.rolls(bone) and child == bone + 1:
            parent = self._roll_for_hinge(parent, bone, direction, child_direction)
        frame = self.limit_frame(parent, child)
        allowed = frame @ limit.project(frame.T @ child_direction)
        d = matrix_from_two_vectors(allowed / np.linalg.norm(allowed), child_direction) @ direction
        return d / math.sqrt(float(d @ d))

    def frames_of(self, joints: np.ndarray) -> np.ndarray:
        """Every bone's frame ``(N, 3, 3)`` in a pose ``(N+1, 3)``, as the limits see them."""
        dirs = np.diff(joints, axis=0)
        dirs = dirs / np.linalg.norm(dirs, axis=1)[:, None]
        out = np.empty((len(dirs), 3, 3))
        parent = self.base_frame
        for i, d in enumerate(dirs):
            parent = out[i] = self.frame_for(parent, i, d, dirs[i + 1] if i + 1 < len(dirs) else None)
        return out

    def violations(self, joints: np.ndarray) -> np.ndarray:
        """Per-bone excess of a pose ``(N+1, 3)`` over its limits (<= 0 means within)."""
        out = np.full(len(self.limits), -1.0)
        dirs = np.diff(joints, axis=0)
        dirs = dirs / np.linalg.norm(dirs, axis=1)[:, None]
        parent = self.base_frame
        for i, limit in enumerate(self.limits):
            d = dirs[i]
            if limit is not None:
                out[i] = limit.excess(self.limit_frame(parent, i).T @ d)
            parent = self.frame_for(parent, i, d, dirs[i + 1] if i + 1 < len(dirs) else None)
        return out


def hinge_roll(frame: np.ndarray, d: np.ndarray, offset: np.ndarray, hinge: HingeLimit,
               c: np.ndarray) -> tuple[float, float] | None:
    """The roll of ``frame`` (a bone's, Y along its unit direction ``d``) about ``d`` that makes the axis of its HINGE
    child (X of ``frame @ offset``, the child's limit frame) square to the child's unit direction ``c``: of the two,
    the one whose hinge angle the limit allows (else the nearer to allowed), then the smaller. A hinge at the end of
    its interval to within LIMIT_SLACK counts as allowed: held there by a fit, it lies on either side of the end by
    rounding, and the other roll (the knee mirrored) took its turn (a 2D chain then measured its limits rolled
    over). Returns ``(psi, sideways)``, ``sideways`` the length of ``c``'s part square to ``d``; None where that
    or the axis's part square to ``d`` vanishes."""
    x = frame @ offset[:, 0]
    a, b = float(x @ d), float(c @ d)
    p, q = x - a * d, c - b * d
    pn, qn = math.sqrt(float(p @ p)), math.sqrt(float(q @ q))
    if pn <= 1e-12 or qn <= 1e-12:
        return None
    e1 = p / pn
    e2 = np.cross(d, e1)
    phi_q = math.atan2(float(q @ e2), float(q @ e1))
    spread = math.acos(max(-1.0, min(1.0, -a * b / (pn * qn))))
    best: tuple[float, float, float] | None = None
    for psi in (phi_q - spread, phi_q + spread):
        psi = math.remainder(psi, 2.0 * math.pi)
        local = (_rotation(d, psi) @ frame @ offset).T @ c
        alpha = math.atan2(float(local[2]), float(local[1]))
        key = (max(hinge.min_angle - alpha, alpha - hinge.max_angle, LIMIT_SLACK) - LIMIT_SLACK, abs(psi), psi)
        if best is None or key < best:
            best = key
    assert best is not None
    return best[2], qn


def _rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rotation by ``angle`` about unit ``axis`` (Rodrigues)."""
    x, y, z = (float(v) for v in axis)
    c, s = math.cos(angle), math.sin(angle)
    t = 1.0 - c
    return np.array([[c + x * x * t, x * y * t - z * s, x * z * t + y * s],
                     [y * x * t + z * s, c + y * y * t, y * z * t - x * s],
                     [z * x * t - y * s, z * y * t + x * s, c + z * z * t]])


def resolve_limits(limits: ChainLimits | Sequence[Limit], joints: np.ndarray, planar: bool = False) -> ResolvedLimits:
    """Check ``limits`` against a ``(N+1, 3)`` start pose and fill in the defaults; ``planar``: a 2D chain
    embedded at z = 0, whose default frames turn its hinges in the plane (:func:`hinges_face_the_normal`)."""
    spec = limits if isinstance(limits, ChainLimits) else ChainLimits(list(limits))
    n = len(joints) - 1
    items = tuple(spec.limits)
    if len(items) != n:
        raise ValueError(f"limits must give one entry per bone ({n}), got {len(items)}")
    for i, item in enumerate(items):
        if item is not None and not isinstance(item, ConeLimit | HingeLimit):
            raise ValueError(f"limits[{i}] must be ConeLimit, HingeLimit or None, got {type(item).__name__}")
    dirs = np.diff(joints, axis=0)
    dirs /= np.linalg.norm(dirs, axis=1)[:, None]
    if spec.frames is None:
        frames = parallel_transport_frames(joints)
        if planar:
            hinges_face_the_normal(frames, dirs, items)
    else:
        frames = _check_frames(spec.frames, (n, 3, 3), "limits.frames")
        off = np.abs(np.einsum("ij,ij->i", frames[:, :, 1], dirs) - 1.0)
        if off.max() > 1e-4:
            raise ValueError(f"limits.frames: the Y axis of frame {int(off.argmax())} does not follow its bone")
    if spec.rest_offsets is None:
        offsets = np.empty((n, 3, 3))
        offsets[0] = np.eye(3)
        offsets[1:] = np.swapaxes(frames[:-1], 1, 2) @ frames[1:]
    else:
        offsets = _check_frames(spec.rest_offsets, (n, 3, 3), "limits.rest_offsets")
    if spec.base_frame is None:
        base = frames[0] @ offsets[0].T
    else:
        base = _check_frames(spec.base_frame, (3, 3), "limits.base_frame")
    return ResolvedLimits(items, frames, dirs, offsets, base)


def hinges_face_the_normal(frames: np.ndarray, dirs: np.ndarray, items: Sequence[Limit | None]) -> None:
    """In place: the default frame of each hinged bone of a 2D chain (in the plane z = 0) gets X = +Z, the
    plane's normal, and Z = X x Y. The transported frames of a planar pose have X in the plane, where a hinge
    could only turn its bone out of the plane, which a 2D chain cannot follow; about the normal it turns it in
    the plane, counterclockwise for positive angles. Frames of cones and free bones stay as they are."""
    normal = np.array([0.0, 0.0, 1.0])
    for i, item in enumerate(items):
        if isinstance(item, HingeLimit):
            frames[i] = np.column_stack([normal, dirs[i], np.cross(normal, dirs[i])])


_Frames = TypeVar("_Frames", bound="LimitFrames")
# A limit frame whose Y axis leaves the plane by more than this (the sine), or a hinge whose axis is this far off its
# normal, has no in-plane interval of its own: :func:`hinges_in_the_plane` leaves such a chain to the 3D solves.
_PLANE_SLACK = 1e-9


def hinges_in_the_plane(limits: _Frames, parents: Sequence[int] | np.ndarray | None = None,
                        kept: Collection[int] = ()) -> _Frames | None:
    """A 2D chain's or tree's limits (start pose at z = 0) as hinges about the plane's normal +Z: each bone's
    in-plane turn from its rest direction, counterclockwise, in an interval. A hinge about +Z keeps its interval
    (about -Z, mirrored); a cone gives the angles whose in-plane directions its ellipse holds; a free bone turns
    anywhere. Each bone's frame is rolled about its own axis to X = +Z, its children's rest offsets rolled back to
    match, so every limit frame keeps its bone's rest direction. In the plane the two sets of limits allow the same
    turns; the 3D solves given cones and free bones, with two swing coordinates each, can leave the plane (where the
    2D pose comes back shortened or past a limit), and with these they cannot.

    ``parents``: a tree's parent joint per entry (entry 0 its root, no bone; see :func:`.tree.solve_tree`); None: a
    chain, bone ``i`` under bone ``i - 1``. ``kept``: entries left as they are (a tree's joints hanging from a rigid
    body, which carry no limit). None where no bone has a limit (free FABRIK keeps the plane), or where a frame's Y
    axis leaves the plane or a hinge's axis is not the normal (no turn in the plane but its rest direction): those
    keep the limits as given."""
    if all(limit is None for limit in limits.limits):
        return None
    normal = np.array([0.0, 0.0, 1.0])
    n = len(limits.limits)
    first = 0 if parents is None else 1
    eye = np.eye(3)
    bone_rolls = np.tile(eye, (n, 1, 1))
    hinges: list[Limit] = list(limits.limits)
    offsets = limits.rest_offsets.copy()
    posed: dict[int, np.ndarray] = {}
    for i in range(first, n):
        p = i - 1 if parents is None else int(parents[i])
        parent = posed.get(p, limits.base_frame)
        limit = limits.limits[i]
        limit_roll: np.ndarray | None = eye
        if i not in kept:
            limit_roll = _roll_to_normal(limits.limit_frame(parent, i).T @ normal)
            bone_roll = limit_roll if isinstance(limit, HingeLimit) else _roll_to_normal(limits.frames[i].T @ normal)
            if limit_roll is None or bone_roll is None:
                return None
            bone_rolls[i] = bone_roll
            side = limit_roll[:, 2]  # the in-plane perpendicular of the rest direction, counterclockwise
            if isinstance(limit, HingeLimit):
                m = limit_roll[0, 0]  # the hinge's axis along the normal
                if abs(abs(m) - 1.0) > _PLANE_SLACK:
                    return None
                low, high = (limit.min_angle, limit.max_angle) if m > 0.0 else (-limit.max_angle, -limit.min_angle)
            elif isinstance(limit, ConeLimit):
                low, high = -_in_plane_reach(limit, -side), _in_plane_reach(limit, side)
            else:
                low, high = -math.pi, math.pi
            hinges[i] = HingeLimit(low, high)
        offsets[i] = (bone_rolls[p].T if p >= first else eye) @ offsets[i] @ limit_roll
        posed[i] = limits.frame_at(parent, i, limits.start_dirs[i])
    return replace(limits, limits=tuple(hinges), frames=limits.frames @ bone_rolls, rest_offsets=offsets)


def _roll_to_normal(m: np.ndarray) -> np.ndarray | None:
    """The turn about local Y (columns X, Y, Z) that takes X onto ``m``, the plane's normal in a frame whose Y lies
    in the plane; None where Y leaves it."""
    if abs(float(m[1])) > _PLANE_SLACK:
        return None
    x = np.array([float(m[0]), 0.0, float(m[2])])
    x /= math.sqrt(float(x @ x))
    return np.column_stack([x, (0.0, 1.0, 0.0), np.cross(x, (0.0, 1.0, 0.0))])


def _in_plane_reach(cone: ConeLimit, side: np.ndarray) -> float:
    """How far (radians, at most pi) ``cone`` lets its bone turn from Y toward the local unit ``side`` (Y = 0)."""
    x, z = (0.0 if abs(c) <= _PLANE_SLACK else float(c) for c in (side[0], side[2]))
    a, b = cone.semi_axes(x, z)
    ratio = _ratio2(x, a) + _ratio2(z, b)
    return math.pi if ratio <= 1.0 / (math.pi * math.pi) else min(math.pi, 1.0 / math.sqrt(ratio))


def _check_frames(value: object, shape: tuple[int, ...], name: str) -> np.ndarray:
    arr = np.array(value, dtype=np.float64)
    if arr.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or infinity")
    eye = np.swapaxes(arr, -1, -2) @ arr
    if np.abs(eye - np.eye(3)).max() > 1e-4:
        raise ValueError(f"{name} must hold rotation matrices (orthonormal columns)")
    return arr
