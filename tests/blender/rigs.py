"""Rig builders for the Blender tests: the shared ones from ``rigkit.blender``, under their short names."""

from __future__ import annotations

import bpy
import numpy as np
from mathutils import Euler, Quaternion

from rigkit.blender import (  # noqa: F401  (re-exported for the tests)
    ROOT,
    add_chain,
    armature,
    empty,
    forked,
    key_path,
    off_x,
    planar_chain,
    relative_rotations,
    set_rotation,
    straightish_bones,
    straightish_chain,
    torso,
    world_head,
    world_tail,
)

# Every rotation mode a pose bone can store its channels in.
MODES = ('QUATERNION', 'XYZ', 'XZY', 'YXZ', 'YZX', 'ZXY', 'ZYX', 'AXIS_ANGLE')


def keyed_in_every_mode(make, bones: int, frames: int, rng, spread: float, near: float, far: float):
    """Issue 23's ill-conditioned set-up: one rig per rotation mode of :data:`MODES` from ``make(name)`` (its bones
    ``b0..``), each rotated, scaled and parented to an empty keyed to a random place on every frame, the same random
    FK rotations (``spread`` radians) keyed on every bone in that mode, and one target under the empty, keyed near
    the rest tip (``near``) on odd frames and far (``far``) on even ones. Returns ``(rigs, target, carrier)``."""
    carrier = empty("Carrier")
    for frame in range(1, frames + 1):
        carrier.location = tuple(rng.normal(0.0, 0.5, 3))
        carrier.rotation_euler = tuple(rng.normal(0.0, 0.4, 3))
        carrier.keyframe_insert("location", frame=frame)
        carrier.keyframe_insert("rotation_euler", frame=frame)
    keys = [[Quaternion(Euler(tuple(rng.normal(0.0, spread, 3)))) for _ in range(bones)] for _ in range(frames)]
    rigs = []
    for mode in MODES:
        ob = make(f"Rig{mode}")
        ob.parent = carrier
        ob.rotation_euler = (0.4, -0.7, 1.1)
        ob.scale = (1.3, 1.3, 1.3)
        for k in range(bones):
            pb = ob.pose.bones[f"b{k}"]
            pb.rotation_mode = mode
            path = {'QUATERNION': "rotation_quaternion",
                    'AXIS_ANGLE': "rotation_axis_angle"}.get(mode, "rotation_euler")
            for frame in range(1, frames + 1):
                set_rotation(pb, keys[frame - 1][k])
                pb.keyframe_insert(path, frame=frame)
        rigs.append(ob)
    rest_tip = np.array(rigs[0].matrix_basis @ rigs[0].data.bones[f"b{bones - 1}"].tail_local)  # in the carrier
    target = empty("Target")
    points = [tuple(rest_tip + rng.normal(0.0, near, 3)) if frame % 2 else tuple(rest_tip + rng.normal(0.0, far, 3))
              for frame in range(1, frames + 1)]
    key_path(target, points, list(range(1, frames + 1)))
    target.parent = carrier
    return rigs, target, carrier


def same_pose_in_modes(rigs, modes, rng, spread: float = 0.3) -> None:
    """One random turn (about a random axis, up to ``spread`` radians) of every bone, stored in each rig in its
    mode of ``modes``: the same pose without IK in channels that differ only by float32 rounding."""
    for name in [pb.name for pb in rigs[0].pose.bones]:
        axis = rng.normal(size=3)
        q = Quaternion(axis / np.linalg.norm(axis), rng.uniform(0.0, spread))
        for ob, mode in zip(rigs, modes):
            ob.pose.bones[name].rotation_mode = mode
            set_rotation(ob.pose.bones[name], q)


def joint_spread(rigs) -> float:
    """Largest distance of any bone's world tail from the first rig's."""
    joints = [np.array([world_tail(ob, pb.name) for pb in ob.pose.bones]) for ob in rigs]
    return max(float(np.abs(j - joints[0]).max()) for j in joints[1:])


def spread_over_targets(rigs, chains, draw, times: int) -> float:
    """:func:`joint_spread` at its largest over ``times`` target sets: each ``draw()`` gives one point per chain,
    put on those chains' targets in every rig (``chains``: per rig, its chains in the same order), then an update."""
    worst = 0.0
    for _ in range(times):
        points = draw()
        for per_rig in chains:
            for chain, point in zip(per_rig, points):
                chain.target.location = tuple(point)
        bpy.context.view_layer.update()
        worst = max(worst, joint_spread(rigs))
    return worst
