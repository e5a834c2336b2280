"""One 2-bone arm on an armature with other bones, 20 frames played under valgrind: counts that the wall clock of a
shared machine cannot resolve (docs/speed.md, "Issue 27, eighth pass").

    python scripts/frame_instructions.py KIND OTHERS    (KIND: fabrik | floor | lean; OTHERS: other bones: 0, 1000)

``fabrik``: the arm is a FABRIK IK chain (Two-Bone solver, a pole, the add-on's defaults), its target keyed on a
circle; ``floor``: the add-on is not registered and a frame handler writes the arm's two rotations, a new one each
frame, which is all the write floor does (scripts/blender_bench.py); ``lean``: blender_bench.LeanArm solves and
writes the arm, the least a Python solver's handler does. Ten frames of warm-up, then
``bpy.data.texts.new`` (the marker valgrind zeroes its counters at), then the 20 frames counted. Whole frames,
instructions (Blender's threaded evaluation is counted in full only on one CPU: unpinned, two identical runs
differed by 22%):

    taskset -c 0 valgrind --tool=callgrind --zero-before='*BlendDataTexts_new_call*' \\
        --toggle-collect='BKE_scene_graph_update_for_newframe_ex*' python scripts/frame_instructions.py fabrik 1000

The frame handlers alone, with a simulated 2 MB last-level cache (the misses that make the same instructions
slower on a big armature):

    valgrind --tool=callgrind --cache-sim=yes --LL=2097152,16,64 --zero-before='*BlendDataTexts_new_call*' \\
        --toggle-collect='bpy_app_generic_callback*' python scripts/frame_instructions.py fabrik 1000

Read the counts with ``callgrind_annotate`` (its ``summary``, and ``--inclusive=yes`` for the handler).
"""

from __future__ import annotations

import sys
from pathlib import Path

import bpy
from mathutils import Quaternion

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "scripts"))

from blender_bench import LeanArm  # noqa: E402

import fabrik_addon  # noqa: E402
from rigkit import realrig  # noqa: E402
from rigkit.blender import add_chain  # noqa: E402

FRAMES = list(range(1, 31))
WARM_UP = 10


def build(kind: str, others: int) -> None:
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = FRAMES[0], FRAMES[-1]
    ob = realrig.arm_with_others("Rig0", others)
    spec, target, pole = realrig.add_targets(ob, realrig.ARM_CHAINS, FRAMES)[0]
    if kind == "fabrik":
        fabrik_addon.register()
        add_chain(ob, spec.tip, spec.length, target, pole, solver='TWO_BONE', tolerance=0.001, iterations=30)
        return
    if kind == "lean":
        bpy.app.handlers.frame_change_post.append(LeanArm(ob, target, pole))
        return
    bones = [ob.pose.bones[name] for name in realrig.chain_bone_names(ob, spec.tip, spec.length)]

    def floor(scene, _depsgraph=None) -> None:
        angle = 0.01 * scene.frame_current
        for k, pose_bone in enumerate(bones):
            pose_bone.rotation_quaternion = Quaternion((1.0, 0.0, 0.0), angle * (k + 1))

    bpy.app.handlers.frame_change_post.append(floor)


def main() -> None:
    kind, others = sys.argv[1], int(sys.argv[2])
    if kind not in ("fabrik", "floor", "lean"):
        raise SystemExit("KIND is fabrik, floor or lean")
    build(kind, others)
    scene = bpy.context.scene
    for frame in FRAMES[:WARM_UP]:
        scene.frame_set(frame)
        bpy.context.evaluated_depsgraph_get()
    bpy.data.texts.new("marker")  # valgrind's --zero-before: count from here
    for frame in FRAMES[WARM_UP:]:
        scene.frame_set(frame)
        bpy.context.evaluated_depsgraph_get()
    print(f"{kind}, {others} other bones: {len(FRAMES) - WARM_UP} frames counted")


if __name__ == "__main__":
    main()
