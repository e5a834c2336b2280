"""Everyday edits on Blender's own Rigify human metarig (issue 24): a shortened spine chain gives its dropped
bones their pose without IK at once and leaves the legs below them where they are without IK; REACHED on a
finger means within a thousandth of the finger chain's own length; a renamed hand bone keeps its chain
reaching. Every test ends on an empty file (see test_real_rig.py: the bpy 4.2 wheel crashes at exit otherwise)."""

import bpy
import numpy as np
import pytest
from mathutils import Matrix, Quaternion
from rigs import add_chain, empty, set_rotation, world_head, world_tail
from test_renames import WAYS, rename

from rigkit import realrig

SPINE = next(spec for spec in realrig.METARIG_CHAINS if spec.tip == "spine.003")
FINGER = next(spec for spec in realrig.METARIG_CHAINS if spec.tip.startswith("f_index"))
# A pose without IK that is not the rest pose: the spine bones and the left leg turned a little.
BASE = {"spine": (1.0, 0.04, -0.03, 0.02), "spine.001": (1.0, -0.03, 0.02, 0.05),
        "spine.002": (1.0, 0.05, 0.01, -0.02), "spine.003": (1.0, -0.02, -0.04, 0.03),
        "thigh.L": (1.0, 0.06, 0.0, -0.03), "shin.L": (1.0, -0.12, 0.0, 0.0)}


@pytest.fixture(autouse=True)
def empty_file_after():
    yield
    bpy.ops.wm.read_factory_settings(use_empty=True)


def rotation_path(pose_bone) -> str:
    mode = pose_bone.rotation_mode
    return {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}.get(mode, "rotation_euler")


def posed_metarig(keyed: bool):
    """The metarig with :data:`BASE` as its pose without IK (keyed at frames 1 and 20 when ``keyed``)."""
    ob = realrig.metarig()
    for name, q in BASE.items():
        pb = ob.pose.bones[name]
        set_rotation(pb, Quaternion(q).normalized())
        if keyed:
            for frame in (1, 20):
                pb.keyframe_insert(rotation_path(pb), frame=frame)
    bpy.context.scene.frame_set(1)
    return ob


def basis(ob, name: str) -> np.ndarray:
    return np.array(ob.pose.bones[name].matrix_basis)


def spine_rig(keyed: bool):
    """The metarig posed, its spine chain 4 bones long (``spine`` to ``spine.003``) reaching for a target
    the 2-bone chain ``spine.002``-``spine.003`` reaches too. Returns (rig, chain, target, pose without IK:
    each bone's local transform, and the left knee and ankle in world space)."""
    ob = posed_metarig(keyed)
    no_ik = {"basis": {pb.name: basis(ob, pb.name) for pb in ob.pose.bones},
             "knee": world_head(ob, "shin.L"), "ankle": world_tail(ob, "shin.L")}
    bones = ob.data.bones
    upper = bones["spine.002"].length + bones["spine.003"].length
    root = world_head(ob, "spine.002")
    aim = world_tail(ob, "spine.003") - root + np.array([0.4 * upper, 0.2 * upper, 0.0])
    target = empty("SpineTarget", tuple(root + 0.85 * upper * aim / np.linalg.norm(aim)))
    chain = add_chain(ob, SPINE.tip, 4, target)
    return ob, chain, target, no_ik


def leg_length(ob) -> float:
    return ob.data.bones["thigh.L"].length + ob.data.bones["shin.L"].length


def turned_degrees(ob, name: str, no_ik) -> float:
    """How far the bone's local rotation is from its pose without IK, in degrees."""
    now = ob.pose.bones[name].matrix_basis.to_quaternion()
    before = Matrix(no_ik["basis"][name].tolist()).to_quaternion()
    return float(np.degrees(now.rotation_difference(before).angle))


