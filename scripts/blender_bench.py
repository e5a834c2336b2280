"""Per-frame cost in Blender: no IK (baseline), Blender's IK constraint, and FABRIK IK, side by side.

Each case is built four times in one process with the same animated targets: no IK, Blender's IK,
FABRIK IK, and a write floor (a handler that writes the pose back unchanged, solving nothing). A frame costs
``scene.frame_set(f)`` plus ``evaluated_depsgraph_get()`` (what a viewport redraw pays, including
re-evaluating whatever the handlers wrote); the IK overhead is the median frame time minus the
baseline's. Reach error is the tip-to-target distance after evaluation.
"""

from __future__ import annotations

import math
import platform
import time
from typing import Any

import bpy
import numpy as np

import fabrik_addon
from rigkit.blender import add_chain, armature, empty, key_path, straightish_bones

FRAMES = list(range(1, 61))
# (name, armatures, chains per armature, bones per chain, pole)
CASES = [
    ("1 x 2 bones, pole", 1, 1, 2, True),
    ("1 x 10 bones", 1, 1, 10, False),
    ("1 x 50 bones", 1, 1, 50, False),
    ("spider 8 x 3", 1, 8, 3, False),
    ("crowd 100 x 10", 10, 10, 10, False),
    ("1000 x 3", 10, 100, 3, False),
]


def build(armatures: int, chains: int, bones: int, pole: bool, kind: str) -> list[tuple]:
    """Armatures of independent chains (each its own root), targets on circles within reach."""
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = FRAMES[0], FRAMES[-1]
    tips = []
    for a in range(armatures):
        specs = [spec for c in range(chains)
                 for spec in straightish_bones(bones, length=1.0 / bones, bend=0.02, prefix=f"c{c}b", x=0.05 * c)]
        ob = armature(f"Rig{a}", specs, location=(3.0 * a, 0.0, 0.0))
        for c in range(chains):
            base = np.array([3.0 * a + 0.05 * c, 0.0, 0.0])
            target = empty(f"T{a}_{c}")
            circle = [2 * math.pi * f / len(FRAMES) + c for f in FRAMES]
            key_path(target, [tuple(base + np.array([0.45 * math.cos(t), 0.45 * math.sin(t), 0.55]))
                              for t in circle], FRAMES)
            pole_ob = empty(f"P{a}_{c}", tuple(base + np.array([0.0, -1.0, 0.5]))) if pole else None
            tip = f"c{c}b{bones - 1}"
            if kind == "blender":
                constraint = ob.pose.bones[tip].constraints.new('IK')
                constraint.target = target
                constraint.chain_count = bones
                if pole_ob is not None:
                    constraint.pole_target = pole_ob
            elif kind == "fabrik":
                # The add-on's defaults (tolerance 0.001, 30 iterations), as a user's new chain has them.
                add_chain(ob, tip, bones, target, pole_ob, solver='TWO_BONE' if bones == 2 else 'FABRIK',
                          tolerance=0.001, iterations=30)
            tips.append((ob, tip, target))
    return tips


def measure(tips: list[tuple]) -> tuple[float, float, float]:
    """Median seconds per frame, and mean and max reach error over the frames."""
    scene = bpy.context.scene
    for f in FRAMES[:5]:  # warm-up
        scene.frame_set(f)
        bpy.context.evaluated_depsgraph_get()
    times, errors = [], []
    for f in FRAMES:
        started = time.perf_counter()
        scene.frame_set(f)
        depsgraph = bpy.context.evaluated_depsgraph_get()
        times.append(time.perf_counter() - started)
        for ob, tip, target in tips:
            ev = ob.evaluated_get(depsgraph)
            tail = np.array(ev.matrix_world @ ev.pose.bones[tip].tail)
            errors.append(float(np.linalg.norm(tail - np.array(target.evaluated_get(depsgraph).matrix_world
                                                                  .translation))))
    return float(np.median(times)), float(np.mean(errors)), float(np.max(errors))


class WriteFloor:
    """The least any add-on that writes the pose from a frame handler pays: each frame, write every
    armature's rotation channels back unchanged (one ``foreach_set``) and tag it, solving nothing.
    Blender then copies and re-evaluates the armature, which its own IK (evaluated in place) does
    not need to do."""

    def __init__(self, obs) -> None:
        self.obs = obs
        self.rows = []
        for ob in obs:
            flat = np.empty(4 * len(ob.pose.bones), dtype=np.float32)
            ob.pose.bones.foreach_get("rotation_quaternion", flat)
            self.rows.append(flat)

    def __call__(self, _scene, _depsgraph=None) -> None:
        for ob, flat in zip(self.obs, self.rows):
            ob.pose.bones.foreach_set("rotation_quaternion", flat)
            ob.update_tag(refresh={'DATA'})  # the tag a rotation written through RNA gives, as the add-on's


