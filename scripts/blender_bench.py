"""Per-frame cost in Blender: no IK (baseline), Blender's IK constraint, and FABRIK IK, side by side.

Each case is built four times in one process with the same animated targets: no IK, Blender's IK,
FABRIK IK, and a write floor (a frame handler that writes the chains' bones the values FABRIK IK wrote
at that frame, the way the add-on writes them, and so tags the armature as it does, solving nothing).
Micro cases are chains on their own; real-rig cases are Rigify's human metarig (:mod:`rigkit.realrig`)
and one 2-bone arm on armatures that also hold 0, 150 or 1000 other bones. A frame costs
``scene.frame_set(f)`` plus ``evaluated_depsgraph_get()`` (what a viewport redraw pays, including
re-evaluating whatever the handlers wrote); the IK overhead is the median frame time minus the
baseline's. Reach error is the tip-to-target distance after evaluation. On the one-arm cases a lean Python
handler that solves the arm and does nothing else (:class:`LeanArm`) takes frames in turn with FABRIK IK and the
floor: how much any Python handler's work grows with the armature.
"""

from __future__ import annotations

import math
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import bpy
import numpy as np
from mathutils import Vector

import fabrik_addon
from fabrik_addon.rig import small
from rigkit import realrig
from rigkit.blender import add_chain, armature, empty, key_path, straightish_bones

FRAMES = list(range(1, 61))
# What a frame's time is read from: "wall" (time.perf_counter) or "cpu" (time.process_time: every thread of
# the process, not the time it waits while the shared machine runs others; at load 9 on 2 cores the write
# floor at 1000 bones read 1.3-7.3 ms a frame in wall time against 1.23-1.29 ms in CPU time: docs/speed.md).
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = CLOCKS["wall"]


def use_clock(name: str) -> None:
    global clock
    clock = CLOCKS[name]
# (name, armatures, chains per armature, bones per chain, pole)
CASES = [
    ("1 x 2 bones, pole", 1, 1, 2, True),
    ("1 x 10 bones", 1, 1, 10, False),
    ("1 x 50 bones", 1, 1, 50, False),
    ("spider 8 x 3", 1, 8, 3, False),
    ("crowd 100 x 10", 10, 10, 10, False),
    ("1000 x 3", 10, 100, 3, False),
]


@dataclass(frozen=True)
class Case:
    """One benchmark case: ``build(kind)`` makes its rigs for ``kind`` (see :data:`KINDS`) and returns
    ``[(armature, tip bone, target, chain length), ...]``."""

    name: str
    chains: int
    bones: int | str  # bones per chain
    build: Callable[[str], list[tuple]]
    real: bool = False  # a real-rig case (rigs with bones outside the chains)
    lean: bool = False  # one arm (realrig.arm_with_others): LeanArm takes frames in turn with FABRIK IK and the floor


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
            tips.append((ob, tip, target, bones))
    return tips


def build_real(make: Callable[[int], Any], specs: tuple, count: int, kind: str) -> list[tuple]:
    """``count`` rigs from ``make(k)`` with the chains ``specs`` (:class:`rigkit.realrig.ChainSpec`), targets
    keyed along the same paths whatever the kind (those of chains hanging below others follow the pose the
    chains above give them: :func:`_hanging_centres`)."""
    centres = _hanging_centres(make, specs)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = FRAMES[0], FRAMES[-1]
    tips = []
    for k in range(count):
        ob = make(k)
        for spec, target, pole in realrig.add_targets(ob, specs, FRAMES, tag=f"{k}_", centres=centres):
            if kind == "blender":
                constraint = ob.pose.bones[spec.tip].constraints.new('IK')
                constraint.target = target
                constraint.chain_count = spec.length
                if pole is not None:
                    constraint.pole_target = pole
            elif kind == "fabrik":
                add_chain(ob, spec.tip, spec.length, target, pole, solver='TWO_BONE' if spec.length == 2 else 'FABRIK',
                          tolerance=0.001, iterations=30)
            tips.append((ob, spec.tip, target, spec.length))
    return tips


_CENTRES: dict[tuple, dict] = {}


