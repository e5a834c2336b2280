"""Live solving in real Blender: frames, edits, rotation modes, transforms, poles, limits, files."""

import math
import random

import bpy
import numpy as np
import pytest
from mathutils import Quaternion
from rigs import add_chain, armature, empty, key_path, straightish_chain, world_head, world_tail

PATH = [(1.0, 0.5, 2.5), (0.5, -1.0, 2.0), (-1.0, 1.0, 3.0), (0.2, 0.3, 1.0), (1.5, 1.5, 1.5)]
FRAMES = [1, 10, 20, 30, 40]


def animated_rig(mode='QUATERNION', bones=4):
    ob = straightish_chain("Arm", bones)
    for pb in ob.pose.bones:
        pb.rotation_mode = mode
    target = empty("Target", PATH[0])
    key_path(target, PATH, FRAMES)
    chain = add_chain(ob, f"b{bones - 1}", bones, target)
    return ob, target, chain


def target_position(target):
    return np.array(target.evaluated_get(bpy.context.evaluated_depsgraph_get()).matrix_world.translation)


def pose_snapshot(ob):
    return np.array([list(pb.matrix_basis) for pb in ob.pose.bones]).ravel()


@pytest.mark.usefixtures("solve_path")
def test_tip_follows_an_animated_target_in_any_frame_order():
    ob, target, chain = animated_rig()
    frames = list(range(1, 41))
    random.Random(1).shuffle(frames)
    poses = {}
    for frame in frames:
        bpy.context.scene.frame_set(frame)
        assert np.linalg.norm(world_tail(ob, "b3") - target_position(target)) < 1e-3
        assert chain.status == 'REACHED'
        poses[frame] = pose_snapshot(ob)
    for frame in sorted(frames) + sorted(frames, reverse=True):
        bpy.context.scene.frame_set(frame)
        np.testing.assert_allclose(pose_snapshot(ob), poses[frame], atol=1e-6)


def test_moving_the_target_updates_the_pose_without_a_frame_change():
    ob = straightish_chain("Arm", 3)
    target = empty("Target", (0.5, 0.5, 2.0))
    add_chain(ob, "b2", 3, target)
    bpy.context.view_layer.update()
    for k, point in enumerate([(1.0, -0.5, 1.5), (-0.3, 0.8, 2.4), (0.0, 0.0, 0.5), (0.6, 0.2, 1.9)]):
        if k == 3:
            target.name = "Renamed target"  # followed by identity, not by name
            bpy.context.view_layer.update()
        target.location = point
        bpy.context.view_layer.update()
        assert np.linalg.norm(world_tail(ob, "b2") - np.array(point)) < 1e-3


@pytest.mark.usefixtures("solve_path")
def counted_solves(monkeypatch) -> list:
    """A list that grows by one per solve the handlers start (each call of ``solve_armatures``)."""
    from fabrik_addon.rig import solve

    calls: list = []
    real = solve.solve_armatures

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(solve, "solve_armatures", counting)
    return calls


def test_posing_another_armature_solves_no_rig_again(monkeypatch):
    """An animator posing and keying a character FABRIK IK does not drive: no rig is solved again, no cache
    dropped (the other rig's Armature or Action update solved every rig and rebuilt their caches: beside a rigged
    Rigify metarig 15 ms a pose edit, p90 420 ms, 12 ms a key, against 0.23-0.35 ms without FABRIK IK); the rig
    keeps its pose and reach."""
    from fabrik_addon import cache

    ob, target, chain = animated_rig()
    other = straightish_chain("Other", 3)
    other.location = (3.0, 0.0, 0.0)
    for pb in other.pose.bones:  # (a bone's first key adds an F-curve: a relations update, which solves)
        pb.keyframe_insert("rotation_quaternion", frame=1)
    bpy.context.scene.frame_set(10)
    pose = pose_snapshot(ob)
    calls, generation = counted_solves(monkeypatch), cache.generation()
    for k, pb in enumerate(other.pose.bones):
        pb.rotation_quaternion = (0.9, 0.1 * k, 0.3, 0.0)
        bpy.context.view_layer.update()
        pb.keyframe_insert("rotation_quaternion", frame=10)
        bpy.context.view_layer.update()
    assert not calls
    assert cache.generation() == generation
    np.testing.assert_array_equal(pose_snapshot(ob), pose)
    assert chain.status == 'REACHED', chain.message
    target.location = (0.4, 0.6, 2.2)  # its own edits are still followed
    bpy.context.view_layer.update()
    assert calls
    assert np.linalg.norm(world_tail(ob, "b3") - target_position(target)) <= 1e-3 * 4.0


