"""Bone orientations from solved joints: how much each bone turns, roll included.

The solvers place joints; a bone's orientation also has a roll about its own axis, which joint
positions do not fix. A plain from-to rotation per bone never rolls, so an elbow that the solve
swings into another plane leaves its hinge. Here the chain turns as one piece first and then each
bone by the least it must:

1. The chain's frame: its root-to-tip axis ``k`` and its bend ``b`` (the mean of the interior joints
   seen from the root, across ``k``; toward the pole where there is one). The chain turns by the
   rotation carrying the start pose's frame onto the solved one, so the root rolls to face the pole
   and the bend plane of the start pose becomes the solved one (Unity's LookRotation(forward, up)
   with the bend as up).
2. Bone 0 then swings by the smallest rotation that puts its direction on the solved one; each
   later bone takes its parent's turn and swings likewise (parallel transport: no twist relative to
   the parent beyond what the directions demand).

Where the start and solved chains are planar, every bone's turn carries the start bend-plane normal
onto the solved one, so a child turns relative to its parent about that normal only: a pure local-X
turn for bones rolled as rigs usually are. Where they are not planar, a child twists relative to its
parent by nothing more than its swing. A solve that changes nothing turns nothing.

Turns are world-space rotations ``G`` to apply on top of each bone's start orientation
(``new = G @ start``), so any rotation about a bone's own axis in the start pose (keyed twist) rides
along.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .prepare import EPS
from .rotations import cross, matrices_from_two_vectors, matrix_from_two_vectors, perpendicular_floats, turn_floats
from .start import straight_side

Point = tuple[float, float, float]
Rows = tuple[Point, Point, Point]

# Weight (relative to the chain's length) of the fallback side in the bend: it decides the roll of a
# straight chain (bend below this), and fades as (weight / bend)^2 on a bent one: 1e-6 rad of pull at a
# bend of 1% of the length, so a planar start stays planar to that.
SIDE_WEIGHT = 1e-5
# A solved chain whose bend is below this many SIDE_WEIGHTs takes its side not from the rest chain's bend
# side but from where the start pose straightens to (.start.straight_side): the curled start ends there
# as a target crosses full reach, so the roll is continuous across it (a metarig finger rolled by up to
# 117 degrees between a target just inside reach and one just beyond). At this bend the side weighs
# (1 / NEAR_STRAIGHT)^2 = 1e-6 of a radian: where the rule changes, nothing visible moves.
NEAR_STRAIGHT = 1e3


def rest_side(rest_joints: object, root_frame: object) -> np.ndarray:
    """The side a chain bends to in its rest pose, in its root bone's local axes.

    Parameters
    ----------
    rest_joints : array_like, shape (N+1, 3)
        The chain's joints in its rest pose.
    root_frame : array_like, shape (3, 3)
        The root bone's rest orientation (columns X, Y, Z).

    Returns
    -------
    ndarray, shape (3,)
        Unit vector: the rest bend (see the module docstring) in the root's axes; local +Z, the side
        Blender rigs usually bend to, when the rest chain is straight.
    """
    joints = np.asarray(rest_joints, dtype=np.float64)
    frame = np.asarray(root_frame, dtype=np.float64)
    length = float(np.linalg.norm(np.diff(joints, axis=0), axis=1).sum())
    bend = _bend(joints[None])[0]
    if np.linalg.norm(bend) <= 1e-6 * length:
        return np.array([0.0, 0.0, 1.0])
    local = frame.T @ bend
    return local / np.linalg.norm(local)


def chain_turns(before: object, after: object, pole: object = None, side: object = None) -> np.ndarray:
    """World rotation of each bone of a chain from its start pose to its solved pose.

    Parameters
    ----------
    before : array_like, shape (N+1, 3)
        Joints of the start pose (root first).
    after : array_like, shape (N+1, 3)
        Solved joints, bone lengths as in ``before``.
    pole : array_like, shape (3,), optional
        The solved chain's root rolls to face it.
    side : array_like, shape (3,), optional
        World direction the start pose bends to when it is straight (see :func:`rest_side`); a
        deterministic perpendicular of its axis by default.

    Returns
    -------
    ndarray, shape (N, 3, 3)
        ``G[i]`` turns bone ``i``'s start orientation into its solved one (``G[i] @ start``) and its
        start segment direction onto its solved one.
    """
    b = np.asarray(before, dtype=np.float64)[None]
    a = np.asarray(after, dtype=np.float64)[None]
    p = None if pole is None else np.asarray(pole, dtype=np.float64)[None]
    s = None if side is None else np.asarray(side, dtype=np.float64)[None]
    return chains_turns(b, a, p, s)[0]


def chains_turns(before: np.ndarray, after: np.ndarray, poles: np.ndarray | None = None,
                 sides: np.ndarray | None = None) -> np.ndarray:
    """Batched :func:`chain_turns`: ``(C, N+1, 3)`` joints, ``(C, 3)`` poles (NaN rows: none) and sides;
    returns ``(C, N, 3, 3)``."""
    count, n = before.shape[0], before.shape[1] - 1
    lengths, total, tiny, k_pre, u_pre, b_pre, frame_pre_t, before_t = _start_of(before, sides)
    seg_after = after[:, 1:] - after[:, :-1]  # np.diff's floats, without its wrapper
    k_sol = _axis(after, seg_after, tiny)
    aim = matrices_from_two_vectors(k_pre, k_sol)
    u_sol = np.einsum("cij,cj->ci", aim, u_pre)
    bend = _bend(after, k_sol)
    near = np.einsum("ci,ci->c", bend, bend) <= (NEAR_STRAIGHT * SIDE_WEIGHT * total) ** 2
    if near.any():  # as solved_frame_floats: the side the start straightens to
        for row in np.flatnonzero(near).tolist():
            side = straight_side(before[row].tolist())
            if side is not None:
                ax, ay, az, sx, sy, sz = side
                lx, ly, lz = k_sol[row].tolist()
                u_sol[row] = turn_floats(ax, ay, az, lx, ly, lz, sx, sy, sz)
    b_sol = _unit_or(_across(_with_side(bend, u_sol, total), k_sol),
                     _unit_or(_across(u_sol, k_sol), u_sol))
    if poles is not None:
        w = _across(np.asarray(poles, dtype=np.float64) - after[:, 0], k_sol)
        wn = np.sqrt(np.einsum("ci,ci->c", w, w))
        use = np.isfinite(wn) & (wn > tiny)
        b_sol[use] = w[use] / wn[use, None]
    frame_sol = np.stack([k_sol, b_sol, cross(k_sol, b_sol)], axis=-1)
    turn = frame_sol @ frame_pre_t
    after_len = np.sqrt(np.einsum("cki,cki->ck", seg_after, seg_after))
    d_after = seg_after / np.maximum(after_len, 1e-300)[..., None]
    ok = (lengths > tiny[:, None]) & (after_len > tiny[:, None])
    every = ok.all(axis=0).tolist()
    # Each bone swings by the minimal rotation from its carried start direction a onto its solved
    # direction b, written as I - w w^T / (1 + a.b) + 2 b a^T (w = a + b: the reflection across a, then
    # across w) and applied to the turn directly. Chains run along the last axis (rows of (3, C) and
    # (3, 3, C) arrays), so every step is a few contiguous whole-array calls: no per-matrix BLAS call
    # (numpy's stacked matmul makes one per chain) and no strided copies.
    turn_t = np.ascontiguousarray(turn.transpose(1, 2, 0))  # (3, 3, C)
    after_t = np.ascontiguousarray(d_after.transpose(1, 2, 0))
    twice = 2.0 * after_t[:, :, None]  # (N, 3, 1, C)
    out = np.empty((n, 3, 3, count))
    add = np.add.reduce  # .sum's floats without its Python wrapper
    for i in range(n):
        a = add(turn_t * before_t[i], axis=1)  # the start direction carried by the turn so far
        a /= np.sqrt(add(a * a, axis=0))
        b = after_t[i]
        dot = add(a * b, axis=0)
        half = np.minimum.reduce(dot) < -1.0 + 1e-12
        w = a + b
        if half:
            opposite = dot < -1.0 + 1e-12
            k = 1.0 / np.where(opposite, 1.0, 1.0 + dot)
        else:
            k = 1.0 / (1.0 + dot)
        swung = turn_t - (w * k)[:, None] * add(w[:, None] * turn_t, axis=0) \
            + twice[i] * add(a[:, None] * turn_t, axis=0)
        if half:  # a half turn: about a deterministic perpendicular
            for c in np.flatnonzero(opposite).tolist():
                swung[:, :, c] = matrix_from_two_vectors(a[:, c], b[:, c]) @ turn_t[:, :, c]
        turn_t = swung if every[i] else np.where(ok[:, i], swung, turn_t)
        out[i] = turn_t
    return out.transpose(3, 0, 1, 2)


# The start poses (poses without IK) seldom change between frames: what the turns need from them, the
# last few by their exact inputs (so the same floats as made afresh).
_KEPT: dict[tuple, tuple] = {}
KEPT_STARTS = 8


def _start_of(before: np.ndarray, sides: np.ndarray | None) -> tuple:
    """What :func:`chains_turns` needs from the start poses alone: segment lengths ``(C, N)``, their
    totals and tiny fractions ``(C,)``, the start frame's axis, side and bend ``(C, 3)``, the start frame
    transposed ``(C, 3, 3)`` and the unit segments as ``(N, 3, C)``; kept while the same inputs return."""
    sides_arr = None if sides is None else np.asarray(sides, dtype=np.float64)
    key = (before.shape, before.tobytes(), None if sides_arr is None else sides_arr.tobytes())
    kept = _KEPT.get(key)
    if kept is not None:
        return kept
    count = before.shape[0]
    seg_before = before[:, 1:] - before[:, :-1]  # np.diff's floats, without its wrapper
    lengths = np.sqrt(np.einsum("cki,cki->ck", seg_before, seg_before))
    total = lengths.sum(axis=1)
    tiny = EPS * np.maximum(total, 1e-300)
    k_pre = _axis(before, seg_before, tiny)
    if sides_arr is None:
        u_pre = np.array([perpendicular_floats(*row) for row in k_pre.tolist()]).reshape(count, 3)
    else:
        u_pre = _across(sides_arr, k_pre)
        norm = np.sqrt(np.einsum("ci,ci->c", u_pre, u_pre))
        bad = norm <= 1e-9
        if bad.any():
            u_pre[bad] = [perpendicular_floats(*row) for row in k_pre[bad].tolist()]
            norm[bad] = 1.0
        u_pre /= norm[:, None]
    b_pre = _unit_or(_across(_with_side(_bend(before, k_pre), u_pre, total), k_pre), u_pre)
    frame_pre = np.stack([k_pre, b_pre, cross(k_pre, b_pre)], axis=-1)
    d_before = seg_before / np.maximum(lengths, 1e-300)[..., None]
    kept = (lengths, total, tiny, k_pre, u_pre, b_pre, np.swapaxes(frame_pre, 1, 2),
            np.ascontiguousarray(d_before.transpose(1, 2, 0)))
    for array in kept:
        array.setflags(write=False)  # shared by every solve from the same start poses
    if len(_KEPT) >= KEPT_STARTS:
        del _KEPT[next(iter(_KEPT))]
    _KEPT[key] = kept
    return kept


def _axis(joints: np.ndarray, segments: np.ndarray, tiny: np.ndarray) -> np.ndarray:
    """Unit root-to-tip axes ``(C, 3)``; the first bone's direction where root and tip meet."""
    k = joints[:, -1] - joints[:, 0]
    norm = np.sqrt(np.einsum("ci,ci->c", k, k))
    folded = norm <= tiny
    if folded.any():
        k = k.copy()
        k[folded] = segments[folded, 0]
        norm[folded] = np.sqrt(np.einsum("ci,ci->c", k[folded], k[folded]))
    return k / norm[:, None]


