"""Operators: add and remove chains (baking lives in :mod:`.bake`)."""

from __future__ import annotations

import bpy
import numpy as np
from bpy.props import BoolProperty, EnumProperty, IntProperty
from mathutils import Matrix, Vector

from . import handlers, pole
from .polls import active_armature, armature_in_pose_mode, has_chains
from .props import SOLVER_ITEMS
from .rig.base_pose import capture_base, release
from .rig.plan import ChainError, chain_bones


class POSE_OT_fabrik_chain_add(bpy.types.Operator):
    bl_idname = "pose.fabrik_chain_add"
    bl_label = "Add FABRIK Chain"
    bl_description = "Add an IK chain ending at the active bone, optionally with a new target and pole empty"
    bl_options = {'REGISTER', 'UNDO'}

    chain_length: IntProperty(  # type: ignore[valid-type]
        name="Chain Length", description="Bones from the tip up the hierarchy (0: up to the root bone)",
        min=0, max=255, default=2,
    )
    solver: EnumProperty(  # type: ignore[valid-type]
        name="Solver", description="How the chain is solved", items=SOLVER_ITEMS, default='FABRIK',
    )
    create_target: BoolProperty(  # type: ignore[valid-type]
        name="Create Target", description="Add an empty at the tip's tail, oriented like the tip, as target",
        default=True,
    )
    create_pole: BoolProperty(  # type: ignore[valid-type]
        name="Create Pole", description="Add an empty on the side the chain bends to, as pole",
        default=False,
    )

    @classmethod
    def poll(cls, context):
        if armature_in_pose_mode(context) is None:
            cls.poll_message_set("Select an armature in Pose Mode")
            return False
        if context.active_pose_bone is None:
            cls.poll_message_set("Make the chain's tip bone active")
            return False
        return True

    def invoke(self, context, event):
        # The options in a small dialog first; they stay editable in Adjust Last Operation (F9) afterwards.
        return context.window_manager.invoke_props_dialog(self)

    def execute(self, context):
        ob = context.object
        tip = context.active_pose_bone
        chain = ob.fabrik.chains.add()
        chain.enabled = False  # filled in below; solved once complete
        chain.name = tip.name
        chain.tip_bone = tip.name
        chain.chain_length = self.chain_length
        chain.solver = self.solver
        try:
            bones = chain_bones(ob, chain)
        except ChainError as error:
            ob.fabrik.chains.remove(len(ob.fabrik.chains) - 1)
            self.report({'ERROR'}, str(error))
            return {'CANCELLED'}
        for name in bones:
            pb = ob.pose.bones[name]
            if not pb.fabrik_base.captured:
                capture_base(pb)
        world = ob.matrix_world
        if self.create_target:
            chain.target = _new_empty(context, f"{tip.name}_target", world @ tip.matrix, tip.tail, 'SPHERE')
        if self.create_pole and len(bones) >= 2:
            chain.pole = _new_empty(context, f"{tip.name}_pole", Matrix.Identity(4),
                                    _pole_position(ob, bones), 'CONE')
        chain.enabled = True
        ob.fabrik.active_chain_index = len(ob.fabrik.chains) - 1
        handlers.request_solve()
        context.view_layer.update()
        return {'FINISHED'}


def _new_empty(context, name: str, orientation: Matrix, local_point, shape: str):
    """An empty in the active collection at armature-space point ``local_point`` with ``orientation``."""
    ob = context.object
    empty = bpy.data.objects.new(name, None)
    empty.empty_display_type = shape
    empty.empty_display_size = 0.1 * max(ob.dimensions) if max(ob.dimensions) > 0 else 0.1
    location = ob.matrix_world @ local_point
    rotation = orientation.to_quaternion()
    empty.matrix_world = Matrix.LocRotScale(location, rotation, None)
    context.collection.objects.link(empty)
    return empty


def _pole_position(ob, bones: list[str]):
    """A point on the side the chain bends to now, in its bend plane (armature space): see
    :func:`.pole.pole_position`, the rule snapping IK to FK places poles by too."""
    joints = [ob.pose.bones[name].head for name in bones] + [ob.pose.bones[bones[-1]].tail]
    side = ob.pose.bones[bones[0]].matrix.col[2][:3]
    return Vector(pole.pole_position(np.array(joints), np.array(side)))


class POSE_OT_fabrik_chain_remove(bpy.types.Operator):
    bl_idname = "pose.fabrik_chain_remove"
    bl_label = "Remove FABRIK Chain"
    bl_description = "Remove the active chain and give its bones back their pose without IK " \
                     "(target and pole objects are kept)"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context):
        return has_chains(cls, active_armature(context), "Select an armature")

    def execute(self, context):
        settings = context.object.fabrik
        index = min(settings.active_chain_index, len(settings.chains) - 1)
        release(context.object, [settings.chains[index]])
        settings.chains.remove(index)
        settings.active_chain_index = max(0, index - 1)
        handlers.request_solve()
        context.view_layer.update()
        return {'FINISHED'}
