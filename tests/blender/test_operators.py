"""Operators as a user runs them, and the metadata every property and operator must carry."""

import ast
from pathlib import Path

import bpy
import numpy as np
from rigs import ROOT, add_chain, armature, empty, straightish_chain, world_tail


def pose_mode_with_active(ob, bone):
    bpy.context.view_layer.objects.active = ob
    ob.select_set(True)
    bpy.ops.object.mode_set(mode='POSE')
    ob.data.bones.active = ob.data.bones[bone]


def test_add_chain_with_target_and_pole_leaves_the_pose_where_it_was():
    ob = straightish_chain("Arm", 3, bend=0.3)
    ob.pose.bones["b1"].rotation_quaternion = (0.96, 0.28, 0.0, 0.0)  # a bent pose of the user's
    bpy.context.view_layer.update()
    before = [world_tail(ob, name) for name in ("b0", "b1", "b2")]
    pose_mode_with_active(ob, "b2")
    assert bpy.ops.pose.fabrik_chain_add(chain_length=3, create_target=True, create_pole=True) == {'FINISHED'}
    chain = ob.fabrik.chains[0]
    assert chain.tip_bone == "b2" and chain.chain_length == 3
    assert chain.target is not None and chain.pole is not None
    np.testing.assert_allclose(np.array(chain.target.matrix_world.translation), before[2], atol=1e-5)
    tip_rotation = (ob.matrix_world @ ob.pose.bones["b2"].matrix).to_quaternion()
    assert tip_rotation.rotation_difference(chain.target.matrix_world.to_quaternion()).angle < 1e-4
    bpy.context.view_layer.update()
    after = [world_tail(ob, name) for name in ("b0", "b1", "b2")]
    np.testing.assert_allclose(after, before, atol=1e-4)
    assert chain.status == 'REACHED'


def test_remove_chain_restores_the_pose_and_keeps_the_objects():
    ob = straightish_chain("Arm", 3)
    pose_mode_with_active(ob, "b2")
    bpy.ops.pose.fabrik_chain_add(chain_length=3, create_target=True)
    target = ob.fabrik.chains[0].target
    target.location = (0.8, 0.5, 1.5)
    bpy.context.view_layer.update()
    assert max(abs(pb.rotation_quaternion[0] - 1.0) for pb in ob.pose.bones) > 1e-3  # IK moved the chain
    assert bpy.ops.pose.fabrik_chain_remove() == {'FINISHED'}
    assert len(ob.fabrik.chains) == 0
    assert target.name in bpy.data.objects
    for pb in ob.pose.bones:
        np.testing.assert_allclose(pb.rotation_quaternion, (1, 0, 0, 0), atol=1e-6)


def test_operators_explain_why_they_cannot_run():
    empty("Lonely")
    bpy.context.view_layer.objects.active = bpy.data.objects["Lonely"]
    assert not bpy.ops.pose.fabrik_chain_add.poll()
    assert not bpy.ops.pose.fabrik_chain_remove.poll()
    assert not bpy.ops.pose.fabrik_bake.poll()


def test_chain_longer_than_the_hierarchy_is_an_error_message_not_a_chain():
    ob = straightish_chain("Arm", 2)
    pose_mode_with_active(ob, "b1")
    try:
        bpy.ops.pose.fabrik_chain_add(chain_length=5)
    except RuntimeError as error:
        assert "longer than the bone hierarchy" in str(error)
    else:
        raise AssertionError("expected an error report")
    assert len(ob.fabrik.chains) == 0


def test_target_can_be_a_bone_of_another_armature():
    ob = straightish_chain("Arm", 3)
    other = armature("Mover", [("hand", (1.0, 0.5, 0.0), (1.0, 0.5, 0.3), None, False, 0.0)])
    add_chain(ob, "b2", 3, other, target_bone="hand")
    other.pose.bones["hand"].location = (0.0, 1.5, 0.0)  # bone Y is world Z here
    bpy.context.view_layer.update()
    ev = other.evaluated_get(bpy.context.evaluated_depsgraph_get())
    head = np.array(other.matrix_world @ ev.pose.bones["hand"].head)
    assert np.linalg.norm(world_tail(ob, "b2") - head) < 1e-3


def test_every_property_has_a_name_and_description_and_every_operator_a_tooltip():
    """Tooltips are what a user sees: an AST check over the add-on's sources, as CloudRig does."""
    missing = []
    for path in sorted((ROOT / "fabrik_addon").glob("*.py")):
        tree = ast.parse(Path(path).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "").endswith("Property"):
                keywords = {k.arg for k in node.keywords}
                if not {"name", "description"} <= keywords and node.func.id != "PointerProperty" or \
                        node.func.id == "PointerProperty" and "description" not in keywords:
                    missing.append(f"{path.name}:{node.lineno} {node.func.id}")
            if isinstance(node, ast.ClassDef) and "_OT_" in node.name:
                names = {t.id for n in node.body if isinstance(n, ast.Assign) for t in n.targets
                         if isinstance(t, ast.Name)}
                if not {"bl_idname", "bl_label", "bl_description", "bl_options"} <= names:
                    missing.append(f"{path.name}: {node.name}")
                if not any(isinstance(n, ast.FunctionDef) and n.name == "poll" for n in node.body):
                    missing.append(f"{path.name}: {node.name} has no poll")
    assert missing == []


def test_undo_and_redo_around_a_chain():
    """Undo takes the chain, its target and the IK pose away; redo brings them back, solving live."""
    ob = straightish_chain("Arm", 3)
    bpy.ops.ed.undo_push(message="rig built")
    pose_mode_with_active(ob, "b2")
    assert bpy.ops.pose.fabrik_chain_add(chain_length=3, create_target=True) == {'FINISHED'}
    target_name = ob.fabrik.chains[0].target.name
    ob.fabrik.chains[0].target.location = (0.8, 0.5, 1.5)
    bpy.context.view_layer.update()
    bpy.ops.ed.undo_push(message="posed")

    assert bpy.ops.ed.undo() == {'FINISHED'}
    ob = bpy.data.objects["Arm"]
    assert len(ob.fabrik.chains) == 0 and target_name not in bpy.data.objects
    bpy.context.scene.frame_set(5)
    for pb in ob.pose.bones:
        np.testing.assert_allclose(pb.rotation_quaternion, (1, 0, 0, 0), atol=1e-6)

    assert bpy.ops.ed.redo() == {'FINISHED'}
    ob = bpy.data.objects["Arm"]
    chain = ob.fabrik.chains[0]
    chain.target.location = (-0.5, 0.6, 1.8)
    bpy.context.view_layer.update()
    assert chain.status == 'REACHED'
    assert np.linalg.norm(world_tail(ob, "b2") - np.array(chain.target.location)) < 1e-3
