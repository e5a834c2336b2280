"""Where a fork settles among the poses that reach its targets.

A tree whose branches pull against each other has a set of solutions, not one (a Y's trunk may lean
anywhere both branches still reach from). Where FABRIK's passes stop in that set depended on how many
they took and on the tolerance, and the branches' own limited solves started from there (a Y with cones
on its branches: 4.01 degrees a frame on a smooth walk). :func:`nearest_turns` solves the fork again from
the pose without IK by least-norm turns of its bones, as Blender's tree IK does: the pose is a function
of the targets, continuous in them, and spreads the turn over the bones (a Y 0.44 degrees a frame,
Blender 0.43). :func:`nearest_pose`, the pose nearest the start in joint distances, is the fallback
where those steps do not get there (it kept each branch's first bone still and swung its last: 1.01)."""

from __future__ import annotations

import math

import numpy as np

from .rotations import skew

# Sequential quadratic steps: each moves the joints toward the start inside the tangent space of the
# constraints, then back onto them; these many at most, until a step moves no joint more than
# ``SETTLE_STEP`` of the tree's length.
SETTLE_STEPS = 60
SETTLE_STEP = 1e-10
# A rigid body gets a roll handle (:func:`_roll_handles`) where its first two children are closer than
# this fraction of their mean distance from its origin (a Y's branches 0.08 apart on a 1-long trunk: 0.08;
# a torso's shoulders: 0.73, where the handle held the spine's roll and the arms turned 2.7 degrees a
# frame instead of 0.73).
HANDLE_SPREAD = 0.25
# No step moves a joint farther than this fraction of the tree's length (far from the nearest pose,
# Newton's steps overshot by 10 lengths and never came back).
TRUST = 0.05
# Newton steps back onto the constraints after each move.
PROJECT_STEPS = 4


def children_of(parent: np.ndarray) -> list[list[int]]:
    """Each joint's children, in joint order (``parent``: each joint's parent, -1 for the root)."""
    children: list[list[int]] = [[] for _ in range(len(parent))]
    for j in range(1, len(parent)):
        children[int(parent[j])].append(j)
    return children


def nearest_pose(pts: np.ndarray, start: np.ndarray, parent: np.ndarray, lengths: np.ndarray,
                 fixed: dict[int, np.ndarray], bodies: dict[int, tuple]) -> np.ndarray:
    """The pose nearest ``start`` (sum of squared joint distances) with every bone at its length, the
    joints of ``fixed`` on their points and each rigid body's children keeping their offsets, found from
    ``pts`` (a pose that nearly keeps them all).

    Parameters
    ----------
    pts, start : ndarray, shape (J, 3)
        The passes' pose and the start pose (same root).
    parent : ndarray of int, shape (J,)
    lengths : ndarray, shape (J,)
    fixed : dict joint -> ndarray, shape (3,)
        Effectors and where they stay.
    bodies : dict joint -> (children, start offsets (K, 3), weights)
        Rigid bodies (:func:`.tree._place_rigid`).

    Returns
    -------
    ndarray, shape (J, 3)
        A new pose; ``pts`` itself when the steps do not settle (a singular set of constraints).
    """
    scale = float(lengths.sum())
    rows = _constraints(parent, lengths, bodies)
    pts_all, start_all = _roll_handles(pts, start, bodies, rows)
    count = len(pts_all)
    x = pts_all[1:].copy()
    x0 = start_all[1:]
    root = pts[0]
    x = _project(x, root, rows, fixed)
    n = x.size
    for _ in range(SETTLE_STEPS):
        # Newton on the optimality conditions (x - x0 + A^T lam = 0, c = 0) with the constraints'
        # curvature (each length's a constant Laplacian, the others' zero), the multipliers taken afresh
        # each step, the step held inside a trust radius and the pose put back onto the constraints.
        a = _jacobian(x, root, rows, fixed, count)
        g = (x - x0).ravel()
        lam = _solve(a @ a.T, -a @ g)
        h = _convex(np.eye(n) + _curvature(rows, lam, count), a)
        kkt = np.block([[h, a.T], [a, np.zeros((len(a), len(a)))]])
        sol = _solve(kkt, np.concatenate([-(g + a.T @ lam), -_values(x, root, rows, fixed)]))
        step = sol[:n].reshape(-1, 3)
        big = float(np.abs(step).max())
        if big > TRUST * scale:
            step *= TRUST * scale / big
        x = _project(x + step, root, rows, fixed)
        if big <= SETTLE_STEP * scale:
            break
    if not np.isfinite(x).all() or float(np.abs(_values(x, root, rows, fixed)).max()) > 1e-9 * scale * scale:
        return pts
    out = pts.copy()
    out[1:] = x[:len(pts) - 1]
    return out


