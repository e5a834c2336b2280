"""Rigs built through ``bpy.data``: armatures, empties, skins, keyed paths and FABRIK chains.

Used by the Blender tests (through ``tests/blender/rigs.py``), ``scripts/demo.py`` and
``scripts/blender_bench.py``. Needs the FABRIK IK add-on registered for :func:`add_chain`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import bpy
import numpy as np
from mathutils import Quaternion, Vector

ROOT = Path(__file__).resolve().parents[1]

# One bone: (name, head, tail, parent name or None, connected[, roll]), in armature space.
BoneSpec = tuple


def armature(name: str, bones: Iterable[BoneSpec], location=(0.0, 0.0, 0.0)):
    """An armature object linked to the scene, its bones made in one Edit Mode pass."""
    data = bpy.data.armatures.new(name)
    ob = bpy.data.objects.new(name, data)
    ob.location = location
    bpy.context.scene.collection.objects.link(ob)
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode='EDIT')
    for bone_name, head, tail, parent, connected, *roll in bones:
        eb = data.edit_bones.new(bone_name)
        eb.head, eb.tail = head, tail
        eb.roll = roll[0] if roll else 0.0
        if parent:
            eb.parent = data.edit_bones[parent]
            eb.use_connect = connected
    bpy.ops.object.mode_set(mode='OBJECT')
    return ob


def straightish_bones(count: int, length: float = 1.0, bend: float = 0.1, prefix: str = "b",
                      x: float = 0.0) -> list[BoneSpec]:
    """A connected chain up +Z with a slight bend toward +Y at its middle bone, so it has a bend plane."""
    bones = []
    head = (x, 0.0, 0.0)
    for i in range(count):
        tail = (x, head[1] + (bend if i == count // 2 else 0.0), head[2] + length)
        bones.append((f"{prefix}{i}", head, tail, f"{prefix}{i - 1}" if i else None, i > 0, 0.0))
        head = tail
    return bones


def straightish_chain(name: str, count: int, length: float = 1.0, bend: float = 0.1, location=(0.0, 0.0, 0.0),
                      prefix: str = "b"):
    """An armature holding one :func:`straightish_bones` chain."""
    return armature(name, straightish_bones(count, length, bend, prefix), location)


def torso(name: str = "Torso"):
    """A two-bone spine with two two-bone arms hanging from its top (shoulders offset from the spine):
    chains from each forearm down to the spine's root share the spine, a tree."""
    return armature(name, [
        ("spine0", (0, 0, 0.0), (0, 0, 0.6), None, False, 0.0),
        ("spine1", (0, 0, 0.6), (0, 0, 1.2), "spine0", True, 0.0),
        ("upper.L", (0.2, 0, 1.15), (0.7, 0, 1.1), "spine1", False, 0.0),
        ("fore.L", (0.7, 0, 1.1), (1.2, 0, 1.1), "upper.L", True, 0.0),
        ("upper.R", (-0.2, 0, 1.15), (-0.7, 0, 1.1), "spine1", False, 0.0),
        ("fore.R", (-0.7, 0, 1.1), (-1.2, 0, 1.1), "upper.R", True, 0.0),
    ])


def forked(name: str = "Fork", location=(0.0, 0.0, 0.0)):
    """A root bone with two separate slightly bent two-bone arms, 'l0'-'l1' and 'r0'-'r1', from its tail."""
    return armature(name, [
        ("root", (0, 0, 0), (0, 0, 1), None, False, 0.0),
        ("l0", (0, 0, 1), (-0.1, 0.1, 2), "root", True, 0.0),
        ("l1", (-0.1, 0.1, 2), (-0.1, 0, 3), "l0", True, 0.0),
        ("r0", (0, 0, 1), (0.1, 0.1, 2), "root", True, 0.0),
        ("r1", (0.1, 0.1, 2), (0.1, 0, 3), "r0", True, 0.0),
    ], location)


def set_rotation(pose_bone, q) -> None:
    """Set a pose bone's rotation channels, in its own rotation mode, to quaternion ``q``."""
    mode = pose_bone.rotation_mode
    if mode == 'QUATERNION':
        pose_bone.rotation_quaternion = q
    elif mode == 'AXIS_ANGLE':
        axis, angle = q.to_axis_angle()
        pose_bone.rotation_axis_angle = (angle, *axis)
    else:
        pose_bone.rotation_euler = q.to_euler(mode)


def empty(name: str, location=(0.0, 0.0, 0.0), parent=None, shape: str = 'PLAIN_AXES', size: float = 1.0):
    """An empty linked to the scene (Blender's defaults for shape and size unless given)."""
    ob = bpy.data.objects.new(name, None)
    ob.empty_display_type = shape
    ob.empty_display_size = size
    ob.location = location
    ob.parent = parent
    bpy.context.scene.collection.objects.link(ob)
    return ob


