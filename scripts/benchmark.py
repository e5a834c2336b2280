"""Benchmarks: the solver core alone, per-frame cost and pose quality in Blender against its own IK constraint.

    python scripts/benchmark.py solver [--json]
    python scripts/benchmark.py blender [--json] [--only NAME] [--rounds N]   (micro and real-rig cases)
    python scripts/benchmark.py quality [--json] [--limited [--only NAME]]  (limited: 2-10 bones)
    python scripts/benchmark.py quality --edges [--json]   (the edge-of-reach table and its wider sweep)
    python scripts/benchmark.py quality --edges-wide [--json]   (edge of reach on 3-10 bones bent 1-15 deg)
    python scripts/benchmark.py soft [--json]      (soft IK and stretch: pops, the soft curve, factors)
    python scripts/benchmark.py all [--json]

Times are medians of repeated runs on this machine; ratios are measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fabrik_addon.solver import solve_chain, solve_chains  # noqa: E402
from fabrik_addon.solver.fabrik import solve_points  # noqa: E402
from rigkit.chains import curving_chain  # noqa: E402


def machine() -> str:
    import os

    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}"


def _median_time(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return float(np.median(times))


def _chain(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A gently curving chain and a target it can reach but needs every iteration for (tolerance 0)."""
    joints = curving_chain(rng, n, spread=0.3)
    target = joints[-1] * 0.6 + rng.normal(scale=0.3, size=3)
    return joints, target