def _roll_handles(pts: np.ndarray, start: np.ndarray, bodies: dict[int, tuple],
                  rows: list[tuple]) -> tuple[np.ndarray, np.ndarray]:
    """Both poses with one extra joint per rigid body whose children spread apart: a handle at the
    children's distance from the body's origin, square to them, held to the body by three lengths.

    Children that leave nearly one point fix the body's roll through lever arms as short as their spread
    (a Y's branches 0.08 apart on a 1-long trunk): nearest the start by the joints alone, the roll was
    barely held and the whole tree spun 6.4 degrees a frame on a smooth walk. The handle weighs that
    roll at the body's own size."""
    extra_now: list[np.ndarray] = []
    extra_start: list[np.ndarray] = []
    count = len(pts)
    for p, (kids, offsets, _) in bodies.items():
        if any(r[0] == "line" and r[1] == p for r in rows):
            continue  # children in one direction: the roll is free and moves no joint
        mean = offsets.mean(axis=0)
        u = mean / np.linalg.norm(mean)
        spread = offsets[1] - offsets[0]
        if float(np.linalg.norm(spread)) >= HANDLE_SPREAD * float(np.linalg.norm(mean)):
            continue  # children far enough apart hold the roll themselves
        # Square to the plane of origin and children (in that plane the four points would be flat, the
        # three lengths holding nothing to first order).
        side = np.cross(u, spread)
        side /= np.linalg.norm(side)
        handle = float(np.linalg.norm(mean)) * side
        # The handle's place in the passes' pose: the same offset turned with the body (Kabsch).
        now = pts[kids] - pts[p]
        uu, _, vt = np.linalg.svd(offsets.T @ now)
        turn = vt.T @ np.diag([1.0, 1.0, np.sign(np.linalg.det(vt.T @ uu.T))]) @ uu.T
        j = count + len(extra_now)
        extra_start.append(start[p] + handle)
        extra_now.append(pts[p] + turn @ handle)
        for m, c in enumerate(kids[:2]):
            rows.append(("length", c, j, float(np.linalg.norm(handle - offsets[m]))))
        rows.append(("length", p, j, float(np.linalg.norm(handle))))
    if not extra_now:
        return pts, start
    return np.vstack([pts, extra_now]), np.vstack([start, extra_start])


def _constraints(parent: np.ndarray, lengths: np.ndarray, bodies: dict[int, tuple]) -> list[tuple]:
    """Rows ``("length", i, j, d)``: joints i and j stay d apart (i = 0 is the fixed root); ``("line", p,
    c0, c, r)``: joint c stays at r times c0's offset from p (children of a body leaving in one direction)."""
    rows: list[tuple] = []
    along: set[int] = set()
    for p, (kids, offsets, _) in bodies.items():
        norms = np.linalg.norm(offsets, axis=1)
        unit = offsets / norms[:, None]
        if np.abs(np.cross(unit[0], unit[1:])).max() <= 1e-5 and (unit[1:] @ unit[0]).min() > 0.0:
            for k in range(1, len(kids)):
                rows.append(("line", p, kids[0], kids[k], float(norms[k] / norms[0])))
                along.add(kids[k])
            continue
        for k in range(1, len(kids)):
            for m in range(min(k, 2)):
                rows.append(("length", kids[m], kids[k], float(np.linalg.norm(offsets[k] - offsets[m]))))
    for j in range(1, len(parent)):
        if j not in along:
            rows.append(("length", int(parent[j]), j, float(lengths[j])))
    return rows


def _point(x: np.ndarray, root: np.ndarray, j: int) -> np.ndarray:
    return root if j == 0 else x[j - 1]


