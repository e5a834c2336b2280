"""REACHED means the rendered tip is on the target.

Each case either solves (the evaluated tip is on the evaluated target) or marks the chain with a
reason; never REACHED while the picture says otherwise, never a traceback, never NaN.
"""

import bpy
import numpy as np
import pytest
from rigs import add_chain, armature, empty, forked, key_path, straightish_chain, torso, world_tail
from status_checks import HONEST, assert_honest, assert_neighbour_solves, neighbour, no_traceback, target_point  # noqa: F401

pytestmark = pytest.mark.usefixtures("solve_path", "no_traceback")

PATH = [(0.6, 0.5, 2.2), (-0.5, -0.6, 2.0), (0.3, 0.8, 1.4), (0.9, -0.2, 2.5)]
FRAMES = [1, 5, 9, 13]


def frames_honest(ob, chain, frames=(1, 3, 5, 8, 11, 13, 5), point_at=None):
    """Step through ``frames`` (one repeated): honest every time, and the same pose for the same frame."""
    seen = {}
    for frame in frames:
        bpy.context.scene.frame_set(frame)
        assert_honest(ob, chain, None if point_at is None else point_at(frame))
        tip = world_tail(ob, chain.tip_bone)
        if frame in seen:
            assert np.linalg.norm(tip - seen[frame]) < 1e-5, "replaying a frame drifts"
        seen[frame] = tip


def animated_target(name="T"):
    target = empty(name, PATH[0])
    key_path(target, PATH, FRAMES)
    return target


def keyed_point(target):
    """The target's keyed location at a frame, straight from its F-curves (not from the depsgraph)."""
    from fabrik_addon import compat

    curves = {fc.array_index: fc for fc in compat.animated_fcurves(target)}
    return lambda frame: np.array([curves[i].evaluate(frame) for i in range(3)])


# Dependencies: targets carried by the chain itself, by other chains, by other rigs.

def test_target_parented_to_a_bone_of_its_own_chain():
    ob = straightish_chain("Arm", 3)
    target = empty("T", (0.5, 0.5, 2.0))
    target.parent, target.parent_type, target.parent_bone = ob, 'BONE', "b1"
    chain = add_chain(ob, "b2", 3, target)
    other = neighbour()
    frames_honest(ob, chain)
    assert chain.status == 'INVALID' and "moved by this chain" in chain.message, chain.message
    assert_neighbour_solves(*other)


@pytest.mark.parametrize("kind", ['COPY_LOCATION', 'CHILD_OF'])
def test_target_constrained_to_a_bone_of_its_own_chain(kind):
    ob = straightish_chain("Arm", 3)
    target = empty("T", (0.5, 0.5, 2.0))
    constraint = target.constraints.new(kind)
    constraint.target, constraint.subtarget = ob, "b1"
    chain = add_chain(ob, "b2", 3, target)
    frames_honest(ob, chain)
    assert chain.status == 'INVALID' and "moved by this chain" in chain.message, chain.message


def test_target_carried_by_another_chain_of_the_same_rig():
    ob = forked()
    right = add_chain(ob, "r1", 2, animated_target("R"))
    carried = empty("Carried", (0.0, 0.0, 0.0))
    carried.parent, carried.parent_type, carried.parent_bone = ob, 'BONE', "r1"
    left = add_chain(ob, "l1", 2, carried)
    frames_honest(ob, left)
    frames_honest(ob, right)


def test_target_bone_moved_by_another_chain_of_the_same_rig():
    ob = forked()
    right = add_chain(ob, "r1", 2, animated_target("R"))
    left = add_chain(ob, "l1", 2, ob, target_bone="r1")
    frames_honest(ob, left)
    frames_honest(ob, right)


def test_chains_that_follow_each_other_in_a_cycle():
    ob = forked()
    left = add_chain(ob, "l1", 2, ob, target_bone="r1")
    right = add_chain(ob, "r1", 2, ob, target_bone="l1")
    other = neighbour()
    frames_honest(ob, left)
    frames_honest(ob, right)
    assert_neighbour_solves(*other)


