"""Rig builders for the Blender tests and scripts: armatures, empties and chains through bpy.data."""

from __future__ import annotations

from pathlib import Path

import bpy
import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def armature(name: str, bones: list[tuple], location=(0.0, 0.0, 0.0)):
    """An armature object with ``bones`` = [(name, head, tail, parent or None, connected, roll), ...]."""
    data = bpy.data.armatures.new(name)
    ob = bpy.data.objects.new(name, data)
    ob.location = location
    bpy.context.scene.collection.objects.link(ob)
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode='EDIT')
    for bone_name, head, tail, parent, connected, roll in bones:
        eb = data.edit_bones.new(bone_name)
        eb.head, eb.tail, eb.roll = head, tail, roll
        if parent:
            eb.parent = data.edit_bones[parent]
            eb.use_connect = connected
    bpy.ops.object.mode_set(mode='OBJECT')
    return ob


def straightish_chain(name: str, count: int, length: float = 1.0, bend: float = 0.1, location=(0.0, 0.0, 0.0),
                      prefix: str = "b"):
    """A connected chain up +Z with a slight bend toward +Y, so it has a bend plane."""
    bones = []
    head = (0.0, 0.0, 0.0)
    for i in range(count):
        tail = (0.0, head[1] + (bend if i == count // 2 else 0.0), head[2] + length)
        bones.append((f"{prefix}{i}", head, tail, f"{prefix}{i - 1}" if i else None, i > 0, 0.0))
        head = tail
    return armature(name, bones, location)


def empty(name: str, location=(0.0, 0.0, 0.0)):
    ob = bpy.data.objects.new(name, None)
    ob.location = location
    bpy.context.scene.collection.objects.link(ob)
    return ob


def add_chain(ob, tip: str, length: int, target, pole=None, solver='FABRIK', **settings):
    chain = ob.fabrik.chains.add()
    chain.name = tip
    chain.tip_bone = tip
    chain.chain_length = length
    chain.target = target
    chain.pole = pole
    chain.solver = solver
    chain.tolerance = 1e-4
    chain.iterations = 100
    for key, value in settings.items():
        setattr(chain, key, value)
    return chain


def key_path(ob, points: list[tuple], frames: list[int]):
    """Key ``ob``'s location through ``points`` at ``frames``."""
    for point, frame in zip(points, frames):
        ob.location = point
        ob.keyframe_insert("location", frame=frame)


def world_tail(ob, bone: str) -> np.ndarray:
    """Evaluated world-space tail of ``bone``: what the viewport and renders show now."""
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    return np.array(ev.matrix_world @ ev.pose.bones[bone].tail)


def world_head(ob, bone: str) -> np.ndarray:
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    return np.array(ev.matrix_world @ ev.pose.bones[bone].head)
