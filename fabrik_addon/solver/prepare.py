"""Set-up shared by the single-chain and batched FABRIK loops, vectorised over chains.

Both loops call :func:`prepare` so that the cases decided before iterating (unreachable targets,
collinear starts) are decided identically.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .rotations import perpendicular

# Relative size below which a distance or offset counts as zero.
EPS = 1e-9
# Deflection (radians) of the first bone when a straight chain must be given a bend to start from.
PRE_BEND = 0.25


@dataclass(eq=False)
class Prepared:
    """Start state for ``C`` chains of ``N`` bones.

    Attributes
    ----------
    joints : ndarray, shape (C, N+1, 3)
        Start pose (a copy), with a small bend added where chain and target were collinear.
    lengths : ndarray, shape (C, N)
    totals : ndarray, shape (C,)
    unreachable : ndarray of bool, shape (C,)
        Target at or beyond the chain's full length.
    """

    joints: np.ndarray
    lengths: np.ndarray
    totals: np.ndarray
    unreachable: np.ndarray

    @property
    def dirs(self) -> np.ndarray:
        """Unit bone directions ``(C, N, 3)`` of the start pose: the fallback when two joints meet."""
        return np.diff(self.joints, axis=1) / self.lengths[:, :, None]


def norms(v: np.ndarray) -> np.ndarray:
    """Euclidean norms along the last axis (einsum: a fraction of np.linalg.norm's call cost)."""
    return np.sqrt(np.einsum("...i,...i->...", v, v))


def prepare(joints: np.ndarray, targets: np.ndarray, poles: np.ndarray | None, lengths: np.ndarray,
            aim: bool = True) -> Prepared:
    """Build the start state; ``joints (C, N+1, 3)``, ``targets (C, 3)``, ``poles (C, 3)`` or None.

    ``aim``: turn bent chains to point at their targets first (:func:`aim_at_targets`).
    """
    totals = lengths.sum(axis=1)
    root = joints[:, 0]
    rel = targets - root
    dist = norms(rel)
    unreachable = dist >= totals
    if aim and lengths.shape[1] >= 2:
        joints = aim_at_targets(joints, targets, lengths, unreachable)
    if lengths.shape[1] >= 2:
        joints = _bend_collinear(joints, rel, dist, poles, lengths, totals, ~unreachable)
    return Prepared(joints, lengths, totals, unreachable)


def _bend_collinear(joints: np.ndarray, rel: np.ndarray, dist: np.ndarray, poles: np.ndarray | None,
                    lengths: np.ndarray, totals: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Give a small bend to straight chains whose target lies on their axis (a new array if any).

    FABRIK only ever moves joints along lines through their old positions, so a chain and target on
    one line would stay on it and could not fold to a nearer target. The bend goes toward the pole
    when there is one off the axis, else along a deterministic perpendicular.
    """
    root = joints[:, 0]
    axis = joints[:, -1] - root
    axis_len = norms(axis)
    straight = candidates & (axis_len >= totals * (1.0 - EPS))
    if not straight.any():  # the common case: nothing to check further
        return joints
    u = axis / np.maximum(axis_len, EPS)[:, None]
    off_axis = norms(rel - (rel * u).sum(1)[:, None] * u)
    need = straight & (off_axis <= EPS * totals)
    if not need.any():
        return joints
    joints = joints.copy()
    n = lengths.shape[1]
    betas = PRE_BEND * (1.0 - 2.0 * np.arange(n) / (n - 1))
    for c in np.flatnonzero(need):
        side = None
        if poles is not None:
            w = poles[c] - root[c]
            w_perp = w - (w @ u[c]) * u[c]
            if np.linalg.norm(w_perp) > EPS * totals[c]:
                side = w_perp / np.linalg.norm(w_perp)
        if side is None:
            side = perpendicular(u[c])
        steps = lengths[c][:, None] * (np.cos(betas)[:, None] * u[c] + np.sin(betas)[:, None] * side)
        joints[c, 1:] = root[c] + np.cumsum(steps, axis=0)
    return joints


# Bend (mean interior joint off the root-tip line, relative to the chain's length) from which a chain
# is tilted all the way into the target's plane; less bent chains tilt in proportion (a straight one
# has no plane to tilt).
AIM_BEND = 0.01


def aim_at_targets(joints: np.ndarray, targets: np.ndarray, lengths: np.ndarray, skip: np.ndarray) -> np.ndarray:
    """Tilt each bent chain rigidly about its root, by the least rotation, until its bend plane holds
    its target.

    ``joints (C, N+1, 3)``, ``targets (C, 3)``, ``lengths (C, N)``; chains flagged in ``skip`` (C,) are
    left alone. The bend plane is spanned by the root-tip line and the mean bend (the mean interior
    joint across that line). FABRIK moves a joint only along the line through its old position and its
    neighbour's new one, so a chain whose plane holds the target stays in that plane: a planar chain
    then solves planar, and its bones keep bending about their hinge axes. The least tilt keeps the
    chain's shape where it was relative to the target (turning its tip onto the target's line instead
    would leave a nearly straight chain collinear with the target, where FABRIK crawls). Chains bent
    less than :data:`AIM_BEND` tilt in proportion; a target on the plane's normal tilts nothing.
    Returns a new array when any chain turns.
    """
    n = joints.shape[1] - 1
    root = joints[:, 0]
    axis = joints[:, -1] - root
    totals = lengths.sum(axis=1)
    axis_len = norms(axis)
    goal = targets - root
    goal_len = norms(goal)
    ok = ~skip & (axis_len > EPS * totals) & (goal_len > EPS * totals)
    if not ok.any():
        return joints
    k = axis / np.where(ok, axis_len, 1.0)[:, None]
    bend = joints[:, 1:n].mean(axis=1) - root
    bend = bend - (bend * k).sum(axis=1)[:, None] * k
    bend_len = norms(bend)
    normal = np.cross(k, bend) / np.where(bend_len > 0.0, bend_len, 1.0)[:, None]
    t = goal / np.where(ok, goal_len, 1.0)[:, None]
    c = (normal * t).sum(axis=1)
    pivot = np.cross(t, normal) * np.sign(c)[:, None]  # turning the normal away from the target
    pivot_len = norms(pivot)
    ok &= (bend_len > EPS * totals) & (pivot_len > EPS) & (np.abs(c) > 0.0)
    if not ok.any():
        return joints
    rows = np.flatnonzero(ok)
    u = pivot[rows] / pivot_len[rows, None]
    angle = np.arcsin(np.clip(np.abs(c[rows]), 0.0, 1.0)) * np.minimum(1.0, bend_len[rows] / (AIM_BEND * totals[rows]))
    cos, sin = np.cos(angle)[:, None, None], np.sin(angle)[:, None, None]
    v = joints[rows] - root[rows, None]
    along = (v * u[:, None]).sum(axis=2)[:, :, None] * u[:, None]
    joints = joints.copy()
    joints[rows] = root[rows, None] + v * cos + np.cross(u[:, None], v) * sin + along * (1.0 - cos)
    return joints


def aim_points(xs: list[float], ys: list[float], zs: list[float], target: tuple[float, float, float],
               total: float) -> None:
    """:func:`aim_at_targets` for one chain held as coordinate lists (changed in place), in floats."""
    n = len(xs) - 1
    rx, ry, rz = xs[0], ys[0], zs[0]
    kx, ky, kz = xs[n] - rx, ys[n] - ry, zs[n] - rz
    gx, gy, gz = target[0] - rx, target[1] - ry, target[2] - rz
    k = math.sqrt(kx * kx + ky * ky + kz * kz)
    g = math.sqrt(gx * gx + gy * gy + gz * gz)
    if not (k > EPS * total and g > EPS * total) or n < 2:
        return
    kx, ky, kz, gx, gy, gz = kx / k, ky / k, kz / k, gx / g, gy / g, gz / g
    mx = sum(xs[1:n]) / (n - 1) - rx
    my = sum(ys[1:n]) / (n - 1) - ry
    mz = sum(zs[1:n]) / (n - 1) - rz
    t = mx * kx + my * ky + mz * kz
    mx, my, mz = mx - t * kx, my - t * ky, mz - t * kz
    m = math.sqrt(mx * mx + my * my + mz * mz)
    if not m > EPS * total:
        return
    nx, ny, nz = (ky * mz - kz * my) / m, (kz * mx - kx * mz) / m, (kx * my - ky * mx) / m
    c = nx * gx + ny * gy + nz * gz
    sign = 1.0 if c > 0.0 else -1.0
    ux, uy, uz = (gy * nz - gz * ny) * sign, (gz * nx - gx * nz) * sign, (gx * ny - gy * nx) * sign
    u = math.sqrt(ux * ux + uy * uy + uz * uz)
    if not (u > EPS and c != 0.0):
        return
    ux, uy, uz = ux / u, uy / u, uz / u
    angle = math.asin(min(1.0, abs(c))) * min(1.0, m / (AIM_BEND * total))
    cos, sin = math.cos(angle), math.sin(angle)
    for i in range(1, n + 1):
        vx, vy, vz = xs[i] - rx, ys[i] - ry, zs[i] - rz
        t = (vx * ux + vy * uy + vz * uz) * (1.0 - cos)
        xs[i] = rx + vx * cos + (uy * vz - uz * vy) * sin + ux * t
        ys[i] = ry + vy * cos + (uz * vx - ux * vz) * sin + uy * t
        zs[i] = rz + vz * cos + (ux * vy - uy * vx) * sin + uz * t


def straight_toward(root: np.ndarray, target: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Joints ``(N+1, 3)`` of a chain laid straight from ``root`` toward ``target`` (which is not at root)."""
    u = (target - root) / np.linalg.norm(target - root)
    return np.vstack([root, root + np.cumsum(lengths)[:, None] * u])
