"""FK (or mocap) animation to IK controls over a range (``pose.fabrik_bake_controls``): the controls play the FK
back, poles keep their side, bad input changes nothing; and the sparse bake (``key_frames='CONTROLS'``)."""

from __future__ import annotations

import math
import subprocess
import sys

import bpy
import numpy as np
import pytest
from mathutils import Quaternion
from rigs import add_chain, armature, empty, set_rotation
from test_ikfk import (
    MODES,
    arm_rig,
    leg_rig,
    pose_mode,
    pose_s,
    random_fk,
    rotation_path,
    s_chain_rig,
    set_modes,
    tentacle_rig,
    tree_rig,
)

from fabrik_addon import compat, controls_bake
from rigkit.blender import walk_rig

PLAYBACK = 1e-4  # largest joint distance between FK and the IK playback, in chain lengths
WALK_FRAMES = 120
ITERATIONS = 100


# --- helpers ----------------------------------------------------------------------------------------------------

def chain_joints(ob, chain) -> np.ndarray:
    """World heads of the chain's bones and its tip's tail, as Blender evaluates them now."""
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    world = ev.matrix_world
    names = chain_names(ob, chain)
    heads = [tuple(world @ ev.pose.bones[n].head) for n in names]
    return np.array(heads + [tuple(world @ ev.pose.bones[names[-1]].tail)])


def chain_names(ob, chain) -> list[str]:
    names = [chain.tip_bone]
    while len(names) < chain.chain_length:
        names.insert(0, ob.data.bones[names[0]].parent.name)
    return names


def record(ob, chains, frames) -> dict[str, np.ndarray]:
    """Each chain's joints at every frame: (frames, N + 1, 3)."""
    out: dict[str, list] = {chain.name: [] for chain in chains}
    for frame in frames:
        bpy.context.scene.frame_set(frame)
        for chain in chains:
            out[chain.name].append(chain_joints(ob, chain))
    return {name: np.array(rows) for name, rows in out.items()}


def worst(fk: dict, played: dict) -> tuple[float, float]:
    """Largest joint distance (scene units, and in lengths of its chain)."""
    distance = relative = 0.0
    for name, joints in fk.items():
        length = float(np.linalg.norm(np.diff(joints[0], axis=0), axis=1).sum())
        d = float(np.linalg.norm(played[name] - joints, axis=-1).max())
        distance, relative = max(distance, d), max(relative, d / length)
    return distance, relative


def keys_of(thing) -> dict[tuple[str, int], list[tuple[float, float]]]:
    return {(fc.data_path, fc.array_index): [tuple(kp.co) for kp in fc.keyframe_points]
            for fc in compat.animated_fcurves(thing)}


def walk_with_chains(frames=WALK_FRAMES):
    """The procedural walk, its FK recorded before any chain exists, then four chains without controls:
    a Two-Bone leg, a 3-bone leg with a hinged knee, a 2-bone arm, a 3-bone arm with coned joints."""
    ob = walk_rig(frames=frames)
    chains_spec = [("shin.L", 2, {'solver': 'TWO_BONE'}), ("foot.R", 3, {'iterations': 30}),
                   ("forearm.L", 2, {}), ("hand.R", 3, {'iterations': 30})]
    names = {tip: length for tip, length, _ in chains_spec}
    fk_chains = [type("Spec", (), {"name": tip, "tip_bone": tip, "chain_length": n})() for tip, n in names.items()]
    fk = record(ob, fk_chains, range(1, frames + 1))
    for tip, length, settings in chains_spec:
        add_chain(ob, tip, length, None, **settings)
    knee = ob.pose.bones["shin.R"].fabrik_limit
    knee.mode, knee.hinge_min, knee.hinge_max = 'HINGE', -1.5, 0.0
    for name in ("forearm.R", "hand.R"):
        limit = ob.pose.bones[name].fabrik_limit
        limit.mode = 'CONE'
        limit.cone_left = limit.cone_right = limit.cone_up = limit.cone_down = 1.2
    pose_mode(ob)
    return ob, fk


def key_random_fk(rig, rng, frames) -> None:
    """Random FK poses keyed at ``frames`` (Blender interpolates between them)."""
    for frame in frames:
        random_fk(rig, rng, frame=frame)


