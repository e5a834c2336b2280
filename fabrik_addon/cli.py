"""The ``fabrik_bake`` command: bake a .blend file's FABRIK IK chains to keyframes without the UI.

    blender --command fabrik_bake scene.blend --frames 1-250 --output baked.blend
    blender --command fabrik_bake mocap.blend --frames 1-250 --to-controls --output controls.blend

With ``--to-controls`` it goes the other way: the bones' own (FK or motion-capture) animation becomes keys on
every chain's target and pole (:mod:`.controls_bake`), so a farm can convert a mocap library.
:mod:`.registration` registers :func:`run` with ``bpy.utils.register_cli_command`` (Blender 4.2+), so
the command works wherever the extension is enabled (a render-farm worker needs no repository);
``scripts/bake.py`` runs the same function with the bpy wheel.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import bpy

COMMAND = "fabrik_bake"
USAGE_ERROR = 2  # as argparse: bad arguments, missing or unreadable files
BAKE_ERROR = 1

# Blender opens plain, gzip- and zstd-compressed .blend files; anything else is refused before loading.
BLEND_MAGIC = (b"BLENDER", b"\x1f\x8b", b"\x28\xb5\x2f\xfd")
FRAMES = re.compile(r"^\s*(-?\d+)\s*(?:-\s*(-?\d+)\s*)?$")


class UsageError(Exception):
    """Arguments that cannot work; the message says why."""


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting: the command runs inside Blender, which must not exit from it."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(message)

    def exit(self, status: int = 0, message: str | None = None):  # type: ignore[override]
        if message:
            print(message, file=sys.stderr, end="")
        raise _Exit(status)


@dataclass
class Options:
    scene: Path
    start: int
    end: int
    step: int
    reduce: float
    output: Path | None
    in_place: bool
    enable_chains: bool
    to_controls: bool = False


def parser(prog: str = "blender --command " + COMMAND) -> argparse.ArgumentParser:
    p = _Parser(prog=prog, description="Bake the FABRIK IK chains of a .blend file to rotation keyframes. "
                "Bakes every armature with enabled chains and never overwrites the input unless --in-place is given.")
    p.add_argument("scene", type=Path, help=".blend file to bake")
    p.add_argument("--frames", required=True, metavar="START-END",
                   help="frame range, e.g. 1-250, -10-20 or -10--5 (one number: a single frame)")
    p.add_argument("--step", type=int, default=1, help="key every Nth frame; the last one is always keyed (default 1)")
    p.add_argument("--reduce", type=float, default=0.0, metavar="DISTANCE",
                   help="drop keys while the baked pose stays within this distance of the live IK "
                   "(default 0: keep every key)")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--output", type=Path, metavar="FILE", help="save the baked scene here (a new .blend file)")
    where.add_argument("--in-place", action="store_true", help="overwrite the input file instead")
    p.add_argument("--enable-chains", action="store_true",
                   help="switch disabled chains and rigs on first (a bake switches its chains off)")
    p.add_argument("--to-controls", action="store_true",
                   help="the other way round: key every chain's target and pole (made as empties when missing) so "
                   "that IK plays back the bones' own (FK or mocap) animation; the chains are switched on")
    return p


def _joined(argv: list[str]) -> list[str]:
    """``--frames -10-20`` as ``--frames=-10-20``: argparse would take a value starting with '-' for an option."""
    out: list[str] = []
    k = 0
    while k < len(argv):
        if argv[k] == "--frames" and k + 1 < len(argv):
            out.append("--frames=" + argv[k + 1])
            k += 2
        else:
            out.append(argv[k])
            k += 1
    return out


def parse(argv: list[str], prog: str | None = None) -> Options:
    """Options from the command's arguments; raises :class:`UsageError` naming what is wrong."""
    args = (parser(prog) if prog else parser()).parse_args(_joined(list(argv)))
    match = FRAMES.match(args.frames)
    if match is None:
        raise UsageError(f"bad frame range '{args.frames}': give START-END, e.g. 1-250 or -10-20")
    start = int(match.group(1))
    end = int(match.group(2)) if match.group(2) is not None else start
    if end < start:
        raise UsageError(f"bad frame range '{args.frames}': START must not be after END")
    if args.step < 1:
        raise UsageError("--step must be at least 1")
    from .bake import check_range  # (imported on use, as the bakes are)

    try:
        check_range(start, end, args.step)
    except ValueError as error:
        raise UsageError(f"bad frame range '{args.frames}': {error}") from error
    if not args.reduce >= 0.0 or not math.isfinite(args.reduce):  # (NaN fails both)
        raise UsageError("--reduce must be a finite distance, not negative")
    scene = args.scene.expanduser().absolute()
    output = args.output.expanduser().absolute() if args.output is not None else None
    if output is not None:
        if output.suffix != ".blend":
            raise UsageError(f"--output '{args.output}' must end in .blend")
        if output.resolve() == scene.resolve():
            raise UsageError(f"--output is the input file '{args.scene}'; "
                             "pass --in-place (without --output) to overwrite it")
        if not output.parent.is_dir():
            raise UsageError(f"the folder of --output '{args.output}' does not exist")
    return Options(scene, start, end, args.step, args.reduce, output, args.in_place, args.enable_chains,
                   args.to_controls)


