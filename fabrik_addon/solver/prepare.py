"""Set-up shared by the single-chain and batched FABRIK loops, vectorised over chains.

Both loops call :func:`prepare` so that the cases decided before iterating (unreachable targets,
collinear starts) are decided identically.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .rotations import matrices_from_two_vectors, perpendicular, turn_floats

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


def aim_at_targets(joints: np.ndarray, targets: np.ndarray, lengths: np.ndarray, skip: np.ndarray) -> np.ndarray:
    """Turn each bent chain rigidly about its root so its root-to-tip line points at its target.

    ``joints (C, N+1, 3)``, ``targets (C, 3)``, ``lengths (C, N)``; chains flagged in ``skip`` (C,) are
    left alone. FABRIK moves a joint only along the line through its old position and its neighbour's
    new one, so a chain whose plane holds the target stays in that plane: aimed first, a planar chain
    solves within its start pose's bend plane turned by the least rotation (as the two-bone solver's
    bend), and its bones keep bending about their hinge axes. A straight chain is left as it is (it
    bends in the plane of its axis and the target) and so is one folded onto its root. Returns a new
    array when any chain turns.
    """
    root = joints[:, 0]
    axis = joints[:, -1] - root
    goal = targets - root
    axis_len, goal_len = norms(axis), norms(goal)
    totals = lengths.sum(axis=1)
    turn = ~skip & (axis_len > EPS * totals) & (goal_len > EPS * totals) & (axis_len < totals * (1.0 - EPS))
    if not turn.any():
        return joints
    rows = np.flatnonzero(turn)
    rotation = matrices_from_two_vectors(axis[rows] / axis_len[rows, None], goal[rows] / goal_len[rows, None])
    joints = joints.copy()
    rel = joints[rows] - root[rows, None]
    joints[rows] = root[rows, None] + np.einsum("cij,ckj->cki", rotation, rel)
    return joints


def aim_points(xs: list[float], ys: list[float], zs: list[float], target: tuple[float, float, float],
               total: float) -> None:
    """:func:`aim_at_targets` for one chain held as coordinate lists (changed in place)."""
    rx, ry, rz = xs[0], ys[0], zs[0]
    ax, ay, az = xs[-1] - rx, ys[-1] - ry, zs[-1] - rz
    gx, gy, gz = target[0] - rx, target[1] - ry, target[2] - rz
    a = math.sqrt(ax * ax + ay * ay + az * az)
    g = math.sqrt(gx * gx + gy * gy + gz * gz)
    if not (a > EPS * total and g > EPS * total and a < total * (1.0 - EPS)):
        return
    ax, ay, az, gx, gy, gz = ax / a, ay / a, az / a, gx / g, gy / g, gz / g
    for i in range(1, len(xs)):
        vx, vy, vz = turn_floats(ax, ay, az, gx, gy, gz, xs[i] - rx, ys[i] - ry, zs[i] - rz)
        xs[i], ys[i], zs[i] = rx + vx, ry + vy, rz + vz


def straight_toward(root: np.ndarray, target: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Joints ``(N+1, 3)`` of a chain laid straight from ``root`` toward ``target`` (which is not at root)."""
    u = (target - root) / np.linalg.norm(target - root)
    return np.vstack([root, root + np.cumsum(lengths)[:, None] * u])
