"""The one place that converts between Blender data and numpy arrays."""

from __future__ import annotations

import numpy as np
from mathutils import Euler, Matrix, Quaternion

ROTATION_PATHS = {
    'QUATERNION': "rotation_quaternion",
    'AXIS_ANGLE': "rotation_axis_angle",
}


def rotation_path(mode: str) -> str:
    return ROTATION_PATHS.get(mode, "rotation_euler")


def matrix_to_np(matrix: Matrix) -> np.ndarray:
    return np.array(matrix, dtype=np.float64)


def bulk_read(collection, attribute: str, count: int, width: int) -> np.ndarray:
    """``count`` x ``width`` float values of ``attribute`` across a collection, in one ``foreach_get``."""
    flat = np.empty(count * width, dtype=np.float32)
    collection.foreach_get(attribute, flat)
    return flat.reshape(count, width).astype(np.float64)


def read_rotation(pose_bone) -> tuple[float, ...]:
    """The raw rotation channel values of a pose bone in its own rotation mode."""
    return tuple(getattr(pose_bone, rotation_path(pose_bone.rotation_mode)))


def quaternion_from_channels(mode: str, values) -> Quaternion:
    """wxyz quaternion of raw rotation channel values in rotation mode ``mode``."""
    if mode == 'QUATERNION':
        q = Quaternion(values)
        return q.normalized() if q.magnitude > 0.0 else Quaternion()
    if mode == 'AXIS_ANGLE':
        angle, x, y, z = values
        axis = np.array([x, y, z])
        if np.linalg.norm(axis) == 0.0:
            return Quaternion()
        return Quaternion(axis / np.linalg.norm(axis), angle)
    return Euler(values[:3], mode).to_quaternion()


def channels_from_quaternion(mode: str, q: Quaternion, near) -> tuple[float, ...]:
    """Rotation channel values for ``q`` in ``mode``, continuous with the channel values ``near``.

    Quaternions keep the hemisphere of ``near``; Eulers take the equivalent angles closest to it.
    """
    if mode == 'QUATERNION':
        if q.dot(Quaternion(near)) < 0.0:
            q = -q
        return tuple(q)
    if mode == 'AXIS_ANGLE':
        axis, angle = q.to_axis_angle()
        return (angle, *axis)
    return tuple(q.to_euler(mode, Euler(near[:3], mode)))


def write_rotation(pose_bone, q: Quaternion, near) -> None:
    mode = pose_bone.rotation_mode
    setattr(pose_bone, rotation_path(mode), channels_from_quaternion(mode, q, near))


def basis_matrix(location, q: Quaternion, scale) -> np.ndarray:
    """4x4 basis (local) matrix from location, rotation and scale, as Blender composes it."""
    return matrix_to_np(Matrix.LocRotScale(location, q, scale))


def rotation_of(matrix: np.ndarray) -> Quaternion:
    """Rotation of a 4x4 or 3x3 matrix that may carry positive scale."""
    m = np.array(matrix, dtype=np.float64)[:3, :3]
    m = m / np.linalg.norm(m, axis=0)
    return Matrix(m.tolist()).to_quaternion()