def test_target_carried_by_a_chain_of_another_rig():
    first = straightish_chain("First", 3)
    lead = add_chain(first, "b2", 3, animated_target("Lead"))
    carried = empty("Carried", (0.0, 0.0, 0.0))
    carried.parent, carried.parent_type, carried.parent_bone = first, 'BONE', "b2"
    second = straightish_chain("Second", 3, location=(1.5, 0.0, 0.0))
    follow = add_chain(second, "b2", 3, carried)
    frames_honest(second, follow)
    frames_honest(first, lead)


def test_a_rig_carried_on_a_bone_that_fabrik_poses():
    first = straightish_chain("First", 3)
    lead = add_chain(first, "b2", 3, animated_target("Lead"))
    second = straightish_chain("Second", 2, length=0.5)
    second.parent, second.parent_type, second.parent_bone = first, 'BONE', "b2"
    still = empty("Still", (0.8, 0.6, 3.0))
    follow = add_chain(second, "b1", 2, still)
    frames_honest(second, follow)
    frames_honest(first, lead)


def test_rigs_that_follow_each_other_in_a_cycle():
    first = straightish_chain("First", 3)
    second = straightish_chain("Second", 3, location=(1.5, 0.0, 0.0))
    a = add_chain(first, "b2", 2, second, target_bone="b2")
    b = add_chain(second, "b2", 2, first, target_bone="b2")
    other = neighbour()
    frames_honest(first, a)
    frames_honest(second, b)
    assert_neighbour_solves(*other)


# Targets Blender does not evaluate in this view layer: read them like Blender's IK does, or refuse.

def _exclude(target):
    collection = bpy.data.collections.new("Away")
    bpy.context.scene.collection.children.link(collection)
    for c in target.users_collection:
        c.objects.unlink(target)
    collection.objects.link(target)
    bpy.context.view_layer.layer_collection.children["Away"].exclude = True


def _disable_collection(target):
    collection = bpy.data.collections.new("Off")
    bpy.context.scene.collection.children.link(collection)
    for c in target.users_collection:
        c.objects.unlink(target)
    collection.objects.link(target)
    collection.hide_viewport = True


def _hide_viewport(target):
    target.hide_viewport = True


def _hide_set(target):
    target.hide_set(True)


def _other_scene(target):
    scene = bpy.data.scenes.new("Elsewhere")
    for c in target.users_collection:
        c.objects.unlink(target)
    scene.collection.objects.link(target)


@pytest.mark.parametrize("hide", [_exclude, _disable_collection, _hide_viewport, _hide_set, _other_scene],
                         ids=["excluded", "collection disabled", "hide_viewport", "hidden", "other scene"])
def test_target_that_this_view_layer_does_not_show(hide):
    ob = straightish_chain("Arm", 3)
    target = animated_target()
    chain = add_chain(ob, "b2", 3, target)
    other = neighbour()
    hide(target)
    bpy.context.view_layer.update()
    frames_honest(ob, chain, point_at=keyed_point(target))
    if chain.status == 'INVALID':
        assert "not evaluated" in chain.message or "scene" in chain.message, chain.message
    assert_neighbour_solves(*other)


def _carried(name, how):
    """An empty with no animation of its own, moved by an animated carrier through a parent or a constraint."""
    carrier = animated_target(f"{name}Carrier")
    item = empty(name, (0.0, 0.0, 0.0))
    if how == "parent":
        item.parent = carrier
    else:
        constraint = item.constraints.new('COPY_LOCATION')
        constraint.target = carrier
    return item


@pytest.mark.parametrize("how", ["parent", "constraint"])
@pytest.mark.parametrize("role", ["Target", "Pole"])
def test_target_or_pole_moved_by_another_object_and_not_evaluated_here_is_refused(role, how):
    """A target or pole with no keys of its own that moves through a parent or a constraint is checked
    for the view layer like an animated one: excluded, its evaluated position is stale, so the chain
    says so (each object's own parent and constraints decide it, never the other one's)."""
    ob = straightish_chain("Arm", 3)
    carried = _carried(role, how)
    if role == "Target":
        chain = add_chain(ob, "b2", 3, carried)
    else:
        chain = add_chain(ob, "b2", 3, empty("StillTarget", (0.5, 0.5, 2.0)), pole=carried)
    other = neighbour()
    bpy.context.scene.frame_set(3)
    assert chain.status == 'REACHED', (chain.status, chain.message)  # in the view layer: followed
    _exclude(carried)
    bpy.context.view_layer.update()
    for frame in (1, 5, 8):
        bpy.context.scene.frame_set(frame)
        assert chain.status == 'INVALID', (frame, chain.status)
        assert f"{role} '{role}' is not evaluated" in chain.message, chain.message
    assert_neighbour_solves(*other)