@pytest.mark.parametrize("carried", ["bone parent", "Child Of an empty", "Child Of a bone"])
def test_a_rig_carried_by_something_else_is_solved_again_when_that_moves(carried):
    """The rig hangs on a bone of an armature FABRIK IK does not drive, or follows an empty or such a bone by a
    Child Of constraint: moving that, right after a frame change, moves the rig, whose chain is solved again and
    still reaches its (world-space) target. (The update that moved the rig was taken for the echo of the frame's
    own write: the tip stayed 0.37 off its target, the chain saying 'reached'.)"""
    carrier = armature("Carrier", [("hold", (0.0, 0.0, 0.0), (0.0, 0.0, 0.5), None, False)])
    holder = empty("Holder")
    ob, target, chain = animated_rig()
    if carried == "bone parent":
        ob.parent, ob.parent_type, ob.parent_bone = carrier, 'BONE', "hold"
    else:
        constraint = ob.constraints.new('CHILD_OF')
        constraint.target = holder if carried == "Child Of an empty" else carrier
        constraint.subtarget = "" if carried == "Child Of an empty" else "hold"
    bpy.context.scene.frame_set(10)
    assert chain.status == 'REACHED', chain.message
    for k in range(2):
        if carried == "Child Of an empty":
            holder.location = (0.3, 0.2, 0.1 * k)
        else:
            carrier.pose.bones["hold"].location = (0.3, 0.2, 0.1 * k)
        bpy.context.view_layer.update()
        assert chain.status == 'REACHED', chain.message
        assert np.linalg.norm(world_tail(ob, "b3") - target_position(target)) <= 1e-3 * 4.0, k


def test_a_bone_above_the_chain_that_copies_another_armatures_bone_is_followed_when_that_is_posed():
    """A bone above the chain copies the rotation of a bone of an armature FABRIK IK does not drive: posing that
    bone, right after a frame change, turns the chain's base, and the chain is solved again from there."""

    ob = straightish_chain("Arm", 5)
    target = empty("Target", (1.0, 0.5, 3.5))
    chain = add_chain(ob, "b4", 4, target)
    source = armature("Source", [("drive", (3.0, 0.0, 0.0), (3.0, 0.0, 0.5), None, False)])
    constraint = ob.pose.bones["b0"].constraints.new('COPY_ROTATION')
    constraint.target, constraint.subtarget = source, "drive"
    bpy.context.scene.frame_set(3)
    assert chain.status == 'REACHED', chain.message
    for angle in (0.3, 0.4):
        source.pose.bones["drive"].rotation_quaternion = Quaternion((1.0, 0.0, 0.0), angle)
        bpy.context.view_layer.update()
        assert chain.status == 'REACHED', chain.message
        assert np.linalg.norm(world_tail(ob, "b4") - target_position(target)) <= 1e-3 * 4.0, angle


@pytest.mark.parametrize("field", ["target_bone", "pole_bone"])
def test_posing_the_armature_whose_bone_is_a_target_or_pole_moves_the_chain(field):
    """The bone a chain reaches for (or bends toward) is posed, without a frame change: the chain follows at the
    next update."""
    ob = straightish_chain("Arm", 4)
    handles = armature("Handles", [("goal", (1.0, 0.5, 2.5), (1.0, 0.5, 2.8), None, False),
                                   ("knee", (0.0, 3.0, 2.0), (0.0, 3.0, 2.3), None, False)])
    chain = add_chain(ob, "b3", 4, handles if field == "target_bone" else empty("Target", (1.0, 0.5, 2.5)),
                      handles if field == "pole_bone" else None)
    if field == "target_bone":
        chain.target_bone = "goal"
    else:
        chain.pole_bone = "knee"
    bpy.context.view_layer.update()
    assert chain.status == 'REACHED', chain.message
    before = pose_snapshot(ob)
    bone = handles.pose.bones["goal" if field == "target_bone" else "knee"]
    bone.location = (0.4, 0.0, -0.3) if field == "target_bone" else (2.0, 0.0, 0.0)  # bone axes
    bpy.context.view_layer.update()
    assert chain.status == 'REACHED', chain.message
    assert np.abs(pose_snapshot(ob) - before).max() > 1e-3
    if field == "target_bone":
        goal = np.array(handles.matrix_world @ handles.evaluated_get(
            bpy.context.evaluated_depsgraph_get()).pose.bones["goal"].head)
        assert np.linalg.norm(world_tail(ob, "b3") - goal) <= 1e-3 * 4.0


