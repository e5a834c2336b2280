"""Sidebar panel (3D Viewport, tab "FABRIK"), its sub-panels and the chain list.

Laid out as Blender's own constraint and bone panels: one parent panel, sub-panels for the chain's
settings, the joint limit and baking, properties split into label and value columns. Text built at
run time goes through ``iface_`` (then ``.format``) so it can be translated.
"""

from __future__ import annotations

import bpy
from bpy.app.translations import pgettext_iface as iface_

from .polls import active_armature, active_chain

STATUS_ICONS = {'REACHED': 'CHECKMARK', 'UNREACHABLE': 'ERROR', 'INVALID': 'CANCEL', 'NONE': 'BLANK1',
                'NOT_CONVERGED': 'TIME'}

# The icon of each reason a chain stops short (FabrikChain.limited_by).
REASON_ICONS = {'LENGTH': 'DRIVER_DISTANCE', 'LIMIT': 'CON_ROTLIMIT', 'SOFTNESS': 'MOD_SMOOTH', 'ITERATIONS': 'TIME',
                'POLE': 'CON_KINEMATIC', 'SHARED': 'GROUP_BONE', 'NONE': 'BLANK1'}


class FABRIK_UL_chains(bpy.types.UIList):
    bl_idname = "FABRIK_UL_chains"

    def draw_item(self, context, layout, data, item, icon, active_data, active_property, index=0, flt_flag=0):
        row = layout.row(align=True)
        row.prop(item, "name", text="", emboss=False, icon=STATUS_ICONS[item.status])
        row.prop(item, "enabled", text="")


class _FabrikPanel:
    bl_space_type = 'VIEW_3D'
    bl_region_type = 'UI'
    bl_category = "FABRIK"


class _ChainPanel(_FabrikPanel):
    """A sub-panel about the active chain: shown while the active armature has one."""

    bl_parent_id = "VIEW3D_PT_fabrik"

    @classmethod
    def poll(cls, context):
        return active_chain(context) is not None


class VIEW3D_PT_fabrik(_FabrikPanel, bpy.types.Panel):
    bl_idname = "VIEW3D_PT_fabrik"
    bl_label = "FABRIK IK"

    @classmethod
    def poll(cls, context):
        return active_armature(context) is not None

    def draw(self, context):
        layout = self.layout
        settings = context.object.fabrik
        layout.prop(settings, "enabled", text="Solve This Rig")
        row = layout.row()
        row.template_list("FABRIK_UL_chains", "", settings, "chains", settings, "active_chain_index", rows=3)
        col = row.column(align=True)
        col.operator("pose.fabrik_chain_add", icon='ADD', text="")
        col.operator("pose.fabrik_chain_remove", icon='REMOVE', text="")
        chain = active_chain(context)
        if chain is None:
            layout.label(text="Pose Mode: make the tip bone active, then +")
            return
        box = layout.box()
        if chain.status == 'INVALID':
            box.label(text=chain.message, icon='CANCEL', translate=False)
        elif chain.status == 'NONE':
            box.label(text="Not solved yet" if chain.enabled else "Disabled", icon='INFO')
        else:
            status = {'REACHED': iface_("Reached"), 'NOT_CONVERGED': iface_("Not converged")}.get(
                chain.status, iface_("Unreachable"))
            box.label(text=iface_("{}: {:.4g} from target, {} iterations").format(
                status, chain.last_error, chain.last_iterations), icon=STATUS_ICONS[chain.status], translate=False)
        if chain.limited_by != 'NONE':
            box.label(text=chain.message, icon=REASON_ICONS[chain.limited_by], translate=False)
        if chain.group:
            box.label(text=iface_("Solved together with: {}").format(chain.group), icon='LINKED', translate=False)
        layout.prop(settings, "show_reach_overlay", icon='OVERLAY')


