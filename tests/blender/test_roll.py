"""Joint roll in real Blender: bends about the bones' hinge axes, poles that move nothing, keyed twist."""

import math

import bpy
import numpy as np
import pytest
from mathutils import Quaternion, Vector
from rigs import add_chain, armature, empty, off_x, planar_chain, relative_rotations

from fabrik_addon.rig import roll
from fabrik_addon.solver.orient import chains_turns
from rigkit.chains import chain_from, random_chain, random_directions

MODES = ['QUATERNION', 'XYZ', 'ZXY', 'AXIS_ANGLE']


def world_joints(ob, names):
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    return np.array([list(ob.matrix_world @ ev.pose.bones[n].head) for n in names]
                    + [list(ob.matrix_world @ ev.pose.bones[names[-1]].tail)])


SWEEPS = {
    "mild": lambda t: (0.6 * math.sin(t), 0.5 + 0.3 * math.cos(t), 1.4 + 0.2 * math.sin(2 * t)),
    "wide": lambda t: (1.2 * math.sin(t), 1.2 * math.cos(t), 0.8 + 0.6 * math.sin(3 * t)),
    "behind": lambda t: (0.9 * math.cos(t), -0.7, 1.0 + 0.4 * math.sin(t)),
}


@pytest.mark.usefixtures("solve_path")
@pytest.mark.parametrize("bones", [2, 4])
@pytest.mark.parametrize("sweep", list(SWEEPS))
def test_a_planar_chain_with_a_pole_bends_about_its_hinge_axes(bones, sweep):
    """Planar rest chain, pole: every child turns relative to its parent about its local X alone
    (within 1 degree; Blender's IK: 0), the chain rolling as a whole to face the pole."""
    ob = planar_chain("Arm", bones)
    names = [f"b{i}" for i in range(bones)]
    target = empty("Target")
    pole = empty("Pole")
    solvers = ['TWO_BONE', 'FABRIK'] if bones == 2 else ['FABRIK']
    for solver in solvers:
        ob.fabrik.chains.clear()
        add_chain(ob, names[-1], bones, target, pole=pole, solver=solver)
        for k in range(24):
            t = 2.0 * math.pi * k / 24
            target.location = SWEEPS[sweep](t)
            pole.location = (2.0 * math.sin(0.5 * t), 2.0 * math.cos(0.5 * t), 0.8)
            bpy.context.view_layer.update()
            joints = world_joints(ob, names)
            assert np.linalg.norm(joints[-1] - np.array(target.location)) < 1e-3, (solver, k, joints)
            for q in relative_rotations(ob, names):
                assert off_x(q) <= 1.0, (solver, k, off_x(q))
            # The bend faces the pole: the mean interior joint is on the pole's side of the root-tip line.
            axis = (joints[-1] - joints[0]) / np.linalg.norm(joints[-1] - joints[0])
            bend = joints[1:-1].mean(axis=0) - joints[0]
            side = np.array(pole.location) - joints[0]
            assert (bend - (bend @ axis) * axis) @ (side - (side @ axis) * axis) > 0.0


@pytest.mark.usefixtures("solve_path")
@pytest.mark.parametrize("mode", MODES)
def test_hinge_bends_hold_in_every_rotation_mode(mode):
    ob = planar_chain("Arm", 3)
    names = ["b0", "b1", "b2"]
    for pb in ob.pose.bones:
        pb.rotation_mode = mode
    target, pole = empty("Target", (0.5, 0.6, 1.2)), empty("Pole", (1.5, 1.0, 0.5))
    add_chain(ob, "b2", 3, target, pole=pole)
    for point in [(0.5, 0.6, 1.2), (-0.8, 0.2, 1.0), (0.3, -0.9, 0.7)]:
        target.location = point
        bpy.context.view_layer.update()
        assert np.linalg.norm(world_joints(ob, names)[-1] - np.array(point)) < 1e-3
        assert max(off_x(q) for q in relative_rotations(ob, names)) <= 1.0