# Chain bones whose evaluated pose is not just their rotation channels.

def _copy_rotation(ob):
    c = ob.pose.bones["b1"].constraints.new('COPY_ROTATION')
    c.target = empty("Spin", (0, 0, 0))
    c.target.rotation_euler = (0.4, 0.2, 0.1)


def _limit_rotation(ob):
    c = ob.pose.bones["b1"].constraints.new('LIMIT_ROTATION')
    c.use_limit_x = c.use_limit_y = c.use_limit_z = True
    c.owner_space = 'LOCAL'


def _damped_track(ob):
    c = ob.pose.bones["b2"].constraints.new('DAMPED_TRACK')
    c.target = empty("Look", (3.0, -2.0, 0.0))


def _ik_constraint(ob):
    c = ob.pose.bones["b2"].constraints.new('IK')
    c.target = empty("OtherIK", (-1.0, 1.0, 1.0))
    c.chain_count = 2


def _muted_constraint(ob):
    c = ob.pose.bones["b1"].constraints.new('COPY_ROTATION')
    c.target = empty("Spin", (0, 0, 0))
    c.target.rotation_euler = (0.4, 0.2, 0.1)
    c.mute = True


def _driver(ob):
    pb = ob.pose.bones["b1"]
    pb.rotation_mode = 'XYZ'
    fcurve = pb.driver_add("rotation_euler", 0)
    fcurve.driver.expression = "0.7"


def _inherit_scale_none(ob):
    ob.data.bones["b1"].inherit_scale = 'NONE'
    ob.pose.bones["b0"].scale = (1.5, 1.5, 1.5)


def _inherit_scale_none_legacy(ob):
    ob.data.bones["b1"].inherit_scale = 'NONE_LEGACY'
    ob.pose.bones["b0"].scale = (1.5, 0.7, 1.5)


def _negative_scale(ob):
    ob.pose.bones["b1"].scale = (-1.0, 1.0, 1.0)


def _negative_scale_all(ob):
    ob.pose.bones["b1"].scale = (-1.0, -1.0, -1.0)


def _huge_euler(ob):
    for pb in ob.pose.bones:
        pb.rotation_mode = 'XYZ'
        pb.rotation_euler = (1e6, -3e6, 2.5e7)


def _nonuniform_pose_scale(ob):
    ob.pose.bones["b1"].scale = (1.0, 2.0, 1.0)


BONE_CASES = [_copy_rotation, _limit_rotation, _damped_track, _ik_constraint, _muted_constraint, _driver,
              _inherit_scale_none, _inherit_scale_none_legacy, _negative_scale, _negative_scale_all, _huge_euler,
              _nonuniform_pose_scale]


@pytest.mark.parametrize("setup", BONE_CASES, ids=[f.__name__.strip("_") for f in BONE_CASES])
def test_chain_bones_whose_pose_is_more_than_their_channels(setup):
    ob = straightish_chain("Arm", 3)
    chain = add_chain(ob, "b2", 3, animated_target())
    other = neighbour()
    setup(ob)
    frames_honest(ob, chain)
    assert_neighbour_solves(*other)


def test_a_muted_constraint_does_not_stop_the_chain():
    ob = straightish_chain("Arm", 3)
    chain = add_chain(ob, "b2", 3, animated_target())
    _muted_constraint(ob)
    bpy.context.scene.frame_set(5)
    assert chain.status == 'REACHED', chain.message


TREE_CASES = ["copy rotation", "driver", "inherit scale none", "negative scale", "huge euler", "target parented"]


