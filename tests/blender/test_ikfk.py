"""IK/FK workflow: snap IK to FK and FK to IK, keyed switches, on limbs, limited chains and trees."""

from __future__ import annotations

import math

import bpy
import numpy as np
import pytest
from mathutils import Matrix, Quaternion, Vector
from rigs import add_chain, armature, empty, key_path, set_rotation, straightish_chain

from fabrik_addon import compat, snap

MODES = ('QUATERNION', 'AXIS_ANGLE', 'XYZ', 'XZY', 'YXZ', 'YZX', 'ZXY', 'ZYX')
POSES = 100
IK_TO_FK = 1e-4  # largest joint move when switching to IK after the snap, in chain lengths
FK_TO_IK = 1e-5  # largest joint move when switching to FK after the snap, in scene units


# --- rigs -------------------------------------------------------------------------------------------------------

class Rig:
    """An armature, its chains, the bones to pose at random, and how to pose each."""

    def __init__(self, ob, chains, posers: dict, length: float):
        self.ob, self.chains, self.posers, self.length = ob, chains, posers, length

    def names(self) -> list[str]:
        return [pb.name for pb in self.ob.pose.bones]


def free(max_angle):
    """Any rotation up to ``max_angle`` about a random axis."""
    def pose(rng):
        axis = rng.normal(size=3)
        return Quaternion(axis / np.linalg.norm(axis), rng.uniform(0.0, max_angle))
    return pose


def bend(low, high, twist=0.0):
    """A turn about local X within ``[low, high]`` (a hinge), with an optional twist about local Y first."""
    def pose(rng):
        turn = Quaternion((1.0, 0.0, 0.0), rng.uniform(low, high))
        return turn @ Quaternion((0.0, 1.0, 0.0), rng.uniform(-twist, twist))
    return pose


def inside_cone(angle, twist):
    """A deflection up to ``angle`` toward a random side, and a twist: inside a cone of that size."""
    def pose(rng):
        side = rng.uniform(0.0, 2.0 * math.pi)
        deflect = Quaternion((math.cos(side), 0.0, math.sin(side)), rng.uniform(0.0, angle))
        return deflect @ Quaternion((0.0, 1.0, 0.0), rng.uniform(-twist, twist))
    return pose


def set_modes(ob, offset: int) -> None:
    for k, pb in enumerate(ob.pose.bones):
        pb.rotation_mode = MODES[(k + offset) % len(MODES)]


def arm_rig(offset=0) -> Rig:
    """Two bones, Two-Bone solver, target and pole."""
    ob = straightish_chain("Arm", 2, bend=0.2)
    set_modes(ob, offset)
    chain = add_chain(ob, "b1", 2, empty("ArmTarget", (0.0, 0.2, 2.0)), pole=empty("ArmPole", (0.0, 2.0, 1.0)),
                      solver='TWO_BONE')
    return Rig(ob, [chain], {"b0": free(2.0), "b1": bend(0.2, 2.5, twist=1.0)}, 2.0)


def leg_rig(offset=2, pole=False) -> Rig:
    """Four bones: a free hip, then knee, ankle and toe hinges bending both ways (a zig-zag)."""
    ob = straightish_chain("Leg", 4, bend=0.15)
    set_modes(ob, offset)
    limits = {"b1": (0.1, 2.0), "b2": (-1.0, -0.1), "b3": (0.1, 0.6)}
    for name, (low, high) in limits.items():
        limit = ob.pose.bones[name].fabrik_limit
        limit.mode, limit.hinge_min, limit.hinge_max = 'HINGE', low, high
    # Few iterations: the test moves targets far and often, and a limited solve toward a target the
    # limits keep out of reach runs them all; after a snap, one suffices.
    chain = add_chain(ob, "b3", 4, empty("LegTarget", (0.0, 0.15, 4.0)),
                      pole=empty("LegPole", (0.0, 3.0, 2.0)) if pole else None, iterations=10)
    posers = {"b0": free(1.5)}
    posers.update({name: bend(low + 0.02, high - 0.02) for name, (low, high) in limits.items()})
    return Rig(ob, [chain], posers, 4.0)


def tentacle_rig(offset=4, pole=False) -> Rig:
    """Seven bones with elliptical cones of different sizes: non-planar poses."""
    ob = straightish_chain("Tentacle", 7, length=0.5, bend=0.05)
    set_modes(ob, offset)
    posers = {"b0": free(1.5)}
    for k in range(1, 7):
        limit = ob.pose.bones[f"b{k}"].fabrik_limit
        limit.mode = 'CONE'
        limit.cone_left, limit.cone_right, limit.cone_up, limit.cone_down = 0.4 + 0.05 * k, 0.5, 0.6, 0.35 + 0.05 * k
        posers[f"b{k}"] = inside_cone(0.3, twist=0.5)
    chain = add_chain(ob, "b6", 7, empty("TentacleTarget", (0.0, 0.05, 3.5)),
                      pole=empty("TentaclePole", (0.0, 3.0, 1.5)) if pole else None, iterations=10)
    return Rig(ob, [chain], posers, 3.5)


def tree_rig(offset=6) -> Rig:
    """A spine of two bones carrying two arms of two bones each: two chains sharing the spine."""
    bones = [
        ("spine0", (0, 0, 0), (0, 0.05, 1), None, False, 0.0),
        ("spine1", (0, 0.05, 1), (0, 0, 2), "spine0", True, 0.0),
        ("armL0", (0, 0, 2), (0.8, 0, 2.1), "spine1", True, 0.0),
        ("armL1", (0.8, 0, 2.1), (1.6, 0.1, 2.0), "armL0", True, 0.0),
        ("armR0", (0, 0, 2), (-0.8, 0, 2.1), "spine1", True, 0.0),
        ("armR1", (-0.8, 0, 2.1), (-1.6, 0.1, 2.0), "armR0", True, 0.0),
    ]
    ob = armature("Torso", bones)
    set_modes(ob, offset)
    left = add_chain(ob, "armL1", 4, empty("HandL", (1.6, 0.1, 2.0)), iterations=10)
    right = add_chain(ob, "armR1", 4, empty("HandR", (-1.6, 0.1, 2.0)), iterations=10)
    posers = {name: free(0.6) for name in ("spine0", "spine1", "armL0", "armL1", "armR0", "armR1")}
    return Rig(ob, [left, right], posers, 3.6)


