"""Joint positions for solver tests and benchmarks: random chains, forward kinematics, curving rest chains;
numpy only, no Blender."""

from __future__ import annotations

import numpy as np


def curving_chain(rng: np.random.Generator, n: int, spread: float,
                  lengths: np.ndarray | tuple[float, float] | None = None) -> np.ndarray:
    """A gently curving chain up +Z from the origin, like a limb, finger or tentacle at rest.

    Each bone's direction is +Z plus normal noise of scale ``spread``. ``lengths``: an array of ``n``
    bone lengths, a ``(low, high)`` range drawn uniformly after the directions, or None for unit bones.
    Returns the ``(n + 1, 3)`` joint positions.
    """
    directions = np.array([0.0, 0.0, 1.0]) + rng.normal(scale=spread, size=(n, 3))
    directions /= np.linalg.norm(directions, axis=1)[:, None]
    if lengths is None:
        bones = np.ones(n)
    elif isinstance(lengths, tuple):
        bones = rng.uniform(lengths[0], lengths[1], n)
    else:
        bones = np.asarray(lengths, dtype=np.float64)
    return np.vstack([np.zeros(3), np.cumsum(bones[:, None] * directions, axis=0)])

def random_lengths(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.uniform(0.2, 1.5, n)


def random_directions(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    d = rng.normal(size=(n, dim))
    return d / np.linalg.norm(d, axis=1)[:, None]


def chain_from(root: np.ndarray, lengths: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """Forward kinematics: joints (N+1, D) from a root, bone lengths and unit directions."""
    return np.vstack([root, root + np.cumsum(lengths[:, None] * directions, axis=0)])


def random_chain(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    root = rng.uniform(-2.0, 2.0, dim)
    return chain_from(root, random_lengths(rng, n), random_directions(rng, n, dim))


def reachable_target(rng: np.random.Generator, joints: np.ndarray) -> np.ndarray:
    """The tip of another pose of the same chain, so the target is surely reachable."""
    lengths = np.linalg.norm(np.diff(joints, axis=0), axis=1)
    other = chain_from(joints[0], lengths, random_directions(rng, len(lengths), joints.shape[1]))
    return other[-1]


def lengths_of(joints: np.ndarray) -> np.ndarray:
    return np.linalg.norm(np.diff(joints, axis=-2), axis=-1)
