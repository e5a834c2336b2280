"""Headless bake of FABRIK IK chains with the bpy wheel: the ``fabrik_bake`` command without Blender.

    python scripts/bake.py scene.blend --frames 1-250 --output baked.blend
    blender -b --python scripts/bake.py -- scene.blend --frames 1-250 --output baked.blend

Where the extension is installed and enabled, Blender itself runs the same code:
``blender --command fabrik_bake scene.blend --frames 1-250 --output baked.blend``. Both accept
``--frames -10-20``, ``--step N``, ``--reduce DISTANCE``, ``--in-place``, ``--enable-chains`` and
``--to-controls`` (FK animation to IK controls); see ``fabrik_addon/cli.py``. Exits non-zero with a
message on stderr on failure.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    import bpy

    import fabrik_addon
    from fabrik_addon import cli

    registered_here = not hasattr(bpy.types.Object, "fabrik")
    if registered_here:
        fabrik_addon.register()
    try:
        return cli.run(argv, prog="bake.py")
    finally:
        if registered_here:
            fabrik_addon.unregister()  # bpy 4.2 crashes at exit with add-on types still registered


if __name__ == "__main__":
    code = main(sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:])
    if code:
        sys.exit(code)
