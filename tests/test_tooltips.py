"""Every option shows a tooltip: operators have ``bl_description``, every property a name and description."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "fabrik_addon"
PROPERTIES = {"BoolProperty", "IntProperty", "FloatProperty", "EnumProperty", "StringProperty",
              "PointerProperty", "CollectionProperty", "FloatVectorProperty", "IntVectorProperty",
              "BoolVectorProperty"}


def missing(source: str) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and any(
                isinstance(base, ast.Attribute) and base.attr == "Operator" for base in node.bases):
            assigned = {target.id for item in node.body if isinstance(item, ast.Assign)
                        for target in item.targets if isinstance(target, ast.Name)}
            if "bl_description" not in assigned:
                out.append(f"{node.name}: no bl_description")
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) in PROPERTIES:
            keywords = {k.arg for k in node.keywords}
            for needed in ("name", "description"):
                if needed not in keywords:
                    out.append(f"line {node.lineno}: a property without {needed}")
    return out


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_operators_and_properties_have_tooltips(path):
    assert missing(path.read_text()) == []


def test_the_check_finds_a_missing_tooltip():
    source = ("class X(bpy.types.Operator):\n    bl_idname = 'x.y'\n"
              "    a: bpy.props.IntProperty(name='A')\n")
    assert missing(source) == ["X: no bl_description", "line 3: a property without description"]