# --- the walk: every kind of limb, straight and bent --------------------------------------------------------------

def test_a_walk_converts_to_controls_that_play_it_back(solve_path):
    ob, fk = walk_with_chains()
    bone_keys = keys_of(ob)
    assert bpy.ops.pose.fabrik_bake_controls(frame_start=1, frame_end=WALK_FRAMES, all_chains=True) == {'FINISHED'}
    assert keys_of(ob) == bone_keys, "the bones' own keys changed"
    chains = list(ob.fabrik.chains)
    assert all(c.target is not None and c.pole is not None and c.enabled and c.influence == 1.0 for c in chains)
    played = record(ob, chains, range(1, WALK_FRAMES + 1))
    distance, relative = worst(fk, played)
    print(f"\nwalk, {WALK_FRAMES} frames, 4 chains ({solve_path}): largest joint distance {distance:.2e} "
          f"({relative:.2e} chain lengths)")
    assert relative <= PLAYBACK
    for chain in chains:  # one key per frame on every location channel of every control
        for thing in (chain.target, chain.pole):
            frames = [co[0] for co in keys_of(thing)[("location", 0)]]
            assert frames == [float(f) for f in range(1, WALK_FRAMES + 1)]


def test_the_reported_distance_is_the_measured_one():
    ob, fk = walk_with_chains(frames=40)
    result = controls_bake.bake_controls(bpy.context, ob, [0, 1, 2, 3], controls_bake.ControlsOptions(1, 40))
    distance, relative = worst(fk, record(ob, list(ob.fabrik.chains), range(1, 41)))
    # abs: the bake's FK joints and this test's (recorded before the chains existed) differ by up to 2.1e-6 on
    # foot.R (float32); the largest distance lay on forearm.L (4.4e-6) until the curl faded (start.FADE: 1.3e-6).
    assert result.max_error == pytest.approx(distance, abs=3e-6)
    assert result.max_relative == pytest.approx(relative, abs=1e-5)
    assert result.frames == 40 and result.keys == 8 * 3 * 40
    assert sorted(result.created) == sorted(f"{c.name}_{slot}" for c in ob.fabrik.chains for slot in ("target", "pole"))


def test_poles_keep_their_side_through_straight_frames():
    """The knee goes exactly straight for 20 frames of every 40 and bends again: the pole stays in front,
    and moves no faster than the limb (frame to frame)."""
    ob, fk = walk_with_chains(frames=WALK_FRAMES)
    bpy.ops.pose.fabrik_bake_controls(frame_start=1, frame_end=WALK_FRAMES, all_chains=True)
    for chain in (ob.fabrik.chains["shin.L"], ob.fabrik.chains["forearm.L"]):  # the 2-bone limbs go straight
        joints = fk[chain.name]
        straight = [k for k, j in enumerate(joints)
                    if np.linalg.norm(np.cross(j[1] - j[0], j[-1] - j[0])) < 1e-6 * np.linalg.norm(j[-1] - j[0])]
        assert len(straight) >= 20, f"{chain.name} never goes straight: the test tests nothing"
        poles = []
        for frame in range(1, WALK_FRAMES + 1):
            bpy.context.scene.frame_set(frame)
            poles.append(np.array(chain.pole.evaluated_get(bpy.context.evaluated_depsgraph_get()).matrix_world
                                  .translation))
        poles = np.array(poles)
        sides = poles - 0.5 * (joints[:, 0] + joints[:, -1])
        sides /= np.linalg.norm(sides, axis=1)[:, None]
        turns = np.degrees(np.arccos(np.clip((sides[1:] * sides[:-1]).sum(axis=1), -1.0, 1.0)))
        pole_steps = np.linalg.norm(np.diff(poles, axis=0), axis=1)
        limb_steps = np.linalg.norm(np.diff(joints, axis=0), axis=-1).max(axis=1)
        print(f"\n{chain.name}: {len(straight)} straight frames; pole turns at most {turns.max():.2f} deg a frame, "
              f"moves at most {(pole_steps / limb_steps).max():.2f}x the limb's fastest joint")
        assert turns.max() < 15.0, "the pole jumped sides"
        assert (pole_steps <= 2.0 * limb_steps + 1e-6).all(), "the pole moves faster than the limb"


