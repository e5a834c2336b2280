"""Limited trees on their own forward-kinematics walk (issue 23): every bone swings smoothly inside its limits, so
every target can be reached with every limit on every frame, and the solved pose must move as smoothly as the walk.

Each case is a window of a 400-frame walk about the frame where the tree used to pop: its limited branches, solved
again as lone chains from where a solve without their limits put the shared bones, came to the edge of what their
limits allowed from there (a hinged branch's reaching roll jumped) and then missed, where the tree solved with every
limit from its pose without IK took another pose (12-71 degrees in a frame). Now the tree with every limit is
continued from the first solve's pose (``solve_tree``'s ``near``)."""

import math
import sys

import bpy
import numpy as np
import pytest
from rigs import ROOT, armature, empty, key_path, off_x, world_head, world_tail
from test_tree_branches import largest_turn, world_rotations

sys.path.insert(0, str(ROOT / "scripts"))
from quality_bench import (  # noqa: E402
    ARM_POLES,
    LOPSIDED,
    ONE_WAY,
    Y_POLES,
    TreeRig,
    creature_bones,
    plane_degrees,
    torso_bones,
    walk_rotations,
)

# Their time goes to the solver: make test runs each on one Blender version (tests/conftest.py).
pytestmark = pytest.mark.solver_bound

FRAMES = 400  # the walk's loop
WINDOW = 10  # frames either side of the one that popped
HINGE = ONE_WAY  # 0 to 1.6 radians about local X: the walk bends hinged bones 0.6 +- its swing

POLES = {tip: pole for tip, _, pole in ARM_POLES + Y_POLES}  # the quality benchmark's: below elbows, before the Y's

# name: (bones, tips and chain length, cones (left, right, up, down), hinged bones, bones swinging about X (bent
# 0.6 rad), poles or None, the walk's seed and swing (radians), the frame that popped (degrees before))
CASES = {
    "torso, lopsided cones, hinged forearms": (
        torso_bones(), 4, LOPSIDED, ("fore.L", "fore.R"), ("fore.L", "fore.R"), None, 1, 0.27, 104),  # 12.0
    "torso, lopsided cones": (
        torso_bones(), 4, {"spine0": (0.5357, 0.3832, 0.5164, 0.3528), "upper.L": (0.5862, 0.3349, 0.6139, 0.5471),
                           "upper.R": (0.4873, 0.6471, 0.6147, 0.5687)},
        (), ("fore.L", "fore.R"), None, 3, 0.27, 248),  # 12.6
    "torso, lopsided cones, hinged forearms, poles, wide walk": (
        torso_bones(), 4, {"spine0": (0.502, 0.7558, 0.8366, 0.6097), "upper.L": (0.7782, 0.7101, 0.6858, 0.8397),
                           "upper.R": (0.6093, 0.5068, 0.5128, 0.5792)},
        ("fore.L", "fore.R"), ("fore.L", "fore.R"), POLES, 2, 0.45, 250),  # 71.2
    "Y 0.08 apart, coned first bones, hinged tips": (
        creature_bones(0.08), 3, {"a.L": (0.5788, 0.3628, 0.4974, 0.307), "a.R": (0.5491, 0.3546, 0.4343, 0.504)},
        ("b.L", "b.R"), ("b.L", "b.R"), None, 1, 0.27, 294),  # 46.4
    "Y at one point, cones, poles": (
        creature_bones(0.0), 3, {"a.L": (0.3795, 0.5144, 0.6384, 0.3582), "a.R": (0.4602, 0.6146, 0.3086, 0.3284),
                                 "b.L": (0.5649, 0.4885, 0.3553, 0.6275), "b.R": (0.555, 0.6014, 0.6381, 0.5252)},
        (), (), POLES, 2, 0.27, 255),  # 11.5
}


def limited(ob, cones: dict, hinged: tuple[str, ...]) -> None:
    for name, (left, right, up, down) in cones.items():
        limit = ob.pose.bones[name].fabrik_limit
        limit.mode = 'CONE'
        limit.cone_left, limit.cone_right, limit.cone_up, limit.cone_down = left, right, up, down
    for name in hinged:
        limit = ob.pose.bones[name].fabrik_limit
        limit.mode = 'HINGE'
        limit.hinge_min, limit.hinge_max = HINGE


@pytest.mark.parametrize("case", list(CASES))
def test_a_limited_tree_follows_its_own_walk_without_popping(case):
    bones, count, cones, hinged, about_x, poles, seed, swing, popped = CASES[case]
    frames = list(range(popped - WINDOW, popped + WINDOW + 1))
    names = [b[0] for b in bones]
    tips = [n for n in names if not any(b[3] == n for b in bones)]
    twin = armature("Walk", bones)
    points = {tip: [] for tip in tips}
    walk = walk_rotations(TreeRig(case, bones, [], hinges={name: HINGE for name in hinged}, planar=about_x), FRAMES,
                          seed, swing)
    for row in (walk[f - 1] for f in frames):
        for name, q in zip(names, row):
            twin.pose.bones[name].rotation_quaternion = q
        bpy.context.view_layer.update()
        for tip in tips:
            points[tip].append(tuple(world_tail(twin, tip)))
    bpy.data.objects.remove(twin)

    ob = armature("Tree", bones)
    limited(ob, cones, hinged)
    chains = []
    for tip in tips:
        chain = ob.fabrik.chains.add()
        chain.name = chain.tip_bone = tip
        chain.chain_length = count
        chain.target = empty(f"T.{tip}", points[tip][0])
        key_path(chain.target, points[tip], frames)
        if poles:
            chain.pole = empty(f"P.{tip}", poles[tip])
        chains.append(chain)
    length = sum(math.dist(b[1], b[2]) for b in bones if b[0] in ("spine0", "spine1", "upper.L", "fore.L",
                                                                 "trunk", "a.L", "b.L"))
    previous, turns = None, []
    for k, f in enumerate(frames):
        bpy.context.scene.frame_set(f)
        rotations = world_rotations(ob)
        if previous is not None:
            turns.append(largest_turn(previous, rotations))
        previous = rotations
        for chain, tip in zip(chains, tips):
            assert chain.status == 'REACHED', (case, f, tip, chain.status, chain.message)
            assert np.linalg.norm(world_tail(ob, tip) - np.array(points[tip][k])) <= 1e-3 * length
            if poles:  # the elbow in the plane of the branch's root, its target and its pole
                upper = ob.pose.bones[tip].parent
                assert plane_degrees(world_head(ob, upper.name), np.array(points[tip][k]), np.array(poles[tip]),
                                     world_tail(ob, upper.name)) <= 1.0, (case, f, tip)
        for name in hinged:
            parent = ob.pose.bones[name].parent
            ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
            rest = parent.bone.matrix_local.inverted() @ ob.data.bones[name].matrix_local
            local = ((ev.pose.bones[parent.name].matrix @ rest).inverted() @ ev.pose.bones[name].matrix).to_quaternion()
            assert off_x(local) <= 0.1, (case, f, name)  # a pure local-X turn
    # The walk turns a bone at most 0.5 degrees a frame here; before, these windows turned one 11.5-71 degrees.
    assert max(turns) <= 3.0, (case, np.round(turns, 2).tolist())