@pytest.mark.parametrize("case", TREE_CASES)
def test_tree_chains_with_such_bones(case):
    ob = torso()
    left = add_chain(ob, "fore.L", 4, empty("L", (1.0, 0.3, 1.2)))
    right = add_chain(ob, "fore.R", 4, empty("R", (-1.0, 0.3, 1.0)))
    key_path(left.target, [(1.0, 0.3, 1.2), (0.8, -0.4, 1.0), (1.1, 0.2, 0.7)], [1, 6, 12])
    pb = ob.pose.bones["upper.L"]
    if case == "copy rotation":
        c = pb.constraints.new('COPY_ROTATION')
        c.target = empty("Spin")
        c.target.rotation_euler = (0.4, 0.2, 0.1)
    elif case == "driver":
        pb.rotation_mode = 'XYZ'
        pb.driver_add("rotation_euler", 2).driver.expression = "0.5"
    elif case == "inherit scale none":
        ob.data.bones["upper.L"].inherit_scale = 'NONE'
        ob.pose.bones["spine1"].scale = (1.3, 1.3, 1.3)
    elif case == "negative scale":
        pb.scale = (-1.0, 1.0, 1.0)
    elif case == "huge euler":
        pb.rotation_mode = 'ZXY'
        pb.rotation_euler = (2e6, 1e6, -4e6)
    else:
        right.target.parent, right.target.parent_type, right.target.parent_bone = ob, 'BONE', "fore.R"
    for chain in (left, right):
        frames_honest(ob, chain, frames=(1, 4, 6, 12, 4))


# What the pose without IK is: Rest Position, keyed switches, NLA strips.

def twin(name, location):
    """The same three-bone rig without chains: what the pose without IK looks like."""
    return straightish_chain(name, 3, location=location)


def test_rest_position_is_not_posed():
    ob = straightish_chain("Arm", 3)
    chain = add_chain(ob, "b2", 3, animated_target())
    bpy.context.scene.frame_set(1)
    ob.data.pose_position = 'REST'
    bpy.context.view_layer.update()
    channels = [tuple(pb.rotation_quaternion) for pb in ob.pose.bones]
    for frame in (3, 6, 9):  # the target moves, but nothing is posed (nor reported reached)
        bpy.context.scene.frame_set(frame)
        assert chain.status == 'NONE' and "Rest Position" in chain.message
        assert [tuple(pb.rotation_quaternion) for pb in ob.pose.bones] == channels
    ob.data.pose_position = 'POSE'
    bpy.context.scene.frame_set(5)
    assert chain.status == 'REACHED'
    assert_honest(ob, chain)


def _key_bone_rotations(ob, frames_values):
    for frame, angle in frames_values:
        for pb in ob.pose.bones:
            pb.rotation_mode = 'XYZ'
            pb.rotation_euler = (angle, 0.0, angle / 2)
            pb.keyframe_insert("rotation_euler", frame=frame)


def test_keyed_enabled_switch_gives_the_pose_without_ik():
    ob = straightish_chain("Arm", 3)
    plain = twin("Plain", (0.0, 0.0, 0.0))
    keys = [(1, 0.1), (20, 0.5)]
    _key_bone_rotations(ob, keys)
    _key_bone_rotations(plain, keys)
    chain = add_chain(ob, "b2", 3, animated_target())
    for frame, on in ((1, True), (8, False), (12, True), (16, False)):
        chain.enabled = on
        chain.keyframe_insert("enabled", frame=frame)
    for frame in (2, 9, 10, 13, 17, 19, 2, 17):
        bpy.context.scene.frame_set(frame)
        if chain.enabled:
            assert chain.status == 'REACHED', (frame, chain.message)
            assert_honest(ob, chain)
        else:
            assert chain.status != 'REACHED', frame
            np.testing.assert_allclose(world_tail(ob, "b2"), world_tail(plain, "b2"), atol=1e-5,
                                       err_msg=f"frame {frame}")


