"""A renamed bone is followed wherever a chain names it, by every way Blender renames a bone, as
Blender's own IK constraint follows it (its subtarget and pole subtarget are renamed)."""

import bpy
import numpy as np
import pytest
from rigs import add_chain, armature, empty, straightish_bones, straightish_chain, world_tail

WAYS = ("Bone.name", "EditBone.name", "PoseBone.name")
FIELDS = ("tip_bone", "target_bone", "pole_bone")


def rename(ob, old: str, new: str, way: str) -> None:
    """Rename bone ``old`` of armature object ``ob`` the way a rigger or a script would."""
    if way == "Bone.name":
        ob.data.bones[old].name = new
    elif way == "PoseBone.name":
        ob.pose.bones[old].name = new
    else:
        active = bpy.context.view_layer.objects.active
        bpy.context.view_layer.objects.active = ob
        bpy.ops.object.mode_set(mode='EDIT')
        ob.data.edit_bones[old].name = new
        bpy.ops.object.mode_set(mode='OBJECT')
        bpy.context.view_layer.objects.active = active


def scene_with(field: str):
    """A 4-bone chain reaching for a target and bending toward a pole; for ``target_bone`` the target is a
    bone of a second armature, for ``pole_bone`` the pole is one; returns (rig, chain, armature holding the
    bone to rename, its name)."""
    ob = straightish_chain("Arm", 4)
    handles = armature("Handles", [("goal", (1.5, 0.5, 2.0), (1.5, 0.5, 2.3), None, False),
                                   ("knee", (0.0, 3.0, 2.0), (0.0, 3.0, 2.3), None, False)])
    target = empty("Target", (1.5, 0.5, 2.0))
    pole = empty("Pole", (0.0, 3.0, 2.0))
    chain = add_chain(ob, "b3", 4, target, pole)
    if field == "target_bone":
        chain.target, chain.target_bone = handles, "goal"
        return ob, chain, handles, "goal"
    if field == "pole_bone":
        chain.pole, chain.pole_bone = handles, "knee"
        return ob, chain, handles, "knee"
    return ob, chain, ob, "b3"


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("field", FIELDS)
def test_a_renamed_bone_is_followed_and_the_chain_keeps_reaching(field, way, solve_path):
    ob, chain, owner, old = scene_with(field)
    scene = bpy.context.scene
    scene.frame_set(1)
    assert chain.status == 'REACHED', chain.message
    before = world_tail(ob, "b3")
    rename(owner, old, "renamed", way)
    tip = "renamed" if field == "tip_bone" else "b3"
    for frame in (2, 1):
        scene.frame_set(frame)
        assert getattr(chain, field) == "renamed"
        assert chain.status == 'REACHED', chain.message
        np.testing.assert_allclose(world_tail(ob, tip), before, atol=1e-6)


@pytest.mark.parametrize("way", WAYS)
def test_a_renamed_middle_bone_keeps_the_chain_reaching(way, solve_path):
    ob, chain, _, _ = scene_with("tip_bone")
    scene = bpy.context.scene
    scene.frame_set(1)
    before = world_tail(ob, "b3")
    rename(ob, "b1", "middle", way)
    scene.frame_set(2)
    assert chain.status == 'REACHED', chain.message
    np.testing.assert_allclose(world_tail(ob, "b3"), before, atol=1e-6)


@pytest.mark.parametrize("field", FIELDS)
def test_a_chain_from_before_renames_were_followed_follows_once_it_was_solved(field, solve_path):
    """A file saved before: no identity stored on the chain or its bones; the first solve stores it."""
    ob, chain, owner, old = scene_with(field)
    for key in [k for k in chain.keys() if k.endswith("_id")]:
        del chain[key]
    for bone in owner.data.bones:
        bone.pop("fabrik_id", None)
    scene = bpy.context.scene
    scene.frame_set(1)
    before = world_tail(ob, "b3")
    rename(owner, old, "renamed", "Bone.name")
    scene.frame_set(2)
    assert getattr(chain, field) == "renamed"
    assert chain.status == 'REACHED', chain.message
    np.testing.assert_allclose(world_tail(ob, "renamed" if field == "tip_bone" else "b3"), before, atol=1e-6)


def test_names_swapped_in_edit_mode_follow_the_bone_not_the_name(solve_path):
    ob = armature("Arm", [*straightish_bones(3), ("other", (1.0, 0.0, 0.0), (1.0, 0.0, 1.0), None, False)])
    target = empty("Target", (0.8, 0.4, 2.0))
    chain = add_chain(ob, "b2", 3, target)
    bpy.ops.object.mode_set(mode='EDIT')
    bones = ob.data.edit_bones
    bones["b2"].name, bones["other"].name = "tmp", "b2"
    bones["tmp"].name = "other"
    bpy.ops.object.mode_set(mode='OBJECT')
    bpy.context.scene.frame_set(1)
    assert chain.tip_bone == "other"
    assert chain.status == 'REACHED', chain.message
    np.testing.assert_allclose(world_tail(ob, "other"), target.location, atol=1e-3)