def test_steady_sides_blend_the_neighbouring_bends():
    front, aside = np.array([0.0, 1.0, 0.0]), np.array([0.6, 0.8, 0.0])
    straight = [[0, 0, 0], [0, 0, 1], [0, 0, 2.0]]
    frames = np.array([[[0, 0, 0], [0, 0.2, 1], [0, 0, 2.0]], straight, straight, straight,
                       [[0, 0, 0], [0.12, 0.16, 1], [0, 0, 2.0]]])
    fallback = np.tile([-1.0, 0.0, 0.0], (5, 1))
    sides = controls_bake.steady_sides(frames, fallback)
    np.testing.assert_allclose(sides[0], front, atol=1e-12)  # bent frames: their own bend
    np.testing.assert_allclose(sides[4], aside, atol=1e-12)
    assert (sides[1:4] @ front > 0.75).all() and (sides[1:4] @ aside > 0.75).all()  # between the two
    assert sides[1] @ front > sides[3] @ front  # nearer the first bend, more like it
    alone = controls_bake.steady_sides(np.array([straight, straight]), fallback[:2])
    np.testing.assert_allclose(alone, fallback[:2])  # nothing bends: the fallback
    flip = np.array([frames[0], straight, [[0, 0, 0], [0, -0.2, 1], [0, 0, 2.0]]])
    sides = controls_bake.steady_sides(flip, fallback[:3])
    assert abs(sides[1] @ front) > 0.99, "opposite neighbours: one of them, not a blend through nothing"


# --- every kind of chain -------------------------------------------------------------------------------------------

def soft_arm():
    rig = arm_rig()
    rig.chains[0].softness = 0.3
    return rig


def stretchy_arm():
    rig = arm_rig()
    rig.chains[0].use_stretch = True
    return rig


def hinged_leg():
    return leg_rig(pole=True)


def coned_tentacle():
    rig = tentacle_rig(pole=True)
    rig.chains[0].iterations = ITERATIONS
    return rig


KINDS = {"two-bone arm": arm_rig, "hinged leg": hinged_leg, "coned tentacle": coned_tentacle, "tree": tree_rig,
         "soft arm": soft_arm, "stretching arm": stretchy_arm}


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_kind_of_chain_plays_its_fk_back(kind, solve_path):
    rig = KINDS[kind]()
    pose_mode(rig.ob)
    rng = np.random.default_rng(25)
    key_random_fk(rig, rng, range(1, 32, 6))
    rig.ob.fabrik.enabled = False  # the FK alone, as keyed
    fk = record(rig.ob, rig.chains, range(1, 32))
    rig.ob.fabrik.enabled = True
    bone_keys = keys_of(rig.ob)
    assert bpy.ops.pose.fabrik_bake_controls(frame_start=1, frame_end=31, all_chains=True) == {'FINISHED'}
    assert keys_of(rig.ob) == bone_keys
    distance, relative = worst(fk, record(rig.ob, rig.chains, range(1, 32)))
    print(f"\n{kind} ({solve_path}): largest joint distance {relative:.2e} chain lengths")
    assert relative <= PLAYBACK


@pytest.mark.parametrize("count", [5, 6, 7, 9])
@pytest.mark.parametrize("limit", ['FREE', 'CONE'])
def test_an_s_shaped_tentacle_with_a_pole_plays_its_fk_back(count, limit, solve_path):
    """Issues 23 and 25: S-shaped poses (the joints' centroid near the root-tip line, joints bulging far either way)
    keyed every 5 frames in mixed rotation modes; the range bake plays them and the frames between back."""
    rig = s_chain_rig(count, limit)
    rig.chains[0].iterations = ITERATIONS
    set_modes(rig.ob, count)
    pose_mode(rig.ob)
    rng = np.random.default_rng(30 + count)
    for frame in range(1, 27, 5):
        pose_s(rig, rng, 0.6, 0.08, planar=False)
        for pb in rig.ob.pose.bones:
            pb.keyframe_insert(rotation_path(pb), frame=frame)
    rig.ob.fabrik.enabled = False  # the FK alone, as keyed
    fk = record(rig.ob, rig.chains, range(1, 27))
    rig.ob.fabrik.enabled = True
    assert bpy.ops.pose.fabrik_bake_controls(frame_start=1, frame_end=26, all_chains=True) == {'FINISHED'}
    distance, relative = worst(fk, record(rig.ob, rig.chains, range(1, 27)))
    print(f"\n{count}-bone S ({limit}, {solve_path}): largest joint distance {relative:.2e} chain lengths")
    assert relative <= PLAYBACK