def bench_solver() -> dict:
    rng = np.random.default_rng(0)
    single = {}
    for n in (2, 3, 10, 50):
        joints, target = _chain(rng, n)
        result = solve_chain(joints, target, tolerance=0.0, max_iterations=10, min_improvement=0.0)
        per_call = _median_time(lambda j=joints, t=target: solve_chain(j, t, tolerance=0.0, max_iterations=10,
                                                                         min_improvement=0.0), 200)
        points, target_tuple = joints.tolist(), tuple(target.tolist())
        per_points = _median_time(lambda p=points, t=target_tuple: solve_points(p, t, tolerance=0.0, max_iterations=10,
                                                                              min_improvement=0.0), 200)
        single[n] = {"us_per_solve": per_call * 1e6, "us_per_solve_points": per_points * 1e6,
                     "iterations": result.iterations}
    batched = {}
    n = 10
    for count in (1, 100, 1000, 10000):
        pairs = [_chain(rng, n) for _ in range(count)]
        joints = np.stack([p[0] for p in pairs])
        targets = np.stack([p[1] for p in pairs])
        result = solve_chains(joints, targets, tolerance=0.0, max_iterations=10, min_improvement=0.0)
        repeats = max(3, min(50, 20000 // count))
        seconds = _median_time(lambda j=joints, t=targets: solve_chains(j, t, tolerance=0.0, max_iterations=10,
                                                                          min_improvement=0.0), repeats)
        joint_iterations = float(result.iterations.sum()) * (n + 1)
        batched[count] = {"ns_per_joint_iteration": seconds / joint_iterations * 1e9,
                          "ms_per_call": seconds * 1e3, "mean_iterations": float(result.iterations.mean())}
    return {"machine": machine(), "single": single, "batched_10_bones": batched, "limited_7_bones": bench_limited()}


def bench_limited() -> dict:
    """Limited 7-bone chains (random 20-90 degree cones): 60 targets from limit-respecting poses, and
    one target the limits make unreachable (the restarts and the CCD refinement all run)."""
    from fabrik_addon.solver import ConeLimit
    from rigkit.limited import limited_pose, random_cones, random_rest_chain

    rng = np.random.default_rng(3)
    cases = []
    for _ in range(60):
        rest, cones = random_rest_chain(rng, 7), random_cones(rng, 7)
        cases.append((rest, cones, limited_pose(rng, rest, cones)[-1]))
    times, reached = [], 0
    for rest, cones, target in cases:
        started = time.perf_counter()
        result = solve_chain(rest, target, limits=cones, tolerance=1e-3, max_iterations=30)
        times.append(time.perf_counter() - started)
        reached += bool(result.reached)
    rest = np.array([[0.0, 0.0, float(k)] for k in range(8)])
    cones = [ConeLimit(*[np.radians(20.0)] * 4)] * 7
    unreachable = _median_time(lambda: solve_chain(rest, [5.0, 0.0, 1.0], limits=cones, tolerance=1e-3,
                                                   max_iterations=30), 5)
    return {"reachable_median_ms": float(np.median(times)) * 1e3, "reachable_mean_ms": float(np.mean(times)) * 1e3,
            "reached": reached, "targets": len(cases), "unreachable_ms": unreachable * 1e3}


def print_solver(data: dict) -> None:
    print(f"solver core ({data['machine']})")
    print("  one chain, 10 iterations:   bones   us/solve   us/solve_points (floats in and out)")
    for n, row in data["single"].items():
        print(f"                              {n:>5}   {row['us_per_solve']:8.1f}   {row['us_per_solve_points']:8.1f}"
              f"   ({row['iterations']} iterations)")
    print("  batched, 10 bones:         chains   ns/joint-iteration   ms/call")
    for count, row in data["batched_10_bones"].items():
        print(f"                             {count:>6}   {row['ns_per_joint_iteration']:18.1f}   "
              f"{row['ms_per_call']:7.2f}")
    lim = data["limited_7_bones"]
    print(f"  limited, 7 bones: {lim['reachable_median_ms']:.2f} ms median, {lim['reachable_mean_ms']:.2f} ms mean per "
          f"solve ({lim['reached']}/{lim['targets']} limit-respecting targets reached); unreachable under the "
          f"limits: {lim['unreachable_ms']:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("solver", "blender", "soft", "quality", "all"))
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--only", help="blender, quality --limited: only the cases whose name contains one of "
                        "these, comma-separated (e.g. 'metarig,arm +')")
    parser.add_argument("--rounds", type=int, default=3, help="blender: rounds per case (fastest kept)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="blender: time frames by the wall clock or by the process's CPU time (steadier on a "
                        "loaded machine)")
    parser.add_argument("--limited", action="store_true", help="quality: only the limited chains of every size "
                        "(slow: the swing fit)")
    parser.add_argument("--edges", action="store_true", help="quality: only the edge-of-reach table and the wider "
                        "sweep of nearly straight chains (issue 23)")
    parser.add_argument("--edges-wide", action="store_true", help="quality: edge of reach on chains of 3-10 bones "
                        "bent 1-15 degrees a joint (1152 crossings, a few minutes)")
    args = parser.parse_args()
    out = {}
    if args.what in ("solver", "all"):
        out["solver"] = bench_solver()
        if not args.json:
            print_solver(out["solver"])
    if args.what in ("soft", "all"):
        sys.path.insert(0, str(ROOT / "scripts"))
        import soft_bench

        out["soft"] = soft_bench.run()
        if not args.json:
            soft_bench.print_table(out["soft"])
    if args.what in ("blender", "all"):
        sys.path.insert(0, str(ROOT / "scripts"))
        import blender_bench

        out["blender"] = blender_bench.run(args.rounds, args.only, args.clock)
        if not args.json:
            blender_bench.print_table(out["blender"])
    if args.what in ("quality", "all"):
        sys.path.insert(0, str(ROOT / "scripts"))
        import quality_bench

        if args.edges:
            out["quality"] = {"edges": quality_bench.run_edges(), "sweep": quality_bench.run_edge_sweep()}
            if not args.json:
                quality_bench.print_edges(out["quality"]["edges"])
                quality_bench.print_edge_sweep(out["quality"]["sweep"])
        elif args.edges_wide:
            out["quality"] = {"wide": quality_bench.run_edge_sweep(quality_bench.EDGE_WIDE_BONES,
                                                                   quality_bench.EDGE_WIDE_DEGREES)}
            if not args.json:
                quality_bench.print_edge_sweep_wide(out["quality"]["wide"])
        elif args.limited:
            out["quality"] = quality_bench.run_limited(args.only)
            if not args.json:
                quality_bench.print_limited(out["quality"])
        else:
            out["quality"] = quality_bench.run()
            if not args.json:
                quality_bench.print_table(out["quality"])
    if args.json:
        print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
