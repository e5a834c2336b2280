"""A rig that is not in the view layer (its collection unlinked, excluded, by a script with no update)
is neither solved nor written; linked again, it is solved at the next frame change."""

import bpy
import numpy as np
import pytest
from rigs import add_chain, empty, straightish_chain, world_tail

from fabrik_addon import handlers


def rig_in_collection(parent: str):
    """A 3-bone chain in collection "Rig", itself in the scene's collection or in collection "Parent";
    the target stays in the scene."""
    ob = straightish_chain("Arm", 3)
    bpy.context.scene.collection.objects.unlink(ob)
    holder = bpy.data.collections.new("Rig")
    holder.objects.link(ob)
    if parent == "scene":
        bpy.context.scene.collection.children.link(holder)
        owner = bpy.context.scene.collection
    else:
        owner = bpy.data.collections.new("Parent")
        bpy.context.scene.collection.children.link(owner)
        owner.children.link(holder)
    target = empty("Target", (1.0, 0.6, 2.0))
    chain = add_chain(ob, "b2", 3, target)
    return ob, chain, target, holder, owner


def rotations(ob):
    return [tuple(pb.rotation_quaternion) for pb in ob.pose.bones]


@pytest.mark.parametrize("edit", [False, True], ids=["as it was", "a setting edited"])
@pytest.mark.parametrize("parent", ["scene", "collection"])
def test_an_unlinked_rig_is_not_written_and_relinked_it_solves_again(parent, edit, solve_path):
    ob, chain, target, holder, owner = rig_in_collection(parent)
    scene = bpy.context.scene
    scene.frame_set(1)
    assert chain.status == 'REACHED', chain.message
    if edit:
        chain.iterations = 40  # a chain setting edited just before: every cached list is read again
    owner.children.unlink(holder)
    posed = rotations(ob)
    for frame, where in ((2, (0.2, -1.0, 2.2)), (3, (-0.8, 0.4, 1.5))):
        target.location = where
        scene.frame_set(frame)
        assert rotations(ob) == posed  # not written
        assert chain.status == 'NONE' and chain.message == handlers.NOT_EVALUATED
    owner.children.link(holder)
    scene.frame_set(4)
    assert chain.status == 'REACHED', chain.message
    np.testing.assert_allclose(world_tail(ob, "b2"), target.location, atol=1e-3)


def test_a_rig_in_an_excluded_collection_is_not_written(solve_path):
    ob, chain, target, holder, owner = rig_in_collection("scene")
    scene = bpy.context.scene
    scene.frame_set(1)
    layer = bpy.context.view_layer.layer_collection.children["Rig"]
    layer.exclude = True
    posed = rotations(ob)
    target.location = (0.2, -1.0, 2.2)
    scene.frame_set(2)
    assert rotations(ob) == posed
    layer.exclude = False
    scene.frame_set(3)
    assert chain.status == 'REACHED', chain.message
    np.testing.assert_allclose(world_tail(ob, "b2"), target.location, atol=1e-3)


def test_a_hidden_rig_is_still_solved(solve_path):
    """Hidden with the eye, a rig is still in the view layer (Blender evaluates it): it follows."""
    ob, chain, target, holder, owner = rig_in_collection("scene")
    ob.hide_set(True)
    target.location = (0.2, -1.0, 2.2)
    bpy.context.scene.frame_set(2)
    assert chain.status == 'REACHED', chain.message
    np.testing.assert_allclose(world_tail(ob, "b2"), target.location, atol=1e-3)


def test_an_unlinked_object_rig_linked_back_directly_solves_again(solve_path):
    ob = straightish_chain("Arm", 3)
    target = empty("Target", (1.0, 0.6, 2.0))
    chain = add_chain(ob, "b2", 3, target)
    scene = bpy.context.scene
    scene.frame_set(1)
    scene.collection.objects.unlink(ob)
    chain.iterations = 50
    target.location = (0.2, -1.0, 2.2)
    scene.frame_set(2)
    assert chain.status == 'NONE'
    scene.collection.objects.link(ob)
    scene.frame_set(3)
    assert chain.status == 'REACHED', chain.message
    np.testing.assert_allclose(world_tail(ob, "b2"), target.location, atol=1e-3)