def test_keyed_influence_blends_from_the_pose_without_ik():
    ob = straightish_chain("Arm", 3)
    plain = twin("Plain", (0.0, 0.0, 0.0))
    chain = add_chain(ob, "b2", 3, animated_target())
    for frame, value in ((1, 0.0), (10, 1.0)):
        chain.influence = value
        chain.keyframe_insert("influence", frame=frame)
    bpy.context.scene.frame_set(1)
    np.testing.assert_allclose(world_tail(ob, "b2"), world_tail(plain, "b2"), atol=1e-5)
    bpy.context.scene.frame_set(10)
    assert chain.status == 'REACHED'
    assert_honest(ob, chain)


def _nla_only(ob, keys):
    _key_bone_rotations(ob, keys)
    adt = ob.animation_data
    action = adt.action
    track = adt.nla_tracks.new()
    track.strips.new("Walk", 1, action)
    adt.action = None


@pytest.mark.parametrize("switch", ["influence 0", "chain off", "rig off"])
def test_bones_animated_only_by_an_nla_strip(switch):
    ob = straightish_chain("Arm", 3)
    plain = twin("Plain", (0.0, 0.0, 0.0))
    keys = [(1, 0.1), (20, 0.9)]
    _nla_only(ob, keys)
    _nla_only(plain, keys)
    chain = add_chain(ob, "b2", 3, animated_target())
    bpy.context.scene.frame_set(5)
    assert chain.status == 'REACHED'
    assert_honest(ob, chain)
    if switch == "influence 0":
        chain.influence = 0.0
    elif switch == "chain off":
        chain.enabled = False
    else:
        ob.fabrik.enabled = False
    for frame in (3, 11, 18):
        bpy.context.scene.frame_set(frame)
        np.testing.assert_allclose(world_tail(ob, "b2"), world_tail(plain, "b2"), atol=1e-5,
                                   err_msg=f"frame {frame}")



@pytest.mark.parametrize("scale", [(1.0, 2.0, 1.0), (1.1, 1.2, 0.9)])
def test_non_uniform_scale_on_a_stretching_chain_is_solved_honestly(scale):
    """Stretch writes keep non-uniform scale exact, so such chains are solved, not refused."""
    ob = straightish_chain("Arm", 3)
    chain = add_chain(ob, "b2", 3, animated_target(), use_stretch=True)
    ob.pose.bones["b1"].scale = scale
    frames_honest(ob, chain)
    assert chain.status != 'INVALID', chain.message


@pytest.mark.parametrize("hide", [_exclude, _other_scene], ids=["excluded", "other scene"])
def test_pole_that_this_view_layer_does_not_show(hide):
    ob = straightish_chain("Arm", 3)
    pole = animated_target("Pole")
    chain = add_chain(ob, "b2", 3, empty("T", (0.5, 0.5, 2.0)), pole=pole)
    hide(pole)
    frames_honest(ob, chain)
    assert chain.status == 'INVALID' and "Pole 'Pole' is not evaluated" in chain.message, chain.message


def test_pole_carried_by_another_chain():
    ob = forked()
    right = add_chain(ob, "r1", 2, animated_target("R"))
    carried = empty("Carried", (0.0, 1.0, 0.0))
    carried.parent, carried.parent_type, carried.parent_bone = ob, 'BONE', "r0"
    left = add_chain(ob, "l1", 2, empty("L", (-0.8, 0.3, 2.2)), pole=carried)
    frames_honest(ob, left)
    frames_honest(ob, right)
    assert left.status == 'INVALID' and "Pole 'Carried' follows bone 'r0'" in left.message, left.message
    assert right.status == 'REACHED'


def test_target_parented_to_its_own_chain_after_the_chain_solved():
    ob = straightish_chain("Arm", 3)
    target = empty("T", (0.5, 0.5, 2.0))
    chain = add_chain(ob, "b2", 3, target)
    bpy.context.scene.frame_set(1)
    assert chain.status == 'REACHED'
    target.parent, target.parent_type, target.parent_bone = ob, 'BONE', "b1"
    frames_honest(ob, chain, frames=(2, 3, 2))
    assert chain.status == 'INVALID' and "moved by this chain" in chain.message, chain.message
    target.parent = None
    bpy.context.scene.frame_set(4)
    assert chain.status == 'REACHED'


