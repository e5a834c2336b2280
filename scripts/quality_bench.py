"""Pose quality in Blender against its own IK constraint: identical rigs, identical keyed target paths.

Every rig is built twice in one file (Blender's IK constraint, FABRIK IK) with the same rest chain, the
same target path keyed on every frame and the same pole. Measured per rig and solver:

- largest per-frame bone turn: the angle of each bone's world rotation between consecutive frames,
  the largest over bones and frames, and how many frames turn some bone by more than 5 degrees;
- reach: the largest tip-to-target distance over the path (the paths stay inside reach).

Then three cases on their own: a 50-bone chain and a reachable target at default settings (distance,
status); influence (the tip's distance at influence 0.5 over its distance at 0, and frames where the
distance grows with influence); rotation-mode invariance (the same pose without IK stored as
quaternion, Euler and axis-angle channels: the largest difference of the solved world poses).
"""

from __future__ import annotations

import math
import platform
from dataclasses import dataclass, field
from typing import Any

import bpy
import numpy as np
from mathutils import Quaternion

import fabrik_addon
from rigkit.blender import armature, set_rotation

FRAMES = 400  # the target's loop takes this many frames: step 0.3-0.4% of the chain's length
POP_DEGREES = 5.0


@dataclass
class Rig:
    name: str
    joints: list[tuple[float, float, float]]  # rest heads and the tip's tail
    pole: tuple[float, float, float] | None = None
    solver: str = 'FABRIK'
    cone: float | None = None  # the same cone (radians, all four angles) on every bone
    hinges: dict[int, tuple[float, float]] = field(default_factory=dict)  # bone -> (min, max) about local X

    @property
    def length(self) -> float:
        j = np.array(self.joints)
        return float(np.linalg.norm(np.diff(j, axis=0), axis=1).sum())


def _arc(n: int, bow: float, length: float = 2.0) -> list[tuple[float, float, float]]:
    """A planar chain up +Z bowing toward +Y (bend plane YZ)."""
    out = []
    for k in range(n + 1):
        s = k / n
        out.append((0.0, bow * math.sin(math.pi * s), length * s))
    return out


def _curve(n: int, length: float = 2.0) -> list[tuple[float, float, float]]:
    """A gently curving non-planar chain up +Z."""
    out = [(0.0, 0.0, 0.0)]
    step = length / n
    for k in range(n):
        x, y, z = out[-1]
        a = 0.35 * math.sin(1.3 * k + 0.4)
        b = 0.3 * math.cos(0.9 * k)
        d = np.array([math.sin(a) * math.cos(b), math.sin(b), math.cos(a) * math.cos(b)])
        d /= np.linalg.norm(d)
        out.append((x + step * d[0], y + step * d[1], z + step * d[2]))
    return out


RIGS = [
    Rig("2-bone arm, pole", [(0.0, 0.0, 0.0), (0.0, 0.1, 1.0), (0.0, 0.0, 2.0)], pole=(0.0, 2.0, 1.0),
        solver='TWO_BONE'),
    Rig("3-bone planar", _arc(3, 0.25)),
    Rig("4-bone leg, pole", _arc(4, 0.25), pole=(0.0, 2.0, 1.0)),
    Rig("10-bone", _curve(10)),
    Rig("4-bone, cones 60", _arc(4, 0.25), cone=math.radians(60.0)),
    Rig("3-bone leg, hinges, pole", [(0.0, 0.0, 0.0), (0.0, 0.1, 1.0), (0.0, 0.0, 2.0), (0.0, 0.1, 2.5)],
        pole=(0.0, 2.0, 1.0), hinges={1: (math.radians(-10.0), math.radians(150.0)),
                                      2: (math.radians(-60.0), math.radians(60.0))}),
]


