"""The pose at a frame depends only on that frame's inputs, never on what the rig went through before.

A bone a chain gives back (chain switched off, shortened, removed; rig switched off) is the user's again:
what it is posed to then is its pose without IK when a chain takes it again, as for a chain added then. The
stored rotation used to be kept instead: a lone 4-bone chain lengthened over a bone posed while it was free
ended 0.39 units from one that had never held that bone, and switching a chain off again threw away a pose
made by hand while it was off. The differential fuzz (:mod:`history_fuzz`) checks the rule over random
histories.
"""

import bpy
import numpy as np
import pytest
from history_fuzz import run
from mathutils import Quaternion
from rigs import MODES, add_chain, empty, set_rotation, straightish_chain, world_tail

pytestmark = pytest.mark.usefixtures("solve_path")

POSED = Quaternion((0.0, 1.0, 0.0), 0.4)  # a hand pose of the bone the chain left
SAME = 1e-5  # units: float32 rounding apart at most


def tails(ob) -> np.ndarray:
    """Every bone's tail in the armature's space."""
    return np.array([world_tail(ob, pb.name) for pb in ob.pose.bones]) - np.array(ob.location)


def turn_from(pb, q: Quaternion) -> float:
    """Radians between the bone's rotation channels (in its mode) and ``q``."""
    from fabrik_addon import adapter

    return adapter.quaternion_from_channels(pb.rotation_mode, adapter.read_rotation(pb)).rotation_difference(q).angle


def lone_chain(name: str, x: float, length: int, mode: str, solver: str = 'FABRIK', bones: int = 4):
    """A straightish chain of ``bones`` bones in rotation mode ``mode``, its chain ``length`` bones up from
    the tip toward a target within reach (the same place relative to each rig)."""
    ob = straightish_chain(name, bones, location=(x, 0.0, 0.0))
    for pb in ob.pose.bones:
        pb.rotation_mode = mode
    target = empty(f"{name}Target", (x + 0.9, 0.5, 0.7 * bones))
    chain = add_chain(ob, f"b{bones - 1}", length, target, solver=solver, tolerance=1e-5)
    return ob, chain


@pytest.mark.parametrize("mode", MODES)
def test_a_bone_a_lengthened_chain_takes_again_starts_from_its_pose_made_while_it_was_free(mode):
    once, once_chain = lone_chain("Once", 0.0, 4, mode)  # b0 and b1 in the chain, then left
    never, never_chain = lone_chain("Never", 10.0, 2, mode)  # never held b0 and b1
    bpy.context.view_layer.update()
    once_chain.chain_length = 2
    bpy.context.view_layer.update()
    for ob in (once, never):  # the user poses the free root bone
        set_rotation(ob.pose.bones["b0"], POSED)
    bpy.context.view_layer.update()
    for chain in (once_chain, never_chain):
        chain.chain_length = 4
    bpy.context.view_layer.update()
    bpy.context.scene.frame_set(2)
    assert once_chain.status == never_chain.status == 'REACHED'
    np.testing.assert_allclose(tails(once), tails(never), atol=SAME)  # was 0.39 apart
    for chain in (once_chain, never_chain):  # and the pose made by hand comes back with the chain off
        chain.enabled = False
    bpy.context.view_layer.update()
    for ob in (once, never):
        assert turn_from(ob.pose.bones["b0"], POSED) < 1e-5, ob.name


