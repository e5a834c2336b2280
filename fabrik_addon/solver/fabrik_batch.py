"""FABRIK across many chains of equal bone count at once: the numpy twin of :mod:`.fabrik`.

One numpy call per step for all chains. :func:`iterate_chains` mirrors :func:`.fabrik.iterate`
operation for operation (``tests/solver/test_batch.py`` holds every chain's result equal to its
single-chain solve), and below :data:`.switches.SCALAR_BELOW` chains :func:`solve_chains` runs the
float loop chain by chain instead. Arrays are laid out joint-major, ``(N+1, 3, C)``, so every step
works on contiguous rows of C values.
"""

from __future__ import annotations

import math

import numpy as np

from .checks import bone_lengths, check_batch_joints, check_points
from .fabrik import (
    DEFAULT_MAX_ITERATIONS,
    DEFAULT_MIN_IMPROVEMENT,
    DEFAULT_TOLERANCE,
    SETTLE,
    STALL_PATIENCE,
    check_settings,
    run_fabrik,
)
from .prepare import EPS, prepare
from .result import ChainResults
from .soft import DEFAULT_MAX_STRETCH, DEFAULT_SOFTNESS, check_soft_arrays, ease_targets, settle_chains
from .start import BEYOND_BAND, beyond_reach
from .switches import SCALAR_BELOW


def solve_chains(
    joints: object,
    targets: object,
    *,
    tolerance: object = DEFAULT_TOLERANCE,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    poles: object = None,
    min_improvement: float = DEFAULT_MIN_IMPROVEMENT,
    softness: object = DEFAULT_SOFTNESS,
    use_stretch: object = False,
    max_stretch: object = DEFAULT_MAX_STRETCH,
) -> ChainResults:
    """Solve ``C`` chains of ``N`` bones with FABRIK, vectorised across chains.

    Parameters
    ----------
    joints : array_like, shape (C, N+1, 3)
        Start poses; never mutated.
    targets : array_like, shape (C, 3)
    tolerance, max_iterations, min_improvement
        As in :func:`solve_chain`, applied to each chain on its own; ``tolerance`` may also be an
        array_like of shape (C,), one per chain.
    poles : array_like, shape (C, 3), optional
    softness, use_stretch, max_stretch : number/bool or array_like, shape (C,)
        Soft IK and stretch as in :func:`solve_chain`, for all chains or per chain.

    Returns
    -------
    ChainResults
        Per-chain arrays; ``results[i]`` equals ``solve_chain(joints[i], targets[i], ...)``.
    """
    start = check_batch_joints(joints)
    count, n1, _ = start.shape
    tgt = check_points(targets, (count, 3), "targets")
    pole = None if poles is None else check_points(poles, (count, 3), "poles")
    tolerance = _tolerances(tolerance, count)
    check_settings(float(np.min(tolerance)) if count else 0.0, max_iterations, min_improvement)
    lengths = bone_lengths(start)
    given = tgt
    if isinstance(softness, float | int) and softness == 0 and use_stretch is False and \
            isinstance(max_stretch, float | int) and math.isfinite(max_stretch) and max_stretch >= 1.0:
        return _solve(start, tgt, pole, lengths, tolerance, max_iterations, min_improvement)
    soft, stretch, cap = check_soft_arrays(softness, use_stretch, max_stretch, count)
    if not (soft.any() or stretch.any()):
        return _solve(start, tgt, pole, lengths, tolerance, max_iterations, min_improvement)
    tgt, factor, eased_in = ease_targets(start[:, 0], tgt, lengths.sum(axis=1), soft, stretch, cap)
    grown = factor != 1.0
    if grown.any():
        start = start.copy()
        start[grown] = start[grown, :1] + (start[grown] - start[grown, :1]) * factor[grown, None, None]
        lengths = bone_lengths(start)
    results = _solve(start, tgt, pole, lengths, tolerance, max_iterations, min_improvement)
    out = results.joints
    if eased_in.any():
        out = out.copy()
        out[eased_in] = settle_chains(out[eased_in], tgt[eased_in])
    error = np.linalg.norm(out[:, -1] - given, axis=1)
    reached = error <= tolerance
    converged = reached | (True if results.converged is None else results.converged)
    return ChainResults(out, error, results.iterations, reached, factor, converged)


def _tolerances(tolerance: object, count: int) -> np.ndarray:
    """``tolerance`` (a number, or one per chain) as a (count,) array."""
    tol = np.asarray(tolerance, dtype=np.float64)
    if tol.ndim == 0:
        return np.full(count, float(tol))
    if tol.shape != (count,):
        raise ValueError(f"tolerance must be a number or of shape ({count},), got shape {tol.shape}")
    return tol