def _values(x: np.ndarray, root: np.ndarray, rows: list[tuple], fixed: dict[int, np.ndarray]) -> np.ndarray:
    out = []
    for row in rows:
        if row[0] == "length":
            d = _point(x, root, row[2]) - _point(x, root, row[1])
            out.append(0.5 * (float(d @ d) - row[3] * row[3]))
        else:
            p = _point(x, root, row[1])
            out.extend(_point(x, root, row[3]) - p - row[4] * (_point(x, root, row[2]) - p))
    for j, goal in fixed.items():
        out.extend(x[j - 1] - goal)
    return np.array(out)


def _jacobian(x: np.ndarray, root: np.ndarray, rows: list[tuple], fixed: dict[int, np.ndarray],
              count: int) -> np.ndarray:
    size = sum(1 if r[0] == "length" else 3 for r in rows) + 3 * len(fixed)
    a = np.zeros((size, 3 * (count - 1)))
    k = 0
    eye = np.eye(3)
    for row in rows:
        if row[0] == "length":
            i, j = row[1], row[2]
            d = _point(x, root, j) - _point(x, root, i)
            if j:
                a[k, 3 * (j - 1):3 * j] += d
            if i:
                a[k, 3 * (i - 1):3 * i] -= d
            k += 1
        else:
            p, c0, c, r = row[1], row[2], row[3], row[4]
            a[k:k + 3, 3 * (c - 1):3 * c] += eye
            a[k:k + 3, 3 * (c0 - 1):3 * c0] -= r * eye
            if p:
                a[k:k + 3, 3 * (p - 1):3 * p] += (r - 1.0) * eye
            k += 3
    for j in fixed:
        a[k:k + 3, 3 * (j - 1):3 * j] = eye
        k += 3
    return a


def _curvature(rows: list[tuple], lam: np.ndarray, count: int) -> np.ndarray:
    """Sum of each constraint's Hessian times its multiplier."""
    h = np.zeros((count - 1, count - 1))
    k = 0
    for row in rows:
        if row[0] == "length":
            i, j = row[1], row[2]
            for u in (i, j):
                if u:
                    h[u - 1, u - 1] += lam[k]
            if i and j:
                h[i - 1, j - 1] -= lam[k]
                h[j - 1, i - 1] -= lam[k]
            k += 1
        else:
            k += 3
    return np.kron(h, np.eye(3))


def _project(x: np.ndarray, root: np.ndarray, rows: list[tuple], fixed: dict[int, np.ndarray]) -> np.ndarray:
    """Newton's least-norm steps back onto the constraints."""
    count = len(x) + 1
    for _ in range(PROJECT_STEPS):
        c = _values(x, root, rows, fixed)
        if float(np.abs(c).max(initial=0.0)) <= 1e-15:
            break
        a = _jacobian(x, root, rows, fixed, count)
        coef = _solve(a @ a.T, c)
        x = x - (a.T @ coef).reshape(-1, 3)
    return x