RIGS = {"arm with pole": arm_rig, "leg with hinges": leg_rig, "tentacle with cones": tentacle_rig, "tree": tree_rig}


# --- helpers ----------------------------------------------------------------------------------------------------

def pose_mode(ob) -> None:
    bpy.context.view_layer.objects.active = ob
    ob.select_set(True)
    bpy.ops.object.mode_set(mode='POSE')


def joints(ob) -> np.ndarray:
    """World heads and tails of every bone, as Blender evaluates them now."""
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    world = ev.matrix_world
    return np.array([list(world @ pb.head) + list(world @ pb.tail) for pb in ev.pose.bones]).reshape(-1, 3)


def rotation_path(pb) -> str:
    return {'QUATERNION': "rotation_quaternion", 'AXIS_ANGLE': "rotation_axis_angle"}.get(pb.rotation_mode,
                                                                                         "rotation_euler")


def random_fk(rig: Rig, rng, frame=None) -> None:
    """A random FK pose (keyed at ``frame`` when given)."""
    for name, poser in rig.posers.items():
        pb = rig.ob.pose.bones[name]
        set_rotation(pb, poser(rng))
        if frame is not None:
            pb.keyframe_insert(rotation_path(pb), frame=frame)


def largest_move(before: np.ndarray, after: np.ndarray) -> float:
    return float(np.linalg.norm(after - before, axis=1).max())


# --- IK -> FK ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(RIGS))
def test_snap_ik_to_fk_then_switching_to_ik_moves_nothing(name):
    """100 random FK poses per rig, half unkeyed with the chains off, half keyed at influence 0."""
    rig = RIGS[name]()
    pose_mode(rig.ob)
    rng = np.random.default_rng(16)
    worst = 0.0
    for k in range(POSES):
        keyed = k % 2 == 1
        for chain in rig.chains:
            chain.enabled, chain.influence = keyed, 0.0 if keyed else 1.0
        if keyed:
            bpy.context.scene.frame_set(k)
        random_fk(rig, rng, frame=k if keyed else None)
        if keyed:
            bpy.context.scene.frame_set(k)  # play the keys
        fk = joints(rig.ob)
        assert bpy.ops.pose.fabrik_snap_ik_to_fk(all_chains=True, keyframe=False) == {'FINISHED'}
        np.testing.assert_allclose(joints(rig.ob), fk, atol=1e-5)  # the snap itself moves no bone
        for chain in rig.chains:
            chain.enabled, chain.influence = True, 1.0
        ik = joints(rig.ob)
        assert all(chain.status == 'REACHED' for chain in rig.chains), [c.message for c in rig.chains]
        worst = max(worst, largest_move(fk, ik) / rig.length)
    print(f"\n{name}: snap IK to FK, then IK on: largest joint move {worst:.2e} chain lengths")
    assert worst <= IK_TO_FK, (f"switching to IK after the snap moved a joint {worst:.2e} chain lengths: the solve "
                               "must leave a start pose whose tip is on its target (and bend on its pole) as it is")


@pytest.mark.parametrize("make", [lambda: leg_rig(pole=True), lambda: tentacle_rig(pole=True)],
                         ids=["4-bone hinged leg", "7-bone tentacle"])
def test_snap_ik_to_fk_places_an_n_bone_pole_on_the_bend(make):
    """N-bone chains with a pole: the pole snapped onto the current bend moves nothing."""
    rig = make()
    pose_mode(rig.ob)
    rng = np.random.default_rng(7)
    worst = 0.0
    for _k in range(20):
        rig.chains[0].enabled = False
        random_fk(rig, rng)
        fk = joints(rig.ob)
        assert bpy.ops.pose.fabrik_snap_ik_to_fk() == {'FINISHED'}
        rig.chains[0].enabled = True
        worst = max(worst, largest_move(fk, joints(rig.ob)) / rig.length)
    print(f"\n{rig.ob.name} with pole: largest joint move {worst:.2e} chain lengths")
    assert worst <= IK_TO_FK


# --- FK -> IK ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(RIGS))
@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
def test_snap_fk_to_ik_then_switching_to_fk_moves_nothing(name, keyed):
    rig = RIGS[name]()
    pose_mode(rig.ob)
    rng = np.random.default_rng(61)
    scene = bpy.context.scene
    worst = 0.0
    for k in range(20):
        rig.ob.animation_data_clear()
        for chain in rig.chains:
            chain.enabled, chain.influence = True, 1.0
        scene.frame_set(k)
        random_fk(rig, rng, frame=k if keyed else None)  # the pose without IK (keyed or stored)
        if keyed:
            scene.frame_set(k)
        for chain in rig.chains:
            root = np.array(rig.ob.matrix_world @ rig.ob.pose.bones[0].head)
            chain.target.location = Vector(root + rng.uniform(-0.7, 0.7, 3) * rig.length)
        ik = joints(rig.ob)
        assert bpy.ops.pose.fabrik_snap_fk_to_ik(all_chains=True, keyframe=keyed) == {'FINISHED'}
        assert all(chain.influence == 0.0 for chain in rig.chains)
        worst = max(worst, largest_move(ik, joints(rig.ob)))
        if keyed:
            scene.frame_set(k + 1)
            scene.frame_set(k)  # the keys play the snapped pose back
            worst = max(worst, largest_move(ik, joints(rig.ob)))
    print(f"\n{name}, {'keyed' if keyed else 'unkeyed'}: snap FK to IK, then FK: largest move {worst:.2e}")
    assert worst <= FK_TO_IK


