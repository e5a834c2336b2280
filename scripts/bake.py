"""Headless bake of FABRIK IK chains to keyframes, for pipelines and render farms.

With Blender:      blender -b scene.blend --python scripts/bake.py -- --frames 1-250 --output baked.blend
With the bpy wheel: python scripts/bake.py scene.blend --frames 1-250 --output baked.blend

Bakes every armature with enabled chains; never overwrites the input unless --in-place is given.
Exits non-zero with a message on stderr on failure.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def parse(argv: list[str], inside_blender: bool) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bake.py", description="Bake FABRIK IK chains to keyframes.")
    if not inside_blender:
        parser.add_argument("scene", type=Path, help=".blend file to bake")
    parser.add_argument("--frames", required=True, help="frame range START-END, e.g. 1-250")
    parser.add_argument("--step", type=int, default=1, help="key every Nth frame (default 1)")
    parser.add_argument("--reduce", type=float, default=0.0, help="key reduction tolerance (scene units)")
    parser.add_argument("--output", type=Path, help="where to save the baked file")
    parser.add_argument("--in-place", action="store_true", help="overwrite the input file instead")
    args = parser.parse_args(argv)
    try:
        start, end = (int(x) for x in args.frames.split("-", 1)) if args.frames.count("-") == 1 else (None, None)
    except ValueError:
        start = end = None
    if start is None or end is None or end < start:
        parser.error(f"bad frame range '{args.frames}': give START-END with START <= END")
    args.start, args.end = start, end
    if args.output is None and not args.in_place:
        parser.error("give --output FILE (or --in-place to overwrite the input)")
    if args.step < 1:
        parser.error("--step must be at least 1")
    return args


def main() -> int:
    inside_blender = "--" in sys.argv or Path(sys.executable).stem.startswith("blender")
    argv = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:]
    args = parse(argv, inside_blender)
    import bpy

    if not inside_blender:
        if not args.scene.is_file():
            print(f"error: scene file '{args.scene}' not found", file=sys.stderr)
            return 2
        bpy.ops.wm.open_mainfile(filepath=str(args.scene))
    source = Path(bpy.data.filepath)
    sys.path.insert(0, str(ROOT))
    import fabrik_addon

    registered_here = not hasattr(bpy.types.Object, "fabrik")
    if registered_here:
        fabrik_addon.register()
        bpy.ops.wm.revert_mainfile()  # re-read so the chains' settings attach to the registered types
    try:
        return bake_scene(args, source)
    finally:
        if registered_here:
            fabrik_addon.unregister()  # bpy 4.2 crashes at exit with add-on types still registered


def bake_scene(args: argparse.Namespace, source: Path) -> int:
    import bpy

    from fabrik_addon import bake

    rigs = [ob for ob in bpy.context.scene.objects
            if ob.type == 'ARMATURE' and ob.fabrik.enabled and any(c.enabled for c in ob.fabrik.chains)]
    if not rigs:
        print(f"error: '{source.name}' has no armature with enabled FABRIK chains", file=sys.stderr)
        return 2
    for ob in rigs:
        indices = [i for i, chain in enumerate(ob.fabrik.chains) if chain.enabled]
        try:
            options = bake.BakeOptions(args.start, args.end, args.step, args.reduce, disable_chains=True)
            result = bake.bake_chains(bpy.context, ob, indices, options)
        except ValueError as error:
            print(f"error: {ob.name}: {error}", file=sys.stderr)
            return 1
        print(f"{ob.name}: baked {result.frames} frames, {result.bones} bones, {result.keys} keys in "
              f"{result.seconds:.2f} s ({result.frames / max(result.seconds, 1e-9):.0f} frames/s); "
              f"live IK vs keys: max {result.max_error:.3g}, mean {result.mean_error:.3g}")
    target = source if args.in_place else args.output.resolve()
    bpy.ops.wm.save_as_mainfile(filepath=str(target), copy=not args.in_place)
    print(f"saved {target}")
    return 0


if __name__ == "__main__":
    code = main()
    if code:
        sys.exit(code)
