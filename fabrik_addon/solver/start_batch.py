"""The curled start (:mod:`.start`) for many chains at once, in numpy: its twin across chains.

Each function here mirrors the float one of the same name in :mod:`.start` (``curled_starts`` /
``curled_start``, ``_bend_axes`` / ``_bend_axis``, ``_least_squares_normals`` /
``_least_squares_normal``, ``_bulge_sides`` / ``_bulge_side``, ``_horner_terms`` / ``_horner``,
``_evaluate_all`` / ``_evaluate``, ``_curl_angles`` / ``_curl_angle``, ``_roll_to_poles`` /
``_roll_to_pole``): the same steps in the same order, so each row equals the single-chain result to
rounding (``tests/solver/test_start.py``). :mod:`.switches` says from how many chains this one runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import rotations as _rotations
from . import start as _start
from .rotations import turn_floats
from .start import EPS, MAX_TOTAL_STEP


def curled_starts(joints: np.ndarray, targets: np.ndarray, poles: np.ndarray | None,
                  lengths: np.ndarray, straighten: bool = True) -> np.ndarray:
    """:func:`.start.curled_start` for ``C`` chains at once, in numpy: ``joints (C, N+1, 3)`` (N >= 2, every
    target reachable and off the root), ``targets (C, 3)``, ``poles (C, 3)`` or None, ``lengths (C, N)``.
    The same steps in the same order, so each row equals the single-chain result (to rounding)."""
    count, n1, _ = joints.shape
    n = n1 - 1
    root = joints[:, 0]
    g = targets - root
    r2 = np.einsum("ci,ci->c", g, g)
    total = lengths.sum(axis=1)
    tiny = EPS * total
    shape = _shapes(joints, lengths, poles, tiny)
    axis, e1, e2, along, across, p = shape.axis, shape.e1, shape.e2, shape.along, shape.across, shape.p
    c = _curl_angles(across, p * p - r2, total * total, n, shape.search)
    _terms, s_re2, s_im2, _ = shape.search
    mismatch = np.abs(np.sqrt(p * p + s_re2 + s_im2) - np.sqrt(r2))  # .start.faded, for every chain
    fade = np.where(mismatch >= _start.FADE * total, 1.0, mismatch / (_start.FADE * total))

    z = np.exp(1j * (c * fade))  # extend (below) replaces the rows it changes, from the curl unfaded
    powers = np.empty((count, n), dtype=complex)
    powers[:, 0] = 1.0
    for k in range(1, n):
        powers[:, k] = powers[:, k - 1] * z
    w = across * powers
    steps = along[:, :, None] * axis[:, None] + w.real[:, :, None] * e1[:, None] + w.imag[:, :, None] * e2[:, None]
    offsets = np.concatenate([np.zeros((count, 1, 3)), np.cumsum(steps, axis=1)], axis=1)
    farther = p * p - r2 + s_re2 + s_im2 < 0.0
    # Targets near full reach short of the pose's tip: .start.flattened_curl (most rows: None).
    near = ~farther & (r2 > (1.0 - 2.0 * _start.FLATTEN_FROM - _start.FLATTEN_BAND) ** 2 * total * total)
    if straighten and (farther.any() or near.any()):  # .start.extend, row by row (cached by pose)
        for row in np.flatnonzero(farther | near).tolist():
            pose = tuple(joints[row, :, 0].tolist()), tuple(joints[row, :, 1].tolist()), \
                tuple(joints[row, :, 2].tolist()), tuple(lengths[row].tolist())
            pole = None
            row_shape = _start._shape(*pose, None)  # looked up once, handed on
            if poles is not None and row_shape.pole_decides:
                pole = tuple(poles[row].tolist())
                row_shape = _start._shape(*pose, pole)
            if farther[row]:
                extended = _start.extend(pose, pole, float(r2[row]), float(c[row]), row_shape)
            else:
                extended = _start.flattened_curl(pose, pole, float(r2[row]), float(c[row] * fade[row]),
                                                 float(fade[row]), row_shape)
            if extended is not None:
                offsets[row] = np.array(extended).T

    tip = offsets[:, n]
    t = np.sqrt(np.einsum("ci,ci->c", tip, tip))
    u = g / np.sqrt(r2)[:, None]
    aim = t > tiny
    a = tip / np.where(aim, t, 1.0)[:, None]
    cos = np.einsum("ci,ci->c", a, u)
    half = aim & (cos < -1.0 + 1e-12)
    turn = aim & ~half
    if turn.any():
        # v + w x v + (w x (w x v)) / (1 + cos), w = a x u: turn_floats, row by row (batched 3x3 matrix
        # products of this size cost more than the arithmetic).
        wv = _cross(a, u)[:, None]
        h = np.where(turn, 1.0 / np.where(turn, 1.0 + cos, 1.0), 0.0)[:, None, None]
        v = offsets
        wxv = _cross(wv, v)
        turned = v + wxv + h * _cross(wv, wxv)
        offsets = np.where(turn[:, None, None], turned, offsets)
    for row in np.flatnonzero(half):
        ax, ay, az = a[row]
        ux, uy, uz = u[row]
        offsets[row, 1:] = [turn_floats(ax, ay, az, ux, uy, uz, *v) for v in offsets[row, 1:].tolist()]
    if poles is not None:
        _roll_to_poles(offsets, u, poles - root, tiny)
    return root[:, None] + offsets


@dataclass(eq=False, frozen=True, slots=True)
class CurlShapes:
    """What the batched curl needs from the poses without IK (and the poles, for straight chains): as
    :func:`.start._shape` for one chain. Arrays are never written to once made."""

    axis: np.ndarray  # (C, 3) bend axes
    e1: np.ndarray  # (C, 3), e2: (C, 3) across them
    e2: np.ndarray
    along: np.ndarray  # (C, N) each bone along the axis
    across: np.ndarray  # (C, N) complex: across it
    p: np.ndarray  # (C,) the sum along
    search: tuple  # (_horner_terms(across), and F(0) - offset and F'(0) in parts: s.real**2, s.imag**2, F'(0))


# The poses without IK seldom change between frames (and never in a pose held while a target moves): the
# last few shapes, by their exact inputs (so the same floats as made afresh).
_KEPT: dict[tuple, CurlShapes] = {}
KEPT_SHAPES = 8


def _shapes(joints: np.ndarray, lengths: np.ndarray, poles: np.ndarray | None, tiny: np.ndarray) -> CurlShapes:
    """The :class:`CurlShapes` of ``joints (C, N+1, 3)``, kept while the same inputs come back."""
    key = (joints.shape, joints.tobytes(), lengths.tobytes(), None if poles is None else poles.tobytes())
    kept = _KEPT.get(key)
    if kept is not None:
        return kept
    d = (joints[:, 1:] - joints[:, :-1]) / lengths[:, :, None]  # np.diff's floats, without its wrapper
    axis = _bend_axes(joints, d, lengths, poles, tiny)
    e1 = _perpendiculars(axis)
    e2 = _cross(axis, e1)
    along = lengths * np.einsum("cki,ci->ck", d, axis)
    across = lengths * (np.einsum("cki,ci->ck", d, e1) + 1j * np.einsum("cki,ci->ck", d, e2))
    p = along.sum(axis=1)  # fsum in the single-chain version: equal to rounding
    terms = _horner_terms(across)
    s, df = _evaluate_all(terms, np.zeros(len(joints)), np.zeros(len(joints)), parts=True)
    kept = CurlShapes(axis, e1, e2, along, across, p, (terms, s.real * s.real, s.imag * s.imag, df))
    for array in (axis, e1, e2, along, across, p, *kept.search):
        array.setflags(write=False)  # shared by every solve of the same poses
    if len(_KEPT) >= KEPT_SHAPES:
        del _KEPT[next(iter(_KEPT))]
    _KEPT[key] = kept
    return kept


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.cross`` (same floats, same C layout, so einsums over it sum in the same order) at a fraction of its
    calls."""
    return np.ascontiguousarray(_rotations.cross(a, b))