def _solve(start: np.ndarray, tgt: np.ndarray, pole: np.ndarray | None, lengths: np.ndarray, tolerance: np.ndarray,
           max_iterations: int, min_improvement: float) -> ChainResults:
    count, n1, _ = start.shape
    prep = prepare(start, tgt, pole, lengths)
    if count < SCALAR_BELOW + n1 - 1:
        # Below this many chains the plain-float loop, one chain at a time, is faster (.switches).
        dirs = prep.dirs
        single = [run_fabrik(prep.joints[c], tgt[c], None if pole is None else pole[c], dirs[c], lengths[c],
                             bool(prep.unreachable[c]), float(tolerance[c]), int(max_iterations), min_improvement,
                             None)
                  for c in range(count)]
        error = np.array([s[1] for s in single])
        used = np.array([s[2] for s in single])
        return ChainResults(np.array([s[0] for s in single]), error, used, error <= tolerance,
                            converged=prep.unreachable | (error <= tolerance) | (used < max_iterations))
    out = prep.joints.copy()
    roots = prep.joints[:, 0]
    dist = np.linalg.norm(tgt - roots, axis=1)
    error = np.linalg.norm(prep.joints[:, -1] - tgt, axis=1)
    iterations = np.zeros(count, dtype=np.int64)

    far = prep.unreachable
    if far.any():
        u = (tgt[far] - roots[far]) / dist[far, None]
        out[far, 1:] = roots[far, None] + np.cumsum(lengths[far], axis=1)[:, :, None] * u[:, None]
        error[far] = dist[far] - prep.totals[far]
        for c in np.flatnonzero(far & (dist < (1.0 + BEYOND_BAND) * prep.totals)):  # just beyond: start.beyond_reach
            bent = beyond_reach(start[c, :, 0].tolist(), start[c, :, 1].tolist(), start[c, :, 2].tolist(),
                                lengths[c].tolist(), tgt[c].tolist(), None if pole is None else pole[c].tolist())
            if bent is not None:
                out[c] = np.array(bent).T
                error[c] = math.dist(out[c, -1], tgt[c])
    stop = np.minimum(tolerance, SETTLE * prep.totals)  # as in .fabrik.iterate
    settled = far | (error <= stop)  # the start (.start.curled_start) already faces the pole
    todo = np.flatnonzero(~settled)
    if len(todo):
        best, best_error, used = iterate_chains(
            prep.joints[todo].transpose(1, 2, 0).copy(),
            tgt[todo].T.copy(),
            None if pole is None else pole[todo].T.copy(),
            lengths[todo].T.copy(),
            prep.dirs[todo].transpose(1, 2, 0).copy(),
            EPS * prep.totals[todo],
            error[todo],
            stop[todo],
            int(max_iterations),
            min_improvement,
        )
        out[todo] = best.transpose(2, 0, 1)
        error[todo] = best_error
        iterations[todo] = used
    reached = error <= tolerance
    return ChainResults(out, error, iterations, reached, converged=far | reached | (iterations < max_iterations))