def test_the_active_chain_brings_the_chains_sharing_its_bones():
    rig = tree_rig()
    pose_mode(rig.ob)
    rig.ob.fabrik.active_chain_index = 0
    key_random_fk(rig, np.random.default_rng(3), (1, 5))
    assert bpy.ops.pose.fabrik_bake_controls(frame_start=1, frame_end=5, create_controls=False) == {'FINISHED'}
    assert all(keys_of(chain.target) for chain in rig.chains)  # both arms: they share the spine


def test_the_active_chain_alone_when_it_shares_no_bones():
    ob, _fk = walk_with_chains(frames=5)
    ob.fabrik.active_chain_index = 2
    assert bpy.ops.pose.fabrik_bake_controls(frame_start=1, frame_end=5) == {'FINISHED'}
    assert sorted(o.name for o in bpy.data.objects if o.type == 'EMPTY') == ["forearm.L_pole", "forearm.L_target"]


# --- controls: bones, rotation, keys outside the range ---------------------------------------------------------------

def test_controls_that_are_bones_of_a_control_armature_are_keyed_as_pose_bones(solve_path):
    ob, fk = walk_with_chains(frames=30)
    controls = armature("Controls", [("root", (0, 0, 0), (0, 0.3, 0), None, False, 0.0),
                                     ("hand_ik", (0, 0, 0), (0, 0.1, 0), "root", False, 0.0),
                                     ("elbow_pole", (0, 0, 0), (0, 0.1, 0), "root", False, 0.0)],
                        location=(0.5, 0.2, 0.1))
    controls.pose.bones["root"].rotation_quaternion = Quaternion((0, 0, 1), 0.4)  # a parent to correct for
    controls.pose.bones["hand_ik"].rotation_mode = 'YXZ'
    chain = ob.fabrik.chains["forearm.L"]
    chain.target, chain.target_bone = controls, "hand_ik"
    chain.pole, chain.pole_bone = controls, "elbow_pole"
    chain.match_target_rotation = True
    bpy.context.view_layer.objects.active = ob
    ob.fabrik.active_chain_index = 2
    objects = len(bpy.data.objects)
    assert bpy.ops.pose.fabrik_bake_controls(frame_start=1, frame_end=30) == {'FINISHED'}
    assert len(bpy.data.objects) == objects, "only the active chain, whose controls exist"
    keys = keys_of(controls)
    assert len(keys[('pose.bones["hand_ik"].location', 0)]) == 30
    assert len(keys[('pose.bones["hand_ik"].rotation_euler', 2)]) == 30
    assert len(keys[('pose.bones["elbow_pole"].location', 1)]) == 30
    assert ('pose.bones["elbow_pole"].rotation_quaternion', 0) not in keys
    played = record(ob, [chain], range(1, 31))
    _, relative = worst({chain.name: fk[chain.name]}, played)
    assert relative <= PLAYBACK
    bpy.context.scene.frame_set(17)  # the target turns with the hand
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    hand = (ev.matrix_world @ ev.pose.bones["forearm.L"].matrix).to_quaternion()
    ctl = controls.evaluated_get(bpy.context.evaluated_depsgraph_get())
    target = (ctl.matrix_world @ ctl.pose.bones["hand_ik"].matrix).to_quaternion()
    assert hand.rotation_difference(target).angle < 1e-4


