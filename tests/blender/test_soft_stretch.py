"""Soft IK and stretch on live chains in real Blender: the soft curve, bone scale, restore, files."""

import bpy
import numpy as np
import pytest
from rigs import add_chain, empty, key_path, straightish_chain, world_head, world_tail

from fabrik_addon.solver.soft import eased_distance

UP = np.array([0.3, 0.4, 1.0]) / np.linalg.norm([0.3, 0.4, 1.0])


def rig(bones=3, solver='FABRIK', distance=1.3, mode='QUATERNION', **settings):
    """A chain of ``bones`` bones up +Z and a target ``distance`` times its reach away along UP."""
    ob = straightish_chain("Arm", bones)
    for pb in ob.pose.bones:
        pb.rotation_mode = mode
    target = empty("Target", tuple(UP * distance * sum(b.length for b in ob.data.bones)))
    chain = add_chain(ob, f"b{bones - 1}", bones, target, solver=solver, **settings)
    bpy.context.view_layer.update()
    return ob, target, chain


def lengths(ob, bones):
    """Each chain bone's evaluated length (armature space): what stretch changes."""
    return np.array([np.linalg.norm(world_tail(ob, f"b{i}") - world_head(ob, f"b{i}")) for i in range(bones)])


def scales(ob):
    return np.array([list(pb.scale) for pb in ob.pose.bones])


@pytest.mark.usefixtures("solve_path")
@pytest.mark.parametrize(("bones", "solver"), [(2, 'TWO_BONE'), (2, 'FABRIK'), (4, 'FABRIK')])
def test_soft_chain_tip_follows_the_soft_curve(bones, solver):
    ob, target, chain = rig(bones, solver, softness=0.1)
    reach = sum(b.length for b in ob.data.bones)
    for distance in (0.5, 0.93, 1.0, 1.1, 1.6):
        target.location = tuple(UP * distance * reach)
        bpy.context.view_layer.update()
        tip = world_tail(ob, f"b{bones - 1}")
        assert abs(np.linalg.norm(tip) - eased_distance(distance * reach, reach, 0.1)) <= 1e-4 * reach
        assert np.linalg.norm(np.cross(tip, UP)) <= 1e-4  # on the target line (FABRIK: within tolerance)
        np.testing.assert_allclose(scales(ob), 1.0)  # softness alone never scales


@pytest.mark.usefixtures("solve_path")
@pytest.mark.parametrize("mode", ['QUATERNION', 'XYZ', 'ZXY', 'AXIS_ANGLE'])
@pytest.mark.parametrize(("bones", "solver"), [(2, 'TWO_BONE'), (3, 'FABRIK')])
def test_stretch_reaches_beyond_full_extension_and_caps(mode, bones, solver):
    """Goal: at 1.3x reach every bone is 1.3x as long (+-1e-4) and the tip on the target; at 2x with
    max_stretch 1.5 exactly 1.5, pointing at the target."""
    ob, target, chain = rig(bones, solver, mode=mode, use_stretch=True, max_stretch=1.5)
    rest = np.array([b.length for b in ob.data.bones])
    np.testing.assert_allclose(lengths(ob, bones) / rest, 1.3, atol=1e-4)
    assert np.linalg.norm(world_tail(ob, f"b{bones - 1}") - np.array(target.location)) <= 1e-4
    assert chain.status == 'REACHED'
    assert ob.pose.bones["b0"].scale[1] == pytest.approx(1.3, abs=1e-4)
    np.testing.assert_allclose(scales(ob)[:, [0, 2]], 1.0)  # Y only
    target.location = tuple(UP * 2.0 * bones)
    bpy.context.view_layer.update()
    np.testing.assert_allclose(lengths(ob, bones) / rest, 1.5, atol=1e-5)
    tip = world_tail(ob, f"b{bones - 1}")
    assert np.linalg.norm(tip - UP * 1.5 * rest.sum()) <= 1e-4
    assert chain.status == 'UNREACHABLE'