# --- keyed switch -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["arm with pole", "tentacle with cones"])
def test_a_keyed_switch_from_ik_to_fk_and_back_plays_without_a_jump(name):
    """The target moves steadily; at frame 10 the chain is snapped to FK and switched, keyed; at 15 back."""
    rig = RIGS[name]()
    pose_mode(rig.ob)
    scene = bpy.context.scene
    chain = rig.chains[0]
    target = chain.target
    start = np.array(target.location)
    key_path(target, [tuple(start + (-0.3, 0.2, -0.6)), tuple(start + (0.3, -0.2, -0.3))], [1, 20])
    for fcurve in fcurves(target):
        for point in fcurve.keyframe_points:
            point.interpolation = 'LINEAR'
    scene.frame_set(10)
    assert bpy.ops.pose.fabrik_snap_fk_to_ik(keyframe=True) == {'FINISHED'}
    played = []
    for frame in range(5, 16):
        scene.frame_set(frame)
        played.append(joints(rig.ob))
    steps = [largest_move(a, b) for a, b in zip(played, played[1:])]  # steps[i]: frame 5 + i -> 6 + i
    switch = steps[4]  # frame 9 -> 10
    print(f"\n{name}: per-frame moves around the switch {[f'{s:.4f}' for s in steps]}")
    assert switch <= max(steps[3], steps[5]) * 1.05 + 1e-6
    scene.frame_set(9)
    assert chain.influence == 1.0
    scene.frame_set(10)
    assert chain.influence == 0.0

    # And back at frame 15: the target keyed onto the FK pose, influence keyed 0 -> 1 over frame 14 -> 15.
    scene.frame_set(15)
    assert bpy.ops.pose.fabrik_snap_ik_to_fk(keyframe=True) == {'FINISHED'}
    chain.keyframe_insert("influence", frame=14)
    chain.influence = 1.0
    chain.keyframe_insert("influence", frame=15)
    played = []
    for frame in (13, 14, 15, 16):
        scene.frame_set(frame)
        played.append(joints(rig.ob))
    assert largest_move(played[1], played[2]) <= IK_TO_FK * rig.length  # FK at 14, IK at 15: the same pose
    assert chain.influence == 1.0


# --- operators --------------------------------------------------------------------------------------------------

def test_snap_operators_explain_why_they_cannot_run():
    ob = straightish_chain("Arm", 2)
    bpy.context.view_layer.objects.active = ob
    assert not bpy.ops.pose.fabrik_snap_ik_to_fk.poll()  # object mode
    pose_mode(ob)
    assert not bpy.ops.pose.fabrik_snap_fk_to_ik.poll()  # no chains
    add_chain(ob, "b1", 2, None)
    assert bpy.ops.pose.fabrik_snap_fk_to_ik.poll()
    with pytest.raises(RuntimeError, match="has no target"):
        bpy.ops.pose.fabrik_snap_ik_to_fk()


def test_snap_ik_to_fk_moves_a_parented_target_and_a_bone_target_of_another_armature():
    rig = arm_rig()
    holder = empty("Holder", (0.5, -0.3, 0.2))
    holder.rotation_euler = (0.3, -0.2, 0.9)
    holder.scale = (2.0, 2.0, 2.0)
    rig.chains[0].target.parent = holder
    rig.chains[0].target.matrix_parent_inverse = Matrix.Translation((0.1, 0.2, 0.3))
    mover = armature("Mover", [("root", (0, 0, 0), (0, 0, 0.5), None, False, 0.0),
                               ("pole", (1, 1, 1), (1, 1, 1.3), "root", False, 0.4)])
    mover.pose.bones["root"].rotation_quaternion = Quaternion((0.0, 0.0, 1.0), 0.7)
    rig.chains[0].pole, rig.chains[0].pole_bone = mover, "pole"
    pose_mode(rig.ob)
    rng = np.random.default_rng(3)
    for _k in range(10):
        rig.chains[0].enabled = False
        random_fk(rig, rng)
        fk = joints(rig.ob)
        assert bpy.ops.pose.fabrik_snap_ik_to_fk() == {'FINISHED'}
        rig.chains[0].enabled = True
        assert largest_move(fk, joints(rig.ob)) <= IK_TO_FK * rig.length


def test_snap_ik_to_fk_refuses_a_target_its_constraint_holds_and_leaves_it_alone():
    rig = arm_rig()
    anchor = empty("Anchor", (3.0, 3.0, 3.0))
    target = rig.chains[0].target
    constraint = target.constraints.new('COPY_LOCATION')
    constraint.target = anchor
    bpy.context.view_layer.update()
    before = target.matrix_basis.copy()
    pose_mode(rig.ob)
    with pytest.raises(RuntimeError, match="cannot be placed on the FK pose"):
        bpy.ops.pose.fabrik_snap_ik_to_fk()
    assert target.matrix_basis == before


def test_snap_ik_to_fk_matches_the_tip_rotation_and_keys_target_and_pole():
    rig = arm_rig()
    chain = rig.chains[0]
    chain.match_target_rotation = True
    chain.solver = 'FABRIK'  # one placed bone: the tip takes the target's orientation
    chain.target.rotation_mode = 'XZY'
    pose_mode(rig.ob)
    scene = bpy.context.scene
    scene.frame_set(7)
    rng = np.random.default_rng(5)
    chain.enabled = False
    random_fk(rig, rng)
    fk = joints(rig.ob)
    scene.tool_settings.use_keyframe_insert_auto = True  # the default follows auto-keying
    assert bpy.ops.pose.fabrik_snap_ik_to_fk() == {'FINISHED'}
    chain.enabled = True
    assert largest_move(fk, joints(rig.ob)) <= IK_TO_FK * rig.length
    paths = {(fc.data_path, int(fc.keyframe_points[0].co.x)) for fc in fcurves(chain.target)}
    assert {("location", 7), ("rotation_euler", 7)} <= paths
    assert ("location", 7) in {(fc.data_path, int(fc.keyframe_points[0].co.x)) for fc in fcurves(chain.pole)}
    scene.frame_set(1)
    scene.frame_set(7)
    assert largest_move(fk, joints(rig.ob)) <= IK_TO_FK * rig.length


