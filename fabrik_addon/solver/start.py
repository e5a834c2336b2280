"""The pose FABRIK starts from: the pose without IK, curled and aimed until it reaches the target.

FABRIK started straight from the pose without IK is ill-conditioned: its first pass pulls each joint
toward its old position, and where the target (or a newly placed joint) passes near an old joint the
direction to it swings through tens of degrees for a tiny move of the target. On smooth target paths
that showed as pops of 10-160 degrees between frames, wherever the target crossed such a place or the
pass count changed. So the start is built first as a smooth function of the target:

1. curl: every joint turns by the same angle ``c`` about the chain's bend axis (the normal of the plane
   the bones lie closest to; for a straight chain, toward the pole or a fixed perpendicular), ``c`` the
   first root from 0 of
   ``|tip(c) - root| = |target - root|``. With ``z = exp(i c)`` the tip's offset across the axis is
   the polynomial ``sum_k a_k z**k`` (``a_k``: bone ``k`` across the axis as a complex number), so a
   safeguarded Newton search costs a few Horner evaluations;
2. aim: the curled pose turned rigidly about the root by the minimal rotation onto the target;
3. pole: rolled rigidly about the root-target line until the mean bend faces the pole.

The result reaches the target exactly whenever the curl can match the distance (always for planar
chains), so FABRIK has nothing left to do; otherwise it starts close. The start depends only on the
pose without IK, the target and the pole: solves stay deterministic and continuous in the target.

This module is the rule on plain floats, one chain at a time; :mod:`.start_batch` is its numpy twin
across many chains (the same steps in the same order, function by function: ``curled_start`` /
``curled_starts``, ``_bend_axis`` / ``_bend_axes``, ...). ``tests/solver/test_start.py`` holds them
equal; :mod:`.switches` says when each runs.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import NamedTuple

from .rotations import perpendicular_floats, roll_turn_floats, turn_floats

# Relative size below which a distance or offset counts as zero (as in .prepare).
EPS = 1e-9
# Largest Newton steps while looking for the first root, in radians of total curl (summed over the joints):
# small enough not to step over a root and the one after it.
MAX_TOTAL_STEP = 2.0
# The curl hands over to the straightening (see the end of the module) this many times as far from full
# reach as its peak falls short of it: early enough that the bend still faces the way the pose bends.
STRAIGHTEN_FROM = 10.0
# ... but at most this fraction of the chain's length before the peak: where the peak falls far short, its
# bend is large and keeps its direction, and the curl's poses short of it stay as they were.
STRAIGHTEN_BAND = 0.005
# ... and at least this fraction of the length before full reach, for chains that curl straight too (planar ones):
# the straightening reshapes their bend on the way (see STRAIGHT_SHAPE).
STRAIGHTEN_NEAR = 0.005
# The straightening's shape: as the chain nears straight, each bone's angle to the straightening direction goes
# from its share of the curl ``t`` to one proportional to ``t**STRAIGHT_SHAPE`` (the same root-mean-square):
# flatter, so the end bones of a uniform curl (sqrt(3 (n-1)/(n+1)) times the rms) are less far off the
# root-to-tip line on the last frame inside reach, which is what a bone turns as the target crosses full reach
# (a chain beyond reach lies straight). STRAIGHT_SWITCH: how late the shape hands over, as ``x**STRAIGHT_SWITCH``.
STRAIGHT_SHAPE = 0.25
STRAIGHT_SWITCH = 10
# ... for chains that curl (nearly) straight: flattening the bones of one that cannot (not in one plane) would turn
# its bend's direction, so the exponent goes from STRAIGHT_SHAPE to 1 as the curl's peak falls short of full reach
# by 0 to this fraction of the length (the metarig's finger: 1.5e-4, not flattened).
FLAT_UNTIL = 1e-4
# Below this angle (radians) the flattening is linear in the angle (see :func:`_flat`): float noise of 1e-9 in a
# bone meant to lie along the straightening direction stays 1e-6.
FLAT_LINEAR = 1e-4
# Short of the pose without IK's tip the start is the curl, whose bend is the pose's own (uniform where the pose
# is): a target crossing full reach fast can leave its last frame inside reach there, and the end bones then turn
# by their full angle into the straight chain beyond. So for a chain that curls straight whose pose without IK is
# within FLATTEN_FROM of full reach (fading out to twice that), the curl is flattened as the straightening is,
# by a weight that is 0 at the pose's own tip (the IK/FK snap keeps it), reaches full flattening like
# (d0 / d)**FLATTEN_SWITCH (d, d0: how far the target and the pose's tip fall short of full reach) and hands back
# to the plain curl as s**FLATTEN_RETURN, s from 0 at d0 to 1 at d0 + FLATTEN_BAND (see :func:`flattened_curl`).
FLATTEN_FROM = 0.01
FLATTEN_BAND = 0.01
FLATTEN_SWITCH = 8
FLATTEN_RETURN = 4
# Below this fraction of the chain's length, the mismatch between the target's distance from the root and the
# pose's tip's fades the curl (see :func:`faded`).
FADE = 1e-5
# Beyond full reach the chain is not laid quite straight at first (see :func:`beyond_reach`): its end bones lean
# to the side its bend faces just inside reach, ``sigma`` of its length short, ``sigma`` rising with the target's
# overshoot ``e`` (a fraction of the length) up to BEYOND_SHORTEN, held there to BEYOND_HOLD, and easing back to 0
# (straight) at BEYOND_BAND. BEYOND_SHORTEN is also how much farther the tip is from the target than a straight
# chain's (issue 23: within 1e-5 of the length); BEYOND_BAND leaves a target 2e-3 beyond reach a straight chain.
BEYOND_SHORTEN = 9e-6
# ... counting from this overshoot: a target less far beyond lies straight, as do the targets soft IK and stretch
# place 1e-12 beyond full reach to mean "straight toward it" (soft.BEYOND; rounding stays far below this).
BEYOND_FROM = 1e-11
# ... rising as the square of the overshoot up to this one: the lean grows as the root of the shortening, so a
# shortening equal to the overshoot leaned the end bones by 3e-4 of the length for float32 noise of 1e-6 (an FK pose
# baked to IK controls, its limbs straight: the target at the tip); squared, 1e-5 of the length there.
BEYOND_RISE = 2e-4
BEYOND_HOLD = 1.6e-3
BEYOND_BAND = 1.9e-3


def curled_start(xs: list[float], ys: list[float], zs: list[float], L: Sequence[float],
                 target: Sequence[float], pole: Sequence[float] | None,
                 straighten: bool = True) -> tuple[list[float], list[float], list[float]]:
    """The start pose for a reachable target (see the module): new coordinate lists, lengths kept.

    ``xs, ys, zs``: the pose without IK (N+1 joints); ``L``: its bone lengths. Returns the input lists
    unchanged for a single bone or a target at the root. ``straighten``: past the curl's peak, straighten
    (:func:`extend`; False: stop where the curl search stops, for limited chains).
    """
    n = len(L)
    rx, ry, rz = xs[0], ys[0], zs[0]
    gx, gy, gz = target[0] - rx, target[1] - ry, target[2] - rz
    r2 = gx * gx + gy * gy + gz * gz
    total = math.fsum(L)
    tiny = EPS * total
    if n < 2 or r2 <= tiny * tiny:
        return xs, ys, zs
    sqrt = math.sqrt
    pose = tuple(xs), tuple(ys), tuple(zs), tuple(L)
    shape = _shape(*pose, None)
    if pole is not None and shape.pole_decides:  # a straight chain, or bends that cancel: the pole picks the axis
        shape = _shape(*pose, tuple(pole))
    nx, ny, nz, e1x, e1y, e1z, e2x, e2y, e2z, along, across, p, horner, _ = shape
    c = _curl_angle(across, p * p - r2, total * total, n, horner)
    s0 = horner[3]
    extended = None
    if straighten and p * p - r2 + s0.real * s0.real + s0.imag * s0.imag < 0.0:  # farther than the pose's tip
        extended = extend(pose, tuple(pole) if pole is not None and shape.pole_decides else None, r2, c, shape)

    reach = p * p + s0.real * s0.real + s0.imag * s0.imag
    if extended is None and straighten and r2 > (1.0 - FLATTEN_FROM * 2.0 - FLATTEN_BAND) ** 2 * total * total:
        fade = faded(math.sqrt(reach), math.sqrt(r2), total)
        extended = flattened_curl(pose, tuple(pole) if pole is not None and shape.pole_decides else None, r2,
                                  c * fade, fade, shape)
    if extended is not None:
        ox, oy, oz = extended
    else:
        c *= faded(math.sqrt(reach), math.sqrt(r2), total)
        # Build the curled pose: bone k turned by k*c about the axis.
        z = complex(math.cos(c), math.sin(c))
        zk = 1.0 + 0.0j
        ox, oy, oz = [0.0], [0.0], [0.0]
        x = y = zz = 0.0  # the joint just built, carried in locals (the same sums in the same order)
        for k in range(n):
            w = across[k] * zk
            zk *= z
            a, wr, wi = along[k], w.real, w.imag
            x = x + a * nx + wr * e1x + wi * e2x
            y = y + a * ny + wr * e1y + wi * e2y
            zz = zz + a * nz + wr * e1z + wi * e2z
            ox.append(x)
            oy.append(y)
            oz.append(zz)

    # Aim: the minimal rotation taking the curled tip's direction onto the target's.
    tx, ty, tz = ox[n], oy[n], oz[n]
    t = sqrt(tx * tx + ty * ty + tz * tz)
    r = sqrt(r2)
    ux, uy, uz = gx / r, gy / r, gz / r
    if t > tiny:
        ax, ay, az = tx / t, ty / t, tz / t
        cos = ax * ux + ay * uy + az * uz
        if cos < -1.0 + 1e-12:  # a half turn: turn_floats picks its axis
            for k in range(1, n + 1):
                ox[k], oy[k], oz[k] = turn_floats(ax, ay, az, ux, uy, uz, ox[k], oy[k], oz[k])
        else:
            # turn_floats as a matrix, built once: I + [w]x + [w]x^2 / (1 + cos), w = a x u.
            wx, wy, wz = ay * uz - az * uy, az * ux - ax * uz, ax * uy - ay * ux
            h = 1.0 / (1.0 + cos)
            m00, m11, m22 = 1.0 - h * (wy * wy + wz * wz), 1.0 - h * (wx * wx + wz * wz), 1.0 - h * (wx * wx + wy * wy)
            m01, m10 = h * wx * wy - wz, h * wx * wy + wz
            m02, m20 = h * wx * wz + wy, h * wx * wz - wy
            m12, m21 = h * wy * wz - wx, h * wy * wz + wx
            if pole is None:  # aimed and moved to the root in one pass
                for k in range(1, n + 1):
                    vx, vy, vz = ox[k], oy[k], oz[k]
                    ox[k] = rx + (m00 * vx + m01 * vy + m02 * vz)
                    oy[k] = ry + (m10 * vx + m11 * vy + m12 * vz)
                    oz[k] = rz + (m20 * vx + m21 * vy + m22 * vz)
                ox[0], oy[0], oz[0] = rx + ox[0], ry + oy[0], rz + oz[0]
                return ox, oy, oz
            for k in range(1, n + 1):
                vx, vy, vz = ox[k], oy[k], oz[k]
                ox[k] = m00 * vx + m01 * vy + m02 * vz
                oy[k] = m10 * vx + m11 * vy + m12 * vz
                oz[k] = m20 * vx + m21 * vy + m22 * vz
    if pole is not None:
        _roll_to_pole(ox, oy, oz, ux, uy, uz, pole[0] - rx, pole[1] - ry, pole[2] - rz, tiny)
    return [rx + v for v in ox], [ry + v for v in oy], [rz + v for v in oz]


def beyond_shortening(overshoot: float) -> float:
    """How much shorter than its length (a fraction of it) a chain whose target lies ``overshoot`` of its length
    beyond full reach is left (:data:`BEYOND_SHORTEN`): continuous, rising as the square of the overshoot from
    :data:`BEYOND_FROM` to :data:`BEYOND_RISE`, held to :data:`BEYOND_HOLD`, eased out to 0 at :data:`BEYOND_BAND`."""
    if not BEYOND_FROM < overshoot < BEYOND_BAND:
        return 0.0
    s = max(0.0, (overshoot - BEYOND_HOLD) / (BEYOND_BAND - BEYOND_HOLD))
    rise = min(1.0, (overshoot - BEYOND_FROM) / BEYOND_RISE)
    return BEYOND_SHORTEN * rise * rise * (1.0 - s * s * (3.0 - 2.0 * s))


def beyond_reach(xs: list[float], ys: list[float], zs: list[float], L: Sequence[float], target: Sequence[float],
                 pole: Sequence[float] | None) -> tuple[list[float], list[float], list[float]] | None:
    """The pose of a free chain whose target lies beyond full reach, just beyond it (less than :data:`BEYOND_BAND`
    of its length): straight toward the target but for its first and last bones, which lean by the same offset
    to either side (the first toward where the chain bends just inside reach: :func:`curled_start` for the target
    pulled in to :func:`beyond_shortening` short of full reach, aimed and rolled to the pole as there), so that
    the tip falls that shortening short. None (lay it straight) for one bone, from the band on, or with no bend.

    Why: a chain lying straight beyond reach turns each bone by its whole angle to the root-to-tip line as its
    target crosses full reach in one frame, the end bones most; leaning them splits their turn over the frames
    before and after (as Blender's IK, whose chain stays bent beyond reach), and for a given shortening the end
    bones alone lean farthest (a uniform bend of the same shortening: 0.6-0.7 as far). ``xs, ys, zs``: the pose
    without IK; ``L``: its bone lengths; the target at least their sum from the root."""
    n = len(L)
    if n < 2:
        return None
    total = math.fsum(L)
    rx, ry, rz = xs[0], ys[0], zs[0]
    gx, gy, gz = target[0] - rx, target[1] - ry, target[2] - rz
    r = math.sqrt(gx * gx + gy * gy + gz * gz)
    sigma = beyond_shortening(r / total - 1.0)
    if sigma <= 0.0:
        return None
    ux, uy, uz = gx / r, gy / r, gz / r
    k = total * (1.0 - sigma) / r
    bx, by, bz = curled_start(xs, ys, zs, L, (rx + gx * k, ry + gy * k, rz + gz * k), pole)
    # The side: the interior joints' mean offset from the root, across the root-target line.
    mx, my, mz = math.fsum(bx[1:n]) / (n - 1) - rx, math.fsum(by[1:n]) / (n - 1) - ry, math.fsum(bz[1:n]) / (n - 1) - rz
    t = mx * ux + my * uy + mz * uz
    mx, my, mz = mx - t * ux, my - t * uy, mz - t * uz
    m = math.sqrt(mx * mx + my * my + mz * mz)
    if m <= 1e-12 * total:
        return None
    mx, my, mz = mx / m, my / m, mz / m
    first, last = L[0], L[n - 1]
    h = _end_offset(first, last, sigma * total)
    along0, along1 = math.sqrt(first * first - h * h), math.sqrt(last * last - h * h)
    ox, oy, oz = [rx], [ry], [rz]
    x, y, z = rx + along0 * ux + h * mx, ry + along0 * uy + h * my, rz + along0 * uz + h * mz
    ox.append(x)
    oy.append(y)
    oz.append(z)
    for length in L[1:n - 1]:
        x, y, z = x + length * ux, y + length * uy, z + length * uz
        ox.append(x)
        oy.append(y)
        oz.append(z)
    ox.append(x + along1 * ux - h * mx)
    oy.append(y + along1 * uy - h * my)
    oz.append(z + along1 * uz - h * mz)
    return ox, oy, oz


def _end_offset(first: float, last: float, short: float) -> float:
    """The offset ``h`` across the chain at which a first bone ``first`` and a last bone ``last``, leaning by
    ``h`` either way, shorten the chain by ``short``: the root of ``first - sqrt(first**2 - h**2) + last -
    sqrt(last**2 - h**2) = short`` (increasing in ``h``; Newton from the small-angle answer, kept in bounds)."""
    top = min(first, last)
    h = min(math.sqrt(2.0 * short / (1.0 / first + 1.0 / last)), top)
    for _ in range(50):
        a, b = math.sqrt(max(first * first - h * h, 0.0)), math.sqrt(max(last * last - h * h, 0.0))
        f = first - a + last - b - short
        if a <= 0.0 or b <= 0.0:
            h = 0.5 * h
            continue
        df = h / a + h / b
        new = min(max(h - f / df, 0.0), top)
        if abs(new - h) <= 1e-15 * top:
            return new
        h = new
    return h


def faded(reach: float, r: float, total: float) -> float:
    """The fraction of the curl to apply when the pose's tip is ``reach`` and the target ``r`` from the root:
    1, or ``mismatch / FADE`` where ``mismatch = |reach - r| / total`` is below :data:`FADE`.

    Where the bends nearly cancel (an S), curling barely changes the tip's distance, so the curl that makes
    up a mismatch of float32 rounding (the pose without IK recomputed by the solve; ~1e-6 of the length)
    bends every joint by 1e-4 of the length: a snapped chain moved off its FK pose. Faded, the curl goes
    continuously to none at no mismatch, and leaves the tip at most ``FADE / 4`` of the length off the
    target's distance (FABRIK's passes finish from there)."""
    mismatch = abs(reach - r)
    if mismatch >= FADE * total:
        return 1.0
    return mismatch / (FADE * total)


class CurlShape(NamedTuple):
    """What the curl needs from the pose without IK (and, for a straight chain, the pole): see :func:`_shape`."""

    nx: float  # the unit axis the chain curls about
    ny: float
    nz: float
    e1x: float  # e1: a unit vector across the axis
    e1y: float
    e1z: float
    e2x: float  # e2 = n x e1
    e2y: float
    e2z: float
    along: list[float]  # each bone along the axis
    across: list[complex]  # each bone across it, as e1 + i e2 components
    p: float  # the sum along the axis
    horner: tuple  # _horner(across)
    pole_decides: bool  # a straight chain, or bends that cancel: a pole would pick the axis

    @property
    def axis(self) -> tuple[float, float, float]:
        return self.nx, self.ny, self.nz


@functools.lru_cache(maxsize=512)
def _shape(xs: tuple[float, ...], ys: tuple[float, ...], zs: tuple[float, ...], L: tuple[float, ...],
           pole: tuple[float, ...] | None) -> CurlShape:
    """What the curl needs from the pose without IK (and, for a straight chain, the pole): the axis
    ``n``, two unit vectors ``e1``, ``e2 = n x e1`` across it, each bone along ``n`` (floats) and
    across it (complex numbers in ``e1``, ``e2``), the sum along ``n``, :func:`_horner` of the
    across parts, and whether a pole would pick the axis (:func:`_bend_axis`). Cached: a pose without
    IK seldom changes between frames, and the cache key is all it depends on; the pole is passed only
    where it picks the axis, so that a moving pole does not make every frame's key new."""
    n = len(L)
    tiny = EPS * math.fsum(L)
    dx = [(xs[k + 1] - xs[k]) / L[k] for k in range(n)]
    dy = [(ys[k + 1] - ys[k]) / L[k] for k in range(n)]
    dz = [(zs[k + 1] - zs[k]) / L[k] for k in range(n)]
    (nx, ny, nz), pole_decides = _bend_axis(list(xs), list(ys), list(zs), dx, dy, dz, L, pole, tiny)
    e1x, e1y, e1z = perpendicular_floats(nx, ny, nz)
    e2x, e2y, e2z = ny * e1z - nz * e1y, nz * e1x - nx * e1z, nx * e1y - ny * e1x
    along = [L[k] * (dx[k] * nx + dy[k] * ny + dz[k] * nz) for k in range(n)]
    across = [complex(L[k] * (dx[k] * e1x + dy[k] * e1y + dz[k] * e1z),
                      L[k] * (dx[k] * e2x + dy[k] * e2y + dz[k] * e2z)) for k in range(n)]
    return CurlShape(nx, ny, nz, e1x, e1y, e1z, e2x, e2y, e2z, along, across, math.fsum(along), _horner(across),
                     pole_decides)


