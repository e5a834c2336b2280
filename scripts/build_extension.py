"""Build the extension zip with Blender's own extension tool, then validate it.

Blender wants ``blender_manifest.toml`` beside the package's ``__init__.py``; the repository keeps the
manifest (and LICENSE) at the top level, so this stages them with ``fabrik_addon/`` into ``build/fabrik_ik/``.

    python scripts/build_extension.py [--output-dir dist]

Prints the path of the zip.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def blender_ext_tool() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("bpy")
    if spec is None or spec.origin is None:
        sys.exit("error: the bpy module is not installed (run 'make test' or 'make build' to set up .venv)")
    tools = sorted(Path(spec.origin).parent.glob("*/scripts/addons_core/bl_pkg/cli/blender_ext.py"))
    if not tools:
        sys.exit("error: Blender's extension tool (blender_ext.py) was not found in the bpy package")
    return tools[-1]


def stage(build_dir: Path) -> Path:
    source = build_dir / "fabrik_ik"
    if source.exists():
        shutil.rmtree(source)
    shutil.copytree(ROOT / "fabrik_addon", source, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy2(ROOT / "blender_manifest.toml", source / "blender_manifest.toml")
    shutil.copy2(ROOT / "LICENSE", source / "LICENSE")
    return source


def build(output_dir: Path, build_dir: Path | None = None) -> Path:
    tool = blender_ext_tool()
    source = stage(build_dir or ROOT / "build")
    output_dir.mkdir(parents=True, exist_ok=True)
    for old in output_dir.glob("fabrik_ik-*.zip"):
        old.unlink()
    subprocess.run([sys.executable, str(tool), "build", "--source-dir", str(source), "--output-dir",
                    str(output_dir)], check=True)
    (zip_path,) = output_dir.glob("fabrik_ik-*.zip")
    subprocess.run([sys.executable, str(tool), "validate", str(zip_path)], check=True)
    return zip_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, default=ROOT / "dist")
    args = parser.parse_args()
    print(build(args.output_dir))


if __name__ == "__main__":
    main()
