"""Set-up shared by the single-chain and batched FABRIK loops, vectorised over chains.

Both loops call :func:`prepare`, so that what is decided before iterating (which targets are out of
reach, and the curled start of every reachable chain: :mod:`.start`) is decided identically.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .start import curled_start
from .start_batch import curled_starts
from .switches import CURL_IN_NUMPY

# Relative size below which a distance or offset counts as zero.
EPS = 1e-9


@dataclass(eq=False)
class Prepared:
    """Start state for ``C`` chains of ``N`` bones.

    Attributes
    ----------
    joints : ndarray, shape (C, N+1, 3)
        Start pose: the curled start (:mod:`.start`) of every reachable chain of two bones or more, the
        given pose otherwise.
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
            extend: bool = True) -> Prepared:
    """Build the start state; ``joints (C, N+1, 3)``, ``targets (C, 3)``, ``poles (C, 3)`` or None.
    ``extend``: past the curl's peak, straighten (:func:`.start.extend`); False for limited chains, whose
    limited passes start from where the curl stops."""
    totals = lengths.sum(axis=1)
    root = joints[:, 0]
    rel = targets - root
    dist = norms(rel)
    unreachable = dist >= totals
    if lengths.shape[1] >= 2:
        joints = _curl(joints, targets, poles, lengths, ~unreachable, extend)
    return Prepared(joints, lengths, totals, unreachable)


def _curl(joints: np.ndarray, targets: np.ndarray, poles: np.ndarray | None, lengths: np.ndarray,
          candidates: np.ndarray, extend: bool = True) -> np.ndarray:
    """The start pose of every reachable chain (:mod:`.start`; a new array): chain by chain in plain
    floats for a few chains, in numpy across chains for many."""
    out = joints.copy()
    rel = targets - joints[:, 0]
    rows = np.flatnonzero(candidates & (norms(rel) > EPS * lengths.sum(axis=1)))
    if len(rows) >= CURL_IN_NUMPY:
        out[rows] = curled_starts(joints[rows], targets[rows], None if poles is None else poles[rows], lengths[rows],
                                  extend)
        return out
    for c in rows:
        xs, ys, zs = curled_start(joints[c, :, 0].tolist(), joints[c, :, 1].tolist(), joints[c, :, 2].tolist(),
                                  lengths[c].tolist(), targets[c].tolist(),
                                  None if poles is None else poles[c].tolist(), extend)
        out[c] = np.array([xs, ys, zs]).T
    return out


def straight_toward(root: np.ndarray, target: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Joints ``(N+1, 3)`` of a chain laid straight from ``root`` toward ``target`` (which is not at root)."""
    u = (target - root) / np.linalg.norm(target - root)
    return np.vstack([root, root + np.cumsum(lengths)[:, None] * u])