def _horner(across: list[complex]) -> tuple:
    """What :func:`_curl_angle` evaluates ``F`` with that does not depend on the target: the Horner terms
    ``(a_k, k * a_k)`` from the second highest ``k`` down, after the highest, and the polynomial and its
    ``k``-weighted sum at ``c = 0`` (:func:`_evaluate` at ``z = 1``: the same sums in the same order)."""
    top = len(across) - 1
    last, last_d = across[top], top * across[top]
    terms = [(across[k], k * across[k]) for k in range(top - 1, -1, -1)]
    s, d = last, last_d
    one = complex(math.cos(0.0), math.sin(0.0))
    for a, ka in terms:
        s = s * one + a
        d = d * one + ka
    return last, last_d, terms, s, d


def _bend_axis(xs: list[float], ys: list[float], zs: list[float], dx: list[float], dy: list[float],
               dz: list[float], L: Sequence[float], pole: Sequence[float] | None,
               tiny: float) -> tuple[tuple[float, float, float], bool]:
    """Unit axis the chain curls about, and whether a pole picks it (consulted when given: the chain
    is straight, or its bends cancel with no clear bulge), whether or not ``pole`` is given.

    The normal of the plane the bones lie closest to (the least-squares plane of the bone directions,
    weighted by length), turned to the side of the sum of the joints' bend axes: for a planar chain
    its plane's normal, and for a non-planar one the axis whose curl brings the tip nearest the root
    (curling about the summed bend axis alone left a 10-bone chain's tip bones turning 2.5 degrees a
    frame, and near the closest it could curl, 1.5e-7 of input noise moved joints by 1e-4). When that
    plane is not unique (a straight chain), the summed bend axis; for a straight chain, the axis that
    bends it toward the pole, else toward a fixed perpendicular of the chain.
    """
    n = len(dx)
    bx = by = bz = 0.0
    for k in range(n - 1):
        bx += dy[k] * dz[k + 1] - dz[k] * dy[k + 1]
        by += dz[k] * dx[k + 1] - dx[k] * dz[k + 1]
        bz += dx[k] * dy[k + 1] - dy[k] * dx[k + 1]
    plane = _least_squares_normal(dx, dy, dz, L)
    if plane is not None:
        px, py, pz = plane
        side = px * bx + py * by + pz * bz
        if abs(side) <= 1e-6:
            # Bends that cancel (a jog, an S): curl toward where the interior joints bulge from the
            # root-tip line, so float noise cannot pick the side.
            side = _bulge_side(xs, ys, zs, px, py, pz)
        decides = abs(side) <= 1e-6 * math.fsum(L)
        if decides and pole is not None:
            side = _bulge_side(xs[:1] + [pole[0]] + xs[-1:], ys[:1] + [pole[1]] + ys[-1:], zs[:1] + [pole[2]] + zs[-1:],
                               px, py, pz)
        if side < 0.0:
            return (-px, -py, -pz), decides
        return (px, py, pz), decides
    b = math.sqrt(bx * bx + by * by + bz * bz)
    if b > 1e-9:
        return (bx / b, by / b, bz / b), False
    ax, ay, az = dx[0], dy[0], dz[0]  # straight: every bone points this way
    wx = wy = wz = 0.0
    w = 0.0
    if pole is not None:
        wx, wy, wz = pole[0] - xs[0], pole[1] - ys[0], pole[2] - zs[0]
        t = wx * ax + wy * ay + wz * az
        wx, wy, wz = wx - t * ax, wy - t * ay, wz - t * az
        w = math.sqrt(wx * wx + wy * wy + wz * wz)
    if w > tiny:
        wx, wy, wz = wx / w, wy / w, wz / w
    else:
        wx, wy, wz = perpendicular_floats(ax, ay, az)
    bx, by, bz = ay * wz - az * wy, az * wx - ax * wz, ax * wy - ay * wx
    b = math.sqrt(bx * bx + by * by + bz * bz)
    return (bx / b, by / b, bz / b), True


