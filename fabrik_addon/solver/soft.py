"""Soft IK and stretch: how far toward its target a chain is asked to reach, and how much it grows.

A hard IK chain straightens abruptly as its target crosses full reach: near full extension the bend
angle goes as the square root of the distance left, so its rate is unbounded (the "pop"). Soft IK
eases the distance the tip is asked to reach, over the last ``softness`` fraction of the reach ``L``:
with the soft zone starting at ``a = L (1 - s)`` and of width ``w = s L``, a target at distance
``d > a`` is solved at ::

    a + w (1 - exp(-(d - a) / w))

which has value and slope 1 at ``d = a`` (C1, so nothing changes where it starts), is strictly
increasing, and only tends to ``L``. The bend's rate then stays bounded: for two equal bones it is
largest at the zone's start, ``1 / (L sqrt(2 s))`` radians per unit of target travel.

Stretch scales every bone of a chain by one factor ``k = d / eased(d)`` (1 inside the soft zone's
start, capped at ``max_stretch``), so that the stretched chain, bent as the soft curve says, puts its
tip on the target. With ``softness`` 0 that is ``d / L`` beyond reach. Past the cap the chain keeps
the soft curve's bend at ``k = max_stretch`` and falls short (straight toward the target when hard).

The solvers apply both at their entry: the target moves along the root-to-target line to where the
options put the tip, and the start pose is scaled about the root by ``k``; the iterations, poles and
limits are untouched (uniform scaling keeps every bone direction).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .prepare import EPS

DEFAULT_SOFTNESS = 0.0
DEFAULT_MAX_STRETCH = 1.5
MAX_SOFTNESS = 0.5
# A target eased to within EPS of full reach is treated as out of reach (chain straight toward it), and
# then moved this far beyond the (stretched) reach so that rounding cannot make it "just reachable",
# where FABRIK crawls.
BEYOND = 1e-12

# settle_points() and settle_chains() stop once the tip's distance from the root is within this fraction of the reach.
SETTLED = 1e-13

Point = tuple[float, float, float]


def check_soft_options(softness: float, use_stretch: bool, max_stretch: float) -> None:
    """Raise ``ValueError`` naming the first bad option."""
    if softness == 0.0 and use_stretch is False and max_stretch == DEFAULT_MAX_STRETCH:
        return  # the defaults, checked in ~0.1 us: the float entry points take ~2 us in all
    if not (isinstance(softness, int | float) and math.isfinite(softness) and 0.0 <= softness <= MAX_SOFTNESS):
        raise ValueError(f"softness must be a number in [0, {MAX_SOFTNESS}], got {softness!r}")
    if not isinstance(use_stretch, bool | np.bool_):
        raise ValueError(f"use_stretch must be True or False, got {use_stretch!r}")
    if not (isinstance(max_stretch, int | float) and math.isfinite(max_stretch) and max_stretch >= 1.0):
        raise ValueError(f"max_stretch must be a finite number >= 1, got {max_stretch!r}")


def eased_distance(distance: float, reach: float, softness: float) -> float:
    """The distance from the root a target at ``distance`` is solved at, for a chain of length ``reach``.

    ``softness`` 0 gives hard IK: ``min(distance, reach)``.
    """
    if softness <= 0.0:
        return min(distance, reach)
    width = softness * reach
    start = reach - width
    if distance <= start:
        return distance
    return start - width * math.expm1((start - distance) / width)


def stretch_factor(distance: float, reach: float, softness: float, max_stretch: float) -> float:
    """The factor every bone is scaled by with stretch on: ``distance / eased``, in ``[1, max_stretch]``."""
    eased = eased_distance(distance, reach, softness)
    if eased >= distance or eased <= 0.0:
        return 1.0
    return min(distance / eased, max_stretch)


def ease_target(root: Sequence[float] | np.ndarray, target: Sequence[float] | np.ndarray, reach: float,
                softness: float, use_stretch: bool, max_stretch: float) -> tuple[Point, float, bool]:
    """The target to solve the chain, scaled by the returned factor about ``root``, toward.

    Returns ``(target, factor, eased)``; ``target`` is the given one (as floats) when nothing moves it,
    so that hard IK without stretch solves exactly as it always did; ``eased`` is True when the target
    was moved into the soft zone short of full extension (then :func:`settle_points` applies).
    """
    rx, ry, rz = float(root[0]), float(root[1]), float(root[2])
    tx, ty, tz = float(target[0]), float(target[1]), float(target[2])
    dx, dy, dz = tx - rx, ty - ry, tz - rz
    distance = math.sqrt(dx * dx + dy * dy + dz * dz)
    eased = eased_distance(distance, reach, softness)
    factor = 1.0
    if use_stretch and 0.0 < eased < distance:
        factor = min(distance / eased, max_stretch)
    if eased >= reach * (1.0 - EPS):
        # At full extension: straight toward the target, which must lie beyond the stretched reach.
        goal = factor * reach * (1.0 + BEYOND)
        if distance >= goal:
            return (tx, ty, tz), factor, False
        r = goal / distance
    elif eased >= distance:
        return (tx, ty, tz), factor, False
    else:
        r = factor * eased / distance
    return (rx + dx * r, ry + dy * r, rz + dz * r), factor, eased < reach * (1.0 - EPS)


def stretch_about(points: np.ndarray, root: np.ndarray, factor: float) -> np.ndarray:
    """``points`` scaled by ``factor`` about ``root`` (the array itself when the factor is 1)."""
    if factor == 1.0:
        return points
    return root + (points - root) * factor


def check_soft_arrays(softness: object, use_stretch: object, max_stretch: object, count: int,
                      what: str = "C") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-item options from numbers or arrays of shape ``(count,)``; raise ``ValueError`` naming the input."""
    out = []
    for name, value, dtype in (("softness", softness, np.float64), ("use_stretch", use_stretch, np.bool_),
                               ("max_stretch", max_stretch, np.float64)):
        arr = np.asarray(value)
        if dtype is np.bool_ and arr.dtype != np.bool_:
            raise ValueError(f"{name} must be True/False or a boolean array of shape ({what},), got {arr.dtype}")
        if dtype is np.float64:
            if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
                raise ValueError(f"{name} must be a number or an array of shape ({what},), got {arr.dtype}")
            arr = arr.astype(np.float64)
        if arr.ndim == 0:
            arr = np.full(count, arr[()], dtype=dtype)
        if arr.shape != (count,):
            raise ValueError(f"{name} must be a number or have shape ({count},), got {arr.shape}")
        out.append(arr)
    soft, stretch, cap = out
    if not (np.isfinite(soft).all() and (soft >= 0.0).all() and (soft <= MAX_SOFTNESS).all()):
        raise ValueError(f"softness must be in [0, {MAX_SOFTNESS}], got {soft[~((soft >= 0) & (soft <= 0.5))][:1]}")
    if not (np.isfinite(cap).all() and (cap >= 1.0).all()):
        raise ValueError(f"max_stretch must be finite and >= 1, got {cap[~(np.isfinite(cap) & (cap >= 1.0))][:1]}")
    return soft, stretch, cap