@pytest.mark.usefixtures("solve_path")
def test_soft_stretch_sweep_has_no_pop_and_no_scale_jump():
    ob, target, chain = rig(2, 'TWO_BONE', softness=0.1, use_stretch=True, max_stretch=2.0)
    previous = None
    worst_turn = worst_scale = 0.0
    for distance in np.arange(850, 1300, 5) * 1e-3 * 2.0:
        target.location = tuple(UP * distance)
        bpy.context.view_layer.update()
        elbow = world_tail(ob, "b0") - world_head(ob, "b0")
        tip = world_tail(ob, "b1") - world_tail(ob, "b0")
        bend = np.degrees(np.arccos(np.clip(elbow @ tip / np.linalg.norm(elbow) / np.linalg.norm(tip), -1, 1)))
        scale = lengths(ob, 2)[0]
        if previous is not None:
            worst_turn = max(worst_turn, abs(bend - previous[0]))
            worst_scale = max(worst_scale, abs(scale - previous[1]))
        previous = bend, scale
        assert np.linalg.norm(world_tail(ob, "b1") - np.array(target.location)) <= 1e-4  # stretch reaches
    assert worst_turn <= 5 * 0.3  # five 0.1% steps per sample, 0.26 degrees per 0.1% at most
    assert worst_scale <= 5 * 1e-3 / 1.0 + 1e-6


@pytest.mark.usefixtures("solve_path")
def test_stretch_sits_on_top_of_the_scale_without_ik_and_influence_blends_it():
    ob = straightish_chain("Arm", 3)
    ob.pose.bones["b1"].scale = (1.1, 1.2, 0.9)  # the pose without IK has its own scale
    bpy.context.view_layer.update()
    rest = lengths(ob, 3)
    target = empty("Target", tuple(UP * 1.3 * rest.sum()))
    chain = add_chain(ob, "b2", 3, target, use_stretch=True)
    bpy.context.view_layer.update()
    np.testing.assert_allclose(lengths(ob, 3) / rest, 1.3, atol=1e-4)
    assert tuple(ob.pose.bones["b1"].scale)[0::2] == pytest.approx((1.1, 0.9))
    chain.influence = 0.0
    bpy.context.view_layer.update()
    np.testing.assert_allclose(scales(ob), [[1, 1, 1], [1.1, 1.2, 0.9], [1, 1, 1]], atol=1e-6)
    tip_without_ik = world_tail(ob, "b2")
    chain.influence = 0.5
    bpy.context.view_layer.update()
    # Influence blends the rotations and the stretch by the one fraction that puts the tip half as far
    # from the target as without IK (.rig.influence).
    goal = np.array(target.location)
    half = np.linalg.norm(world_tail(ob, "b2") - goal) / np.linalg.norm(tip_without_ik - goal)
    assert half == pytest.approx(0.5, abs=1e-3)
    assert 1.0 < ob.pose.bones["b0"].scale[1] < 1.3


@pytest.mark.usefixtures("solve_path")
@pytest.mark.parametrize("how", ["disable", "stretch off", "remove", "rig off"])
def test_switching_off_restores_the_scale_exactly(how):
    ob, target, chain = rig(3, use_stretch=True)
    ob.pose.bones["b2"].scale = (1.0, 1.0, 1.0)
    before = scales(ob).copy()
    assert not np.allclose(before, 1.0)
    if how == "disable":
        chain.enabled = False
    elif how == "stretch off":
        chain.use_stretch = False
    elif how == "remove":
        bpy.context.view_layer.objects.active = ob
        bpy.ops.object.mode_set(mode='POSE')
        ob.fabrik.active_chain_index = 0
        bpy.ops.pose.fabrik_chain_remove()
        bpy.ops.object.mode_set(mode='OBJECT')
    else:
        ob.fabrik.enabled = False
    bpy.context.view_layer.update()
    np.testing.assert_array_equal(scales(ob), 1.0)


@pytest.mark.usefixtures("solve_path")
def test_keyed_stretch_switch_restores_the_scale_when_keyed_off():
    ob, target, chain = rig(3, use_stretch=True)
    ob.keyframe_insert('fabrik.chains[0].use_stretch', frame=1)
    chain.use_stretch = False
    ob.keyframe_insert('fabrik.chains[0].use_stretch', frame=5)
    bpy.context.scene.frame_set(1)
    assert ob.pose.bones["b0"].scale[1] == pytest.approx(1.3, abs=1e-4)
    bpy.context.scene.frame_set(5)
    np.testing.assert_array_equal(scales(ob), 1.0)
    np.testing.assert_allclose(lengths(ob, 3), [b.length for b in ob.data.bones], atol=1e-6)


