"""Real-sized rigs: the Rigify human metarig's chains, one arm on armatures holding many other bones, and how
often the add-on makes Blender re-evaluate an armature (once a frame at most, never when nothing changed)."""

import bpy
import numpy as np
import pytest
from rigs import add_chain, empty, straightish_chain, world_tail

from rigkit import realrig

FRAMES = list(range(1, 7))


@pytest.fixture(autouse=True)
def empty_file_after():
    """An empty file after each test: the bpy 4.2 wheel crashes when its process exits (code 139, after
    every test passed) if the add-on is unregistered while a metarig with chains is still loaded."""
    yield
    bpy.ops.wm.read_factory_settings(use_empty=True)


class Evaluations:
    """Counts how often Blender evaluates an armature's pose: a scripted driver on an empty reads a bone of
    it, and the depsgraph runs the driver again whenever that pose is evaluated again. A second counter
    on an armature without chains gives what Blender evaluates anyway (scripted drivers also run on
    every frame change)."""

    def __init__(self, ob, bone: str) -> None:
        self.counts = {"rig": 0, "idle": 0}
        idle = straightish_chain(f"Idle{ob.name}", 2)
        for key, (watched, watched_bone) in {"rig": (ob, bone), "idle": (idle, "b1")}.items():
            name = f"count_{key}_{ob.name}".replace(".", "_")
            bpy.app.driver_namespace[name] = lambda value, key=key: self._tick(key, value)
            watcher = empty(f"Watch{key}{ob.name}")
            driver = watcher.driver_add("location", 0).driver
            driver.type = 'SCRIPTED'
            variable = driver.variables.new()
            variable.type = 'TRANSFORMS'
            variable.targets[0].id = watched
            variable.targets[0].bone_target = watched_bone
            variable.targets[0].transform_type = 'ROT_W'
            variable.targets[0].transform_space = 'LOCAL_SPACE'
            driver.expression = f"{name}(var)"
        bpy.context.evaluated_depsgraph_get()

    def _tick(self, key: str, value: float) -> float:
        self.counts[key] += 1
        return value

    def extra(self, action) -> int:
        """Evaluations of the rig's pose during ``action()`` beyond those Blender makes anyway."""
        self.counts.update(rig=0, idle=0)
        action()
        bpy.context.evaluated_depsgraph_get()
        return self.counts["rig"] - self.counts["idle"]


def frame(number: int):
    return lambda: bpy.context.scene.frame_set(number)


def arm_rig(others: int, still: bool = False):
    """One 2-bone arm with a pole on an armature holding ``others`` other bones, its target keyed along a
    path within reach (or held still)."""
    ob = realrig.arm_with_others("Rig", others)
    spec = realrig.ARM_CHAINS[0]
    (_, target, pole), = realrig.add_targets(ob, [spec], FRAMES)
    if still:
        target.animation_data_clear()
    chain = add_chain(ob, spec.tip, spec.length, target, pole, solver='TWO_BONE')
    return ob, target, chain


def target_position(target):
    return np.array(target.evaluated_get(bpy.context.evaluated_depsgraph_get()).matrix_world.translation)


@pytest.mark.usefixtures("solve_path")
@pytest.mark.parametrize("others", [0, 150])
def test_a_held_pose_under_a_still_target_costs_no_re_evaluation(others):
    ob, target, chain = arm_rig(others, still=True)
    bpy.context.scene.frame_set(1)
    evaluations = Evaluations(ob, "arm1")
    for number in (2, 3, 3, 1):
        assert evaluations.extra(frame(number)) == 0
        assert np.linalg.norm(world_tail(ob, "arm1") - target_position(target)) < 1e-3
        assert chain.status == 'REACHED'


@pytest.mark.usefixtures("solve_path")
def test_a_moving_target_re_evaluates_the_armature_once_a_frame_and_showing_a_frame_again_costs_nothing():
    ob, target, _ = arm_rig(20)
    bpy.context.scene.frame_set(1)
    evaluations = Evaluations(ob, "arm1")
    poses = {}
    for number in FRAMES[1:]:
        assert evaluations.extra(frame(number)) == 1
        assert np.linalg.norm(world_tail(ob, "arm1") - target_position(target)) < 1e-3
        poses[number] = [tuple(pb.rotation_quaternion) for pb in ob.pose.bones[:2]]
    last = FRAMES[-1]
    assert evaluations.extra(frame(last)) == 0  # the frame shown again: same pose, nothing written
    assert evaluations.extra(frame(3)) == 1  # scrubbing back: the pose of frame 3 again, exactly
    assert [tuple(pb.rotation_quaternion) for pb in ob.pose.bones[:2]] == poses[3]


def test_moving_a_still_target_by_hand_re_evaluates_the_armature_once():
    ob, target, _ = arm_rig(20, still=True)
    bpy.context.scene.frame_set(1)
    evaluations = Evaluations(ob, "arm1")
    target.location.x += 0.05
    assert evaluations.extra(bpy.context.view_layer.update) == 1
    assert np.linalg.norm(world_tail(ob, "arm1") - target_position(target)) < 1e-3
    assert evaluations.extra(bpy.context.view_layer.update) == 0


