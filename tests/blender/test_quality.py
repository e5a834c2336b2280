"""Pose quality in Blender: smooth poses on smooth keyed paths, status messages, influence."""

import math

import bpy
import numpy as np
import pytest
from rigs import add_chain, armature, empty, key_path, world_tail


def arc_rig(name: str, n: int, bow: float = 0.25, length: float = 2.0, prefix: str = "b"):
    """A planar chain up +Z bowing toward +Y, bones ``{prefix}0..``."""
    joints = [(0.0, bow * math.sin(math.pi * k / n), length * k / n) for k in range(n + 1)]
    bones = [(f"{prefix}{k}", joints[k], joints[k + 1], f"{prefix}{k - 1}" if k else None, k > 0, 0.0)
             for k in range(n)]
    return armature(name, bones)


def world_rotations(ob, n: int) -> np.ndarray:
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    world = np.array(ev.matrix_world)
    out = []
    for k in range(n):
        m = (world @ np.array(ev.pose.bones[f"b{k}"].matrix))[:3, :3]
        out.append(m / np.linalg.norm(m, axis=0))
    return np.array(out)


def turn_degrees(a: np.ndarray, b: np.ndarray) -> float:
    rel = np.swapaxes(a, 1, 2) @ b
    cos = np.clip((np.trace(rel, axis1=1, axis2=2) - 1.0) / 2.0, -1.0, 1.0)
    return float(np.degrees(np.arccos(cos)).max())


@pytest.mark.usefixtures("solve_path")
@pytest.mark.parametrize(("bones", "pole"), [(3, False), (4, True)])
def test_a_smooth_keyed_path_turns_no_bone_more_than_five_degrees_a_frame(bones, pole):
    """Target keyed on every frame along an ellipse inside reach, 0.4% of the chain's length a frame:
    the 4-bone leg with a pole turned a bone 95-104 degrees in one frame before the solves started
    from a curled pose."""
    ob = arc_rig("Leg", bones)
    frames = 200
    t = 2.0 * np.pi * np.arange(frames) / frames
    centre = np.array([0.0, 0.0, 1.4])
    points = [tuple(centre + 0.4 * np.array([0.0, math.sin(a), math.cos(a)])
                    + 0.16 * np.array([math.sin(2.0 * a), 0.0, 0.0])) for a in t]
    target = empty("Target", points[0])
    key_path(target, points, list(range(1, frames + 1)))
    chain = add_chain(ob, f"b{bones - 1}", bones, target, pole=empty("Pole", (0.0, 2.0, 1.0)) if pole else None,
                      tolerance=0.001, iterations=30)
    previous, worst = None, 0.0
    for frame in range(1, frames + 1):
        bpy.context.scene.frame_set(frame)
        assert chain.status == 'REACHED'
        rotations = world_rotations(ob, bones)
        if previous is not None:
            worst = max(worst, turn_degrees(previous, rotations))
        previous = rotations
    assert worst < 5.0


@pytest.mark.usefixtures("solve_path")
def test_a_hinged_leg_with_a_pole_turns_no_bone_more_than_five_degrees_a_frame():
    """The quality benchmark's hinged leg (free thigh, knee and foot hinges, pole in front) on a keyed
    loop, 0.4% of its length a frame: limited FABRIK turned a bone 43 degrees in one frame as its answer
    hopped between restarts; solved in the bend plane, under 1 degree (Blender's IK 0.72). Every frame
    reaches, and the shin and foot turn about their local X alone relative to their parents."""
    joints = [(0.0, 0.0, 0.0), (0.0, 0.1, 1.0), (0.0, 0.0, 2.0), (0.0, 0.1, 2.5)]
    bones = [(f"b{k}", joints[k], joints[k + 1], f"b{k - 1}" if k else None, k > 0, 0.0) for k in range(3)]
    ob = armature("HingedLeg", bones)
    for name, (low, high) in {"b1": (-10.0, 150.0), "b2": (-60.0, 60.0)}.items():
        limit = ob.pose.bones[name].fabrik_limit
        limit.mode, limit.hinge_min, limit.hinge_max = 'HINGE', math.radians(low), math.radians(high)
    root, tip = np.array(joints[0]), np.array(joints[-1])
    axis = (tip - root) / np.linalg.norm(tip - root)
    bend = np.array([0.0, 1.0, 0.0]) - axis[1] * axis
    bend /= np.linalg.norm(bend)
    side = np.cross(axis, bend)
    frames = 200
    t = 2.0 * np.pi * np.arange(frames) / frames
    points = [tuple(root + 0.7 * (tip - root) + 0.5 * (math.cos(a) * axis + math.sin(a) * bend)
                    + 0.2 * math.sin(2.0 * a) * side) for a in t]
    target = empty("Target", points[0])
    key_path(target, points, list(range(1, frames + 1)))
    chain = add_chain(ob, "b2", 3, target, pole=empty("Pole", (0.0, 2.0, 1.0)), tolerance=0.001, iterations=30)
    previous, worst = None, 0.0
    for frame in range(1, frames + 1):
        bpy.context.scene.frame_set(frame)
        assert chain.status == 'REACHED'
        rotations = world_rotations(ob, 3)
        if previous is not None:
            worst = max(worst, turn_degrees(previous, rotations))
        previous = rotations
        for k in (1, 2):
            relative = ob.pose.bones[f"b{k}"].matrix_basis.to_3x3()
            assert abs(relative[0][0] - 1.0) < 1.5e-6  # a pure turn about local X (within 0.1 degree)
    assert worst < 5.0