def _hanging_centres(make: Callable[[int], Any], specs: tuple) -> dict:
    """Tip -> per-frame centres of the target paths of chains that hang below another chain's bones (the
    metarig's finger under its arm): made once, with FABRIK IK solving the chains above, so each target
    stays within reach of its chain wherever the chains above put it. Leaves the scene to be reset."""
    key = tuple(specs)
    if key not in _CENTRES:
        bpy.ops.wm.read_factory_settings(use_empty=True)
        bpy.context.scene.frame_start, bpy.context.scene.frame_end = FRAMES[0], FRAMES[-1]
        ob = make(0)
        hanging = [spec for spec in specs if spec.hangs]
        _CENTRES[key] = {}
        if hanging:
            registered = hasattr(bpy.types.Object, "fabrik")
            if not registered:
                fabrik_addon.register()
            try:
                above = [spec for spec in specs if spec not in hanging]
                for spec, target, pole in realrig.add_targets(ob, above, FRAMES):
                    add_chain(ob, spec.tip, spec.length, target, pole,
                              solver='TWO_BONE' if spec.length == 2 else 'FABRIK', tolerance=0.001, iterations=30)
                _CENTRES[key] = {spec.tip: realrig.centre_path(ob, spec, FRAMES) for spec in hanging}
            finally:
                if not registered:
                    fabrik_addon.unregister()
    return _CENTRES[key]


def cases() -> list[Case]:
    out = [Case(name, armatures * chains, bones, partial(build, armatures, chains, bones, pole))
           for name, armatures, chains, bones, pole in CASES]
    for others in (0, 150, 1000):
        out.append(Case(f"arm + {others} bones", 1, 2, partial(
            build_real, lambda k, o=others: realrig.arm_with_others(f"Rig{k}", o), realrig.ARM_CHAINS, 1), True, True))
    out.append(Case("arm + 1000 objects", 1, 2, partial(
        build_real, lambda k: realrig.arm_among_objects(f"Rig{k}", 1000), realrig.ARM_CHAINS, 1), True))
    specs = realrig.METARIG_CHAINS
    out.append(Case("metarig", len(specs), "2-3", partial(
        build_real, lambda k: realrig.metarig(f"metarig{k}"), specs, 1), True))
    out.append(Case("10 metarigs", 10 * len(specs), "2-3", partial(
        build_real, lambda k: realrig.metarig(f"metarig{k}", (1.5 * k, 0.0, 0.0)), specs, 10), True))
    return out


def measure(tips: list[tuple]) -> tuple[float, float, float]:
    """Median seconds per frame, and mean and max reach error over the frames."""
    scene = bpy.context.scene
    for f in FRAMES[:5]:  # warm-up
        scene.frame_set(f)
        bpy.context.evaluated_depsgraph_get()
    times, errors = [], []
    for f in FRAMES:
        started = clock()
        scene.frame_set(f)
        depsgraph = bpy.context.evaluated_depsgraph_get()
        times.append(clock() - started)
        for ob, tip, target, _ in tips:
            ev = ob.evaluated_get(depsgraph)
            tail = np.array(ev.matrix_world @ ev.pose.bones[tip].tail)
            errors.append(float(np.linalg.norm(tail - np.array(target.evaluated_get(depsgraph).matrix_world
                                                                  .translation))))
    return float(np.median(times)), float(np.mean(errors)), float(np.max(errors))


class HandlerClock:
    """Times the frame handlers (FABRIK IK's, or the write floor's) each frame: one handler put first in
    ``frame_change_post`` starts the clock, one put last stops it. What the add-on itself does each
    frame, without Blender's re-evaluation of what it wrote."""

    def __init__(self) -> None:
        self.started = 0.0
        self.spans: list[float] = []

    def start(self, _scene, _depsgraph=None) -> None:
        self.started = clock()

    def stop(self, _scene, _depsgraph=None) -> None:
        self.spans.append(clock() - self.started)

    def __enter__(self) -> HandlerClock:
        bpy.app.handlers.frame_change_post.insert(0, self.start)
        bpy.app.handlers.frame_change_post.append(self.stop)
        return self

    def __exit__(self, *_exc) -> None:
        bpy.app.handlers.frame_change_post.remove(self.start)
        bpy.app.handlers.frame_change_post.remove(self.stop)

    def median_ms(self) -> float:
        return float(np.median(self.spans[-len(FRAMES):])) * 1e3


def _channel(pose_bone) -> str:
    """The rotation channel the add-on writes on ``pose_bone`` (its rotation mode's)."""
    mode = pose_bone.rotation_mode
    return "rotation_quaternion" if mode == 'QUATERNION' else "rotation_axis_angle" if mode == 'AXIS_ANGLE' \
        else "rotation_euler"