def eased_distances(distance: np.ndarray, reach: np.ndarray, softness: np.ndarray) -> np.ndarray:
    """Vectorised :func:`eased_distance`."""
    width = softness * reach
    start = reach - width
    soft = softness > 0.0
    safe = np.where(soft, width, 1.0)
    eased = np.where(distance <= start, distance, start - width * np.expm1(np.minimum(start - distance, 0.0) / safe))
    return np.where(soft, eased, np.minimum(distance, reach))


def ease_targets(roots: np.ndarray, targets: np.ndarray, reach: np.ndarray, softness: np.ndarray,
                 use_stretch: np.ndarray, max_stretch: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised :func:`ease_target`: ``roots, targets (C, 3)``, the rest ``(C,)``; returns the targets to
    solve toward ``(C, 3)`` (rows left as given where nothing moves them), the factors ``(C,)`` and
    the rows eased into the soft zone ``(C,)``."""
    rel = targets - roots
    distance = np.sqrt(np.einsum("ij,ij->i", rel, rel))
    eased = eased_distances(distance, reach, softness)
    grows = use_stretch & (eased > 0.0) & (eased < distance)
    factor = np.where(grows, np.minimum(distance / np.where(grows, eased, 1.0), max_stretch), 1.0)
    straight = eased >= reach * (1.0 - EPS)
    goal = np.where(straight, factor * reach * (1.0 + BEYOND), factor * eased)
    move = np.where(straight, distance < goal, eased < distance)
    out = targets.copy()
    if move.any():
        r = goal[move] / distance[move]
        out[move] = roots[move] + rel[move] * r[:, None]
    return out, factor, move & ~straight


def tree_branches(parent: np.ndarray, effector: np.ndarray, rigid: set[int]) -> list[list[int]]:
    """Per effector, the joints ending its own bones: from the effector up to, not past, the nearest
    joint shared with another branch, another effector, the root or a rigid body's children."""
    count = len(parent)
    children = np.bincount(parent[1:], minlength=count)
    is_effector = np.zeros(count, dtype=bool)
    is_effector[effector] = True
    out = []
    for e in effector.tolist():
        bones: list[int] = []
        j = e
        while int(parent[j]) not in rigid:
            bones.append(j)
            p = int(parent[j])
            if p == 0 or children[p] > 1 or is_effector[p]:
                break
            j = p
        out.append(bones)
    return out


def ease_tree_targets(root: np.ndarray, parent: np.ndarray, lengths: np.ndarray, effector: np.ndarray,
                      targets: np.ndarray, softness: np.ndarray) -> np.ndarray:
    """Each effector's target eased as for the chain from the root to it (reach: that path's length)."""
    path = np.zeros(len(parent))
    for j in range(1, len(parent)):
        path[j] = path[parent[j]] + lengths[j]
    none = np.zeros(len(effector), dtype=bool)
    eased, _, _ = ease_targets(np.broadcast_to(root, targets.shape), targets, path[effector], softness, none,
                               np.ones(len(effector)))
    return eased


def stretch_branches(pose: np.ndarray, parent: np.ndarray, lengths: np.ndarray, branches: list[list[int]],
                     targets: np.ndarray, eased: np.ndarray, softness: np.ndarray, use_stretch: np.ndarray,
                     max_stretch: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Stretch each stretching effector's own branch as a chain rooted where ``pose`` put its first joint.

    Returns ``(start, targets, stretch (E,), bone_stretch (J,))``: ``pose`` with those branches scaled
    (every direction kept), the targets for a second solve (the chain rule for the branch, from its
    solved root; other effectors keep ``eased``), and the factors. Bones other branches hang from never
    stretch.
    """
    count = len(pose)
    stretch = np.ones(len(branches))
    goals = eased.copy()
    bone_stretch = np.ones(count)
    for k, bones in enumerate(branches):
        if not use_stretch[k] or not bones:
            continue
        base = pose[int(parent[bones[-1]])]
        goal, factor, _ = ease_target(base, targets[k], float(lengths[bones].sum()), float(softness[k]), True,
                                      float(max_stretch[k]))
        goals[k], stretch[k] = goal, factor
        bone_stretch[bones] = factor
    start = pose
    if (bone_stretch != 1.0).any():
        offsets = (pose[1:] - pose[parent[1:]]) * bone_stretch[1:, None]
        start = pose.copy()
        for j in range(1, count):
            start[j] = start[parent[j]] + offsets[j - 1]
    return start, goals, stretch, bone_stretch


def settle_chains(joints: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """:func:`settle_points` for ``C`` chains at once, in numpy: put each chain's tip exactly on its
    (eased) target by straightening or bending it a little.

    ``joints (C, N+1, 3)``, ``targets (C, 3)`` inside reach; returns new joints. FABRIK converges slowly
    near full extension, exactly where the soft zone puts targets: 30 passes leave a 10-bone chain
    1% of its reach short, so the tip would not follow the soft curve and the pose would jump as the
    pass count changes. Each bone direction ``d`` is blended toward the root-to-tip chord ``a`` as
    ``normalize(d + t (a - d))``, with ``t`` in [-1, 1] found so that the root-to-tip distance is the
    target's (regula falsi, Illinois variant), then the chain is turned rigidly about the root onto
    the target. Every bone stays in the plane of its direction and the chord, so the bend keeps
    facing the pole; lengths are exact. Chains that cannot be brought there this way are returned as
    they are.
    """
    out = joints.copy()
    root = joints[:, 0]
    steps = np.diff(joints, axis=1)
    lengths = np.sqrt(np.einsum("cni,cni->cn", steps, steps))
    dirs = steps / lengths[..., None]
    chord = joints[:, -1] - root
    span = np.sqrt(np.einsum("ci,ci->c", chord, chord))
    goal_rel = targets - root
    goal = np.sqrt(np.einsum("ci,ci->c", goal_rel, goal_rel))
    total = lengths.sum(axis=1)
    work = (span > EPS * total) & (goal > EPS * total) & (joints[:, -1] != targets).any(axis=1)
    if not work.any():
        return out
    rows = np.flatnonzero(work)
    d, length, t_goal = dirs[rows], lengths[rows], goal[rows]
    a = chord[rows] / span[rows, None]

    def reach_at(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        v = d + t[:, None, None] * (a[:, None, :] - d)
        v = v / np.sqrt(np.einsum("cni,cni->cn", v, v))[..., None]
        tip = np.einsum("cn,cni->ci", length, v)
        return np.sqrt(np.einsum("ci,ci->c", tip, tip)) - t_goal, v

    f0 = span[rows] - t_goal
    lo = np.where(f0 < 0.0, 0.0, -1.0)
    hi = np.where(f0 < 0.0, 1.0, 0.0)
    f_lo, _ = reach_at(lo)
    f_hi, _ = reach_at(hi)
    ok = (f_lo <= 0.0) & (f_hi >= 0.0)
    t = np.zeros(len(rows))
    scale = total[rows]
    side = np.zeros(len(rows), dtype=np.int64)
    for _sweep in range(60):
        denom = f_hi - f_lo
        t = np.where(denom > 0.0, lo - f_lo * (hi - lo) / np.where(denom > 0.0, denom, 1.0), 0.5 * (lo + hi))
        t = np.clip(t, lo, hi)
        f, _ = reach_at(t)
        if (np.abs(f[ok]) <= SETTLED * scale[ok]).all():
            break
        below = f < 0.0
        # Illinois: halve the stale end's value when the same end moves twice, so it converges fast.
        f_hi = np.where(below & (side == -1), 0.5 * f_hi, f_hi)
        f_lo = np.where(~below & (side == 1), 0.5 * f_lo, f_lo)
        lo, f_lo = np.where(below, t, lo), np.where(below, f, f_lo)
        hi, f_hi = np.where(below, hi, t), np.where(below, f_hi, f)
        side = np.where(below, -1, 1)
    _, v = reach_at(t)
    steps_new = v * length[..., None]
    tip = steps_new.sum(axis=1)
    p = tip / np.sqrt(np.einsum("ci,ci->c", tip, tip))[:, None]
    q = goal_rel[rows] / t_goal[:, None]
    # Rodrigues' rotation taking p to q (they are close): x c + w x x + w (w . x) / (1 + c), w = p x q.
    w = np.cross(p, q)
    c = np.einsum("ci,ci->c", p, q)
    cw = np.cross(w[:, None, :], steps_new)
    turned = (steps_new * c[:, None, None] + cw
              + w[:, None, :] * (np.einsum("ci,cni->cn", w, steps_new) / (1.0 + c)[:, None])[..., None])
    placed = root[rows, None] + np.cumsum(turned, axis=1)
    good = ok & (c > 0.0)
    out[rows[good], 1:] = placed[good]
    return out


def settle_points(joints: Sequence[Sequence[float]], target: Sequence[float]) -> list[Point]:
    """Put one chain's tip exactly on its (eased) target by straightening or bending it a little: plain
    floats, one chain (a numpy call per step would cost ~20 times more); how, and why, in
    :func:`settle_chains`, its numpy twin across chains (``tests/solver/test_soft.py`` holds them equal)."""
    sqrt = math.sqrt
    rx, ry, rz = (float(c) for c in joints[0])
    steps, lengths = [], []
    for a, b in zip(joints[:-1], joints[1:]):
        dx, dy, dz = b[0] - a[0], b[1] - a[1], b[2] - a[2]
        length = sqrt(dx * dx + dy * dy + dz * dz)
        steps.append((dx / length, dy / length, dz / length))
        lengths.append(length)
    total = sum(lengths)
    cx, cy, cz = joints[-1][0] - rx, joints[-1][1] - ry, joints[-1][2] - rz
    span = sqrt(cx * cx + cy * cy + cz * cz)
    gx, gy, gz = target[0] - rx, target[1] - ry, target[2] - rz
    goal = sqrt(gx * gx + gy * gy + gz * gz)
    out = [(float(p[0]), float(p[1]), float(p[2])) for p in joints]
    if span <= EPS * total or goal <= EPS * total or tuple(out[-1]) == tuple(target):
        return out
    ax, ay, az = cx / span, cy / span, cz / span

    def reach_at(t: float) -> tuple[float, list[Point]]:
        tx = ty = tz = 0.0
        dirs = []
        for (dx, dy, dz), length in zip(steps, lengths):
            vx, vy, vz = dx + t * (ax - dx), dy + t * (ay - dy), dz + t * (az - dz)
            n = sqrt(vx * vx + vy * vy + vz * vz)
            vx, vy, vz = vx / n * length, vy / n * length, vz / n * length
            dirs.append((vx, vy, vz))
            tx, ty, tz = tx + vx, ty + vy, tz + vz
        return sqrt(tx * tx + ty * ty + tz * tz) - goal, dirs

    lo, hi = (0.0, 1.0) if span < goal else (-1.0, 0.0)
    f_lo, _ = reach_at(lo)
    f_hi, _ = reach_at(hi)
    if not (f_lo <= 0.0 <= f_hi):
        return out
    t, side = 0.0, 0
    for _sweep in range(60):
        denom = f_hi - f_lo
        t = lo - f_lo * (hi - lo) / denom if denom > 0.0 else 0.5 * (lo + hi)
        t = min(max(t, lo), hi)
        f, _ = reach_at(t)
        if abs(f) <= SETTLED * total:
            break
        if f < 0.0:
            if side == -1:
                f_hi *= 0.5
            lo, f_lo, side = t, f, -1
        else:
            if side == 1:
                f_lo *= 0.5
            hi, f_hi, side = t, f, 1
    _, steps_new = reach_at(t)
    px, py, pz = sum(v[0] for v in steps_new), sum(v[1] for v in steps_new), sum(v[2] for v in steps_new)
    n = sqrt(px * px + py * py + pz * pz)
    px, py, pz = px / n, py / n, pz / n
    qx, qy, qz = gx / goal, gy / goal, gz / goal
    wx, wy, wz = py * qz - pz * qy, pz * qx - px * qz, px * qy - py * qx
    c = px * qx + py * qy + pz * qz
    if c <= 0.0:
        return out
    k = 1.0 / (1.0 + c)
    x, y, z = rx, ry, rz
    placed = [(rx, ry, rz)]
    for vx, vy, vz in steps_new:
        dot = (wx * vx + wy * vy + wz * vz) * k
        x += vx * c + (wy * vz - wz * vy) + wx * dot
        y += vy * c + (wz * vx - wx * vz) + wy * dot
        z += vz * c + (wx * vy - wy * vx) + wz * dot
        placed.append((x, y, z))
    return placed