def _across(v: np.ndarray, k: np.ndarray) -> np.ndarray:
    """The part of ``v`` across unit ``k``."""
    return v - np.einsum("ci,ci->c", v, k)[:, None] * k


def _bend(joints: np.ndarray, k: np.ndarray | None = None) -> np.ndarray:
    """Mean of the interior joints seen from the root, across the root-to-tip axis; ``(C, 3)``."""
    n = joints.shape[1] - 1
    if k is None:
        axis = joints[:, -1] - joints[:, 0]
        norm = np.sqrt(np.einsum("ci,ci->c", axis, axis))
        k = axis / np.where(norm > 0.0, norm, 1.0)[:, None]
    if n < 2:
        return np.zeros((joints.shape[0], 3))
    mean = joints[:, 1:n].sum(axis=1) / (n - 1) - joints[:, 0]  # the mean's floats
    return _across(mean, k)


def _with_side(bend: np.ndarray, side: np.ndarray, total: np.ndarray) -> np.ndarray:
    """The bend plus the fallback side, weighted as :data:`SIDE_WEIGHT` says."""
    weight = SIDE_WEIGHT * total
    size = np.sqrt(np.einsum("ci,ci->c", bend, bend))
    return bend + (weight * weight / np.maximum(size, weight))[:, None] * side