def _writes(tips: list[tuple]) -> tuple[list, list]:
    """How the add-on writes the chains' bones (:func:`.rig.small._write_at_once`): ``(bulk, single)``,
    armatures whose every bone's quaternion goes in one ``foreach_set``, and ``(armature, bone, channel)``
    written bone by bone."""
    chained: dict[Any, set[str]] = {}
    for ob, tip, _, length in tips:
        chained.setdefault(ob, set()).update(realrig.chain_bone_names(ob, tip, length))
    bulk, single = [], []
    for ob, names in chained.items():
        count = len(ob.pose.bones)
        if len(names) * small.BULK_BONES_PER_WRITE > count + small.BULK_FIXED_WRITES * small.BULK_BONES_PER_WRITE:
            bulk.append(ob)
        else:
            single += [(ob, name, _channel(ob.pose.bones[name])) for name in sorted(names)]
    return bulk, single


def record_writes(tips: list[tuple]) -> dict:
    """What FABRIK IK wrote at each frame, read after ``frame_set``: frame -> ``(bulk, single)`` values in
    the order of :func:`_writes` (by object and bone name: the floor's rigs are built afresh)."""
    bulk, single = _writes(tips)
    scene = bpy.context.scene
    out = {}
    for f in FRAMES:
        scene.frame_set(f)
        flats = []
        for ob in bulk:
            flat = np.empty(4 * len(ob.pose.bones), dtype=np.float32)
            ob.pose.bones.foreach_get("rotation_quaternion", flat)
            flats.append(flat)
        out[f] = (flats, [tuple(getattr(ob.pose.bones[name], channel)) for ob, name, channel in single])
    return out


class WriteFloor:
    """The least any add-on that writes the pose from a frame handler pays: each frame, write the chains'
    bones and so tag the armature, solving nothing. As the add-on writes them (:func:`_writes`), and the
    same values: ``recorded`` (:func:`record_writes`) holds what FABRIK IK wrote at each frame (without
    it, the bones are written back unchanged). Blender then copies and re-evaluates the armature, which
    its own IK (evaluated in place) does not need to do; a changed rotation costs Blender more to
    re-evaluate than an unchanged one (docs/speed.md), so the floor writes what a solve writes."""

    def __init__(self, tips: list[tuple], recorded: dict | None = None) -> None:
        bulk, single = _writes(tips)
        self.bulk = [ob.pose.bones for ob in bulk]
        self.obs = bulk
        self.single = [(ob.pose.bones[name], channel) for ob, name, channel in single]
        if recorded is None:  # the bones' values now, at every frame
            flats = [np.empty(4 * len(bones), dtype=np.float32) for bones in self.bulk]
            for bones, flat in zip(self.bulk, flats):
                bones.foreach_get("rotation_quaternion", flat)
            now = (flats, [tuple(getattr(pb, channel)) for pb, channel in self.single])
            recorded = {f: now for f in FRAMES}
        self.recorded = recorded

    def __call__(self, scene, _depsgraph=None) -> None:
        flats, values = self.recorded[scene.frame_current]
        for bones, ob, flat in zip(self.bulk, self.obs, flats):
            bones.foreach_set("rotation_quaternion", flat)
            ob.update_tag(refresh={'DATA'})  # the tag a rotation written through RNA gives, as the add-on's
        for (pose_bone, channel), value in zip(self.single, values):
            setattr(pose_bone, channel, value)  # tags the armature, as the add-on's writes do


