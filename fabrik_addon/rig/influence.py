"""Influence below 1: a blend of each bone's local rotation between the pose without IK and the IK pose.

Every bone turns the same fraction ``s`` of its way (a slerp of its local rotation, as Blender's
constraint blends), so no bone turns farther from its pose without IK than at influence 1. ``s`` is
the first fraction at which the tip is ``(1 - influence)`` of the way from its distance without IK to
its distance at influence 1: the distance then falls with influence, and 0.5 is halfway.

Aiming the whole solve at a blended target (the previous rule) put the distance exactly halfway but
let bones turn past their influence-1 rotation (4 of 40 frames of a 2-bone arm, 60 bone-frames of a
10-bone chain in world space); a slerp by ``influence`` itself kept the bones in range but put the tip
of a 10-bone chain 0.58-0.79 of the way and let the distance grow with influence on 8 of 40 targets.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..solver.rotations import slerp_quaternions
from .inputs import forward_kinematics

# The fraction is found on a grid of GRID + 1 fractions, then REFINE times on GRID + 1 fractions inside
# the bracket, then linearly: a bracket of (1/32)^3 = 3e-5 of the way, the distance within ~1e-9 of
# the chain's length of where a smooth pose puts it.
GRID = 32
REFINE = 2


def blend_fraction(parent: np.ndarray, rel: np.ndarray, location: np.ndarray, scale: np.ndarray,
                   base: np.ndarray, full: np.ndarray, end: np.ndarray, target: np.ndarray, influence: float,
                   full_scale: np.ndarray | None = None) -> float:
    """The slerp fraction of the local rotations for ``influence`` (0 < influence < 1).

    Parameters
    ----------
    parent : ndarray, shape (4, 4)
        Armature-space matrix of the chain root's parent.
    rel : ndarray, shape (n, 4, 4)
        Each bone's rest matrix relative to its parent.
    location, scale : ndarray, shape (n, 3)
        Each bone's basis location and scale without IK.
    base, full : ndarray, shape (n, 4)
        Each bone's local rotation (wxyz) without IK and at influence 1.
    end : ndarray, shape (4,)
        The point that reaches for the target, in the last bone's space (homogeneous).
    target : ndarray, shape (3,)
        Armature space.
    full_scale : ndarray, shape (n, 3), optional
        Each bone's scale at influence 1 (a stretching chain); it blends with ``scale`` by the same fraction.
    """
    def distances(fractions: np.ndarray) -> np.ndarray:  # the poses by .inputs.forward_kinematics
        return tip_distances(fractions[:, None], parent, rel, location, scale, base, full, end, target, full_scale)

    ends = distances(np.linspace(0.0, 1.0, 2))
    start, reached = float(ends[0]), float(ends[1])
    if not reached < start:  # influence 1 is no closer: blend the rotations by the influence itself
        return influence
    return first_fraction(distances, start + influence * (reached - start), start, reached)


def first_fraction(distances: Callable[[np.ndarray], np.ndarray], goal: float, d_low: float, d_high: float) -> float:
    """The first fraction in [0, 1] at which ``distances`` (of an array of fractions) falls to ``goal``, given
    its values ``d_low`` at 0 and ``d_high`` at 1: 0 where ``d_low`` is already there; where no fraction of the
    first grid gets there (``d_high`` above ``goal`` too), the fraction of that grid that comes nearest."""
    low, high = 0.0, 1.0
    for _ in range(REFINE + 1):
        s = np.linspace(low, high, GRID + 1)
        d = distances(s)
        d[0], d[-1] = d_low, d_high  # the bracket's ends as measured before (the same floats)
        first = int(np.argmax(d <= goal))  # within a bracket, d[-1] <= goal holds at its end
        if not d[first] <= goal:
            return float(s[int(np.argmin(d))])
        if first == 0:
            return float(low)
        low, high, d_low, d_high = float(s[first - 1]), float(s[first]), float(d[first - 1]), float(d[first])
    return low + (high - low) * (d_low - goal) / (d_low - d_high)


def blend_rotations(base: np.ndarray, full: np.ndarray, fraction: float | np.ndarray) -> np.ndarray:
    """Local rotations ``(n, 4)`` the ``fraction`` (one, or one per bone) of the way from ``base`` to ``full``, in
    ``base``'s hemisphere."""
    q = slerp_quaternions(base, full, np.broadcast_to(np.asarray(fraction, dtype=np.float64), (len(base),)))
    return np.where(np.einsum("ki,ki->k", q, base)[:, None] < 0.0, -q, q)


def tip_distances(fractions: np.ndarray, parent, rel, location, scale, base, full, end, target,
                  full_scale=None) -> np.ndarray:
    """Per row of ``fractions (C, n)`` (or ``(C, 1)``: one for every bone), the distance from ``target`` of the
    point ``end`` of the last bone, each bone's rotation (and scale) that fraction of its way from ``base`` to
    ``full``; the arguments as :func:`blend_fraction` takes them."""
    count = len(fractions)
    n = len(base)
    each = np.broadcast_to(fractions, (count, n))
    q = slerp_quaternions(np.broadcast_to(base, (count, n, 4)), np.broadcast_to(full, (count, n, 4)), each)
    scales = np.broadcast_to(scale, (count, n, 3))
    if full_scale is not None:
        scales = scale + each[:, :, None] * (full_scale - scale)
    pose = forward_kinematics(np.broadcast_to(parent, (count, 4, 4)), np.broadcast_to(rel, (count, n, 4, 4)), q,
                               np.broadcast_to(location, (count, n, 3)), scales)
    tips = pose[:, -1] @ end
    return np.linalg.norm(tips[:, :3] - target, axis=1)