def fcurves(ob):
    return list(compat.animated_fcurves(ob))


def test_snap_fk_to_ik_keeps_the_chain_on_when_asked():
    rig = tentacle_rig()
    chain = rig.chains[0]
    pose_mode(rig.ob)
    chain.target.location = (1.0, 0.5, 2.5)
    bpy.context.view_layer.update()
    ik = joints(rig.ob)
    assert bpy.ops.pose.fabrik_snap_fk_to_ik(disable=False) == {'FINISHED'}
    assert chain.enabled and chain.influence == 1.0
    chain.influence = 0.0
    assert largest_move(ik, joints(rig.ob)) <= FK_TO_IK


def test_snap_fk_to_ik_of_a_chain_at_influence_0_takes_the_full_ik_pose():
    rig = arm_rig()
    chain = rig.chains[0]
    pose_mode(rig.ob)
    chain.target.location = (0.8, 0.6, 1.2)
    bpy.context.view_layer.update()
    ik = joints(rig.ob)
    chain.influence = 0.0
    fk = joints(rig.ob)
    assert largest_move(ik, fk) > 0.1
    assert bpy.ops.pose.fabrik_snap_fk_to_ik() == {'FINISHED'}
    assert largest_move(ik, joints(rig.ob)) <= FK_TO_IK


def test_undo_takes_either_snap_back():
    """As the UI does it: an undo step before and one after each snap (scripts' operator calls push none)."""
    rig = arm_rig()
    bpy.ops.ed.undo_push(message="built")
    chain = rig.chains[0]
    chain.target.location = (0.8, 0.6, 1.2)
    pose_mode(rig.ob)
    bpy.context.view_layer.update()
    bpy.ops.ed.undo_push(message="posed")
    base = [tuple(pb.fabrik_base.rotation) for pb in rig.ob.pose.bones]
    assert bpy.ops.pose.fabrik_snap_fk_to_ik() == {'FINISHED'}
    assert chain.influence == 0.0
    bpy.ops.ed.undo_push(message="Snap FK to IK")
    assert bpy.ops.ed.undo() == {'FINISHED'}
    ob = bpy.data.objects["Arm"]
    assert ob.fabrik.chains[0].influence == 1.0
    np.testing.assert_allclose([tuple(pb.fabrik_base.rotation) for pb in ob.pose.bones], base, atol=1e-7)

    chain = ob.fabrik.chains[0]
    chain.enabled = False
    bpy.context.view_layer.update()
    bpy.ops.ed.undo_push(message="FK")
    before = tuple(chain.target.location)
    assert bpy.ops.pose.fabrik_snap_ik_to_fk() == {'FINISHED'}
    assert np.linalg.norm(np.array(chain.target.location) - before) > 0.1
    bpy.ops.ed.undo_push(message="Snap IK to FK")
    assert bpy.ops.ed.undo() == {'FINISHED'}
    np.testing.assert_allclose(tuple(bpy.data.objects["ArmTarget"].location), before, atol=1e-7)


def test_snap_ik_to_fk_warns_when_an_animated_target_is_not_keyed():
    """A target bone of another armature, keyed: without Keyframe the snap holds only until the frame changes."""
    rig = arm_rig()
    mover = armature("Mover", [("hand", (1.0, 0.5, 0.0), (1.0, 0.5, 0.3), None, False, 0.0)])
    mover.pose.bones["hand"].keyframe_insert("location", frame=1)
    rig.chains[0].target, rig.chains[0].target_bone = mover, "hand"
    rig.chains[0].enabled = False
    pose_mode(rig.ob)
    result = snap.snap_ik_to_fk(bpy.context, rig.ob, [0], keyframe=False)
    assert result.snapped == ["b1"] and not result.errors
    assert len(result.warnings) == 1 and "'Mover: hand' is animated" in result.warnings[0]
    tip = np.array(rig.ob.matrix_world @ rig.ob.pose.bones["b1"].tail)
    ev = mover.evaluated_get(bpy.context.evaluated_depsgraph_get())
    np.testing.assert_allclose(np.array(ev.matrix_world @ ev.pose.bones["hand"].head), tip, atol=1e-5)
    assert bpy.ops.pose.fabrik_snap_ik_to_fk(keyframe=True) == {'FINISHED'}
    bpy.context.scene.frame_set(2)
    ev = mover.evaluated_get(bpy.context.evaluated_depsgraph_get())
    np.testing.assert_allclose(np.array(ev.matrix_world @ ev.pose.bones["hand"].head), tip, atol=1e-5)


def test_snap_ik_to_fk_moves_a_target_bone_of_the_same_armature():
    """An IK control bone in the rig itself, outside the chain."""
    ob = armature("Arm", [("b0", (0, 0, 0), (0, 0.2, 1), None, False, 0.0),
                          ("b1", (0, 0.2, 1), (0, 0, 2), "b0", True, 0.0),
                          ("hand_ik", (0, 0, 2), (0, 0, 2.3), None, False, 0.0)])
    chain = add_chain(ob, "b1", 2, ob, target_bone="hand_ik", solver='TWO_BONE', match_target_rotation=False)
    pose_mode(ob)
    rng = np.random.default_rng(11)
    posers = {"b0": free(2.0), "b1": bend(0.2, 2.5, twist=1.0)}
    for _k in range(10):
        chain.influence = 0.0
        for name, poser in posers.items():
            set_rotation(ob.pose.bones[name], poser(rng))
        bpy.context.view_layer.update()
        assert bpy.ops.pose.fabrik_snap_fk_to_ik(disable=False) == {'FINISHED'}  # the pose becomes FK ...
        chain.influence = 0.0
        fk = joints(ob)
        assert bpy.ops.pose.fabrik_snap_ik_to_fk() == {'FINISHED'}  # ... and the control bone follows it
        chain.influence = 1.0
        assert largest_move(fk, joints(ob)) <= IK_TO_FK * 2.0