def _bulge_side(xs: list[float], ys: list[float], zs: list[float], nx: float, ny: float, nz: float) -> float:
    """``(mean interior joint - root) x (tip - root) . n``: positive when curling about ``n`` bends the
    chain further toward where its interior joints lie (curling turns the later bones toward
    ``n x (tip - root)``, so the interior bulges the other way)."""
    n = len(xs) - 1
    ax, ay, az = xs[n] - xs[0], ys[n] - ys[0], zs[n] - zs[0]
    mx = math.fsum(xs[1:n]) / (n - 1) - xs[0]
    my = math.fsum(ys[1:n]) / (n - 1) - ys[0]
    mz = math.fsum(zs[1:n]) / (n - 1) - zs[0]
    return (my * az - mz * ay) * nx + (mz * ax - mx * az) * ny + (mx * ay - my * ax) * nz


def _least_squares_normal(dx: list[float], dy: list[float], dz: list[float],
                          L: Sequence[float]) -> tuple[float, float, float] | None:
    """Unit eigenvector of the smallest eigenvalue of ``sum L_k d_k d_k^T``, or None when that eigenvalue
    is not clearly apart from the next (closed form for symmetric 3x3 matrices)."""
    a = b = c = d = e = f = 0.0  # [[a, d, e], [d, b, f], [e, f, c]]
    for k in range(len(dx)):
        w, x, y, z = L[k], dx[k], dy[k], dz[k]
        a += w * x * x
        b += w * y * y
        c += w * z * z
        d += w * x * y
        e += w * x * z
        f += w * y * z
    trace = a + b + c
    q = trace / 3.0
    p2 = (a - q) ** 2 + (b - q) ** 2 + (c - q) ** 2 + 2.0 * (d * d + e * e + f * f)
    p = math.sqrt(p2 / 6.0)
    if p <= 1e-12 * trace:
        return None
    # B = (M - q I) / p; the eigenvalues are q + 2 p cos(phi + 2 pi k / 3), phi = acos(det(B) / 2) / 3.
    ba, bb, bc, bd, be, bf = (a - q) / p, (b - q) / p, (c - q) / p, d / p, e / p, f / p
    det = ba * (bb * bc - bf * bf) - bd * (bd * bc - bf * be) + be * (bd * bf - bb * be)
    phi = math.acos(max(-1.0, min(1.0, det / 2.0))) / 3.0
    high = q + 2.0 * p * math.cos(phi)
    low = q + 2.0 * p * math.cos(phi + 2.0 * math.pi / 3.0)
    middle = trace - high - low
    if middle - low <= 1e-6 * trace:
        return None
    # The eigenvector of ``low``: the longest cross product of two rows of M - low I.
    r0 = (a - low, d, e)
    r1 = (d, b - low, f)
    r2 = (e, f, c - low)
    best, best_norm = (0.0, 0.0, 0.0), 0.0
    for u, v in ((r0, r1), (r0, r2), (r1, r2)):
        x, y, z = u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]
        norm = x * x + y * y + z * z
        if norm > best_norm:
            best, best_norm = (x, y, z), norm
    norm = math.sqrt(best_norm)
    return best[0] / norm, best[1] / norm, best[2] / norm


