"""Random trees (Y shapes, torsos with two arms) and jointly reachable targets for the tree tests."""

from __future__ import annotations

import numpy as np

from fabrik_addon.solver import solve_chain


def _trunk(rng: np.random.Generator, most: int) -> tuple[list[np.ndarray], list[int]]:
    """A trunk of 1-``most`` bones up +Z from the origin, a little crooked: joints and parents."""
    joints = [np.zeros(3)]
    parents = [-1]
    for _ in range(int(rng.integers(1, most + 1))):
        joints.append(joints[-1] + np.array([0.0, 0.0, rng.uniform(0.5, 1.0)]) + rng.normal(scale=0.1, size=3))
        parents.append(len(joints) - 2)
    return joints, parents


def random_y_tree(rng: np.random.Generator) -> tuple[np.ndarray, list[int], list[int]]:
    """A trunk of 1-3 bones up +Z splitting into two branches of 2-4 bones; returns joints, parents,
    effectors."""
    joints, parents = _trunk(rng, 3)
    fork = len(joints) - 1
    effectors = []
    for side in (1.0, -1.0):
        previous = fork
        for _ in range(int(rng.integers(2, 5))):
            step = np.array([side * 0.5, 0.0, 0.6]) + rng.normal(scale=0.2, size=3)
            joints.append(joints[previous] + step)
            parents.append(previous)
            previous = len(joints) - 1
        effectors.append(previous)
    return np.array(joints), parents, effectors


def torso(rng: np.random.Generator) -> tuple[np.ndarray, list[int], list[int]]:
    """Spine of two bones; each arm: a shoulder offset from the spine top, upper arm, forearm."""
    spine = [np.zeros(3), np.array([0, 0, 0.6]), np.array([0, 0, 1.2])]
    joints = list(spine)
    parents = [-1, 0, 1]
    effectors = []
    for side in (1.0, -1.0):
        shoulder = np.array([side * 0.2, 0.0, 1.15])
        elbow = shoulder + np.array([side * 0.5, 0.0, -0.05]) + rng.normal(scale=0.05, size=3)
        hand = elbow + np.array([side * 0.5, 0.0, 0.0]) + rng.normal(scale=0.05, size=3)
        joints += [shoulder, elbow, hand]
        parents += [2, len(joints) - 3, len(joints) - 2]
        effectors.append(len(joints) - 1)
    return np.array(joints), parents, effectors


def random_pose(rng: np.random.Generator, joints: np.ndarray, parents: list[int], spread: float = 0.6) -> np.ndarray:
    """Forward kinematics of the same tree with every bone turned at random (lengths kept)."""
    out = joints.copy()
    for j in range(1, len(joints)):
        rest = joints[j] - joints[parents[j]]
        d = rest / np.linalg.norm(rest) + rng.normal(scale=spread, size=3)
        out[j] = out[parents[j]] + np.linalg.norm(rest) * d / np.linalg.norm(d)
    return out


def rigid_pose(rng: np.random.Generator, joints: np.ndarray, parents: list[int], rigid: set[int]) -> np.ndarray:
    """Like :func:`random_pose`, but the children of each ``rigid`` joint turn together, by one random
    rotation, as points on one bone do."""
    out = joints.copy()
    turns: dict[int, np.ndarray] = {}
    for j in range(1, len(joints)):
        p = parents[j]
        rest = joints[j] - joints[p]
        if p in rigid:
            if p not in turns:
                axis = rng.normal(size=3)
                angle = rng.normal(scale=0.5)
                k = np.cross(np.eye(3), axis / np.linalg.norm(axis))
                turns[p] = np.eye(3) + np.sin(angle) * k + (1.0 - np.cos(angle)) * k @ k
            out[j] = out[p] + turns[p] @ rest
        else:
            d = rest / np.linalg.norm(rest) + rng.normal(scale=0.6, size=3)
            out[j] = out[p] + np.linalg.norm(rest) * d / np.linalg.norm(d)
    return out


def path_to(parents: list[int], joint: int) -> list[int]:
    path = [joint]
    while parents[path[-1]] >= 0:
        path.append(parents[path[-1]])
    return path[::-1]


def solve_one_after_another(joints, parents, effectors, targets, tolerance, max_iterations):
    """The comparison: each effector's chain solved alone, in turn, from the pose the last one left.

    Joints off the solved path keep their offset from their parent (parents come before children).
    """
    pose = joints.copy()
    for effector, target in zip(effectors, targets):
        path = path_to(parents, effector)
        solved = solve_chain(pose[path], target, tolerance=tolerance, max_iterations=max_iterations).joints
        new = pose.copy()
        new[path] = solved
        on_path = set(path)
        for j in range(1, len(pose)):
            if j not in on_path:
                new[j] = new[parents[j]] + (pose[j] - pose[parents[j]])
        pose = new
    return pose


def limited_tree_pose(rng: np.random.Generator, joints: np.ndarray, parents: list[int], tree_limits) -> np.ndarray:
    """Forward kinematics of a random pose inside every limit, measured as the solver measures."""
    from rigkit.limited import inside_direction

    out = joints.copy()
    now: dict[int, np.ndarray] = {}
    for j in range(1, len(joints)):
        p = parents[j]
        length = np.linalg.norm(joints[j] - joints[p])
        frame = now.get(p, tree_limits.base_frame) @ tree_limits.rest_offsets[j]
        limit = tree_limits.limits[j]
        local = inside_direction(rng, limit) if limit is not None else np.array([0.0, 1.0, 0.0])
        d = frame @ local
        out[j] = out[p] + length * d
        now[j] = tree_limits.bone_frame(j, d)
    return out


def random_fork(rng: np.random.Generator, branches: int = 3) -> tuple[np.ndarray, list[int], list[int]]:
    """A trunk of 1-2 bones up +Z splitting into ``branches`` branches of 2-3 bones spread around it (each
    leaves the trunk's top on its own); returns joints, parents, effectors."""
    joints, parents = _trunk(rng, 2)
    fork = len(joints) - 1
    effectors = []
    for b in range(branches):
        angle = 2.0 * np.pi * b / branches + rng.normal(scale=0.2)
        out = np.array([0.5 * np.cos(angle), 0.5 * np.sin(angle), 0.6])
        previous = fork
        for _ in range(int(rng.integers(2, 4))):
            joints.append(joints[previous] + out + rng.normal(scale=0.2, size=3))
            parents.append(previous)
            previous = len(joints) - 1
        effectors.append(previous)
    return np.array(joints), parents, effectors


def pole_side_degrees(root, target, pole, bend) -> float:
    """Angle (seen from the root) of ``bend`` (an elbow, or a branch's mean bend) off the half of the plane through
    root, target and pole that holds the pole: off the plane, or, on its other side, across the line from the root
    to the target (a mirrored elbow). The tests' own measure, written apart from the solver's ``off_plane``."""
    line = (target - root) / np.linalg.norm(target - root)
    side = pole - root - ((pole - root) @ line) * line
    side /= np.linalg.norm(side)
    d = bend - root
    across = d - (d @ line) * line
    away = np.linalg.norm(across) if across @ side < 0.0 else abs(d @ np.cross(line, side))
    return float(np.degrees(np.arcsin(min(1.0, away / np.linalg.norm(d)))))