@pytest.mark.parametrize("mode", ['QUATERNION', 'XYZ', 'XZY', 'YXZ', 'YZX', 'ZXY', 'ZYX', 'AXIS_ANGLE'])
def test_every_rotation_mode_is_written_in_its_own_channels(mode):
    ob, target, chain = animated_rig(mode)
    for frame in (10, 30, 40):
        bpy.context.scene.frame_set(frame)
        assert np.linalg.norm(world_tail(ob, "b3") - target_position(target)) < 1e-3
    for pb in ob.pose.bones:
        assert pb.rotation_mode == mode
        if mode != 'QUATERNION':
            assert tuple(pb.rotation_quaternion) == (1.0, 0.0, 0.0, 0.0)


@pytest.mark.usefixtures("solve_path")
def test_moved_rotated_and_uniformly_scaled_armature():
    ob, target, chain = animated_rig()
    ob.location = (2.0, -1.0, 0.5)
    ob.rotation_euler = (0.3, -0.2, 1.1)
    ob.scale = (1.7, 1.7, 1.7)
    for index, frame in enumerate(FRAMES):
        target.animation_data_clear()
        rel = np.array(PATH[index]) * 1.5
        target.location = np.array(ob.matrix_world @ __import__("mathutils").Vector(rel / 1.7 * 0.9))
        bpy.context.scene.frame_set(frame)
        assert np.linalg.norm(world_tail(ob, "b3") - np.array(target.location)) < 1e-3 * 1.7, chain.message


@pytest.mark.usefixtures("solve_path")
def test_non_uniform_scale_marks_the_chain_invalid_and_shows_the_pose_without_ik():
    """Whatever frame 10's solve wrote: an invalid chain's bones show their pose without IK, as a chain switched
    off does (and as Blender's IK constraint does when it cannot solve)."""
    ob, target, chain = animated_rig()
    for pb, angle in zip(ob.pose.bones, (0.2, -0.3, 0.1, 0.25)):
        pb.rotation_quaternion = Quaternion((1.0, 0.0, 0.0), angle)  # an FK pose: the pose without IK
    without_ik = pose_snapshot(ob)
    bpy.context.scene.frame_set(10)
    assert chain.status == 'REACHED' and np.abs(pose_snapshot(ob) - without_ik).max() > 0.1
    ob.scale = (1.0, 2.0, 1.0)
    bpy.context.scene.frame_set(20)
    assert chain.status == 'INVALID'
    assert "scale" in chain.message
    np.testing.assert_allclose(pose_snapshot(ob), without_ik, atol=1e-6)


@pytest.mark.usefixtures("solve_path")
def test_pole_puts_the_elbow_on_its_side():
    ob = straightish_chain("Arm", 2, bend=0.0)
    target = empty("Target", (0.0, 0.0, 1.2))
    for side in (1.0, -1.0):
        pole = empty(f"Pole{side}", (side * 2.0, 0.0, 0.6))
        ob.fabrik.chains.clear()
        for solver in ('FABRIK', 'TWO_BONE'):
            ob.fabrik.chains.clear()
            add_chain(ob, "b1", 2, target, pole=pole, solver=solver)
            bpy.context.view_layer.update()
            elbow = world_head(ob, "b1")
            assert elbow[0] * side > 0.5, (solver, side, elbow)
            assert abs(elbow[1]) < 1e-4
            assert np.linalg.norm(world_tail(ob, "b1") - np.array(target.location)) < 1e-3


