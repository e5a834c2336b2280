"""The add-on's modules import one way: no cycle, counting imports inside functions too."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "fabrik_addon"


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package at ``root`` (packages by __init__)."""
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, anywhere in its file.

    ``from package import name`` points at the submodule ``package.name`` when there is one, else at
    the package itself; the parent packages a submodule import runs on the way are not counted.
    """
    found = modules(root)
    graph: dict[str, set[str]] = {name: set() for name in found}
    for name, path in found.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[:len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in found else base)
            graph[name].update(t for t in targets if t in found and t != name)
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_addon_has_no_import_cycle():
    graph = import_graph(PACKAGE)
    assert "fabrik_addon.rig.solve" in graph and graph["fabrik_addon.rig.solve"]  # the walk sees the package
    assert cycle(graph) is None, " -> ".join(cycle(graph) or [])


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from .sub import b\n")
    (package / "sub" / "b.py").write_text("import os\n\n\ndef late():\n    from ..a import thing\n")
    assert cycle(import_graph(package)) == ["pkg.a", "pkg.sub.b", "pkg.a"]
    (package / "sub" / "b.py").write_text("import os\n")
    assert cycle(import_graph(package)) is None
