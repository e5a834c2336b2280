"""Bones a chain no longer drives (shortened, retargeted, removed) get their pose without IK back at once,
keyed or not, on both solving paths; and the pose at a frame depends only on that frame's inputs."""

import bpy
import numpy as np
import pytest
from mathutils import Quaternion
from rigs import add_chain, empty, straightish_chain, world_head, world_tail

BASE = [Quaternion((1.0, 0.08 * i, -0.05, 0.03 * i)).normalized() for i in range(6)]


def rig(keyed: bool):
    """Six bones b0-b5 up +Z, each turned a little (keyed at frames 1 and 20 when ``keyed``); a chain from
    b4 four bones up (b1-b4) reaching for a target; b5 hangs from the tip, b0 stays above the chain."""
    ob = straightish_chain("Arm", 6)
    for i, q in enumerate(BASE):
        pb = ob.pose.bones[f"b{i}"]
        pb.rotation_quaternion = q
        if keyed:
            for frame in (1, 20):
                pb.keyframe_insert("rotation_quaternion", frame=frame)
    bpy.context.view_layer.update()
    no_ik = {f"b{i}": (world_head(ob, f"b{i}"), world_tail(ob, f"b{i}")) for i in range(6)}
    target = empty("Target", tuple(no_ik["b3"][0] + (0.8, 0.6, 0.9)))  # within reach of b3-b4 alone
    chain = add_chain(ob, "b4", 4, target)
    return ob, chain, target, no_ik


def assert_without_ik(ob, names, no_ik=None):
    """The bones' rotations are their pose without IK (and, with ``no_ik``, so are their world positions)."""
    for name in names:
        q = ob.pose.bones[name].rotation_quaternion
        assert abs(q.dot(BASE[int(name[1:])])) > 1.0 - 1e-6, (name, tuple(q))
        if no_ik is not None:
            np.testing.assert_allclose(world_tail(ob, name), no_ik[name][1], atol=1e-5, err_msg=name)


def change(how: str, scene, frame: int):
    """Let the edit take effect: a frame change, or only a depsgraph update (the same frame)."""
    if how == "frame change":
        scene.frame_set(frame)
    else:
        bpy.context.view_layer.update()


@pytest.mark.parametrize("keyed", [False, True], ids=["stored", "keyed"])
@pytest.mark.parametrize("how", ["frame change", "update"])
@pytest.mark.parametrize("length", [3, 2])
def test_shortening_a_chain_gives_the_dropped_bones_their_pose_without_ik(length, how, keyed, solve_path):
    ob, chain, target, no_ik = rig(keyed)
    scene = bpy.context.scene
    scene.frame_set(1)
    assert chain.status == 'REACHED', chain.message
    chain.chain_length = length
    change(how, scene, 2)
    dropped = [f"b{i}" for i in range(1, 5 - length)]
    assert_without_ik(ob, ["b0", *dropped], no_ik)
    assert chain.status == 'REACHED', chain.message
    np.testing.assert_allclose(world_tail(ob, "b4"), target.location, atol=1e-3)


@pytest.mark.parametrize("keyed", [False, True], ids=["stored", "keyed"])
def test_a_keyed_chain_length_gives_the_dropped_bones_back(keyed, solve_path):
    ob, chain, target, no_ik = rig(keyed)
    scene = bpy.context.scene
    chain.keyframe_insert("chain_length", frame=1)
    chain.chain_length = 2
    chain.keyframe_insert("chain_length", frame=5)
    for frame in (1, 5):
        scene.frame_set(frame)
        assert chain.chain_length == (4 if frame == 1 else 2)
        assert chain.status == 'REACHED', chain.message
        np.testing.assert_allclose(world_tail(ob, "b4"), target.location, atol=1e-3)
    assert_without_ik(ob, ["b0", "b1", "b2"], no_ik)


@pytest.mark.parametrize("keyed", [False, True], ids=["stored", "keyed"])
@pytest.mark.parametrize("others", [0, 1])
def test_a_chain_removed_by_a_script_gives_its_bones_back(others, keyed, solve_path):
    """``chains.remove`` tags nothing for an update: the next frame change gives the bones back."""
    ob, chain, target, no_ik = rig(keyed)
    if others:
        add_chain(ob, "b0", 1, empty("Other", (0.5, 0.5, 0.8)))
    scene = bpy.context.scene
    scene.frame_set(1)
    ob.fabrik.chains.remove(0)
    scene.frame_set(2)
    assert_without_ik(ob, [f"b{i}" for i in range(others, 6)], None if others else no_ik)


