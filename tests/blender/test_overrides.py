"""A rig saved in one file, linked into a shot through a library override.

The animator tunes influence, targets and limits on the override; the values survive save and reload,
the chain solves, the base pose store works there, and a bake writes into an action the shot owns.
"""

import bpy
import numpy as np
import pytest
from rigs import add_chain, empty, key_path, straightish_chain, world_tail
from status_checks import assert_honest, assert_neighbour_solves, neighbour, no_traceback  # noqa: F401

from fabrik_addon import compat

pytestmark = pytest.mark.usefixtures("solve_path", "no_traceback")


def save_rig_file(path, keyed: bool = False) -> None:
    """A character file: collection 'Character' holding rig 'Rig' (chain over b1-b3) and its target."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    ob = straightish_chain("Rig", 4)
    target = empty("RigTarget", (0.5, 0.5, 3.0))
    add_chain(ob, "b3", 3, target)
    ob.pose.bones["b2"].fabrik_limit.mode = 'CONE'
    if keyed:  # the rig's own animation on a bone outside the chain, in the library's action
        pb = ob.pose.bones["b0"]
        for frame, angle in ((1, 0.0), (20, 0.3)):
            pb.rotation_quaternion = (np.cos(angle), np.sin(angle), 0.0, 0.0)
            pb.keyframe_insert("rotation_quaternion", frame=frame)
    collection = bpy.data.collections.new("Character")
    bpy.context.scene.collection.children.link(collection)
    for item in (ob, target):
        bpy.context.scene.collection.objects.unlink(item)
        collection.objects.link(item)
    bpy.context.view_layer.update()
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    bpy.ops.wm.read_factory_settings(use_empty=True)


def link_with_override(path):
    """Link 'Character' into the current (shot) file and make a library override of it: its rig."""
    with bpy.data.libraries.load(str(path), link=True) as (_src, dst):
        dst.collections = ["Character"]
    linked = dst.collections[0]
    scene = bpy.context.scene
    scene.collection.children.link(linked)
    override = linked.override_hierarchy_create(scene, bpy.context.view_layer, do_fully_editable=True)
    if linked.name in scene.collection.children and scene.collection.children[linked.name] == linked:
        scene.collection.children.unlink(linked)
    bpy.context.view_layer.update()
    rig = next(ob for ob in override.objects if ob.type == 'ARMATURE')
    assert rig.override_library is not None
    bpy.context.view_layer.objects.active = rig
    return rig


def shot_rig():
    return next(ob for ob in bpy.data.objects if ob.type == 'ARMATURE' and ob.override_library is not None)


@pytest.fixture
def library(tmp_path):
    path = tmp_path / "character.blend"
    save_rig_file(path)
    return path


def test_settings_tuned_on_the_override_survive_a_reload_and_solve(library, tmp_path):
    rig = link_with_override(library)
    chain = rig.fabrik.chains[0]
    shot_target = empty("ShotTarget", (0.4, -0.6, 2.6))
    key_path(shot_target, [(0.4, -0.6, 2.6), (-0.5, 0.4, 2.8)], [1, 10])
    chain.target = shot_target
    chain.iterations = 60
    limit = rig.pose.bones["b2"].fabrik_limit
    limit.mode, limit.cone_left, limit.cone_right = 'CONE', 1.2, 1.2
    rig.pose.bones["b1"].fabrik_limit.mode = 'HINGE'
    rig.pose.bones["b1"].fabrik_limit.hinge_min = -2.0
    bpy.context.scene.frame_set(4)
    assert chain.status in {'REACHED', 'UNREACHABLE'}, chain.message
    assert_honest(rig, chain)
    shot = tmp_path / "shot.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(shot))
    bpy.ops.wm.open_mainfile(filepath=str(shot))
    rig = shot_rig()
    chain = rig.fabrik.chains[0]
    assert chain.target is not None and chain.target.name == "ShotTarget"
    assert chain.iterations == 60
    assert rig.pose.bones["b2"].fabrik_limit.cone_left == pytest.approx(1.2)
    assert rig.pose.bones["b1"].fabrik_limit.mode == 'HINGE'
    assert rig.pose.bones["b1"].fabrik_limit.hinge_min == pytest.approx(-2.0)
    for frame in (2, 7, 10):
        bpy.context.scene.frame_set(frame)
        assert chain.status in {'REACHED', 'UNREACHABLE'}, chain.message
        assert_honest(rig, chain)


def test_influence_and_switches_on_the_override(library, tmp_path):
    rig = link_with_override(library)
    chain = rig.fabrik.chains[0]
    chain.target.location = (0.8, 0.2, 2.5)
    bpy.context.view_layer.update()
    reached = world_tail(rig, "b3")
    chain.influence = 0.0
    bpy.context.view_layer.update()
    unposed = world_tail(rig, "b3")
    assert np.linalg.norm(unposed - reached) > 0.1
    chain.influence = 0.5
    shot = tmp_path / "shot.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(shot))
    bpy.ops.wm.open_mainfile(filepath=str(shot))
    rig = shot_rig()
    assert rig.fabrik.chains[0].influence == pytest.approx(0.5)
    rig.fabrik.chains[0].enabled = False  # gives the pose without IK back: the base pose store works here
    bpy.context.view_layer.update()
    np.testing.assert_allclose(world_tail(rig, "b3"), unposed, atol=1e-5)
    rig.fabrik.chains[0].enabled = True
    rig.fabrik.enabled = False
    bpy.context.view_layer.update()
    np.testing.assert_allclose(world_tail(rig, "b3"), unposed, atol=1e-5)


def test_a_chain_added_on_the_override(library, tmp_path):
    rig = link_with_override(library)
    extra = add_chain(rig, "b1", 2, empty("Extra", (0.5, 0.3, 1.6)))
    extra.name = "extra"
    rig.fabrik.chains[0].enabled = False
    bpy.context.view_layer.update()
    assert extra.status == 'REACHED', extra.message
    shot = tmp_path / "shot.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(shot))
    bpy.ops.wm.open_mainfile(filepath=str(shot))
    rig = shot_rig()
    assert [c.name for c in rig.fabrik.chains][-1] == "extra"
    bpy.context.scene.frame_set(3)
    assert rig.fabrik.chains["extra"].status == 'REACHED'
    assert_honest(rig, rig.fabrik.chains["extra"])


@pytest.mark.parametrize("keyed", [False, True], ids=["no action", "library action"])
def test_bake_writes_into_an_action_the_shot_owns(tmp_path, keyed):
    library = tmp_path / "character.blend"
    save_rig_file(library, keyed=keyed)
    before = library.read_bytes()
    rig = link_with_override(library)
    chain = rig.fabrik.chains[0]
    key_path(chain.target, [(0.5, 0.5, 3.0), (-0.4, 0.6, 2.7), (0.6, -0.3, 2.4)], [1, 8, 15])
    live = []
    for frame in range(1, 16):
        bpy.context.scene.frame_set(frame)
        live.append(world_tail(rig, "b3"))
    bpy.context.scene.frame_set(1)
    b0 = tuple(rig.pose.bones["b0"].rotation_quaternion)
    try:
        result = bpy.ops.pose.fabrik_bake(frame_start=1, frame_end=15)
    except RuntimeError as error:
        assert keyed and "linked" in str(error), error
        assert chain.enabled
        return
    assert result == {'FINISHED'}
    assert rig.fabrik.chains[0].bake_max_error < 1e-4
    action = rig.animation_data.action
    assert action is not None and action.library is None, "baked into linked data"
    paths = {fc.data_path for fc in compat.animated_fcurves(rig)}
    assert {f'pose.bones["b{i}"].rotation_quaternion' for i in (1, 2, 3)} <= paths
    played = []
    for frame in range(1, 16):
        bpy.context.scene.frame_set(frame)
        played.append(world_tail(rig, "b3"))
    np.testing.assert_allclose(played, live, atol=1e-4)
    if keyed:  # the library's own animation still plays
        bpy.context.scene.frame_set(1)
        np.testing.assert_allclose(tuple(rig.pose.bones["b0"].rotation_quaternion), b0, atol=1e-5)
    shot = tmp_path / "shot.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(shot))
    assert library.read_bytes() == before


def test_a_linked_rig_without_an_override_is_left_alone(library):
    with bpy.data.libraries.load(str(library), link=True) as (_src, dst):
        dst.collections = ["Character"]
    bpy.context.scene.collection.children.link(dst.collections[0])
    other = neighbour()
    bpy.context.view_layer.update()
    bpy.context.scene.frame_set(5)
    rig = bpy.data.objects["Rig"]
    assert rig.library is not None
    chain = rig.fabrik.chains[0]
    assert chain.status in {'NONE', 'INVALID', 'REACHED', 'UNREACHABLE'}
    assert_honest(rig, chain)
    assert_neighbour_solves(*other)
