"""Run in a fresh Python with a throw-away user directory: install the built zip as a user would.

Prints one JSON line describing what was registered at each step.
"""

import json
import sys

import bpy  # isort: skip  (addon_utils exists only once bpy is imported)
import addon_utils  # isort: skip

EVENTS = ("frame_change_post", "depsgraph_update_post", "load_post", "undo_post", "redo_post")
CLASSES = {
    "Operator": ("POSE_OT_fabrik_chain_add", "POSE_OT_fabrik_chain_remove", "POSE_OT_fabrik_bake"),
    "UIList": ("FABRIK_UL_chains",),
    "Panel": ("VIEW3D_PT_fabrik", "VIEW3D_PT_fabrik_chain", "VIEW3D_PT_fabrik_ikfk", "VIEW3D_PT_fabrik_limit",
              "VIEW3D_PT_fabrik_bake"),
    "PropertyGroup": ("FabrikChain", "FabrikRigSettings", "FabrikJointLimit", "FabrikBasePose"),
}


def snapshot(module):
    return {
        "enabled": module in bpy.context.preferences.addons,
        "classes": sorted(name for base, names in CLASSES.items() for name in names
                          if getattr(bpy.types, base).bl_rna_get_subclass_py(name) is not None),
        "properties": sorted(f"{owner.__name__}.{attr}" for owner, attr in
                             ((bpy.types.Object, "fabrik"), (bpy.types.PoseBone, "fabrik_limit"),
                              (bpy.types.PoseBone, "fabrik_base")) if hasattr(owner, attr)),
        "handlers": {event: sum(1 for h in getattr(bpy.app.handlers, event)
                                if getattr(h, "__module__", "").startswith(module)) for event in EVENTS},
    }


def main():
    zip_path = sys.argv[sys.argv.index("--") + 1]
    result = bpy.ops.extensions.package_install_files(filepath=zip_path, repo="user_default",
                                                      enable_on_install=True)
    module = "bl_ext.user_default.fabrik_ik"
    steps = {"install": sorted(result), "after_install": snapshot(module)}
    addon_utils.disable(module, default_set=True)
    steps["after_disable"] = snapshot(module)
    addon_utils.enable(module, default_set=True)
    steps["after_reenable"] = snapshot(module)
    addon_utils.disable(module, default_set=True)
    addon_utils.enable(module, default_set=True)
    steps["after_second_cycle"] = snapshot(module)
    print("RESULT " + json.dumps(steps))


main()
