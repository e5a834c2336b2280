"""UI text stays translatable: no f-strings in labels or reports, and formatted text goes through iface_/rpt_.

Blender translates a label's ``text`` and a report's message by looking the finished string up; text
made with an f-string (or ``"...".format`` on the raw literal) never matches a translation, so it must
be ``iface_("... {} ...").format(...)`` (labels) or ``rpt_("... {} ...").format(...)`` (reports).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "fabrik_addon"
TRANSLATORS = {"iface_", "rpt_"}


def ui_texts(tree: ast.AST):
    """(what, node) for every label text and report message in ``tree``."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr == "label":
            for keyword in node.keywords:
                if keyword.arg == "text":
                    yield "label", keyword.value
        elif node.func.attr == "report" and isinstance(node.func.value, ast.Name) and node.func.value.id == "self":
            for arg in node.args[1:]:
                yield "report", arg


def problem(node: ast.AST) -> str | None:
    """Why ``node`` cannot be translated, or None."""
    for part in ast.walk(node):
        if isinstance(part, ast.JoinedStr):
            return "f-string"
        if (isinstance(part, ast.Call) and isinstance(part.func, ast.Attribute) and part.func.attr == "format"
                and not (isinstance(part.func.value, ast.Call) and isinstance(part.func.value.func, ast.Name)
                         and part.func.value.func.id in TRANSLATORS)):
            return ".format on text not wrapped in iface_/rpt_"
        if isinstance(part, ast.BinOp) and isinstance(part.op, ast.Mod) and isinstance(part.left, ast.Constant):
            return "%-formatting"
    return None


def findings(source: str, filename: str = "<source>") -> list[str]:
    return [f"{filename}:{node.lineno}: {what} text uses {why}" for what, node in ui_texts(ast.parse(source))
            if (why := problem(node)) is not None]


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_labels_and_reports_are_translatable(path):
    assert findings(path.read_text(), str(path.relative_to(PACKAGE))) == []


@pytest.mark.parametrize("source", [
    'layout.label(text=f"{n} bones")',
    'box.label(text="{} bones".format(n))',
    'self.report({"INFO"}, f"Baked {n}")',
    'self.report({"INFO"}, "Baked %d" % n)',
    'self.report({"INFO"}, "Baked {}".format(n))',
])
def test_the_check_finds_untranslatable_text(source):
    assert findings(source)


@pytest.mark.parametrize("source", [
    'layout.label(text=iface_("{} bones").format(n), translate=False)',
    'layout.label(text="Not solved yet")',
    'self.report({"INFO"}, rpt_("Baked {}").format(n))',
    'self.report({"ERROR"}, str(error))',
])
def test_the_check_accepts_translatable_text(source):
    assert not findings(source)
