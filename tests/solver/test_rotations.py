"""Rotation helpers shared by the solver and the Blender layer."""

import numpy as np

from fabrik_addon.solver.rotations import (
    cross,
    inverse3,
    matrices_from_quaternions,
    matrices_from_two_vectors,
    matrix_from_two_vectors,
    quaternion_from_matrix,
    slerp_quaternions,
)


def unit_quaternions(rng, count):
    q = rng.normal(size=(count, 4))
    q /= np.linalg.norm(q, axis=1)[:, None]
    q[:4] = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0.6, 0.8, 0]]  # identity and half turns
    return q


def test_quaternion_matrix_round_trip_including_half_turns():
    q = unit_quaternions(np.random.default_rng(70), 5000)
    m = matrices_from_quaternions(q)
    np.testing.assert_allclose(m @ np.swapaxes(m, 1, 2), np.broadcast_to(np.eye(3), m.shape), atol=1e-12)
    np.testing.assert_allclose(np.linalg.det(m), 1.0, atol=1e-12)
    back = quaternion_from_matrix(m)
    assert (back[:, 0] >= 0).all()
    np.testing.assert_allclose(np.minimum(np.abs(back - q).max(1), np.abs(back + q).max(1)), 0.0, atol=1e-12)


def test_from_two_vectors_maps_a_onto_b_by_the_smallest_turn():
    rng = np.random.default_rng(71)
    a = rng.normal(size=(2000, 3))
    b = rng.normal(size=(2000, 3))
    a /= np.linalg.norm(a, axis=1)[:, None]
    b /= np.linalg.norm(b, axis=1)[:, None]
    b[0] = -a[0]  # opposite: a half turn about a perpendicular axis
    m = matrices_from_two_vectors(a, b)
    np.testing.assert_allclose(np.einsum("kij,kj->ki", m, a), b, atol=1e-9)
    angle = np.arccos(np.clip((np.trace(m, axis1=1, axis2=2) - 1) / 2, -1, 1))
    np.testing.assert_allclose(angle, np.arccos(np.clip(np.einsum("ki,ki->k", a, b), -1, 1)), atol=1e-6)
    np.testing.assert_allclose(m[5], matrix_from_two_vectors(a[5], b[5]), atol=1e-12)


def test_slerp_ends_and_midpoint():
    q = unit_quaternions(np.random.default_rng(72), 200)
    r = unit_quaternions(np.random.default_rng(73), 200)
    for t, expect in ((0.0, q), (1.0, None)):
        out = slerp_quaternions(q, r, np.full(len(q), t))
        if expect is not None:
            np.testing.assert_allclose(out, expect, atol=1e-12)
        else:
            np.testing.assert_allclose(np.abs(np.einsum("ki,ki->k", out, r)), 1.0, atol=1e-12)
    mid = slerp_quaternions(q, r, np.full(len(q), 0.5))
    half = np.abs(np.einsum("ki,ki->k", mid, q))
    np.testing.assert_allclose(half, np.abs(np.einsum("ki,ki->k", mid, r)), atol=1e-9)


def test_cross_and_inverse3_match_numpy():
    rng = np.random.default_rng(74)
    a, b = rng.normal(size=(2, 500, 3))
    np.testing.assert_allclose(cross(a, b), np.cross(a, b), atol=1e-12)
    m = rng.normal(size=(4, 50, 3, 3))
    np.testing.assert_allclose(inverse3(m), np.linalg.inv(m), rtol=1e-9, atol=1e-9)
