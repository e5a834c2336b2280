"""The swing fit's cost per solve (pure solver, no Blender) on the issue's coned leg and neighbours.

    python scripts/swing_timing.py [--save FILE.npz] [--compare FILE.npz] [--rounds N] [--wall] [--only TEXT]

Each case is a chain, its cones, a pole or none and a path of targets; every target is solved with
:func:`solve_chain` (the Blender layer's per-chain solve) and timed. Printed per case: the median and p90
of a solve over the targets where the cones bind (the solve ran the swing fit) and over all targets, and
the median of the solve's iterations (free passes, fit steps and any limited-FABRIK passes) where the
fit ran, then on how many targets limited FABRIK ran after the fit and on how many its pose was kept.
Times are the process's CPU time (BLAS threads included), not the wall clock: on a machine
shared with other work the wall clock measures the others (``--wall`` uses it anyway). ``--save`` keeps
the poses and statuses, ``--compare`` prints the largest joint difference (over the chain's length), the
status changes and the poses that moved by over 1e-9 of the length against saved ones: a faster fit must
land on the same fixed points.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "solver"))  # the chain and the loop the swing fit's tests walk

from test_swing import arc, loop  # noqa: E402

from fabrik_addon.solver import fabrik, solve_chain  # noqa: E402
from fabrik_addon.solver.limits import ConeLimit  # noqa: E402

FRAMES = 400
CONE_60 = math.radians(60.0)
NARROW = ConeLimit(0.25, 0.25, 0.3, 0.2)


def behind(joints: np.ndarray, frames: int = FRAMES) -> np.ndarray:
    """A circle of 0.6 of the chain's length about the root, a quarter length below it: mostly behind
    what 60-degree cones allow."""
    length = float(np.linalg.norm(np.diff(joints, axis=0), axis=1).sum())
    t = 2.0 * math.pi * np.arange(frames) / frames
    return joints[0] + length * np.stack([0.6 * np.cos(t), 0.6 * np.sin(t), np.full(frames, -0.25)], axis=1)


def cases() -> list[tuple[str, np.ndarray, list[ConeLimit], np.ndarray | None, np.ndarray]]:
    leg = arc(4)
    pole = np.array([0.0, 2.0, 1.0])
    six, seven, five, eight, ten = arc(6), arc(7), arc(5), arc(8), arc(10)
    return [
        ("4-bone leg, pole, cones", leg, [ConeLimit(0.5, 0.5, 0.6, 0.4)] * 4, pole, loop(leg, FRAMES)),
        ("6-bone, pole, cones 60", six, [ConeLimit(*[CONE_60] * 4)] * 6, pole, loop(six, FRAMES)),
        ("7-bone, cones 0.4", seven, [ConeLimit(*[0.4] * 4)] * 7, None, loop(seven, FRAMES)),
        ("5-bone, cones 60, behind", five, [ConeLimit(*[CONE_60] * 4)] * 5, None, behind(five)),
        # Half the cone, which 8-10 bones bind on this loop (the issue's own keeps the free pose there).
        ("8-bone, pole, narrow cones", eight, [NARROW] * 8, pole, loop(eight, FRAMES)),
        ("10-bone, narrow cones", ten, [NARROW] * 10, None, loop(ten, FRAMES)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save", type=Path, help="keep the poses and statuses in this .npz")
    parser.add_argument("--compare", type=Path, help="compare the poses and statuses with this .npz")
    parser.add_argument("--verbose", action="store_true", help="list the targets whose poses moved over 1e-9")
    parser.add_argument("--wall", action="store_true", help="time by the wall clock instead of the CPU time")
    parser.add_argument("--only", default="", help="only the cases whose name contains this")
    parser.add_argument("--rounds", type=int, default=1, help="time each solve this many times (the minimum)")
    args = parser.parse_args()

    clock = time.perf_counter if args.wall else time.process_time
    fitted = [False]
    fallbacks: list[np.ndarray] = []
    original, original_limited = fabrik.fit_swings, fabrik.run_limited

    def spy(*a, **k):
        fitted[0] = True
        return original(*a, **k)

    def spy_limited(*a, **k):
        out = original_limited(*a, **k)
        fallbacks.append(out[0])
        return out

    saved: dict[str, np.ndarray] = {}
    old = dict(np.load(args.compare)) if args.compare else None
    print(f"{'case':28s} {'fit solves':>10s} {'median ms':>9s} {'p90 ms':>7s} {'all med':>7s} {'all p90':>7s} "
          f"{'iters med':>9s} {'lim runs':>8s} {'lim won':>7s}" + ("  max |dj|/L  statuses, moved" if old else ""))
    fabrik.fit_swings, fabrik.run_limited = spy, spy_limited
    try:
        for key, (name, joints, cones, pole, targets) in enumerate(cases()):
            if args.only not in name:
                continue
            length = float(np.linalg.norm(np.diff(joints, axis=0), axis=1).sum())
            times, fit, poses, status, iterations, runs, won = [], [], [], [], [], 0, 0
            for target in targets:
                best = math.inf
                for _ in range(args.rounds):
                    fitted[0] = False
                    fallbacks.clear()
                    started = clock()
                    result = solve_chain(joints, target, pole=pole, limits=cones)
                    best = min(best, clock() - started)
                runs += bool(fallbacks)
                won += any(np.array_equal(result.joints, out[:, :3]) for out in fallbacks)
                times.append(best * 1e3)
                fit.append(fitted[0])
                poses.append(result.joints)
                status.append((result.reached, result.converged))
                iterations.append(result.iterations)
            t, f = np.array(times), np.array(fit)
            fit_times = t[f] if f.any() else np.array([math.nan])
            line = (f"{name:28s} {int(f.sum()):10d} {np.median(fit_times):9.2f} {np.percentile(fit_times, 90):7.2f} "
                    f"{np.median(t):7.2f} {np.percentile(t, 90):7.2f} {np.median(np.array(iterations)[f]):9.0f} "
                    f"{runs:8d} {won:7d}")
            saved[f"joints{key}"], saved[f"status{key}"] = np.array(poses), np.array(status)
            if old is not None:
                diffs = np.abs(np.array(poses) - old[f"joints{key}"]).max(axis=(1, 2)) / length
                changed = int((np.array(status) != old[f"status{key}"]).any(axis=1).sum())
                line += f"  {diffs.max():10.2e}  {changed} changed, {int((diffs > 1e-9).sum())} poses over 1e-9"
                if args.verbose:
                    for k in np.flatnonzero(diffs > 1e-9):
                        print(f"    target {k}: {diffs[k]:.2e}")
            print(line, flush=True)
    finally:
        fabrik.fit_swings, fabrik.run_limited = original, original_limited
    if args.save:
        np.savez(args.save, **saved)


if __name__ == "__main__":
    main()