def target_path(rig: Rig, frames: int = FRAMES) -> np.ndarray:
    """A smooth closed loop inside reach: an ellipse about a point 0.7 of the way to the rest tip, in
    the chain's axis and bend directions, with a small out-of-plane wobble."""
    j = np.array(rig.joints)
    length = rig.length
    root, tip = j[0], j[-1]
    axis = (tip - root) / np.linalg.norm(tip - root)
    bend = j[1:-1].mean(axis=0) - root if len(j) > 2 else np.array([0.0, 1.0, 0.0])
    bend = bend - (bend @ axis) * axis
    bend = bend / np.linalg.norm(bend) if np.linalg.norm(bend) > 1e-6 else np.array([0.0, 1.0, 0.0])
    side = np.cross(axis, bend)
    centre = root + 0.7 * (tip - root)
    t = 2.0 * math.pi * np.arange(frames) / frames
    return (centre + 0.2 * length * (np.cos(t)[:, None] * axis + np.sin(t)[:, None] * bend)
            + 0.08 * length * np.sin(2.0 * t)[:, None] * side)


def _key_locations(ob, points: np.ndarray, first_frame: int = 1) -> None:
    """Key ``ob.location`` at every frame through ``points`` (linear, so between keys nothing moves)."""
    ob.animation_data_create()
    for k, point in enumerate(points):
        ob.location = tuple(point)
        ob.keyframe_insert("location", frame=first_frame + k)
    for curve in _fcurves(ob):
        for key in curve.keyframe_points:
            key.interpolation = 'LINEAR'


def _fcurves(ob):
    action = ob.animation_data.action
    if hasattr(action, "fcurves"):
        return action.fcurves
    # Blender 4.4+ slotted actions
    curves = []
    for layer in action.layers:
        for strip in layer.strips:
            for bag in strip.channelbags:
                curves.extend(bag.fcurves)
    return curves


def build_armature(name: str, rig: Rig, location=(0.0, 0.0, 0.0)):
    """The rig's joints as a connected chain of bones ``b0``, ``b1``, ..., roll 0."""
    joints = rig.joints
    return armature(name, [(f"b{k}", joints[k], joints[k + 1], f"b{k - 1}" if k else None, k > 0, 0.0)
                           for k in range(len(joints) - 1)], location)


def _empty(name: str, location) -> Any:
    ob = bpy.data.objects.new(name, None)
    ob.location = tuple(location)
    bpy.context.scene.collection.objects.link(ob)
    return ob


def add_solver(kind: str, ob, rig: Rig, target, pole, tolerance: float | None = 1e-4, iterations: int | None = 100):
    """Blender's IK constraint or a FABRIK chain on ``ob``'s chain of ``rig``; returns the constraint or chain."""
    n = len(rig.joints) - 1
    tip = f"b{n - 1}"
    for k in range(n):
        pb = ob.pose.bones[f"b{k}"]
        if kind == "blender":
            if rig.cone is not None:
                pb.use_ik_limit_x = pb.use_ik_limit_z = True
                pb.ik_min_x = pb.ik_min_z = -rig.cone
                pb.ik_max_x = pb.ik_max_z = rig.cone
            if k in rig.hinges:
                pb.lock_ik_y = pb.lock_ik_z = True
                pb.use_ik_limit_x = True
                pb.ik_min_x, pb.ik_max_x = rig.hinges[k]
        else:
            if rig.cone is not None:
                lim = pb.fabrik_limit
                lim.mode = 'CONE'
                lim.cone_left = lim.cone_right = lim.cone_up = lim.cone_down = rig.cone
            if k in rig.hinges:
                lim = pb.fabrik_limit
                lim.mode = 'HINGE'
                lim.hinge_min, lim.hinge_max = rig.hinges[k]
    if kind == "blender":
        constraint = ob.pose.bones[tip].constraints.new('IK')
        constraint.target = target
        constraint.chain_count = n
        if pole is not None:
            constraint.pole_target = pole
            constraint.pole_angle = _best_pole_angle(ob, constraint, rig)
        return constraint
    chain = ob.fabrik.chains.add()
    chain.name, chain.tip_bone, chain.chain_length = tip, tip, n
    chain.target, chain.pole = target, pole
    chain.solver = rig.solver
    if tolerance is not None:
        chain.tolerance = tolerance
    if iterations is not None:
        chain.iterations = iterations
    return chain


