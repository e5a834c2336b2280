"""Influence below 1 (issue 23): a blend of every bone's local rotation between the pose without IK and
the IK pose. No bone turns farther from its pose without IK than at influence 1, the tip closes in as
influence grows, and 0.5 is halfway."""

import math

import bpy
import numpy as np
import pytest
from mathutils import Quaternion
from rigs import add_chain, armature, empty, set_rotation, torso, world_head, world_tail

INFLUENCES = np.linspace(0.0, 1.0, 11)


def arc_rig(name: str, n: int, bow: float = 0.25, length: float = 2.0):
    joints = [(0.0, bow * math.sin(math.pi * k / n), length * k / n) for k in range(n + 1)]
    return armature(name, [(f"b{k}", joints[k], joints[k + 1], f"b{k - 1}" if k else None, k > 0, 0.0)
                           for k in range(n)])


def local_rotations(ob, n: int | list[str]) -> list[Quaternion]:
    """Each bone's evaluated rotation relative to its parent's, rest offsets removed (bones ``b0..b<n-1>``, or
    those named)."""
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    out = []
    for name in n if isinstance(n, list) else [f"b{k}" for k in range(n)]:
        pb = ev.pose.bones[name]
        above = pb.parent.matrix @ (pb.parent.bone.matrix_local.inverted() @ pb.bone.matrix_local) \
            if pb.parent else pb.bone.matrix_local
        out.append((above.inverted() @ pb.matrix).to_quaternion())
    return out


def sweep(ob, chain, n: int, point, match: bool = False):
    """Distances of the tip (or the tip's head, matching the target) and each bone's turn from its local
    rotation without IK (degrees), at every influence of INFLUENCES."""
    distances, turns, fk = [], [], None
    for influence in INFLUENCES:
        chain.influence = float(influence)
        bpy.context.view_layer.update()
        end = world_head(ob, f"b{n - 1}") if match else world_tail(ob, f"b{n - 1}")
        distances.append(float(np.linalg.norm(end - point)))
        local = local_rotations(ob, n)
        fk = local if fk is None else fk
        turns.append([math.degrees(a.rotation_difference(b).angle) for a, b in zip(fk, local)])
    return np.array(distances), np.array(turns)


def random_fk_pose(ob, n: int, rng) -> None:
    for k in range(n):
        axis = rng.normal(size=3)
        set_rotation(ob.pose.bones[f"b{k}"], Quaternion(axis / np.linalg.norm(axis), rng.uniform(0.05, 0.35)))


@pytest.mark.usefixtures("solve_path")
@pytest.mark.parametrize(("bones", "solver", "pole", "match"), [
    (2, 'TWO_BONE', True, False), (2, 'FABRIK', False, False), (3, 'FABRIK', False, False),
    (4, 'FABRIK', True, False), (10, 'FABRIK', False, False), (4, 'FABRIK', False, True)])
def test_no_bone_turns_past_its_influence_1_rotation_and_the_tip_closes_in_halfway_at_half(bones, solver, pole,
                                                                                            match):
    rng = np.random.default_rng(bones * 7 + match)
    ob = arc_rig("Arm", bones)
    random_fk_pose(ob, bones, rng)
    target = empty("Target", (0.0, 0.0, 0.0))
    target.rotation_euler = (0.3, -0.2, 0.5)
    chain = add_chain(ob, f"b{bones - 1}", bones, target, pole=empty("Pole", (0.0, 2.0, 1.0)) if pole else None,
                      solver=solver, tolerance=1e-4, iterations=100, match_target_rotation=match)
    for _ in range(12):
        # (a matched tip's head: the placed bones are one shorter)
        point = np.array([0.0, 0.3, 1.0 if match else 1.3]) + rng.uniform(-0.3 if match else -0.5, 0.5, 3)
        target.location = tuple(point)
        distances, turns = sweep(ob, chain, bones, point, match)
        assert chain.status == 'REACHED', chain.message
        # every bone: no further from its pose without IK than at influence 1, and nearer at lower influence
        assert (turns <= turns[-1] + 1e-3).all()
        assert (np.diff(turns, axis=0) >= -1e-3).all()
        assert all(b <= a + 1e-5 for a, b in zip(distances, distances[1:]))
        assert distances[5] / distances[0] == pytest.approx(0.5, abs=0.01)
        assert distances[-1] <= 1e-3