def test_keys_outside_the_range_are_kept():
    ob, fk = walk_with_chains(frames=40)
    target = empty("Foot", (0.3, 0.0, 0.0))
    for frame, x in ((-5, 0.3), (15, 0.9), (200, -0.7)):
        target.location.x = x
        target.keyframe_insert("location", frame=frame)
    chain = ob.fabrik.chains["shin.L"]
    chain.target = target
    ob.fabrik.active_chain_index = 0
    assert bpy.ops.pose.fabrik_bake_controls(frame_start=10, frame_end=30) == {'FINISHED'}
    xs = keys_of(target)[("location", 0)]
    assert xs[0] == (-5.0, pytest.approx(0.3)) and xs[-1] == (200.0, pytest.approx(-0.7))
    assert [f for f, _ in xs[1:-1]] == [float(f) for f in range(10, 31)]
    played = record(ob, [chain], range(10, 31))
    _, relative = worst({chain.name: fk[chain.name][9:30]}, played)
    assert relative <= PLAYBACK


def test_step_and_reduction_keep_fewer_keys_and_report_the_true_distance():
    ob, fk = walk_with_chains(frames=60)
    full = 8 * 3 * 60
    stepped = controls_bake.bake_controls(bpy.context, ob, [0, 1, 2, 3],
                                          controls_bake.ControlsOptions(1, 60, step=5))
    frames = [co[0] for co in keys_of(ob.fabrik.chains[0].target)[("location", 0)]]
    assert frames == [float(f) for f in list(range(1, 61, 5)) + [60]]
    distance, _ = worst(fk, record(ob, list(ob.fabrik.chains), range(1, 61)))
    assert stepped.max_error == pytest.approx(distance, abs=1e-6)
    tolerance = 1e-2  # about 1% of a limb: a limb swinging straight bends as soon as its target takes a shortcut
    reduced = controls_bake.bake_controls(bpy.context, ob, [0, 1, 2, 3],
                                          controls_bake.ControlsOptions(1, 60, reduce_tolerance=tolerance))
    distance, _ = worst(fk, record(ob, list(ob.fabrik.chains), range(1, 61)))
    print(f"\nreduced to {reduced.keys} of {full} keys: largest joint distance {distance:.2e} (tolerance {tolerance})")
    assert reduced.keys < 0.8 * full
    assert reduced.max_error == pytest.approx(distance, abs=1e-6)
    assert distance <= tolerance


def test_the_default_range_is_the_preview_range():
    ob, fk = walk_with_chains(frames=12)
    scene = bpy.context.scene
    scene.use_preview_range, scene.frame_preview_start, scene.frame_preview_end = True, 3, 7
    ob.fabrik.active_chain_index = 0
    assert bpy.ops.pose.fabrik_bake_controls() == {'FINISHED'}
    frames = [co[0] for co in keys_of(ob.fabrik.chains[0].target)[("location", 0)]]
    assert frames == [3.0, 4.0, 5.0, 6.0, 7.0]


def test_without_enable_chains_the_chains_stay_as_they_were():
    rig = small_rig()  # the rig is switched off
    chain = rig.chains[0]
    chain.influence = 0.3
    fk = record(rig.ob, rig.chains, range(1, 11))
    assert bpy.ops.pose.fabrik_bake_controls(frame_start=1, frame_end=10, enable_chains=False) == {'FINISHED'}
    assert not rig.ob.fabrik.enabled and chain.enabled and chain.influence == pytest.approx(0.3)
    assert len(keys_of(chain.target)[("location", 2)]) == 10
    rig.ob.fabrik.enabled, chain.influence = True, 1.0
    _, relative = worst(fk, record(rig.ob, rig.chains, range(1, 11)))
    assert relative <= PLAYBACK


# --- the Rigify metarig --------------------------------------------------------------------------------------------

METARIG_SCRIPT = """
import os, sys
import bpy  # first: it puts addon_utils on the path
import addon_utils
bpy.ops.wm.read_factory_settings(use_empty=True)
addon_utils.enable("rigify", default_set=True)
bpy.ops.object.armature_human_metarig_add()
bpy.ops.wm.save_as_mainfile(filepath=sys.argv[-1])
os._exit(0)  # Blender 4.2 crashes on exit with Rigify enabled
"""