@pytest.mark.usefixtures("solve_path")
@pytest.mark.parametrize("change", ["frame", "update", "untagged"])
def test_a_chain_bone_posed_by_a_script_under_a_still_target_gets_the_ik_pose_back(change):
    """The solve repeats its last rotations, but the channels no longer hold them: written again (the write
    reads the channels back where the rotation equals its last write). ``untagged``: set with foreach_set,
    which sends Blender no update, then a frame change."""
    ob, target, chain = arm_rig(20, still=True)
    bpy.context.scene.frame_set(1)
    solved = [tuple(ob.pose.bones[name].rotation_quaternion) for name in ("arm0", "arm1")]
    evaluations = Evaluations(ob, "arm1")
    for posed in ("arm0", "arm1"):
        if change == "untagged":
            rows = np.empty(4 * len(ob.pose.bones), dtype=np.float32)
            ob.pose.bones.foreach_get("rotation_quaternion", rows)
            row = ob.pose.bones.find(posed)
            rows[4 * row:4 * row + 4] = (0.9, 0.3, 0.1, 0.3)
            ob.pose.bones.foreach_set("rotation_quaternion", rows)
        else:
            ob.pose.bones[posed].rotation_quaternion = (0.9, 0.3, 0.1, 0.3)
        action = bpy.context.view_layer.update if change == "update" else frame(2)
        # A frame change evaluates the script's pose and the solve's write together; an update evaluates the
        # script's edit, then the write.
        assert evaluations.extra(action) == (2 if change == "update" else 1)
        assert [tuple(ob.pose.bones[name].rotation_quaternion) for name in ("arm0", "arm1")] == solved
        assert np.linalg.norm(world_tail(ob, "arm1") - target_position(target)) < 1e-3
        assert chain.status == 'REACHED'
        assert evaluations.extra(frame(3)) == 0  # and then nothing again


@pytest.mark.usefixtures("solve_path")
def test_the_arms_pose_does_not_depend_on_the_other_bones_of_its_armature():
    poses = []
    for others in (0, 150, 1000):
        bpy.ops.wm.read_factory_settings(use_empty=True)
        ob, target, chain = arm_rig(others)
        frames = []
        for number in FRAMES:
            bpy.context.scene.frame_set(number)
            assert chain.status == 'REACHED'
            frames.append([tuple(ob.pose.bones[name].rotation_quaternion) for name in ("arm0", "arm1")])
        poses.append(frames)
    assert poses[1] == poses[0]
    assert poses[2] == poses[0]


def _stored_groups(pose_bone) -> list[str]:
    """The add-on's property groups stored on a bone (reading them through their properties would create them)."""
    system = getattr(pose_bone, "bl_system_properties_get", None)
    stored = system() if system is not None else pose_bone
    return [] if stored is None else [name for name in ("fabrik_base", "fabrik_limit") if name in stored.keys()]


@pytest.mark.usefixtures("solve_path")
def test_solving_stores_properties_on_the_chain_bones_only():
    """Blender copies every bone's stored properties at each re-evaluation of the pose: properties on all
    bones of a big armature would make every frame's write cost more."""
    ob, _, _ = arm_rig(150)
    for number in FRAMES[:3]:
        bpy.context.scene.frame_set(number)
    holding = {pb.name for pb in ob.pose.bones if _stored_groups(pb)}
    assert holding == {"arm0", "arm1"}


@pytest.mark.usefixtures("solve_path")
@pytest.mark.parametrize("edit", ["delete", "add"])
def test_bones_deleted_or_added_by_a_script_before_a_frame_change_are_seen(edit):
    ob, target, chain = arm_rig(30)
    bpy.context.scene.frame_set(1)
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode='EDIT')
    bones = ob.data.edit_bones
    if edit == "delete":
        for name in ("root", "o0", "o1"):  # bones before and around others in pose.bones order
            bones.remove(bones[name])
    else:
        for k in range(12):
            bone = bones.new(f"new{k}")
            bone.head, bone.tail = (2.0, 0.1 * k, 0.0), (2.0, 0.1 * k, 0.2)
    bpy.ops.object.mode_set(mode='OBJECT')
    for number in FRAMES[1:]:
        bpy.context.scene.frame_set(number)
        assert chain.status == 'REACHED', chain.message
        assert np.linalg.norm(world_tail(ob, "arm1") - target_position(target)) < 1e-3


def metarig_with_chains(name="metarig", location=(0.0, 0.0, 0.0)):
    ob = realrig.metarig(name, location)
    return ob, realrig.add_fabrik_chains(ob, realrig.METARIG_CHAINS, FRAMES, tag=name)


@pytest.mark.usefixtures("solve_path")
def test_the_rigify_metarig_limbs_spine_and_finger_reach_their_targets_with_one_re_evaluation_a_frame():
    ob, chains = metarig_with_chains()
    bpy.context.scene.frame_set(1)
    evaluations = Evaluations(ob, "hand.L")
    for number in FRAMES[1:]:
        assert evaluations.extra(frame(number)) == 1
        for tip, (chain, target) in chains.items():
            assert chain.status == 'REACHED', (tip, chain.message)
            assert np.linalg.norm(world_tail(ob, tip) - target_position(target)) < 2e-3, tip


def test_several_metarigs_re_evaluate_once_each_a_frame():
    rigs = [metarig_with_chains(f"metarig{k}", (1.5 * k, 0.0, 0.0)) for k in range(3)]
    bpy.context.scene.frame_set(1)
    counters = [Evaluations(ob, "hand.R") for ob, _ in rigs]
    for number in FRAMES[1:3]:
        for counter in counters:
            counter.counts.update(rig=0, idle=0)
        bpy.context.scene.frame_set(number)
        bpy.context.evaluated_depsgraph_get()
        assert [counter.counts["rig"] - counter.counts["idle"] for counter in counters] == [1, 1, 1]
        for _, chains in rigs:
            assert all(chain.status == 'REACHED' for chain, _ in chains.values())
