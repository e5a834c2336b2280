"""Register classes, then properties, then handlers; unregister in the reverse order."""

from __future__ import annotations

import bpy

from . import bake, handlers, operators, props, ui

classes = (
    props.FabrikJointLimit,
    props.FabrikBasePose,
    props.FabrikChain,
    props.FabrikRigSettings,
    operators.POSE_OT_fabrik_chain_add,
    operators.POSE_OT_fabrik_chain_remove,
    bake.POSE_OT_fabrik_bake,
    ui.FABRIK_UL_chains,
    ui.VIEW3D_PT_fabrik,
)

_register_classes, _unregister_classes = bpy.utils.register_classes_factory(classes)

PROPERTIES = (
    (bpy.types.Object, "fabrik", props.FabrikRigSettings, "FABRIK IK", "FABRIK IK chains of this armature"),
    (bpy.types.PoseBone, "fabrik_limit", props.FabrikJointLimit, "FABRIK Joint Limit",
     "How far this bone may turn from its rest direction when solved by FABRIK IK"),
    (bpy.types.PoseBone, "fabrik_base", props.FabrikBasePose, "FABRIK Base Pose",
     "The rotation this bone has without FABRIK IK"),
)


def register() -> None:
    _register_classes()
    for owner, attr, group, name, description in PROPERTIES:
        setattr(owner, attr, bpy.props.PointerProperty(type=group, name=name, description=description,
                                                       override=props.OVERRIDABLE))
    handlers.install()


def unregister() -> None:
    handlers.remove()
    for owner, attr, *_ in reversed(PROPERTIES):
        if hasattr(owner, attr):
            delattr(owner, attr)
    _unregister_classes()