@pytest.mark.parametrize("setup", [_copy_rotation, _driver, _ik_constraint], ids=["constraint", "driver", "ik"])
def test_constraint_or_driver_added_after_the_chain_solved(setup):
    ob = straightish_chain("Arm", 3)
    chain = add_chain(ob, "b2", 3, animated_target())
    bpy.context.scene.frame_set(1)
    assert chain.status == 'REACHED'
    setup(ob)
    bpy.context.view_layer.update()  # what the UI sends after the edit
    frames_honest(ob, chain, frames=(2, 3, 2))
    assert chain.status == 'INVALID', chain.message


# Location channels on connected bones, which Blender never composes (its BKE_pchan_to_mat4 skips them): a chain
# that counted them solved a pose Blender draws elsewhere (0.11 off, REACHED).

OFFSET = (0.1, 0.0, 0.05)


def _located(ob, names, keyed: bool) -> None:
    for name in names:
        pb = ob.pose.bones[name]
        pb.location = OFFSET
        if keyed:
            pb.keyframe_insert("location", frame=1)


@pytest.mark.parametrize("keyed", [False, True], ids=["set", "keyed"])
@pytest.mark.parametrize("solver", ['FABRIK', 'TWO_BONE'])
def test_location_on_connected_chain_bones_is_ignored_as_blender_ignores_it(keyed, solver):
    count, length = (2, 1.6) if solver == 'TWO_BONE' else (4, 1.0)
    ob = straightish_chain("Arm", count, length)
    _located(ob, [f"b{k}" for k in range(1, count)], keyed)
    chain = add_chain(ob, f"b{count - 1}", count, animated_target())
    chain.solver = solver
    plain = straightish_chain("Plain", count, length, location=(4.0, 0.0, 0.0))
    plain_target = empty("PlainT", (4.0, 0.0, 0.0))
    plain_target.parent = bpy.data.objects["T"]
    add_chain(plain, f"b{count - 1}", count, plain_target).solver = solver
    for frame in (1, 3, 5, 8, 11, 13, 5):
        bpy.context.scene.frame_set(frame)
        assert chain.status == 'REACHED', chain.message
        assert_honest(ob, chain)
        # The same pose as the same chain without those channels (they move nothing).
        for k in range(count):
            a = np.array(ob.pose.bones[f"b{k}"].matrix)
            b = np.array(plain.pose.bones[f"b{k}"].matrix)
            assert np.abs(a - b).max() < 1e-5, f"b{k} at frame {frame}"


def test_location_on_a_loose_chain_bone_still_moves_it():
    """The neighbour case: a bone that is not connected is moved by its location, and the chain solves from
    where the bone is."""
    ob = armature("Loose", [("b0", (0, 0, 0), (0, 0, 1), None, False, 0.0),
                            ("b1", (0, 0.1, 1.2), (0, 0.1, 2.2), "b0", False, 0.0),
                            ("b2", (0, 0.1, 2.2), (0, 0.0, 3.2), "b1", True, 0.0)])
    _located(ob, ["b1"], keyed=False)
    chain = add_chain(ob, "b2", 3, animated_target())
    frames_honest(ob, chain)
    bpy.context.scene.frame_set(5)
    assert chain.status == 'REACHED', chain.message
    head = np.array(ob.matrix_world @ ob.pose.bones["b1"].head)
    above = np.array(ob.matrix_world @ ob.pose.bones["b0"].matrix @ ob.data.bones["b1"].matrix_local.translation)
    assert np.linalg.norm(head - above) > 0.05  # the location moved it off its rest offset


@pytest.mark.parametrize("keyed", [False, True], ids=["set", "keyed"])
def test_location_on_connected_bones_of_a_tree_is_ignored(keyed):
    ob = torso()
    _located(ob, ["spine1", "fore.L", "fore.R"], keyed)
    left = add_chain(ob, "fore.L", 4, empty("L", (0.9, 0.3, 1.0)))
    right = add_chain(ob, "fore.R", 4, empty("R", (-0.9, 0.3, 1.0)))
    for frame in (1, 2, 1):
        bpy.context.scene.frame_set(frame)
        for chain in (left, right):
            assert chain.status == 'REACHED', chain.message
            assert_honest(ob, chain)
