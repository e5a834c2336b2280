"""Result types shared by every solver."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class SolveResult:
    """Outcome of one solve.

    Attributes
    ----------
    joints : ndarray, shape (N+1, D)
        Solved joint positions (a new array; the input is never mutated).
    error : float
        Distance from the tip (last joint) to the target.
    iterations : int
        Passes used (0 when the start pose already satisfied the request).
    reached : bool
        ``error <= tolerance``.
    stretch : float
        The factor every bone's length was scaled by (1 without ``use_stretch``).
    converged : bool
        The solve settled: it reached, or stopped because no pass brought the tip closer (the target is
        out of reach, or out of reach under the limits). False when it ran out of iterations while
        still closing in: more iterations would get closer.
    frames : ndarray, shape (N, 3, 3), or None
        With joint limits: each bone's frame (columns X, Y along the bone, Z) as the limits measured it,
        rolls and hinge turns included (3D chains); None without limits.
    """

    joints: np.ndarray
    error: float
    iterations: int
    reached: bool
    stretch: float = 1.0
    converged: bool = True
    frames: np.ndarray | None = None


@dataclass(frozen=True)
class ChainResults:
    """Outcome of a batched solve, one row per chain.

    Attributes
    ----------
    joints : ndarray, shape (C, N+1, 3)
    error : ndarray, shape (C,)
    iterations : ndarray of int, shape (C,)
    reached : ndarray of bool, shape (C,)
    stretch : ndarray, shape (C,)
        Per-chain stretch factor (ones when not given).
    converged : ndarray of bool, shape (C,), optional
        As :attr:`SolveResult.converged` (all True when not given).
    """

    joints: np.ndarray
    error: np.ndarray
    iterations: np.ndarray
    reached: np.ndarray
    stretch: np.ndarray = field(default=None)  # type: ignore[arg-type]
    converged: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.stretch is None:
            object.__setattr__(self, "stretch", np.ones(len(self.error)))

    def __len__(self) -> int:
        return len(self.error)

    def __getitem__(self, index: int) -> SolveResult:
        return SolveResult(
            joints=self.joints[index],
            error=float(self.error[index]),
            iterations=int(self.iterations[index]),
            reached=bool(self.reached[index]),
            stretch=float(self.stretch[index]),
            converged=True if self.converged is None else bool(self.converged[index]),
        )
