"""The solver core must work without Blender."""

import ast
import subprocess
import sys
from pathlib import Path

SOLVER = Path(__file__).parents[2] / "fabrik_addon" / "solver"


def test_solver_imports_with_bpy_absent():
    code = (
        "import sys\n"
        "sys.modules['bpy'] = None\n"  # any 'import bpy' now raises ImportError
        "sys.modules['mathutils'] = None\n"
        "import fabrik_addon.solver as s\n"
        "print(s.solve_chain([[0, 0], [1, 0]], [0, 1]).reached)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=SOLVER.parents[1], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


def test_no_solver_module_names_blender():
    for path in SOLVER.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                assert not any(n.split(".")[0] in {"bpy", "mathutils", "bmesh"} for n in names), path
