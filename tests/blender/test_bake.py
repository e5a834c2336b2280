"""Baking live IK to keyframes: channels, continuity, untouched data, fidelity, reduction, CLI."""

import subprocess
import sys

import bpy
import numpy as np
import pytest
from rigs import ROOT, add_chain, empty, key_path, straightish_chain, world_tail

from fabrik_addon import compat

PATH = [(1.0, 0.5, 2.5), (0.5, -1.0, 2.0), (-1.0, 1.0, 3.0), (0.2, 0.3, 1.0), (1.5, 1.5, 1.5)]
FRAMES = [1, 10, 20, 30, 40]


def rig(mode='QUATERNION'):
    ob = straightish_chain("Arm", 4)
    for pb in ob.pose.bones:
        pb.rotation_mode = mode
    target = empty("Target", PATH[0])
    key_path(target, PATH, FRAMES)
    chain = add_chain(ob, "b3", 3, target)  # b0 is not in the chain
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, 40
    bpy.context.view_layer.objects.active = ob
    return ob, target, chain


def curves(ob):
    return {(fc.data_path, fc.array_index): fc for fc in compat.animated_fcurves(ob)}


def live_tails(ob, target, frames):
    out = []
    for frame in frames:
        bpy.context.scene.frame_set(frame)
        out.append(world_tail(ob, "b3"))
    return np.array(out)


def test_bake_keys_only_the_chain_rotation_channels_and_the_keys_play_back():
    ob, target, chain = rig()
    live = live_tails(ob, target, range(1, 41))
    bpy.context.scene.frame_set(7)
    assert bpy.ops.pose.fabrik_bake(frame_start=1, frame_end=40) == {'FINISHED'}
    assert bpy.context.scene.frame_current == 7
    assert not chain.enabled
    keyed = curves(ob)
    assert set(keyed) == {(f'pose.bones["b{i}"].rotation_quaternion', k) for i in (1, 2, 3) for k in range(4)}
    for fcurve in keyed.values():
        assert [kp.co.x for kp in fcurve.keyframe_points] == list(range(1, 41))
    np.testing.assert_allclose(live_tails(ob, target, range(1, 41)), live, atol=1e-4)
    assert 0.0 <= chain.bake_max_error < 1e-4
    assert 0.0 <= chain.bake_mean_error <= chain.bake_max_error


def test_quaternion_keys_stay_in_one_hemisphere():
    ob, target, chain = rig()
    ob.pose.bones["b1"].rotation_quaternion = (-1.0, 0.0, 0.0, 0.0)  # the same rotation, other sign
    bpy.ops.pose.fabrik_bake(frame_start=1, frame_end=40)
    q = np.array([[curves(ob)[('pose.bones["b2"].rotation_quaternion', k)].evaluate(f) for k in range(4)]
                  for f in range(1, 41)])
    assert (np.einsum("ij,ij->i", q[1:], q[:-1]) > 0).all()


@pytest.mark.parametrize("mode", ['XYZ', 'ZXY', 'AXIS_ANGLE'])
def test_other_rotation_modes_are_keyed_in_their_own_channels_and_continuous(mode):
    ob, target, chain = rig(mode)
    live = live_tails(ob, target, range(1, 41))
    bpy.ops.pose.fabrik_bake(frame_start=1, frame_end=40)
    path = "rotation_axis_angle" if mode == 'AXIS_ANGLE' else "rotation_euler"
    assert {p for p, _ in curves(ob)} == {f'pose.bones["b{i}"].{path}' for i in (1, 2, 3)}
    if mode != 'AXIS_ANGLE':
        # Each key is the Euler triple nearest the previous key among those giving the same rotation
        # (Blender's own compatible conversion is the reference): no 2*pi wraps or flips.
        from mathutils import Euler

        keyed = curves(ob)
        for i in (1, 2, 3):
            path = f'pose.bones["b{i}"].rotation_euler'
            values = np.array([[keyed[(path, k)].evaluate(f) for k in range(3)] for f in range(1, 41)])
            for previous, current in zip(values[:-1], values[1:]):
                nearest = Euler(current, mode).to_quaternion().to_euler(mode, Euler(previous, mode))
                assert np.abs(current - previous).sum() <= np.abs(np.array(nearest) - previous).sum() + 1e-4
    np.testing.assert_allclose(live_tails(ob, target, range(1, 41)), live, atol=1e-4)