class VIEW3D_PT_fabrik_chain(_ChainPanel, bpy.types.Panel):
    bl_idname = "VIEW3D_PT_fabrik_chain"
    bl_label = "Chain"

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        chain = active_chain(context)
        col = layout.column()
        col.prop_search(chain, "tip_bone", context.object.data, "bones", text="Tip Bone")
        col.prop(chain, "chain_length")
        col.prop(chain, "solver")

        col = layout.column()
        col.prop(chain, "target")
        if chain.target is not None and chain.target.type == 'ARMATURE':
            col.prop_search(chain, "target_bone", chain.target.data, "bones", text="Bone")
        col.prop(chain, "pole")
        if chain.pole is not None and chain.pole.type == 'ARMATURE':
            col.prop_search(chain, "pole_bone", chain.pole.data, "bones", text="Bone")

        col = layout.column()
        col.prop(chain, "iterations")
        col.prop(chain, "tolerance")
        col.prop(chain, "weight", slider=True)
        col.prop(chain, "match_target_rotation")

        col = layout.column()
        col.prop(chain, "softness", slider=True)
        col.prop(chain, "use_stretch")
        sub = col.column()
        sub.active = chain.use_stretch  # greyed out: it only applies while stretching
        sub.prop(chain, "max_stretch")


class VIEW3D_PT_fabrik_limit(_FabrikPanel, bpy.types.Panel):
    bl_idname = "VIEW3D_PT_fabrik_limit"
    bl_label = "Joint Limit"
    bl_parent_id = "VIEW3D_PT_fabrik"

    @classmethod
    def poll(cls, context):
        return active_armature(context) is not None and context.active_pose_bone is not None

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        bone = context.active_pose_bone
        limit = bone.fabrik_limit
        layout.label(text=iface_("Bone: {}").format(bone.name), icon='BONE_DATA', translate=False)
        layout.prop(limit, "mode")
        if limit.mode == 'CONE':
            col = layout.column(align=True)
            for name in ("cone_left", "cone_right", "cone_up", "cone_down"):
                col.prop(limit, name)
        elif limit.mode == 'HINGE':
            col = layout.column(align=True)
            col.prop(limit, "hinge_min")
            col.prop(limit, "hinge_max")


class VIEW3D_PT_fabrik_bake(_ChainPanel, bpy.types.Panel):
    bl_idname = "VIEW3D_PT_fabrik_bake"
    bl_label = "Bake"
    bl_options = {'DEFAULT_CLOSED'}

    def draw(self, context):
        layout = self.layout
        chain = active_chain(context)
        layout.operator("pose.fabrik_bake", icon='ACTION')
        if chain.bake_max_error >= 0.0:
            layout.label(text=iface_("Last bake: max {:.3g}, mean {:.3g} from live IK").format(
                chain.bake_max_error, chain.bake_mean_error), icon='KEYINGSET', translate=False)
        layout.label(text="Baking switches the chains off; tick them to go live again", icon='INFO')


class VIEW3D_PT_fabrik_ikfk(_ChainPanel, bpy.types.Panel):
    bl_idname = "VIEW3D_PT_fabrik_ikfk"
    bl_label = "IK/FK"

    def draw(self, context):
        draw_ikfk(self.layout, active_chain(context))


def draw_ikfk(layout, chain) -> None:
    """The IK/FK row of the active chain: the switch (influence, keyable) and the two snaps."""
    col = layout.column(align=True)
    col.prop(chain, "influence", text="IK <-> FK", slider=True)
    row = col.row(align=True)
    row.operator("pose.fabrik_snap_ik_to_fk", text="IK to FK")
    row.operator("pose.fabrik_snap_fk_to_ik", text="FK to IK")
    col.operator("pose.fabrik_bake_controls", text="Bake FK to IK Controls", icon='ACTION')


def draw_pose_menu(self, context) -> None:
    """Pose menu entry: convert the chains' FK animation to IK controls."""
    self.layout.separator()
    self.layout.operator("pose.fabrik_bake_controls", icon='ACTION')
