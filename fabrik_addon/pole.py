"""Where a pole must sit for a given pose: the one rule shared by every operator that places a pole."""

from __future__ import annotations

import numpy as np

# A bend smaller than this fraction of the chain's length counts as straight.
STRAIGHT = 1e-6


def pole_position(joints, side) -> np.ndarray:
    """A pole point for the chain pose ``joints`` (shape (N + 1, 3): heads, then the tip's tail).

    On the side the chain bends to now and in its bend plane: the pose's mean bend off the root-tip
    line (the interior joints' centroid), one chain length from the middle of that line. A pole there
    leaves the pose as it is, which is what adding a chain with a pole and snapping IK to FK rely on.
    ``side`` (shape (3,)) is used when the chain is straight and has no bend: usually the first
    bone's local Z axis, the knee/elbow side of Blender's rigs. Same space in and out.
    """
    heads = np.asarray(joints, dtype=np.float64)
    root, tip = heads[0], heads[-1]
    length = float(np.linalg.norm(np.diff(heads, axis=0), axis=1).sum())
    axis = _axis(heads)
    bend = bend_side(heads)
    if bend is None:
        bend = np.asarray(side, dtype=np.float64)
        bend = bend - (bend @ axis) * axis
        if np.linalg.norm(bend) <= STRAIGHT:  # the hint lies along the chain: any perpendicular will do
            bend = np.cross(axis, [1.0, 0.0, 0.0] if abs(axis[0]) < 0.9 else [0.0, 1.0, 0.0])
        bend = bend / np.linalg.norm(bend)
    return root + 0.5 * (tip - root) + bend * length


def bend_side(joints) -> np.ndarray | None:
    """Unit direction (3,) the chain pose ``joints`` bends to, off its root-tip line (the interior
    joints' centroid); None when it is straight (a bend within ``STRAIGHT`` of its length)."""
    heads = np.asarray(joints, dtype=np.float64)
    if len(heads) <= 2:
        return None
    length = float(np.linalg.norm(np.diff(heads, axis=0), axis=1).sum())
    axis = _axis(heads)
    bend = heads[1:-1].mean(axis=0) - heads[0]
    bend = bend - (bend @ axis) * axis
    norm = float(np.linalg.norm(bend))
    return None if norm <= STRAIGHT * length else bend / norm


def _axis(heads: np.ndarray) -> np.ndarray:
    length = float(np.linalg.norm(np.diff(heads, axis=0), axis=1).sum())
    axis = heads[-1] - heads[0]
    norm = float(np.linalg.norm(axis))
    return axis / norm if norm > 1e-9 * length else np.array([0.0, 0.0, 1.0])
