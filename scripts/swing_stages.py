"""Per frame, what the cone solve did on the quality loop (pure solver, no Blender): where a coned chain pops.

    python scripts/swing_stages.py BONES [--pole] [--frames A:B] [--cone L,R,U,D] [--tolerance T] [--over DEGREES]

The chain is the quality benchmark's arc (``_arc(BONES, 0.25)``) in one cone per bone (the issue's by
default), its target the benchmark's loop of 400 frames (``quality --limited`` rows "N-bone cones[, pole]"),
each frame solved from the pose without IK as the Blender layer does. Printed per frame: the tip's
distance over the chain's length, the largest bone turn from the last frame (degrees, bone frames as the
limits measure them), which solve ran (``free``: the free pose kept every cone; ``fit``: the swing fit;
``+lim``: limited FABRIK tried after it, ``*`` when its pose was kept), then per stage of the fit its pull,
its steps, its tip's distance over the length and how far its swings moved since the last frame (degrees):
the stage whose swings jump while its input did not is the one to make continuous. ``--over`` prints only
the frames whose turn exceeds it (and the frame before).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "solver"))  # the chain and the loop the swing fit's tests walk

from test_swing import arc, loop, turns  # noqa: E402

from fabrik_addon.solver import fabrik, solve_chain, swing  # noqa: E402
from fabrik_addon.solver.limits import ConeLimit, resolve_limits  # noqa: E402

FRAMES = 400
POLE = np.array([0.0, 2.0, 1.0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bones", type=int)
    parser.add_argument("--pole", action="store_true", help="the benchmark's pole (0, 2, 1)")
    parser.add_argument("--frames", default=f"0:{FRAMES}", help="the frames to print, A:B")
    parser.add_argument("--cone", default="0.5,0.5,0.6,0.4", help="left, right, up, down (radians)")
    parser.add_argument("--tolerance", type=float, default=None, help="over the chain's length (default: 1e-3 units)")
    parser.add_argument("--over", type=float, default=None, help="only frames turning more than this (degrees)")
    args = parser.parse_args()

    joints = arc(args.bones)
    length = float(np.linalg.norm(np.diff(joints, axis=0), axis=1).sum())
    cones = [ConeLimit(*(float(x) for x in args.cone.split(",")))] * args.bones
    targets = loop(joints, FRAMES)
    lengths = np.linalg.norm(np.diff(joints, axis=0), axis=1)
    resolved = resolve_limits(cones, joints)
    first, last = (int(x) for x in args.frames.split(":"))
    stages: list[tuple[float, np.ndarray, int]] = []
    limited: list[float] = []
    minimise, run_limited = swing._minimise, fabrik.run_limited

    def spy_minimise(q, q_ref, mu, *rest, **options):
        out = minimise(q, q_ref, mu, *rest, **options)
        stages.append((mu, out[0].copy(), out[1]))
        return out

    def spy_limited(*a, **k):
        out = run_limited(*a, **k)
        limited.append(out[1])
        return out

    swing._minimise, fabrik.run_limited = spy_minimise, spy_limited
    lines, previous, worst = [], None, (0.0, -1)
    try:
        for frame in range(max(first - 1, 0), last):
            stages.clear()
            limited.clear()
            result = solve_chain(joints, targets[frame], pole=POLE if args.pole else None, limits=cones,
                                 **({} if args.tolerance is None else {"tolerance": args.tolerance * length}))
            limits = result.frames
            turn = math.nan if previous is None else turns(previous[0], limits)
            kind = "fit" if stages else "free"
            if limited:
                kind += "+lim" + ("*" if abs(limited[0] - result.error) < 1e-15 else "")
            parts = []
            for k, (mu, q, steps) in enumerate(stages):
                tip = swing.tip_of(q, joints[0], lengths, resolved)
                moved = (math.degrees(float(np.abs(q - previous[1][k][1]).max()))
                         if previous is not None and k < len(previous[1]) else math.nan)
                parts.append(f"[{mu:.2g} {steps}st {np.linalg.norm(tip - targets[frame]) / length:.1e} {moved:4.2f}]")
            line = f"{frame:4d} err {result.error / length:.1e} turn {turn:5.2f} {kind:9s} " + " ".join(parts)
            if frame >= first:
                lines.append((turn, line))
                if turn > worst[0]:
                    worst = (turn, frame)
            previous = (limits, list(stages))
    finally:
        swing._minimise, fabrik.run_limited = minimise, run_limited
    for k, (turn, line) in enumerate(lines):
        following = lines[k + 1][0] if k + 1 < len(lines) else 0.0
        if args.over is None or turn > args.over or following > args.over:
            print(line)
    print(f"largest turn {worst[0]:.2f} degrees at frame {worst[1]}")


if __name__ == "__main__":
    main()