def _bend_axes(joints: np.ndarray, d: np.ndarray, lengths: np.ndarray, poles: np.ndarray | None,
               tiny: np.ndarray) -> np.ndarray:
    """:func:`.start._bend_axis` for every chain (``d``: unit bone directions ``(C, N, 3)``)."""
    b = _cross(d[:, :-1], d[:, 1:]).sum(axis=1)
    normal, plane = _least_squares_normals(d, lengths)
    side = np.einsum("ci,ci->c", normal, b)
    cancel = np.abs(side) <= 1e-6
    if cancel.any():
        side = np.where(cancel, _bulge_sides(joints, normal), side)
        if poles is not None:
            weak = cancel & (np.abs(side) <= 1e-6 * lengths.sum(axis=1))
            if weak.any():
                through = np.stack([joints[:, 0], poles, joints[:, -1]], axis=1)
                side = np.where(weak, _bulge_sides(through, normal), side)
    out = np.where((side < 0.0)[:, None], -normal, normal)
    if not plane.all():
        bn = np.sqrt(np.einsum("ci,ci->c", b, b))
        bent = ~plane & (bn > 1e-9)
        out[bent] = b[bent] / bn[bent, None]
        straight = ~plane & ~bent
        if straight.any():
            a = d[straight, 0]
            wv = np.zeros_like(a)
            wn = np.zeros(len(a))
            if poles is not None:
                wv = poles[straight] - joints[straight, 0]
                wv = wv - np.einsum("ci,ci->c", wv, a)[:, None] * a
                wn = np.sqrt(np.einsum("ci,ci->c", wv, wv))
            toward = wn > tiny[straight]
            wv = np.where(toward[:, None], wv / np.where(toward, wn, 1.0)[:, None], _perpendiculars(a))
            bv = _cross(a, wv)
            out[straight] = bv / np.sqrt(np.einsum("ci,ci->c", bv, bv))[:, None]
    return out