def _best_pole_angle(ob, constraint, rig: Rig) -> float:
    """Blender's pole angle depends on the bones' axes: pick the quarter turn that bends the chain in
    its rest bend plane, toward the pole (the middle joint nearest the pole at the first frame)."""
    bpy.context.scene.frame_set(1)
    best, best_distance = 0.0, math.inf
    middle = f"b{(len(rig.joints) - 1) // 2}"
    for angle in (0.0, math.pi / 2, math.pi, -math.pi / 2):
        constraint.pole_angle = angle
        bpy.context.view_layer.update()
        ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
        head = np.array(ev.matrix_world @ ev.pose.bones[middle].tail)
        distance = float(np.linalg.norm(head - np.array(rig.pole)))
        if distance < best_distance:
            best, best_distance = angle, distance
    return best


def world_pose(ob, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Evaluated world rotations ``(n, 3, 3)`` and joints ``(n + 1, 3)`` of bones b0..b{n-1}."""
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    world = np.array(ev.matrix_world)
    rotations, joints = [], []
    for k in range(n):
        pb = ev.pose.bones[f"b{k}"]
        m = world @ np.array(pb.matrix)
        r = m[:3, :3] / np.linalg.norm(m[:3, :3], axis=0)
        rotations.append(r)
        joints.append(m[:3, 3])
    joints.append(np.array(world @ np.array([*ev.pose.bones[f"b{n - 1}"].tail, 1.0]))[:3])
    return np.array(rotations), np.array(joints)


def turn_degrees(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angles (degrees) of the rotations taking each of ``a (n, 3, 3)`` to ``b``."""
    rel = np.swapaxes(a, 1, 2) @ b
    cos = np.clip((np.trace(rel, axis1=1, axis2=2) - 1.0) / 2.0, -1.0, 1.0)
    # acos loses precision near 0: take the angle from the skew part too.
    skew = np.stack([rel[:, 2, 1] - rel[:, 1, 2], rel[:, 0, 2] - rel[:, 2, 0], rel[:, 1, 0] - rel[:, 0, 1]], axis=1)
    return np.degrees(np.arctan2(0.5 * np.linalg.norm(skew, axis=1), cos))


def run_path(rig: Rig, kind: str, settings: tuple[float | None, int | None] = (None, None)) -> dict:
    """One rig, one solver, the whole keyed loop; FABRIK at its default tolerance and iterations unless
    ``settings`` gives them."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    if kind == "fabrik":
        fabrik_addon.register()
    try:
        scene = bpy.context.scene
        path = target_path(rig)
        scene.frame_start, scene.frame_end = 1, len(path)
        ob = build_armature("Rig", rig)
        target = _empty("Target", path[0])
        _key_locations(target, path)
        pole = None if rig.pole is None else _empty("Pole", rig.pole)
        n = len(rig.joints) - 1
        add_solver(kind, ob, rig, target, pole, *settings)
        turns, errors, previous = [], [], None
        for f in range(1, len(path) + 1):
            scene.frame_set(f)
            rotations, joints = world_pose(ob, n)
            errors.append(float(np.linalg.norm(joints[-1] - path[f - 1])))
            if previous is not None:
                turns.append(float(turn_degrees(previous, rotations).max()))
            previous = rotations
        # the loop closes: the last frame to the first
        scene.frame_set(1)
        turns.append(float(turn_degrees(previous, world_pose(ob, n)[0]).max()))
        steps = np.linalg.norm(np.diff(np.vstack([path, path[:1]]), axis=0), axis=1)
        return {"max_turn_deg": max(turns), "frames_over_5": int(sum(t > POP_DEGREES for t in turns)),
                "max_error": max(errors), "step_pct": float(steps.max() / rig.length * 100.0)}
    finally:
        if kind == "fabrik":
            fabrik_addon.unregister()


def run_long_chain(kind: str, default_settings: bool = True) -> dict:
    """A 50-bone chain (length 2) and targets it can reach at default settings: distance and status."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    if kind == "fabrik":
        fabrik_addon.register()
    try:
        rig = Rig("50 bones", _curve(50))
        ob = build_armature("Rig", rig)
        # Targets from forward kinematics of curled poses of the same chain: surely reachable.
        rng = np.random.default_rng(50)
        targets = []
        lengths = np.linalg.norm(np.diff(np.array(rig.joints), axis=0), axis=1)
        for _ in range(8):
            d = np.array([0.0, 0.0, 1.0])
            axis = rng.normal(size=3)
            axis /= np.linalg.norm(axis)
            turn = Quaternion(axis, rng.uniform(0.08, 0.2)).to_matrix()
            point = np.zeros(3)
            for length in lengths:
                d = np.array(turn) @ d
                point = point + length * d
            targets.append(point)
        target = _empty("Target", targets[0])
        solver = add_solver(kind, ob, rig, target, None, *((None, None) if default_settings else (1e-4, 100)))
        errors, statuses = [], []
        for point in targets:
            target.location = tuple(point)
            bpy.context.view_layer.update()
            _, joints = world_pose(ob, 50)
            errors.append(float(np.linalg.norm(joints[-1] - point)))
            if kind == "fabrik":
                statuses.append(solver.status)
        out: dict[str, Any] = {"max_error": max(errors), "targets": len(targets)}
        if kind == "fabrik":
            out["statuses"] = sorted(set(statuses))
            out["messages"] = sorted({getattr(solver, "message", "")} - {""})
        return out
    finally:
        if kind == "fabrik":
            fabrik_addon.unregister()


INFLUENCES = [k / 10 for k in range(11)]


def run_influence(kind: str, rig: Rig, frames: int = 40) -> dict:
    """Tip distance to the target as influence goes 0 -> 1, at ``frames`` points of the path."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    if kind == "fabrik":
        fabrik_addon.register()
    try:
        path = target_path(rig, frames)
        ob = build_armature("Rig", rig)
        target = _empty("Target", path[0])
        pole = None if rig.pole is None else _empty("Pole", rig.pole)
        solver = add_solver(kind, ob, rig, target, pole)
        n = len(rig.joints) - 1
        ratios, nonmonotone = [], 0
        for point in path:
            target.location = tuple(point)
            distances = []
            for influence in INFLUENCES:
                solver.influence = influence
                bpy.context.view_layer.update()
                distances.append(float(np.linalg.norm(world_pose(ob, n)[1][-1] - point)))
            ratios.append(distances[5] / distances[0])
            nonmonotone += any(b > a + 1e-6 for a, b in zip(distances, distances[1:]))
        return {"ratio_min": min(ratios), "ratio_max": max(ratios), "nonmonotone_frames": nonmonotone,
                "frames": len(path)}
    finally:
        if kind == "fabrik":
            fabrik_addon.unregister()


MODES = ('QUATERNION', 'XYZ', 'ZXY', 'YZX', 'AXIS_ANGLE')


def run_rotation_modes(kind: str, rig: Rig, frames: int = 60) -> dict:
    """The same pose without IK stored in each rotation mode (one armature per mode, same place, same
    target path): the largest difference of the solved world poses from the quaternion one."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    if kind == "fabrik":
        fabrik_addon.register()
    try:
        n = len(rig.joints) - 1
        rng = np.random.default_rng(7)
        base = []
        for _ in range(n):
            axis = rng.normal(size=3)
            base.append(Quaternion(axis / np.linalg.norm(axis), rng.uniform(0.05, 0.3)))
        path = target_path(rig, frames)
        rigs = []
        for mode in MODES:
            ob = build_armature(f"Rig_{mode}", rig)
            for k, q in enumerate(base):
                pb = ob.pose.bones[f"b{k}"]
                pb.rotation_mode = mode
                set_rotation(pb, q)
            target = _empty(f"Target_{mode}", path[0])
            pole = None if rig.pole is None else _empty(f"Pole_{mode}", rig.pole)
            add_solver(kind, ob, rig, target, pole)
            rigs.append((ob, target))
        worst_deg, worst_joint = 0.0, 0.0
        for point in path:
            for _, target in rigs:
                target.location = tuple(point)
            bpy.context.view_layer.update()
            reference = world_pose(rigs[0][0], n)
            for ob, _ in rigs[1:]:
                rotations, joints = world_pose(ob, n)
                worst_deg = max(worst_deg, float(turn_degrees(reference[0], rotations).max()))
                worst_joint = max(worst_joint, float(np.abs(reference[1] - joints).max()))
        return {"max_deg": worst_deg, "max_joint": worst_joint, "frames": len(path)}
    finally:
        if kind == "fabrik":
            fabrik_addon.unregister()


def run() -> dict:
    paths = []
    for rig in RIGS:
        row = {"rig": rig.name, "bones": len(rig.joints) - 1}
        for kind in ("blender", "fabrik"):
            row[kind] = run_path(rig, kind)
        paths.append(row)
    long_chain = {kind: run_long_chain(kind) for kind in ("blender", "fabrik")}
    ten = next(r for r in RIGS if r.name == "10-bone")
    influence = {kind: run_influence(kind, ten) for kind in ("blender", "fabrik")}
    modes = []
    for rig in RIGS:
        if rig.cone is None and not rig.hinges and rig.name != "10-bone":
            continue
        modes.append({"rig": rig.name, **{kind: run_rotation_modes(kind, rig) for kind in ("blender", "fabrik")}})
    return {"machine": f"{platform.machine()}, Blender {bpy.app.version_string}", "frames": FRAMES,
            "paths": paths, "long_chain": long_chain, "influence": influence, "rotation_modes": modes}


def print_table(data: dict) -> None:
    print(f"pose quality against Blender's IK ({data['machine']}; keyed loop of {data['frames']} frames, "
          f"the same rig and path for both)")
    print(f"{'rig':26s} {'step %':>6s} | {'Blender max turn':>16s} {'>5 deg':>6s} {'max err':>8s} | "
          f"{'FABRIK max turn':>15s} {'>5 deg':>6s} {'max err':>8s}")
    for row in data["paths"]:
        b, f = row["blender"], row["fabrik"]
        print(f"{row['rig']:26s} {f['step_pct']:6.2f} | {b['max_turn_deg']:16.2f} {b['frames_over_5']:6d} "
              f"{b['max_error']:8.1e} | {f['max_turn_deg']:15.2f} {f['frames_over_5']:6d} {f['max_error']:8.1e}")
    lc = data["long_chain"]
    print(f"50 bones, default settings, {lc['fabrik']['targets']} reachable targets: Blender max distance "
          f"{lc['blender']['max_error']:.3g}; FABRIK {lc['fabrik']['max_error']:.3g}, status "
          f"{', '.join(lc['fabrik']['statuses'])} {'; '.join(lc['fabrik']['messages'])}")
    inf = data["influence"]
    print(f"influence 0.5 on 10 bones, distance over the no-IK distance ({inf['fabrik']['frames']} targets): "
          f"Blender {inf['blender']['ratio_min']:.2f}-{inf['blender']['ratio_max']:.2f} "
          f"(non-monotone {inf['blender']['nonmonotone_frames']}); FABRIK "
          f"{inf['fabrik']['ratio_min']:.2f}-{inf['fabrik']['ratio_max']:.2f} "
          f"(non-monotone {inf['fabrik']['nonmonotone_frames']})")
    for row in data["rotation_modes"]:
        print(f"rotation modes {', '.join(MODES)} on '{row['rig']}': largest world difference from quaternion: "
              f"Blender {row['blender']['max_deg']:.2g} deg / {row['blender']['max_joint']:.2g}, "
              f"FABRIK {row['fabrik']['max_deg']:.2g} deg / {row['fabrik']['max_joint']:.2g}")