def test_snap_fk_to_ik_switches_a_chain_off_when_its_influence_is_keyed_and_keying_is_off():
    rig = arm_rig()
    chain = rig.chains[0]
    chain.keyframe_insert("influence", frame=1)
    chain.target.location = (0.8, 0.6, 1.2)
    pose_mode(rig.ob)
    ik = joints(rig.ob)
    result = snap.snap_fk_to_ik(bpy.context, rig.ob, [0], keyframe=False, disable=True)
    assert result.snapped == ["b1"] and "switched off instead" in result.warnings[0]
    assert not chain.enabled and chain.influence == 1.0
    assert largest_move(ik, joints(rig.ob)) <= FK_TO_IK
    bpy.context.scene.frame_set(2)  # unkeyed bones: their stored pose without IK is the IK pose now
    assert largest_move(ik, joints(rig.ob)) <= FK_TO_IK


def test_snap_fk_to_ik_refuses_a_rig_switched_off():
    rig = arm_rig()
    rig.ob.fabrik.enabled = False
    pose_mode(rig.ob)
    with pytest.raises(RuntimeError, match="switched off"):
        bpy.ops.pose.fabrik_snap_fk_to_ik()
    assert rig.chains[0].influence == 1.0


def test_snap_ik_to_fk_refuses_a_pole_that_is_the_target_and_moves_nothing():
    """One object cannot stand on the tip and on the bend side: placed as the pole it left the target 2.3 units
    off the tip (the chain then unreachable, its joints 1.7 from the FK pose) while the snap said it succeeded.
    The same for one bone of a control armature as both; two bones of it are two controls."""
    rig = arm_rig()
    chain = rig.chains[0]
    chain.pole = chain.target
    before = chain.target.matrix_basis.copy()
    pose_mode(rig.ob)
    with pytest.raises(RuntimeError, match="its pole is its target"):
        bpy.ops.pose.fabrik_snap_ik_to_fk()
    assert chain.target.matrix_basis == before
    controls = armature("Controls", [("hand", (1, 0, 0), (1, 0, 0.2), None, False, 0.0),
                                     ("elbow", (1, 1, 0), (1, 1, 0.2), None, False, 0.0)])
    chain.target, chain.target_bone, chain.pole, chain.pole_bone = controls, "hand", controls, "hand"
    pose_mode(rig.ob)
    with pytest.raises(RuntimeError, match="its pole is its target"):
        bpy.ops.pose.fabrik_snap_ik_to_fk()
    chain.pole_bone = "elbow"
    assert bpy.ops.pose.fabrik_snap_ik_to_fk() == {'FINISHED'}


def test_snap_ik_to_fk_refuses_a_target_that_carries_the_armature():
    rig = arm_rig()
    carrier = empty("Carrier", (0.0, 0.0, 0.0))
    rig.ob.parent = carrier
    rig.chains[0].target = carrier
    pose_mode(rig.ob)
    with pytest.raises(RuntimeError, match="carries the armature"):
        bpy.ops.pose.fabrik_snap_ik_to_fk()
    assert tuple(carrier.location) == (0.0, 0.0, 0.0)


def test_snap_ik_to_fk_refuses_a_target_bone_the_chain_hangs_from():
    ob = armature("Arm", [("root", (0, 0, -0.5), (0, 0, 0), None, False, 0.0),
                          ("b0", (0, 0, 0), (0, 0.2, 1), "root", True, 0.0),
                          ("b1", (0, 0.2, 1), (0, 0, 2), "b0", True, 0.0)])
    add_chain(ob, "b1", 2, ob, target_bone="root")
    pose_mode(ob)
    with pytest.raises(RuntimeError, match="carries the chain"):
        bpy.ops.pose.fabrik_snap_ik_to_fk()


def test_snap_ik_to_fk_corrects_for_a_child_of_constraint_on_the_target():
    rig = arm_rig()
    holder = empty("Holder", (0.4, -0.2, 0.3))
    holder.rotation_euler = (0.5, 0.1, -0.7)
    constraint = rig.chains[0].target.constraints.new('CHILD_OF')
    constraint.target = holder
    pose_mode(rig.ob)
    rng = np.random.default_rng(9)
    for _k in range(5):
        rig.chains[0].enabled = False
        random_fk(rig, rng)
        fk = joints(rig.ob)
        assert bpy.ops.pose.fabrik_snap_ik_to_fk() == {'FINISHED'}
        rig.chains[0].enabled = True
        assert largest_move(fk, joints(rig.ob)) <= IK_TO_FK * rig.length


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
def test_snaps_carry_the_stretch_of_a_stretching_chain(keyed):
    """FK to IK keeps the stretch as the bones' scale without IK (keyed when asked); IK to FK back moves nothing."""
    rig = arm_rig()
    chain = rig.chains[0]
    chain.use_stretch, chain.max_stretch = True, 1.5
    chain.target.location = (0.0, 1.0, 2.4)  # 2.6 from the root: 1.3 x the arm's reach
    pose_mode(rig.ob)
    scene = bpy.context.scene
    scene.frame_set(3)
    ik = joints(rig.ob)
    assert max(pb.scale[1] for pb in rig.ob.pose.bones) > 1.2  # stretched
    assert bpy.ops.pose.fabrik_snap_fk_to_ik(keyframe=keyed) == {'FINISHED'}
    assert largest_move(ik, joints(rig.ob)) <= FK_TO_IK
    if keyed:
        assert {fc.data_path for fc in fcurves(rig.ob)} >= {'pose.bones["b0"].scale', 'pose.bones["b1"].scale'}
        scene.frame_set(4)
        scene.frame_set(3)
        assert largest_move(ik, joints(rig.ob)) <= FK_TO_IK
    fk = joints(rig.ob)
    chain.target.location = (0.5, 0.0, 1.0)  # somewhere else, then snapped back onto the stretched FK pose
    assert bpy.ops.pose.fabrik_snap_ik_to_fk() == {'FINISHED'}
    chain.influence = 1.0
    assert largest_move(fk, joints(rig.ob)) <= IK_TO_FK * rig.length


