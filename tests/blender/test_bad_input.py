"""Bad input: a clear message on the chain, nothing raised, nothing lost, other chains keep working."""

import bpy
import numpy as np
import pytest
from mathutils import Quaternion
from rigs import add_chain, armature, empty, key_path, straightish_chain, world_tail


def two_chain_rig():
    ob = straightish_chain("Arm", 3)
    good_target = empty("Good", (0.5, 0.5, 2.0))
    good = add_chain(ob, "b2", 3, good_target)
    return ob, good, good_target


def assert_good_chain_works(ob, good, target):
    target.location = (0.8, -0.4, 1.8)
    bpy.context.view_layer.update()
    assert good.status == 'REACHED'
    assert np.linalg.norm(world_tail(ob, good.tip_bone) - np.array(target.location)) < 1e-3


pytestmark = pytest.mark.usefixtures("solve_path")


def test_missing_tip_bone():
    ob, good, target = two_chain_rig()
    bad = add_chain(ob, "nope", 2, empty("T2"))
    bpy.context.view_layer.update()
    assert bad.status == 'INVALID' and "Tip bone 'nope' not found" in bad.message
    assert_good_chain_works(ob, good, target)


def test_chain_longer_than_the_hierarchy():
    ob, good, target = two_chain_rig()
    bad = add_chain(ob, "b1", 5, empty("T2"))
    bpy.context.view_layer.update()
    assert bad.status == 'INVALID' and "longer than the bone hierarchy" in bad.message
    assert_good_chain_works(ob, good, target)


def test_a_deleted_target_is_reported_and_its_chain_shows_its_pose_without_ik():
    """As under Blender's IK constraint, whose target is deleted: the chain is INVALID and its bones show their
    pose without IK (here an FK bend), not the IK pose of the last solve; the other rig keeps solving."""
    ob = straightish_chain("Arm", 3)
    fk = Quaternion((1.0, 0.0, 0.0), 0.4)
    ob.pose.bones["b1"].rotation_quaternion = fk
    other = straightish_chain("Other", 3, location=(3, 0, 0))
    target = empty("Doomed", (0.5, 0.5, 2.0))
    chain = add_chain(ob, "b2", 3, target)
    good_target = empty("Good", (3.5, 0.5, 2.0))
    good = add_chain(other, "b2", 3, good_target)
    bpy.context.view_layer.update()
    assert chain.status == 'REACHED'
    bpy.data.objects.remove(target)
    bpy.context.view_layer.update()
    bpy.context.scene.frame_set(3)
    assert chain.status == 'INVALID' and "Pick a target" in chain.message
    rotations = [Quaternion(pb.rotation_quaternion) for pb in ob.pose.bones]
    for pb, rotation in zip(ob.pose.bones, rotations):
        expected = fk if pb.name == "b1" else Quaternion()
        assert rotation.rotation_difference(expected).angle < 1e-6, pb.name
    assert_good_chain_works(other, good, good_target)


def test_an_invalid_frame_shows_the_pose_without_ik_whichever_frame_came_before():
    """A target keyed out of bounds (1e30) on frames 5-9: the chain is INVALID there and shows its pose without
    IK, the same after frame 4 and after frame 10 (it showed the IK pose of whichever frame came before:
    0.11 against 0.05 in the root bone's W), and a bake keys that pose there, as its warning says."""
    ob = straightish_chain("Arm", 3)
    fk = Quaternion((0.0, 0.0, 1.0), 0.3)
    ob.pose.bones["b0"].rotation_quaternion = fk
    target = empty("T", (0.5, 0.5, 2.0))
    chain = add_chain(ob, "b2", 3, target)
    far = (1e30, 0.0, 0.0)
    key_path(target, [(0.5, 0.5, 2.0), (0.5, 0.5, 2.0), far, far, (0.2, -0.5, 1.8)], [1, 4, 5, 9, 10])
    scene = bpy.context.scene
    seen = []
    for before in (4, 10, 1, 9):
        scene.frame_set(before)
        assert chain.status == ('INVALID' if 5 <= before <= 9 else 'REACHED')
        scene.frame_set(5)
        assert chain.status == 'INVALID' and "invalid position" in chain.message
        seen.append([tuple(pb.rotation_quaternion) for pb in ob.pose.bones])
    assert all(pose == seen[0] for pose in seen)
    assert Quaternion(seen[0][0]).rotation_difference(fk).angle < 1e-6
    assert all(Quaternion(q).angle < 1e-6 for q in seen[0][1:])
    scene.frame_set(1)
    bpy.context.view_layer.objects.active = ob
    assert bpy.ops.pose.fabrik_bake(frame_start=1, frame_end=10) == {'FINISHED'}
    for frame in (5, 7, 9):
        scene.frame_set(frame)
        keyed = np.array([tuple(pb.rotation_quaternion) for pb in ob.pose.bones])
        assert np.abs(keyed - np.array(seen[0])).max() <= 1e-6, frame