def test_picking_another_bone_is_not_undone_by_following(solve_path):
    ob, chain, _, _ = scene_with("tip_bone")
    scene = bpy.context.scene
    scene.frame_set(1)
    chain.tip_bone, chain.chain_length = "b2", 3
    scene.frame_set(2)
    assert chain.tip_bone == "b2"
    assert chain.status == 'REACHED', chain.message
    np.testing.assert_allclose(world_tail(ob, "b2"), bpy.data.objects["Target"].location, atol=1e-3)
    chain.tip_bone = "no such bone"
    scene.frame_set(3)
    assert chain.tip_bone == "no such bone"
    assert chain.status == 'INVALID' and "not found" in chain.message


@pytest.mark.parametrize("field", FIELDS)
def test_a_deleted_bone_is_reported_and_never_solved(field, solve_path):
    ob, chain, owner, old = scene_with(field)
    scene = bpy.context.scene
    scene.frame_set(1)
    bpy.context.view_layer.objects.active = owner
    bpy.ops.object.mode_set(mode='EDIT')
    owner.data.edit_bones.remove(owner.data.edit_bones[old])
    bpy.ops.object.mode_set(mode='OBJECT')
    for frame in (2, 3):
        scene.frame_set(frame)
        assert chain.status == 'INVALID' and old in chain.message and "not found" in chain.message


@pytest.mark.parametrize("way", WAYS)
def test_the_status_never_names_a_bone_that_is_gone(way, solve_path):
    """Renamed on every frame: after each frame change the chain names a bone that exists."""
    ob, chain, _, _ = scene_with("tip_bone")
    scene = bpy.context.scene
    name = "b3"
    for frame in range(1, 6):
        new = f"tip{frame}"
        rename(ob, name, new, way)
        name = new
        scene.frame_set(frame)
        assert chain.tip_bone == name and name in ob.data.bones
        assert chain.status == 'REACHED', chain.message


def test_a_renamed_tip_is_baked_under_its_new_name(solve_path):
    from fabrik_addon import adapter, compat

    ob, chain, _, _ = scene_with("tip_bone")
    target = bpy.data.objects["Target"]
    target.location = (1.5, 0.5, 2.0)
    target.keyframe_insert("location", frame=1)
    target.location = (0.5, 1.0, 2.5)
    target.keyframe_insert("location", frame=10)
    bpy.context.scene.frame_set(1)
    rename(ob, "b3", "hand", "Bone.name")
    bpy.context.view_layer.objects.active = ob
    assert bpy.ops.pose.fabrik_bake(frame_start=1, frame_end=10) == {'FINISHED'}
    paths = {fc.data_path for fc in compat.animated_fcurves(ob)}
    assert adapter.bone_path("hand", "rotation_quaternion") in paths
    assert not any('"b3"' in path for path in paths)
    for frame in (1, 10):
        bpy.context.scene.frame_set(frame)
        np.testing.assert_allclose(world_tail(ob, "hand"), target.matrix_world.translation, atol=1e-3)


@pytest.mark.parametrize("way", WAYS)
def test_a_renamed_bone_keeps_its_joint_limit(way, solve_path):
    """The limit lives on the pose bone: after the rename it still holds the bone inside its hinge."""
    import math

    ob, chain, _, _ = scene_with("tip_bone")
    limit = ob.pose.bones["b2"].fabrik_limit
    limit.mode, limit.hinge_min, limit.hinge_max = 'HINGE', 0.0, math.radians(20.0)
    bpy.data.objects["Target"].location = (0.0, 1.8, 2.2)  # asks b2 to bend further than 20 degrees
    scene = bpy.context.scene
    scene.frame_set(1)
    bent = tuple(ob.pose.bones["b2"].rotation_quaternion)
    rename(ob, "b2", "knee", way)
    bpy.data.objects["Target"].location = (0.0, 1.8, 2.25)
    scene.frame_set(2)
    assert ob.pose.bones["knee"].fabrik_limit.mode == 'HINGE'
    assert chain.status != 'INVALID', chain.message
    q = ob.pose.bones["knee"].rotation_quaternion
    angle = 2.0 * math.atan2(abs(q.x), q.w)
    assert abs(q.y) < 1e-5 and abs(q.z) < 1e-5 and angle <= math.radians(20.0) + 1e-5, (tuple(q), bent)
