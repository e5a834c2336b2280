"""Conversions between Blender data and plain Python/numpy values that several modules share: rotation
channels in any rotation mode, matrices to arrays, bulk reads of pose-bone properties, and the F-curve
data paths of bone properties.

Not every ``foreach_get``/``foreach_set`` goes through here: a bulk call that fills or reads an array
only one module owns stays beside that array (``rig/plan.py`` and ``rig/batch.py`` read chain settings
and bone channels, ``rig/small.py`` writes an armature's quaternions in one call, ``bake.py`` writes
keyframe points). ``docs/architecture.md`` lists them.
"""

from __future__ import annotations

import math

import bpy
import numpy as np
from mathutils import Euler, Matrix, Quaternion

ROTATION_PATHS = {
    'QUATERNION': "rotation_quaternion",
    'AXIS_ANGLE': "rotation_axis_angle",
}


def rotation_path(mode: str) -> str:
    return ROTATION_PATHS.get(mode, "rotation_euler")


def bone_path(name: str, prop: str) -> str:
    """F-curve data path of pose bone ``name``'s property ``prop``, whatever characters the name holds."""
    return f'pose.bones["{bpy.utils.escape_identifier(name)}"].{prop}'


def rotation_data_path(name: str, mode: str) -> str:
    """F-curve data path of the rotation channels that rotation mode ``mode`` uses on bone ``name``."""
    return bone_path(name, rotation_path(mode))


def matrix_to_np(matrix: Matrix) -> np.ndarray:
    return np.array(matrix, dtype=np.float64)


def bulk_read(collection, attribute: str, count: int, width: int) -> np.ndarray:
    """``count`` x ``width`` float values of ``attribute`` across a collection, in one ``foreach_get``."""
    flat = np.empty(count * width, dtype=np.float32)
    collection.foreach_get(attribute, flat)
    return flat.reshape(count, width).astype(np.float64)


def bulk_matrices(collection, attribute: str, count: int) -> np.ndarray:
    """(count, 4, 4) matrices of ``attribute`` across a collection, in one ``foreach_get``.

    Blender hands them out flat, column after column, and stores them as float32, so the bulk read
    loses nothing.
    """
    return bulk_read(collection, attribute, count, 16).reshape(-1, 4, 4).transpose(0, 2, 1)


def write_quaternions(ob, rows: np.ndarray) -> None:
    """Every pose bone's ``rotation_quaternion`` of ``ob`` from ``rows`` (B, 4), in one ``foreach_set``."""
    ob.pose.bones.foreach_set("rotation_quaternion", rows.astype(np.float32).ravel())
    # foreach_set does not tag the object (without a tag the pose lags a frame). 'DATA' is the tag a
    # rotation written through RNA gives (the pose update's geometry tag); an empty refresh tags every component.
    ob.update_tag(refresh={'DATA'})


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
        # In double precision: Quaternion.to_axis_angle takes a float32 arc cosine of w, which writes a 1e-4 rad
        # turn as 0 (up to 1e-3 rad lost, 4.2 and 5.0), in the channels written and in the pose without IK
        # read back through them (stored_channels). The same convention: angle in [0, 2 pi], w's sign kept.
        w, x, y, z = (float(c) for c in q)
        s = math.sqrt(x * x + y * y + z * z)
        if s == 0.0:
            return (2.0 * math.atan2(0.0, w), 0.0, 1.0, 0.0)
        return (2.0 * math.atan2(s, w), x / s, y / s, z / s)
    return tuple(q.to_euler(mode, Euler([_in_float32_reach(a) for a in near[:3]], mode)))


# Blender stores Euler angles as float32: at 1e6 rad its step is 0.06 rad, so an angle written near
# such a value lands visibly off. Beyond this, continuity is kept with the same angle minus whole turns.
_PRECISE_ANGLE = 1000.0


def _in_float32_reach(angle: float) -> float:
    if abs(angle) <= _PRECISE_ANGLE or not math.isfinite(angle):
        return angle if math.isfinite(angle) else 0.0
    return math.remainder(angle, 2.0 * math.pi)


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
