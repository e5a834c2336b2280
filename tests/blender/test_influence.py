"""Influence below 1 (issue 23): a blend of every bone's local rotation between the pose without IK and
the IK pose. No bone turns farther from its pose without IK than at influence 1, the tip closes in as
influence grows, and 0.5 is halfway."""

import math

import bpy
import numpy as np
import pytest
from mathutils import Quaternion
from rigs import add_chain, armature, empty, set_rotation, world_head, world_tail

INFLUENCES = np.linspace(0.0, 1.0, 11)


def arc_rig(name: str, n: int, bow: float = 0.25, length: float = 2.0):
    joints = [(0.0, bow * math.sin(math.pi * k / n), length * k / n) for k in range(n + 1)]
    return armature(name, [(f"b{k}", joints[k], joints[k + 1], f"b{k - 1}" if k else None, k > 0, 0.0)
                           for k in range(n)])


def local_rotations(ob, n: int) -> list[Quaternion]:
    """Each bone's evaluated rotation relative to its parent's, rest offsets removed."""
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    out = []
    for k in range(n):
        pb = ev.pose.bones[f"b{k}"]
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