def check_scene(path: Path) -> None:
    """Raise :class:`UsageError` unless ``path`` is a readable .blend file."""
    if not path.is_file():
        raise UsageError(f"scene file '{path}' not found")
    try:
        with path.open("rb") as f:
            head = f.read(7)
    except OSError as error:
        raise UsageError(f"cannot read '{path}': {error.strerror}") from error
    if not head.startswith(BLEND_MAGIC):
        raise UsageError(f"'{path}' is not a .blend file")


def run(argv: list[str], prog: str | None = None) -> int:
    """The command: parse, open, bake every armature with enabled chains, save. Returns the exit code."""
    try:
        options = parse(argv, prog)
        check_scene(options.scene)
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return USAGE_ERROR
    except _Exit as done:
        return done.code
    try:
        bpy.ops.wm.open_mainfile(filepath=str(options.scene), load_ui=False)
    except RuntimeError as error:
        print(f"error: Blender could not open '{options.scene}': {str(error).strip()}", file=sys.stderr)
        return USAGE_ERROR
    if not hasattr(bpy.types.Object, "fabrik"):
        print("error: the FABRIK IK extension is not enabled", file=sys.stderr)
        return BAKE_ERROR
    return bake_open_file(options)


def bake_open_file(options: Options) -> int:
    from . import bake

    scene = bpy.context.scene
    name = options.scene.name
    armatures = [ob for ob in scene.objects if ob.type == 'ARMATURE' and len(ob.fabrik.chains)]
    if options.to_controls:
        return _to_controls(options, armatures)
    if options.enable_chains:
        for ob in armatures:
            ob.fabrik.enabled = True
            for chain in ob.fabrik.chains:
                chain.enabled = True
    rigs = [ob for ob in armatures if ob.fabrik.enabled and any(c.enabled for c in ob.fabrik.chains)]
    if not rigs:
        if not armatures:
            print(f"error: '{name}' has no armature with enabled FABRIK chains "
                  f"(scene '{scene.name}' has no FABRIK chains at all)", file=sys.stderr)
        else:
            counts = ((ob.name, len(ob.fabrik.chains)) for ob in armatures)
            off = ", ".join(f"{rig} ({n} chain{'s' if n != 1 else ''})" for rig, n in counts)
            print(f"error: '{name}' has no armature with enabled FABRIK chains: the chains of {off} are "
                  "switched off (a bake switches its chains off). Switch them on in the FABRIK panel, "
                  "or pass --enable-chains", file=sys.stderr)
        return USAGE_ERROR
    for ob in rigs:
        indices = [i for i, chain in enumerate(ob.fabrik.chains) if chain.enabled]
        try:
            result = bake.bake_chains(bpy.context, ob, indices, bake.BakeOptions(
                options.start, options.end, options.step, options.reduce, disable_chains=True))
        except ValueError as error:
            print(f"error: {ob.name}: {error}", file=sys.stderr)
            return BAKE_ERROR
        fps = result.frames / max(result.seconds, 1e-9)
        print(f"{ob.name}: baked {result.frames} frames, {result.bones} bones, {result.keys} keys in "
              f"{result.seconds:.2f} s ({fps:.0f} frames/s); live IK vs keys: max {result.max_error:.3g}, "
              f"mean {result.mean_error:.3g}")
    return _save(options)


def _to_controls(options: Options, armatures: list) -> int:
    """``--to-controls``: every chain of every armature with chains, its targets and poles keyed from its FK."""
    from . import controls_bake

    if not armatures:
        print(f"error: '{options.scene.name}' has no armature with FABRIK chains", file=sys.stderr)
        return USAGE_ERROR
    for ob in armatures:
        try:
            result = controls_bake.bake_controls(bpy.context, ob, list(range(len(ob.fabrik.chains))),
                                                 controls_bake.ControlsOptions(options.start, options.end,
                                                                               options.step, options.reduce))
        except ValueError as error:
            print(f"error: {ob.name}: {error}", file=sys.stderr)
            return BAKE_ERROR
        created = f"; new: {', '.join(result.created)}" if result.created else ""
        print(f"{ob.name}: keyed the controls of {len(result.chains)} chains over {result.frames} frames "
              f"({result.keys} keys{created}) in {result.seconds:.2f} s; IK playback vs FK: largest joint "
              f"distance {result.max_error:.3g} ({result.max_relative:.2g} chain lengths)")
        for note in result.notes:
            print(f"{ob.name}: {note}")
    return _save(options)


def _save(options: Options) -> int:
    target = options.scene if options.in_place else options.output
    try:
        bpy.ops.wm.save_as_mainfile(filepath=str(target), copy=not options.in_place)
    except RuntimeError as error:
        print(f"error: could not save '{target}': {str(error).strip()}", file=sys.stderr)
        return BAKE_ERROR
    print(f"saved {target}")
    return 0