@pytest.mark.parametrize("bones", [3, 4, 10])
def test_adding_a_pole_with_the_operator_moves_no_joint(bones):
    """Non-planar chains too: the pole rolls the chain's bend about the root-target axis, and the
    operator puts it on the bend it has."""
    rng = np.random.default_rng(90 + bones)
    spec, head = [], np.zeros(3)
    for i in range(bones):
        d = np.array([0.0, 0.0, 1.0]) + rng.normal(size=3) * 0.5
        tail = head + d / np.linalg.norm(d) * (2.0 / bones)
        spec.append((f"b{i}", tuple(head), tuple(tail), f"b{i - 1}" if i else None, i > 0, float(rng.uniform(-1, 1))))
        head = tail
    ob = armature("Chain", spec)
    names = [f"b{i}" for i in range(bones)]
    ob.pose.bones["b1"].rotation_quaternion = Quaternion((1.0, 0.0, 0.0), 0.4)  # a posed start
    bpy.context.view_layer.update()
    before = world_joints(ob, names)
    ob.select_set(True)
    bpy.ops.object.mode_set(mode='POSE')
    ob.data.bones.active = ob.data.bones[names[-1]]
    assert bpy.ops.pose.fabrik_chain_add(chain_length=bones, create_target=True, create_pole=True) == {'FINISHED'}
    assert ob.fabrik.chains[0].pole is not None
    bpy.context.view_layer.update()
    assert np.abs(world_joints(ob, names) - before).max() <= 1e-5
    assert ob.fabrik.chains[0].status == 'REACHED'


@pytest.mark.usefixtures("solve_path")
@pytest.mark.parametrize("bones", [2, 3])
def test_keyed_twist_about_a_bones_own_axis_still_shows(bones):
    """A rotation the animator keyed about a bone's own axis rides on top of what IK sets."""
    names = [f"b{i}" for i in range(bones)]
    target, pole = empty("Target", (0.6, 0.5, 1.3)), empty("Pole", (1.0, 2.0, 0.5))

    def solved_rotations(twist: float):
        ob = planar_chain(f"Arm{twist}", bones)
        ob.pose.bones[names[-1]].rotation_quaternion = Quaternion((0.0, 1.0, 0.0), twist)
        ob.pose.bones[names[-1]].keyframe_insert("rotation_quaternion", frame=1)
        add_chain(ob, names[-1], bones, target, pole=pole)
        bpy.context.scene.frame_set(1)
        ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
        return [ev.pose.bones[n].matrix.to_quaternion() for n in names]

    plain, twisted = solved_rotations(0.0), solved_rotations(0.7)
    for a, b in zip(plain[:-1], twisted[:-1]):
        assert angle_between(a, b) < 1e-4
    # The tip's solved orientation, then its keyed twist about its own Y axis.
    assert angle_between(plain[-1] @ Quaternion((0.0, 1.0, 0.0), 0.7), twisted[-1]) < 1e-4


def angle_between(a, b) -> float:
    """Angle of the rotation from ``a`` to ``b``, from the vector part in float64 (acos of a float32 dot
    near 1 is off by 1e-3)."""
    a, b = np.array(a, dtype=np.float64), np.array(b, dtype=np.float64)
    a, b = a / np.linalg.norm(a), b / np.linalg.norm(b)
    w = a[0] * b[0] + a[1:] @ b[1:]
    v = a[0] * b[1:] - b[0] * a[1:] - np.cross(a[1:], b[1:])
    return 2.0 * math.atan2(float(np.linalg.norm(v)), abs(float(w)))