def _evaluate(across: list[complex], c: float, offset: float) -> tuple[float, float]:
    """``F(c) = |tip(c) - root|**2 - r**2`` and ``dF/dc`` (``offset`` = along-axis part squared - r**2)."""
    z = complex(math.cos(c), math.sin(c))
    n = len(across)
    s = across[n - 1]
    d = (n - 1) * across[n - 1]
    for k in range(n - 2, -1, -1):
        s = s * z + across[k]
        d = d * z + k * across[k]
    # d/dc of sum a_k z^k is i * sum k a_k z^k.
    return offset + s.real * s.real + s.imag * s.imag, -2.0 * (s.real * d.imag - s.imag * d.real)


def _curl_angle(across: list[complex], offset: float, scale: float, n: int, horner: tuple | None = None) -> float:
    """The first root of ``F`` from 0 on the side ``|F|`` falls to; where the curl cannot match the
    distance, where ``|F|`` stops shrinking.

    Newton steps from 0, each at most ``MAX_TOTAL_STEP`` of total curl, until one crosses the root; then
    Newton steps kept inside the bracket (bisection when they leave it) to full precision.

    :func:`_evaluate` is written out inline (the same operations in the same order, so the same floats):
    it runs a few times per chain per frame, where a Python call costs as much as its arithmetic.
    ``horner``: :func:`_horner` of ``across``, when at hand (kept with the pose it comes from).
    """
    last, last_d, terms, s, d = _horner(across) if horner is None else horner
    sr, si = s.real, s.imag
    f0, df = offset + sr * sr + si * si, -2.0 * (sr * d.imag - si * d.real)  # _evaluate(across, 0.0, offset)
    small = 1e-9 * scale  # the tip within ~1e-9 of the chain's length: far below FABRIK's SETTLE
    if abs(f0) <= small:
        return 0.0
    positive = f0 > 0.0
    # Toward the root Newton points to (F'(0) depends on the pose alone, so the side flips only where
    # F0 does, at c = 0); at an extremum (a straight chain), curl more to shorten, less to lengthen.
    if abs(df) > 1e-9 * scale:
        sign = 1.0 if (df < 0.0) == positive else -1.0
    else:
        sign = 1.0 if positive else -1.0
    cap = MAX_TOTAL_STEP / (n - 1)
    limit = 2.0 * math.pi / n  # a full circle of curl: the chain closes on itself
    cos, sin = math.cos, math.sin
    c, f = 0.0, f0
    lo, hi = 0.0, math.nan  # F has the sign of f0 at lo and the other sign at hi, once bracketed
    for _ in range(8 * n + 64):
        step = -f / df if df != 0.0 else 0.0
        if hi != hi:  # not bracketed yet (hi is NaN)
            if step * sign > 0.0:  # Newton heads the right way (clamped as max(-cap, min(cap, step)))
                if cap < step:
                    step = cap
                if -cap > step:
                    step = -cap
            else:
                step = sign * cap
            new = c + step  # max(-limit, min(limit, c + step))
            if limit < new:
                new = limit
            if -limit > new:
                new = -limit
        else:
            new = c + step
            if not (lo < new < hi or hi < new < lo):  # outside the bracket (min(lo, hi) < new < max(lo, hi))
                new = 0.5 * (lo + hi)
        z = complex(cos(new), sin(new))
        s, d = last, last_d
        for a, ka in terms:
            s = s * z + a
            d = d * z + ka
        sr, si = s.real, s.imag
        f_new, df_new = offset + sr * sr + si * si, -2.0 * (sr * d.imag - si * d.real)
        if abs(f_new) <= small:
            return new
        if (f_new > 0.0) != positive:
            hi = new
        elif hi != hi and (abs(f_new) >= abs(f) or new == c):
            return c  # past the nearest the curl gets: FABRIK finishes from here
        else:
            lo = new
        c, f, df = new, f_new, df_new
        if hi == hi and abs(hi - lo) <= 4e-16 * max(1.0, abs(c)):
            return c
    return c