@pytest.mark.usefixtures("solve_path")
def test_cone_limits_hold_in_the_posed_result():
    ob = straightish_chain("Tentacle", 5, length=0.5)
    target = empty("Target", (1.5, 0.0, 0.8))
    for pb in ob.pose.bones[1:]:
        limit = pb.fabrik_limit
        limit.mode = 'CONE'
        limit.cone_left = limit.cone_right = math.radians(30)
        limit.cone_up = limit.cone_down = math.radians(15)
    chain = add_chain(ob, "b4", 5, target)
    bpy.context.view_layer.update()
    assert chain.status in {'REACHED', 'UNREACHABLE'}
    for pb in ob.pose.bones[1:]:
        # Local direction relative to the parent, in the bone's rest frame (rest = straight along parent).
        local = pb.parent.matrix.to_3x3().inverted() @ pb.matrix.to_3x3().col[1]
        rest = pb.parent.bone.matrix_local.to_3x3().inverted() @ pb.bone.matrix_local.to_3x3()
        local = rest.inverted() @ local
        theta = math.atan2(math.hypot(local.x, local.z), local.y)
        if theta > 1e-6:
            u, v = theta * local.x / math.hypot(local.x, local.z), theta * local.z / math.hypot(local.x, local.z)
            assert (u / math.radians(30)) ** 2 + (v / math.radians(15)) ** 2 <= 1 + 1e-4


@pytest.mark.usefixtures("solve_path")
def test_disconnected_bones_keep_their_offsets_and_the_tip_reaches():
    ob = armature("Offset", [
        ("a", (0, 0, 0), (0, 0, 1), None, False, 0.0),
        ("b", (0.2, 0.1, 1.1), (0.2, 0.1, 2.0), "a", False, 0.0),
        ("c", (0.2, 0.3, 2.1), (0.2, 0.3, 3.0), "b", False, 0.0),
    ])
    target = empty("Target", (1.0, 1.0, 1.5))
    add_chain(ob, "c", 3, target)
    bpy.context.view_layer.update()
    assert np.linalg.norm(world_tail(ob, "c") - np.array(target.location)) < 1e-3
    # The gap between a parent's tail and its child's head keeps its length.
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    gap = (ev.pose.bones["b"].head - ev.pose.bones["a"].tail).length
    assert gap == pytest.approx((ob.data.bones["b"].head_local - ob.data.bones["a"].tail_local).length, abs=1e-5)


@pytest.mark.usefixtures("solve_path")
def test_influence_blends_with_the_pose_without_ik():
    ob, target, chain = animated_rig()
    bpy.context.scene.frame_set(20)
    chain.influence = 0.0
    bpy.context.view_layer.update()
    for pb in ob.pose.bones:
        np.testing.assert_allclose(pb.rotation_quaternion, (1, 0, 0, 0), atol=1e-6)
    chain.influence = 0.5
    bpy.context.view_layer.update()
    half = np.linalg.norm(world_tail(ob, "b3") - target_position(target))
    chain.influence = 1.0
    bpy.context.view_layer.update()
    assert np.linalg.norm(world_tail(ob, "b3") - target_position(target)) < 1e-3 < half


@pytest.mark.usefixtures("solve_path")
def test_match_target_rotation_puts_the_tip_head_on_the_target_with_its_orientation():
    ob = straightish_chain("Arm", 3)
    target = empty("Target", (0.8, 0.4, 1.6))
    target.rotation_euler = (0.4, 0.2, -0.7)
    add_chain(ob, "b2", 3, target, match_target_rotation=True)
    bpy.context.view_layer.update()
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    assert np.linalg.norm(world_head(ob, "b2") - np.array(target.location)) < 1e-3
    tip_rotation = (ob.matrix_world @ ev.pose.bones["b2"].matrix).to_quaternion()
    assert tip_rotation.rotation_difference(target.matrix_world.to_quaternion()).angle < 1e-4


@pytest.mark.usefixtures("solve_path")
def test_keyed_bone_animation_is_the_start_pose_and_is_never_changed():
    ob, target, chain = animated_rig()
    pb = ob.pose.bones["b0"]
    pb.rotation_quaternion = (0.9, 0.1, 0.0, 0.0)
    pb.keyframe_insert("rotation_quaternion", frame=1)
    fcurves = ob.animation_data.action
    keys_before = [tuple(kp.co) for fc in _fcurves(ob) for kp in fc.keyframe_points]
    for frame in (5, 25, 5):
        bpy.context.scene.frame_set(frame)
        assert np.linalg.norm(world_tail(ob, "b3") - target_position(target)) < 1e-3
    assert [tuple(kp.co) for fc in _fcurves(ob) for kp in fc.keyframe_points] == keys_before
    assert fcurves is ob.animation_data.action