def _solve(m: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``m^-1 rhs``, or the least-squares answer where constraints repeat each other (a singular ``m``)."""
    try:
        return np.linalg.solve(m, rhs)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(m, rhs, rcond=None)[0]


def _convex(h: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``h`` raised where it is not positive on the constraints' tangent space (null space of ``a``), so
    that Newton's steps go down to a nearest pose, never up to a farthest one (a roll turned half round)."""
    _, sing, vt = np.linalg.svd(a)
    rank = int((sing > 1e-9 * max(float(sing.max(initial=0.0)), 1.0)).sum())
    z = vt[rank:].T
    if z.size == 0:
        return h
    low = float(np.linalg.eigvalsh(z.T @ h @ z).min())
    return h if low >= 0.1 else h + (0.1 - low) * np.eye(len(h))


# :func:`nearest_turns`: Gauss-Newton steps, these many at most, each turning a bone by at most
# ``TURN_CLIP`` radians, until the effectors are ``TURN_DONE`` of the tree's length from their points; it
# gives up where ``TURN_PATIENCE`` steps in a row fail to halve the distance (a point out of reach).
TURN_STEPS = 40
TURN_CLIP = 0.5
TURN_DONE = 1e-12
TURN_PATIENCE = 6
# Damping of the steps (a fraction of the squared length): where J J^T is nearly singular (a nearly straight
# branch) undamped steps took float32 noise in the pose without IK to 1.7e-5 (snapping FK to IK); 1e-4
# slowed the steps until they gave up.
TURN_DAMP = 1e-9


def nearest_turns(start: np.ndarray, parent: np.ndarray, fixed: dict[int, np.ndarray],
                  rigid: set[int]) -> np.ndarray | None:
    """The pose reached from ``start`` by least-norm turns of the bones (Gauss-Newton steps on every bone's
    rotation relative to its parent bone, from no turn at all) with the joints of ``fixed`` on their
    points, as Blender's tree IK solves from the pose without IK; None where the steps do not get there.

    A bone is an edge (parent joint, joint), or all the edges out of a ``rigid`` joint together (one body);
    its parent bone is the one ending at its first joint (none for the bones leaving the root).

    Parameters
    ----------
    start : ndarray, shape (J, 3)
        The pose without IK.
    parent : ndarray of int, shape (J,)
    fixed : dict joint -> ndarray, shape (3,)
    rigid : set of int

    Returns
    -------
    ndarray, shape (J, 3) or None
    """
    groups: list[tuple[int, list[int]]] = []
    group_of: dict[int, int] = {}  # joint -> the bone ending at it
    for p, kids in enumerate(children_of(parent)):
        for members in ([kids] if p in rigid and kids else [[c] for c in kids]):
            for c in members:
                group_of[c] = len(groups)
            groups.append((p, members))
    above = [group_of.get(p, -1) for p, _ in groups]
    offsets = [start[kids] - start[p] for p, kids in groups]
    effectors = list(fixed)
    goal = np.array([fixed[e] for e in effectors]).ravel()
    paths = []  # per effector, the bones that move it
    for e in effectors:
        path, j = [], e
        while j > 0:
            path.append(group_of[j])
            j = int(parent[j])
        paths.append(path)
    count = len(groups)
    scale = float(sum(np.linalg.norm(o, axis=1).sum() for o in offsets))
    omega = np.zeros((count, 3))
    x = start.copy()
    turns = np.empty((count, 3, 3))
    carried = np.empty((count, 3, 3))  # world turn of each bone's parent bone
    best, since = math.inf, 0
    for _ in range(TURN_STEPS):
        for g, (p, kids) in enumerate(groups):
            carried[g] = np.eye(3) if above[g] < 0 else turns[above[g]]
            turns[g] = carried[g] @ _exp(omega[g])
            x[kids] = x[p] + offsets[g] @ turns[g].T
        residual = goal - x[effectors].ravel()
        error = float(np.abs(residual).max())
        if error <= TURN_DONE * scale:
            return x
        if error < 0.5 * best:
            best, since = error, 0
        else:
            since += 1
            if since >= TURN_PATIENCE:
                return None
        a = np.zeros((len(goal), 3 * count))
        for k, (e, path) in enumerate(zip(effectors, paths)):
            for g in path:
                a[3 * k:3 * k + 3, 3 * g:3 * g + 3] = -skew(x[e] - x[groups[g][0]]) @ carried[g] @ _left(omega[g])
        step = (a.T @ _solve(a @ a.T + TURN_DAMP * scale * scale * np.eye(len(goal)), residual)).reshape(-1, 3)
        big = float(np.linalg.norm(step, axis=1).max())
        omega += step * min(1.0, TURN_CLIP / big) if big > 0.0 else 0.0
    return None

def _exp(w: np.ndarray) -> np.ndarray:
    angle = float(np.linalg.norm(w))
    k = skew(w)
    if angle < 1e-9:
        return np.eye(3) + k + 0.5 * k @ k
    return np.eye(3) + math.sin(angle) / angle * k + (1.0 - math.cos(angle)) / (angle * angle) * k @ k


def _left(w: np.ndarray) -> np.ndarray:
    """SO(3)'s left Jacobian: exp(w + dw) = exp(_left(w) dw) exp(w) to first order."""
    angle = float(np.linalg.norm(w))
    k = skew(w)
    if angle < 1e-6:
        return np.eye(3) + 0.5 * k + k @ k / 6.0
    return np.eye(3) + (1.0 - math.cos(angle)) / angle ** 2 * k + (angle - math.sin(angle)) / angle ** 3 * k @ k