def _roll_to_pole(ox: list[float], oy: list[float], oz: list[float], ux: float, uy: float, uz: float,
                  wx: float, wy: float, wz: float, tiny: float) -> None:
    """Turn the interior joints (offsets from the root) rigidly about unit axis ``u`` (root to target)
    until their mean faces the pole offset ``w``."""
    n = len(ox) - 1
    mx, my, mz = math.fsum(ox[1:n]) / (n - 1), math.fsum(oy[1:n]) / (n - 1), math.fsum(oz[1:n]) / (n - 1)
    turn = roll_turn_floats(mx, my, mz, wx, wy, wz, ux, uy, uz, tiny)
    if turn is None:
        return
    c, s = turn
    for k in range(1, n):
        vx, vy, vz = ox[k], oy[k], oz[k]
        t = (vx * ux + vy * uy + vz * uz) * (1.0 - c)
        cx, cy, cz = uy * vz - uz * vy, uz * vx - ux * vz, ux * vy - uy * vx
        ox[k] = vx * c + cx * s + ux * t
        oy[k] = vy * c + cy * s + uy * t
        oz[k] = vz * c + cz * s + uz * t


# --- Near full reach: the curl's peak, then straightening ----------------------------------------------
#
# A chain whose bones do not lie in one plane cannot curl straight: the curl brings its tip at most to
# ``|tip(c*)|`` (the peak), short of the chain's length. Targets between the peak and full reach used to
# be left to FABRIK, which crawls there (100 passes left the metarig's finger 1.9e-4 of its length short)
# and whose pose, and above all whose bend direction (the roll the write-back gives the chain), jumped by
# up to 118 degrees between nearby targets. Past the peak the start now straightens instead: every bone
# of the peak pose turns toward the peak tip's direction ``a`` by the same fraction of its angle to it
# (``d_k(x) = cos(x t_k) a + sin(x t_k) e_k``, ``x`` from 1 at the peak to 0 straight), ``x`` the root of
# ``|tip(x)| = |target - root|``. It is continuous with the curl at the peak and ends straight along ``a``
# with a bend that shrinks in the fixed direction :attr:`Straightening.bend`: the side the write-back rolls
# a straight chain to (:func:`straight_side`), so the roll is continuous across full reach as well.