def _fcurves(ob):
    from fabrik_addon import compat

    return list(compat.animated_fcurves(ob))


def test_save_reload_and_keep_solving(tmp_path):
    ob, target, chain = animated_rig()
    bpy.context.scene.frame_set(10)
    path = str(tmp_path / "rig.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    ob = bpy.data.objects["Arm"]
    target = bpy.data.objects["Target"]
    assert ob.fabrik.chains[0].target == target
    for frame in (30, 20):
        bpy.context.scene.frame_set(frame)
        assert np.linalg.norm(world_tail(ob, "b3") - target_position(target)) < 1e-3


def test_unregister_register_leaves_one_handler_set():
    import fabrik_addon

    fabrik_addon.unregister()
    for event in ("frame_change_post", "depsgraph_update_post", "load_post"):
        assert not [h for h in getattr(bpy.app.handlers, event) if h.__module__.startswith("fabrik_addon")]
    fabrik_addon.register()
    from fabrik_addon import handlers

    handlers.install()  # installing again, as a reload does, must not stack a second copy
    for event in ("frame_change_post", "depsgraph_update_post", "load_post", "undo_post"):
        assert len([h for h in getattr(bpy.app.handlers, event) if h.__module__.startswith("fabrik_addon")]) == 1


def test_foreach_get_matrices_are_column_major():
    """Pins how Blender hands out matrices in bulk: flat 16 floats per bone, column after column."""
    ob = straightish_chain("Arm", 3)
    ob.pose.bones["b1"].rotation_quaternion = (0.9, 0.3, 0.2, 0.1)
    bpy.context.view_layer.update()
    flat = np.empty(16 * len(ob.pose.bones), dtype=np.float32)
    ob.pose.bones.foreach_get("matrix", flat)
    bulk = flat.reshape(-1, 4, 4).transpose(0, 2, 1)
    for k, pb in enumerate(ob.pose.bones):
        np.testing.assert_allclose(bulk[k], np.array(pb.matrix), atol=1e-6)


@pytest.mark.parametrize("influence", [1.0, 0.6])
def test_few_chain_and_batched_paths_write_the_same_rotations(monkeypatch, influence):
    """Few bones go through mathutils and plain floats, many through numpy: the two paths must agree."""
    from fabrik_addon import handlers
    from fabrik_addon.rig import solve

    def solve_with(limit):
        bpy.ops.wm.read_factory_settings(use_empty=True)
        ob = straightish_chain("Arm", 5)
        for pb in ob.pose.bones:
            pb.rotation_mode = 'QUATERNION'
        ob.pose.bones["b1"].rotation_mode = 'XYZ'  # written through its own channels on both paths
        target = empty("Target", (0.8, 0.6, 3.1))
        target.rotation_euler = (0.3, 0.1, -0.4)
        add_chain(ob, "b4", 5, target, influence=influence, match_target_rotation=True)
        other = straightish_chain("Other", 4, location=(3, 0, 0), prefix="c")
        add_chain(other, "c3", 4, empty("T2", (3.7, -0.5, 2.4)), influence=influence)
        legs = straightish_chain("Legs", 2, location=(-3, 0, 0), prefix="l")
        add_chain(legs, "l1", 2, empty("T3", (-2.6, 0.3, 1.2)), influence=influence, solver='TWO_BONE',
                  pole=empty("P3", (-3.0, -2.0, 1.0)))
        monkeypatch.setattr(solve, "SMALL_BONES", limit)
        handlers.request_solve()
        bpy.context.view_layer.update()
        return np.array([list(pb.rotation_quaternion) + list(pb.rotation_euler) for o in (ob, other, legs)
                         for pb in o.pose.bones])

    # mathutils computes in single precision: ~1e-6 apart, about 1e-5 scene units at the tip.
    few, many = solve_with(1000), solve_with(0)
    np.testing.assert_allclose(few, many, atol=1e-5)
    assert np.abs(few - solve_with(1000)).max() == 0.0  # and each path is deterministic
    assert np.abs(few[:, :4] - [1.0, 0.0, 0.0, 0.0]).max() > 0.1  # the chains did move


def test_edit_mode_pauses_solving_and_leaving_it_solves_with_the_edited_bones():
    ob, target, chain = animated_rig()
    bpy.context.scene.frame_set(10)
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode='EDIT')
    ob.data.edit_bones["b3"].tail.z += 0.5  # a longer tip
    before = pose_snapshot(ob)
    bpy.context.scene.frame_set(20)
    np.testing.assert_array_equal(pose_snapshot(ob), before)
    bpy.ops.object.mode_set(mode='OBJECT')
    bpy.context.scene.frame_set(30)
    assert np.linalg.norm(world_tail(ob, "b3") - target_position(target)) < 1e-3
    assert ob.data.bones["b3"].length == pytest.approx(1.5, abs=1e-5)


