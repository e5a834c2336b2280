"""Pose quality in Blender against its own IK constraint: identical rigs, identical keyed target paths.

Every rig is built twice in one file (Blender's IK constraint, FABRIK IK) with the same rest chain, the
same target path keyed on every frame and the same pole. Measured per rig and solver:

- largest per-frame bone turn: the angle of each bone's world rotation between consecutive frames,
  the largest over bones and frames, and how many frames turn some bone by more than 5 degrees;
- reach: the largest tip-to-target distance over the path (the paths stay inside reach);
- hinges: how far a hinged bone leaves its hinge (twist off a pure local-X turn, or a turn beyond its range),
  the largest over the path.

Each FABRIK run logs the solve's path (tree or lone chain), status and passes per frame, and reports
them on both sides of its largest turn, so a jump can be traced to the step that makes it.

Then cases on their own: a 50-bone chain and a reachable target at default settings (distance,
status); influence on 2, 3 and 10 bones (the tip's distance at influence 0.5 over its distance at 0,
frames where the distance grows with influence, bone-frames where a bone turns farther from its pose
without IK than at influence 1); rotation-mode invariance (the same pose without IK stored as
quaternion, Euler and axis-angle channels: the largest difference of the solved world poses); trees
(a torso with hinge forearms and/or poles, a Y whose branches start at one point or 0.08 apart, with
cones) on targets from their own forward-kinematics walk: turns, misses, a hinged forearm off a pure
local-X turn, an elbow off its pole's plane, and rotation modes on the Y; the edge of reach (a target
crossing full reach out and back at several speeds and angles, on 2-10 bones straight or bent at rest,
with and without a pole, and on the Rigify metarig's finger): the largest per-frame turn per crossing.
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
from rigkit.blender import armature, off_x, relative_rotations, set_rotation

FRAMES = 400  # the target's loop takes this many frames: step 0.3-0.4% of the chain's length
POP_DEGREES = 5.0


@dataclass
class Rig:
    name: str
    joints: list[tuple[float, float, float]]  # rest heads and the tip's tail
    pole: tuple[float, float, float] | None = None
    solver: str = 'FABRIK'
    cone: float | tuple[float, float, float, float] | None = None  # the same cone on every bone (radians: one
    # angle for all four, or left, right, up, down)
    hinges: dict[int, tuple[float, float]] = field(default_factory=dict)  # bone -> (min, max) about local X
    path: str = 'loop'  # the target's path: 'loop' (target_path) or 'behind' (behind_path)
    rolls: tuple[float, ...] = ()  # each bone's roll (radians; none given: 0)

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
    # issue 23: part of the loop lies beyond what the cones allow
    Rig("4-bone leg, pole, cones", _arc(4, 0.25), pole=(0.0, 2.0, 1.0), cone=(0.5, 0.5, 0.6, 0.4)),
]


def target_path(rig: Rig, frames: int = FRAMES) -> np.ndarray:
    """A smooth closed loop inside reach: an ellipse about a point 0.7 of the way to the rest tip, in
    the chain's axis and bend directions, with a small out-of-plane wobble."""
    if rig.path == 'behind':
        return behind_path(rig, frames)
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


def behind_path(rig: Rig, frames: int = FRAMES) -> np.ndarray:
    """A circle of radius 0.4 of the chain's length about its axis, a quarter of the length above the root:
    the target passes in front of the bend and behind it, where no cone lets the chain fold."""
    j = np.array(rig.joints)
    length = rig.length
    axis = (j[-1] - j[0]) / np.linalg.norm(j[-1] - j[0])
    bend = np.array([0.0, 1.0, 0.0]) - axis[1] * axis
    bend /= np.linalg.norm(bend)
    side = np.cross(axis, bend)
    t = 2.0 * math.pi * np.arange(frames) / frames
    return j[0] + 0.25 * length * axis + 0.4 * length * (np.cos(t)[:, None] * bend + np.sin(t)[:, None] * side)


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
    """The rig's joints as a connected chain of bones ``b0``, ``b1``, ..., rolled by ``rig.rolls`` (else 0)."""
    joints = rig.joints
    return armature(name, [(f"b{k}", joints[k], joints[k + 1], f"b{k - 1}" if k else None, k > 0,
                            rig.rolls[k] if k < len(rig.rolls) else 0.0) for k in range(len(joints) - 1)], location)


def _empty(name: str, location) -> Any:
    ob = bpy.data.objects.new(name, None)
    ob.location = tuple(location)
    bpy.context.scene.collection.objects.link(ob)
    return ob


def _four(cone: float | tuple[float, float, float, float]) -> tuple[float, float, float, float]:
    return (cone, cone, cone, cone) if isinstance(cone, float) else cone


def set_blender_cone(pb, cone) -> None:
    """The closest per-axis IK limits to a cone: a turn about +X tilts the bone up (+Z), about +Z left (-X)."""
    left, right, up, down = _four(cone)
    pb.use_ik_limit_x = pb.use_ik_limit_z = True
    pb.ik_min_x, pb.ik_max_x = -down, up
    pb.ik_min_z, pb.ik_max_z = -right, left


def set_fabrik_cone(pb, cone) -> None:
    lim = pb.fabrik_limit
    lim.mode = 'CONE'
    lim.cone_left, lim.cone_right, lim.cone_up, lim.cone_down = _four(cone)