def fifty_bone_rig():
    bones, head = [], (0.0, 0.0, 0.0)
    for k in range(50):
        tail = (0.0, 0.0, head[2] + 0.04)
        bones.append((f"b{k}", head, tail, f"b{k - 1}" if k else None, k > 0, 0.0))
        head = tail
    return armature("Long", bones)


@pytest.mark.usefixtures("solve_path")
def test_status_tells_reached_out_of_reach_and_out_of_iterations_apart():
    ob = fifty_bone_rig()
    # Forward kinematics of a curled pose: reachable. Default settings reach it.
    point, d = np.zeros(3), np.array([0.0, 0.0, 1.0])
    turn = np.array([[1.0, 0.0, 0.0], [0.0, math.cos(0.12), -math.sin(0.12)], [0.0, math.sin(0.12), math.cos(0.12)]])
    for _ in range(50):
        d = turn @ d
        point = point + 0.04 * d
    target = empty("Target", tuple(point))
    chain = ob.fabrik.chains.add()
    chain.tip_bone, chain.chain_length, chain.target = "b49", 50, target
    bpy.context.view_layer.update()
    assert chain.status == 'REACHED'
    assert np.linalg.norm(world_tail(ob, "b49") - point) <= 1e-3
    target.location = (3.0, 0.0, 0.0)
    bpy.context.view_layer.update()
    assert chain.status == 'UNREACHABLE'
    assert chain.limited_by == 'LENGTH'
    assert chain.message.startswith("Target ") and "beyond reach (chain 2 m)" in chain.message


@pytest.mark.usefixtures("solve_path")
def test_running_out_of_iterations_says_so():
    # A zig-zag chain out of any plane: curling the pose without IK does not reach this target, FABRIK
    # needs about 7 passes.
    joints = [(0.0, 0.0, 0.0), (-0.02, -0.04, 0.4), (0.06, -0.36, 0.63), (0.27, -0.49, 0.95), (0.4, -0.33, 1.29),
              (0.07, -0.43, 1.09)]
    ob = armature("Arm", [(f"b{k}", joints[k], joints[k + 1], f"b{k - 1}" if k else None, k > 0, 0.0)
                          for k in range(5)])
    target = empty("Target", (0.13, 0.5, 0.1))
    chain = add_chain(ob, "b4", 5, target, tolerance=0.001, iterations=2)
    bpy.context.view_layer.update()
    assert chain.status == 'NOT_CONVERGED'
    assert chain.limited_by == 'ITERATIONS'
    assert chain.message.startswith("Did not converge in 2 iterations: the tip stops ")
    assert chain.message.endswith(" short; raise Iterations")
    chain.tolerance, chain.iterations = 0.001, 100
    bpy.context.view_layer.update()
    assert chain.status == 'REACHED'


@pytest.mark.usefixtures("solve_path")
@pytest.mark.parametrize("pole", [False, True])
def test_the_tip_closes_in_on_the_target_as_influence_grows(pole):
    """Distance to the target never grows with influence, and at 0.5 is about half the distance without
    IK (Blender's IK: 0.50-0.60). Blending solved rotations bone by bone gave 0.58-0.79 and grew on 8
    of 40 targets of a 10-bone chain."""
    ob = arc_rig("Arm", 10, bow=0.3)
    target = empty("Target", (0.0, 0.0, 0.0))
    chain = add_chain(ob, "b9", 10, target, pole=empty("Pole", (0.0, 2.0, 1.0)) if pole else None,
                      tolerance=0.001, iterations=30)
    rng = np.random.default_rng(13)
    for _ in range(12):
        point = np.array([0.0, 0.0, 1.2]) + rng.uniform(-0.5, 0.5, 3)
        target.location = tuple(point)
        distances = []
        for influence in np.linspace(0.0, 1.0, 11):
            chain.influence = float(influence)
            bpy.context.view_layer.update()
            distances.append(float(np.linalg.norm(world_tail(ob, "b9") - point)))
        assert all(b <= a + 1e-5 for a, b in zip(distances, distances[1:]))
        assert 0.45 <= distances[5] / distances[0] <= 0.6
        assert distances[-1] <= 1e-3