@pytest.mark.parametrize("solver, count", [('TWO_BONE', 2), ('FABRIK', 4)])
def test_snap_ik_to_fk_of_a_straight_limb_moves_nothing(solver, count):
    """A straight FK pose has its tip at exactly full reach, where the solve is most sensitive."""
    ob = straightish_chain("Straight", count, bend=0.0)
    chain = add_chain(ob, f"b{count - 1}", count, empty("Target", (0.0, 0.0, count)),
                      pole=empty("Pole", (0.0, 2.0, 1.0)), solver=solver)
    for pb in list(ob.pose.bones)[1:]:
        pb.fabrik_limit.mode, pb.fabrik_limit.hinge_min, pb.fabrik_limit.hinge_max = 'HINGE', -0.5, 1.0
    pose_mode(ob)
    rng = np.random.default_rng(21)
    worst = 0.0
    for _k in range(20):
        chain.enabled = False
        set_rotation(ob.pose.bones["b0"], free(2.5)(rng))
        fk = joints(ob)
        assert bpy.ops.pose.fabrik_snap_ik_to_fk() == {'FINISHED'}
        chain.enabled = True
        worst = max(worst, largest_move(fk, joints(ob)) / count)
    assert worst <= IK_TO_FK


@pytest.mark.parametrize("name", list(RIGS))
def test_snap_ik_to_fk_with_soft_ik_moves_nothing(name):
    """Soft IK eases the reached distance: the target goes where the soft curve brings the tip onto the FK tip."""
    rig = RIGS[name]()
    for chain in rig.chains:
        chain.softness = 0.3
    pose_mode(rig.ob)
    rng = np.random.default_rng(30)
    worst = 0.0
    for _k in range(30):
        for chain in rig.chains:
            chain.enabled = False
        random_fk(rig, rng)
        fk = joints(rig.ob)
        assert bpy.ops.pose.fabrik_snap_ik_to_fk(all_chains=True) == {'FINISHED'}
        for chain in rig.chains:
            chain.enabled = True
        worst = max(worst, largest_move(fk, joints(rig.ob)) / rig.length)
    print(f"\n{name}, softness 0.3: largest joint move {worst:.2e} chain lengths")
    assert worst <= IK_TO_FK


@pytest.mark.parametrize("name", ["arm with pole", "tentacle with cones"])
def test_snap_ik_to_fk_reads_the_keyed_fk_pose_while_ik_is_shown(name):
    """Keyed bones at influence 1: between frame changes their channels hold the IK pose, not the keys."""
    rig = RIGS[name]()
    chain = rig.chains[0]
    pose_mode(rig.ob)
    scene = bpy.context.scene
    rng = np.random.default_rng(12)
    worst = 0.0
    for k in range(1, 11):
        chain.influence = 0.0
        scene.frame_set(k)
        random_fk(rig, rng, frame=k)
        scene.frame_set(k)
        fk = joints(rig.ob)
        chain.influence = 1.0
        chain.target.location = Vector(fk[1] + rng.uniform(-0.3, 0.3, 3))  # IK shows another pose
        scene.frame_set(k)
        assert largest_move(fk, joints(rig.ob)) > 1e-3
        assert bpy.ops.pose.fabrik_snap_ik_to_fk() == {'FINISHED'}
        worst = max(worst, largest_move(fk, joints(rig.ob)) / rig.length)
        scene.frame_set(k)
        worst = max(worst, largest_move(fk, joints(rig.ob)) / rig.length)
    assert worst <= IK_TO_FK


# --- poles on N-bone chains whose own bend disagrees with their centroid (issue 23) ------------------------------

def free_chain_rig(count: int, mode: str, cones: bool) -> Rig:
    """``count`` bones with a pole, every bone in rotation ``mode``; with ``cones``, elliptical cones."""
    ob = straightish_chain(f"Chain{count}", count, length=0.5, bend=0.05)
    for pb in ob.pose.bones:
        pb.rotation_mode = mode
    posers = {"b0": free(1.5)}
    for k in range(1, count):
        if cones:
            limit = ob.pose.bones[f"b{k}"].fabrik_limit
            limit.mode = 'CONE'
            limit.cone_left, limit.cone_right, limit.cone_up, limit.cone_down = 0.8, 0.9, 1.0, 0.85
        posers[f"b{k}"] = inside_cone(0.7, twist=0.5)
    length = 0.5 * count
    chain = add_chain(ob, f"b{count - 1}", count, empty(f"Chain{count}Target", (0.0, 0.05, length)),
                      pole=empty(f"Chain{count}Pole", (0.0, length, 0.5 * length)), iterations=10)
    return Rig(ob, [chain], posers, length)


def s_curve(count: int, amount: float, twist: float):
    """Posers for an S: the first half of the bones bends one way, the rest back (with a random twist,
    so the S leaves its plane), the joints' centroid near the root-tip line."""
    half = count // 2

    def turn(sign):
        def pose(rng):
            tilt = Quaternion((1.0, 0.0, 0.0), sign * rng.uniform(0.5 * amount, amount))
            return tilt @ Quaternion((0.0, 1.0, 0.0), rng.uniform(-twist, twist))
        return pose
    posers = {"b0": free(1.0)}
    posers.update({f"b{k}": turn(1.0 if k < half else -1.0) for k in range(1, count)})
    return posers