@pytest.fixture(scope="module")
def metarig_file(tmp_path_factory):
    """Rigify's human metarig, made in a separate process: Rigify left enabled in this one breaks the
    load handlers of later tests (5.0) and crashes the process at exit (4.2)."""
    path = tmp_path_factory.mktemp("rigify") / "metarig.blend"
    out = subprocess.run([sys.executable, "-c", METARIG_SCRIPT, str(path)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and path.exists(), out.stderr[-2000:]
    return path


def test_a_rigify_metarig_animation_converts_to_controls(solve_path, metarig_file):
    with bpy.data.libraries.load(str(metarig_file), link=False) as (_src, dst):
        dst.objects = ["metarig"]
    ob = dst.objects[0]
    bpy.context.scene.collection.objects.link(ob)
    assert ob.type == 'ARMATURE' and "forearm.L" in ob.pose.bones
    pose_mode(ob)
    moved = ["spine", "thigh.L", "shin.L", "thigh.R", "shin.R", "upper_arm.L", "forearm.L", "upper_arm.R",
             "forearm.R"]
    for k, name in enumerate(moved):
        ob.pose.bones[name].rotation_mode = MODES[k % len(MODES)]
    frames = range(1, 41)
    for frame in frames:
        phase = 2.0 * math.pi * frame / 40.0
        for k, name in enumerate(moved):
            pb = ob.pose.bones[name]
            bend = max(0.0, math.sin(phase + k)) if name.startswith(("shin", "forearm")) else math.sin(phase + k)
            set_rotation(pb, Quaternion((1, 0, 0), 0.6 * bend) @ Quaternion((0, 0, 1), 0.1 * math.cos(phase)))
            pb.keyframe_insert(controls_bake.adapter.rotation_path(pb.rotation_mode), frame=frame)
    specs = [("shin.L", 2), ("shin.R", 2), ("forearm.L", 2), ("forearm.R", 2)]
    fk_chains = [type("Spec", (), {"name": t, "tip_bone": t, "chain_length": n})() for t, n in specs]
    fk = record(ob, fk_chains, frames)
    for tip, length in specs:
        add_chain(ob, tip, length, None)
    assert bpy.ops.pose.fabrik_bake_controls(frame_start=1, frame_end=40, all_chains=True) == {'FINISHED'}
    _, relative = worst(fk, record(ob, list(ob.fabrik.chains), frames))
    print(f"\nRigify metarig, 40 frames, 4 limbs ({solve_path}): largest joint distance {relative:.2e} chain lengths")
    assert relative <= PLAYBACK


# --- bad input: a message, and nothing changed ---------------------------------------------------------------------

def state() -> tuple:
    """Everything a failed conversion must leave as it was."""
    bpy.context.view_layer.update()
    objects = sorted(ob.name for ob in bpy.data.objects)
    keys = {ob.name: keys_of(ob) for ob in bpy.data.objects}
    matrices = {ob.name: [round(v, 9) for row in ob.matrix_basis for v in row] for ob in bpy.data.objects}
    chains = {(ob.name, c.name): (c.enabled, round(c.influence, 9), c.target, c.pole)
              for ob in bpy.data.objects if ob.type == 'ARMATURE' for c in ob.fabrik.chains}
    rigs = {ob.name: ob.fabrik.enabled for ob in bpy.data.objects if ob.type == 'ARMATURE'}
    return objects, keys, matrices, chains, rigs, len(bpy.data.actions)


def small_rig():
    """A keyed 2-bone arm with a target and a pole, switched off."""
    rig = arm_rig()
    pose_mode(rig.ob)
    key_random_fk(rig, np.random.default_rng(1), (1, 10))
    rig.ob.fabrik.enabled = False
    return rig


def driven(rig):
    fcurve = rig.chains[0].target.driver_add("location", 0)
    fcurve.driver.expression = "0.5"


def constrained(rig):
    rig.chains[0].pole.constraints.new('COPY_LOCATION').target = empty("Somewhere", (3, 3, 3))


def no_target(rig):
    rig.chains[0].target = None


def edit_mode(rig):
    bpy.ops.object.mode_set(mode='EDIT')


def broken_chain(rig):
    rig.chains[0].tip_bone = "nope"


def pole_is_target(rig):
    rig.chains[0].pole = rig.chains[0].target


@pytest.mark.parametrize(("spoil", "arguments", "message"), [
    (driven, {}, "is driven"),
    (constrained, {}, "has constraints"),
    (no_target, {"create_controls": False}, "has no target"),
    (edit_mode, {}, "Edit Mode"),
    (broken_chain, {}, "nope"),
    (None, {"frame_start": 10, "frame_end": 5}, "is empty"),
    (None, {"frame_start": 1, "frame_end": 1048575}, "beyond Blender's frames"),
    (pole_is_target, {}, "its pole is its target"),
], ids=["driven control", "constrained control", "missing target", "edit mode", "invalid chain", "empty range",
        "range beyond Blender's frames", "pole is the target"])
def test_bad_input_gets_a_message_and_changes_nothing(spoil, arguments, message):
    rig = small_rig()
    if spoil is not None:
        spoil(rig)
    before = state()
    with pytest.raises(RuntimeError, match=message):
        bpy.ops.pose.fabrik_bake_controls(**{"frame_start": 1, "frame_end": 10, **arguments})
    if rig.ob.mode == 'EDIT':
        bpy.ops.object.mode_set(mode='POSE')
    assert state() == before


def test_no_armature_and_no_chains_are_refused_by_poll():
    target = empty("Lonely")
    bpy.context.view_layer.objects.active = target
    with pytest.raises(RuntimeError, match="Select an armature"):
        bpy.ops.pose.fabrik_bake_controls()
    ob = armature("Bare", [("b0", (0, 0, 0), (0, 0, 1), None, False, 0.0)])
    bpy.context.view_layer.objects.active = ob
    with pytest.raises(RuntimeError, match="no FABRIK chains"):
        bpy.ops.pose.fabrik_bake_controls()


def test_a_linked_rig_without_an_override_is_refused(tmp_path):
    from test_overrides import save_rig_file

    path = tmp_path / "character.blend"
    save_rig_file(path)
    with bpy.data.libraries.load(str(path), link=True) as (_src, dst):
        dst.collections = ["Character"]
    bpy.context.scene.collection.children.link(dst.collections[0])
    rig = bpy.data.objects["Rig"]
    bpy.context.view_layer.objects.active = rig
    before = state()
    with pytest.raises(RuntimeError, match="linked from a library"):
        bpy.ops.pose.fabrik_bake_controls(frame_start=1, frame_end=5)
    assert state() == before


def test_a_control_that_moves_with_the_chain_is_refused():
    rig = small_rig()
    pole = rig.chains[0].pole
    pole.parent, pole.parent_type, pole.parent_bone = rig.ob, 'BONE', "b1"
    before = state()
    with pytest.raises(RuntimeError, match="Pole"):
        bpy.ops.pose.fabrik_bake_controls(frame_start=1, frame_end=10)
    assert state() == before


def test_a_placement_failing_midway_puts_everything_back():
    """The pole's parent shrinks to nothing at frame 6: nothing can place it there. The new target empty,
    the chain settings and the pole's channels are all as before."""
    rig = small_rig()
    rig.chains[0].target = None
    holder = empty("Holder", (0.0, 1.0, 0.0))
    for frame, size in ((1, 1.0), (5, 1.0), (6, 0.0)):
        holder.scale = (size, size, size)
        holder.keyframe_insert("scale", frame=frame)
    rig.chains[0].pole.parent = holder
    bpy.context.scene.frame_set(1)
    before = state()
    with pytest.raises(RuntimeError, match="Frame 6"):
        bpy.ops.pose.fabrik_bake_controls(frame_start=1, frame_end=10)
    bpy.context.scene.frame_set(1)
    assert state() == before
    assert "b1_target" not in bpy.data.objects


# --- the sparse bake ------------------------------------------------------------------------------------------------

def test_a_sparse_bake_keys_only_where_the_controls_are_keyed(solve_path):
    rig = arm_rig()
    target, chain = rig.chains[0].target, rig.chains[0]
    for frame, point in ((4, (0.5, 0.3, 1.6)), (12, (-0.4, 0.6, 1.4)), (21, (0.2, -0.5, 1.7))):
        target.location = point
        target.keyframe_insert("location", frame=frame)
    rig.ob.keyframe_insert(chain.path_from_id("influence"), frame=16)
    bpy.context.view_layer.objects.active = rig.ob
    live = record(rig.ob, [chain], range(1, 31))
    assert bpy.ops.pose.fabrik_bake(frame_start=1, frame_end=30, key_frames='CONTROLS') == {'FINISHED'}
    keyed = sorted({co[0] for key, points in keys_of(rig.ob).items() if "rotation" in key[0] for co in points})
    assert keyed == [1.0, 4.0, 12.0, 16.0, 21.0, 30.0]
    baked = record(rig.ob, [chain], range(1, 31))
    distance, _ = worst(live, baked)
    assert chain.bake_max_error == pytest.approx(distance, abs=1e-5), "the reported fidelity is the true one"
    assert distance > 1e-3, "between keys the baked pose is interpolated, not the live IK"
    for k in (3, 11, 20):  # frames 4, 12 and 21: keyed, so exact there
        np.testing.assert_allclose(baked[chain.name][k], live[chain.name][k], atol=1e-4)


# --- command line, panel and menu ------------------------------------------------------------------------------------

def test_the_command_converts_every_armature_with_chains(tmp_path, capsys):
    from fabrik_addon import cli

    ob, fk = walk_with_chains(frames=20)
    bpy.ops.object.mode_set(mode='OBJECT')
    ob.fabrik.enabled = False  # a mocap file whose rig is switched off: converting switches it on
    scene, out = tmp_path / "mocap.blend", tmp_path / "controls.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene))
    before = scene.read_bytes()
    assert cli.run([str(scene), "--frames", "1-20", "--to-controls", "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Walker: keyed the controls of 4 chains over 20 frames" in printed and "largest joint distance" in printed
    assert scene.read_bytes() == before
    bpy.ops.wm.open_mainfile(filepath=str(out))
    ob = bpy.data.objects["Walker"]
    assert ob.fabrik.enabled and all(c.enabled and c.target is not None for c in ob.fabrik.chains)
    _, relative = worst(fk, record(ob, list(ob.fabrik.chains), range(1, 21)))
    assert relative <= PLAYBACK


def test_the_command_says_when_there_is_nothing_to_convert(tmp_path, capsys):
    from fabrik_addon import cli

    armature("Bare", [("b0", (0, 0, 0), (0, 0, 1), None, False, 0.0)])
    scene = tmp_path / "bare.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene))
    code = cli.run([str(scene), "--frames", "1-5", "--to-controls", "--output", str(tmp_path / "out.blend")])
    assert code == cli.USAGE_ERROR
    assert "no armature with FABRIK chains" in capsys.readouterr().err
    assert not (tmp_path / "out.blend").exists()


def test_the_ik_fk_panel_and_the_pose_menu_offer_it():
    from types import SimpleNamespace

    from test_panels import Layout, draw_all

    from fabrik_addon import ui

    rig = arm_rig()
    assert "pose.fabrik_bake_controls" in draw_all(rig.ob)
    shown: list[str] = []
    ui.draw_pose_menu(SimpleNamespace(layout=Layout(shown)), bpy.context)
    assert shown == ["pose.fabrik_bake_controls"]
    assert ui.draw_pose_menu in bpy.types.VIEW3D_MT_pose.draw._draw_funcs


def test_a_sparse_bake_reads_keys_of_control_bones_and_ignores_keys_outside_the_range():
    rig = arm_rig()
    chain = rig.chains[0]
    controls = armature("Controls", [("elbow", (0, 0, 0), (0, 0.1, 0), None, False, 0.0)])
    chain.pole, chain.pole_bone = controls, "elbow"
    pb = controls.pose.bones["elbow"]
    for frame, point in ((-3, (0.0, 2.0, 1.0)), (7, (0.5, 2.0, 1.2)), (18, (-0.5, 2.0, 0.8)), (40, (0, 2, 1))):
        pb.location = point
        pb.keyframe_insert("location", frame=frame)
    bpy.context.view_layer.objects.active = rig.ob
    assert bpy.ops.pose.fabrik_bake(frame_start=2, frame_end=25, key_frames='CONTROLS') == {'FINISHED'}
    keyed = sorted({co[0] for key, points in keys_of(rig.ob).items() if "rotation" in key[0] for co in points})
    assert keyed == [2.0, 7.0, 18.0, 25.0]
