"""Analytic two-bone IK (law of cosines) with pole or rolled bend plane."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .analytic import two_bone_points
from .checks import bone_lengths, check_joints, check_points
from .fabrik import DEFAULT_MAX_ITERATIONS, DEFAULT_MIN_IMPROVEMENT, DEFAULT_TOLERANCE, pad3, run_limited
from .limits import LIMIT_SLACK, ChainLimits, Limit, resolve_limits
from .result import SolveResult


def solve_two_bone(
    joints: object,
    target: object,
    *,
    pole: object = None,
    tolerance: float = DEFAULT_TOLERANCE,
    limits: ChainLimits | Sequence[Limit] | None = None,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
) -> SolveResult:
    """Place a two-bone chain analytically.

    Parameters
    ----------
    joints : array_like, shape (3, D)
        Root, middle joint (elbow/knee) and tip of the start pose, D = 2 or 3. Never mutated.
    target : array_like, shape (D,)
    pole : array_like, shape (D,), optional
        The middle joint lies in the plane (root, target, pole), on the pole's side. Without a pole the
        start pose's bend plane is rolled by the minimal rotation that aims the chain at the target,
        so the bend does not flip as the target sweeps.
    tolerance : float
        ``reached`` is ``error <= tolerance``.
    limits : ChainLimits or sequence of two ConeLimit/HingeLimit/None, optional
        When the analytic pose breaks a limit, limited FABRIK continues from it (up to
        ``max_iterations``); the returned pose never breaks a limit.

    Returns
    -------
    SolveResult
        Too far: the chain lies straight toward the target. Too near (closer than
        ``|l1 - l2|``): fully folded toward the target. Both with ``reached`` False unless within
        tolerance.
    """
    start = check_joints(joints)
    if start.shape[0] != 3:
        raise ValueError(f"solve_two_bone needs joints of shape (3, D), got {start.shape}")
    dim = start.shape[1]
    tgt = pad3(check_points(target, (dim,), "target"))
    pole3 = None if pole is None else pad3(check_points(pole, (dim,), "pole"))
    if not (math.isfinite(tolerance) and tolerance >= 0.0):
        raise ValueError(f"tolerance must be a finite number >= 0, got {tolerance!r}")
    start3 = pad3(start)
    lengths = bone_lengths(start3)
    out = two_bone_pose(start3, tgt, pole3, float(lengths[0]), float(lengths[1]))
    error = float(np.linalg.norm(out[2] - tgt))
    iterations = 1
    frames = None
    if limits is not None:
        resolved = resolve_limits(limits, start3)
        if resolved.violations(out).max() > LIMIT_SLACK:
            dirs = np.diff(start3, axis=0) / lengths[:, None]
            out, error, extra = run_limited(out, tgt, pole3, dirs, lengths, False, tolerance, max_iterations,
                                           DEFAULT_MIN_IMPROVEMENT, resolved)
            iterations += extra
        frames = resolved.frames_of(out)
    return SolveResult(out[:, :dim], error, iterations, error <= tolerance, frames)


def two_bone_pose(start: np.ndarray, target: np.ndarray, pole: np.ndarray | None, l1: float, l2: float) -> np.ndarray:
    """Joints ``(3, 3)`` of the analytic solution for a 3D start pose ``(3, 3)``."""
    return np.array(two_bone_points(start.tolist(), target.tolist(), None if pole is None else pole.tolist(), l1, l2))


__all__ = ["LIMIT_SLACK", "solve_two_bone", "two_bone_pose", "two_bone_points"]