def add_solver(kind: str, ob, rig: Rig, target, pole, tolerance: float | None = 1e-4, iterations: int | None = 100):
    """Blender's IK constraint or a FABRIK chain on ``ob``'s chain of ``rig``; returns the constraint or chain."""
    n = len(rig.joints) - 1
    tip = f"b{n - 1}"
    for k in range(n):
        pb = ob.pose.bones[f"b{k}"]
        if kind == "blender":
            if rig.cone is not None:
                set_blender_cone(pb, rig.cone)
            if k in rig.hinges:
                pb.lock_ik_y = pb.lock_ik_z = True
                pb.use_ik_limit_x = True
                pb.ik_min_x, pb.ik_max_x = rig.hinges[k]
        else:
            if rig.cone is not None:
                set_fabrik_cone(pb, rig.cone)
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
        solver = add_solver(kind, ob, rig, target, pole, *settings)
        turns, errors, previous, log, off_hinge = [], [], None, [], 0.0
        for f in range(1, len(path) + 1):
            scene.frame_set(f)
            rotations, joints = world_pose(ob, n)
            errors.append(float(np.linalg.norm(joints[-1] - path[f - 1])))
            off_hinge = max([off_hinge, *(hinge_error(ob, k, hinge) for k, hinge in rig.hinges.items())])
            if kind == "fabrik":
                log.append(frame_log(solver))
            if previous is not None:
                turns.append(float(turn_degrees(previous, rotations).max()))
            previous = rotations
        # the loop closes: the last frame to the first
        scene.frame_set(1)
        turns.append(float(turn_degrees(previous, world_pose(ob, n)[0]).max()))
        steps = np.linalg.norm(np.diff(np.vstack([path, path[:1]]), axis=0), axis=1)
        out = {"max_turn_deg": max(turns), "frames_over_5": int(sum(t > POP_DEGREES for t in turns)),
               "max_error": max(errors), "step_pct": float(steps.max() / rig.length * 100.0),
               "turn_change": turn_change(turns), "off_hinge_deg": off_hinge}
        if log:
            out["worst"] = worst_frame(turns, log)
        return out
    finally:
        if kind == "fabrik":
            fabrik_addon.unregister()


def hinge_error(ob, k: int, hinge: tuple[float, float]) -> float:
    """Degrees by which bone ``b{k}``'s rotation relative to its rest under its parent (the armature for the root)
    leaves its hinge: off a pure local-X turn, or beyond its range, whichever is more."""
    pb = ob.pose.bones[f"b{k}"]
    if pb.parent is None:
        ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get()).pose.bones[pb.name]
        q = (ev.bone.matrix_local.inverted() @ ev.matrix).to_quaternion()
    else:
        q = relative_rotations(ob, [pb.parent.name, pb.name])[0]
    angle = 2.0 * math.atan2(q.x, q.w) if q.w >= 0.0 else 2.0 * math.atan2(-q.x, -q.w)
    beyond = max(hinge[0] - angle, angle - hinge[1], 0.0)
    return max(off_x(q), math.degrees(beyond))


def frame_log(chain) -> dict:
    """What the solve did this frame: its path (tree or lone chain), status and passes."""
    return {"path": "tree" if chain.group else "chain", "status": chain.status, "iterations": chain.last_iterations}


def worst_frame(turns: list[float], log: list[dict]) -> dict:
    """The frame after the largest turn (1-based; the loop's closing step counts as frame 1) with the
    solve's path and passes on it and on the frame before, so a jump can be traced to the step that makes it."""
    k = int(np.argmax(turns))  # turns[k] is frame k + 1 -> k + 2
    after = (k + 1) % len(log)
    return {"frame": after + 1, "turn_deg": turns[k], "before": log[k], "after": log[after],
            "not_reached": sum(entry["status"] != 'REACHED' for entry in log),
            "iterations_max": max(entry["iterations"] for entry in log)}


def turn_change(turns: list[float]) -> float:
    """The largest change of the per-frame turn between consecutive frames (degrees/frame^2)."""
    return float(np.abs(np.diff(turns)).max()) if len(turns) > 1 else 0.0


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
INFLUENCE_RIGS = ("2-bone arm, pole", "3-bone planar", "10-bone")


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
        ratios, nonmonotone, passing, passing_world = [], 0, 0, 0
        for point in path:
            target.location = tuple(point)
            distances, turned, world = [], [], []
            for influence in INFLUENCES:
                solver.influence = influence
                bpy.context.view_layer.update()
                rotations, joints = world_pose(ob, n)
                distances.append(float(np.linalg.norm(joints[-1] - point)))
                turned.append(local_turns(ob, n))
                world.append(rotations)
            ratios.append(distances[5] / distances[0])
            nonmonotone += any(b > a + 1e-6 for a, b in zip(distances, distances[1:]))
            full = np.array(turned[-1])
            passing += int((np.array(turned[1:-1]) > full + 1e-5).any(axis=0).sum())
            # in world space: each bone's turn from its world rotation without IK
            away = np.array([turn_degrees(world[0], r) for r in world])
            passing_world += int((away[1:-1] > away[-1] + 1e-3).any(axis=0).sum())
        return {"ratio_min": min(ratios), "ratio_max": max(ratios), "nonmonotone_frames": nonmonotone,
                "frames": len(path), "bone_frames_past_full": passing, "bone_frames_past_full_world": passing_world}
    finally:
        if kind == "fabrik":
            fabrik_addon.unregister()


def local_turns(ob, n: int) -> list[float]:
    """Each bone's evaluated turn (radians) relative to its parent from the rest pose (here the pose without IK)."""
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    root = ev.pose.bones["b0"]
    first = (root.bone.matrix_local.inverted() @ root.matrix).to_quaternion().angle
    return [first] + [q.angle for q in relative_rotations(ob, [f"b{k}" for k in range(n)])]


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


@dataclass
class TreeRig:
    """Chains sharing bones: bones ``(name, head, tail, parent, connected)``, chains ``(tip, count, pole)``;
    targets from the rig's own forward kinematics (a smooth walk of every bone), so all are reachable."""
    name: str
    bones: list[tuple]
    chains: list[tuple[str, int, tuple[float, float, float] | None]]
    hinges: dict[str, tuple[float, float]] = field(default_factory=dict)  # bone -> (min, max) about local X
    cones: dict[str, tuple[float, float, float, float]] = field(default_factory=dict)  # bone -> left, right, up, down
    planar: tuple[str, ...] = ()  # bones turning about local X alone in the walk (a planar elbow)


def torso_bones() -> list[tuple]:
    return [("spine0", (0, 0, 0.0), (0, 0, 0.6), None, False), ("spine1", (0, 0, 0.6), (0, 0, 1.2), "spine0", True),
            ("upper.L", (0.2, 0, 1.15), (0.7, 0, 1.05), "spine1", False),
            ("fore.L", (0.7, 0, 1.05), (1.2, 0, 1.1), "upper.L", True),
            ("upper.R", (-0.2, 0, 1.15), (-0.7, 0, 1.05), "spine1", False),
            ("fore.R", (-0.7, 0, 1.05), (-1.2, 0, 1.1), "upper.R", True)]  # arms bent about their local X


