"""Small rotation helpers (3x3 matrices, wxyz quaternions), numpy only."""

from __future__ import annotations

import math

import numpy as np

_TINY = 1e-12


def matrix_from_two_vectors(a: np.ndarray, b: np.ndarray, fallback_axis: np.ndarray | None = None) -> np.ndarray:
    """Minimal rotation taking unit vector ``a`` onto unit vector ``b``.

    Parameters
    ----------
    a, b : ndarray, shape (3,)
        Unit vectors.
    fallback_axis : ndarray, shape (3,), optional
        Axis (perpendicular to ``a``) for the half turn when ``b`` is opposite ``a``; a deterministic
        perpendicular is used when omitted.

    Returns
    -------
    ndarray, shape (3, 3)
    """
    # Plain floats: for one pair, np.cross and friends cost ~20x the arithmetic (this runs per bone
    # per pass in limited solves).
    ax, ay, az = float(a[0]), float(a[1]), float(a[2])
    bx, by, bz = float(b[0]), float(b[1]), float(b[2])
    c = ax * bx + ay * by + az * bz
    if c < -1.0 + 1e-12:
        axis = perpendicular(a) if fallback_axis is None else fallback_axis / np.linalg.norm(fallback_axis)
        return 2.0 * np.outer(axis, axis) - np.eye(3)
    vx, vy, vz = ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx
    k = 1.0 / (1.0 + c)
    # I + [v]x + [v]x^2 / (1 + c), expanded.
    return np.array([
        [1.0 - (vy * vy + vz * vz) * k, vx * vy * k - vz, vx * vz * k + vy],
        [vx * vy * k + vz, 1.0 - (vx * vx + vz * vz) * k, vy * vz * k - vx],
        [vx * vz * k - vy, vy * vz * k + vx, 1.0 - (vx * vx + vy * vy) * k],
    ])


def turn_x(angle: float) -> np.ndarray:
    """Rotation by ``angle`` about X (a hinge's turn in its limit frame)."""
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def turns_x(angle: np.ndarray) -> np.ndarray:
    """Rotations ``(K, 3, 3)`` by ``angle (K,)`` about X: :func:`turn_x`, batched."""
    c, s = np.cos(angle), np.sin(angle)
    out = np.zeros((len(angle), 3, 3))
    out[:, 0, 0] = 1.0
    out[:, 1, 1], out[:, 1, 2], out[:, 2, 1], out[:, 2, 2] = c, -s, s, c
    return out


def matrices_from_two_vectors(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Batched :func:`matrix_from_two_vectors` for ``(K, 3)`` unit vectors; returns ``(K, 3, 3)``.

    R = (1 - |v|^2 k) I + [v]x + k v v^T with v = a x b, k = 1 / (1 + a.b): about twenty whole-array
    calls (``np.cross`` alone costs 20-60 us a call).
    """
    c = np.einsum("ij,ij->i", a, b)
    v = cross(a, b)
    opposite = c < -1.0 + 1e-12
    k = 1.0 / np.where(opposite, 1.0, 1.0 + c)
    out = v[:, :, None] * (v * k[:, None])[:, None, :]
    out[:, _DIAGONAL, _DIAGONAL] += (1.0 - np.einsum("ij,ij->i", v, v) * k)[:, None]
    out += v[:, _SKEW_INDEX] * _SKEW_SIGN
    if opposite.any():
        for i in np.flatnonzero(opposite):
            out[i] = matrix_from_two_vectors(a[i], b[i])
    return out


_DIAGONAL = np.arange(3)
# [v]x = v[_SKEW_INDEX] * _SKEW_SIGN: rows (0, -z, y), (z, 0, -x), (-y, x, 0).
_SKEW_INDEX = np.array([[0, 2, 1], [2, 0, 0], [1, 0, 0]])
_SKEW_SIGN = np.array([[0.0, -1.0, 1.0], [1.0, 0.0, -1.0], [-1.0, 1.0, 0.0]])
_NEXT = np.array([1, 2, 0])
_AFTER = np.array([2, 0, 1])


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cross products along the last axis in five whole-array calls (``np.cross`` makes dozens)."""
    return a[..., _NEXT] * b[..., _AFTER] - a[..., _AFTER] * b[..., _NEXT]


def skew(a: np.ndarray) -> np.ndarray:
    """``[a]x``, the cross-product matrix of a 3-vector: ``skew(a) @ b == a x b``."""
    return np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])


