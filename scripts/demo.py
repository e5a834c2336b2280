"""Showcase: build four rigs from nothing, solve them live, render, save, bake, report.

    python scripts/demo.py [--frames 120] [--out out] [--no-render]

Writes out/demo.blend (live: chains enabled, nothing baked, so it solves when opened with the extension
enabled), out/demo_baked.blend (the same scene with the chains baked to keys and switched off),
out/demo_report.json (per chain: reach error and iterations per frame, bake fidelity) and out/demo.png (a
Cycles contact sheet of four frames: targets as yellow spheres, poles as blue cones with a line from the
joint they bend, each rig and frame labelled).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import bpy  # noqa: E402  # isort: skip
import bmesh  # noqa: E402  # isort: skip  (importable only once bpy is)

from mathutils import Matrix  # noqa: E402

import fabrik_addon  # noqa: E402
from fabrik_addon import bake  # noqa: E402
from rigkit.blender import add_chain, armature, dark_world_and_sun, empty, key_path, material, skin  # noqa: E402


def key_every_frame(ob, frames, position):
    key_path(ob, [position(f) for f in frames], frames)


def handle(name, location, parent=None, shape='SPHERE', size=0.12):
    """A target or pole empty, small enough not to hide the rig in the viewport."""
    return empty(name, location, parent=parent, shape=shape, size=size)


def chain(ob, tip, length, target, pole=None, solver='FABRIK', **settings):
    return add_chain(ob, tip, length, target, pole, solver, **{"tolerance": 1e-3, "iterations": 30, **settings})


def build(frames):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = frames[0], frames[-1]

    # 1. A two-bone arm with a pole, solved by the law of cosines.
    arm = armature("Arm", [("upper", (0, 0, 1.0), (0, 0, 1.9), None, False),
                           ("fore", (0, 0, 1.9), (0.05, 0, 2.7), "upper", True)], location=(-4.0, 0.0, 0.0))
    skin(arm, (0.85, 0.35, 0.2))
    hand = handle("Arm_target", (0, 0, 0))
    # Within the arm's 1.7 reach of the shoulder (at z = 1): at most about 1.5 away.
    key_every_frame(hand, frames, lambda f: (-4.0 + 0.9 * math.cos(f / 12), 0.5 * math.sin(f / 9),
                                             1.6 + 0.5 * math.sin(f / 12)))
    pole = handle("Arm_pole", (-4.0, -1.5, 1.5), shape='CONE')
    chain(arm, "fore", 2, hand, pole, solver='TWO_BONE')

    # 2. A tentacle of 7 bones with elliptical cone limits, following an animated target.
    bones = [(f"t{i}", (0, 0, 0.45 * i), (0, 0, 0.45 * (i + 1)), f"t{i - 1}" if i else None, i > 0)
             for i in range(7)]
    tentacle = armature("Tentacle", bones, location=(-1.3, 0.0, 0.0))
    skin(tentacle, (0.4, 0.2, 0.75), radius=0.1)
    for pb in tentacle.pose.bones[1:]:
        limit = pb.fabrik_limit
        limit.mode = 'CONE'
        limit.cone_left, limit.cone_right = math.radians(35), math.radians(35)
        limit.cone_up, limit.cone_down = math.radians(20), math.radians(50)
    tip = handle("Tentacle_target", (0, 0, 0))
    key_every_frame(tip, frames, lambda f: (-1.3 + 1.4 * math.sin(f / 10), 1.0 * math.sin(f / 5), 2.0))
    chain(tentacle, "t6", 7, tip)

    # 3. An eight-legged creature walking along +X, feet planted on targets while the body moves.
    legs: list[tuple] = [("body", (0, 0, 0.9), (0.01, 0, 1.1), None, False)]
    angles = [math.radians(a) for a in (35, 70, 110, 145, -35, -70, -110, -145)]
    for i, a in enumerate(angles):
        d = np.array([math.cos(a), math.sin(a), 0.0])
        hip = np.array([0, 0, 0.9]) + 0.25 * d
        knee = hip + 0.45 * d + np.array([0, 0, 0.35])
        foot = knee + 0.55 * d - np.array([0, 0, 0.75])
        legs += [(f"coxa{i}", tuple(hip - 0.1 * d), tuple(hip), "body", False),
                 (f"femur{i}", tuple(hip), tuple(knee), f"coxa{i}", True),
                 (f"tibia{i}", tuple(knee), tuple(foot), f"femur{i}", True)]
    spider = armature("Spider", legs, location=(1.5, 0.0, 0.0))
    skin(spider, (0.2, 0.55, 0.3), radius=0.06)
    speed, period, stride_time = 0.02, 24, 8
    key_every_frame(spider, frames, lambda f: (1.5 + speed * f, 0.0, 0.0))
    for i in range(len(angles)):
        rest = np.array(spider.data.bones[f"tibia{i}"].tail_local) + np.array([1.5, 0.0, 0.0])
        phase = (i % 2) * period // 2

        def foot(f, rest=rest, phase=phase):
            cycle, t = divmod(f + phase, period)
            planted = speed * period * cycle
            if t < period - stride_time:
                return tuple(rest + np.array([planted + speed * period / 2, 0, 0]))
            s = (t - (period - stride_time)) / stride_time
            return tuple(rest + np.array([planted + speed * period * (0.5 + s), 0, 0.25 * math.sin(math.pi * s)]))

        target = handle(f"Spider_foot{i}", (0, 0, 0), size=0.06)
        key_every_frame(target, frames, foot)
        knee_pole = handle(f"Spider_knee{i}", tuple(np.array(spider.data.bones[f"femur{i}"].tail_local)
                                                   + np.array([0, 0, 1.0])), parent=spider, shape='CONE',
                          size=0.05)
        chain(spider, f"tibia{i}", 3, target, knee_pole)

    # 4. A torso reaching with both hands: the arms share the spine, so the chains form a tree.
    torso = armature("Torso", [
        ("spine0", (0, 0, 0.0), (0, 0, 0.6), None, False),
        ("spine1", (0, 0, 0.6), (0, 0, 1.2), "spine0", True),
        ("upper.L", (0.2, 0, 1.15), (0.7, 0, 1.1), "spine1", False),
        ("fore.L", (0.7, 0, 1.1), (1.2, 0, 1.1), "upper.L", True),
        ("upper.R", (-0.2, 0, 1.15), (-0.7, 0, 1.1), "spine1", False),
        ("fore.R", (-0.7, 0, 1.1), (-1.2, 0, 1.1), "upper.R", True),
    ], location=(6.2, 0.0, 0.3))
    skin(torso, (0.8, 0.7, 0.25), radius=0.09)
    left = handle("Torso_hand.L", (0, 0, 0))
    right = handle("Torso_hand.R", (0, 0, 0))
    # Each hand sweeps within about 0.8 of its shoulder (the arm is 1.0 long), the spine helping.
    key_every_frame(left, frames, lambda f: (6.2 + 0.2 + 0.65 + 0.15 * math.sin(f / 8), 0.35 * math.cos(f / 11),
                                             0.3 + 1.15 + 0.25 * math.sin(f / 7)))
    key_every_frame(right, frames, lambda f: (6.2 - 0.2 - 0.6, 0.4 * math.sin(f / 9),
                                              0.3 + 1.05 + 0.3 * math.cos(f / 10)))
    # Rigid shoulders converge more slowly than a lone chain: give the tree more passes.
    chain(torso, "fore.L", 4, left, iterations=100)
    chain(torso, "fore.R", 4, right, iterations=100)
    return [arm, tentacle, spider, torso]


def live_pass(rigs, frames):
    report: dict[str, dict[str, dict[str, list]]] = {
        ob.name: {c.name: {"error": [], "iterations": [], "status": []} for c in ob.fabrik.chains} for ob in rigs
    }
    started = time.perf_counter()
    for f in frames:
        bpy.context.scene.frame_set(f)
        bpy.context.evaluated_depsgraph_get()
        for ob in rigs:
            for c in ob.fabrik.chains:
                entry = report[ob.name][c.name]
                entry["error"].append(round(c.last_error, 6))
                entry["iterations"].append(c.last_iterations)
                entry["status"].append(c.status)
    return report, time.perf_counter() - started


TARGET_COLOR = (1.0, 0.78, 0.1)
POLE_COLOR = (0.2, 0.55, 1.0)
LABELS = {
    # rig: (x of the caption's centre, caption); the spider's is centred on its walk
    "Arm": (-4.4, "two-bone arm\nwith a pole"),
    "Tentacle": (-1.0, "7-bone tentacle\ncone limits"),
    "Spider": (2.7, "walking spider\n8 legs, poles"),
    "Torso": (6.2, "torso: 2 arms\nshare a spine"),
}
# The camera looks down at 72 degrees from vertical: text turned the same way faces it.
FACING = (math.radians(72), 0.0, 0.0)


def _mesh_object(name, build, color, parent=None, emission=2.0):
    bm = bmesh.new()
    build(bm)
    mesh = bpy.data.meshes.new(name)
    bm.to_mesh(mesh)
    bm.free()
    mesh.materials.append(material(f"{name}_material", color, emission=emission))
    ob = bpy.data.objects.new(name, mesh)
    ob.parent = parent
    bpy.context.scene.collection.objects.link(ob)
    return ob


def add_markers(rigs) -> None:
    """What the render cannot show of empties: a sphere on each target, a cone on each pole, and a line
    from each pole to the joint it bends (held by constraints to the bone and the pole, so it follows live)."""
    targets: dict[str, tuple] = {}
    poles: dict[str, tuple] = {}
    for ob in rigs:
        for c in ob.fabrik.chains:
            size = 0.06 if c.target.empty_display_size < 0.1 else 0.09
            targets.setdefault(c.target.name, (c.target, size))
            if c.pole is not None:
                poles.setdefault(c.pole.name, (c.pole, size))
                _pole_line(ob, c)
    for target, size in targets.values():
        _mesh_object(f"{target.name}_marker", lambda bm, r=size: bmesh.ops.create_uvsphere(
            bm, u_segments=16, v_segments=8, radius=r), TARGET_COLOR, parent=target)
    for pole, size in poles.values():
        _mesh_object(f"{pole.name}_marker", lambda bm, r=size: bmesh.ops.create_cone(
            bm, cap_ends=True, segments=12, radius1=r, radius2=0.0, depth=2.0 * r), POLE_COLOR, parent=pole)


def _pole_line(ob, c) -> None:
    bones = [c.tip_bone]
    while len(bones) < c.chain_length:
        bones.insert(0, ob.data.bones[bones[0]].parent.name)
    joint = bones[(len(bones) + 1) // 2]  # the bone whose head the pole pulls: elbow, knee

    def rod(bm) -> None:  # a thin rod along +Y, from 0 to 1
        bmesh.ops.create_cone(bm, cap_ends=True, segments=8, radius1=0.012, radius2=0.012, depth=1.0)
        bmesh.ops.rotate(bm, verts=bm.verts, matrix=Matrix.Rotation(-math.pi / 2, 3, 'X'))
        bmesh.ops.translate(bm, verts=bm.verts, vec=(0.0, 0.5, 0.0))

    line = _mesh_object(f"{ob.name}_{c.name}_pole_line", rod, POLE_COLOR, emission=1.0)
    # Constraints, not parenting: the rod starts at the joint and stretches to the pole every frame.
    start = line.constraints.new('COPY_LOCATION')
    start.target, start.subtarget = ob, joint
    stretch = line.constraints.new('STRETCH_TO')
    stretch.target = c.pole
    stretch.rest_length = 1.0
    stretch.volume = 'NO_VOLUME'


def text(name, body, location, size, parent=None, rotation=FACING, align='CENTER', color=(0.92, 0.92, 0.92),
         emission=1.5):
    data = bpy.data.curves.new(name, 'FONT')
    data.body = body
    data.size = size
    data.align_x = align
    data.materials.append(material(f"{name}_material", color, emission=emission))
    ob = bpy.data.objects.new(name, data)
    ob.location = location
    ob.rotation_euler = rotation
    ob.parent = parent
    ob.visible_shadow = False
    bpy.context.scene.collection.objects.link(ob)
    return ob


def add_labels(rigs) -> None:
    """Captions floating above each rig, against the dark background."""
    for ob in rigs:
        x, caption = LABELS[ob.name]
        text(f"{ob.name}_label", caption, (x, 0.5, 3.9), 0.42)


def setup_render(frames_to_show):
    scene = bpy.context.scene
    scene.render.engine = 'CYCLES'
    scene.cycles.device = 'CPU'
    scene.cycles.samples = 16
    scene.cycles.use_denoising = False
    scene.render.resolution_x, scene.render.resolution_y = 640, 360
    scene.render.resolution_percentage = 100
    scene.render.image_settings.file_format = 'PNG'
    dark_world_and_sun(scene)
    floor = bpy.data.meshes.new("Floor")
    floor.from_pydata([(-9, -4, 0), (10, -4, 0), (10, 4, 0), (-9, 4, 0)], [], [(0, 1, 2, 3)])
    scene.collection.objects.link(bpy.data.objects.new("Floor", floor))
    camera = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
    camera.location = (1.2, -12.5, 5.2)
    camera.rotation_euler = (math.radians(72), 0.0, 0.0)
    camera.data.lens = 30
    scene.collection.objects.link(camera)
    scene.camera = camera


def render_sheet(frames_to_show, out: Path) -> Path:
    """Render the frames into a 2x2 sheet, each cell captioned with its frame and a legend."""
    scene = bpy.context.scene
    # In camera space, 2 units ahead: the view there is 2.4 wide (30 mm lens, 36 mm sensor).
    caption = text("Caption", "", (-1.15, 0.6, -2.0), 0.075, parent=scene.camera, rotation=(0.0, 0.0, 0.0),
                   align='LEFT')
    tiles = []
    try:
        for f in frames_to_show:
            scene.frame_set(f)
            caption.data.body = f"frame {f}     yellow ball: target     blue cone + line: pole"
            path = out / f"frame_{f:04d}.png"
            scene.render.filepath = str(path)
            bpy.ops.render.render(write_still=True)
            image = bpy.data.images.load(str(path))
            w, h = image.size
            tiles.append(np.array(image.pixels[:]).reshape(h, w, 4))
            bpy.data.images.remove(image)
            path.unlink()
    finally:
        data = caption.data
        bpy.data.objects.remove(caption)
        bpy.data.curves.remove(data)
    sheet = np.concatenate([np.concatenate(tiles[i:i + 2], axis=1) for i in range(0, len(tiles), 2)][::-1], axis=0)
    h, w = sheet.shape[:2]
    image = bpy.data.images.new("contact_sheet", w, h, alpha=True)
    image.pixels[:] = sheet.ravel()
    image.filepath_raw = str(out / "demo.png")
    image.file_format = 'PNG'
    image.save()
    bpy.data.images.remove(image)
    return out / "demo.png"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=120)
    parser.add_argument("--out", type=Path, default=ROOT / "out")
    parser.add_argument("--no-render", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    fabrik_addon.register()
    try:
        run(args)
    finally:
        fabrik_addon.unregister()  # bpy 4.2 crashes at exit with add-on types still registered


def run(args) -> None:
    started = time.perf_counter()
    frames = list(range(1, args.frames + 1))
    rigs = build(frames)
    report, live_seconds = live_pass(rigs, frames)
    summary: dict[str, Any] = {"frames": len(frames), "live_seconds": round(live_seconds, 3),
                               "live_ms_per_frame": round(1000 * live_seconds / len(frames), 3), "rigs": {}}
    setup_render(frames)
    add_markers(rigs)
    add_labels(rigs)
    if not args.no_render:
        shown = [frames[int(k * (len(frames) - 1) / 3)] for k in range(4)]
        rendering = time.perf_counter()
        summary["picture"] = str(render_sheet(shown, args.out).relative_to(args.out.parent))
        summary["render_seconds"] = round(time.perf_counter() - rendering, 1)
        summary["picture_frames"] = shown
    # Saved live, before baking: chains enabled and no keys on their bones, so opening it (with the
    # extension enabled) solves every frame.
    bpy.context.scene.frame_set(frames[0])
    live_blend = args.out / "demo.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(live_blend), copy=True)
    for ob in rigs:
        indices = list(range(len(ob.fabrik.chains)))
        result = bake.bake_chains(bpy.context, ob, indices, bake.BakeOptions(frames[0], frames[-1]))
        rig: dict[str, Any] = {
            "bake_seconds": round(result.seconds, 3),
            "bake_frames_per_second": round(result.frames / result.seconds, 1),
            "bake_key_writing_share": round(result.key_seconds / result.seconds, 4),
            "bake_max_error": result.max_error,
            "bake_mean_error": result.mean_error,
            "chains": {},
        }
        summary["rigs"][ob.name] = rig
        for i, c in enumerate(ob.fabrik.chains):
            live = report[ob.name][c.name]
            errors = np.array(live["error"])
            rig["chains"][c.name] = {
                "reached_frames": live["status"].count('REACHED'),
                "max_reach_error": float(errors.max()),
                "median_iterations": float(np.median(live["iterations"])),
                "bake_max_error": result.chain_errors[i][0],
                "bake_mean_error": result.chain_errors[i][1],
                "per_frame": live,
            }
    baked_blend = args.out / "demo_baked.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(baked_blend), copy=True)
    summary["seconds"] = round(time.perf_counter() - started, 1)
    (args.out / "demo_report.json").write_text(json.dumps(summary, indent=1))
    print(f"live IK: {summary['live_ms_per_frame']} ms/frame for {sum(len(o.fabrik.chains) for o in rigs)} chains")
    for name, rig in summary["rigs"].items():
        chains = ", ".join(f"{c}: {v['reached_frames']}/{len(frames)} reached" for c, v in rig["chains"].items())
        print(f"{name}: bake {rig['bake_frames_per_second']} frames/s "
              f"({100 * rig['bake_key_writing_share']:.1f}% writing keys), live vs baked max "
              f"{rig['bake_max_error']:.2e}; {chains}")
    print(f"saved {live_blend} (live IK), {baked_blend} (baked), {args.out / 'demo_report.json'}"
          + ("" if args.no_render else f", {args.out / 'demo.png'}") + f" in {summary['seconds']} s")


if __name__ == "__main__":
    main()