def creature_bones(gap: float) -> list[tuple]:
    """A trunk whose two 2-bone branches start ``gap`` apart at its tail (0: one point)."""
    return [("trunk", (0, 0, 0.0), (0, 0, 1.0), None, False),
            ("a.L", (gap / 2, 0, 1.0), (0.45, 0.05, 1.5), "trunk", gap == 0.0),
            ("b.L", (0.45, 0.05, 1.5), (0.9, 0, 2.0), "a.L", True),
            ("a.R", (-gap / 2, 0, 1.0), (-0.45, 0.05, 1.5), "trunk", gap == 0.0),
            ("b.R", (-0.45, 0.05, 1.5), (-0.9, 0, 2.0), "a.R", True)]


ARMS = [("fore.L", 4, None), ("fore.R", 4, None)]
ARM_POLES = [("fore.L", 4, (0.7, 0.0, 0.1)), ("fore.R", 4, (-0.7, 0.0, 0.1))]  # below the elbows
HINGE = (math.radians(-150.0), math.radians(150.0))
Y_POLES = [("b.L", 3, (0.45, 1.0, 1.5)), ("b.R", 3, (-0.45, 1.0, 1.5))]  # in front of the Y's elbows
# Lopsided cones a little wider than the walk's swing, and elbows that only bend one way (0 to 92 degrees): the
# limited branches come to the edge of what their limits allow (docs/trees.md, "Continued from the first solve").
LOPSIDED = {"spine0": (0.6539, 0.565, 0.5988, 0.3841), "upper.L": (0.497, 0.5053, 0.4041, 0.3492),
            "upper.R": (0.5047, 0.5872, 0.6049, 0.3841)}
ONE_WAY = (0.0, 1.6)
TREES = [
    TreeRig("torso, hinge forearms", torso_bones(), ARMS, hinges={"fore.L": HINGE, "fore.R": HINGE},
            planar=("fore.L", "fore.R")),
    TreeRig("torso, poles", torso_bones(), ARM_POLES, planar=("fore.L", "fore.R")),
    TreeRig("torso, poles, hinges", torso_bones(), ARM_POLES, hinges={"fore.L": HINGE, "fore.R": HINGE},
            planar=("fore.L", "fore.R")),
    TreeRig("torso, lopsided cones, one-way elbows", torso_bones(), ARMS,
            hinges={"fore.L": ONE_WAY, "fore.R": ONE_WAY}, cones=LOPSIDED),
    TreeRig("torso, lopsided cones, one-way elbows, poles", torso_bones(), ARM_POLES,
            hinges={"fore.L": ONE_WAY, "fore.R": ONE_WAY}, cones=LOPSIDED),
    TreeRig("Y, branches at one point", creature_bones(0.0), [("b.L", 3, None), ("b.R", 3, None)]),
    TreeRig("Y, branches 0.08 apart", creature_bones(0.08), [("b.L", 3, None), ("b.R", 3, None)]),
    TreeRig("Y at one point, cones", creature_bones(0.0), [("b.L", 3, None), ("b.R", 3, None)],
            cones={n: (0.6, 0.6, 0.6, 0.6) for n in ("a.L", "b.L", "a.R", "b.R")}),
    TreeRig("Y at one point, poles", creature_bones(0.0), Y_POLES),
    TreeRig("Y 0.08 apart, poles", creature_bones(0.08), Y_POLES),
]
TREE_WALK = 0.27  # radians: each bone's swing in the forward-kinematics walk (steps <= 0.45% of a chain)


def walk_rotations(tree: TreeRig, frames: int, seed: int = 23, swing: float = TREE_WALK) -> list[list[Quaternion]]:
    """Per frame, every bone's local rotation in the walk: a swing of ``swing`` radians about a fixed axis (local X
    for planar and hinged bones, which stay bent; the others' axes and phases drawn from ``seed``), smooth and closed
    over ``frames``."""
    rng = np.random.default_rng(seed)
    axes, phases = [], []
    for name, *_ in tree.bones:
        axis = np.array([1.0, 0.0, 0.0]) if name in tree.hinges or name in tree.planar else rng.normal(size=3)
        axes.append(axis / np.linalg.norm(axis))
        phases.append(rng.uniform(0.0, 2.0 * math.pi))
    out = []
    for f in range(frames):
        t = 2.0 * math.pi * f / frames
        row = []
        for (name, *_), axis, phase in zip(tree.bones, axes, phases):
            bend = 0.6 if name in tree.hinges or name in tree.planar else 0.0  # elbows stay bent
            row.append(Quaternion(axis, bend + swing * math.sin(t + phase)))
        out.append(row)
    return out


def tree_targets(tree: TreeRig, frames: int) -> np.ndarray:
    """``(frames, chains, 3)``: where the chains' tips are in the walk (a twin armature, no IK)."""
    twin = armature("Walk", tree.bones)
    out = []
    for row in walk_rotations(tree, frames):
        for (name, *_), q in zip(tree.bones, row):
            twin.pose.bones[name].rotation_quaternion = q
        bpy.context.view_layer.update()
        ev = twin.evaluated_get(bpy.context.evaluated_depsgraph_get())
        out.append([np.array(ev.matrix_world @ ev.pose.bones[tip].tail) for tip, _, _ in tree.chains])
    bpy.data.objects.remove(twin)
    return np.array(out)