class Straightening(NamedTuple):
    """The peak of a pose's curl and how it straightens (see above); relative to the root, unaimed."""

    curl: float  # the curl where the straightening starts (STRAIGHTEN_FROM)
    reach2: float  # |tip|**2 there
    axis: tuple[float, float, float]  # a: unit direction of the peak tip
    bones: list[tuple[float, float, float, float, float, float]]  # per bone: length, angle to a, its flattened
    # angle (STRAIGHT_SHAPE), unit e across a
    bend: tuple[float, float, float] | None  # unit direction the straightening bend shrinks in, if any
    power: float = 1.0  # the flattening's exponent q (STRAIGHT_SHAPE for a chain that curls straight, 1: none)


def extend(pose: tuple, pole: tuple | None, r2: float, c: float,
           shape: CurlShape | None = None) -> tuple[list[float], list[float], list[float]] | None:
    """The unaimed joint offsets reaching ``sqrt(r2)`` from the root for a target farther than the curl
    ``c`` reaches (``pose``: the pose without IK as (xs, ys, zs, L) tuples; ``pole``: where the pole
    picks the curl axis; ``shape``: their :func:`_shape`, when at hand), or None when the curl ``c``
    already matches. Short of where the straightening starts: the curl's root (bracketed, where the curl
    search stopped early); past it: the straightened pose."""
    if shape is None:
        shape = _shape(*pose, pole)
    offset = shape.p * shape.p - r2
    scale = math.fsum(pose[3]) ** 2
    small = 1e-9 * scale
    st = _straightening(*pose, pole)
    if r2 >= st.reach2:
        return _straightened(st, r2, small)
    if _evaluate(shape.across, c, offset)[0] >= -small:
        return None
    return _curled(shape, _bracketed(shape.across, offset, c, st.curl, small))


def flattened_curl(pose: tuple, pole: tuple | None, r2: float, c: float, fade: float = 1.0,
                   shape: CurlShape | None = None) -> tuple[list[float], list[float], list[float]] | None:
    """The unaimed joint offsets of the curl ``c`` (reaching ``sqrt(r2)``, nearer the root than the pose
    without IK's tip) with its bones' angles to its tip direction flattened toward the straightening's shape
    (:data:`FLATTEN_FROM`), the same distance reached; None where nothing is flattened (a chain that does not
    curl straight, a pose without IK far from full reach, a target outside the band). ``pose``, ``pole`` as
    for :func:`extend`; ``fade``: :func:`faded`'s fraction, which scales the flattening too."""
    L = pose[3]
    total = math.fsum(L)
    if shape is None:
        shape = _shape(*pose, pole)
    s0 = shape.horner[3]
    d0 = 1.0 - math.sqrt(shape.p * shape.p + s0.real * s0.real + s0.imag * s0.imag) / total
    d = 1.0 - math.sqrt(r2) / total
    strength = min(1.0, 2.0 - d0 / FLATTEN_FROM) * fade
    if strength <= 0.0 or not d0 < d < d0 + FLATTEN_BAND:
        return None
    st = _straightening(*pose, pole)
    if st.power >= 1.0:
        return None
    near = (d0 / d) ** FLATTEN_SWITCH
    keep = 1.0 - strength * (1.0 - (near + (1.0 - near) * ((d - d0) / FLATTEN_BAND) ** FLATTEN_RETURN))
    ax, ay, az, _, angles = _tip_angles(_curled(shape, c), L)
    scale = _flat_scale(angles, L, st.power)
    bones = []
    for k in range(len(L)):
        angle, px, py, pz = angles[k]
        flat = scale * _flat(angle, st.power)
        flat += keep * (angle - flat)
        bones.append((L[k], flat, flat, px, py, pz))  # _straight_angle: x times flat
    return _straightened(Straightening(c, r2, (ax, ay, az), bones, None, st.power), r2, 1e-9 * total * total, 2.0)