def test_other_keys_and_keys_outside_the_range_are_left_alone():
    ob, target, chain = rig()
    b0 = ob.pose.bones["b0"]
    b0.rotation_quaternion = (0.95, 0.1, 0.0, 0.0)
    b0.keyframe_insert("rotation_quaternion", frame=5)
    b3 = ob.pose.bones["b3"]
    b3.location = (0.0, 0.1, 0.0)
    b3.keyframe_insert("location", frame=12)
    b1 = ob.pose.bones["b1"]
    b1.rotation_quaternion = (0.9, 0.0, 0.2, 0.0)
    b1.keyframe_insert("rotation_quaternion", frame=60)  # outside the baked range
    b1.keyframe_insert("rotation_quaternion", frame=15)  # inside: replaced
    before_b0 = [tuple(kp.co) for k in range(4) for kp in curves(ob)[('pose.bones["b0"].rotation_quaternion', k)]
                 .keyframe_points]
    bpy.ops.pose.fabrik_bake(frame_start=10, frame_end=30)
    keyed = curves(ob)
    assert [tuple(kp.co) for k in range(4) for kp in keyed[('pose.bones["b0"].rotation_quaternion', k)]
            .keyframe_points] == before_b0
    assert [kp.co.x for kp in keyed[('pose.bones["b3"].location', 1)].keyframe_points] == [12.0]
    b1_frames = [kp.co.x for kp in keyed[('pose.bones["b1"].rotation_quaternion', 0)].keyframe_points]
    assert b1_frames == list(range(10, 31)) + [60.0]


def test_key_reduction_drops_keys_and_stays_within_its_tolerance():
    ob, target, chain = rig()
    target.animation_data_clear()
    key_path(target, [(1.0, 0.5, 2.5), (0.6, -0.5, 2.2)], [1, 40])  # a target gliding along a line
    tolerance = 0.01
    bpy.ops.pose.fabrik_bake(frame_start=1, frame_end=40, reduce_tolerance=tolerance)
    total = sum(len(fc.keyframe_points) for fc in curves(ob).values())
    assert total <= 0.6 * 3 * 4 * 40  # measured 252 of 480 keys kept at this tolerance
    assert 0.0 <= chain.bake_max_error <= tolerance


def test_bad_range_is_an_error_message_and_changes_nothing():
    ob, target, chain = rig()
    with pytest.raises(RuntimeError, match="empty"):
        bpy.ops.pose.fabrik_bake(frame_start=30, frame_end=10)
    assert chain.enabled
    assert ob.animation_data is None or not list(compat.animated_fcurves(ob))


def test_default_range_is_the_preview_range_when_set():
    ob, target, chain = rig()
    scene = bpy.context.scene
    scene.use_preview_range = True
    scene.frame_preview_start, scene.frame_preview_end = 5, 9
    bpy.ops.pose.fabrik_bake()
    frames = [kp.co.x for kp in curves(ob)[('pose.bones["b1"].rotation_quaternion', 0)].keyframe_points]
    assert frames == [5.0, 6.0, 7.0, 8.0, 9.0]


def test_headless_bake_cli_writes_a_new_file_and_keeps_the_input(tmp_path):
    ob, target, chain = rig()
    scene_path = tmp_path / "scene.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene_path))
    before = scene_path.read_bytes()
    out_path = tmp_path / "baked.blend"
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "bake.py"), str(scene_path), "--frames", "1-20",
                          "--output", str(out_path)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "max" in run.stdout
    assert scene_path.read_bytes() == before
    bpy.ops.wm.open_mainfile(filepath=str(out_path))
    ob = bpy.data.objects["Arm"]
    assert not ob.fabrik.chains[0].enabled
    assert len(curves(ob)[('pose.bones["b1"].rotation_quaternion', 0)].keyframe_points) == 20


@pytest.mark.parametrize(("args", "message"), [
    (["missing.blend", "--frames", "1-5", "--output", "x.blend"], "not found"),
    (["SCENE", "--frames", "9-2", "--output", "x.blend"], "frame range"),
    (["SCENE", "--frames", "abc", "--output", "x.blend"], "frame range"),
    (["SCENE", "--frames", "1-5"], "--output"),
])
def test_headless_bake_cli_errors(tmp_path, args, message):
    rig()
    scene_path = tmp_path / "scene.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene_path))
    args = [str(scene_path) if a == "SCENE" else a for a in args]
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "bake.py"), *args], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path)
    assert run.returncode != 0
    assert message in run.stderr


def test_headless_bake_cli_needs_an_armature_with_chains(tmp_path):
    empty("Lonely")
    scene_path = tmp_path / "scene.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene_path))
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "bake.py"), str(scene_path), "--frames", "1-5",
                          "--output", str(tmp_path / "o.blend")], capture_output=True, text=True, timeout=300)
    assert run.returncode != 0
    assert "no armature with enabled FABRIK chains" in run.stderr
