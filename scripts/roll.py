# mypy: disable-error-code="union-attr, attr-defined"
"""Joint roll in Blender: do bends happen about the bones' hinge axes? FABRIK IK against Blender's IK
constraint on identical rigs and identical keyed target paths.

- ``arm``: a planar two-bone arm (rest bend in the YZ plane, bones' local X = the plane's normal) with
  a pole, on three target sweeps: the forearm's rotation relative to the upper arm, off a pure local-X
  turn (degrees; 0 for a perfect hinge). Also run on a planar 4-bone chain.
- ``knee``: a two-bone leg whose shin has a HINGE limit (0-150 degrees), targets from forward
  kinematics of random thigh rotations with hip twist and knee angles inside the hinge: share reached
  (tip within 1e-3) and the shin's twist off a pure local-X turn. Blender: IK constraint with the
  shin's Y and Z locked.
- ``pole``: ``pose.fabrik_chain_add(create_target=True, create_pole=True)`` on non-planar chains of 3, 4
  and 10 bones: the largest joint move, relative to the chain's length.

Run: ``python scripts/roll.py [arm|knee|pole ...]`` with the bpy wheel (``.venv/bin/python``).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import bpy
import numpy as np
from mathutils import Matrix

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fabrik_addon  # noqa: E402
from rigkit.blender import armature as _armature  # noqa: E402
from rigkit.blender import empty, off_x, planar_chain, relative_rotations  # noqa: E402


def armature(name: str, bones: list[tuple]):
    """``bones`` = [(name, head, tail, parent or None), ...], connected under their parent, roll 0."""
    return _armature(name, [(bone, head, tail, parent, parent is not None, 0.0) for bone, head, tail, parent in bones])

FRAMES = list(range(1, 121))


def reset() -> None:
    bpy.ops.wm.read_factory_settings(use_empty=True)


def tip_error(ob, tip: str, target) -> float:
    depsgraph = bpy.context.evaluated_depsgraph_get()
    ev = ob.evaluated_get(depsgraph)
    tail = ev.matrix_world @ ev.pose.bones[tip].tail
    return (tail - target.evaluated_get(depsgraph).matrix_world.translation).length


SWEEPS = {
    # target path (frame -> point), pole point: the arm's rest tip is at about (0, 0.49, 1.94)
    "mild": (lambda t: (0.6 * math.sin(t), 0.5 + 0.3 * math.cos(t), 1.4 + 0.2 * math.sin(2 * t)), (0.0, 2.0, 0.8)),
    "wide": (lambda t: (1.2 * math.sin(t), 1.2 * math.cos(t), 0.8 + 0.6 * math.sin(3 * t)), (0.0, 2.0, 0.8)),
    "pole moves": (lambda t: (0.8 * math.sin(t), 0.6, 1.2), None),
}


def arm_case(kind: str, bones: int, sweep: str) -> dict:
    reset()
    if kind == "fabrik":
        fabrik_addon.register()
    ob = planar_chain("Arm", bones)
    names = [f"b{i}" for i in range(bones)]
    path, pole_at = SWEEPS[sweep]
    target = empty("Target", path(0.0))
    pole = empty("Pole", pole_at or (0.0, 2.0, 0.8))
    for f in FRAMES:
        t = 2.0 * math.pi * f / len(FRAMES)
        target.location = path(t)
        target.keyframe_insert("location", frame=f)
        if pole_at is None:
            pole.location = (2.0 * math.sin(0.5 * t), 2.0 * math.cos(0.5 * t), 0.8)
            pole.keyframe_insert("location", frame=f)
    if kind == "blender":
        c = ob.pose.bones[names[-1]].constraints.new('IK')
        c.target, c.pole_target, c.chain_count = target, pole, bones
        c.pole_angle = math.radians(90.0)  # bones' local Z toward the pole: the bend faces it
    else:
        chain = ob.fabrik.chains.add()
        chain.tip_bone, chain.chain_length, chain.target, chain.pole = names[-1], bones, target, pole
        chain.solver = 'TWO_BONE' if bones == 2 else 'FABRIK'
    worst, errors = 0.0, []
    for f in FRAMES:
        bpy.context.scene.frame_set(f)
        worst = max([worst] + [off_x(q) for q in relative_rotations(ob, names)])
        errors.append(tip_error(ob, names[-1], target))
    if kind == "fabrik":
        fabrik_addon.unregister()
    return {"off_x_max": worst, "reach_max": max(errors)}


def random_rotation(rng) -> Matrix:
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    from mathutils import Quaternion

    return Quaternion(q.tolist()).to_matrix().to_4x4()


def knee_case(kind: str, trials: int = 200, seed: int = 13) -> dict:
    """A leg down -Z; FK poses: a random thigh rotation (any hip twist) and a knee turn about local X."""
    rng = np.random.default_rng(seed)
    reset()
    if kind == "fabrik":
        fabrik_addon.register()
    # Thigh and shin straight down; local X = world X, so a local-X turn bends in the YZ plane.
    leg = [("thigh", (0, 0, 0), (0, 0.02, -1.0), None), ("shin", (0, 0.02, -1.0), (0, 0, -2.0), "thigh")]
    ob = armature("Leg", leg)
    target = empty("Target", (0.0, 0.0, -2.0))
    low, high = 0.0, math.radians(150.0)
    shin = ob.pose.bones["shin"]
    if kind == "blender":
        c = shin.constraints.new('IK')
        c.target, c.chain_count = target, 2
        # Y and Z locked: a pure local-X hinge. (With use_ik_limit_x over the same 0-150 degrees
        # Blender reached 45.5%: its limit is not measured like our hinge angle, so it is left off.)
        shin.lock_ik_y = shin.lock_ik_z = True
    else:
        chain = ob.fabrik.chains.add()
        chain.tip_bone, chain.chain_length, chain.target = "shin", 2, target
        chain.tolerance, chain.iterations = 1e-4, 100
        shin.fabrik_limit.mode = 'HINGE'
        shin.fabrik_limit.hinge_min, shin.fabrik_limit.hinge_max = low, high
    reached, twist = 0, 0.0
    fk = armature("FK", leg)
    for _ in range(trials):
        thigh_rotation = random_rotation(rng).to_quaternion()
        knee = rng.uniform(low + 0.05, high - 0.05)
        fk.pose.bones["thigh"].rotation_quaternion = thigh_rotation
        fk.pose.bones["shin"].rotation_mode = 'XYZ'
        fk.pose.bones["shin"].rotation_euler = (knee, 0.0, 0.0)
        bpy.context.view_layer.update()
        target.location = fk.pose.bones["shin"].tail
        bpy.context.view_layer.update()
        if tip_error(ob, "shin", target) <= 1e-3:
            reached += 1
        twist = max(twist, off_x(relative_rotations(ob, ["thigh", "shin"])[0]))
    if kind == "fabrik":
        fabrik_addon.unregister()
    return {"reached": reached / trials, "twist_max": twist}


def pole_case(bones: int, seed: int = 5) -> dict:
    """Non-planar chain, add a chain with target and pole through the operator: largest joint move."""
    rng = np.random.default_rng(seed + bones)
    reset()
    fabrik_addon.register()
    spec, head = [], np.zeros(3)
    for i in range(bones):
        d = np.array([0.0, 0.0, 1.0]) + rng.normal(size=3) * 0.5
        tail = head + d / np.linalg.norm(d) * (2.0 / bones)
        spec.append((f"b{i}", tuple(head), tuple(tail), f"b{i - 1}" if i else None))
        head = tail
    ob = armature("Chain", spec)
    bpy.context.view_layer.objects.active = ob
    ob.select_set(True)
    bpy.ops.object.mode_set(mode='POSE')
    ob.data.bones.active = ob.data.bones[f"b{bones - 1}"]
    bpy.context.view_layer.update()

    def joints():
        ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
        return np.array([list(ev.pose.bones[f"b{i}"].head) for i in range(bones)]
                        + [list(ev.pose.bones[f"b{bones - 1}"].tail)])

    before = joints()
    bpy.ops.pose.fabrik_chain_add(chain_length=bones, create_target=True, create_pole=True)
    bpy.context.view_layer.update()
    moved = float(np.abs(joints() - before).max())
    fabrik_addon.unregister()
    return {"moved": moved, "relative": moved / 2.0}


def main() -> None:
    which = sys.argv[1:] or ["arm", "knee", "pole"]
    if "arm" in which:
        print("| rig | sweep | Blender off-X max (deg) | FABRIK off-X max (deg) | FABRIK reach max |")
        print("|---|---|---:|---:|---:|")
        for bones in (2, 4):
            for sweep in SWEEPS:
                b = arm_case("blender", bones, sweep)
                f = arm_case("fabrik", bones, sweep)
                print(f"| {bones} bones, pole | {sweep} | {b['off_x_max']:.2f} | {f['off_x_max']:.2f} | "
                      f"{f['reach_max']:.1e} |")
    if "knee" in which:
        b = knee_case("blender")
        f = knee_case("fabrik")
        print("| knee (HINGE 0-150), FK targets with hip twist | Blender | FABRIK |")
        print("|---|---:|---:|")
        print(f"| reached (1e-3) | {b['reached']:.1%} | {f['reached']:.1%} |")
        print(f"| shin off a pure local-X turn, max (deg) | {b['twist_max']:.2f} | {f['twist_max']:.2f} |")
    if "pole" in which:
        print("| non-planar chain | largest joint move at pole add (units, chain length 2) |")
        print("|---|---:|")
        for bones in (3, 4, 10):
            r = pole_case(bones)
            print(f"| {bones} bones | {r['moved']:.2e} ({r['relative']:.2%}) |")


if __name__ == "__main__":
    main()
