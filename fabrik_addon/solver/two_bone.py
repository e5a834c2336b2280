"""Analytic two-bone IK (law of cosines) with pole or rolled bend plane."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .analytic import Point, law_of_cosines_points
from .checks import bone_lengths, check_joints, check_points
from .fabrik import DEFAULT_MAX_ITERATIONS, DEFAULT_TOLERANCE, pad3, solve_chain
from .limits import ChainLimits, Limit
from .result import SolveResult
from .soft import DEFAULT_MAX_STRETCH, DEFAULT_SOFTNESS, check_soft_options, ease_target, stretch_about


def solve_two_bone(
    joints: object,
    target: object,
    *,
    pole: object = None,
    tolerance: float = DEFAULT_TOLERANCE,
    limits: ChainLimits | Sequence[Limit] | None = None,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    softness: float = DEFAULT_SOFTNESS,
    use_stretch: bool = False,
    max_stretch: float = DEFAULT_MAX_STRETCH,
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
        Solved as :func:`.fabrik.solve_chain` solves a limited two-bone chain: this analytic pose where the
        limits allow it, else the fit in swing or hinge coordinates nearest it (continuous in the inputs);
        the returned pose never breaks a limit.
    softness, use_stretch, max_stretch
        Soft IK and stretch, as in :func:`.fabrik.solve_chain`.

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
    if limits is not None:
        # One limited solve for two bones, solve_chain's. Limited FABRIK from the analytic pose, used here until
        # now, stopped where its passes did: a hinged arm under an FK bone moved 4e-3-0.22 for start poses that
        # differ by float32 rounding (its rotation modes), and 0.012-0.028 rad between the Blender layer's paths.
        return solve_chain(start, target, pole=pole, tolerance=tolerance, limits=limits,
                           max_iterations=max_iterations, softness=softness, use_stretch=use_stretch,
                           max_stretch=max_stretch)
    dim = start.shape[1]
    tgt = pad3(check_points(target, (dim,), "target"))
    pole3 = None if pole is None else pad3(check_points(pole, (dim,), "pole"))
    if not (math.isfinite(tolerance) and tolerance >= 0.0):
        raise ValueError(f"tolerance must be a finite number >= 0, got {tolerance!r}")
    check_soft_options(softness, use_stretch, max_stretch)
    start3 = pad3(start)
    lengths = bone_lengths(start3)
    goal, factor = tgt, 1.0
    if softness or use_stretch:
        eased, factor, _ = ease_target(start3[0], tgt, float(lengths.sum()), softness, use_stretch, max_stretch)
        goal = np.array(eased)
        start3 = stretch_about(start3, start3[0], factor)
        lengths = bone_lengths(start3)
    out = two_bone_pose(start3, goal, pole3, float(lengths[0]), float(lengths[1]))
    error = float(np.linalg.norm(out[2] - tgt))  # (the eased goal's miss is by design)
    return SolveResult(out[:, :dim], error, 1, error <= tolerance, factor)


def two_bone_pose(start: np.ndarray, target: np.ndarray, pole: np.ndarray | None, l1: float, l2: float) -> np.ndarray:
    """Joints ``(3, 3)`` of the analytic solution for a 3D start pose ``(3, 3)``."""
    return np.array(two_bone_points(start.tolist(), target.tolist(), None if pole is None else pole.tolist(), l1, l2))


def two_bone_points(start: Sequence[Sequence[float]], target: Sequence[float], pole: Sequence[float] | None,
                    l1: float, l2: float, *, softness: float = DEFAULT_SOFTNESS, use_stretch: bool = False,
                    max_stretch: float = DEFAULT_MAX_STRETCH) -> list[Point]:
    """:func:`two_bone_pose` on plain floats: three (x, y, z) joints in, three out.

    The Blender layer calls this directly for its few-chain path, where numpy's per-call cost would
    be most of the work. Soft IK and stretch as in :func:`solve_two_bone`; with stretch the bones come
    out ``factor * l1`` and ``factor * l2`` long, the factor given by :func:`.soft.stretch_factor`.
    """
    check_soft_options(softness, use_stretch, max_stretch)
    if softness or use_stretch:
        target, factor, _ = ease_target(start[0], target, l1 + l2, softness, use_stretch, max_stretch)
        l1, l2 = l1 * factor, l2 * factor
    return law_of_cosines_points(start, target, pole, l1, l2)


__all__ = ["Point", "solve_two_bone", "two_bone_pose", "two_bone_points"]