class LeanArm:
    """A reference, not a solver of the add-on's: the least a Python frame handler can do to solve one 2-bone
    arm with a pole (:func:`rigkit.realrig.arm_with_others`, a root bone and its child) and write it. It reads
    the armature's, target's and pole's evaluated matrices, places the elbow by the law of cosines in the
    plane (root, target, pole), turns each bone from its rest direction by the least rotation and writes the
    two quaternions: no checks, no pose without IK, no roll rule, no statuses. Taking the frames in turn with
    FABRIK IK and the floor, it shows what such a handler adds above the floor as the armature grows."""

    def __init__(self, ob, target, pole, root: str = "arm0", child: str = "arm1") -> None:
        self.ob, self.target, self.pole = ob, target, pole
        data = ob.data.bones
        self.bones = ob.pose.bones[root], ob.pose.bones[child]
        self.lengths = data[root].length, data[child].length
        self.head = data[root].head_local.copy()
        self.rest = data[root].matrix_local.to_quaternion(), data[child].matrix_local.to_quaternion()

    def __call__(self, _scene, depsgraph=None) -> None:
        depsgraph = depsgraph or bpy.context.evaluated_depsgraph_get()
        inverse = self.ob.evaluated_get(depsgraph).matrix_world.inverted()
        aim = inverse @ self.target.evaluated_get(depsgraph).matrix_world.translation - self.head
        pole = inverse @ self.pole.evaluated_get(depsgraph).matrix_world.translation - self.head
        upper, lower = self.lengths
        reach = min(aim.length, upper + lower)
        axis = aim.normalized()
        side = (pole - pole.dot(axis) * axis).normalized()
        cos = max(-1.0, min(1.0, (upper * upper + reach * reach - lower * lower) / (2.0 * upper * reach)))
        elbow = (cos * axis + math.sqrt(1.0 - cos * cos) * side) * upper
        rest0, rest1 = self.rest
        world0 = (rest0 @ Y_AXIS).rotation_difference(elbow) @ rest0  # armature-space rotations
        carried = world0 @ rest0.conjugated() @ rest1  # the child's rest, carried by the root's turn
        world1 = (carried @ Y_AXIS).rotation_difference(reach * axis - elbow) @ carried
        self.bones[0].rotation_quaternion = rest0.conjugated() @ world0
        self.bones[1].rotation_quaternion = carried.conjugated() @ world1


Y_AXIS = Vector((0.0, 1.0, 0.0))  # a bone's own direction in its rest axes


