"""Planar hinge chains (a leg: a free thigh, then hinges whose axes stay parallel) solved in their bend plane.

When every bone after the first is a HINGE and every hinge's rest offset is a turn about X alone, all the
hinge axes are the first bone's X axis: the chain lies in the plane through the root square to that axis,
and a pose is the first bone's direction plus one angle per hinge, each inside its interval. The solve is
then a planar one, done directly in that plane instead of by limited FABRIK, whose answer depended on
which start, restart or CCD sweep first got within the tolerance (pops of up to 43 degrees a frame on a
smooth path, 19 frames over 5 degrees, on the quality benchmark's hinged leg).

1. curl: the hinge angles move from those of the pose without IK along one line, the direction that
   shortens the chain fastest there (minus the gradient of the squared reach; every hinge alike for a
   straight chain), each clamped to its interval; the curl ``c`` is the first root from 0 of
   ``|tip(c) - root| = |target - root|`` (positive curls shorten, negative lengthen). Along that line
   the reach changes monotonically far further than with every hinge turning alike (a knee clamped at
   its end stopped a uniform curl short of the benchmark's targets);
2. plane: it holds the root-target line and, with a pole, the pole (the pose without IK's mean bend
   rolled onto it, as for every chain); without one, it is the plane nearest the pose without IK's
   (its hinge axis made square to the target's line);
3. aim: the first bone turns in the plane so the tip lies on the target.

A function of the pose without IK, the target and the pole alone (no passes, no restarts): deterministic,
continuous in the target, the same for any pass budget, and the pose without IK itself when its tip is
on the target. When the clamped curl cannot match the distance, the caller falls back to limited FABRIK
unless the target is out of reach (then the curl that brings the tip nearest is kept).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .limits import LIMIT_SLACK, ConeLimit, HingeLimit, ResolvedLimits
from .rotations import turn_x

# Relative size below which a distance counts as zero (as in .prepare).
EPS = 1e-9
# A rest offset counts as a turn about X when its X column is this close to (1, 0, 0) (float32 matrices).
AXIS_SLACK = 1e-5
# Grid step (radians of curl) when looking for the first root: the distance is smooth between the
# curls where a hinge reaches an end, so a root is bracketed by the first sign change on this grid.
GRID_STEP = 0.02
# A pose without IK whose mean interior joint is this far (relative to the chain's length) off its
# root-tip line says which way the pole rolls the chain (well above float32 noise in the inputs; the
# IK/FK snap puts poles on bends of any size, so anything clearer than noise counts).
BEND_CLEAR = 1e-6


@dataclass(frozen=True)
class PlanarPose:
    """A planar hinge chain's pose: ``joints (N+1, 3)``, bone ``frames (N, 3, 3)`` as the limits measure
    them, the tip's distance to the target, and whether the curl matched the target's distance."""

    joints: np.ndarray
    frames: np.ndarray
    error: float
    matched: bool


def hinge_angles(limits: ResolvedLimits) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """``(beta, start, low, high)`` per hinge (bones 1..N-1) when the chain is a planar hinge chain, else None.

    ``beta``: each hinge's rest offset (a turn about X); ``start``: its angle in the pose without IK
    (the limits' start frames), measured as the limits measure it.
    """
    items = limits.limits
    n = len(items)
    if n < 2 or isinstance(items[0], HingeLimit) or not all(isinstance(h, HingeLimit) for h in items[1:]):
        return None
    beta, start, low, high = (np.empty(n - 1) for _ in range(4))
    for k in range(1, n):
        hinge = items[k]
        assert isinstance(hinge, HingeLimit)
        offset = limits.rest_offsets[k]
        if abs(offset[1, 0]) > AXIS_SLACK or abs(offset[2, 0]) > AXIS_SLACK:
            return None
        beta[k - 1] = math.atan2(float(offset[2, 1]), float(offset[1, 1]))
        relative = (limits.frames[k - 1] @ offset).T @ limits.frames[k]
        start[k - 1] = math.atan2(float(relative[2, 1]), float(relative[1, 1]))
        low[k - 1], high[k - 1] = hinge.min_angle, hinge.max_angle
    return beta, start, low, high


def planar_hinge_pose(start: np.ndarray, target: np.ndarray, pole: np.ndarray | None, lengths: np.ndarray,
                      limits: ResolvedLimits) -> PlanarPose | None:
    """The pose of a planar hinge chain (see the module), or None when the chain is not one, when the plane
    is undefined (no pole and the pose without IK's hinge axis along the target's line, or the target at
    the root) or when the first bone's own limit would be broken."""
    angles = hinge_angles(limits)
    if angles is None:
        return None
    beta, alpha0, low, high = angles
    L = [float(v) for v in lengths]
    total = math.fsum(L)
    tiny = EPS * total
    root = start[0]
    g = target - root
    r = math.sqrt(float(g @ g))
    if r <= tiny:
        return None
    u = g / r
    c, way, matched = _curl(L, beta, alpha0, low, high, r)
    alpha = np.clip(alpha0 + c * way, low, high)
    psi = np.concatenate([[0.0], np.cumsum(beta + alpha)])
    steps = np.array(L) * np.exp(1j * psi)
    tip = complex(steps.sum())
    theta = math.atan2(tip.imag, tip.real) if abs(tip) > tiny else 0.0
    aimed = steps * complex(math.cos(theta), -math.sin(theta))  # the tip along +u

    normal = None
    if pole is not None:
        w = pole - root
        w = w - float(w @ u) * u
        wn = math.sqrt(float(w @ w))
        if wn > tiny:
            # ``v = normal x u`` is the pole's direction times ``side``; a hinge turning the chain by a
            # positive angle puts the joint behind it on -v, so ``side = -1`` makes such a knee face
            # the pole.
            normal = _cross(u, w / wn) * _pole_side(start, limits.frames[0][:, 0], beta, alpha0, low, high, aimed)
    if normal is None:
        axis = limits.frames[0][:, 0]
        normal = axis - float(axis @ u) * u
        nn = math.sqrt(float(normal @ normal))
        if nn <= 1e-6:
            return None
        normal = normal / nn
    v = _cross(normal, u)
    d0 = aimed[0].real / L[0] * u + aimed[0].imag / L[0] * v
    d0 = d0 / math.sqrt(float(d0 @ d0))
    first = limits.limits[0]
    if isinstance(first, ConeLimit):
        frame = limits.limit_frame(limits.base_frame, 0)
        if first.excess(frame.T @ d0) > LIMIT_SLACK:
            return None
    frames = np.empty((len(L), 3, 3))
    frames[0] = np.column_stack([normal, d0, _cross(normal, d0)])
    for k in range(1, len(L)):
        frames[k] = frames[k - 1] @ limits.rest_offsets[k] @ turn_x(float(alpha[k - 1]))
    joints = np.vstack([root, root + np.cumsum(np.array(L)[:, None] * frames[:, :, 1], axis=0)])
    return PlanarPose(joints, frames, math.dist(joints[-1], target), matched)


def _pole_side(start: np.ndarray, axis: np.ndarray, beta: np.ndarray, alpha0: np.ndarray, low: np.ndarray,
               high: np.ndarray, aimed: np.ndarray) -> float:
    """+1 or -1: the sign of the plane's normal relative to ``u x pole``.

    Fixed by the pose without IK, so a pole never mirrors the chain as the target moves. Where that
    pose is bent (mean interior joint off its root-tip line by more than ``BEND_CLEAR`` of the
    chain's length), the roll that turns its mean bend onto the pole, the convention of every chain
    (a pole put on the chain's own bend moves nothing: ``pose.fabrik_chain_add``, the IK/FK snap).
    Else the knee faces the pole: the first hinge whose range (rest offset plus the middle of its
    interval) turns clearly one way, then the first one turned clearly one way in the pose without
    IK; else (straight and symmetric) the solved chain's mean bend. Taking the solved chain's mean bend
    first mirrored an S-shaped leg (knee one way, foot the other) whenever its mean joint crossed the
    root-target line: 180-degree turns.
    """
    root, tip = start[0], start[-1]
    a = tip - root
    an = math.sqrt(float(a @ a))
    lengths = np.linalg.norm(np.diff(start, axis=0), axis=1)
    if an > EPS * float(lengths.sum()):
        a = a / an
        m = start[1:-1].mean(axis=0) - root
        m = m - float(m @ a) * a
        if math.sqrt(float(m @ m)) > BEND_CLEAR * float(lengths.sum()):
            return 1.0 if float(axis @ _cross(a, m)) >= 0.0 else -1.0
    for turns in (beta + 0.5 * (low + high), beta + alpha0):
        for turn in turns:
            if abs(turn) > 1e-3:
                return -1.0 if turn > 0.0 else 1.0
    return 1.0 if float(np.cumsum(aimed.imag)[:-1].mean()) >= 0.0 else -1.0


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.cross`` of two 3-vectors (a fraction of its call cost)."""
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


def _reach(L: list[float], beta: np.ndarray, alpha0: np.ndarray, low: np.ndarray, high: np.ndarray,
           c: np.ndarray, way: np.ndarray) -> np.ndarray:
    """Squared root-to-tip distance at each curl in ``c`` (any shape) along unit hinge direction ``way``."""
    c = np.asarray(c, dtype=float)
    alpha = np.clip(alpha0 + c[..., None] * way, low, high)
    psi = np.concatenate([np.zeros(c.shape + (1,)), np.cumsum(beta + alpha, axis=-1)], axis=-1)
    tip = (np.array(L) * np.exp(1j * psi)).sum(axis=-1)
    return tip.real * tip.real + tip.imag * tip.imag


def curl_way(L: list[float], beta: np.ndarray, alpha0: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Unit direction in hinge angles that shortens the chain fastest from the pose without IK (minus the
    gradient of the squared reach); for a straight chain, every hinge alike toward the side its range
    leans to. The curl moves the hinges along this line (each clamped to its interval)."""
    psi = np.concatenate([[0.0], np.cumsum(beta + alpha0)])
    steps = np.array(L) * np.exp(1j * psi)
    tip = steps.sum()
    tails = np.cumsum(steps[::-1])[::-1][1:]  # bones k..N-1 for hinge k
    # d|tip|^2 / d alpha_k = 2 Re(conj(tip) * i * tails_k)
    gradient = -2.0 * (np.conj(tip) * tails).imag
    norm = math.sqrt(float(gradient @ gradient))
    if norm > 1e-6 * math.fsum(L) ** 2:
        return -gradient / norm
    lean = beta + 0.5 * (low + high)
    sign = -1.0 if float(lean.sum()) < -1e-3 else 1.0
    return np.full(len(beta), sign / math.sqrt(len(beta)))


def _curl(L: list[float], beta: np.ndarray, alpha0: np.ndarray, low: np.ndarray, high: np.ndarray,
          r: float) -> tuple[float, np.ndarray, bool]:
    """The curl (see the module), its direction and whether it matches the distance ``r``; when no curl
    does, the one that brings the tip's distance nearest ``r`` (farthest out for a target beyond reach)."""
    scale = math.fsum(L) ** 2
    way = curl_way(L, beta, alpha0, low, high)

    # One curl in plain floats: the root search calls it 10-30 times, where numpy's call cost dominates.
    bs, a0, lo, hi, w = beta.tolist(), alpha0.tolist(), low.tolist(), high.tolist(), way.tolist()
    cos, sin = math.cos, math.sin
    r2 = r * r

    def f(c: float) -> float:
        x, y, psi = L[0], 0.0, 0.0
        for k in range(len(bs)):
            psi += bs[k] + min(max(a0[k] + c * w[k], lo[k]), hi[k])
            x += L[k + 1] * cos(psi)
            y += L[k + 1] * sin(psi)
        return x * x + y * y - r2

    f0 = f(0.0)
    small = 1e-9 * scale  # the tip within ~1e-9 of the chain's length: already there
    if abs(f0) <= small:
        return 0.0, way, True
    # Curls beyond these change nothing: every hinge is at an end.
    with np.errstate(divide="ignore", invalid="ignore"):
        to_high = np.where(way != 0.0, (high - alpha0) / way, 0.0)
        to_low = np.where(way != 0.0, (low - alpha0) / way, 0.0)
    ends = (min(0.0, float(np.minimum(to_high, to_low).min())), max(0.0, float(np.maximum(to_high, to_low).max())))
    # + shortens: toward a nearer target first.
    sides = (1, 0) if f0 > 0.0 else (0, 1)
    grids = []
    for side in sides:
        extent = ends[side]
        if extent == 0.0:
            continue
        count = max(8, math.ceil(abs(extent) / GRID_STEP))
        grid = np.linspace(0.0, extent, count + 1)
        values = _reach(L, beta, alpha0, low, high, grid, way) - r * r
        crossed = np.flatnonzero((values > 0.0) != (f0 > 0.0))
        if len(crossed):
            j = int(crossed[0])
            return _root(f, float(grid[j - 1]), float(values[j - 1]), float(grid[j]), float(values[j])), way, True
        grids.append((grid, values))
    if not grids:
        return 0.0, way, False
    # No curl matches: the one nearest the distance (the grid's best, refined on its two cells).
    grid, values = min(grids, key=lambda gv: float(np.abs(gv[1]).min()))
    j = int(np.argmin(np.abs(values)))
    left, right = sorted((float(grid[max(j - 1, 0)]), float(grid[min(j + 1, len(grid) - 1)])))
    return _golden_min(lambda c: abs(f(c)), left, right), way, False


def _root(f: Callable[[float], float], a: float, fa: float, b: float, fb: float) -> float:
    """A root of ``f`` between ``a`` and ``b`` (``fa``, ``fb`` of opposite signs): the Illinois variant of
    regula falsi, to rounding."""
    if fa == 0.0:
        return a
    if fb == 0.0:
        return b
    side = 0
    for _ in range(200):
        c = (a * fb - b * fa) / (fb - fa)
        if not (min(a, b) < c < max(a, b)):
            c = 0.5 * (a + b)
        fc = f(c)
        if fc == 0.0 or abs(b - a) <= 4e-16 * max(1.0, abs(c)):
            return c
        if (fc > 0.0) == (fb > 0.0):
            b, fb = c, fc
            if side == 1:
                fa *= 0.5
            side = 1
        else:
            a, fa = c, fc
            if side == -1:
                fb *= 0.5
            side = -1
    return c


def _golden_min(g: Callable[[float], float], a: float, b: float) -> float:
    """Where ``g`` is least on ``[a, b]`` (taken as single-dipped), by golden-section search."""
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    x1, x2 = b - ratio * (b - a), a + ratio * (b - a)
    g1, g2 = g(x1), g(x2)
    while b - a > 1e-12 * max(1.0, abs(a)):
        if g1 <= g2:
            b, x2, g2 = x2, x1, g1
            x1 = b - ratio * (b - a)
            g1 = g(x1)
        else:
            a, x1, g1 = x1, x2, g2
            x2 = a + ratio * (b - a)
            g2 = g(x2)
    return 0.5 * (a + b)