@pytest.mark.usefixtures("solve_path")
def test_influence_is_continuous_along_a_target_path():
    """Half influence on a smooth target path: no bone turns more than 3 degrees between frames."""
    ob = arc_rig("Arm", 4)
    target = empty("Target", (0.0, 0.3, 1.4))
    chain = add_chain(ob, "b3", 4, target, pole=empty("Pole", (0.0, 2.0, 1.0)), influence=0.5)
    previous = None
    for a in np.linspace(0.0, 2.0 * math.pi, 120):
        target.location = (0.3 * math.sin(2.0 * a), 0.3 + 0.4 * math.sin(a), 1.3 + 0.4 * math.cos(a))
        bpy.context.view_layer.update()
        local = local_rotations(ob, 4)
        if previous is not None:
            assert max(math.degrees(p.rotation_difference(q).angle) for p, q in zip(previous, local)) < 3.0
        previous = local
    assert chain.status == 'REACHED'


def test_a_stretching_chain_blends_its_stretch_with_influence():
    """Target beyond reach: at influence 0.5 the tip is halfway from its place without IK to where
    influence 1 stretches it, and the bones' scale is between 1 and the full stretch."""
    ob = arc_rig("Arm", 3)
    point = np.array([0.0, 0.5, 2.6])
    chain = add_chain(ob, "b2", 3, empty("Target", tuple(point)), use_stretch=True, max_stretch=2.0)
    distances, _ = sweep(ob, chain, 3, point)
    assert distances[-1] <= 1e-3
    assert all(b <= a + 1e-5 for a, b in zip(distances, distances[1:]))
    assert distances[5] / distances[0] == pytest.approx(0.5, abs=0.01)
    chain.influence = 0.5
    bpy.context.view_layer.update()
    half = ob.pose.bones["b0"].scale[1]
    chain.influence = 1.0
    bpy.context.view_layer.update()
    full = ob.pose.bones["b0"].scale[1]
    assert 1.0 < half < full


def tree_rig(kind: str, name: str):
    """A tree, its chains' tips and their bone count: ``'y'`` a trunk bone forking at its tail into two bent 2-bone
    branches from one point; ``'torso'`` rigkit's torso (a 2-bone spine, two 2-bone arms)."""
    if kind == 'y':
        ob = armature(name, [("t0", (0, 0, 0), (0, 0, 1.0), None, False, 0.0),
                            ("a.L", (0, 0, 1.0), (0.45, 0.25, 1.5), "t0", True, 0.0),
                            ("b.L", (0.45, 0.25, 1.5), (0.9, 0, 2.0), "a.L", True, 0.0),
                            ("a.R", (0, 0, 1.0), (-0.45, 0.25, 1.5), "t0", True, 0.0),
                            ("b.R", (-0.45, 0.25, 1.5), (-0.9, 0, 2.0), "a.R", True, 0.0)])
        return ob, ["b.L", "b.R"], 3
    return torso(name), ["fore.L", "fore.R"], 4


def tree_sweep(ob, chains, points, swept):
    """Per influence of INFLUENCES (given to every chain of ``swept``): each chain's tip distance from its point
    and each bone's local turn from its pose without IK (degrees)."""
    names = [pb.name for pb in ob.pose.bones]
    distances, turns, fk = [], [], None
    for influence in INFLUENCES:
        for chain in swept:
            chain.influence = float(influence)
        bpy.context.view_layer.update()
        distances.append([float(np.linalg.norm(world_tail(ob, c.tip_bone) - p)) for c, p in zip(chains, points)])
        local = local_rotations(ob, names)
        fk = local if fk is None else fk
        turns.append([math.degrees(a.rotation_difference(b).angle) for a, b in zip(fk, local)])
    return np.array(distances), np.array(turns)