def _unit_or(v: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    norm = np.sqrt(np.einsum("ci,ci->c", v, v))
    ok = norm > 1e-12
    return np.where(ok[:, None], v / np.where(ok, norm, 1.0)[:, None], fallback)


# Plain floats: the chain's frame (step 1) for the few-chain path, which turns one short chain at a time
# (numpy's per-call cost would be most of the work there) and runs step 2 in mathutils (rig/roll.py).


StartFrame = tuple[float, float, float, float, float, float, float, float, float, float, float, Sequence]


def start_frame_floats(before: Sequence[Sequence[float]], side: Sequence[float] | None = None) -> StartFrame:
    """The start pose's frame (step 1 of the module docstring): its axis ``k``, bend ``b`` and side
    ``u`` (unit vectors), the side's weight and the length counted as zero, flat, and the joints themselves:
    ``(kx, ky, kz, bx, by, bz, ux, uy, uz, weight, tiny, before)``. It depends on the pose without IK alone, so
    a caller may keep it while that pose holds.

    Written out without helper calls: it runs per chain per frame, where each Python call costs about
    as much as ten float operations.
    """
    sqrt = math.sqrt
    n = len(before) - 1
    p = before[0]
    rx, ry, rz = float(p[0]), float(p[1]), float(p[2])
    total = 0.0
    px, py, pz = rx, ry, rz
    sx = sy = sz = 0.0
    for i in range(1, n + 1):
        p = before[i]
        x, y, z = float(p[0]), float(p[1]), float(p[2])
        dx, dy, dz = x - px, y - py, z - pz
        total += sqrt(dx * dx + dy * dy + dz * dz)
        sx, sy, sz = sx + x, sy + y, sz + z
        px, py, pz = x, y, z
    tiny = EPS * total
    weight = SIDE_WEIGHT * total
    # k_pre: root to tip (the first bone where they meet)
    kx, ky, kz = px - rx, py - ry, pz - rz
    k = sqrt(kx * kx + ky * ky + kz * kz)
    if k <= tiny:
        p = before[1]
        kx, ky, kz = float(p[0]) - rx, float(p[1]) - ry, float(p[2]) - rz
        k = sqrt(kx * kx + ky * ky + kz * kz)
    kx, ky, kz = kx / k, ky / k, kz / k
    # u_pre: the side across k_pre
    ux = uy = uz = 0.0
    u = 0.0
    if side is not None:
        ux, uy, uz = float(side[0]), float(side[1]), float(side[2])
        t = ux * kx + uy * ky + uz * kz
        ux, uy, uz = ux - t * kx, uy - t * ky, uz - t * kz
        u = sqrt(ux * ux + uy * uy + uz * uz)
    if u > 1e-9:
        ux, uy, uz = ux / u, uy / u, uz / u
    else:
        ux, uy, uz = perpendicular_floats(kx, ky, kz)
    # b_pre: the mean bend across k_pre, plus the side's fading weight
    mx = my = mz = 0.0
    if n >= 2:
        sx, sy, sz = sx - px, sy - py, sz - pz  # interior joints only
        mx, my, mz = sx / (n - 1) - rx, sy / (n - 1) - ry, sz / (n - 1) - rz
        t = mx * kx + my * ky + mz * kz
        mx, my, mz = mx - t * kx, my - t * ky, mz - t * kz
    w = weight * weight / max(sqrt(mx * mx + my * my + mz * mz), weight)
    bx, by, bz = mx + w * ux, my + w * uy, mz + w * uz
    t = bx * kx + by * ky + bz * kz
    bx, by, bz = bx - t * kx, by - t * ky, bz - t * kz
    b = sqrt(bx * bx + by * by + bz * bz)
    bx, by, bz = (bx / b, by / b, bz / b) if b > 1e-12 else (ux, uy, uz)
    return kx, ky, kz, bx, by, bz, ux, uy, uz, weight, tiny, before


def solved_frame_floats(start: StartFrame, after: Sequence[Sequence[float]],
                        pole: Sequence[float] | None = None) -> tuple[float, float, float, float, float, float]:
    """The frame of the solved pose ``after`` (step 1): its root-to-tip axis ``l`` and bend ``c`` (unit vectors,
    ``(lx, ly, lz, cx, cy, cz)``), the bend toward the pole where there is one, else the solved mean
    bend plus ``start``'s side carried by the least aim."""
    kx, ky, kz, bx, by, bz, ux, uy, uz, weight, tiny, start_joints = start
    sqrt = math.sqrt
    n = len(after) - 1
    # k_sol
    p, q = after[0], after[n]
    ox, oy, oz = float(p[0]), float(p[1]), float(p[2])
    lx, ly, lz = float(q[0]) - ox, float(q[1]) - oy, float(q[2]) - oz
    g = sqrt(lx * lx + ly * ly + lz * lz)
    if g <= tiny:
        q = after[1]
        lx, ly, lz = float(q[0]) - ox, float(q[1]) - oy, float(q[2]) - oz
        g = sqrt(lx * lx + ly * ly + lz * lz)
    lx, ly, lz = lx / g, ly / g, lz / g
    # b_sol: toward the pole, else the solved mean bend plus the side carried by the least aim
    cx = cy = cz = 0.0
    c = 0.0
    if pole is not None:
        cx, cy, cz = float(pole[0]) - ox, float(pole[1]) - oy, float(pole[2]) - oz
        t = cx * lx + cy * ly + cz * lz
        cx, cy, cz = cx - t * lx, cy - t * ly, cz - t * lz
        c = sqrt(cx * cx + cy * cy + cz * cz)
    if c > tiny:
        cx, cy, cz = cx / c, cy / c, cz / c
    else:
        mx = my = mz = 0.0
        if n >= 2:
            for i in range(1, n):
                q = after[i]
                mx, my, mz = mx + float(q[0]), my + float(q[1]), mz + float(q[2])
            mx, my, mz = mx / (n - 1) - ox, my / (n - 1) - oy, mz / (n - 1) - oz
            t = mx * lx + my * ly + mz * lz
            mx, my, mz = mx - t * lx, my - t * ly, mz - t * lz
        m = sqrt(mx * mx + my * my + mz * mz)
        near = straight_side(start_joints) if m <= NEAR_STRAIGHT * weight and start_joints is not None else None
        if near is None:
            vx, vy, vz = turn_floats(kx, ky, kz, lx, ly, lz, ux, uy, uz)
        else:  # (nearly) straight: the side the start straightens to (see NEAR_STRAIGHT)
            vx, vy, vz = turn_floats(near[0], near[1], near[2], lx, ly, lz, near[3], near[4], near[5])
        w = weight * weight / max(m, weight)
        cx, cy, cz = mx + w * vx, my + w * vy, mz + w * vz
        t = cx * lx + cy * ly + cz * lz
        cx, cy, cz = cx - t * lx, cy - t * ly, cz - t * lz
        c = sqrt(cx * cx + cy * cy + cz * cz)
        if c <= 1e-12:
            t = vx * lx + vy * ly + vz * lz
            cx, cy, cz = vx - t * lx, vy - t * ly, vz - t * lz
            c = sqrt(cx * cx + cy * cy + cz * cz)
            if c <= 1e-12:
                cx, cy, cz, c = vx, vy, vz, 1.0
        cx, cy, cz = cx / c, cy / c, cz / c
    return lx, ly, lz, cx, cy, cz


def segment_turns_floats(before: Sequence[Sequence[float]], after: Sequence[Sequence[float]]) -> list[Rows]:
    """Each bone's smallest turn from its start segment direction onto its solved one, no roll: the
    frames joint limits are measured in (:meth:`.limits.LimitFrames.bone_frame`) turn so."""
    out = []
    for i in range(len(before) - 1):
        b, a = _sub(before[i + 1], before[i]), _sub(after[i + 1], after[i])
        out.append(_turn_rows(_scale(b, 1.0 / _norm(b)), _scale(a, 1.0 / _norm(a))))
    return out


def _sub(a: Sequence[float], b: Sequence[float]) -> Point:
    return float(a[0]) - float(b[0]), float(a[1]) - float(b[1]), float(a[2]) - float(b[2])


def _scale(a: Point, s: float) -> Point:
    return a[0] * s, a[1] * s, a[2] * s


def _dot(a: Point, b: Point) -> float:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _cross(a: Point, b: Point) -> Point:
    return a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]


def _norm(a: Point) -> float:
    return math.sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2])


def _turn_rows(a: Point, b: Point) -> Rows:
    """Rows of the smallest rotation taking unit ``a`` onto unit ``b`` (a half turn about a deterministic
    perpendicular when they are opposite), as :func:`.rotations.matrix_from_two_vectors`."""
    c = _dot(a, b)
    if c < -1.0 + 1e-12:
        x, y, z = perpendicular_floats(*a)
        return ((2 * x * x - 1, 2 * x * y, 2 * x * z), (2 * x * y, 2 * y * y - 1, 2 * y * z),
                (2 * x * z, 2 * y * z, 2 * z * z - 1))
    vx, vy, vz = _cross(a, b)
    k = 1.0 / (1.0 + c)
    return ((1.0 - (vy * vy + vz * vz) * k, vx * vy * k - vz, vx * vz * k + vy),
            (vx * vy * k + vz, 1.0 - (vx * vx + vz * vz) * k, vy * vz * k - vx),
            (vx * vz * k - vy, vy * vz * k + vx, 1.0 - (vx * vx + vy * vy) * k))
