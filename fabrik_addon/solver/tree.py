"""FABRIK for trees of joints with several end effectors (chains that share bones).

Tip-to-root, every joint that branches (a *sub-base*) takes the centroid of the positions its
branches propose for it, weighted by the effector weights below each branch; root-to-tip then runs
out through every branch (Aristidou and Lasenby's multiple end effector FABRIK). Solving the chains
one after another instead makes them fight over the shared bones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .checks import ZERO_LENGTH, check_finite, check_points
from .fabrik import (
    DEFAULT_MAX_ITERATIONS,
    DEFAULT_MIN_IMPROVEMENT,
    DEFAULT_TOLERANCE,
    STALL_PATIENCE,
    check_settings,
    pad3,
    turn_toward_pole,
)
from .prepare import EPS


@dataclass(frozen=True)
class TreeResult:
    """Outcome of :func:`solve_tree`.

    Attributes
    ----------
    joints : ndarray, shape (J, D)
    errors : ndarray, shape (E,)
        Distance from each effector to its target.
    iterations : int
    reached : ndarray of bool, shape (E,)
        ``errors <= tolerance`` per effector.
    """

    joints: np.ndarray
    errors: np.ndarray
    iterations: int
    reached: np.ndarray


def solve_tree(
    joints: object,
    parents: object,
    effectors: object,
    targets: object,
    *,
    weights: object = None,
    poles: object = None,
    rigid: object = None,
    tolerance: float = DEFAULT_TOLERANCE,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    min_improvement: float = DEFAULT_MIN_IMPROVEMENT,
) -> TreeResult:
    """Solve a tree of joints that reaches for several targets at once.

    Parameters
    ----------
    joints : array_like, shape (J, D)
        Start pose, D = 2 or 3. Never mutated.
    parents : array_like of int, shape (J,)
        Parent joint of each joint; -1 for the one root, and every parent listed before its children.
        Bone lengths are the distances between each joint and its parent.
    effectors : array_like of int, shape (E,)
        Joints that reach for the targets (distinct, not the root).
    targets : array_like, shape (E, D)
    weights : array_like, shape (E,), optional
        Pull of each effector on shared joints, in [0, 1] (default 1). A weight of 0 leaves the other
        effectors solving as if that branch were not there.
    poles : array_like, shape (E, D), optional
        Rows of NaN mean no pole. A pole turns the joints between its effector and the nearest
        sub-base (or the root) toward it.
    rigid : sequence of int, optional
        Joints whose children are points on one rigid body (a bone whose children are offset from its
        tail): those children turn together, keeping their distances to each other, instead of each
        swinging on its own.
    tolerance, max_iterations, min_improvement
        As in :func:`solve_chain`; judged on the largest error of the effectors with weight > 0.

    Returns
    -------
    TreeResult
        The best pose seen when not every weighted effector was reached.
    """
    start = np.array(joints, dtype=np.float64)
    if start.ndim != 2 or start.shape[1] not in (2, 3) or start.shape[0] < 2:
        raise ValueError(f"joints must have shape (J, 2) or (J, 3) with J >= 2, got {start.shape}")
    check_finite(start, "joints")
    count, dim = start.shape
    parent = _check_parents(parents, count)
    effector = np.array(effectors, dtype=np.int64).reshape(-1)
    if len(effector) == 0 or len(set(effector.tolist())) != len(effector):
        raise ValueError("effectors must list one or more distinct joints")
    if effector.min() < 0 or effector.max() >= count or (parent[effector] < 0).any():
        raise ValueError("effectors must be joint indices other than the root")
    tgt = pad3(check_points(targets, (len(effector), dim), "targets"))
    weight = np.ones(len(effector)) if weights is None else np.array(weights, dtype=np.float64).reshape(-1)
    if weight.shape != (len(effector),) or not np.isfinite(weight).all() or (weight < 0).any() or (weight > 1).any():
        raise ValueError(f"weights must be {len(effector)} numbers in [0, 1]")
    pole = None
    if poles is not None:
        pole = np.array(poles, dtype=np.float64)
        if pole.shape != (len(effector), dim):
            raise ValueError(f"poles must have shape {(len(effector), dim)}, got {pole.shape}")
        if np.isinf(pole).any():
            raise ValueError("poles contains infinity (use NaN rows for effectors without a pole)")
        pole = pad3(pole)
    check_settings(tolerance, max_iterations, min_improvement)
    rigid_set = set() if rigid is None else {int(j) for j in np.array(rigid, dtype=np.int64).reshape(-1)}
    if any(not 0 <= j < count for j in rigid_set):
        raise ValueError("rigid must list joint indices")

    pts = pad3(start)
    lengths = np.zeros(count)
    lengths[1:] = np.linalg.norm(pts[1:] - pts[parent[1:]], axis=1)
    if (lengths[1:] <= ZERO_LENGTH * max(float(lengths.max()), 1.0)).any():
        bad = int(np.flatnonzero(lengths[1:] <= ZERO_LENGTH * max(float(lengths.max()), 1.0))[0]) + 1
        raise ValueError(f"joints: the bone ending at joint {bad} has zero length")
    out, errors, iterations = _run(pts, parent, lengths, effector, tgt, weight, pole, rigid_set, tolerance,
                                   int(max_iterations), min_improvement)
    return TreeResult(out[:, :dim], errors, iterations, errors <= tolerance)


def _check_parents(parents: object, count: int) -> np.ndarray:
    parent = np.array(parents, dtype=np.int64).reshape(-1)
    if parent.shape != (count,):
        raise ValueError(f"parents must have one entry per joint ({count}), got {parent.shape[0]}")
    if parent[0] != -1 or (parent[1:] < 0).any():
        raise ValueError("joint 0 must be the only root (parent -1)")
    if (parent[1:] >= np.arange(1, count)).any():
        raise ValueError("every joint's parent must come before it")
    return parent


def _run(pts: np.ndarray, parent: np.ndarray, lengths: np.ndarray, effector: np.ndarray, tgt: np.ndarray,
         weight: np.ndarray, pole: np.ndarray | None, rigid: set[int], tolerance: float, max_iterations: int,
         min_improvement: float) -> tuple[np.ndarray, np.ndarray, int]:
    count = len(pts)
    children: list[list[int]] = [[] for _ in range(count)]
    for j in range(1, count):
        children[int(parent[j])].append(j)
    # Pull of each joint's subtree: the weights of the effectors at or below it.
    pull = np.zeros(count)
    for e, w in zip(effector, weight):
        j = int(e)
        while j >= 0:
            pull[j] += w
            j = int(parent[j])
    active = [bool(p > 0.0) for p in pull]
    target_of = {int(e): (float(t[0]), float(t[1]), float(t[2])) for e, t, w in zip(effector, tgt, weight) if w > 0}
    branches = _pole_branches(parent, children, effector, pole)
    scored = [k for k in range(len(effector)) if weight[k] > 0.0]
    total = float(lengths.sum())
    tiny = EPS * total
    L = lengths.tolist()
    par = parent.tolist()
    kids = [[c for c in children[j] if active[c]] for j in range(count)]
    share = pull.tolist()
    # An effector's own weight: its subtree's pull less its children's.
    own = [share[j] - sum(share[c] for c in children[j]) for j in range(count)]

    # Rigid bodies: children offsets in the start pose, weighted by their subtree's pull (a little for
    # children that pull nothing, so they still count).
    bodies = {p: (children[p], pts[children[p]] - pts[p], np.maximum(pull[children[p]], 1e-6))
              for p in rigid if len(children[p]) >= 2}
    xs, ys, zs = pts[:, 0].tolist(), pts[:, 1].tolist(), pts[:, 2].tolist()
    start_dirs = [(0.0, 0.0, 0.0)] + [tuple((pts[j] - pts[par[j]]) / L[j]) for j in range(1, count)]
    rx, ry, rz = xs[0], ys[0], zs[0]

    def errors_now() -> np.ndarray:
        return np.array([math.dist((xs[e], ys[e], zs[e]), tgt[k]) for k, e in enumerate(effector)])

    errors = errors_now()
    error = float(errors[scored].max()) if scored else 0.0
    if error <= tolerance and pole is None:
        return pts, errors, 0
    best: tuple | None = None
    best_error = math.inf
    previous = error
    stalled = 0
    iterations = 0
    for iterations in range(1, max_iterations + 1):  # noqa: B007 (the count is returned)
        # Tip to root, children before parents: effectors on their targets, every other pulling
        # joint at the weighted centroid of the positions its pulling children propose.
        for j in range(count - 1, 0, -1):
            if not active[j]:
                continue
            target = target_of.get(j)
            if target is not None and not kids[j]:
                xs[j], ys[j], zs[j] = target
                continue
            sx = sy = sz = sw = 0.0
            if target is not None:
                w = own[j]
                sx, sy, sz, sw = target[0] * w, target[1] * w, target[2] * w, w
            for c in kids[j]:
                px, py, pz = _toward(xs[c], ys[c], zs[c], xs[j], ys[j], zs[j], L[c], start_dirs[c], -1.0, tiny)
                w = share[c]
                sx, sy, sz, sw = sx + px * w, sy + py * w, sz + pz * w, sw + w
            xs[j], ys[j], zs[j] = sx / sw, sy / sw, sz / sw
        # Root to tip, parents before children: every joint back at its length from its parent.
        xs[0], ys[0], zs[0] = rx, ry, rz
        for p in range(count):
            if p in bodies:
                _place_rigid(p, bodies[p], xs, ys, zs)
                continue
            for j in children[p]:
                xs[j], ys[j], zs[j] = _toward(xs[p], ys[p], zs[p], xs[j], ys[j], zs[j], L[j], start_dirs[j], 1.0,
                                              tiny)
        for path, k in branches:
            sub = [xs[i] for i in path], [ys[i] for i in path], [zs[i] for i in path]
            turn_toward_pole(sub[0], sub[1], sub[2], pole[k], tiny)  # type: ignore[index]
            for n, i in enumerate(path):
                xs[i], ys[i], zs[i] = sub[0][n], sub[1][n], sub[2][n]
        errors = errors_now()
        error = float(errors[scored].max()) if scored else 0.0
        if error < best_error:
            best_error, best = error, (xs[:], ys[:], zs[:], errors)
        stalled = stalled + 1 if previous - error < min_improvement * previous else 0
        if error <= tolerance or stalled >= STALL_PATIENCE:
            break
        previous = error
    assert best is not None
    return np.array(best[:3]).T, best[3], iterations


def _place_rigid(p: int, body: tuple, xs: list[float], ys: list[float], zs: list[float]) -> None:
    """Place the children of joint ``p`` as one rigid body: their start offsets turned by the rotation
    that best carries them toward where the children are now (weighted Kabsch)."""
    kids, offsets, weights = body
    now = np.array([[xs[c] - xs[p], ys[c] - ys[p], zs[c] - zs[p]] for c in kids])
    u, _, vt = np.linalg.svd((offsets * weights[:, None]).T @ now)
    turn = vt.T @ np.diag([1.0, 1.0, np.sign(np.linalg.det(vt.T @ u.T))]) @ u.T
    placed = offsets @ turn.T
    for k, c in enumerate(kids):
        xs[c], ys[c], zs[c] = xs[p] + float(placed[k, 0]), ys[p] + float(placed[k, 1]), zs[p] + float(placed[k, 2])


def _toward(ax: float, ay: float, az: float, bx: float, by: float, bz: float, length: float,
            fallback: tuple, sign: float, tiny: float) -> tuple[float, float, float]:
    """The point at ``length`` from a on the line toward b (or along ``sign * fallback`` if they meet)."""
    dx, dy, dz = bx - ax, by - ay, bz - az
    d = math.sqrt(dx * dx + dy * dy + dz * dz)
    if d > tiny:
        r = length / d
        return ax + dx * r, ay + dy * r, az + dz * r
    return ax + sign * fallback[0] * length, ay + sign * fallback[1] * length, az + sign * fallback[2] * length


def _pole_branches(parent: np.ndarray, children: list[list[int]], effector: np.ndarray,
                   pole: np.ndarray | None) -> list[tuple[list[int], int]]:
    """For each effector with a pole: its joints up to the nearest sub-base or the root, root first."""
    if pole is None:
        return []
    out = []
    for k, e in enumerate(effector):
        if np.isnan(pole[k]).any():
            continue
        path = [int(e)]
        j = int(parent[e])
        while j > 0 and len(children[j]) == 1:
            path.append(j)
            j = int(parent[j])
        path.append(j)
        if len(path) >= 3:
            out.append((path[::-1], k))
    return out
