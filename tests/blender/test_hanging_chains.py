"""Chains hanging below other chains start from the pose those chains wrote this frame (issue 27: the
few-chain path records the new pose matrices only of the bones such chains read, the ancestors of their
roots, worked out once per layout). A chain switched on or off below a leg of the Rigify metarig changes
that set: every bone must still be posed as on a rig that had those chains from the start. Every test
ends on an empty file (see test_real_rig.py: the bpy 4.2 wheel crashes at exit otherwise)."""

import bpy
import numpy as np
import pytest
from rigs import world_head, world_tail

from rigkit import realrig

# A toe chain (foot and toe) hanging below the left leg chain (thigh and shin).
TOE = realrig.ChainSpec("toe.L", 2, reach=0.1, hangs=True)
SPECS = (*realrig.METARIG_CHAINS, TOE)
FRAMES = list(range(1, 9))


@pytest.fixture(autouse=True)
def empty_file_after():
    yield
    bpy.ops.wm.read_factory_settings(use_empty=True)


def played(switch: dict[int, bool]) -> tuple:
    """The metarig with every chain of :data:`SPECS`, the toe chain switched on or off at the frames in
    ``switch`` (frame -> enabled); each frame's world heads and tails of every bone, and the toe chain."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    ob = realrig.metarig()
    chains = realrig.add_fabrik_chains(ob, SPECS, FRAMES)
    toe = chains[TOE.tip][0]
    scene = bpy.context.scene
    names = [pb.name for pb in ob.pose.bones]
    poses = {}
    for frame in FRAMES:
        if frame in switch:
            toe.enabled = switch[frame]
        scene.frame_set(frame)
        poses[frame] = np.array([(world_head(ob, name), world_tail(ob, name)) for name in names])
    return ob, poses, toe


def leg_length(ob) -> float:
    return ob.data.bones["thigh.L"].length + ob.data.bones["shin.L"].length


@pytest.mark.parametrize("on_at", [1, 3, 6])
def test_a_chain_switched_on_below_a_leg_poses_every_bone_as_if_it_had_always_been_on(on_at, solve_path):
    _, always, _ = played({1: True})
    ob, later, toe = played({1: False, on_at: True})
    assert toe.status == 'REACHED', toe.message
    leg = leg_length(ob)
    for frame in FRAMES[on_at - 1:]:
        off = np.linalg.norm(later[frame] - always[frame], axis=-1).max()
        assert off <= 1e-5 * leg, (frame, off / leg)


@pytest.mark.parametrize("off_at", [3, 6])
def test_switching_off_the_chain_below_a_leg_leaves_the_other_chains_as_if_it_had_never_been_on(off_at, solve_path):
    _, never, _ = played({1: False})
    ob, switched, _ = played({1: True, off_at: False})
    leg = leg_length(ob)
    names = [pb.name for pb in ob.pose.bones]
    # Every bone but the toe chain's own (which go back to their pose without IK) and those below them.
    toe_bones = set(realrig.chain_bone_names(ob, TOE.tip, TOE.length))
    bones = ob.data.bones
    others = [k for k, name in enumerate(names)
              if not any(bone.name in toe_bones for bone in (bones[name], *bones[name].parent_recursive))]
    for frame in FRAMES[off_at - 1:]:
        off = np.linalg.norm(switched[frame][others] - never[frame][others], axis=-1).max()
        assert off <= 1e-5 * leg, (frame, off / leg)


def test_the_toe_chain_reaches_its_target_from_where_the_leg_was_solved(solve_path):
    """The toe's target follows the solved leg (:func:`realrig.centre_path`): reaching it every frame means
    the toe chain started from the leg's new pose, not from the pose the leg had before this frame's solve."""
    ob, poses, toe = played({1: True})
    length = sum(ob.data.bones[name].length for name in realrig.chain_bone_names(ob, TOE.tip, TOE.length))
    target = bpy.data.objects[f"T_{TOE.tip}"]
    scene = bpy.context.scene
    for frame in FRAMES:
        scene.frame_set(frame)
        assert toe.status == 'REACHED', (frame, toe.message)
        tip = world_tail(ob, TOE.tip)
        assert np.linalg.norm(tip - np.array(target.matrix_world.translation)) <= 1e-3 * length, frame
