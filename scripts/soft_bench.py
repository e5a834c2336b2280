"""Soft IK and stretch, measured: the pop at full reach, the soft curve, stretch factors.

    python scripts/benchmark.py soft [--json]      (or python scripts/soft_bench.py)

A target sweeps along a fixed line from the root through full reach, 0.1% of the reach per frame,
each frame solved from the same start pose (as the add-on does: the pose without IK). Reported per
chain: the largest per-frame change of any joint's bend angle, and how far the tip's distance from the
root strays from the soft curve (fractions of reach). ``blender()`` measures Blender's own IK
constraint on the same sweep (it has stretch, no softness).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fabrik_addon.solver import solve_chain, solve_two_bone  # noqa: E402
from fabrik_addon.solver.soft import eased_distance  # noqa: E402

STEP = 0.001  # of the reach, per frame
SWEEP = (0.8, 1.3)  # of the reach
DIRECTION = np.array([0.6, 0.7, 0.2]) / np.linalg.norm([0.6, 0.7, 0.2])


def arc_chain(bones: int, curve: float = 0.3) -> np.ndarray:
    """A chain of total length 1, gently curved in a plane with a little twist out of it (the start pose)."""
    angles = np.linspace(-curve, curve, bones)
    d = np.stack([np.sin(angles), np.cos(angles), 0.05 * np.sin(3.0 * angles)], axis=1)
    d /= np.linalg.norm(d, axis=1)[:, None]
    return np.vstack([np.zeros(3), np.cumsum(d / bones, axis=0)])


def bends(joints: np.ndarray) -> np.ndarray:
    """Angle (radians) between consecutive bones, per interior joint."""
    d = np.diff(joints, axis=0)
    d /= np.linalg.norm(d, axis=1)[:, None]
    return np.arccos(np.clip(np.einsum("ij,ij->i", d[:-1], d[1:]), -1.0, 1.0))


def sweep(bones: int, softness: float, *, tolerance: float, max_iterations: int, use_stretch: bool = False,
          max_stretch: float = 1.5) -> dict:
    start = arc_chain(bones)
    reach = float(np.linalg.norm(np.diff(start, axis=0), axis=1).sum())
    frames = np.arange(round(SWEEP[0] / STEP), round(SWEEP[1] / STEP) + 1) * STEP * reach
    previous_bend: np.ndarray | None = None
    previous_stretch = 1.0
    worst_bend = worst_at = worst_curve = worst_hard = worst_stretch_step = 0.0
    iterations = []
    for d in frames:
        target = DIRECTION * d
        if bones == 2:
            result = solve_two_bone(start, target, tolerance=tolerance, softness=softness, use_stretch=use_stretch,
                                    max_stretch=max_stretch)
        else:
            result = solve_chain(start, target, tolerance=tolerance, max_iterations=max_iterations,
                                 min_improvement=0.0, softness=softness, use_stretch=use_stretch,
                                 max_stretch=max_stretch)
        iterations.append(result.iterations)
        bend = bends(result.joints)
        if previous_bend is not None:
            step = float(np.abs(bend - previous_bend).max())
            if step > worst_bend:
                worst_bend, worst_at = step, d / reach
            worst_stretch_step = max(worst_stretch_step, abs(result.stretch - previous_stretch))
        previous_bend, previous_stretch = bend, result.stretch
        expected = eased_distance(d, reach, softness) * result.stretch
        if expected < reach * result.stretch * (1.0 - 1e-9):  # a straight chain's tip is at full reach
            off = abs(float(np.linalg.norm(result.joints[-1])) - expected) / reach
            if d > reach * (1.0 - softness) and softness > 0.0:
                worst_curve = max(worst_curve, off)
            else:
                worst_hard = max(worst_hard, off)
    return {"bones": bones, "softness": softness, "use_stretch": use_stretch,
            "max_bend_step_deg": math.degrees(worst_bend), "at_reach_fraction": worst_at,
            "max_curve_error": worst_curve, "max_hard_error": worst_hard, "max_stretch_step": worst_stretch_step,
            "max_iterations_used": int(max(iterations)), "frames": len(frames)}


def stretch_checks() -> dict:
    out = {}
    for bones in (2, 3, 10):
        start = arc_chain(bones)
        reach = float(np.linalg.norm(np.diff(start, axis=0), axis=1).sum())
        solve = solve_two_bone if bones == 2 else solve_chain
        lengths = np.linalg.norm(np.diff(start, axis=0), axis=1)
        far = solve(start, DIRECTION * 1.3 * reach, use_stretch=True)
        capped = solve(start, DIRECTION * 2.0 * reach, use_stretch=True, max_stretch=1.5)
        aim = capped.joints[-1] / np.linalg.norm(capped.joints[-1])
        out[bones] = {
            "at_1.3_factor": far.stretch, "at_1.3_error": far.error,
            "at_1.3_bone_scales": (np.linalg.norm(np.diff(far.joints, axis=0), axis=1) / lengths).tolist(),
            "at_2.0_factor": capped.stretch,
            "at_2.0_points_at_target_deg": math.degrees(math.acos(min(1.0, float(aim @ DIRECTION)))),
            "at_2.0_straight_deg": math.degrees(float(bends(capped.joints).max(initial=0.0))),
        }
    return out


def run() -> dict:
    rows = []
    for bones in (2, 3, 5, 10):
        # Hard IK converged (tolerance 1e-6) is the pop itself; the add-on's defaults (tolerance 1e-3 for a
        # chain of length 1, 30 passes) add FABRIK's own stopping jumps.
        if bones > 2:
            rows.append({"settings": "converged", **sweep(bones, 0.0, tolerance=1e-6, max_iterations=3000)})
        for softness, use_stretch in ((0.0, False), (0.1, False), (0.1, True), (0.0, True)):
            rows.append({"settings": "defaults", **sweep(bones, softness, tolerance=1e-3, max_iterations=30,
                                                         use_stretch=use_stretch)})
    return {"sweep": rows, "stretch": stretch_checks()}


def blender() -> dict:
    """The same sweep in real Blender (bpy wheel): Blender's IK constraint (no softness; its stretch has no
    maximum) beside FABRIK IK chains with softness 0.1, each bone a bone of the arc chain above."""
    import bpy

    import fabrik_addon
    from rigkit.blender import add_chain, armature, empty

    fabrik_addon.register()
    out: dict = {}
    try:
        for bones in (2, 3, 10):
            for kind, softness in (("blender", 0.0), ("fabrik", 0.0), ("fabrik", 0.1)):
                bpy.ops.wm.read_factory_settings(use_empty=True)
                joints = arc_chain(bones)
                ob = armature("Arm", [(f"b{i}", tuple(joints[i]), tuple(joints[i + 1]), f"b{i - 1}" if i else None,
                                       i > 0) for i in range(bones)])
                target = empty("Target", tuple(DIRECTION * 0.8))
                tip = ob.pose.bones[f"b{bones - 1}"]
                if kind == "blender":
                    constraint = tip.constraints.new('IK')
                    constraint.target, constraint.chain_count, constraint.use_stretch = target, bones, False
                else:
                    add_chain(ob, tip.name, bones, target, solver='TWO_BONE' if bones == 2 else 'FABRIK',
                              softness=softness)
                steps = []
                previous = None
                for d in np.arange(round(SWEEP[0] / STEP), round(SWEEP[1] / STEP) + 1) * STEP:
                    target.location = tuple(DIRECTION * d)
                    bpy.context.view_layer.update()
                    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
                    posed = np.array([list(ev.pose.bones[f"b{i}"].head) for i in range(bones)]
                                     + [list(ev.pose.bones[f"b{bones - 1}"].tail)])
                    bend = bends(posed)
                    if previous is not None:
                        steps.append(float(np.abs(bend - previous).max()))
                    previous = bend
                out[f"{kind} {bones} bones softness {softness}"] = math.degrees(max(steps))
        # Stretch: Blender's IK (constraint stretch on, every bone's IK Stretch 1) against use_stretch.
        for kind in ("blender", "fabrik"):
            bpy.ops.wm.read_factory_settings(use_empty=True)
            joints = arc_chain(2)
            ob = armature("Arm", [(f"b{i}", tuple(joints[i]), tuple(joints[i + 1]), f"b{i - 1}" if i else None,
                                   i > 0) for i in range(2)])
            target = empty("Target", tuple(DIRECTION * 1.3))
            if kind == "blender":
                constraint = ob.pose.bones["b1"].constraints.new('IK')
                constraint.target, constraint.chain_count, constraint.use_stretch = target, 2, True
                for pb in ob.pose.bones:
                    pb.ik_stretch = 1.0
            else:
                add_chain(ob, "b1", 2, target, solver='TWO_BONE', use_stretch=True, max_stretch=1.5)
            for reach in (1.3, 2.0):
                target.location = tuple(DIRECTION * reach)
                bpy.context.view_layer.update()
                ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
                grown = [(ev.pose.bones[f"b{i}"].tail - ev.pose.bones[f"b{i}"].head).length
                         / ob.data.bones[f"b{i}"].length for i in range(2)]
                miss = float(np.linalg.norm(np.array(ev.pose.bones["b1"].tail) - DIRECTION * reach))
                out[f"{kind} stretch at {reach}"] = {"bone_scales": grown, "tip_error": miss}
    finally:
        fabrik_addon.unregister()
    return out


def print_table(data: dict) -> None:
    print(f"target sweep {SWEEP[0]}-{SWEEP[1]} of reach, {STEP:.1%} of reach per frame, same start pose each frame")
    print("  bones  softness  stretch  settings   max bend step (deg)  at reach  soft-zone curve error  "
          "elsewhere  stretch step  passes")
    for r in data["sweep"]:
        print(f"  {r['bones']:>5}  {r['softness']:>8}  {r['use_stretch']!s:>7}  {r['settings']:<9}  "
              f"{r['max_bend_step_deg']:>19.3f}  {r['at_reach_fraction']:>8.3f}  {r['max_curve_error']:>21.2e}  "
              f"{r['max_hard_error']:>9.2e}  {r['max_stretch_step']:>12.2e}  {r['max_iterations_used']:>6}")
    print("stretch (use_stretch, max_stretch 1.5)")
    for bones, r in data["stretch"].items():
        scales = r["at_1.3_bone_scales"]
        print(f"  {bones:>2} bones: 1.3x reach -> factor {r['at_1.3_factor']:.6f}, bone scales "
              f"{min(scales):.6f}-{max(scales):.6f}, tip error {r['at_1.3_error']:.1e}; 2x reach -> factor "
              f"{r['at_2.0_factor']!r}, off the target line {r['at_2.0_points_at_target_deg']:.1e} deg, "
              f"largest bend {r['at_2.0_straight_deg']:.1e} deg")


if __name__ == "__main__":
    data = run()
    print_table(data)
    try:
        import bpy  # noqa: F401
    except ImportError:
        sys.exit(0)
    sys.path.insert(0, str(ROOT))
    for name, value in blender().items():
        print(f"  Blender: {name}: {value}")