def test_target_that_is_a_bone_of_the_chain():
    ob, good, target = two_chain_rig()
    bad = add_chain(ob, "b1", 2, ob, target_bone="b2")
    bpy.context.view_layer.update()
    assert bad.status == 'INVALID' and "is moved by this chain" in bad.message


def test_zero_length_segment():
    ob = armature("Zero", [
        ("a", (0, 0, 0), (0, 0, 1), None, False, 0.0),
        ("b", (0, 0, 0), (0, 0, 1), "a", False, 0.0),  # head on its parent's head: no segment
    ])
    chain = add_chain(ob, "b", 2, empty("T", (0.5, 0.5, 1.0)))
    bpy.context.view_layer.update()
    assert chain.status == 'INVALID' and "zero length" in chain.message


def test_target_at_infinity_or_nan_never_writes_nan():
    ob = straightish_chain("Arm", 3)
    target = empty("T", (0.5, 0.5, 2.0))
    chain = add_chain(ob, "b2", 3, target)
    bpy.context.view_layer.update()
    for bad in ((float("inf"), 0.0, 0.0), (float("nan"), 0.0, 1.0)):
        target.location = bad
        bpy.context.view_layer.update()
        assert chain.status == 'INVALID'
        for pb in ob.pose.bones:
            assert np.isfinite(pb.rotation_quaternion).all()


def test_a_solver_gone_wrong_never_writes_nan(monkeypatch, solve_path):
    """The last guard: whatever the solver returns, a non-finite rotation is never written and the
    chain shows its pose without IK, whole (no half-written chain)."""
    from fabrik_addon.rig import batch, small
    from fabrik_addon.solver import ChainResults

    ob, good, good_target = two_chain_rig()
    before = [tuple(pb.rotation_quaternion) for pb in ob.pose.bones]  # the pose without IK
    bpy.context.view_layer.update()
    assert good.status == 'REACHED'
    assert [tuple(pb.rotation_quaternion) for pb in ob.pose.bones] != before

    def nan_points(points, *_args, **_kwargs):
        return [(float("nan"),) * 3 for _ in points], 0.0, 1

    def nan_floats(xs, *_args, **_kwargs):
        return [(float("nan"),) * 3 for _ in xs], 0.0, 1

    def nan_chains(joints, targets, **_kwargs):
        joints = np.full(np.shape(joints), np.nan)
        count = len(joints)
        return ChainResults(joints, np.zeros(count), np.ones(count, dtype=int), np.ones(count, dtype=bool))

    monkeypatch.setattr(small, "solve_points", nan_points)
    monkeypatch.setattr(small, "solve_floats", nan_floats)
    monkeypatch.setattr(batch, "solve_chains", nan_chains)
    good_target.location = (0.8, -0.4, 1.8)
    bpy.context.view_layer.update()
    assert good.status == 'INVALID' and "non-finite" in good.message, solve_path
    assert [tuple(pb.rotation_quaternion) for pb in ob.pose.bones] == before


def test_target_at_the_root_gives_a_finite_pose():
    ob = straightish_chain("Arm", 3)
    chain = add_chain(ob, "b2", 3, empty("T", (0.0, 0.0, 0.0)))
    bpy.context.view_layer.update()
    assert chain.status in {'REACHED', 'UNREACHABLE'}
    for pb in ob.pose.bones:
        assert np.isfinite(pb.rotation_quaternion).all()


def test_two_bone_solver_on_a_three_bone_chain():
    ob = straightish_chain("Arm", 3)
    chain = add_chain(ob, "b2", 3, empty("T", (0.5, 0.5, 2.0)), solver='TWO_BONE')
    bpy.context.view_layer.update()
    assert chain.status == 'INVALID' and "exactly 2 bones" in chain.message