@pytest.mark.parametrize("mode", ['QUATERNION', 'XYZ', 'AXIS_ANGLE'])
@pytest.mark.parametrize("solver", ['FABRIK', 'TWO_BONE'])
def test_a_chain_switched_off_posed_and_on_again_starts_from_that_pose(solver, mode):
    """As a chain added to the posed bones then would; switched off again, the pose made by hand is back."""
    bones = 2 if solver == 'TWO_BONE' else 4
    old, chain = lone_chain("Old", 0.0, bones, mode, solver, bones)
    bpy.context.view_layer.update()
    assert chain.status == 'REACHED'
    chain.enabled = False
    bpy.context.view_layer.update()
    hand = [Quaternion((1.0, 0.0, 0.0), 0.3 * (k + 1)) @ Quaternion((0.0, 0.0, 1.0), 0.2) for k in range(bones)]
    for pb, q in zip(old.pose.bones, hand):
        set_rotation(pb, q)
    bpy.context.view_layer.update()
    chain.enabled = True
    new = straightish_chain("New", bones, location=(10.0, 0.0, 0.0))  # posed alike, its chain added now
    for pb, q in zip(new.pose.bones, hand):
        pb.rotation_mode = mode
        set_rotation(pb, q)
    add_chain(new, f"b{bones - 1}", bones, empty("NewTarget", (10.9, 0.5, 0.7 * bones)), solver=solver,
              tolerance=1e-5)
    bpy.context.scene.frame_set(3)
    assert chain.status == 'REACHED'
    np.testing.assert_allclose(tails(old), tails(new), atol=SAME)
    chain.enabled = False
    bpy.context.view_layer.update()
    for pb, q in zip(old.pose.bones, hand):
        assert turn_from(pb, q) < 1e-5, pb.name


@pytest.mark.parametrize("mode", MODES)
def test_a_chain_switched_off_and_on_by_keys_keeps_its_pose_without_ik_exactly(mode):
    """Bones given back and taken again, not posed meanwhile, keep the stored rotation bit for bit (no
    rounding of a conversion between rotation modes that played back again and again would add up): every
    pass over the frames shows the same pose."""
    ob, chain = lone_chain("Keyed", 0.0, 4, mode)
    for pb, k in zip(ob.pose.bones, range(4)):
        set_rotation(pb, Quaternion((1.0, 0.3, -0.2 * k, 0.1)).normalized())
    pb = ob.pose.bones["b1"]  # a partly keyed bone, in its mode's channels
    path = {'QUATERNION': "rotation_quaternion", 'AXIS_ANGLE': "rotation_axis_angle"}.get(mode, "rotation_euler")
    for frame, angle in ((1, 0.1), (9, -0.4)):
        set_rotation(pb, Quaternion((1.0, 0.0, 0.0), angle) @ Quaternion((0.0, 0.0, 1.0), 0.3))
        pb.keyframe_insert(path, index=0, frame=frame)
        pb.keyframe_insert(path, index=1, frame=frame)
    for frame, on in ((1, True), (4, False), (6, True)):
        chain.enabled = on
        ob.keyframe_insert(f'fabrik.chains["{chain.name}"].enabled', frame=frame)
    scene = bpy.context.scene
    passes = []
    for order in (range(1, 10), range(1, 10), range(9, 0, -1), [5, 2, 7, 4, 9, 1, 6, 3, 8]):
        seen = {}
        for frame in order:
            scene.frame_set(frame)
            seen[frame] = tails(ob)
        passes.append(seen)
    stored = [tuple(pb.fabrik_base.rotation) for pb in ob.pose.bones]
    for seen in passes[1:]:
        for frame, joints in seen.items():
            np.testing.assert_array_equal(joints, passes[0][frame], err_msg=f"frame {frame}")
    for frame in range(1, 10):
        scene.frame_set(frame)
    assert [tuple(pb.fabrik_base.rotation) for pb in ob.pose.bones] == stored


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_histories_end_in_the_pose_of_the_final_inputs(seed):
    """The differential fuzz: a copy of the rigs with a random history of 25 steps against one with none."""
    (distance, angle, bone, history), = run(seed, copies=2, steps=25)
    # The copies stand in one place: the same floats in, the same pose out (float noise would be a history).
    assert distance < 1e-6 and angle < 1e-4, (distance, angle, bone, history)
    solved = [chain.status for ob in bpy.data.objects if ob.type == 'ARMATURE' for chain in ob.fabrik.chains]
    # The final inputs have chains to solve, not only invalid or switched off ones.
    assert sum(status in ('REACHED', 'UNREACHABLE', 'NOT_CONVERGED') for status in solved) >= len(solved) // 2, solved