def assert_spine_released(ob, chain, target, no_ik, length):
    """The bones the spine chain dropped are in their pose without IK, the leg below them is where it is
    without IK, and the shorter chain still reaches."""
    dropped = realrig.chain_bone_names(ob, SPINE.tip, 4)[:4 - length]
    for name in dropped:
        np.testing.assert_allclose(basis(ob, name), no_ik["basis"][name], atol=1e-6, err_msg=name)
    leg = leg_length(ob)
    for point, bone, end in (("knee", "shin.L", world_head), ("ankle", "shin.L", world_tail)):
        off = np.linalg.norm(end(ob, bone) - no_ik[point])
        assert off <= 1e-5 * leg, (point, off / leg)
    assert chain.status == 'REACHED', chain.message
    assert np.linalg.norm(world_tail(ob, SPINE.tip) - np.array(target.location)) < 1e-3


@pytest.mark.parametrize("keyed", [False, True], ids=["stored", "keyed"])
@pytest.mark.parametrize("how", ["frame change", "update"])
@pytest.mark.parametrize("length", [3, 2])
def test_shortening_the_metarig_spine_releases_the_dropped_bones_and_leaves_the_legs(length, how, keyed,
                                                                                      solve_path):
    ob, chain, target, no_ik = spine_rig(keyed)
    scene = bpy.context.scene
    scene.frame_set(1)
    assert chain.status == 'REACHED', chain.message
    # The full chain does turn ``spine`` and move the knee: what shortening must undo.
    assert turned_degrees(ob, "spine", no_ik) > 0.5
    assert np.linalg.norm(world_head(ob, "shin.L") - no_ik["knee"]) > 1e-3 * leg_length(ob)
    chain.chain_length = length
    if how == "frame change":
        scene.frame_set(2)
    else:
        bpy.context.view_layer.update()
    assert_spine_released(ob, chain, target, no_ik, length)


@pytest.mark.parametrize("keyed", [False, True], ids=["stored", "keyed"])
def test_a_keyed_metarig_spine_length_releases_and_takes_back_the_spine_bone(keyed, solve_path):
    ob, chain, target, no_ik = spine_rig(keyed)
    scene = bpy.context.scene
    chain.keyframe_insert("chain_length", frame=1)
    chain.chain_length = 3
    chain.keyframe_insert("chain_length", frame=5)
    for frame, length in ((1, 4), (5, 3), (1, 4), (5, 3)):
        scene.frame_set(frame)
        assert chain.chain_length == length
        assert chain.status == 'REACHED', chain.message
        if length == 4:
            assert turned_degrees(ob, "spine", no_ik) > 0.5
        else:
            assert_spine_released(ob, chain, target, no_ik, length)


def finger_rig():
    """The metarig at rest with the left index finger's chain (every setting at its default)."""
    ob = realrig.metarig()
    bpy.context.view_layer.update()
    root, _, length = realrig.chain_points(ob, FINGER)
    chain = ob.fabrik.chains.add()
    chain.tip_bone, chain.chain_length = FINGER.tip, FINGER.length
    return ob, chain, root, length


def finger_direction(ob, root, turn) -> np.ndarray:
    """The finger's own direction at rest (root to tip), turned a little by ``turn`` (world axes)."""
    d = world_tail(ob, FINGER.tip) - root
    d = d / np.linalg.norm(d) + np.asarray(turn, dtype=float)
    return d / np.linalg.norm(d)


TURNS = ((0.0, 0.0, 0.0), (0.3, 0.0, 0.2), (-0.2, 0.4, -0.3))


@pytest.mark.parametrize("turn", TURNS)
@pytest.mark.parametrize("beyond", [0.01, 0.03])
def test_a_metarig_finger_target_just_out_of_reach_is_not_reached(beyond, turn, solve_path):
    ob, chain, root, length = finger_rig()
    chain.target = empty("FingerTarget", tuple(root + (1.0 + beyond) * length * finger_direction(ob, root, turn)))
    bpy.context.scene.frame_set(1)
    assert chain.status == 'UNREACHABLE', (chain.status, chain.message, chain.last_error / length)
    assert chain.last_error == pytest.approx(beyond * length, rel=0.05)