@pytest.mark.parametrize(("kind", "limits"), [('y', None), ('y', 'cones'), ('y', 'hinges, poles'), ('torso', None),
                                              ('torso', 'cones, hinges')])
def test_a_tree_below_influence_1_never_turns_a_bone_past_its_influence_1_rotation(kind, limits):
    """Trees blended every bone by its chains' mean influence, and the branches solved again as lone chains from
    a half-turned trunk: bones turned up to 50 degrees past their influence-1 rotation (a Y with hinges and
    poles; 7.4 with cones, 25 on a torso), tips moved away as influence grew and stopped 0.15-0.78 of the way at
    0.5. Now: no bone past it, the pose without IK at 0, every tip nearer as influence grows and about halfway at
    0.5 (0.489-0.503: a chain the shared bones alone bring nearer than its goal, whose own bones cannot take it
    back out, stays nearer), the targets reached at 1."""
    rng = np.random.default_rng(len(kind) * 10 + len(limits or ""))
    ob, tips, count = tree_rig(kind, "Rig")
    walker, _, _ = tree_rig(kind, "Walker")  # poses of the rig itself, without chains: the targets
    for pb in ob.pose.bones:
        limit = pb.fabrik_limit
        if pb.children and len(pb.children) > 1:
            continue  # a bone that branches carries no limit
        if limits and "hinges" in limits and not pb.children:
            limit.mode = 'HINGE'
            limit.hinge_min, limit.hinge_max = -2.5, 2.5
        elif limits and "cones" in limits:
            limit.mode = 'CONE'
            limit.cone_left = limit.cone_right = limit.cone_up = limit.cone_down = 0.6
    names = [pb.name for pb in ob.pose.bones]
    base = {}
    for name in names:
        axis = rng.normal(size=3)
        base[name] = Quaternion(axis / np.linalg.norm(axis), rng.uniform(0.05, 0.3))
        ob.pose.bones[name].rotation_quaternion = base[name]
    poles = {"b.L": (0.6, 1.0, 1.6), "b.R": (-0.6, 1.0, 1.6)} if limits and "poles" in limits else {}
    chains = [add_chain(ob, tip, count, empty(f"T.{tip}", (0.0, 0.0, 0.0)),
                        pole=empty(f"P.{tip}", poles[tip]) if tip in poles else None, iterations=100)
              for tip in tips]
    length = {c.tip_bone: sum(ob.data.bones[n].length for n in
                              [c.tip_bone] + [b.name for b in ob.data.bones[c.tip_bone].parent_recursive][:count - 1])
              for c in chains}
    for _ in range(6):
        # targets from a pose of the rig itself (hinges turning about X alone, cones within 0.4 radians)
        for name in names:
            if ob.pose.bones[name].fabrik_limit.mode == 'HINGE':
                turn = Quaternion((1.0, 0.0, 0.0), rng.uniform(-1.2, 1.2))
            else:
                phi = rng.uniform(0.0, 2.0 * math.pi)
                turn = Quaternion((math.cos(phi), 0.0, math.sin(phi)), rng.uniform(0.0, 0.4))
            walker.pose.bones[name].rotation_quaternion = turn
        bpy.context.view_layer.update()
        points = [world_tail(walker, tip) for tip in tips]
        for chain, point in zip(chains, points):
            chain.target.location = tuple(point)
        distances, turns = tree_sweep(ob, chains, points, chains)
        assert (turns <= turns[-1] + 1e-3).all()  # no bone past its influence-1 rotation
        assert turns[0].max() <= 1e-3  # influence 0: the pose without IK
        for i, chain in enumerate(chains):
            assert chain.status == 'REACHED', chain.message
            assert distances[-1, i] <= 1e-3 * length[chain.tip_bone]
            assert (np.diff(distances[:, i]) <= 1e-5).all()  # never farther as influence grows
            assert distances[5, i] / distances[0, i] == pytest.approx(0.5, abs=0.02)  # about halfway