def test_two_chains_on_one_tip_bone_are_refused_as_ending_at_the_same_point():
    """Two chains whose tip is the same bone pull one point toward two targets: refused with the reason (they
    were solved as a tree that said "did not converge ... raise Iterations"), with or without Match Target
    Rotation."""
    for match in (False, True):
        bpy.ops.wm.read_factory_settings(use_empty=True)
        ob = straightish_chain("Arm", 3)
        first = add_chain(ob, "b2", 3, empty("T1", (0.5, 0.5, 2.0)))
        second = add_chain(ob, "b2", 2, empty("T2", (-0.5, 0.2, 2.2)))
        first.match_target_rotation = second.match_target_rotation = match
        bpy.context.view_layer.update()
        for chain in (first, second):
            assert chain.status == 'INVALID' and "end at the same point" in chain.message, (match, chain.message)


def test_a_tree_refused_for_one_chain_names_that_chain():
    """Chains sharing bones are solved (and refused) together: the message names the chain that holds them up."""
    ob = straightish_chain("Fork", 2)
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode='EDIT')
    for name, x in (("l", -0.3), ("r", 0.3)):
        bone = ob.data.edit_bones.new(name)
        bone.head, bone.tail = ob.data.edit_bones["b1"].tail, (x, 0.0, 3.0)
        bone.parent, bone.use_connect = ob.data.edit_bones["b1"], True
    bpy.ops.object.mode_set(mode='OBJECT')
    left = add_chain(ob, "l", 2, empty("TL", (-0.5, 0.0, 2.6)))
    right = add_chain(ob, "r", 2, None)
    left.name, right.name = "arm.L", "arm.R"
    bpy.context.view_layer.update()
    for chain in (left, right):
        assert chain.status == 'INVALID' and chain.message == "Chain 'arm.R': Pick a target object", chain.message


def test_a_nan_tolerance_is_refused_with_its_name():
    ob = straightish_chain("Arm", 3)
    chain = add_chain(ob, "b2", 3, empty("T", (0.5, 0.5, 2.0)))
    chain.tolerance = float("nan")
    bpy.context.view_layer.update()
    assert chain.status == 'INVALID' and "tolerance must be a finite number" in chain.message


def test_an_armature_at_a_nan_position_is_refused_as_such():
    ob = straightish_chain("Arm", 3)
    chain = add_chain(ob, "b2", 3, empty("T", (0.5, 0.5, 2.0)))
    bpy.context.view_layer.update()
    ob.location = (float("nan"), 0.0, 0.0)
    bpy.context.view_layer.update()
    assert chain.status == 'INVALID' and "invalid position" in chain.message
    for pb in ob.pose.bones:
        assert np.isfinite(pb.rotation_quaternion).all()


def test_bones_given_back_by_an_invalid_chain_are_the_users_until_it_solves_again():
    """Once an invalid chain has given its bones back, a pose made by hand stays while the chain stays invalid, and
    it is the pose the chain starts from when it solves again."""
    ob = straightish_chain("Arm", 3)
    target = empty("T", (0.5, 0.5, 2.0))
    chain = add_chain(ob, "b2", 3, target)
    bpy.context.view_layer.update()
    assert chain.status == 'REACHED'
    chain.target = None
    bpy.context.scene.frame_set(2)
    assert chain.status == 'INVALID'
    assert all(Quaternion(pb.rotation_quaternion).angle < 1e-6 for pb in ob.pose.bones)  # the pose without IK
    by_hand = Quaternion((0.0, 1.0, 0.0), 0.5)
    ob.pose.bones["b1"].rotation_quaternion = by_hand
    bpy.context.scene.frame_set(3)
    assert chain.status == 'INVALID'
    assert Quaternion(ob.pose.bones["b1"].rotation_quaternion).rotation_difference(by_hand).angle < 1e-6
    chain.target = target
    bpy.context.scene.frame_set(4)
    assert chain.status == 'REACHED'
    chain.enabled = False  # gives back the pose without IK it started from: the one made by hand
    assert Quaternion(ob.pose.bones["b1"].rotation_quaternion).rotation_difference(by_hand).angle < 1e-6