def _curled(shape: CurlShape, c: float) -> tuple[list[float], list[float], list[float]]:
    """Unaimed joint offsets of the pose curled by ``c``."""
    z = complex(math.cos(c), math.sin(c))
    zk = 1.0 + 0.0j
    ox, oy, oz = [0.0], [0.0], [0.0]
    x = y = zz = 0.0
    for k in range(len(shape.along)):
        w = shape.across[k] * zk
        zk *= z
        a, wr, wi = shape.along[k], w.real, w.imag
        x = x + a * shape.nx + wr * shape.e1x + wi * shape.e2x
        y = y + a * shape.ny + wr * shape.e1y + wi * shape.e2y
        zz = zz + a * shape.nz + wr * shape.e1z + wi * shape.e2z
        ox.append(x)
        oy.append(y)
        oz.append(zz)
    return ox, oy, oz


def _bracketed(across: list[complex], offset: float, lo: float, hi: float, small: float) -> float:
    """The root of ``F`` between ``lo`` (``F < 0``) and ``hi`` (``F >= 0``): Newton kept inside the bracket."""
    c = hi
    for _ in range(200):
        f, df = _evaluate(across, c, offset)
        if abs(f) <= small:
            return c
        if f < 0.0:
            lo = c
        else:
            hi = c
        new = c - f / df if df != 0.0 else math.nan
        if not (lo < new < hi or hi < new < lo):
            new = 0.5 * (lo + hi)
        if new == c or abs(hi - lo) <= 4e-16 * max(1.0, abs(c)):
            return new
        c = new
    return c


def _slope(across: list[complex], c: float) -> float:
    """``d|S(c)|**2 / dc``: how fast curling by ``c`` moves the tip away from the root."""
    return _evaluate(across, c, 0.0)[1]


def _peak(shape: CurlShape) -> float:
    """The curl ``c*`` where the tip is farthest from the root, on the side that lengthens the chain: the
    first zero of the slope from 0 (steps of an eighth of the curl search's, then bisection). Depends on
    the pose alone."""
    across = shape.across
    n = len(across)
    d0 = _slope(across, 0.0)
    if abs(d0) <= 1e-12 * math.fsum(abs(a) for a in across) ** 2:
        return 0.0
    sign = 1.0 if d0 > 0.0 else -1.0
    step = MAX_TOTAL_STEP / max(n - 1, 1) / 8.0
    limit = 2.0 * math.pi / n
    lo = 0.0
    while True:
        hi = lo + sign * step
        if abs(hi) >= limit:
            hi = sign * limit
        if _slope(across, hi) * sign <= 0.0:
            break
        if abs(hi) >= limit:
            return hi
        lo = hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid == lo or mid == hi:
            break
        if _slope(across, mid) * sign > 0.0:
            lo = mid
        else:
            hi = mid
    return lo


@functools.lru_cache(maxsize=512)
def _straightening(xs: tuple[float, ...], ys: tuple[float, ...], zs: tuple[float, ...], L: tuple[float, ...],
                   pole: tuple[float, ...] | None) -> Straightening:
    """The :class:`Straightening` of a pose without IK (cached by it, like :func:`_shape`)."""
    shape = _shape(xs, ys, zs, L, pole)
    n = len(L)
    peak = _peak(shape)
    total = math.fsum(L)
    reach = math.sqrt(max(shape.p * shape.p + abs(_horner_sum(shape.across, peak)) ** 2, 0.0))
    # Where the straightening takes over from the curl.
    start = total - max(min(STRAIGHTEN_FROM * (total - reach), total - reach + STRAIGHTEN_BAND * total),
                        STRAIGHTEN_NEAR * total)
    offset = shape.p * shape.p - start * start
    small = 1e-9 * total * total
    if start <= 0.0 or _evaluate(shape.across, 0.0, offset)[0] >= 0.0:
        switch = 0.0  # already within the band: straighten the pose without IK itself
    else:
        switch = _bracketed(shape.across, offset, 0.0, peak, small)
    ax, ay, az, t, angles = _tip_angles(_curled(shape, switch), L)
    # The flattened angles: t**q with the angles' length-weighted root-mean-square (q: STRAIGHT_SHAPE, FLAT_UNTIL).
    q = 1.0 - (1.0 - STRAIGHT_SHAPE) * max(0.0, 1.0 - (total - reach) / (FLAT_UNTIL * total))
    scale = _flat_scale(angles, L, q)
    bones = []
    bx = by = bz = 0.0  # the interior joints' mean offset from a, to first order in x (times n - 1 / x)
    qx = qy = qz = 0.0  # the tip's, likewise (times 1 / x)
    heads = 0.0  # the interior joints' distances along the chain, summed
    for k in range(n):
        length = L[k]
        angle, px, py, pz = angles[k]
        flat = scale * _flat(angle, q)
        bones.append((length, angle, flat, px, py, pz))
        # Bone k moves each joint after it by length * flat * e (to first order in x: the angle is x * flat).
        weight = (n - 1 - k) * length * flat
        bx, by, bz = bx + weight * px, by + weight * py, bz + weight * pz
        weight = length * flat
        qx, qy, qz = qx + weight * px, qy + weight * py, qz + weight * pz
        if k < n - 1:
            heads += (n - 1 - k) * length
    # The bend as the write-back measures it: across the root-to-tip line, which leans from a by the tip's
    # offset, so each interior joint's offset less its share of the tip's.
    share = heads / math.fsum(L)
    bx, by, bz = bx - share * qx, by - share * qy, bz - share * qz
    b = math.sqrt(bx * bx + by * by + bz * bz)
    bend = (bx / b, by / b, bz / b) if b > 1e-9 * math.fsum(L) else None
    return Straightening(switch, t * t, (ax, ay, az), bones, bend, q)