def snap_then_switch(rig: Rig) -> float:
    """Largest joint move (chain lengths) when switching IK on after snapping IK to FK on the pose the rig
    holds now, the chain off."""
    fk = joints(rig.ob)
    assert bpy.ops.pose.fabrik_snap_ik_to_fk() == {'FINISHED'}
    rig.chains[0].enabled = True
    ik = joints(rig.ob)
    assert rig.chains[0].status == 'REACHED', rig.chains[0].message
    return largest_move(fk, ik) / rig.length


def snap_and_switch(rig: Rig, rng, poses: int) -> float:
    """Largest joint move (chain lengths) when switching IK on after snapping IK to FK, ``poses`` random FK
    poses, the chain off while posed."""
    worst = 0.0
    for _k in range(poses):
        rig.chains[0].enabled = False
        random_fk(rig, rng)
        worst = max(worst, snap_then_switch(rig))
    return worst


@pytest.mark.parametrize("mode", MODES)
def test_snap_ik_to_fk_of_a_non_planar_4_bone_chain_with_a_pole_moves_nothing(mode, solve_path):
    """Issue 23: a 4-bone non-planar chain with a pole, 25 random FK poses, every rotation mode."""
    rig = free_chain_rig(4, mode, cones=False)
    pose_mode(rig.ob)
    worst = snap_and_switch(rig, np.random.default_rng(23), 25)
    print(f"\n4 bones, pole, {mode}: largest joint move {worst:.2e} chain lengths")
    assert worst <= IK_TO_FK


@pytest.mark.parametrize("count", [5, 6, 7])
@pytest.mark.parametrize("cones", [False, True], ids=["free", "cones"])
def test_snap_ik_to_fk_of_an_s_shaped_chain_with_a_pole_moves_nothing(count, cones, solve_path):
    """S-shaped 5-7 bone chains with a pole: their joints' centroid sits near the root-tip line while the
    joints bulge both ways, so small differences in where the bend reads roll the chain."""
    rig = free_chain_rig(count, 'QUATERNION', cones)
    rig.posers = s_curve(count, 0.6 if cones else 0.9, twist=0.4)
    pose_mode(rig.ob)
    worst = snap_and_switch(rig, np.random.default_rng(100 + count), 20)
    print(f"\n{count} bones S, pole, {'cones' if cones else 'free'}: largest joint move {worst:.2e} chain lengths")
    assert worst <= IK_TO_FK


# --- S-shaped chains with a pole: the snap turns the pole back by the roll the solve gives (issues 23, 25) -------

LIMITS = ('FREE', 'CONE', 'HINGE')


def s_chain_rig(count: int, limit: str) -> Rig:
    """``count`` bones with a pole: free, with elliptical cones, or with hinges that bend both ways."""
    ob = straightish_chain(f"S{count}{limit}", count, length=0.5, bend=0.05)
    for k in range(1, count):
        settings = ob.pose.bones[f"b{k}"].fabrik_limit
        if limit == 'CONE':
            settings.mode = 'CONE'
            settings.cone_left, settings.cone_right, settings.cone_up, settings.cone_down = 1.4, 1.5, 1.6, 1.45
        elif limit == 'HINGE':
            settings.mode, settings.hinge_min, settings.hinge_max = 'HINGE', -1.3, 1.3
    length = 0.5 * count
    chain = add_chain(ob, f"b{count - 1}", count, empty(f"S{count}{limit}Target", (0.0, 0.05, length)),
                      pole=empty(f"S{count}{limit}Pole", (0.0, length, 0.5 * length)), iterations=10)
    return Rig(ob, [chain], {"b0": free(1.0)}, length)


