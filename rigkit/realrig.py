"""Real-sized rigs: Blender's Rigify human metarig with limb, spine and finger chains, and a 2-bone arm
on an armature that also holds many other bones (as production rigs do: fingers, face, helpers).

Shared by ``scripts/blender_bench.py`` (the real-rig cases) and the Blender tests. Each rig comes with
its chains as :class:`ChainSpec` records, so the benchmark can give the same chains to Blender's IK
constraint and to FABRIK IK; targets follow keyed paths within reach.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import bpy
import numpy as np
from mathutils import Vector

from .blender import armature, empty, key_path, straightish_bones


@dataclass(frozen=True)
class ChainSpec:
    """One chain on a rig: its tip bone, its length in bones, where its pole sits relative to the
    chain's middle joint at rest (armature axes, None: no pole) and the radius of its target's path,
    as a fraction of the chain's length. ``hangs``: the chain hangs below another chain of the rig, so
    its target's path follows where that chain puts it (:func:`centre_path`)."""

    tip: str
    length: int
    pole: tuple[float, float, float] | None = None
    reach: float = 0.15
    hangs: bool = False


# The Rigify human metarig's chains (its bones face -Y): the spine under the ribcage, two arms hanging
# under it (through the shoulders), two legs and the left index finger hanging under the left arm.
METARIG_CHAINS = (
    ChainSpec("spine.003", 3),
    ChainSpec("forearm.L", 2, (0.0, 0.6, 0.0)),
    ChainSpec("forearm.R", 2, (0.0, 0.6, 0.0)),
    ChainSpec("shin.L", 2, (0.0, -0.6, 0.0)),
    ChainSpec("shin.R", 2, (0.0, -0.6, 0.0)),
    ChainSpec("f_index.03.L", 3, reach=0.1, hangs=True),
)
# The arm of :func:`arm_with_others`.
ARM_CHAINS = (ChainSpec("arm1", 2, (0.0, -1.0, 0.0)),)


def metarig(name: str = "metarig", location=(0.0, 0.0, 0.0)):
    """Rigify's human metarig (from the Rigify add-on shipped with Blender), linked to the scene: its
    bones (names, rest positions, rolls, parents, connections, rotation modes) as Rigify makes them.

    Rigify builds it once per process, in a child Python process (:func:`_rigify_metarig_bones`); the
    bones are then made through ``bpy.data``.
    """
    if not _METARIG:
        _METARIG.extend(_rigify_metarig_bones())
    ob = armature(name, [spec for spec, _ in _METARIG], location)
    for spec, mode in _METARIG:
        ob.pose.bones[spec[0]].rotation_mode = mode
    return ob


_METARIG: list[tuple] = []  # [(BoneSpec, rotation mode), ...] of Rigify's human metarig

# Run by the same Python in a child process: with Rigify enabled, the bpy 4.2 wheel crashes when its
# process exits (exit code 139 after all output), and Rigify's operator cannot run again after a
# factory-settings reload (which unregisters it half-way). The child prints the bones as JSON first.
_RIGIFY_SCRIPT = """
import json, bpy
import addon_utils
addon_utils.enable("rigify", default_set=True)
bpy.ops.object.armature_human_metarig_add()
ob = bpy.context.object
modes = {pb.name: pb.rotation_mode for pb in ob.pose.bones}
bpy.ops.object.mode_set(mode='EDIT')
bones = [[eb.name, list(eb.head), list(eb.tail), eb.parent.name if eb.parent else None, eb.use_connect, eb.roll,
          modes[eb.name]] for eb in ob.data.edit_bones]
print("METARIG" + json.dumps(bones), flush=True)
"""


def _rigify_metarig_bones() -> list[tuple]:
    result = subprocess.run([sys.executable, "-c", _RIGIFY_SCRIPT], capture_output=True, text=True, timeout=600,
                            check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith("METARIG")]
    if not lines:
        raise RuntimeError(f"Rigify's metarig could not be built: {result.stderr[-2000:]}")
    bones = [((name, tuple(head), tuple(tail), parent, connected, roll), mode)
             for name, head, tail, parent, connected, roll, mode in json.loads(lines[0][len("METARIG"):])]
    # Parents before children, as :func:`.blender.armature` links them.
    placed: set[str | None] = {None}
    ordered: list[tuple] = []
    while len(ordered) < len(bones):
        for item in bones:
            if item[0][0] not in placed and item[0][3] in placed:
                ordered.append(item)
                placed.add(item[0][0])
    return ordered