def _tip_angles(offsets: tuple[list[float], list[float], list[float]],
                L: Sequence[float]) -> tuple[float, float, float, float, list[tuple[float, float, float, float]]]:
    """The unit direction ``a`` of the tip of the unaimed joint offsets, the tip's distance, and each bone's
    angle to ``a`` with the unit direction across ``a`` it leans in (zero for a bone along ``a``)."""
    ox, oy, oz = offsets
    n = len(L)
    tx, ty, tz = ox[n], oy[n], oz[n]
    t = math.sqrt(tx * tx + ty * ty + tz * tz)
    ax, ay, az = tx / t, ty / t, tz / t
    angles = []
    for k in range(n):
        length = L[k]
        dx, dy, dz = (ox[k + 1] - ox[k]) / length, (oy[k + 1] - oy[k]) / length, (oz[k + 1] - oz[k]) / length
        cos = dx * ax + dy * ay + dz * az
        px, py, pz = dx - cos * ax, dy - cos * ay, dz - cos * az
        sin = math.sqrt(px * px + py * py + pz * pz)
        if sin > 1e-15:
            px, py, pz = px / sin, py / sin, pz / sin
        else:
            px = py = pz = 0.0
        angles.append((math.atan2(sin, cos), px, py, pz))
    return ax, ay, az, t, angles


def _flat_scale(angles: list[tuple[float, float, float, float]], L: Sequence[float], q: float) -> float:
    """The factor that gives the flattened angles ``angle**q`` the length-weighted root-mean-square of ``angles``."""
    n = len(L)
    square = math.fsum(L[k] * angles[k][0] ** 2 for k in range(n))
    flat_square = math.fsum(L[k] * _flat(angles[k][0], q) ** 2 for k in range(n))
    return math.sqrt(square / flat_square) if flat_square > 0.0 else 0.0


def _flat(angle: float, q: float) -> float:
    """``angle**q``, linear below :data:`FLAT_LINEAR` (continuous there): ``angle**q`` alone has an infinite
    slope at 0, so a bone along the straightening direction to float noise (the middle bone of an odd, evenly
    bent chain) leaned 1e-3 radians to whichever side the noise picked."""
    if angle >= FLAT_LINEAR:
        return angle ** q
    return angle * FLAT_LINEAR ** (q - 1.0)


def _horner_sum(across: list[complex], c: float) -> complex:
    """``S(c) = sum_k a_k z**k``: the tip's offset across the curl axis."""
    z = complex(math.cos(c), math.sin(c))
    out = 0j
    for a in reversed(across):
        out = out * z + a
    return out


def _straightened(st: Straightening, r2: float, small: float,
                  most: float = 1.0) -> tuple[list[float], list[float], list[float]]:
    """Unaimed joint offsets of the peak pose straightened until its tip is ``sqrt(r2)`` from the root
    (``st.reach2 <= r2 <`` the chain's length squared): each bone at the angle :func:`_straight_angle` to the
    straightening direction, ``x`` from 1 (where the straightening starts) to 0 (straight); ``most``: the
    largest ``x`` the root may be at (:func:`flattened_curl`'s bones, which it scales, may reach short of it)."""
    ax, ay, az = st.axis
    bones = st.bones
    sin, cos = math.sin, math.cos

    def tip(x: float) -> tuple[float, float, float, float, float, float]:
        tx = ty = tz = gx = gy = gz = 0.0
        for length, angle, flat, ex, ey, ez in bones:
            theta, slope = _straight_angle(angle, flat, x)
            c, s = cos(theta), sin(theta)
            along, out = length * c, length * s
            tx, ty, tz = tx + along * ax + out * ex, ty + along * ay + out * ey, tz + along * az + out * ez
            da, do = -length * slope * s, length * slope * c  # d/dx of along and out
            gx, gy, gz = gx + da * ax + do * ex, gy + da * ay + do * ey, gz + da * az + do * ez
        return tx, ty, tz, gx, gy, gz

    lo, hi = 0.0, most  # |tip| - r: above 0 at lo (straight), below at hi (the peak)
    x = 1.0
    for _ in range(200):
        tx, ty, tz, gx, gy, gz = tip(x)
        f = tx * tx + ty * ty + tz * tz - r2
        if abs(f) <= small:
            break
        if f > 0.0:
            lo = x
        else:
            hi = x
        df = 2.0 * (tx * gx + ty * gy + tz * gz)
        new = x - f / df if df != 0.0 else math.nan
        if not (lo < new < hi):
            new = 0.5 * (lo + hi)
        if new == x or hi - lo <= 4e-16:
            break
        x = new
    ox, oy, oz = [0.0], [0.0], [0.0]
    px = py = pz = 0.0
    for length, angle, flat, ex, ey, ez in bones:
        theta = _straight_angle(angle, flat, x)[0]
        c, s = cos(theta), sin(theta)
        along, out = length * c, length * s
        px, py, pz = px + along * ax + out * ex, py + along * ay + out * ey, pz + along * az + out * ez
        ox.append(px)
        oy.append(py)
        oz.append(pz)
    return ox, oy, oz


def _straight_angle(angle: float, flat: float, x: float) -> tuple[float, float]:
    """A bone's angle to the straightening direction at ``x`` (1: ``angle``, where the straightening starts;
    0: straight; ``x * flat`` near 0) and its derivative in ``x``."""
    w = x ** STRAIGHT_SWITCH
    return x * (flat + w * (angle - flat)), flat + (STRAIGHT_SWITCH + 1) * w * (angle - flat)


def straight_side(joints: Sequence[Sequence[float]]) -> tuple[float, float, float, float, float, float] | None:
    """For the write-back's roll of a (nearly) straight solved chain (:mod:`.orient`): the direction
    ``a`` the pose without IK ``joints (N+1, 3)`` straightens along and the unit direction its bend
    shrinks in as it does (:class:`Straightening`, without a pole), flat ``(ax, ay, az, bx, by, bz)``, in
    the pose's own axes; None for fewer than two bones or no bend. The start aims the chain by the least
    rotation from ``a`` onto the target's direction, which carries the bend along: that is the side a
    chain nearly straight toward that target faces."""
    n = len(joints) - 1
    if n < 2:
        return None
    xs = tuple(float(p[0]) for p in joints)
    ys = tuple(float(p[1]) for p in joints)
    zs = tuple(float(p[2]) for p in joints)
    sqrt = math.sqrt  # the bone lengths as solve_points measures them, so the cache is shared
    L = tuple(sqrt((xs[i + 1] - xs[i]) ** 2 + (ys[i + 1] - ys[i]) ** 2 + (zs[i + 1] - zs[i]) ** 2) for i in range(n))
    if min(L) <= EPS * math.fsum(L):
        return None
    st = _straightening(xs, ys, zs, L, None)
    if st.bend is None:
        return None
    return (*st.axis, *st.bend)