def add_chain(ob, tip: str, length: int, target, pole=None, solver='FABRIK', tolerance: float = 1e-4,
              iterations: int = 100, **settings):
    """A FABRIK chain named after its tip bone; any other ``FabrikChain`` setting by keyword."""
    chain = ob.fabrik.chains.add()
    chain.name = tip
    chain.tip_bone = tip
    chain.chain_length = length
    chain.target = target
    chain.pole = pole
    chain.solver = solver
    chain.tolerance = tolerance
    chain.iterations = iterations
    for key, value in settings.items():
        setattr(chain, key, value)
    return chain


def key_path(ob, points: Sequence[tuple], frames: Sequence[int]):
    """Key ``ob``'s location through ``points`` at ``frames``."""
    for point, frame in zip(points, frames):
        ob.location = point
        ob.keyframe_insert("location", frame=frame)


def dark_world_and_sun(scene) -> None:
    """The pictures' lighting: a near-black world and one sun from the front left, above."""
    world = bpy.data.worlds.new("World")
    world.color = (0.05, 0.05, 0.06)
    scene.world = world
    sun = bpy.data.objects.new("Sun", bpy.data.lights.new("Sun", 'SUN'))
    sun.data.energy = 4.0
    sun.rotation_euler = (math.radians(40), math.radians(15), math.radians(30))
    scene.collection.objects.link(sun)


def material(name: str, color: tuple[float, float, float], emission: float = 0.0):
    """A Principled BSDF material of ``color`` (glowing with ``emission`` strength if above 0)."""
    mat = bpy.data.materials.new(name)
    mat.diffuse_color = (*color, 1.0)
    if bpy.app.version < (5, 0, 0):  # node materials are the only kind from 5.0 on
        mat.use_nodes = True
    inputs = mat.node_tree.nodes["Principled BSDF"].inputs
    inputs["Base Color"].default_value = (*color, 1.0)
    if emission > 0.0:
        inputs["Emission Color"].default_value = (*color, 1.0)
        inputs["Emission Strength"].default_value = emission
    return mat


def skin(ob, color, radius: float = 0.08):
    """A box around every bone, weighted fully to it, deformed by an Armature modifier: renders the pose."""
    verts: list[tuple[float, ...]] = []
    faces: list[tuple[int, ...]] = []
    groups: list[tuple[str, range]] = []
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    for bone in ob.data.bones:
        m = bone.matrix_local
        r = radius * min(1.0, bone.length)
        corners = [(x, y, z) for y in (0.0, bone.length) for x in (-r, r) for z in (-r, r)]
        base = len(verts)
        verts += [tuple(m @ Vector(c)) for c in corners]
        faces += [tuple(base + i for i in q) for q in quads]
        groups.append((bone.name, range(base, base + 8)))
    mesh = bpy.data.meshes.new(f"{ob.name}_skin")
    mesh.from_pydata(verts, [], faces)
    body = bpy.data.objects.new(f"{ob.name}_skin", mesh)
    body.parent = ob
    bpy.context.scene.collection.objects.link(body)
    for name, indices in groups:
        body.vertex_groups.new(name=name).add(list(indices), 1.0, 'REPLACE')
    body.modifiers.new("Armature", 'ARMATURE').object = ob
    mesh.materials.append(material(f"{ob.name}_material", color))
    return body


def world_tail(ob, bone: str) -> np.ndarray:
    """Evaluated world-space tail of ``bone``: what the viewport and renders show now."""
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    return np.array(ev.matrix_world @ ev.pose.bones[bone].tail)


def world_head(ob, bone: str) -> np.ndarray:
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    return np.array(ev.matrix_world @ ev.pose.bones[bone].head)


def planar_chain(name: str, count: int):
    """A chain up +Z curving toward +Y in the YZ plane, roll 0: every bone's local X is world X."""
    bones, head = [], (0.0, 0.0, 0.0)
    angles = np.linspace(0.0, 0.5, count)
    for i in range(count):
        step = 2.0 / count
        tail = (0.0, head[1] + step * math.sin(angles[i]), head[2] + step * math.cos(angles[i]))
        bones.append((f"b{i}", head, tail, f"b{i - 1}" if i else None, i > 0, 0.0))
        head = tail
    return armature(name, bones)


def relative_rotations(ob, names: list[str]) -> list:
    """Each child's pose rotation relative to its parent, rest offset removed (what a hinge turns), from
    the evaluated pose."""
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    out = []
    for parent, child in zip(names, names[1:]):
        p, c = ev.pose.bones[parent], ev.pose.bones[child]
        rest = p.bone.matrix_local.inverted() @ c.bone.matrix_local
        out.append(((p.matrix @ rest).inverted() @ c.matrix).to_quaternion())
    return out


