"""Joint positions for solver tests and benchmarks: numpy only, no Blender."""

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