class CacheSweep:
    """A frame handler, put before the others, that touches ``megabytes`` of memory each frame: what
    Blender's re-evaluation of a big armature does to the CPU caches before the add-on's handler runs."""

    def __init__(self, megabytes: int) -> None:
        self.buffer = np.zeros(megabytes * (1 << 20) // 8)

    def __call__(self, _scene, _depsgraph=None) -> None:
        self.buffer += 1.0



def idle_cost() -> float:
    """Microseconds our depsgraph handler spends per update when nothing it reads has changed."""
    from fabrik_addon import handlers

    scene = bpy.context.scene
    depsgraph = bpy.context.evaluated_depsgraph_get()
    handlers.on_depsgraph_update(scene, depsgraph)
    count = 2000
    started = clock()
    for _ in range(count):
        handlers.on_depsgraph_update(scene, depsgraph)
    return (clock() - started) / count * 1e6


# Passes over FRAMES in which FABRIK IK and its write floor take the frames in turn, in the same scene: the
# real-rig cases' "above the floor" (docs/speed.md: on a loaded machine separate builds, even blocks of 60
# frames, drift by more than the difference at 1000 bones).
PASSES = 4


def alternate(tips: list[tuple], recorded: dict, passes: int = PASSES, others: tuple = ()) -> list[float]:
    """Median ms a frame of FABRIK IK, of its write floor (:class:`WriteFloor` of ``recorded``) and of each frame
    handler of ``others`` (e.g. :class:`LeanArm`) on the same rigs, frame by frame in turn (each pass shifts which
    takes which frame): FABRIK IK's frame and depsgraph handlers are taken out of the handler lists for the
    others' frames."""
    from fabrik_addon import handlers

    ours = [(getattr(bpy.app.handlers, event), function) for event, function in handlers.HANDLERS
            if event in ("frame_change_post", "depsgraph_update_post")]
    theirs = [WriteFloor(tips, recorded), *others]  # kind 1, 2, ...
    post = bpy.app.handlers.frame_change_post
    scene = bpy.context.scene
    times: list[list[float]] = [[] for _ in range(1 + len(theirs))]  # FABRIK IK's, the floor's, the others'

    def use(kind: int) -> None:
        for handler_list, function in ours:
            if kind == 0 and function not in handler_list:
                handler_list.append(function)
            elif kind != 0 and function in handler_list:
                handler_list.remove(function)
        for k, handler in enumerate(theirs, 1):
            if kind == k and handler not in post:
                post.append(handler)
            elif kind != k and handler in post:
                post.remove(handler)

    try:
        for k in range(passes):
            for f in FRAMES:
                kind = (f + k) % len(times)
                use(kind)
                started = clock()
                scene.frame_set(f)
                bpy.context.evaluated_depsgraph_get()
                times[kind].append(clock() - started)
    finally:
        use(0)
    return [float(np.median(t)) * 1e3 for t in times]


KINDS = ("none", "blender", "fabrik", "floor")  # (the floor after FABRIK IK: it writes what FABRIK IK wrote)
# The case whose FABRIK IK handler is also timed after a sweep of SWEEP_MB megabytes of memory each frame:
# the handler at 0 other bones, the CPU caches left as at 1000 (docs/speed.md).
SWEPT, SWEEP_MB = "arm + 0 bones", 16
# Each kind is measured this many times, in turn with the others, and its fastest median kept: the
# test machine is a shared VM whose speed drifts by tens of percent over a minute, which a single
# pass would fold into the ratios.
ROUNDS = 3


def measure_kind(case: Case, kind: str, recorded: dict | None = None, sweep: int = 0) -> dict:
    """Build one variant of a case in an empty file and measure it. ``recorded``: FABRIK IK's writes
    (:func:`record_writes`, the floor writes the same); FABRIK IK's kind fills it in. ``sweep``: megabytes
    of memory touched each frame before the handlers (:class:`CacheSweep`)."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    if kind == "fabrik":
        fabrik_addon.register()
    try:
        tips = case.build(kind)
        added = []
        if kind == "floor":
            added.append(WriteFloor(tips, recorded or None))
        try:
            with HandlerClock() as clock:
                for handler in added:
                    bpy.app.handlers.frame_change_post.append(handler)
                if sweep:  # before the clock starts
                    added.append(CacheSweep(sweep))
                    bpy.app.handlers.frame_change_post.insert(0, added[-1])
                seconds, mean_error, max_error = measure(tips)
        finally:
            for handler in added:
                bpy.app.handlers.frame_change_post.remove(handler)
        result = {"ms": seconds * 1e3, "mean_error": mean_error, "max_error": max_error,
                  "handler_ms": clock.median_ms()}
        if kind == "fabrik" and case.name.startswith("crowd"):
            result["idle_us"] = idle_cost()
        if kind == "fabrik" and recorded is not None and not sweep:
            recorded.update(record_writes(tips))
            if case.real:
                ob, _, target, _ = tips[0]
                lean = (LeanArm(ob, target, ob.fabrik.chains[0].pole),) if case.lean else ()
                result["alternated_ms"] = alternate(tips, recorded, others=lean)
        return result
    finally:
        if kind == "fabrik":
            fabrik_addon.unregister()


def run(rounds: int = ROUNDS, only: str | None = None, clock_name: str = "wall") -> dict:
    """Every case (or those whose name contains one of the comma-separated ``only``), each kind measured
    ``rounds`` times in turn."""
    use_clock(clock_name)
    rows = []
    for case in cases():
        if only is not None and not any(part.strip() in case.name for part in only.split(",")):
            continue
        row: dict[str, Any] = {"case": case.name, "chains": case.chains, "bones": case.bones, "real": case.real}
        for _ in range(rounds):
            recorded: dict = {}  # FABRIK IK's writes this round, which the floor writes again
            for kind in KINDS:
                result = measure_kind(case, kind, recorded)
                if kind not in row or result["ms"] < row[kind]["ms"]:
                    row[kind] = result
                if "alternated_ms" in result:
                    row.setdefault("alternated", []).append(result.pop("alternated_ms"))
            if case.name == SWEPT:
                swept = measure_kind(case, "fabrik", sweep=SWEEP_MB)["handler_ms"]
                row["swept_handler_ms"] = min(row.get("swept_handler_ms", swept), swept)
        if "idle_us" in row["fabrik"]:
            row["idle_us"] = row["fabrik"].pop("idle_us")
        baseline = row["none"]["ms"]
        for kind in KINDS[1:]:
            row[kind]["overhead_ms"] = row[kind]["ms"] - baseline
        row["ratio"] = row["fabrik"]["overhead_ms"] / max(row["blender"]["overhead_ms"], 1e-9)
        row["floor_ratio"] = row["floor"]["overhead_ms"] / max(row["blender"]["overhead_ms"], 1e-9)
        # The add-on's own work: what it costs beyond writing the same bones, per chain.
        row["above_floor_ms_per_chain"] = (row["fabrik"]["ms"] - row["floor"]["ms"]) / case.chains
        if "alternated" in row:  # the same, from FABRIK IK's and the floor's frames taken in turn (median)
            alternated = row.pop("alternated")
            row["above_floor_ms_per_chain"] = float(np.median([a[0] - a[1] for a in alternated])) / case.chains
            if case.lean:  # LeanArm's frames, likewise
                row["lean_above_floor_ms"] = float(np.median([a[2] - a[1] for a in alternated]))
        # The add-on's handler alone (its solve and writes, not Blender's re-evaluation), per chain.
        row["handler_ms_per_chain"] = row["fabrik"]["handler_ms"] / case.chains
        rows.append(row)
    return {"machine": f"{platform.machine()}, Blender {bpy.app.version_string}", "frames": len(FRAMES),
            "rounds": rounds, "clock": clock_name, "cases": rows}


def print_table(data: dict) -> None:
    clock_name = {"wall": "wall clock", "cpu": "process CPU time"}[data.get("clock", "wall")]
    print(f"per-frame IK overhead over no IK ({data['machine']}, {data['frames']} frames, median; "
          f"fastest of {data['rounds']} rounds; {clock_name})")
    print(f"{'case':20s} {'Blender IK ms':>14s} {'FABRIK IK ms':>13s} {'ratio':>7s} {'write floor ms':>15s} "
          f"{'floor ratio':>12s} {'above floor/chain':>18s} {'handler/chain':>14s} {'Blender max err':>16s} "
          f"{'FABRIK max err':>15s}")
    for row in data["cases"]:
        print(f"{row['case']:20s} {row['blender']['overhead_ms']:14.3f} {row['fabrik']['overhead_ms']:13.3f} "
              f"{row['ratio']:7.2f} {row['floor']['overhead_ms']:15.3f} {row['floor_ratio']:12.2f} "
              f"{row['above_floor_ms_per_chain']:18.4f} {row['handler_ms_per_chain']:14.4f} "
              f"{row['blender']['max_error']:16.2e} {row['fabrik']['max_error']:15.2e}")
    print("write floor: the same rigs, a frame handler that only writes the chains' bones, the values FABRIK IK "
          "wrote at that frame, as the add-on writes them, tagging the armature (no solve); a ratio below the floor "
          "ratio is out of reach for a Python add-on. above floor/chain: (FABRIK IK - write floor) / chains, ms (real "
          "rigs: FABRIK IK and the floor take the frames in turn in one scene, median of rounds); "
          "handler/chain: FABRIK IK's frame handler alone (median), per chain, ms")
    arms = {row["case"]: row for row in data["cases"] if row["case"].startswith("arm + ")}
    small_arm, big_arm = arms.get("arm + 0 bones"), arms.get("arm + 1000 bones")
    if small_arm and big_arm:
        print(f"one arm, 1000 other bones against none: write floor x{_growth(big_arm, small_arm, 'floor'):.1f}, "
              f"FABRIK IK above the floor x{_above(big_arm) / _above(small_arm):.2f}, FABRIK IK's handler "
              f"x{big_arm['handler_ms_per_chain'] / small_arm['handler_ms_per_chain']:.2f}")
    if small_arm and big_arm and "lean_above_floor_ms" in small_arm:
        print(f"a lean Python two-bone handler (LeanArm: reads, law of cosines, two writes; no checks) above the "
              f"floor, taking frames in turn with FABRIK IK and the floor: {small_arm['lean_above_floor_ms']:.4f} ms "
              f"on 0 other bones, {big_arm['lean_above_floor_ms']:.4f} ms on 1000 (FABRIK IK {_above(small_arm):.4f} "
              f"and {_above(big_arm):.4f})")
    if small_arm and "swept_handler_ms" in small_arm:
        line = (f"FABRIK IK's handler, one arm on 0 other bones: {small_arm['handler_ms_per_chain']:.3f} ms; after "
                f"touching {SWEEP_MB} MB of memory each frame first (the caches as Blender's re-evaluation of a big "
                f"armature leaves them): {small_arm['swept_handler_ms']:.3f} ms")
        if big_arm:
            line += f"; on 1000 other bones: {big_arm['handler_ms_per_chain']:.3f} ms"
        print(line)
    idle = [row["idle_us"] for row in data["cases"] if "idle_us" in row]
    if idle:
        print(f"idle depsgraph handler cost (nothing changed, 100 chains): {idle[0]:.1f} us per update")


def _above(row: dict) -> float:
    return row["above_floor_ms_per_chain"]


def _growth(row: dict, base: dict, kind: str) -> float:
    return row[kind]["overhead_ms"] / max(base[kind]["overhead_ms"], 1e-9)
