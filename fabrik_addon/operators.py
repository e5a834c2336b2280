"""Operators: add and remove chains (baking lives in :mod:`.bake`)."""

from __future__ import annotations

import bpy
import numpy as np
from bpy.props import BoolProperty, EnumProperty, IntProperty
from mathutils import Matrix

from . import handlers
from .rig.base_pose import capture_base, release
from .rig.plan import ChainError, chain_bones


def _armature_in_pose_mode(context) -> bool:
    ob = context.object
    return ob is not None and ob.type == 'ARMATURE' and context.mode == 'POSE'


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
        name="Solver", description="How the chain is solved",
        items=(('FABRIK', "FABRIK", "Iterative FABRIK for any number of bones"),
               ('TWO_BONE', "Two-Bone", "Exact law-of-cosines solution for two bones")),
        default='FABRIK',
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
        if not _armature_in_pose_mode(context):
            cls.poll_message_set("Select an armature in Pose Mode")
            return False
        if context.active_pose_bone is None:
            cls.poll_message_set("Make the chain's tip bone active")
            return False
        return True

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
    """A point on the side the chain bends to now, in the chain's bend plane (armature space).

    Placed there, the pole leaves the current pose as it is.
    """
    heads = np.array([np.array(ob.pose.bones[name].head) for name in bones]
                     + [np.array(ob.pose.bones[bones[-1]].tail)])
    root, tip = heads[0], heads[-1]
    axis = tip - root
    length = float(np.linalg.norm(np.diff(heads, axis=0), axis=1).sum())
    axis = axis / np.linalg.norm(axis) if np.linalg.norm(axis) > 1e-9 * length else np.array([0.0, 0.0, 1.0])
    bend = heads[1:-1].mean(axis=0) - root
    bend = bend - (bend @ axis) * axis
    if np.linalg.norm(bend) <= 1e-6 * length:
        # A straight chain has no bend: use the first bone's local Z (Blender's usual knee/elbow side).
        bend = np.array(ob.pose.bones[bones[0]].matrix.col[2][:3])
        bend = bend - (bend @ axis) * axis
    bend = bend / np.linalg.norm(bend)
    middle = root + 0.5 * (tip - root)
    from mathutils import Vector

    return Vector(middle + bend * length)


class POSE_OT_fabrik_chain_remove(bpy.types.Operator):
    bl_idname = "pose.fabrik_chain_remove"
    bl_label = "Remove FABRIK Chain"
    bl_description = "Remove the active chain and give its bones back their pose without IK " \
                     "(target and pole objects are kept)"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context):
        ob = context.object
        if ob is None or ob.type != 'ARMATURE':
            cls.poll_message_set("Select an armature")
            return False
        if not len(ob.fabrik.chains):
            cls.poll_message_set("This armature has no FABRIK chains")
            return False
        return True

    def execute(self, context):
        settings = context.object.fabrik
        index = min(settings.active_chain_index, len(settings.chains) - 1)
        release(context.object, [settings.chains[index]])
        settings.chains.remove(index)
        settings.active_chain_index = max(0, index - 1)
        handlers.request_solve()
        context.view_layer.update()
        return {'FINISHED'}
