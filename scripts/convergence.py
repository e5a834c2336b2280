"""Convergence table: iterations FABRIK needs to bring the tip within 0.1% of the chain's length.

    python scripts/convergence.py [--trials 1000]

Typical chains: gently curving (like a limb or tentacle at rest), targets taken from forward
kinematics of random poses of the same chain (so reachable), solved from the rest pose. The project's
goal: below 0.1% of chain length within 5 iterations for typical chains.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabrik_addon.solver import solve_chain  # noqa: E402
from rigkit.chains import curving_chain  # noqa: E402


def typical_chain(rng: np.random.Generator, n: int) -> np.ndarray:
    return curving_chain(rng, n, spread=0.2, lengths=(0.5, 1.0))


def fk_target(rng: np.random.Generator, joints: np.ndarray) -> np.ndarray:
    lengths = np.linalg.norm(np.diff(joints, axis=0), axis=1)
    rest = np.diff(joints, axis=0) / lengths[:, None]
    d = rest + rng.normal(scale=0.5, size=rest.shape)
    d /= np.linalg.norm(d, axis=1)[:, None]
    return joints[0] + (lengths[:, None] * d).sum(axis=0)


def table(trials: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for n in (3, 10, 50):
        iterations, within5, reached = [], 0, 0
        for _ in range(trials):
            joints = typical_chain(rng, n)
            target = fk_target(rng, joints)
            tolerance = 1e-3 * np.linalg.norm(np.diff(joints, axis=0), axis=1).sum()
            result = solve_chain(joints, target, tolerance=tolerance, max_iterations=500)
            reached += result.reached
            if result.reached:
                iterations.append(result.iterations)
                within5 += result.iterations <= 5
        rows.append({"bones": n, "trials": trials, "reached": reached / trials,
                     "median": float(np.median(iterations)), "p99": float(np.percentile(iterations, 99)),
                     "within_5": within5 / trials})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    args = parser.parse_args()
    print("| bones | trials | reached | median iterations | 99th percentile | within 5 iterations |")
    print("|---:|---:|---:|---:|---:|---:|")
    for row in table(args.trials):
        print(f"| {row['bones']} | {row['trials']} | {100 * row['reached']:.1f}% | {row['median']:.0f} | "
              f"{row['p99']:.0f} | {100 * row['within_5']:.1f}% |")


if __name__ == "__main__":
    main()