def _add_tree_solver(kind: str, ob, tree: TreeRig, targets, poles) -> list:
    for name, (low, high) in tree.hinges.items():
        pb = ob.pose.bones[name]
        if kind == "blender":
            pb.lock_ik_y = pb.lock_ik_z = True
            pb.use_ik_limit_x = True
            pb.ik_min_x, pb.ik_max_x = low, high
        else:
            pb.fabrik_limit.mode = 'HINGE'
            pb.fabrik_limit.hinge_min, pb.fabrik_limit.hinge_max = low, high
    for name, cone in tree.cones.items():
        (set_blender_cone if kind == "blender" else set_fabrik_cone)(ob.pose.bones[name], cone)
    out = []
    for (tip, count, _), target, pole in zip(tree.chains, targets, poles):
        if kind == "blender":  # Blender's tree IK ignores poles
            constraint = ob.pose.bones[tip].constraints.new('IK')
            constraint.target, constraint.chain_count = target, count
            out.append(constraint)
        else:
            chain = ob.fabrik.chains.add()
            chain.name, chain.tip_bone, chain.chain_length = tip, tip, count
            chain.target, chain.pole = target, pole
            out.append(chain)
    return out


def _chain_length(tree: TreeRig, tip: str, count: int) -> float:
    bones = {b[0]: b for b in tree.bones}
    total, name = 0.0, tip
    for _ in range(count):
        total += float(np.linalg.norm(np.subtract(bones[name][2], bones[name][1])))
        name = bones[name][3]
    return total


def plane_degrees(root: np.ndarray, target: np.ndarray, pole: np.ndarray, elbow: np.ndarray) -> float:
    """Angle of ``elbow - root`` out of the plane through root, target and pole."""
    normal = np.cross(target - root, pole - root)
    d = elbow - root
    return math.degrees(math.asin(min(1.0, abs(normal @ d) / (np.linalg.norm(normal) * np.linalg.norm(d)))))