def test_a_chain_moved_to_another_tip_gives_the_bones_it_left_back(solve_path):
    ob, chain, target, no_ik = rig(False)
    scene = bpy.context.scene
    scene.frame_set(1)
    chain.tip_bone, chain.chain_length = "b2", 2  # b1-b2: b3 and b4 are left
    target.location = (0.6, 0.8, 1.8)
    scene.frame_set(2)
    assert chain.status == 'REACHED', chain.message
    for name in ("b3", "b4"):
        q = ob.pose.bones[name].rotation_quaternion
        assert abs(q.dot(BASE[int(name[1:])])) > 1.0 - 1e-6, (name, tuple(q))


def test_a_bone_another_chain_still_drives_is_not_given_back(solve_path):
    ob, chain, target, no_ik = rig(False)
    other = add_chain(ob, "b2", 2, empty("Other", (0.5, 0.5, 2.5)))  # b1-b2, shared with the first: a tree
    scene = bpy.context.scene
    scene.frame_set(1)
    chain.chain_length = 2  # b3-b4 only, hanging below the other chain
    scene.frame_set(2)
    assert other.status == 'REACHED' and chain.status == 'REACHED', (other.message, chain.message)
    np.testing.assert_allclose(world_tail(ob, "b2"), (0.5, 0.5, 2.5), atol=1e-3)
    np.testing.assert_allclose(world_tail(ob, "b4"), target.location, atol=1e-3)


@pytest.mark.parametrize("keyed", [False, True], ids=["stored", "keyed"])
def test_moving_a_target_away_and_back_at_one_frame_gives_the_same_pose(keyed, solve_path):
    ob, chain, target, _ = rig(keyed)
    chain.tolerance, chain.iterations = 1e-3, 30  # the defaults: the start pose shows in the result
    scene = bpy.context.scene
    scene.frame_set(1)
    before = [tuple(ob.pose.bones[f"b{i}"].rotation_quaternion) for i in range(6)]
    home = tuple(target.location)
    for away in ((-1.0, 0.5, 2.0), (0.3, -1.2, 3.5), (2.0, 2.0, 1.0)):
        target.location = away
        bpy.context.view_layer.update()
        target.location = home
        bpy.context.view_layer.update()
        after = [tuple(ob.pose.bones[f"b{i}"].rotation_quaternion) for i in range(6)]
        np.testing.assert_allclose(after, before, atol=1e-6)


@pytest.mark.parametrize("keyed", [False, True], ids=["stored", "keyed"])
def test_the_pose_after_a_sequence_of_edits_is_the_pose_of_the_frame(keyed, solve_path):
    ob, chain, target, _ = rig(keyed)
    chain.tolerance, chain.iterations = 1e-3, 30
    scene = bpy.context.scene
    scene.frame_set(7)
    before = [tuple(ob.pose.bones[f"b{i}"].rotation_quaternion) for i in range(6)]
    home = tuple(target.location)
    rng = np.random.default_rng(24)
    for step in range(12):
        kind = step % 4
        if kind == 0:
            target.location = tuple(rng.uniform(-2, 2, 3) + (0, 0, 2))
        elif kind == 1:
            chain.chain_length = int(rng.integers(2, 5))
        elif kind == 2:
            chain.influence = float(rng.uniform(0.2, 1.0))
        else:
            scene.frame_set(int(rng.integers(1, 20)))
        bpy.context.view_layer.update()
    target.location, chain.chain_length, chain.influence = home, 4, 1.0
    scene.frame_set(7)
    after = [tuple(ob.pose.bones[f"b{i}"].rotation_quaternion) for i in range(6)]
    np.testing.assert_allclose(after, before, atol=1e-6)


def test_a_keyed_bone_posed_by_hand_at_the_frame_is_the_pose_without_ik(solve_path):
    """Blender shows a hand pose of a keyed bone until the next frame change: so does influence 0."""
    ob, chain, target, _ = rig(True)
    chain.influence = 0.0
    scene = bpy.context.scene
    scene.frame_set(1)
    hand = Quaternion((0.9, -0.2, 0.3, 0.1)).normalized()
    ob.pose.bones["b2"].rotation_quaternion = hand
    bpy.context.view_layer.update()
    assert abs(ob.pose.bones["b2"].rotation_quaternion.dot(hand)) > 1.0 - 1e-6
    scene.frame_set(2)
    scene.frame_set(1)  # the keys play again
    q = ob.pose.bones["b2"].rotation_quaternion
    assert abs(q.dot(BASE[2])) > 1.0 - 1e-6, tuple(q)