def arm_with_others(name: str, others: int, location=(0.0, 0.0, 0.0)):
    """An armature holding a 2-bone arm (``arm0``, ``arm1``, bent toward -Y) and ``others`` other bones:
    5-bone chains (like fingers and face bones) under one root bone, none of them in the arm."""
    bones = straightish_bones(2, length=0.5, bend=-0.05, prefix="arm")
    if others:
        bones.append(("root", (1.0, 0.0, 0.0), (1.0, 0.0, 0.2), None, False, 0.0))
    for k in range(others - 1 if others else 0):
        row, place = divmod(k, 5)
        x, y = 1.0 + 0.02 * (row % 40), 0.02 * (row // 40)
        parent = "root" if place == 0 else f"o{k - 1}"
        head = (x, y, 0.2 + 0.05 * place)
        bones.append((f"o{k}", head, (x, y, head[2] + 0.05), parent, place > 0, 0.0))
    return armature(name, bones, location)


def arm_among_objects(name: str, objects: int, location=(0.0, 0.0, 0.0)):
    """:func:`arm_with_others` without other bones, in a scene holding ``objects`` empties named before it (a
    lookup by name walks them first: ``bpy.data.objects`` is kept sorted by name)."""
    for k in range(objects):
        bpy.context.scene.collection.objects.link(bpy.data.objects.new(f"A{k:05d}", None))
    return arm_with_others(name, 0, location)


def chain_points(ob, spec: ChainSpec) -> tuple[np.ndarray, np.ndarray, float]:
    """The chain's root head, tip tail (world space, at rest) and length."""
    bones = ob.data.bones
    tip = bones[spec.tip]
    chain = [tip]
    while len(chain) < spec.length:
        chain.append(chain[-1].parent)
    world = ob.matrix_world
    root = np.array(world @ chain[-1].head_local)
    end = np.array(world @ tip.tail_local)
    return root, end, sum(b.length for b in chain)


def add_targets(ob, specs: Sequence[ChainSpec], frames: Sequence[int], tag: str = "",
                centres: dict | None = None) -> list[tuple]:
    """An empty per chain, keyed around a circle about a point a quarter short of its tip at rest, and its
    pole empty: ``[(spec, target, pole or None), ...]``. ``centres``: tip -> a centre per frame (world
    space, relative to the armature at the origin), for chains whose root moves with the chains above
    (:func:`centre_path`)."""
    bpy.context.view_layer.update()
    out = []
    for c, spec in enumerate(specs):
        root, end, length = chain_points(ob, spec)
        if centres and spec.tip in centres:
            path = [np.array(ob.matrix_world @ Vector(point)) for point in centres[spec.tip]]
        else:
            path = [root + 0.75 * (end - root)] * len(frames)
        radius = spec.reach * length
        turns = [2.0 * math.pi * k / len(frames) + c for k in range(len(frames))]
        target = empty(f"{tag}T_{spec.tip}", size=0.05)
        key_path(target, [tuple(centre + radius * np.array([math.cos(t), 0.5 * math.sin(t), math.sin(t)]))
                          for centre, t in zip(path, turns)], frames)
        pole = None
        if spec.pole is not None:
            middle = root + 0.5 * (end - root)
            pole = empty(f"{tag}P_{spec.tip}", tuple(Vector(middle) + ob.matrix_world.to_3x3()
                                                     @ (length * Vector(spec.pole))), size=0.05)
        out.append((spec, target, pole))
    return out


def chain_bone_names(ob, tip: str, length: int) -> list[str]:
    """The names of the ``length`` bones ending at ``tip``, root first."""
    names = [tip]
    bone = ob.data.bones[tip]
    while len(names) < length and bone.parent is not None:
        bone = bone.parent
        names.append(bone.name)
    return names[::-1]


def centre_path(ob, spec: ChainSpec, frames: Sequence[int]) -> list[tuple[float, float, float]]:
    """The point a quarter short of the chain's tip, from its root, at each frame as the scene poses the
    armature now (the chains above it solved, this one not), relative to the armature's object."""
    scene = bpy.context.scene
    names = chain_bone_names(ob, spec.tip, spec.length)
    out = []
    for frame in frames:
        scene.frame_set(frame)
        ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
        root, end = np.array(ev.pose.bones[names[0]].head), np.array(ev.pose.bones[names[-1]].tail)
        out.append(tuple(root + 0.75 * (end - root)))
    return out


def add_fabrik_chains(ob, specs: Sequence[ChainSpec], frames: Sequence[int], tag: str = "") -> dict:
    """FABRIK chains on ``ob`` for ``specs`` with targets from :func:`add_targets`; the targets of chains
    that hang below others follow where those chains, solved first, put them (:func:`centre_path`).
    Returns tip -> ``(chain, target)``. Needs the add-on registered."""
    from .blender import add_chain

    targets = {}

    def add(group, centres=None):
        for spec, target, pole in add_targets(ob, group, frames, tag=tag, centres=centres):
            add_chain(ob, spec.tip, spec.length, target, pole, solver='TWO_BONE' if spec.length == 2 else 'FABRIK')
            targets[spec.tip] = target

    add([spec for spec in specs if not spec.hangs])
    hanging = [spec for spec in specs if spec.hangs]
    if hanging:
        add(hanging, {spec.tip: centre_path(ob, spec, frames) for spec in hanging})
    # Looked up at the end: adding to a collection moves its items, so earlier references go stale.
    return {tip: (ob.fabrik.chains[tip], target) for tip, target in targets.items()}
