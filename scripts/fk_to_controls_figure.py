"""The README's FK-to-controls picture: the same keyed walk twice, as FK keys (left) and played by IK from
the controls ``pose.fabrik_bake_controls`` keyed from it (right), rendered with Cycles at one frame.

    python scripts/fk_to_controls_figure.py [--frame 30] [--out docs/fk_to_controls.png]

Prints the conversion's report line (largest joint distance between the two over the walk).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import bpy  # noqa: E402  # isort: skip

from demo import add_markers, text  # noqa: E402

import fabrik_addon  # noqa: E402
from fabrik_addon import controls_bake  # noqa: E402
from rigkit.blender import add_chain, dark_world_and_sun, skin, walk_rig  # noqa: E402

FRAMES = 120
LIMBS = [("shin.L", 2, {'solver': 'TWO_BONE'}), ("foot.R", 3, {}), ("forearm.L", 2, {}), ("hand.R", 3, {})]


def build():
    fk = walk_rig("FK", frames=FRAMES, location=(0.0, -1.0, 0.0))
    skin(fk, (0.55, 0.55, 0.6), radius=0.05)
    ik = walk_rig("IK", frames=FRAMES, location=(0.0, 1.0, 0.0))
    skin(ik, (0.85, 0.35, 0.2), radius=0.05)
    for tip, length, settings in LIMBS:
        add_chain(ik, tip, length, None, iterations=30, **settings)
    result = controls_bake.bake_controls(bpy.context, ik, list(range(len(LIMBS))),
                                         controls_bake.ControlsOptions(1, FRAMES))
    for chain in ik.fabrik.chains:
        chain.target.empty_display_size = chain.pole.empty_display_size = 0.05
    print(f"converted {len(result.chains)} limbs over {result.frames} frames in {result.seconds:.2f} s, "
          f"{result.keys} keys; largest joint distance {result.max_error:.2e} "
          f"({result.max_relative:.2e} limb lengths)")
    return fk, ik


def render(frame: int, out: Path) -> None:
    scene = bpy.context.scene
    scene.render.engine = 'CYCLES'
    scene.cycles.device = 'CPU'
    scene.cycles.samples = 16
    scene.cycles.use_denoising = False
    scene.render.resolution_x, scene.render.resolution_y = 560, 360
    scene.render.image_settings.file_format = 'PNG'
    scene.render.image_settings.color_mode = 'RGB'
    dark_world_and_sun(scene)
    camera = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
    # From the side (+X, looking along -X): the walk swings across the picture, the FK rig on the left.
    camera.location = (4.2, 0.0, 1.0)
    camera.rotation_euler = (math.radians(88), 0.0, math.radians(90))
    camera.data.lens = 35
    scene.collection.objects.link(camera)
    scene.camera = camera
    facing = (math.radians(88), 0.0, math.radians(90))
    text("FK_label", "FK keys (mocap)", (0.0, -1.0, 1.9), 0.14, rotation=facing)
    text("IK_label", "IK from the baked controls", (0.0, 1.0, 1.9), 0.14, rotation=facing)
    text("Legend", f"frame {frame}    yellow ball: target    blue cone + line: pole", (0.0, 0.0, -0.1), 0.09,
         rotation=facing)
    scene.frame_set(frame)
    scene.render.filepath = str(out)
    bpy.ops.render.render(write_still=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frame", type=int, default=30)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "fk_to_controls.png")
    args = parser.parse_args()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    fabrik_addon.register()
    try:
        _fk, ik = build()
        add_markers([ik])
        render(args.frame, args.out.absolute())
        print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KB)")
    finally:
        fabrik_addon.unregister()  # bpy 4.2 crashes at exit with add-on types still registered


if __name__ == "__main__":
    main()
