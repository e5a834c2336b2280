"""The panels' draw code names only real properties and operators, in every state a chain can be in.

Blender draws panels only with a window, which the bpy wheel has none of; so each ``draw`` runs with a
layout that records what it is asked to show, and every property and operator named is looked up in
the real RNA of this Blender version (a misspelt property draws nothing and only prints to the console).
"""

from types import SimpleNamespace

import bpy
import pytest
from rigs import add_chain, empty, straightish_chain

from fabrik_addon import ui

PANELS = (ui.VIEW3D_PT_fabrik, ui.VIEW3D_PT_fabrik_chain, ui.VIEW3D_PT_fabrik_ikfk, ui.VIEW3D_PT_fabrik_limit,
          ui.VIEW3D_PT_fabrik_bake)


class Layout:
    """Records labels; checks each property and operator against the RNA."""

    def __init__(self, shown: list[str]) -> None:
        self.shown = shown
        self.use_property_split = False
        self.use_property_decorate = True

    def _nested(self, *args, **kwargs):
        return Layout(self.shown)

    row = column = box = grid_flow = split = _nested

    def separator(self, **kwargs) -> None:
        pass

    def label(self, *, text="", **kwargs) -> None:
        assert isinstance(text, str)
        self.shown.append(text)

    def prop(self, data, name, **kwargs) -> None:
        assert name in data.bl_rna.properties, f"{data.bl_rna.identifier} has no property '{name}'"
        self.shown.append(name)

    def prop_search(self, data, name, search_data, search_name, **kwargs) -> None:
        self.prop(data, name)
        assert search_name in search_data.bl_rna.properties, search_name

    def operator(self, idname, **kwargs) -> None:
        module, name = idname.split(".")
        assert hasattr(getattr(bpy.ops, module), name), idname
        getattr(getattr(bpy.ops, module), name).get_rna_type()
        self.shown.append(idname)

    def template_list(self, list_type, list_id, data, name, active_data, active_name, **kwargs) -> None:
        assert list_type in {"FABRIK_UL_chains"}
        self.prop(data, name)
        self.prop(active_data, active_name)


def draw_all(ob, bone=None) -> list[str]:
    context = SimpleNamespace(object=ob, active_pose_bone=bone, mode='POSE', scene=bpy.context.scene)
    shown: list[str] = []
    for panel in PANELS:
        if panel.poll(context):
            panel.draw(SimpleNamespace(layout=Layout(shown)), context)
    return shown


@pytest.fixture
def arm():
    ob = straightish_chain("Arm", 3)
    return ob


def test_no_chain_asks_for_a_tip_bone(arm):
    shown = draw_all(arm)
    assert "Pose Mode: make the tip bone active, then +" in shown
    assert "pose.fabrik_chain_add" in shown and "tip_bone" not in shown


@pytest.mark.parametrize("mode", ['NONE', 'CONE', 'HINGE'])
def test_every_sub_panel_draws_a_solved_chain_and_a_limit(arm, mode):
    target = empty("Target", (0.5, 0.5, 2.0))
    add_chain(arm, "b2", 3, target, pole=straightish_chain("PoleRig", 1))
    arm.pose.bones["b1"].fabrik_limit.mode = mode
    bpy.context.view_layer.update()
    shown = draw_all(arm, arm.pose.bones["b1"])
    for expected in ("tip_bone", "target", "pole", "pole_bone", "influence", "pose.fabrik_bake",
                     "pose.fabrik_snap_ik_to_fk", "mode"):
        assert expected in shown, expected
    assert ("cone_up" in shown) == (mode == 'CONE') and ("hinge_min" in shown) == (mode == 'HINGE')
    assert any(text.startswith(("Reached", "Unreachable")) for text in shown), shown


def test_an_invalid_chain_shows_its_message(arm):
    add_chain(arm, "missing", 2, empty("Target"))
    bpy.context.view_layer.update()
    assert any("not found" in text for text in draw_all(arm))