def pose_s(rig: Rig, rng, amount: float, noise: float, planar: bool) -> None:
    """A point-symmetric S, then nudged: bone k's turn about local X undoes bone (N - k)'s, so the joints lie
    symmetric about the chain's middle and their centroid on the root-tip line, however far they bulge; each
    turn is then nudged by up to ``noise`` rad (about local X when ``planar``, else about any axis), which puts
    the centroid a hair off the line. The first bone turns freely."""
    set_rotation(rig.ob.pose.bones["b0"], rig.posers["b0"](rng))
    count = len(rig.ob.pose.bones)
    half = rng.choice([-1.0, 1.0]) * rng.uniform(0.4 * amount, amount, size=(count - 1) // 2)
    turns = np.zeros(count)
    turns[1:1 + len(half)] = half
    turns[count - len(half):] = -half[::-1]
    for k in range(1, count):
        axis = np.array([1.0, 0.0, 0.0]) if planar else rng.normal(size=3)
        nudge = Quaternion(axis / np.linalg.norm(axis), rng.uniform(-noise, noise))
        set_rotation(rig.ob.pose.bones[f"b{k}"], nudge @ Quaternion((1.0, 0.0, 0.0), turns[k]))


def snap_switch_s(rig: Rig, rng, poses: int, amount: float = 0.6, noise: float = 0.08) -> float:
    """Largest joint move (chain lengths) when switching IK on after snapping IK to FK, over ``poses`` S poses
    (:func:`pose_s`), the bones' rotation modes shifted by one each pose (every bone goes through every mode)."""
    planar = rig.ob.pose.bones["b1"].fabrik_limit.mode == 'HINGE'
    worst = 0.0
    for k in range(poses):
        rig.chains[0].enabled = False
        set_modes(rig.ob, k)
        pose_s(rig, rng, amount, noise, planar)
        worst = max(worst, snap_then_switch(rig))
    return worst


def test_roll_angle_is_the_turn_about_the_root_target_line_that_carries_ik_onto_fk():
    rng = np.random.default_rng(3)
    fk = np.cumsum(np.vstack([[0.0, 0.0, 0.0], rng.normal(size=(6, 3))]), axis=0)
    goal = fk[-1] + 0.3 * (fk[-1] - fk[0])  # on the root-tip line, beyond the tip (a soft chain's target)
    for angle in (-2.5, -1e-3, 4.8e-3, 0.7, 3.0):
        ik = np.array([snap.turn_about(point, fk[0], goal, -angle) for point in fk])
        assert snap.roll_angle(fk, ik, goal) == pytest.approx(angle, abs=1e-12)
        back = np.array([snap.turn_about(point, fk[0], goal, angle) for point in ik])
        np.testing.assert_allclose(back, fk, atol=1e-12)
    bent_ik = ik + rng.normal(scale=1e-3, size=ik.shape)  # not a pure roll: the best one, still
    assert snap.roll_angle(fk, bent_ik, goal) == pytest.approx(3.0, abs=1e-2)
    straight = np.outer(np.arange(5.0), [0.0, 0.6, 0.8])
    assert snap.roll_axis(straight, straight[-1]) is None  # a straight pose has no roll to measure
    rolled = straight + rng.normal(scale=1e-9, size=straight.shape)
    assert snap.roll_angle(straight, rolled, straight[-1]) == 0.0


@pytest.mark.parametrize("count", [5, 6, 7, 8, 9])
@pytest.mark.parametrize("limit", LIMITS)
def test_snap_ik_to_fk_of_s_shaped_chains_in_every_rotation_mode_moves_nothing(count, limit, solve_path):
    """Issues 23 and 25: S-shaped 5-9 bone chains with a pole, free, coned and hinged, 16 seeded poses each,
    every bone through every rotation mode: switching IK on after the snap moves no joint 1e-4 of the chain."""
    rig = s_chain_rig(count, limit)
    pose_mode(rig.ob)
    worst = snap_switch_s(rig, np.random.default_rng(200 + count), 16)
    print(f"\n{count} bones S, pole, {limit}: largest joint move {worst:.2e} chain lengths")
    assert worst <= IK_TO_FK


@pytest.mark.parametrize("amount", [0.05, 0.25, 1.0], ids=["nearly straight", "gentle", "folded"])
@pytest.mark.parametrize("limit", LIMITS)
def test_snap_ik_to_fk_of_nearly_straight_and_nearly_folded_s_shapes_moves_nothing(amount, limit, solve_path):
    """The neighbours of the S: bends so small the chain is nearly straight (its joints' centroid a hair off the
    line), and bends of up to a radian a joint, each half curling back toward the root-tip line."""
    rig = s_chain_rig(7, limit)
    pose_mode(rig.ob)
    worst = snap_switch_s(rig, np.random.default_rng(int(amount * 100)), 12, amount=amount)
    print(f"\n7 bones S x{amount}, pole, {limit}: largest joint move {worst:.2e} chain lengths")
    assert worst <= IK_TO_FK


@pytest.mark.parametrize(("count", "noise", "amount"),
                         [(5, 0.02, 0.6), (6, 0.02, 0.6), (8, 0.05, 0.6), (9, 0.02, 0.6), (7, 0.03, 1.2)],
                         ids=["5 x0.02", "6 x0.02", "8 x0.05", "9 x0.02", "7 x0.03 bends 1.2"])
@pytest.mark.parametrize("limit", ['FREE', 'CONE'])
def test_snap_ik_to_fk_of_s_shapes_whose_bends_nearly_cancel_moves_nothing(count, noise, amount, limit, solve_path):
    """Issue 23, the curl: S's nudged by only 0.02-0.05 rad a joint, and bends of up to 1.2 rad, so curling barely
    changes the tip's distance; the curl that made up the start's float32 rounding bent every joint by 1.2e-4 to
    1.7e-4 of the chain (the curl now fades below .start.FADE of mismatch)."""
    rig = s_chain_rig(count, limit)
    pose_mode(rig.ob)
    worst = snap_switch_s(rig, np.random.default_rng(300 + count), 16, amount=amount, noise=noise)
    print(f"\n{count} bones S x{amount} nudged {noise}, pole, {limit}: largest joint move {worst:.2e} chain lengths")
    assert worst <= IK_TO_FK


@pytest.mark.parametrize("rig_off", [False, True], ids=["chain off", "rig off"])
def test_measuring_the_roll_leaves_the_fk_pose_and_the_switches_as_they_were(rig_off):
    """The snap solves the chain once at full influence to measure its roll; the bones' channels, the chain's
    switch and influence and the rig's switch come back exactly, and the pole's key holds the turned pole."""
    rig = s_chain_rig(7, 'CONE')
    pose_mode(rig.ob)
    chain = rig.chains[0]
    chain.influence = 0.7
    if rig_off:
        rig.ob.fabrik.enabled = False
    else:
        chain.enabled = False
    pose_s(rig, np.random.default_rng(5), 0.6, 0.02, planar=False)
    before = {pb.name: (tuple(pb.rotation_quaternion), tuple(pb.rotation_euler), tuple(pb.rotation_axis_angle),
                        tuple(pb.scale)) for pb in rig.ob.pose.bones}
    fk = joints(rig.ob)
    assert bpy.ops.pose.fabrik_snap_ik_to_fk(keyframe=True) == {'FINISHED'}
    after = {pb.name: (tuple(pb.rotation_quaternion), tuple(pb.rotation_euler), tuple(pb.rotation_axis_angle),
                       tuple(pb.scale)) for pb in rig.ob.pose.bones}
    assert after == before
    assert (rig.ob.fabrik.enabled, chain.enabled, chain.influence) == (not rig_off, rig_off, pytest.approx(0.7))
    np.testing.assert_array_equal(joints(rig.ob), fk)
    bpy.context.scene.frame_set(bpy.context.scene.frame_current)  # the keys, evaluated again
    rig.ob.fabrik.enabled = chain.enabled = True
    chain.influence = 1.0
    assert largest_move(fk, joints(rig.ob)) / rig.length <= IK_TO_FK
