"""Bad input: a clear message on the chain, nothing raised, nothing lost, other chains keep working."""

import bpy
import numpy as np
import pytest
from rigs import add_chain, armature, empty, straightish_chain, world_tail


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


def test_deleted_target_is_reported_and_pose_kept():
    ob = straightish_chain("Arm", 3)
    other = straightish_chain("Other", 3, location=(3, 0, 0))
    target = empty("Doomed", (0.5, 0.5, 2.0))
    chain = add_chain(ob, "b2", 3, target)
    good_target = empty("Good", (3.5, 0.5, 2.0))
    good = add_chain(other, "b2", 3, good_target)
    bpy.context.view_layer.update()
    pose = [tuple(pb.rotation_quaternion) for pb in ob.pose.bones]
    bpy.data.objects.remove(target)
    bpy.context.view_layer.update()
    bpy.context.scene.frame_set(3)
    assert chain.status == 'INVALID' and "Pick a target" in chain.message
    assert [tuple(pb.rotation_quaternion) for pb in ob.pose.bones] == pose
    assert_good_chain_works(other, good, good_target)


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
    chain keeps the pose it had, whole (no half-written chain)."""
    from fabrik_addon.rig import batch, small
    from fabrik_addon.solver import ChainResults

    ob, good, good_target = two_chain_rig()
    bpy.context.view_layer.update()
    before = [tuple(pb.rotation_quaternion) for pb in ob.pose.bones]

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