def inverse3(m: np.ndarray) -> np.ndarray:
    """Inverses of 3x3 matrices ``(..., 3, 3)`` by the adjugate: row i is the cross product of the two
    columns other than i, over the determinant. A few whole-array calls instead of LAPACK's loop
    (~1-2 us a matrix)."""
    columns = np.swapaxes(m, -1, -2)
    rows = cross(columns[..., _NEXT, :], columns[..., _AFTER, :])
    det = np.einsum("...i,...i->...", columns[..., 0, :], rows[..., 0, :])
    return rows / det[..., None, None]


def normalized(v: np.ndarray, axis: int = -1) -> np.ndarray:
    """``v`` divided by its norms along ``axis`` (einsum: a fraction of ``np.linalg.norm``'s cost)."""
    return v / np.sqrt((v * v).sum(axis=axis, keepdims=True))


def perpendicular(u: np.ndarray) -> np.ndarray:
    """A deterministic unit vector perpendicular to unit ``u``, kept in the XY plane when ``u`` is.

    Crosses ``u`` with the world axis it is least aligned with, preferring Z on ties so that a 2D
    chain (Z = 0) bends within its plane.
    """
    return np.array(perpendicular_floats(float(u[0]), float(u[1]), float(u[2])))


def perpendicular_floats(ux: float, uy: float, uz: float) -> tuple[float, float, float]:
    """:func:`perpendicular` on plain floats."""
    if abs(uz) <= abs(ux) and abs(uz) <= abs(uy):  # u x Z
        px, py, pz = uy, -ux, 0.0
    elif abs(ux) <= abs(uy):  # u x X
        px, py, pz = 0.0, uz, -uy
    else:  # u x Y
        px, py, pz = -uz, 0.0, ux
    norm = math.sqrt(px * px + py * py + pz * pz)
    return px / norm, py / norm, pz / norm


def turn_floats(ax: float, ay: float, az: float, bx: float, by: float, bz: float,
                vx: float, vy: float, vz: float) -> tuple[float, float, float]:
    """Vector ``v`` turned by :func:`matrix_from_two_vectors` (unit ``a`` onto unit ``b``), on floats."""
    c = ax * bx + ay * by + az * bz
    if c < -1.0 + 1e-12:  # a half turn about a perpendicular of a
        kx, ky, kz = perpendicular_floats(ax, ay, az)
        t = 2.0 * (kx * vx + ky * vy + kz * vz)
        return t * kx - vx, t * ky - vy, t * kz - vz
    wx, wy, wz = ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx
    cx, cy, cz = wy * vz - wz * vy, wz * vx - wx * vz, wx * vy - wy * vx  # w x v
    k = 1.0 / (1.0 + c)
    return (vx + cx + k * (wy * cz - wz * cy), vy + cy + k * (wz * cx - wx * cz),
            vz + cz + k * (wx * cy - wy * cx))


def parallel_transport_frames(joints: np.ndarray) -> np.ndarray:
    """Bone frames for a pose with no roll information.

    Bone 0 takes the minimal rotation of the identity from +Y onto its direction; each later bone takes
    its parent's frame turned by the minimal rotation between the two directions (no added twist).
    Columns are the local X, Y (along the bone) and Z axes, as in Blender.

    Parameters
    ----------
    joints : ndarray, shape (N+1, 3)

    Returns
    -------
    ndarray, shape (N, 3, 3)
    """
    dirs = np.diff(joints, axis=0)
    dirs /= np.linalg.norm(dirs, axis=1)[:, None]
    frames = np.empty((len(dirs), 3, 3))
    frame = np.eye(3)
    prev = np.array([0.0, 1.0, 0.0])
    for i, d in enumerate(dirs):
        frame = matrix_from_two_vectors(prev, d, fallback_axis=frame[:, 0]) @ frame
        frames[i] = frame
        prev = d
    return frames