def iterate_chains(X: np.ndarray, tgt: np.ndarray, pole: np.ndarray | None, L: np.ndarray, U: np.ndarray,
                   tiny: np.ndarray, error: np.ndarray, tolerance: np.ndarray, max_iterations: int,
                   min_improvement: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`.fabrik.iterate` (without limits) for chains ``X (N+1, 3, A)``, each until it stops: the
    same passes, stopping rules and best-pose bookkeeping; returns best joints, errors and iterations."""
    n = L.shape[0]
    count = X.shape[2]
    out = X.copy()
    out_error = np.empty(count)
    out_iterations = np.zeros(count, dtype=np.int64)
    ids = np.arange(count)  # which output column each working column belongs to
    root = X[0].copy()
    best = X.copy()
    best_error = np.full(count, np.inf)
    previous = error.copy()
    stalled = np.zeros(count, dtype=np.int64)
    d, dist = np.empty_like(X[0]), np.empty(count)
    back, tiny_max = -U, float(tiny.max())
    alive = np.ones(count, dtype=bool)  # columns whose chain has not stopped yet
    for iteration in range(1, max_iterations + 1):
        X[n] = tgt
        for i in range(n - 1, -1, -1):
            _place(X[i], X[i + 1], back[i], L[i], tiny, tiny_max, d, dist)
        X[0] = root
        for i in range(n):
            _place(X[i + 1], X[i], U[i], L[i], tiny, tiny_max, d, dist)
        if pole is not None:
            _turn_toward_pole(X, pole, tiny, tgt)
        np.subtract(X[n], tgt, out=d)
        err = np.sqrt(np.einsum("ij,ij->j", d, d))
        better = err < best_error
        if better.all():
            np.copyto(best, X)
        else:
            np.copyto(best, X, where=better)
        best_error = np.where(better, err, best_error)
        stalled = np.where(previous - err < min_improvement * previous, stalled + 1, 0)
        done = alive & ((err <= tolerance) | (stalled >= STALL_PATIENCE))
        previous = err
        if iteration == max_iterations:
            done = alive
        if done.any():
            finished = ids[done]
            out[:, :, finished] = best[:, :, done]
            out_error[finished] = best_error[done]
            out_iterations[finished] = iteration
            alive = alive & ~done
            if not alive.any():
                break
            # Finished chains ride along (their results are recorded) until a quarter of the columns
            # are finished: dropping them costs a copy of every array, ~0.5 ms at 1000 chains.
            if alive.mean() < 0.75:
                keep = alive
                ids, best_error, previous, stalled, tiny, alive, tolerance = (
                    a[keep] for a in (ids, best_error, previous, stalled, tiny, alive, tolerance))
                X, best, U, tgt, root, L = (_columns(a, keep) for a in (X, best, U, tgt, root, L))
                pole = None if pole is None else _columns(pole, keep)
                d, dist = np.empty_like(X[0]), np.empty(len(ids))
                back, tiny_max = -U, float(tiny.max())
    return out, out_error, out_iterations


def _columns(a: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The chains (last axis) in ``keep``, C-contiguous: masking the last axis alone returns a strided
    array, and every later step on it ran about three times slower."""
    return np.ascontiguousarray(a[..., keep])


def _place(moving: np.ndarray, anchor: np.ndarray, fallback: np.ndarray, length: np.ndarray,
           tiny: np.ndarray, tiny_max: float, d: np.ndarray, dist: np.ndarray) -> None:
    """Put ``moving`` at ``length`` from ``anchor`` on the line through its old position (in place).

    Where the two joints coincide, use ``fallback`` (the start pose's bone direction, pointing from
    anchor to moving). ``d`` and ``dist`` are scratch buffers; seven numpy calls in the usual case.
    """
    np.subtract(moving, anchor, out=d)
    np.einsum("ij,ij->j", d, d, out=dist)
    np.sqrt(dist, out=dist)
    stuck = None
    if dist.min() <= tiny_max:
        stuck = dist <= tiny
        dist[stuck] = 1.0
    np.divide(length, dist, out=dist)
    np.multiply(d, dist, out=d)
    np.add(anchor, d, out=moving)
    if stuck is not None and stuck.any():
        moving[:, stuck] = anchor[:, stuck] + fallback[:, stuck] * length[stuck]


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->j", a, b)


def _turn_toward_pole(X: np.ndarray, pole: np.ndarray, tiny: np.ndarray, tgt: np.ndarray) -> None:
    """Batched :func:`.fabrik.turn_toward_pole` (about the root-target line): the rigid roll of each
    chain's bend toward its pole."""
    n = X.shape[0] - 1
    if n < 2:
        return
    a = X[0]
    k = tgt - a
    kn = np.sqrt(_dot(k, k))
    near = kn <= tiny
    if near.any():  # a target at the root: about the root-tip line
        k = np.where(near, X[n] - a, k)
        kn = np.sqrt(_dot(k, k))
    k = k / np.where(kn > tiny, kn, 1.0)
    m = X[1:n].sum(axis=0) / (n - 1) - a
    m = m - _dot(m, k) * k
    w = pole - a
    w = w - _dot(w, k) * k
    mn = np.sqrt(_dot(m, m))
    wn = np.sqrt(_dot(w, w))
    ok = (kn > tiny) & (mn > tiny) & (wn > tiny)
    norm = np.where(ok, mn * wn, 1.0)
    c = _dot(m, w) / norm
    s = _dot(k, np.cross(m, w, axis=0)) / norm
    for i in range(1, n + 1):
        if i == n and near.all():
            break
        v = X[i] - a
        t = _dot(v, k) * (1.0 - c)
        rolled = a + v * c + np.cross(k, v, axis=0) * s + k * t
        X[i] = np.where(ok & (~near if i == n else True), rolled, X[i])
