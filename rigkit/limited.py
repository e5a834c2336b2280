"""Random chains with cone limits and limit-respecting poses, for the limit tests and figures."""

from __future__ import annotations

import numpy as np

from fabrik_addon.solver import ConeLimit
from fabrik_addon.solver.limits import resolve_limits
from rigkit.chains import curving_chain


def random_cones(rng: np.random.Generator, n: int, low_deg: float = 20.0, high_deg: float = 90.0) -> list[ConeLimit]:
    return [ConeLimit(*np.radians(rng.uniform(low_deg, high_deg, 4))) for _ in range(n)]


def random_rest_chain(rng: np.random.Generator, n: int) -> np.ndarray:
    """A gently curving chain, like a tentacle or finger at rest."""
    lengths = rng.uniform(0.3, 1.0, n)  # drawn before the directions, as the seeded tests were tuned with
    return curving_chain(rng, n, spread=0.25, lengths=lengths)


def inside_direction(rng: np.random.Generator, cone: ConeLimit) -> np.ndarray:
    """A random local direction inside ``cone``."""
    phi = rng.uniform(0.0, 2.0 * np.pi)
    radius = np.sqrt(rng.uniform(0.0, 1.0))
    a = cone.right if np.cos(phi) >= 0 else cone.left
    b = cone.up if np.sin(phi) >= 0 else cone.down
    u, v = radius * a * np.cos(phi), radius * b * np.sin(phi)
    theta = np.hypot(u, v)
    if theta == 0.0:
        return np.array([0.0, 1.0, 0.0])
    return np.array([np.sin(theta) * u / theta, np.cos(theta), np.sin(theta) * v / theta])


def limited_pose(rng: np.random.Generator, rest: np.ndarray, cones: list[ConeLimit]) -> np.ndarray:
    """Forward kinematics of a random pose that keeps every cone, measured as the solver measures."""
    resolved = resolve_limits(cones, rest)
    lengths = np.linalg.norm(np.diff(rest, axis=0), axis=1)
    joints = [rest[0]]
    parent = resolved.base_frame
    for i, cone in enumerate(cones):
        d = resolved.limit_frame(parent, i) @ inside_direction(rng, cone)
        joints.append(joints[-1] + lengths[i] * d)
        parent = resolved.bone_frame(i, d)
    return np.array(joints)