@pytest.mark.parametrize("turn", TURNS)
@pytest.mark.parametrize("fraction", [0.7, 0.99])
def test_a_reachable_metarig_finger_target_is_reached_within_a_thousandth_of_the_finger(fraction, turn, solve_path):
    ob, chain, root, length = finger_rig()
    chain.target = target = empty("FingerTarget",
                                  tuple(root + fraction * length * finger_direction(ob, root, turn)))
    bpy.context.scene.frame_set(1)
    assert chain.status == 'REACHED', (chain.status, chain.message)
    miss = np.linalg.norm(world_tail(ob, FINGER.tip) - np.array(target.location))
    assert miss <= 1e-3 * length, miss / length


@pytest.mark.parametrize("way", WAYS)
def test_a_renamed_metarig_hand_bone_keeps_its_chain_reaching(way, solve_path):
    """A chain from the upper arm to the hand, its tip renamed: the chain follows and keeps reaching."""
    ob = realrig.metarig()
    bpy.context.view_layer.update()
    root = world_head(ob, "upper_arm.L")
    length = sum(ob.data.bones[name].length for name in ("upper_arm.L", "forearm.L", "hand.L"))
    aim = world_tail(ob, "hand.L") - root + np.array([0.0, -0.3 * length, -0.3 * length])
    target = empty("HandTarget", tuple(root + 0.8 * length * aim / np.linalg.norm(aim)))
    chain = add_chain(ob, "hand.L", 3, target)
    scene = bpy.context.scene
    scene.frame_set(1)
    assert chain.status == 'REACHED', chain.message
    rename(ob, "hand.L", "palm.L", way)
    for frame in (2, 1):
        scene.frame_set(frame)
        assert chain.tip_bone == "palm.L"
        assert chain.status == 'REACHED', chain.message
        assert np.linalg.norm(world_tail(ob, "palm.L") - np.array(target.location)) < 1e-3 * length


FRAMES = list(range(1, 5))


def all_chains_pose(spine_lengths):
    """The metarig with all of :data:`realrig.METARIG_CHAINS` (legs, arms, finger on their keyed paths), the
    spine chain's length set to each of ``spine_lengths`` in turn, one frame each; the world heads and tails
    of every bone at the last frame."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    ob = realrig.metarig()
    chains = realrig.add_fabrik_chains(ob, realrig.METARIG_CHAINS, FRAMES)
    spine = chains[SPINE.tip][0]
    scene = bpy.context.scene
    for frame, length in zip(FRAMES, spine_lengths):
        spine.chain_length = length
        scene.frame_set(frame)
    for tip, (chain, _) in chains.items():
        assert chain.status == 'REACHED', (tip, chain.message)
    np.testing.assert_allclose(basis(ob, "spine"), np.eye(4), atol=1e-6)  # the metarig rests: no IK is rest
    names = [pb.name for pb in ob.pose.bones]
    return ob, {name: (world_head(ob, name), world_tail(ob, name)) for name in names}


@pytest.mark.parametrize("lengths", [(4, 4, 3, 3), (4, 4, 4, 3), (4, 3, 4, 2)])
def test_the_full_metarig_after_shortening_its_spine_is_posed_as_if_it_had_always_been_short(lengths, solve_path):
    """With every chain of the metarig live (its legs hang from ``spine``), a spine chain shortened at
    some frame poses every bone, knees included, as a spine chain that short from the start."""
    ob, after = all_chains_pose(lengths)
    leg = leg_length(ob)
    _, always = all_chains_pose([lengths[-1]] * len(lengths))
    for name, (head, tail) in always.items():
        for got, expected in ((after[name][0], head), (after[name][1], tail)):
            assert np.linalg.norm(got - expected) <= 1e-5 * leg, (name, np.linalg.norm(got - expected) / leg)