def idle_cost() -> float:
    """Microseconds our depsgraph handler spends per update when nothing it reads has changed."""
    from fabrik_addon import handlers

    scene = bpy.context.scene
    depsgraph = bpy.context.evaluated_depsgraph_get()
    handlers.on_depsgraph_update(scene, depsgraph)
    count = 2000
    started = time.perf_counter()
    for _ in range(count):
        handlers.on_depsgraph_update(scene, depsgraph)
    return (time.perf_counter() - started) / count * 1e6


KINDS = ("none", "blender", "fabrik", "floor")
# Each kind is measured this many times, in turn with the others, and its fastest median kept: the
# test machine is a shared VM whose speed drifts by tens of percent over a minute, which a single
# pass would fold into the ratios.
ROUNDS = 3


def measure_kind(name: str, armatures: int, chains: int, bones: int, pole: bool, kind: str) -> dict:
    """Build one variant of a case in an empty file and measure it."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    if kind == "fabrik":
        fabrik_addon.register()
    try:
        tips = build(armatures, chains, bones, pole, kind)
        floor = None
        if kind == "floor":
            floor = WriteFloor(list(dict.fromkeys(ob for ob, _, _ in tips)))
            bpy.app.handlers.frame_change_post.append(floor)
        try:
            seconds, mean_error, max_error = measure(tips)
        finally:
            if floor is not None:
                bpy.app.handlers.frame_change_post.remove(floor)
        result = {"ms": seconds * 1e3, "mean_error": mean_error, "max_error": max_error}
        if kind == "fabrik" and name.startswith("crowd"):
            result["idle_us"] = idle_cost()
        return result
    finally:
        if kind == "fabrik":
            fabrik_addon.unregister()


def run(rounds: int = ROUNDS) -> dict:
    rows = []
    for name, armatures, chains, bones, pole in CASES:
        row: dict[str, Any] = {"case": name, "chains": armatures * chains, "bones": bones}
        for _ in range(rounds):
            for kind in KINDS:
                result = measure_kind(name, armatures, chains, bones, pole, kind)
                if kind not in row or result["ms"] < row[kind]["ms"]:
                    row[kind] = result
        if "idle_us" in row["fabrik"]:
            row["idle_us"] = row["fabrik"].pop("idle_us")
        baseline = row["none"]["ms"]
        for kind in KINDS[1:]:
            row[kind]["overhead_ms"] = row[kind]["ms"] - baseline
        row["ratio"] = row["fabrik"]["overhead_ms"] / max(row["blender"]["overhead_ms"], 1e-9)
        row["floor_ratio"] = row["floor"]["overhead_ms"] / max(row["blender"]["overhead_ms"], 1e-9)
        rows.append(row)
    return {"machine": f"{platform.machine()}, Blender {bpy.app.version_string}", "frames": len(FRAMES),
            "rounds": rounds, "cases": rows}


def print_table(data: dict) -> None:
    print(f"per-frame IK overhead over no IK ({data['machine']}, {data['frames']} frames, median; "
          f"fastest of {data['rounds']} rounds)")
    print(f"{'case':20s} {'Blender IK ms':>14s} {'FABRIK IK ms':>13s} {'ratio':>7s} {'write floor ms':>15s} "
          f"{'floor ratio':>12s} {'Blender max err':>16s} {'FABRIK max err':>15s}")
    for row in data["cases"]:
        print(f"{row['case']:20s} {row['blender']['overhead_ms']:14.3f} {row['fabrik']['overhead_ms']:13.3f} "
              f"{row['ratio']:7.2f} {row['floor']['overhead_ms']:15.3f} {row['floor_ratio']:12.2f} "
              f"{row['blender']['max_error']:16.2e} {row['fabrik']['max_error']:15.2e}")
    print("write floor: the same rigs, a handler that only writes the rotations back unchanged and tags the "
          "armature (no solve); a ratio below the floor ratio is out of reach for a Python add-on")
    idle = [row["idle_us"] for row in data["cases"] if "idle_us" in row]
    if idle:
        print(f"idle depsgraph handler cost (nothing changed, 100 chains): {idle[0]:.1f} us per update")
