"""Register classes, then properties, then handlers, then the command-line command; unregister in reverse."""

from __future__ import annotations

import bpy

from . import bake, cli, controls_bake, handlers, operators, overlay, props, snap, ui

classes = (
    props.FabrikJointLimit,
    props.FabrikBasePose,
    props.FabrikChain,
    props.FabrikRigSettings,
    operators.POSE_OT_fabrik_chain_add,
    operators.POSE_OT_fabrik_chain_remove,
    bake.POSE_OT_fabrik_bake,
    snap.POSE_OT_fabrik_snap_ik_to_fk,
    snap.POSE_OT_fabrik_snap_fk_to_ik,
    controls_bake.POSE_OT_fabrik_bake_controls,
    ui.FABRIK_UL_chains,
    ui.VIEW3D_PT_fabrik,
    ui.VIEW3D_PT_fabrik_chain,
    ui.VIEW3D_PT_fabrik_ikfk,
    ui.VIEW3D_PT_fabrik_limit,
    ui.VIEW3D_PT_fabrik_bake,
)

_register_classes, _unregister_classes = bpy.utils.register_classes_factory(classes)

PROPERTIES = (
    (bpy.types.Object, "fabrik", props.FabrikRigSettings, "FABRIK IK", "FABRIK IK chains of this armature"),
    (bpy.types.PoseBone, "fabrik_limit", props.FabrikJointLimit, "FABRIK Joint Limit",
     "How far this bone may turn from its rest direction when solved by FABRIK IK"),
    (bpy.types.PoseBone, "fabrik_base", props.FabrikBasePose, "FABRIK Base Pose",
     "The rotation this bone has without FABRIK IK"),
)

_cli_commands: list = []


def register() -> None:
    _register_classes()
    for owner, attr, group, name, description in PROPERTIES:
        setattr(owner, attr, bpy.props.PointerProperty(type=group, name=name, description=description,
                                                       override=props.OVERRIDABLE))
    bpy.types.VIEW3D_MT_pose.append(ui.draw_pose_menu)
    handlers.install()
    overlay.install()  # only with a GPU (never in background mode)
    # ``blender --command fabrik_bake ...``: the handle is kept to unregister exactly this registration.
    _cli_commands.append(bpy.utils.register_cli_command(cli.COMMAND, cli.run))


def unregister() -> None:
    while _cli_commands:
        bpy.utils.unregister_cli_command(_cli_commands.pop())
    overlay.remove()
    handlers.remove()
    bpy.types.VIEW3D_MT_pose.remove(ui.draw_pose_menu)
    for owner, attr, *_ in reversed(PROPERTIES):
        if hasattr(owner, attr):
            delattr(owner, attr)
    _unregister_classes()