def test_duplicated_renamed_and_deleted_rigs_are_followed():
    """The list of rigs is cached between solves: a copy linked in later, a rename and a deletion
    must all be noticed."""
    ob = straightish_chain("Arm", 3)
    target = empty("Target", (0.5, 0.5, 2.0))
    add_chain(ob, "b2", 3, target)
    bpy.context.view_layer.update()
    copy = ob.copy()  # a linked duplicate: shares the armature data, so no new Armature is added
    copy.location = (0.3, 0.0, 0.0)
    bpy.context.scene.collection.objects.link(copy)
    bpy.context.view_layer.update()
    bpy.context.scene.frame_set(2)
    for rig in (ob, copy):
        assert np.linalg.norm(world_tail(rig, "b2") - target_position(target)) < 1e-3
    ob.name = "Renamed arm"
    target.location = (-0.4, 0.6, 1.9)
    bpy.context.scene.frame_set(3)
    for rig in (ob, copy):
        assert np.linalg.norm(world_tail(rig, "b2") - target_position(target)) < 1e-3
    other = ob.copy()
    bpy.context.scene.collection.objects.link(other)
    bpy.context.view_layer.update()
    bpy.context.scene.collection.objects.unlink(other)  # out of the scene: no longer solved
    bpy.data.objects.remove(copy)
    kept = [tuple(pb.rotation_quaternion) for pb in other.pose.bones]
    target.location = (0.2, -0.7, 2.1)
    bpy.context.scene.frame_set(4)
    assert np.linalg.norm(world_tail(ob, "b2") - target_position(target)) < 1e-3
    assert [tuple(pb.rotation_quaternion) for pb in other.pose.bones] == kept


def test_a_rig_removed_and_made_again_under_its_name_is_solved():
    """The handler keeps the rigs' objects between frames: one freed by a script (no update in between) and
    replaced by another of the same name, or taken away by undo and brought back by redo, is looked up again,
    never read through the freed object."""
    first = straightish_chain("Arm", 3)
    target = empty("Target", (0.5, 0.5, 2.0))
    add_chain(first, "b2", 3, target)
    bpy.context.scene.frame_set(2)
    assert np.linalg.norm(world_tail(first, "b2") - target_position(target)) < 1e-3
    bpy.data.objects.remove(first)
    second = straightish_chain("Arm", 4, length=0.6)
    chain = add_chain(second, "b3", 4, target)
    target.location = (-0.4, 0.6, 1.9)
    bpy.context.scene.frame_set(3)
    assert chain.status == 'REACHED', (chain.status, chain.message)
    assert np.linalg.norm(world_tail(second, "b3") - target_position(target)) < 1e-3

    bpy.ops.ed.undo_push(message="rig made again")
    bpy.data.objects.remove(second)
    bpy.context.scene.frame_set(4)  # nothing to solve, nothing raised
    bpy.ops.ed.undo_push(message="rig removed")
    assert bpy.ops.ed.undo() == {'FINISHED'}
    again, target = bpy.data.objects["Arm"], bpy.data.objects["Target"]
    target.location = (0.3, -0.6, 2.0)
    bpy.context.scene.frame_set(5)
    assert again.fabrik.chains[0].status == 'REACHED'
    assert np.linalg.norm(world_tail(again, "b3") - target_position(target)) < 1e-3