def run_tree(tree: TreeRig, kind: str, frames: int = FRAMES, mode: str = 'QUATERNION',
             base: list | None = None) -> dict:
    """One tree, one solver (default settings), the whole walk: turns, reach, off-hinge, elbow off its
    pole plane, and (FABRIK) the solve's path and passes at the worst frame. ``mode`` and ``base``: every
    bone's rotation mode and pose without IK; the world rotations of every frame come back as "poses"."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    if kind == "fabrik":
        fabrik_addon.register()
    try:
        scene = bpy.context.scene
        points = tree_targets(tree, frames)
        scene.frame_start, scene.frame_end = 1, frames
        ob = armature("Tree", tree.bones)
        names = [b[0] for b in tree.bones]
        for k, name in enumerate(names):
            ob.pose.bones[name].rotation_mode = mode
            if base is not None:
                set_rotation(ob.pose.bones[name], base[k])
        targets = []
        for c, (tip, _, _) in enumerate(tree.chains):
            targets.append(_empty(f"T.{tip}", points[0, c]))
            _key_locations(targets[-1], points[:, c])
        poles = [None if p is None else _empty(f"P.{tip}", p) for tip, _, p in tree.chains]
        solvers = _add_tree_solver(kind, ob, tree, targets, poles)
        length = max(_chain_length(tree, tip, count) for tip, count, _ in tree.chains)
        poses, turns, errors, off_hinge, off_plane, log, previous = [], [], [], 0.0, [], [], None
        for f in range(1, frames + 1):
            scene.frame_set(f)
            ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
            world = np.array(ob.matrix_world)
            matrices = {n: world @ np.array(ev.pose.bones[n].matrix) for n in names}
            rotations = np.array([m[:3, :3] / np.linalg.norm(m[:3, :3], axis=0) for m in matrices.values()])
            poses.append(rotations)
            for c, (tip, _, pole) in enumerate(tree.chains):
                tail = np.array(ev.matrix_world @ ev.pose.bones[tip].tail)
                errors.append(float(np.linalg.norm(tail - points[f - 1, c])))
                if pole is not None:
                    upper = ev.pose.bones[tip].parent
                    off_plane.append(plane_degrees(np.array(ev.matrix_world @ upper.head), points[f - 1, c],
                                                    np.array(pole), np.array(ev.matrix_world @ upper.tail)))
            for name in tree.hinges.keys() | set(tree.planar):
                q = relative_rotations(ob, [ob.pose.bones[name].parent.name, name])[0]
                off_hinge = max(off_hinge, off_x(q))
            if kind == "fabrik":
                log.append(frame_log(solvers[0]))
            if previous is not None:
                turns.append(float(turn_degrees(previous, rotations).max()))
            previous = rotations
        steps = np.linalg.norm(np.diff(points, axis=0), axis=2).max()
        out: dict[str, Any] = {
            "max_turn_deg": max(turns), "frames_over_5": int(sum(t > POP_DEGREES for t in turns)),
            "turn_change": turn_change(turns), "max_error": max(errors),
            "missed": int(sum(e > 1e-3 * length for e in errors)), "tip_frames": len(errors),
            "off_hinge_deg": off_hinge, "off_plane_deg": max(off_plane, default=0.0),
            "off_plane_median": float(np.median(off_plane)) if off_plane else 0.0,
            "step_pct": float(steps / length * 100.0), "poses": poses}
        if log:
            out["worst"] = worst_frame(turns, log)
            out["statuses"] = sorted({entry["status"] for entry in log})
        return out
    finally:
        if kind == "fabrik":
            fabrik_addon.unregister()


TREE_MODES = ('QUATERNION', 'XYZ', 'ZYX', 'AXIS_ANGLE')


def run_tree_modes(tree: TreeRig, kind: str, frames: int = 100) -> dict:
    """The same pose without IK (a small turn on every bone) stored in each of ``TREE_MODES``: the largest
    difference of the solved world rotations from the quaternion one."""
    rng = np.random.default_rng(7)
    base = []
    for _ in tree.bones:
        axis = rng.normal(size=3)
        base.append(Quaternion(axis / np.linalg.norm(axis), rng.uniform(0.05, 0.3)))
    reference = run_tree(tree, kind, frames, 'QUATERNION', base)["poses"]
    worst = 0.0
    for mode in TREE_MODES[1:]:
        poses = run_tree(tree, kind, frames, mode, base)["poses"]
        worst = max(worst, max(float(turn_degrees(a, b).max()) for a, b in zip(reference, poses)))
    return {"max_deg": worst, "frames": frames}


CONE_LEG = (0.5, 0.5, 0.6, 0.4)  # the cone: left, right, up, down (radians)
CONE_NARROW = (0.25, 0.25, 0.3, 0.2)
# Lopsided: wide to one side (right 0.9, down 0.7), narrow to the other (left 0.3, up 0.2), so the free pose's bend
# leaves them far behind and the poses that reach the loop's targets coil sideways.
CONE_LOPSIDED = (0.3, 0.9, 0.2, 0.7)
KNEE = (math.radians(-10.0), math.radians(150.0))
LEG_POLE = (0.0, 2.0, 1.0)
EXCAVATOR = [(0.0, 0.0, 0.0), (0.0, 0.3, 0.0), (0.0, 1.0, 0.7), (0.0, 1.8, 0.3)]
# Limited chains of every size (issue 23), behind ``quality --limited``: the swing fit makes them slow (a
# 4-7 bone coned row takes 1-2 minutes).
LIMITED_RIGS = [
    *(Rig(f"{n}-bone cones{', pole' if pole else ''}", _arc(n, 0.25), pole=LEG_POLE if pole else None,
          cone=CONE_LEG) for n in (2, 3, 6, 8, 10) for pole in (False, True)),
    # 60-degree cones on 3 bones: the loop passes the inner edge of what they let the chain fold to.
    *(Rig(f"3-bone cones 60{', pole' if pole else ''}", _arc(3, 0.25), pole=LEG_POLE if pole else None,
          cone=math.radians(60.0)) for pole in (False, True)),
    # Half the cone: on 8-10 bones the issue's own keeps the free pose on this loop, these bind.
    *(Rig(f"{n}-bone narrow cones{', pole' if pole else ''}", _arc(n, 0.25), pole=LEG_POLE if pole else None,
          cone=CONE_NARROW) for n in (8, 10) for pole in (False, True)),
    *(Rig(f"{n}-bone lopsided cones{', pole' if pole else ''}", _arc(n, 0.25), pole=LEG_POLE if pole else None,
          cone=CONE_LOPSIDED) for n in (4, 6, 8) for pole in (False, True)),
    Rig("4-bone cones, hinged knee", _arc(4, 0.25), cone=CONE_LEG, hinges={2: KNEE}),
    Rig("4-bone cones, hinged knee, pole", _arc(4, 0.25), pole=LEG_POLE, cone=CONE_LEG, hinges={2: KNEE}),
    *(Rig(f"{n}-bone hinges, pole", _arc(n, 0.25), pole=LEG_POLE, hinges={k: KNEE for k in range(1, n)})
      for n in (2, 4, 6)),
    # Hinges that take the fit in hinge coordinates (solver/hinge_fit.py): a hinged knee among cones, a hinged
    # first bone, a free bone below hinges.
    *(Rig(f"{n}-bone cones, hinged knee, pole", _arc(n, 0.25), pole=LEG_POLE, cone=CONE_LEG, hinges={n // 2: KNEE})
      for n in (3, 5, 6, 7, 8, 10)),
    *(Rig(f"{n}-bone cones, hinged knee", _arc(n, 0.25), cone=CONE_LEG, hinges={n // 2: KNEE}) for n in (6, 10)),
    *(Rig(f"{n}-bone hinges, hinged first bone, pole", _arc(n, 0.25), pole=LEG_POLE,
          hinges={0: (-math.pi / 2, math.pi / 2), **{k: KNEE for k in range(1, n)}}) for n in (4, 8)),
    *(Rig(f"{n}-bone hinges, free foot, pole", _arc(n, 0.25), pole=LEG_POLE, hinges={k: KNEE for k in range(1, n - 1)})
      for n in (4, 8)),
    # An excavator: a turret turning about the vertical (rolled so its local X is up), a boom and a stick hinged about
    # one horizontal axis; no bone rolls, so every hinge's plane is fixed by the bones above it.
    *(Rig(f"3-bone excavator, fixed hinges{', pole' if pole else ''}", EXCAVATOR,
          pole=(0.0, 1.0, 3.0) if pole else None, hinges={0: (-2.0, 2.0), 1: (-1.0, 0.8), 2: (-1.5, 1.2)},
          rolls=(math.pi / 2, 0.0, 0.0)) for pole in (False, True)),
    Rig("4-bone cones, target behind", _arc(4, 0.25), cone=CONE_LEG, path='behind'),
    Rig("4-bone cones, pole, target behind", _arc(4, 0.25), pole=LEG_POLE, cone=CONE_LEG, path='behind'),
]


def run_limited(only: str | None = None) -> dict:
    """The LIMITED_RIGS rows (those whose name contains one of ``only``'s comma-separated parts)."""
    paths = []
    for rig in LIMITED_RIGS:
        if only and not any(part in rig.name for part in only.split(",")):
            continue
        row = {"rig": rig.name, "bones": len(rig.joints) - 1}
        for kind in ("blender", "fabrik"):
            row[kind] = run_path(rig, kind)
        paths.append(row)
    return {"machine": f"{platform.machine()}, Blender {bpy.app.version_string}", "frames": FRAMES, "paths": paths}


def print_limited(data: dict) -> None:
    print(f"limited chains against Blender's IK ({data['machine']}; keyed path of {data['frames']} frames; Blender "
          f"with the closest X/Z limits)")
    print_path_rows(data)
    print_paths_log(data)


def run() -> dict:
    paths = []
    for rig in RIGS:
        row = {"rig": rig.name, "bones": len(rig.joints) - 1}
        for kind in ("blender", "fabrik"):
            row[kind] = run_path(rig, kind)
        paths.append(row)
    long_chain = {kind: run_long_chain(kind) for kind in ("blender", "fabrik")}
    influence = {rig.name: {kind: run_influence(kind, rig) for kind in ("blender", "fabrik")}
                 for rig in RIGS if rig.name in INFLUENCE_RIGS}
    modes = []
    for rig in RIGS:
        if rig.cone is None and not rig.hinges and rig.name != "10-bone":
            continue
        modes.append({"rig": rig.name, **{kind: run_rotation_modes(kind, rig) for kind in ("blender", "fabrik")}})
    trees = []
    for tree in TREES:
        row = {"rig": tree.name}
        for kind in ("blender", "fabrik"):
            row[kind] = {k: v for k, v in run_tree(tree, kind).items() if k != "poses"}
        if tree.name.startswith("Y"):
            row["modes"] = {kind: run_tree_modes(tree, kind) for kind in ("blender", "fabrik")}
        trees.append(row)
    return {"machine": f"{platform.machine()}, Blender {bpy.app.version_string}", "frames": FRAMES,
            "paths": paths, "long_chain": long_chain, "influence": influence, "rotation_modes": modes,
            "trees": trees, "edges": run_edges()}


def print_table(data: dict) -> None:
    print(f"pose quality against Blender's IK ({data['machine']}; keyed loop of {data['frames']} frames, "
          f"the same rig and path for both)")
    print_path_rows(data)
    lc = data["long_chain"]
    print(f"50 bones, default settings, {lc['fabrik']['targets']} reachable targets: Blender max distance "
          f"{lc['blender']['max_error']:.3g}; FABRIK {lc['fabrik']['max_error']:.3g}, status "
          f"{', '.join(lc['fabrik']['statuses'])} {'; '.join(lc['fabrik']['messages'])}")
    for name, inf in data["influence"].items():
        print(f"influence 0.5 on '{name}', distance over the no-IK distance ({inf['fabrik']['frames']} targets): "
              f"Blender {inf['blender']['ratio_min']:.2f}-{inf['blender']['ratio_max']:.2f} "
              f"(non-monotone {inf['blender']['nonmonotone_frames']}, bone-frames past influence 1 "
              f"{inf['blender']['bone_frames_past_full']} local / {inf['blender']['bone_frames_past_full_world']} "
              f"world); FABRIK "
              f"{inf['fabrik']['ratio_min']:.2f}-{inf['fabrik']['ratio_max']:.2f} "
              f"(non-monotone {inf['fabrik']['nonmonotone_frames']}, bone-frames past influence 1 "
              f"{inf['fabrik']['bone_frames_past_full']} local / {inf['fabrik']['bone_frames_past_full_world']} "
              f"world)")
    for row in data["rotation_modes"]:
        print(f"rotation modes {', '.join(MODES)} on '{row['rig']}': largest world difference from quaternion: "
              f"Blender {row['blender']['max_deg']:.2g} deg / {row['blender']['max_joint']:.2g}, "
              f"FABRIK {row['fabrik']['max_deg']:.2g} deg / {row['fabrik']['max_joint']:.2g}")
    print_paths_log(data)
    print_trees(data)
    print_edges(data["edges"])


def print_path_rows(data: dict) -> None:
    width = max(26, *(len(row["rig"]) for row in data["paths"]))
    print(f"{'rig':{width}s} {'step %':>6s} | {'Blender max turn':>16s} {'>5 deg':>6s} {'max err':>8s} | "
          f"{'FABRIK max turn':>15s} {'>5 deg':>6s} {'max err':>8s}")
    for row in data["paths"]:
        b, f = row["blender"], row["fabrik"]
        print(f"{row['rig']:{width}s} {f['step_pct']:6.2f} | {b['max_turn_deg']:16.2f} {b['frames_over_5']:6d} "
              f"{b['max_error']:8.1e} | {f['max_turn_deg']:15.2f} {f['frames_over_5']:6d} {f['max_error']:8.1e}")


def print_paths_log(data: dict) -> None:
    """Where each FABRIK path turned most: the solve's path and passes on the frames either side."""
    for row in data["paths"]:
        w = row["fabrik"].get("worst")
        off = row["fabrik"].get("off_hinge_deg", 0.0), row["blender"].get("off_hinge_deg", 0.0)
        if w:
            print(f"  {row['rig']}: largest turn {w['turn_deg']:.2f} deg into frame {w['frame']} "
                  f"({w['before']['path']} {w['before']['iterations']} -> {w['after']['iterations']} passes), "
                  f"turn change {row['fabrik']['turn_change']:.2f} deg/frame^2 (Blender "
                  f"{row['blender']['turn_change']:.2f}), frames not REACHED {w['not_reached']}"
                  + (f", off its hinges {off[0]:.2f} deg (Blender {off[1]:.2f})" if max(off) > 0.0 else ""))


def print_trees(data: dict) -> None:
    print("trees (targets from the rig's own walk; default settings; Blender's tree IK ignores poles)")
    print(f"{'tree':26s} {'step %':>6s} | {'Blender turn':>12s} {'>5':>3s} {'miss':>4s} {'off-X':>6s} | "
          f"{'FABRIK turn':>11s} {'>5':>3s} {'miss':>4s} {'off-X':>6s} {'plane max/med':>13s} worst frame (passes)")
    for row in data["trees"]:
        b, f = row["blender"], row["fabrik"]
        w = f.get("worst", {})
        trace = f"{w['frame']} ({w['before']['iterations']} -> {w['after']['iterations']})" if w else ""
        print(f"{row['rig']:26s} {f['step_pct']:6.2f} | {b['max_turn_deg']:12.2f} {b['frames_over_5']:3d} "
              f"{b['missed']:4d} {b['off_hinge_deg']:6.2f} | {f['max_turn_deg']:11.2f} {f['frames_over_5']:3d} "
              f"{f['missed']:4d} {f['off_hinge_deg']:6.2f} {f['off_plane_deg']:6.2f}/{f['off_plane_median']:<6.2f} "
              f"{trace} of {f['tip_frames']} tip-frames; {', '.join(f.get('statuses', []))}")
        if "modes" in row:
            print(f"  rotation modes {', '.join(TREE_MODES)}: largest world difference from quaternion: Blender "
                  f"{row['modes']['blender']['max_deg']:.2g} deg, FABRIK {row['modes']['fabrik']['max_deg']:.2g} deg")


# --- Edge of reach (issue 23) ------------------------------------------------------------------------
#
# A target keyed on a path that crosses full reach, out and back in, once per speed and angle: the largest
# per-frame bone turn on each crossing for Blender's IK and FABRIK IK on the same rig and path, the tip's
# distance whenever the target is within reach, and frames whose status disagrees with the distance.

EDGE_SPEEDS = (0.002, 0.005, 0.01)  # the target's fastest step, of the chain's length per frame
EDGE_ANGLES = (0.0, 45.0)  # the path's angle to the root-to-tip line where it crosses full reach
EDGE_AMPLITUDE = 0.03  # how far the path goes either side of full reach, of the chain's length
EDGE_GAP = 8  # frames between crossings (well inside reach)
FINGER = ("f_index.03.L", 3)  # the Rigify metarig's index finger (issue 23)


def bent_chain(n: int, degrees: float, length: float = 2.0) -> list[tuple[float, float, float]]:
    """A planar chain up +Z, each joint bent by ``degrees`` toward +Y (a finger curled at rest)."""
    out = [(0.0, 0.0, 0.0)]
    angle = 0.0
    for _ in range(n):
        x, y, z = out[-1]
        out.append((0.0, y + length / n * math.sin(angle), z + length / n * math.cos(angle)))
        angle += math.radians(degrees)
    return out


EDGE_RIGS = [Rig(f"{n} bones, {rest}{', pole' if pole else ''}", bent_chain(n, degrees),
                 pole=(0.0, 2.0, 1.0) if pole else None)
             for n in (2, 3, 4, 6, 10) for rest, degrees in (("straight", 2.0), ("bent", 15.0))
             for pole in (False, True)]


def edge_path(root: np.ndarray, axis: np.ndarray, side: np.ndarray, length: float,
              speeds=EDGE_SPEEDS, angles=EDGE_ANGLES) -> tuple[np.ndarray, list[tuple[str, int, int]]]:
    """Points (one a frame) and crossings ``(label, first, last)`` (0-based, inclusive): for each speed and
    angle, a line through the rest tip's direction at full reach, tilted by the angle toward ``side``,
    travelled from ``EDGE_AMPLITUDE`` inside reach out to as far beyond and back (a cosine in time),
    joined by straight moves well inside reach."""
    points: list[np.ndarray] = []
    crossings = []
    for speed in speeds:
        for angle in angles:
            a = math.radians(angle)
            direction = math.cos(a) * axis + math.sin(a) * side
            period = max(8, round(2.0 * math.pi * EDGE_AMPLITUDE / speed))
            s = -EDGE_AMPLITUDE * length * np.cos(2.0 * math.pi * np.arange(period + 1) / period)
            line = root + length * axis + s[:, None] * direction
            if points:
                start, end = points[-1], line[0]
                points.extend(start + (end - start) * k / EDGE_GAP for k in range(1, EDGE_GAP))
            crossings.append((f"{speed * 100:.1f}%/frame, {angle:.0f} deg", len(points), len(points) + period))
            points.extend(line)
    return np.array(points), crossings


def bone_rotations(ob, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """World rotations ``(n, 3, 3)`` of bones ``names`` and the last one's tail."""
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    world = np.array(ev.matrix_world)
    out = []
    for name in names:
        m = world @ np.array(ev.pose.bones[name].matrix)
        out.append(m[:3, :3] / np.linalg.norm(m[:3, :3], axis=0))
    return np.array(out), np.array(world @ np.array([*ev.pose.bones[names[-1]].tail, 1.0]))[:3]


def run_edge(rig: Rig | None, kind: str, speeds=EDGE_SPEEDS, angles=EDGE_ANGLES) -> dict:
    """One rig (None: the metarig's finger), one solver at its default settings, the edge path: per
    crossing the largest per-frame turn and where; FABRIK: the largest tip distance (of the length) while
    within reach, frames whose status disagrees with the distance, and the solve's log there."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    if kind == "fabrik":
        fabrik_addon.register()
    try:
        from rigkit import realrig

        scene = bpy.context.scene
        if rig is None:
            ob = realrig.metarig("Metarig")
            names = realrig.chain_bone_names(ob, *FINGER)
            bpy.context.view_layer.update()
            root, tip, length = realrig.chain_points(ob, realrig.ChainSpec(*FINGER))
            inner = np.array([np.array(ob.matrix_world @ ob.data.bones[name].head_local) for name in names[1:]])
        else:
            ob = build_armature("Rig", rig)
            names = [f"b{k}" for k in range(len(rig.joints) - 1)]
            joints = np.array(rig.joints)
            root, tip, length, inner = joints[0], joints[-1], rig.length, joints[1:-1]
        axis = (tip - root) / np.linalg.norm(tip - root)
        side = inner.mean(axis=0) - root
        side = side - (side @ axis) * axis
        side /= np.linalg.norm(side)
        path, crossings = edge_path(root, axis, side, length, speeds, angles)
        scene.frame_start, scene.frame_end = 1, len(path)
        target = _empty("Target", path[0])
        _key_locations(target, path)
        pole = None if rig is None or rig.pole is None else _empty("Pole", rig.pole)
        if rig is not None:
            solver = add_solver(kind, ob, rig, target, pole, None, None)
        elif kind == "blender":
            solver = ob.pose.bones[names[-1]].constraints.new('IK')
            solver.target, solver.chain_count = target, len(names)
        else:
            solver = ob.fabrik.chains.add()
            solver.name = solver.tip_bone = names[-1]
            solver.chain_length, solver.target = len(names), target
        turns, errors, log, previous = [0.0], [], [], None
        for f in range(1, len(path) + 1):
            scene.frame_set(f)
            rotations, end = bone_rotations(ob, names)
            errors.append(float(np.linalg.norm(end - path[f - 1])) / length)
            if kind == "fabrik":
                log.append(frame_log(solver))
            if previous is not None:
                turns.append(float(turn_degrees(previous, rotations).max()))
            previous = rotations
        distance = np.linalg.norm(path - root, axis=1) / length
        out: dict[str, Any] = {"crossings": []}
        for label, first, last in crossings:
            k = first + 1 + int(np.argmax(turns[first + 1:last + 1]))  # the turn into frame index k
            row = {"label": label, "turn": turns[k], "frame": k + 1, "distance": float(distance[k])}
            if log:
                row["log"] = (log[k - 1], log[k])
            out["crossings"].append(row)
        if kind == "fabrik":
            tolerance = float(solver.tolerance)
            within = distance < 1.0
            out["reach_error"] = float(max(e for e, w in zip(errors, within) if w))
            out["wrong_status"] = int(sum(
                (d < 1.0 - tolerance and entry["status"] != 'REACHED')
                or (d > 1.0 + tolerance and entry["status"] != 'UNREACHABLE')
                for d, entry in zip(distance, log)))
        return out
    finally:
        if kind == "fabrik":
            fabrik_addon.unregister()


def run_edges() -> list[dict]:
    rows = []
    for rig in [None, *EDGE_RIGS]:
        rows.append({"rig": "metarig finger (3 bones)" if rig is None else rig.name,
                     **{kind: run_edge(rig, kind) for kind in ("blender", "fabrik")}})
    return rows


# The wider sweep (issue 23's neighbours): nearly straight chains at every angle here, with and without a pole.
EDGE_SWEEP_BONES = (3, 4, 5, 6, 8, 10)
EDGE_SWEEP_ANGLES = (0.0, 30.0, 45.0, 60.0)


# ... and wider still (--edges-wide): every size from 3 to 10 bones, bent from nearly straight to curled.
EDGE_WIDE_BONES = (3, 4, 5, 6, 7, 8, 9, 10)
EDGE_WIDE_DEGREES = (1.0, 2.0, 3.0, 5.0, 8.0, 15.0)


def run_edge_sweep(bones=EDGE_SWEEP_BONES, degrees=(2.0,)) -> list[dict]:
    """:func:`run_edge` on chains of ``bones`` bones bent ``degrees`` a joint (2: "straight"), with and without a
    pole, at :data:`EDGE_SPEEDS` and :data:`EDGE_SWEEP_ANGLES`."""
    rows = []
    for n in bones:
        for bend in degrees:
            for pole in (True, False):
                shape = "straight" if bend == 2.0 else f"bent {bend:g} deg"
                rig = Rig(f"{n} bones, {shape}{', pole' if pole else ''}", bent_chain(n, bend),
                          pole=(0.0, 2.0, 1.0) if pole else None)
                rows.append({"rig": rig.name, **{kind: run_edge(rig, kind, EDGE_SPEEDS, EDGE_SWEEP_ANGLES)
                                                 for kind in ("blender", "fabrik")}})
    return rows


def print_edge_sweep_wide(rows: list[dict], worst: int = 8) -> None:
    """The wide sweep's summary: how many crossings turn more than 1.05 and 1.1 times Blender's, and the worst."""
    found = [(cf["turn"] / max(cb["turn"], 1e-9), row["rig"], cb["label"], cb["turn"], cf["turn"]) for row in rows
             for cb, cf in zip(row["blender"]["crossings"], row["fabrik"]["crossings"])]
    ratios = [f[0] for f in found]
    reach = max(row["fabrik"]["reach_error"] for row in rows)
    status = sum(row["fabrik"]["wrong_status"] for row in rows)
    print(f"edge of reach, chains of {EDGE_WIDE_BONES[0]}-{EDGE_WIDE_BONES[-1]} bones bent "
          f"{', '.join(f'{d:g}' for d in EDGE_WIDE_DEGREES)} deg a joint, with and without a pole, at "
          f"{', '.join(f'{a:.0f}' for a in EDGE_SWEEP_ANGLES)} deg: {len(ratios)} crossings, FABRIK / Blender above "
          f"1.05: {sum(r > 1.05 for r in ratios)}, above 1.1: {sum(r > 1.1 for r in ratios)}, largest "
          f"{max(ratios):.3f}; tip within reach {reach:.1e} of the length, status off {status}")
    for ratio, rig, label, blender, fabrik in sorted(found, reverse=True)[:worst]:
        print(f"  {ratio:.3f}  {rig}, {label}: Blender {blender:.2f}, FABRIK {fabrik:.2f} deg")


def print_edge_sweep(rows: list[dict]) -> None:
    ratios = [cf["turn"] / max(cb["turn"], 1e-9) for row in rows
              for cb, cf in zip(row["blender"]["crossings"], row["fabrik"]["crossings"])]
    print(f"edge of reach, nearly straight chains of {', '.join(map(str, EDGE_SWEEP_BONES))} bones at "
          f"{', '.join(f'{a:.0f}' for a in EDGE_SWEEP_ANGLES)} deg: {len(ratios)} crossings, FABRIK / Blender above "
          f"1.05: {sum(r > 1.05 for r in ratios)}, above 1.1: {sum(r > 1.1 for r in ratios)}, largest "
          f"{max(ratios):.3f}")
    print_edges(rows, angles=EDGE_SWEEP_ANGLES)


def print_edges(rows: list[dict], angles=EDGE_ANGLES) -> None:
    print(f"edge of reach: a target crossing full reach out and back ({EDGE_AMPLITUDE:.0%} of the length either "
          f"side; speeds {', '.join(f'{s:.1%}' for s in EDGE_SPEEDS)} of the length a frame, at "
          f"{', '.join(f'{a:.0f}' for a in angles)} deg); largest per-frame bone turn per crossing, Blender / "
          f"FABRIK (deg)")
    worst_ratio, worst = 0.0, ""
    for row in rows:
        b, f = row["blender"], row["fabrik"]
        cells = []
        for cb, cf in zip(b["crossings"], f["crossings"]):
            ratio = cf["turn"] / max(cb["turn"], 1e-9)
            cells.append(f"{cb['turn']:5.2f}/{cf['turn']:5.2f}")
            if ratio > worst_ratio:
                worst_ratio = ratio
                worst = (f"{row['rig']}, {cf['label']}: {cf['turn']:.2f} deg into frame {cf['frame']} at "
                         f"{cf['distance']:.4f} of the length ({cf['log'][0]['status']} {cf['log'][0]['iterations']}"
                         f" -> {cf['log'][1]['status']} {cf['log'][1]['iterations']} passes); Blender "
                         f"{cb['turn']:.2f} into frame {cb['frame']}")
        print(f"  {row['rig']:26s} {' '.join(cells)} | tip within reach {f['reach_error']:.1e} of the length, "
              f"status off {f['wrong_status']}")
    print(f"  crossings: {', '.join(c['label'] for c in rows[0]['fabrik']['crossings'])}")
    print(f"  largest FABRIK / Blender: {worst_ratio:.3f} ({worst})")
