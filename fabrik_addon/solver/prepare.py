"""Set-up shared by the single-chain and batched FABRIK loops, vectorised over chains.

Both loops call :func:`prepare` so that the cases decided before iterating (unreachable targets,
collinear starts) are decided identically.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .rotations import perpendicular
from .start import curled_start, curled_starts

# Relative size below which a distance or offset counts as zero.
EPS = 1e-9
# From this many chains on, the curled starts are built in numpy across chains.
CURL_IN_NUMPY = 8
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


def prepare(joints: np.ndarray, targets: np.ndarray, poles: np.ndarray | None, lengths: np.ndarray) -> Prepared:
    """Build the start state; ``joints (C, N+1, 3)``, ``targets (C, 3)``, ``poles (C, 3)`` or None."""
    totals = lengths.sum(axis=1)
    root = joints[:, 0]
    rel = targets - root
    dist = norms(rel)
    unreachable = dist >= totals
    if lengths.shape[1] >= 2:
        joints = _curl(joints, targets, poles, lengths, ~unreachable)
    return Prepared(joints, lengths, totals, unreachable)


def _curl(joints: np.ndarray, targets: np.ndarray, poles: np.ndarray | None, lengths: np.ndarray,
          candidates: np.ndarray) -> np.ndarray:
    """The start pose of every reachable chain (:mod:`.start`; a new array): chain by chain in plain
    floats for a few chains, in numpy across chains for many."""
    out = joints.copy()
    rel = targets - joints[:, 0]
    rows = np.flatnonzero(candidates & (norms(rel) > EPS * lengths.sum(axis=1)))
    if len(rows) >= CURL_IN_NUMPY:
        out[rows] = curled_starts(joints[rows], targets[rows], None if poles is None else poles[rows], lengths[rows])
        return out
    for c in rows:
        xs, ys, zs = curled_start(joints[c, :, 0].tolist(), joints[c, :, 1].tolist(), joints[c, :, 2].tolist(),
                                  lengths[c].tolist(), targets[c].tolist(),
                                  None if poles is None else poles[c].tolist())
        out[c] = np.array([xs, ys, zs]).T
    return out


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


def straight_toward(root: np.ndarray, target: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Joints ``(N+1, 3)`` of a chain laid straight from ``root`` toward ``target`` (which is not at root)."""
    u = (target - root) / np.linalg.norm(target - root)
    return np.vstack([root, root + np.cumsum(lengths)[:, None] * u])