def test_a_rig_freed_outside_the_scene_does_not_stop_the_others(capsys):
    """A rig unlinked from the scene stays on the handler's list (relinking it sends no update); freed then
    (no collection holds it, so no update either), the kept object is invalid: the other rigs solve on."""
    gone, live = straightish_chain("Gone", 3), straightish_chain("Live", 3, location=(2.0, 0.0, 0.0))
    target_gone, target = empty("TG", (0.5, 0.5, 2.0)), empty("T", (2.5, 0.5, 2.0))
    add_chain(gone, "b2", 3, target_gone)
    add_chain(live, "b2", 3, target)
    bpy.context.scene.frame_set(2)
    bpy.context.scene.collection.objects.unlink(gone)
    bpy.context.scene.frame_set(3)
    bpy.data.objects.remove(gone)
    for frame, point in enumerate(((1.6, -0.5, 1.9), (2.4, 0.6, 2.1)), 4):
        target.location = point
        bpy.context.scene.frame_set(frame)
        assert np.linalg.norm(world_tail(live, "b2") - target_position(target)) < 1e-3
    assert "Traceback" not in capsys.readouterr().err


def test_chains_reordered_by_a_script_keep_their_own_bones():
    """``chains.move`` changes no setting (no update callback runs): the cached layout must notice."""
    ob = armature("Two", [
        ("a0", (0, 0, 0), (0, 0, 1), None, False, 0.0),
        ("a1", (0, 0, 1), (0, 0.1, 2), "a0", True, 0.0),
        ("c0", (2, 0, 0), (2, 0, 1), None, False, 0.0),
        ("c1", (2, 0, 1), (2, 0.1, 2), "c0", True, 0.0),
    ])
    left, right = empty("Left", (0.6, 0.4, 1.5)), empty("Right", (2.5, -0.4, 1.6))
    add_chain(ob, "a1", 2, left)
    add_chain(ob, "c1", 2, right)
    bpy.context.view_layer.update()
    ob.fabrik.chains.move(0, 1)
    left.location, right.location = (-0.5, 0.5, 1.4), (1.4, 0.6, 1.5)
    bpy.context.scene.frame_set(3)
    assert np.linalg.norm(world_tail(ob, "a1") - np.array(left.location)) < 1e-3
    assert np.linalg.norm(world_tail(ob, "c1") - np.array(right.location)) < 1e-3


def _joints(ob) -> np.ndarray:
    return np.array([world_head(ob, pb.name) for pb in ob.pose.bones] + [world_tail(ob, ob.pose.bones[-1].name)])


@pytest.mark.usefixtures("solve_path")
@pytest.mark.parametrize("then", ["update", "frame_set"])
def test_a_scripts_edit_of_location_or_scale_starts_the_next_solve(then):
    """Location and scale that no key or driver animates are not read while the start pose is kept: a script's
    edit of them, followed by an update or a frame change, starts the next solve from the edited pose, as the
    same rig solved afresh does (every cache dropped), to 1e-6; the edits move the pose, except a connected
    bone's location, which Blender never composes (the chain stays as Blender draws it: reached)."""
    from fabrik_addon import handlers

    ob, target, chain = animated_rig()
    scene = bpy.context.scene
    for frame in (1, 10, 11, 12):  # the start pose kept over a few frames
        scene.frame_set(frame)
    edits = [("b0", "location", (0.2, -0.1, 0.15)), ("b1", "scale", (1.2, 1.2, 1.2)),
             ("b2", "location", (0.0, 0.05, 0.0)), ("b0", "location", (0.0, 0.0, 0.0))]
    frame = 12
    for name, prop, value in edits:
        before = _joints(ob)
        setattr(ob.pose.bones[name], prop, value)
        if then == "update":
            bpy.context.view_layer.update()
        else:
            frame += 1
            scene.frame_set(frame)
        solved = _joints(ob)
        assert chain.status == 'REACHED', chain.message
        handlers.request_solve()  # every cache and kept pose dropped: solved afresh at the same frame
        scene.frame_set(frame)
        assert np.abs(_joints(ob) - solved).max() <= 1e-6, (name, prop)
        if ob.data.bones[name].use_connect and prop == "location":
            if then == "update":  # the same frame, the same targets: nothing moves
                assert np.abs(solved - before).max() <= 1e-6, (name, prop)
        else:
            assert np.abs(solved - before).max() > 1e-3, (name, prop)