def off_x(q) -> float:
    """Degrees between rotation ``q`` and the nearest pure turn about local X."""
    return math.degrees(2.0 * math.asin(min(1.0, math.hypot(q.y, q.z) / max(q.magnitude, 1e-12))))


# --- a procedural walk: FK animation to turn into IK controls --------------------------------------------------

WALK_MODES = ('QUATERNION', 'XYZ', 'AXIS_ANGLE', 'ZXY', 'YZX', 'XZY', 'ZYX', 'YXZ')


def walk_rig(name: str = "Walker", frames: int = 120, location=(0.0, 0.0, 0.0)):
    """A figure walking in place, keyed FK at every frame of ``1..frames``: hips bobbing, legs and arms
    swinging, knees and elbows that go straight (exactly, for a few frames each cycle) and bend again,
    every bone in another rotation mode. Returns the armature (no chains yet)."""
    bones = [
        ("hips", (0, 0, 1.0), (0, 0, 1.2), None, False, 0.0),
        ("chest", (0, 0, 1.2), (0, 0, 1.6), "hips", True, 0.0),
        # Limbs straight at rest: a knee or elbow turned back to 0 is exactly straight.
        ("thigh.L", (0.15, 0, 1.0), (0.15, 0, 0.55), "hips", False, 0.0),
        ("shin.L", (0.15, 0, 0.55), (0.15, 0, 0.1), "thigh.L", True, 0.0),
        ("thigh.R", (-0.15, 0, 1.0), (-0.15, 0, 0.55), "hips", False, 0.0),
        ("shin.R", (-0.15, 0, 0.55), (-0.15, 0, 0.1), "thigh.R", True, 0.0),
        ("foot.R", (-0.15, 0, 0.1), (-0.15, -0.15, 0.05), "shin.R", True, 0.0),
        ("upper_arm.L", (0.25, 0, 1.55), (0.3, 0, 1.25), "chest", False, 0.0),
        ("forearm.L", (0.3, 0, 1.25), (0.35, 0, 0.95), "upper_arm.L", True, 0.0),
        ("upper_arm.R", (-0.25, 0, 1.55), (-0.3, 0, 1.25), "chest", False, 0.0),
        ("forearm.R", (-0.3, 0, 1.25), (-0.32, 0, 1.13), "upper_arm.R", True, 0.0),
        ("hand.R", (-0.32, 0, 1.13), (-0.34, 0, 1.01), "forearm.R", True, 0.0),
    ]
    ob = armature(name, bones, location)
    for k, pb in enumerate(ob.pose.bones):
        pb.rotation_mode = WALK_MODES[k % len(WALK_MODES)]
    period = 40.0
    for frame in range(1, frames + 1):
        phase = 2.0 * math.pi * frame / period
        ob.pose.bones["hips"].location = (0.0, 0.03 * math.sin(2.0 * phase), 0.0)
        ob.pose.bones["hips"].keyframe_insert("location", frame=frame)
        turns = {
            "hips": Quaternion((0, 0, 1), 0.1 * math.sin(phase)),
            "chest": Quaternion((0, 1, 0), 0.08 * math.sin(phase)),
            # Knees and elbows bend about local X, and are straight while their sine is below zero.
            "thigh.L": Quaternion((1, 0, 0), 0.5 * math.sin(phase)),
            "shin.L": Quaternion((1, 0, 0), -1.1 * max(0.0, math.sin(phase + 1.0))),
            "thigh.R": Quaternion((1, 0, 0), -0.5 * math.sin(phase)),
            "shin.R": Quaternion((1, 0, 0), -1.1 * max(0.0, math.sin(phase + 1.0 + math.pi))),
            "foot.R": Quaternion((1, 0, 0), 0.3 * math.sin(phase)),
            "upper_arm.L": Quaternion((1, 0, 0), -0.4 * math.sin(phase)) @ Quaternion((0, 1, 0), 0.2),
            "forearm.L": Quaternion((1, 0, 0), 0.9 * max(0.0, math.sin(phase - 0.5))),
            "upper_arm.R": Quaternion((1, 0, 0), 0.4 * math.sin(phase)),
            "forearm.R": Quaternion((1, 0, 0), 0.8 * max(0.0, math.sin(phase + 2.0))),
            "hand.R": Quaternion((0, 0, 1), 0.3 * math.cos(phase)),
        }
        for bone, q in turns.items():
            pb = ob.pose.bones[bone]
            set_rotation(pb, q)
            pb.keyframe_insert(ROTATION_PATHS[pb.rotation_mode] if pb.rotation_mode in ROTATION_PATHS
                               else "rotation_euler", frame=frame)
    return ob


ROTATION_PATHS = {'QUATERNION': "rotation_quaternion", 'AXIS_ANGLE': "rotation_axis_angle"}
