"""Input validation: every public solver raises ``ValueError`` naming the bad input."""

from __future__ import annotations

import numpy as np

# Bones shorter than this fraction of the chain's longest bone count as zero-length.
ZERO_LENGTH = 1e-9


def check_joints(joints: object, name: str = "joints") -> np.ndarray:
    """Return ``joints`` as a float64 ``(N+1, D)`` array (D in 2, 3, N >= 1) or raise ``ValueError``."""
    arr = np.array(joints, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] not in (2, 3) or arr.shape[0] < 2:
        raise ValueError(f"{name} must have shape (N+1, 2) or (N+1, 3) with N >= 1 bones, got {arr.shape}")
    check_finite(arr, name)
    return arr


def check_batch_joints(joints: object, name: str = "joints") -> np.ndarray:
    """Return ``joints`` as a float64 ``(C, N+1, 3)`` array or raise ``ValueError``."""
    arr = np.array(joints, dtype=np.float64)
    if arr.ndim != 3 or arr.shape[2] != 3 or arr.shape[1] < 2:
        raise ValueError(f"{name} must have shape (C, N+1, 3) with N >= 1 bones, got {arr.shape}")
    check_finite(arr, name)
    return arr


def check_points(points: object, shape: tuple[int, ...], name: str) -> np.ndarray:
    """Return ``points`` as a float64 array of exactly ``shape`` with finite values."""
    arr = np.array(points, dtype=np.float64)
    if arr.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {arr.shape}")
    check_finite(arr, name)
    return arr


def check_finite(arr: np.ndarray, name: str) -> None:
    if not np.isfinite(arr).all():
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(f"{name} contains NaN or infinity (first at index {tuple(int(i) for i in bad)})")


def bone_lengths(joints: np.ndarray, name: str = "joints") -> np.ndarray:
    """Lengths of consecutive joint pairs along the second-to-last axis; raise on a zero-length bone."""
    steps = joints[..., 1:, :] - joints[..., :-1, :]
    lengths = np.sqrt(np.einsum("...i,...i->...", steps, steps))
    limit = ZERO_LENGTH * max(float(lengths.max()), 1.0)
    if lengths.min() <= limit:  # the detailed search runs only when something is wrong
        where = np.argwhere(lengths <= limit)[0]
        bone = int(where[-1])
        chain = f" in chain {int(where[0])}" if lengths.ndim == 2 else ""
        raise ValueError(f"{name}: bone {bone}{chain} has zero length")
    return lengths