@pytest.mark.usefixtures("solve_path")
def test_stretched_pose_depends_only_on_the_frame():
    ob, target, chain = rig(3, use_stretch=True, softness=0.2, max_stretch=1.4)
    key_path(target, [tuple(UP * d) for d in (1.0, 3.5, 4.5, 2.0)], [1, 10, 20, 30])
    poses = {}
    for frame in list(range(1, 31)) + list(range(30, 0, -3)):
        bpy.context.scene.frame_set(frame)
        pose = np.concatenate([scales(ob).ravel(), [c for pb in ob.pose.bones for c in pb.rotation_quaternion]])
        if frame in poses:
            np.testing.assert_allclose(pose, poses[frame], atol=1e-6)
        poses[frame] = pose


def test_settings_survive_save_and_reopen(tmp_path):
    ob, target, chain = rig(3, softness=0.25, use_stretch=True, max_stretch=1.2)
    expected = lengths(ob, 3)
    path = str(tmp_path / "stretch.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    ob = bpy.data.objects["Arm"]
    chain = ob.fabrik.chains[0]
    assert (chain.softness, chain.use_stretch, chain.max_stretch) == pytest.approx((0.25, True, 1.2))
    bpy.context.scene.frame_set(2)
    bpy.context.scene.frame_set(1)
    np.testing.assert_allclose(lengths(ob, 3), expected, atol=1e-6)
    np.testing.assert_allclose(lengths(ob, 3) / [b.length for b in ob.data.bones], 1.2, atol=1e-5)


def test_properties_are_overridable_animatable_and_documented():
    ob, target, chain = rig(2, softness=0.1)
    for name in ("softness", "use_stretch", "max_stretch"):
        prop = chain.bl_rna.properties[name]
        assert prop.is_overridable and prop.is_animatable
        assert prop.name and prop.description
    assert ob.keyframe_insert('fabrik.chains[0].softness', frame=1)
    assert ob.keyframe_insert('fabrik.chains[0].max_stretch', frame=1)


def test_tree_stretches_each_arm_not_the_shared_spine():
    from test_tree_rig import torso

    ob = torso()
    rest = {b.name: b.length for b in ob.data.bones}
    left = add_chain(ob, "fore.L", 4, empty("L", (1.6, 0.0, 1.1)), use_stretch=True, max_stretch=2.0)
    right = add_chain(ob, "fore.R", 4, empty("R", (-1.5, 0.3, 1.2)), use_stretch=True, max_stretch=2.0)
    bpy.context.view_layer.update()
    assert left.group == "fore.R"
    for chain, side, target in ((left, "L", (1.6, 0.0, 1.1)), (right, "R", (-1.5, 0.3, 1.2))):
        assert chain.status == 'REACHED'
        assert np.linalg.norm(world_tail(ob, f"fore.{side}") - np.array(target)) <= 1e-3
        grown = [np.linalg.norm(world_tail(ob, n) - world_head(ob, n)) / rest[n] for n in (f"upper.{side}",
                                                                                           f"fore.{side}")]
        assert grown[0] > 1.1 and grown[0] == pytest.approx(grown[1], abs=1e-4)
    for name in ("spine0", "spine1"):
        assert np.linalg.norm(world_tail(ob, name) - world_head(ob, name)) == pytest.approx(rest[name], abs=1e-5)
        assert tuple(ob.pose.bones[name].scale) == pytest.approx((1.0, 1.0, 1.0))
    left.use_stretch = right.use_stretch = False
    bpy.context.view_layer.update()
    np.testing.assert_array_equal(scales(ob), 1.0)


def stretch_bake_rig():
    """Chain b1-b3 of a 4-bone rig (b0 outside it) whose target leaves its reach mid-shot and comes back."""
    ob = straightish_chain("Arm", 4)
    reach = sum(ob.data.bones[f"b{i}"].length for i in (1, 2, 3))
    root = np.array([0.0, 0.0, 1.0])
    target = empty("Target", tuple(root + UP * 0.6 * reach))
    key_path(target, [tuple(root + UP * f * reach) for f in (0.6, 1.4, 1.2, 0.7)], [1, 15, 30, 40])
    chain = add_chain(ob, "b3", 3, target, use_stretch=True, max_stretch=1.3, softness=0.1)
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, 40
    bpy.context.view_layer.objects.active = ob
    return ob, target, chain


def bone_frames(ob, frames):
    out = []
    for frame in frames:
        bpy.context.scene.frame_set(frame)
        out.append([world_tail(ob, f"b{i}") for i in range(4)] + [world_head(ob, f"b{i}") for i in range(4)])
    return np.array(out)


@pytest.mark.parametrize("reduce", [0.0, 1e-3])
def test_bake_keys_scale_y_of_stretched_bones_only_within_the_range(reduce):
    ob, target, chain = stretch_bake_rig()
    ob.pose.bones["b2"].scale = (1.0, 1.0, 1.0)
    ob.keyframe_insert('pose.bones["b2"].scale', index=1, frame=60)  # outside the range: kept
    live = bone_frames(ob, range(1, 41))
    assert bpy.ops.pose.fabrik_bake(frame_start=1, frame_end=40, reduce_tolerance=reduce) == {'FINISHED'}
    from fabrik_addon import compat

    keyed = {(fc.data_path, fc.array_index): fc for fc in compat.animated_fcurves(ob)}
    scale_curves = {key for key in keyed if key[0].endswith(".scale")}
    assert scale_curves == {(f'pose.bones["b{i}"].scale', 1) for i in (1, 2, 3)}
    frames = [kp.co.x for kp in keyed[('pose.bones["b1"].scale', 1)].keyframe_points]
    assert min(frames) >= 1 and max(frames) <= 40
    assert 60.0 in [kp.co.x for kp in keyed[('pose.bones["b2"].scale', 1)].keyframe_points]
    if reduce == 0.0:
        assert len(frames) == 40
    else:
        assert len(frames) < 40
    # The keys play the live IK back, stretch included, and the reported fidelity is what they play.
    # (With reduction the drift can exceed the tolerance on this fast path, without stretch too:
    # 1.3e-3 for 1e-3, 3.3e-3 since solves start from the curled pose; a weakness of the
    # reduction bound, not of the scale keys; the reported fidelity below stays exact.)
    played = bone_frames(ob, range(1, 41))
    drift = np.linalg.norm(played - live, axis=-1).max()
    assert drift <= (1e-4 if reduce == 0.0 else 4.0 * reduce)
    assert chain.bake_max_error == pytest.approx(drift, abs=2e-5)
    assert max(kp.co.y for kp in keyed[('pose.bones["b1"].scale', 1)].keyframe_points) > 1.2


def test_bake_of_a_chain_that_never_stretches_keys_no_scale():
    ob, target, chain = stretch_bake_rig()
    target.animation_data_clear()
    target.location = (0.2, 0.1, 1.5)
    assert bpy.ops.pose.fabrik_bake(frame_start=1, frame_end=10) == {'FINISHED'}
    from fabrik_addon import compat

    assert not [fc for fc in compat.animated_fcurves(ob) if fc.data_path.endswith(".scale")]


@pytest.mark.parametrize("keyed", [False, True])
def test_snap_fk_to_ik_keeps_the_stretch_in_the_fk_pose(keyed):
    ob, target, chain = rig(3, use_stretch=True)
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode='POSE')
    stretched = np.concatenate([[world_head(ob, f"b{i}"), world_tail(ob, f"b{i}")] for i in range(3)])
    assert bpy.ops.pose.fabrik_snap_fk_to_ik(keyframe=keyed) == {'FINISHED'}
    assert chain.influence == 0.0
    bpy.context.scene.frame_set(2)
    bpy.context.scene.frame_set(1)
    after = np.concatenate([[world_head(ob, f"b{i}"), world_tail(ob, f"b{i}")] for i in range(3)])
    np.testing.assert_allclose(after, stretched, atol=1e-5)
    chain.influence = 1.0  # back to IK: the FK pose already reaches, so nothing grows further
    bpy.context.view_layer.update()
    np.testing.assert_allclose(lengths(ob, 3) / [b.length for b in ob.data.bones], 1.3, atol=1e-4)
