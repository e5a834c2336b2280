"""Bones whose names need escaping in F-curve data paths (a quote, a backslash) are keyed and read right."""

import bpy
import numpy as np
import pytest
from mathutils import Quaternion
from rigs import add_chain, empty, key_path, straightish_chain, world_tail

from fabrik_addon import adapter, compat

NAMES = ['up"per', 'back\\slash', 'both\\"of them']


def odd_rig(name: str):
    """A 4-bone chain whose root bone is called ``name``, its target moving over frames 1-20."""
    ob = straightish_chain("Arm", 4)
    ob.data.bones["b0"].name = name
    target = empty("Target", (1.0, 0.5, 2.5))
    key_path(target, [(1.0, 0.5, 2.5), (-0.5, 1.0, 2.0)], [1, 20])
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, 20
    bpy.context.view_layer.objects.active = ob
    return ob, target


def test_bone_path_escapes_the_name():
    assert adapter.bone_path('up"per', "location") == 'pose.bones["up\\"per"].location'
    assert adapter.bone_path('back\\slash', "scale") == 'pose.bones["back\\\\slash"].scale'


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.usefixtures("solve_path")
def test_keyed_rotation_of_an_oddly_named_bone_is_its_pose_without_ik(name):
    """With influence 0 the chain writes its pose without IK: for a keyed bone, the keys as they play."""
    ob, target = odd_rig(name)
    pb = ob.pose.bones[name]
    keyed = {1: Quaternion((0.9, 0.1, 0.0, 0.0)).normalized(), 20: Quaternion((0.8, 0.0, 0.3, 0.2)).normalized()}
    for frame, q in keyed.items():
        pb.rotation_quaternion = q
        pb.keyframe_insert("rotation_quaternion", frame=frame)
    assert {fc.data_path for fc in compat.animated_fcurves(ob)} == {adapter.bone_path(name, "rotation_quaternion")}
    chain = add_chain(ob, "b3", 4, target, influence=0.0)
    for frame in (1, 20, 1):
        bpy.context.scene.frame_set(frame)
        assert chain.status in {'REACHED', 'UNREACHABLE'}, chain.message
        assert abs(pb.rotation_quaternion.dot(keyed[frame])) > 1.0 - 1e-6, (frame, tuple(pb.rotation_quaternion))


@pytest.mark.parametrize("name", NAMES)
def test_an_oddly_named_bone_is_baked_and_its_keys_play_back(name):
    ob, target = odd_rig(name)
    chain = add_chain(ob, "b3", 4, target)
    live = []
    for frame in range(1, 21):
        bpy.context.scene.frame_set(frame)
        live.append(world_tail(ob, "b3"))
    assert bpy.ops.pose.fabrik_bake(frame_start=1, frame_end=20) == {'FINISHED'}
    assert not chain.enabled
    paths = {fc.data_path for fc in compat.animated_fcurves(ob)}
    assert adapter.bone_path(name, "rotation_quaternion") in paths
    for path in paths:
        ob.path_resolve(path)  # every keyed path names a real property: raises otherwise
    replay = []
    for frame in range(1, 21):
        bpy.context.scene.frame_set(frame)
        replay.append(world_tail(ob, "b3"))
    np.testing.assert_allclose(replay, live, atol=1e-4)
    assert chain.bake_max_error < 1e-4