def _least_squares_normals(d: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`.start._least_squares_normal` for every chain: the normals ``(C, 3)`` and where they exist."""
    x, y, z = d[:, :, 0], d[:, :, 1], d[:, :, 2]
    lx, ly = lengths * x, lengths * y
    add = np.add.reduce  # .sum's floats without its Python wrapper
    a, b, c = add(lx * x, axis=1), add(ly * y, axis=1), add(lengths * z * z, axis=1)
    dd, e, f = add(lx * y, axis=1), add(lx * z, axis=1), add(ly * z, axis=1)
    trace = a + b + c
    q = trace / 3.0
    p = np.sqrt(((a - q) ** 2 + (b - q) ** 2 + (c - q) ** 2 + 2.0 * (dd * dd + e * e + f * f)) / 6.0)
    spread = p > 1e-12 * trace
    p = np.where(spread, p, 1.0)
    ba, bb, bc, bd, be, bf = (a - q) / p, (b - q) / p, (c - q) / p, dd / p, e / p, f / p
    det = ba * (bb * bc - bf * bf) - bd * (bd * bc - bf * be) + be * (bd * bf - bb * be)
    phi = np.arccos(np.minimum(np.maximum(det / 2.0, -1.0), 1.0)) / 3.0  # np.clip's floats
    high = q + 2.0 * p * np.cos(phi)
    low = q + 2.0 * p * np.cos(phi + 2.0 * math.pi / 3.0)
    middle = trace - high - low
    ok = spread & (middle - low > 1e-6 * trace)
    r0 = np.stack([a - low, dd, e], axis=1)
    r1 = np.stack([dd, b - low, f], axis=1)
    r2 = np.stack([e, f, c - low], axis=1)
    best = _cross(r0, r1)
    best_norm = np.einsum("ci,ci->c", best, best)
    for u, v in ((r0, r2), (r1, r2)):
        x = _cross(u, v)
        norm = np.einsum("ci,ci->c", x, x)
        longer = norm > best_norm
        best = np.where(longer[:, None], x, best)
        best_norm = np.where(longer, norm, best_norm)
    ok &= best_norm > 0.0
    return best / np.sqrt(np.where(ok, best_norm, 1.0))[:, None], ok


def _bulge_sides(joints: np.ndarray, normal: np.ndarray) -> np.ndarray:
    """:func:`.start._bulge_side` for every chain."""
    a = joints[:, -1] - joints[:, 0]
    m = joints[:, 1:-1].sum(axis=1) / (joints.shape[1] - 2) - joints[:, 0]  # the mean's floats
    return np.einsum("ci,ci->c", _cross(m, a), normal)


def _perpendiculars(u: np.ndarray) -> np.ndarray:
    """``perpendicular_floats`` for every row of ``u (C, 3)``."""
    x, y, z = np.abs(u).T
    by_z = (z <= x) & (z <= y)
    by_x = ~by_z & (x <= y)
    out = np.where(by_z[:, None], np.stack([u[:, 1], -u[:, 0], np.zeros(len(u))], axis=1),
                   np.where(by_x[:, None], np.stack([np.zeros(len(u)), u[:, 2], -u[:, 1]], axis=1),
                            np.stack([-u[:, 2], np.zeros(len(u)), u[:, 0]], axis=1)))
    return out / np.sqrt(np.einsum("ci,ci->c", out, out))[:, None]


def _horner_terms(across: np.ndarray) -> np.ndarray:
    """``(N, 2, C)``: row ``j`` holds ``a_k`` and ``k * a_k`` for ``k = N-1-j`` (from the highest ``k`` down),
    as :func:`_evaluate_all` adds them (made once per search instead of once per evaluation)."""
    n = across.shape[1]
    k = np.arange(n - 1, -1, -1)
    return np.stack([across.T[k], k[:, None] * across.T[k]], axis=1)


def _evaluate_all(terms: np.ndarray, c: np.ndarray, offset: np.ndarray,
                  parts: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """:func:`.start._evaluate` for every chain (``terms``: :func:`_horner_terms`): the same operations in the
    same order, so the same floats. ``s`` and ``d`` share one array, so a Horner step is two in-place
    numpy calls on both."""
    z = np.cos(c) + 1j * np.sin(c)
    sd = terms[0].copy()
    for t in terms[1:]:  # s = s * z + a_k, d = d * z + k * a_k
        sd *= z
        sd += t
    s, d = sd
    if parts:  # s itself in place of F (the search keeps s.real**2 and s.imag**2 with the pose)
        return s, -2.0 * (s.real * d.imag - s.imag * d.real)
    return offset + s.real * s.real + s.imag * s.imag, -2.0 * (s.real * d.imag - s.imag * d.real)


def _curl_angles(across: np.ndarray, offset: np.ndarray, scale: np.ndarray, n: int,
                 search: tuple | None = None) -> np.ndarray:
    """:func:`.start._curl_angle` for every chain: the same steps and decisions; the search state is kept for the
    chains still searching only (compacted as chains finish), so each step costs a fixed few dozen numpy
    calls on the fewest rows."""
    count = len(offset)
    if search is None:
        terms = _horner_terms(across)
        f, df = _evaluate_all(terms, np.zeros(count), offset)
    else:  # kept with the pose (CurlShapes.search): F(0) = offset + s.real**2 + s.imag**2 in _evaluate's order
        terms, real2, imag2, df = search
        f = offset + real2 + imag2
    small = 1e-9 * scale  # the tip within ~1e-9 of the chain's length: far below FABRIK's SETTLE
    out = np.zeros(count)
    size = np.abs(f)
    rows = np.flatnonzero(size > small)
    if not len(rows):
        return out
    positive = f > 0.0
    sign = np.where(np.abs(df) > 1e-9 * scale, np.where((df < 0.0) == positive, 1.0, -1.0),
                    np.where(positive, 1.0, -1.0))
    if len(rows) < count:
        terms, offset, small, positive, sign = terms[:, :, rows], offset[rows], small[rows], positive[rows], sign[rows]
        f, df, size = f[rows], df[rows], size[rows]
    cap = MAX_TOTAL_STEP / (n - 1)
    limit = 2.0 * math.pi / n
    m = len(rows)
    c, lo, hi = np.zeros(m), np.zeros(m), np.full(m, np.nan)
    opened = m  # rows not bracketed yet (hi is NaN)
    for _ in range(8 * n + 64):
        step = -np.divide(f, df, out=np.zeros(m), where=df != 0.0)
        if opened:  # Newton's step where it heads the right way, else a full one; at most cap
            free = np.where(step * sign > 0.0, np.minimum(np.maximum(step, -cap), cap), sign * cap)
            new = np.minimum(np.maximum(c + free, -limit), limit)
        if opened < m:  # inside the bracket, or bisect
            closed = c + step
            inside = (np.fmin(lo, hi) < closed) & (closed < np.fmax(lo, hi))
            closed = np.where(inside, closed, 0.5 * (lo + hi))
            new = closed if not opened else np.where(hi != hi, new, closed)
        f_new, df_new = _evaluate_all(terms, new, offset)
        size_new = np.abs(f_new)
        found = size_new <= small
        crossed = (f_new > 0.0) != positive
        # past the nearest the curl gets (not bracketed): FABRIK finishes from the previous c
        stuck = ~crossed & ((size_new >= size) | (new == c))
        if opened < m:
            stuck &= hi != hi
        stuck &= ~found
        hi = np.where(crossed, new, hi)
        lo = np.where(crossed, lo, new)
        done = found | stuck | ((hi == hi) & (np.abs(hi - lo) <= 4e-16 * np.maximum(1.0, np.abs(new))))
        if np.logical_or.reduce(done):  # .any() without its Python wrapper
            out[rows[done]] = np.where(stuck, c, new)[done]
            keep = ~done
            rows = rows[keep]
            m = len(rows)
            if not m:
                return out
            terms = terms[:, :, keep]
            offset, small, positive, sign = offset[keep], small[keep], positive[keep], sign[keep]
            new, f_new, df_new, size_new = new[keep], f_new[keep], df_new[keep], size_new[keep]
            lo, hi = lo[keep], hi[keep]
        c, f, df, size = new, f_new, df_new, size_new
        opened = int(np.count_nonzero(hi != hi))
    out[rows] = c
    return out


def _roll_to_poles(offsets: np.ndarray, u: np.ndarray, w: np.ndarray, tiny: np.ndarray) -> None:
    """:func:`.start._roll_to_pole` for every chain (offsets changed in place)."""
    n = offsets.shape[1] - 1
    m = offsets[:, 1:n].sum(axis=1) / (n - 1)  # the mean's floats
    m = m - np.einsum("ci,ci->c", m, u)[:, None] * u
    w = w - np.einsum("ci,ci->c", w, u)[:, None] * u
    mn = np.sqrt(np.einsum("ci,ci->c", m, m))
    wn = np.sqrt(np.einsum("ci,ci->c", w, w))
    ok = (mn > tiny) & (wn > tiny)
    if not ok.any():
        return
    norm = np.where(ok, mn * wn, 1.0)
    cos = np.where(ok, np.einsum("ci,ci->c", m, w) / norm, 1.0)
    sin = np.where(ok, np.einsum("ci,ci->c", u, _cross(m, w)) / norm, 0.0)
    v = offsets[:, 1:n]
    t = np.einsum("cki,ci->ck", v, u) * (1.0 - cos)[:, None]
    offsets[:, 1:n] = (v * cos[:, None, None] + _cross(u[:, None], v) * sin[:, None, None]
                       + u[:, None] * t[:, :, None])