def quaternion_from_matrix(m: np.ndarray) -> np.ndarray:
    """wxyz unit quaternion(s) of rotation matrix(es) ``(..., 3, 3)``; returns ``(..., 4)`` with w >= 0.

    Row k of the symmetric matrix below is 4 * q_k * q: taking the row with the largest diagonal
    (the largest component) keeps it accurate for every angle, half turns included.
    """
    m = np.asarray(m, dtype=np.float64)
    m00, m01, m02 = m[..., 0, 0], m[..., 0, 1], m[..., 0, 2]
    m10, m11, m12 = m[..., 1, 0], m[..., 1, 1], m[..., 1, 2]
    m20, m21, m22 = m[..., 2, 0], m[..., 2, 1], m[..., 2, 2]
    a, b, c = m21 - m12, m02 - m20, m10 - m01
    d, e, f = m01 + m10, m02 + m20, m12 + m21
    diagonal = np.stack([1.0 + m00 + m11 + m22, 1.0 + m00 - m11 - m22, 1.0 - m00 + m11 - m22,
                         1.0 - m00 - m11 + m22], axis=-1)
    rows = np.stack([diagonal[..., 0], a, b, c,
                     a, diagonal[..., 1], d, e,
                     b, d, diagonal[..., 2], f,
                     c, e, f, diagonal[..., 3]], axis=-1).reshape(m.shape[:-2] + (4, 4))
    k = diagonal.argmax(axis=-1)
    q = np.take_along_axis(rows, k[..., None, None], axis=-2)[..., 0, :]
    q = normalized(q)
    return np.where(q[..., :1] < 0.0, -q, q)


def matrices_from_quaternions(q: np.ndarray) -> np.ndarray:
    """Rotation matrices ``(..., 3, 3)`` of wxyz quaternions ``(..., 4)`` (normalised first).

    R = (w^2 - |v|^2) I + 2 v v^T + 2 w [v]x, in whole-array calls.
    """
    q = normalized(q)
    w, v = q[..., 0], q[..., 1:]
    out = 2.0 * v[..., :, None] * v[..., None, :]
    out[..., _DIAGONAL, _DIAGONAL] += (w * w - (v * v).sum(axis=-1))[..., None]
    out += (2.0 * w)[..., None, None] * (v[..., _SKEW_INDEX] * _SKEW_SIGN)
    return out


def slerp_quaternions(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Spherical interpolation from unit quaternions ``a`` to ``b`` (``(..., 4)``) by ``t`` (``(...)``),
    along the shorter arc."""
    dot = np.einsum("...i,...i->...", a, b)
    b = np.where(dot[..., None] < 0.0, -b, b)
    dot = np.abs(dot)
    theta = np.arccos(np.clip(dot, -1.0, 1.0))
    sin = np.sin(theta)
    near = sin < 1e-9
    safe = np.where(near, 1.0, sin)
    wa = np.where(near, 1.0 - t, np.sin((1.0 - t) * theta) / safe)
    wb = np.where(near, t, np.sin(t * theta) / safe)
    out = wa[..., None] * a + wb[..., None] * b
    return out / np.linalg.norm(out, axis=-1, keepdims=True)


def roll_turn_floats(mx: float, my: float, mz: float, wx: float, wy: float, wz: float,
                     kx: float, ky: float, kz: float, tiny: float) -> tuple[float, float] | None:
    """Cosine and sine of the turn about unit axis ``k`` that carries vector ``m``'s part across ``k`` onto
    the direction of ``w``'s part across it; None when either part is shorter than ``tiny``.

    The rigid roll of a chain's mean bend onto its pole (FABRIK's pole step and the curled start's).
    """
    t = mx * kx + my * ky + mz * kz
    mx, my, mz = mx - t * kx, my - t * ky, mz - t * kz
    t = wx * kx + wy * ky + wz * kz
    wx, wy, wz = wx - t * kx, wy - t * ky, wz - t * kz
    m = math.sqrt(mx * mx + my * my + mz * mz)
    w = math.sqrt(wx * wx + wy * wy + wz * wz)
    if m <= tiny or w <= tiny:
        return None
    c = (mx * wx + my * wy + mz * wz) / (m * w)
    s = (kx * (my * wz - mz * wy) + ky * (mz * wx - mx * wz) + kz * (mx * wy - my * wx)) / (m * w)
    return c, s
