"""Sidebar panel (3D Viewport, tab "FABRIK") and the chain list."""

from __future__ import annotations

import bpy


class FABRIK_UL_chains(bpy.types.UIList):
    bl_idname = "FABRIK_UL_chains"

    def draw_item(self, context, layout, data, item, icon, active_data, active_property, index=0, flt_flag=0):
        row = layout.row(align=True)
        icons = {'REACHED': 'CHECKMARK', 'UNREACHABLE': 'ERROR', 'INVALID': 'CANCEL', 'NONE': 'BLANK1',
                 'NOT_CONVERGED': 'TIME'}
        row.prop(item, "name", text="", emboss=False, icon=icons[item.status])
        row.prop(item, "enabled", text="")


class VIEW3D_PT_fabrik(bpy.types.Panel):
    bl_idname = "VIEW3D_PT_fabrik"
    bl_label = "FABRIK IK"
    bl_space_type = 'VIEW_3D'
    bl_region_type = 'UI'
    bl_category = "FABRIK"

    @classmethod
    def poll(cls, context):
        return context.object is not None and context.object.type == 'ARMATURE'

    def draw(self, context):
        layout = self.layout
        ob = context.object
        settings = ob.fabrik
        layout.prop(settings, "enabled", text="Solve This Rig")
        row = layout.row()
        row.template_list("FABRIK_UL_chains", "", settings, "chains", settings, "active_chain_index", rows=3)
        col = row.column(align=True)
        col.operator("pose.fabrik_chain_add", icon='ADD', text="")
        col.operator("pose.fabrik_chain_remove", icon='REMOVE', text="")
        if not len(settings.chains):
            layout.label(text="Pose Mode: make the tip bone active, then +")
            return
        chain = settings.chains[min(settings.active_chain_index, len(settings.chains) - 1)]
        col = layout.column()
        col.prop_search(chain, "tip_bone", ob.data, "bones")
        col.prop(chain, "chain_length")
        col.prop(chain, "solver")
        col.separator()
        col.prop(chain, "target")
        if chain.target is not None and chain.target.type == 'ARMATURE':
            col.prop_search(chain, "target_bone", chain.target.data, "bones")
        col.prop(chain, "pole")
        if chain.pole is not None and chain.pole.type == 'ARMATURE':
            col.prop_search(chain, "pole_bone", chain.pole.data, "bones")
        col.separator()
        col.prop(chain, "iterations")
        col.prop(chain, "tolerance")
        col.prop(chain, "influence")
        col.prop(chain, "weight")
        col.prop(chain, "match_target_rotation")

        box = layout.box()
        if chain.status == 'INVALID':
            box.label(text=chain.message, icon='CANCEL')
        elif chain.status == 'NONE':
            box.label(text="Not solved yet" if chain.enabled else "Disabled", icon='INFO')
        else:
            icon = {'REACHED': 'CHECKMARK', 'NOT_CONVERGED': 'TIME'}.get(chain.status, 'ERROR')
            label = chain.status.replace('_', ' ').title()
            box.label(text=f"{label}: {chain.last_error:.4g} from target, "
                           f"{chain.last_iterations} iterations", icon=icon)
        if chain.group:
            box.label(text=f"Solved together with: {chain.group}", icon='LINKED')
        if chain.bake_max_error >= 0.0:
            box.label(text=f"Last bake: max {chain.bake_max_error:.3g}, mean {chain.bake_mean_error:.3g} "
                           "from live IK", icon='KEYINGSET')
        layout.operator("pose.fabrik_bake", icon='ACTION')

        bone = context.active_pose_bone
        if bone is not None:
            limit = bone.fabrik_limit
            box = layout.box()
            box.label(text=f"Joint Limit: {bone.name}", icon='CON_ROTLIMIT')
            box.prop(limit, "mode", expand=True)
            if limit.mode == 'CONE':
                grid = box.grid_flow(columns=2, align=True)
                for name in ("cone_left", "cone_right", "cone_up", "cone_down"):
                    grid.prop(limit, name)
            elif limit.mode == 'HINGE':
                row = box.row(align=True)
                row.prop(limit, "hinge_min")
                row.prop(limit, "hinge_max")