@pytest.mark.usefixtures("solve_path")
@pytest.mark.parametrize("solver", ['FABRIK', 'TWO_BONE'])
def test_a_hinged_knee_reaches_targets_from_poses_with_hip_twist(solver):
    """HINGE is a pure local-X turn relative to the parent (twist locked): the thigh rolls so the knee's
    plane holds the target. Targets from forward kinematics with any thigh rotation: >= 95% reached
    (Blender's IK with the shin's Y and Z locked: 100%; a direction-only hinge: 22%)."""
    rng = np.random.default_rng(13)
    leg = [("thigh", (0, 0, 0), (0, 0.02, -1.0), None, False, 0.0),
           ("shin", (0, 0.02, -1.0), (0, 0, -2.0), "thigh", True, 0.0)]
    ob, fk = armature("Leg", leg), armature("FK", leg)
    target = empty("Target", (0.0, 0.0, -2.0))
    add_chain(ob, "shin", 2, target, solver=solver)
    limit = ob.pose.bones["shin"].fabrik_limit
    limit.mode, limit.hinge_min, limit.hinge_max = 'HINGE', 0.0, math.radians(150.0)
    fk.pose.bones["shin"].rotation_mode = 'XYZ'
    trials, reached = 60, 0
    for _ in range(trials):
        q = rng.normal(size=4)
        fk.pose.bones["thigh"].rotation_quaternion = Quaternion(q / np.linalg.norm(q))
        fk.pose.bones["shin"].rotation_euler = (rng.uniform(0.05, math.radians(150.0) - 0.05), 0.0, 0.0)
        bpy.context.view_layer.update()
        target.location = fk.pose.bones["shin"].tail
        bpy.context.view_layer.update()
        reached += np.linalg.norm(world_joints(ob, ["thigh", "shin"])[-1] - np.array(target.location)) <= 1e-3
        knee = relative_rotations(ob, ["thigh", "shin"])[0]
        assert off_x(knee) <= 0.1
        angle = 2.0 * math.atan2(knee.x, knee.w)  # the hinge angle, inside its limit
        assert -1e-5 <= math.remainder(angle, 2 * math.pi) <= math.radians(150.0) + 1e-5
    assert reached >= 0.95 * trials


@pytest.mark.parametrize("n", [1, 2, 3, 8])
def test_the_few_chain_roll_equals_the_batched_one(n):
    """rig/roll.py (floats for the chain's frame, mathutils bone by bone: what the few-chain path runs)
    gives every bone the turn orient.chains_turns (numpy: the batched path) gives it, with and without a
    pole, for bent, straight and random solved poses."""
    rng = np.random.default_rng(380 + n)
    count = 40
    before = np.stack([random_chain(rng, n, 3) for _ in range(count)])
    before[1] = before[1, 0] + np.arange(n + 1)[:, None] * np.array([0.0, 0.0, 0.5])  # straight: the side decides
    after = np.stack([chain_from(b[0], np.linalg.norm(np.diff(b, axis=0), axis=1), random_directions(rng, n, 3))
                      for b in before])
    after[2] = before[2]  # a solve that moves nothing turns nothing
    poles = rng.uniform(-4, 4, (count, 3))
    poles[::2] = np.nan
    sides = rng.normal(size=(count, 3))
    sides /= np.linalg.norm(sides, axis=1)[:, None]
    # mathutils holds float32: give numpy the same rounded inputs
    before, after, poles, sides = (a.astype(np.float32).astype(np.float64) for a in (before, after, poles, sides))
    batch = chains_turns(before, after, poles, sides)
    worst = 0.0
    for c in range(count):
        joints = [Vector(p) for p in before[c]]
        solved = [Vector(p) for p in after[c]]
        pole = None if np.isnan(poles[c]).any() else Vector(poles[c])
        frame, axes = roll.start_frame(joints, Vector(sides[c]))
        turns = roll.chain_turns(frame, axes, joints, solved, pole, n)
        assert len(turns) == n
        for k, q in enumerate(turns):
            worst = max(worst, float(np.abs(np.array(q.to_matrix()) - batch[c, k]).max()))
    # mathutils computes in float32 (epsilon 1.2e-7), its rounding carried down the chain: 2e-7 at 1 bone,
    # 9e-6 at 8 (near half-turn swings amplify it). A different rule (no pole roll, another side, no
    # transport) differs by 1e-1 and more.
    assert worst < 2e-5

