"""Trees (issue 23): each chain's own branch below the shared bones (with a pole or a limit) is solved as
a lone chain, so poles and hinges act on tree branches as on lone chains, and a fork whose branches
start at one point keeps a determined roll. Targets come from the rig's own forward-kinematics walk, so
all are reachable."""

import math

import bpy
import numpy as np
import pytest
from mathutils import Quaternion
from rigs import (
    armature,
    empty,
    off_x,
    relative_rotations,
    same_pose_in_modes,
    set_rotation,
    spread_over_targets,
    world_head,
    world_tail,
)

from rigkit.trees import pole_side_degrees

# Their time goes to the solver: make test runs each on one Blender version (tests/conftest.py).
pytestmark = pytest.mark.solver_bound

FRAMES = 200
HINGE = (math.radians(-150.0), math.radians(150.0))


def torso(roll: float = 0.0):
    """A spine of two bones carrying two 2-bone arms, each arm bent about its bones' local X (world Y; the arms'
    bones rolled by ``roll`` radians, so that X is another axis)."""
    return armature("Torso", [
        ("spine0", (0, 0, 0.0), (0, 0, 0.6), None, False), ("spine1", (0, 0, 0.6), (0, 0, 1.2), "spine0", True),
        ("upper.L", (0.2, 0, 1.15), (0.7, 0, 1.05), "spine1", False, roll),
        ("fore.L", (0.7, 0, 1.05), (1.2, 0, 1.1), "upper.L", True, roll),
        ("upper.R", (-0.2, 0, 1.15), (-0.7, 0, 1.05), "spine1", False, -roll),
        ("fore.R", (-0.7, 0, 1.05), (-1.2, 0, 1.1), "upper.R", True, -roll)])


def creature(gap: float):
    """A trunk whose two 2-bone branches start ``gap`` apart at its tail (0: at one point), bent enough
    that the walk keeps their targets inside full reach (the edge of reach is another matter)."""
    return armature("Y", [
        ("trunk", (0, 0, 0.0), (0, 0, 1.0), None, False),
        ("a.L", (gap / 2, 0, 1.0), (0.45, 0.25, 1.5), "trunk", gap == 0.0),
        ("b.L", (0.45, 0.25, 1.5), (0.9, 0, 2.0), "a.L", True),
        ("a.R", (-gap / 2, 0, 1.0), (-0.45, 0.25, 1.5), "trunk", gap == 0.0),
        ("b.R", (-0.45, 0.25, 1.5), (-0.9, 0, 2.0), "a.R", True)])


def walk(ob, frames: int, planar: tuple[str, ...], seed: int = 23, swing: float = 0.27, base=None):
    """Per frame, the rig's own tip positions (``(frames, 2, 3)``) under a smooth closed walk of every bone
    (bones in ``planar`` bend about local X alone, from a 0.6 rad bend), on top of the rotations ``base``
    (one per bone, default none); the pose is reset afterwards."""
    rng = np.random.default_rng(seed)
    names = [pb.name for pb in ob.pose.bones]
    axes = {n: np.array([1.0, 0.0, 0.0]) if n in planar else rng.normal(size=3) for n in names}
    phases = {n: rng.uniform(0.0, 2.0 * math.pi) for n in names}
    tips = [n for n in names if not ob.pose.bones[n].children]
    out = []
    for f in range(frames):
        t = 2.0 * math.pi * f / frames
        for k, n in enumerate(names):
            bend = 0.6 if n in planar else 0.0
            q = Quaternion(axes[n] / np.linalg.norm(axes[n]), bend + swing * math.sin(t + phases[n]))
            ob.pose.bones[n].rotation_quaternion = q if base is None else base[k] @ q
        bpy.context.view_layer.update()
        out.append([world_tail(ob, tip) for tip in tips])
    for n in names:
        ob.pose.bones[n].rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    bpy.context.view_layer.update()
    return tips, np.array(out)


def add_default_chain(ob, tip: str, count: int, target, pole=None):
    """A chain at the add-on's default settings (tolerance 0.001, 30 iterations)."""
    chain = ob.fabrik.chains.add()
    chain.name = chain.tip_bone = tip
    chain.chain_length = count
    chain.target, chain.pole = target, pole
    return chain


def world_rotations(ob) -> np.ndarray:
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    out = []
    for pb in ev.pose.bones:
        m = np.array(ob.matrix_world @ pb.matrix)[:3, :3]
        out.append(m / np.linalg.norm(m, axis=0))
    return np.array(out)


def largest_turn(a: np.ndarray, b: np.ndarray) -> float:
    rel = np.swapaxes(a, 1, 2) @ b
    return float(np.degrees(np.arccos(np.clip((np.trace(rel, axis1=1, axis2=2) - 1.0) / 2.0, -1.0, 1.0))).max())


def plane_degrees(root, target, pole, elbow) -> float:
    normal = np.cross(target - root, pole - root)
    d = elbow - root
    return math.degrees(math.asin(min(1.0, abs(normal @ d) / (np.linalg.norm(normal) * np.linalg.norm(d)))))


def torso_rig(hinges: bool, poles: bool):
    ob = torso()
    tips, points = walk(ob, FRAMES, ("fore.L", "fore.R"))
    if hinges:
        for name in ("fore.L", "fore.R"):
            limit = ob.pose.bones[name].fabrik_limit
            limit.mode, (limit.hinge_min, limit.hinge_max) = 'HINGE', HINGE
    chains, pole_points = [], []
    for c, tip in enumerate(tips):
        side = 1.0 if tip.endswith("L") else -1.0
        pole_points.append(np.array([0.7 * side, 0.0, 0.1]))
        pole = empty(f"P.{tip}", tuple(pole_points[-1])) if poles else None
        chains.append(add_default_chain(ob, tip, 4, empty(f"T.{tip}", tuple(points[0, c])), pole))
    return ob, chains, points, pole_points


@pytest.mark.parametrize(("hinges", "poles"), [(True, False), (False, True), (True, True)],
                         ids=["hinges", "poles", "poles and hinges"])
def test_torso_branches_reach_smoothly_with_hinges_and_poles_as_lone_chains(hinges, poles):
    """Every frame reached at default settings; no bone turns 5 degrees in a frame; a hinged forearm
    turns about its local X alone (<= 0.1 degree off); an elbow with a pole lies within 1 degree of the
    plane through its shoulder, its target and its pole. Before: 63 degrees in a frame and 29 off the
    hinge; elbows 27 degrees off their pole's plane and most tip-frames short."""
    ob, chains, points, pole_points = torso_rig(hinges, poles)
    previous, worst_turn, worst_hinge, worst_plane = None, 0.0, 0.0, 0.0
    for f in range(FRAMES):
        for chain, point in zip(chains, points[f]):
            chain.target.location = tuple(point)
        bpy.context.view_layer.update()
        for chain, point, pole in zip(chains, points[f], pole_points):
            assert chain.status == 'REACHED', (f, chain.message)
            assert np.linalg.norm(world_tail(ob, chain.tip_bone) - point) <= 1e-3
            upper = chain.tip_bone.replace("fore", "upper")
            if hinges:
                worst_hinge = max(worst_hinge, off_x(relative_rotations(ob, [upper, chain.tip_bone])[0]))
            if poles:
                worst_plane = max(worst_plane, plane_degrees(world_head(ob, upper), point, pole,
                                                             world_tail(ob, upper)))
        rotations = world_rotations(ob)
        if previous is not None:
            worst_turn = max(worst_turn, largest_turn(previous, rotations))
        previous = rotations
    assert worst_turn < 5.0
    assert worst_hinge <= 0.1
    assert worst_plane <= 1.0


def inside_cone(rng, cone: float) -> Quaternion:
    """A random local rotation whose bone direction stays inside a round cone of ``cone`` radians (a swing of
    at most 0.9 of it), twisted up to 0.5 rad about the bone."""
    psi = rng.uniform(0.0, 2.0 * math.pi)
    swing = Quaternion((math.sin(psi), 0.0, -math.cos(psi)), rng.uniform(0.0, 0.9 * cone))
    return swing @ Quaternion((0.0, 1.0, 0.0), rng.uniform(-0.5, 0.5))


@pytest.mark.parametrize(("cone", "spine_cone", "hinge", "seed"),
                         [(0.7, None, False, 5), (0.5, None, False, 6), (0.7, 0.6, False, 7), (0.7, 0.6, True, 5),
                          (0.5, None, True, 8)],
                         ids=["upper arms in 0.7 rad cones", "upper arms in 0.5 rad cones", "spine coned too",
                              "hinged forearms, rolled arms, spine coned", "hinged forearms, rolled arms"])
def test_coned_tree_branches_bend_in_their_pole_planes(cone, spine_cone, hinge, seed):
    """A torso whose upper arms (and spine) carry cones (the forearms hinges), each arm with a pole in the plane
    of its own pose, the targets that pose's hands, at default settings: every target reached, every elbow
    within 1 degree of its pole's side of the plane through shoulder, target and pole. The tree placed the
    spine without the arms' poles, from where the in-plane arm left its cone, so the arm left the plane: 11.9
    degrees; with hinges 41."""
    ob, poser = torso(0.6 if hinge else 0.0), torso(0.6 if hinge else 0.0)
    for rig in (ob, poser):
        for name in ("upper.L", "upper.R") + (("spine0",) if spine_cone else ()):
            limit = rig.pose.bones[name].fabrik_limit
            limit.mode = 'CONE'
            limit.cone_left = limit.cone_right = limit.cone_up = limit.cone_down = \
                spine_cone if name == "spine0" else cone
        for name in ("fore.L", "fore.R") if hinge else ():
            limit = rig.pose.bones[name].fabrik_limit
            limit.mode, limit.hinge_min, limit.hinge_max = 'HINGE', -2.5, 2.5
    tips = ["fore.L", "fore.R"]
    chains = [add_default_chain(ob, tip, 4, empty(f"T.{tip}"), empty(f"P.{tip}")) for tip in tips]
    rng = np.random.default_rng(seed)
    worst = 0.0
    for k in range(20):
        for pb in poser.pose.bones:
            if pb.fabrik_limit.mode == 'CONE':
                pb.rotation_quaternion = inside_cone(rng, cone if pb.name.startswith("upper") else spine_cone)
            elif pb.fabrik_limit.mode == 'HINGE':
                pb.rotation_quaternion = Quaternion((1.0, 0.0, 0.0), rng.uniform(0.3, 1.3) * rng.choice([-1.0, 1.0]))
            else:
                axis = rng.normal(size=3)
                pb.rotation_quaternion = Quaternion(axis / np.linalg.norm(axis), rng.uniform(0.0, 0.5))
        bpy.context.view_layer.update()
        for chain, tip in zip(chains, tips):
            shoulder, elbow, hand = world_head(poser, tip.replace("fore", "upper")), world_head(poser, tip), \
                world_tail(poser, tip)
            line = (hand - shoulder) / np.linalg.norm(hand - shoulder)
            out = elbow - shoulder - ((elbow - shoulder) @ line) * line
            chain.target.location, chain.pole.location = tuple(hand), tuple(elbow + out / np.linalg.norm(out))
        bpy.context.view_layer.update()
        for chain in chains:
            assert chain.status == 'REACHED', (k, chain.name, chain.message)
            upper = chain.tip_bone.replace("fore", "upper")
            worst = max(worst, pole_side_degrees(world_head(ob, upper), np.array(chain.target.location),
                                                 np.array(chain.pole.location), world_tail(ob, upper)))
    assert worst <= 1.0, worst


def limited_torsos(modes, roll: float, spine_cone: tuple):
    """Rotated, scaled torsos (one per rotation mode, and one to pose) with a coned spine (``spine_cone``: left,
    right, up, down) and upper arms (0.7), hinged forearms and a fixed pole on each arm (arms rolled by ``roll``).
    Returns (rigs, poser, each rig's chains, the tips)."""
    rigs, poser = [torso(roll) for _ in modes], torso(roll)
    for rig in [*rigs, poser]:
        rig.rotation_euler, rig.scale = (0.4, -0.7, 1.1), (1.3, 1.3, 1.3)
        for name, cone in (("spine0", spine_cone), ("upper.L", (0.7,) * 4), ("upper.R", (0.7,) * 4)):
            limit = rig.pose.bones[name].fabrik_limit
            limit.mode = 'CONE'
            limit.cone_left, limit.cone_right, limit.cone_up, limit.cone_down = cone
        for name in ("fore.L", "fore.R"):
            limit = rig.pose.bones[name].fabrik_limit
            limit.mode, limit.hinge_min, limit.hinge_max = 'HINGE', -2.5, 2.5
    bpy.context.view_layer.update()
    world = np.array(rigs[0].matrix_world)
    tips = ["fore.L", "fore.R"]
    poles = {tip: tuple((world @ np.array([0.7 * side, 0.0, 0.1, 1.0]))[:3]) for tip, side in zip(tips, (1, -1))}
    chains = [[add_default_chain(ob, tip, 4, empty(f"T.{ob.name}.{tip}"), empty(f"P.{ob.name}.{tip}", poles[tip]))
               for tip in tips] for ob in rigs]
    return rigs, poser, chains, tips


def test_coned_tree_branches_held_in_their_pole_planes_give_one_world_pose_in_every_rotation_mode():
    """A rotated, scaled torso with a coned spine and upper arms, hinged forearms and a pole on each arm (fixed,
    so the cones often keep the arms out of the poles' planes from where the tree first puts the spine): the
    same pose without IK in four rotation modes, targets the hands of poses inside the limits: world joints
    within 1e-4 of each other. The fit that holds the bends in their planes has many poses to choose from;
    started from the passes' pose and stopped as soon as it reached, it moved with the float rounding of the
    channels: 0.14 apart."""
    rng = np.random.default_rng(4)
    modes = ('QUATERNION', 'XYZ', 'ZYX', 'AXIS_ANGLE')
    rigs, poser, chains, tips = limited_torsos(modes, 0.6, (0.6,) * 4)
    same_pose_in_modes(rigs, modes, rng)

    def hands():
        for pb in poser.pose.bones:
            if pb.fabrik_limit.mode == 'CONE':
                pb.rotation_quaternion = inside_cone(rng, 0.7 if pb.name.startswith("upper") else 0.6)
            else:
                pb.rotation_quaternion = Quaternion((1.0, 0.0, 0.0), rng.uniform(0.3, 1.3) * rng.choice([-1.0, 1.0]))
        bpy.context.view_layer.update()
        return [world_tail(poser, tip) for tip in tips]

    assert spread_over_targets(rigs, chains, hands, 12) <= 1e-4


@pytest.mark.parametrize("seed", [1, 3, 9])
def test_a_coned_torso_with_one_hand_out_of_reach_gives_one_world_pose_in_every_rotation_mode(seed):
    """The rotated, scaled torso (coned spine and upper arms, hinged forearms, a fixed pole on each arm), one
    hand's target a pose's hand, the other's thrown up to a few lengths away: world joints within 1e-4 across
    rotation modes. Beyond reach the fits from the passes and from each aimed restart settled on one family of
    poses equally far from the lost target (0.971086 +- 1e-7 on a probe's draw), and a strict comparison let the
    float rounding of the channels pick the restart: 0.35 apart on that draw, 0.13 on seed 9 here."""
    rng = np.random.default_rng(seed)
    modes = ('QUATERNION', 'XYZ', 'YXZ', 'ZYX', 'AXIS_ANGLE')
    rigs, poser, chains, tips = limited_torsos(modes, 0.0, MID_CONE)
    same_pose_in_modes(rigs, modes, rng)

    def hands():
        for pb in poser.pose.bones:
            pb.rotation_quaternion = inside_limit(rng, pb)
        bpy.context.view_layer.update()
        points = [world_tail(poser, tip) for tip in tips]
        lost = int(rng.integers(2))
        points[lost] = points[lost] + rng.normal(0.0, 1.0, 3)
        return points

    assert spread_over_targets(rigs, chains, hands, 10) <= 1e-4


MID_CONE = (0.5, 0.5, 0.6, 0.4)  # left, right, up, down


def test_a_coned_torso_whose_rounds_run_out_short_gives_one_world_pose_in_every_rotation_mode():
    """The rotated, scaled torso (coned spine and upper arms, hinged forearms, a fixed pole on each arm), its pose
    without IK stored in all eight rotation modes, 12 target sets (the hands of poses inside the limits, every
    fourth with one hand's target thrown up to a few lengths away): world joints within 1e-4 across modes. Here the
    held fit's proximal rounds ran their 100 rounds still creeping along a rim short of a target, and the fit on
    from there stopped wherever it first came within its aim: 5.7e-4 apart (2.8e-4 on seed 8). Rounds with a weaker
    pull from there (``tree_fit.PROXIMAL``): 4.7e-6."""
    rng = np.random.default_rng(7)
    modes = ('QUATERNION', 'XYZ', 'XZY', 'YXZ', 'YZX', 'ZXY', 'ZYX', 'AXIS_ANGLE')
    rigs, poser, chains, tips = limited_torsos(modes, 0.0, MID_CONE)
    same_pose_in_modes(rigs, modes, rng)
    drawn = iter(range(1, 13))

    def hands():
        for pb in poser.pose.bones:
            pb.rotation_quaternion = inside_limit(rng, pb)
        bpy.context.view_layer.update()
        points = [world_tail(poser, tip) for tip in tips]
        if next(drawn) % 4 == 0:
            lost = int(rng.integers(2))
            points[lost] = points[lost] + rng.normal(0.0, 1.0, 3)
        return points

    assert spread_over_targets(rigs, chains, hands, 12) <= 1e-4


def coned_trunk_y():
    """A Y on a 2-bone trunk whose branches start at one point, rotated and scaled: cones on the first trunk
    bone and on every branch bone but the right tip, which is hinged."""
    ob = armature("Y2", [
        ("t0", (0, 0, 0.0), (0, 0, 0.5), None, False), ("t1", (0, 0, 0.5), (0, 0, 1.0), "t0", True),
        ("a.L", (0, 0, 1.0), (0.45, 0.25, 1.5), "t1", True), ("b.L", (0.45, 0.25, 1.5), (0.9, 0, 2.0), "a.L", True),
        ("a.R", (0, 0, 1.0), (-0.45, 0.25, 1.5), "t1", True), ("b.R", (-0.45, 0.25, 1.5), (-0.9, 0, 2.0), "a.R", True)])
    ob.location, ob.rotation_euler, ob.scale = (0.3, -0.2, 0.1), (0.4, -0.7, 1.1), (1.3, 1.3, 1.3)
    for name in ("t0", "a.L", "b.L", "a.R"):
        limit = ob.pose.bones[name].fabrik_limit
        limit.mode = 'CONE'
        limit.cone_left, limit.cone_right, limit.cone_up, limit.cone_down = MID_CONE
    limit = ob.pose.bones["b.R"].fabrik_limit
    limit.mode, limit.hinge_min, limit.hinge_max = 'HINGE', -2.5, 2.5
    return ob


def inside_limit(rng, pose_bone) -> Quaternion:
    """A random local rotation inside the bone's limit (0.9 of a cone's extent, twisted up to 0.5 rad about the
    bone; a hinge's turn within 1.35 rad), or a free turn up to 0.5 rad."""
    limit = pose_bone.fabrik_limit
    if limit.mode == 'HINGE':
        return Quaternion((1.0, 0.0, 0.0), rng.uniform(-1.35, 1.35))
    if limit.mode == 'CONE':
        psi = rng.uniform(0.0, 2.0 * math.pi)
        a = limit.cone_right if math.cos(psi) >= 0.0 else limit.cone_left
        b = limit.cone_up if math.sin(psi) >= 0.0 else limit.cone_down
        swing = rng.uniform(0.0, 0.9) / math.hypot(math.cos(psi) / a, math.sin(psi) / b)
        return Quaternion((math.sin(psi), 0.0, -math.cos(psi)), swing) @ \
            Quaternion((0.0, 1.0, 0.0), rng.uniform(-0.5, 0.5))
    axis = rng.normal(size=3)
    return Quaternion(axis / np.linalg.norm(axis), rng.uniform(0.0, 0.5))


def cone_excess(ob) -> float:
    """The largest angle (radians) by which any coned bone's direction, seen from its parent's posed frame turned
    by its rest offset (from its rest frame for a root bone), lies past its four-angle cone."""
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    worst = 0.0
    for pb in ev.pose.bones:
        limit = ob.pose.bones[pb.name].fabrik_limit
        if limit.mode != 'CONE':
            continue
        frame = pb.bone.matrix_local if pb.parent is None else \
            pb.parent.matrix @ pb.parent.bone.matrix_local.inverted() @ pb.bone.matrix_local
        x, y, z = np.array((frame.inverted() @ pb.matrix).to_3x3().normalized().col[1])
        psi = math.atan2(z, x)
        a = limit.cone_right if x >= 0.0 else limit.cone_left
        b = limit.cone_up if z >= 0.0 else limit.cone_down
        most = 1.0 / math.hypot(math.cos(psi) / a, math.sin(psi) / b)
        worst = max(worst, math.acos(min(1.0, float(y))) - most)
    return worst


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_limited_branch_keeps_the_trees_pose_where_its_own_solve_misses(seed):
    """A Y on a coned 2-bone trunk, a fixed pole on its left branch, targets the tips of poses inside the limits
    (twisted too): every target reached at default settings. With every limit the tree reaches them, but the
    left branch solved again as a lone chain measured its tip's cone from another roll of the bone above (it
    turns from its pose without IK under the trunk as solved, the tree from it under the trunk as it was) and
    stopped short of 4 of these 80 targets by up to 0.60 units; the tree's pose is kept there, its limits
    kept as Blender's posed frames measure them (the hinge a pure local-X turn)."""
    ob, poser = coned_trunk_y(), coned_trunk_y()
    bpy.context.view_layer.update()
    world = np.array(ob.matrix_world)
    tips = ["b.L", "b.R"]
    pole = empty("P.b.L", tuple((world @ np.array([0.45, 1.0, 1.5, 1.0]))[:3]))
    chains = [add_default_chain(ob, "b.L", 4, empty("T.b.L"), pole), add_default_chain(ob, "b.R", 4, empty("T.b.R"))]
    rng = np.random.default_rng(seed)
    for k in range(20):
        for pb in poser.pose.bones:
            pb.rotation_quaternion = inside_limit(rng, pb)
        bpy.context.view_layer.update()
        for chain, tip in zip(chains, tips):
            chain.target.location = tuple(world_tail(poser, tip))
        bpy.context.view_layer.update()
        for chain in chains:
            assert chain.status == 'REACHED', (k, chain.name, chain.message)
            assert np.linalg.norm(world_tail(ob, chain.tip_bone) - np.array(chain.target.location)) <= \
                1e-3 * 1.3 * sum(ob.data.bones[n].length for n in ("t0", "t1", "a.L", chain.tip_bone))
        assert cone_excess(ob) <= 1e-6, k
        assert off_x(relative_rotations(ob, ["a.R", "b.R"])[0]) <= 0.1, k


@pytest.mark.parametrize("seed", [4, 10, 11, 12])
def test_a_coned_trunk_y_with_a_pole_gives_one_world_pose_in_every_rotation_mode(seed):
    """The Y on a coned 2-bone trunk, a fixed pole on its left branch: the same pose without IK in four rotation
    modes, targets the tips of poses inside the limits: world joints within 1e-4 of each other. The fit that holds
    the branch in its pole's plane reached from the start pose 0.13 degree off the plane, then was run on from
    there (100 steps, still moving) and from the passes' pose, both carrying the channels' rounding, and the fit
    of the shared bones where the passes stopped short ended wherever it first came within its aim: up to 6.1e-3
    apart on seeds 10-12 (5.9e-2 on a probe's target set)."""
    rng = np.random.default_rng(seed)
    rigs, poser = [coned_trunk_y() for _ in MODES], coned_trunk_y()
    bpy.context.view_layer.update()
    world = np.array(rigs[0].matrix_world)
    pole = tuple((world @ np.array([0.45, 1.0, 1.5, 1.0]))[:3])
    chains = [[add_default_chain(ob, "b.L", 4, empty(f"T.{ob.name}.L"), empty(f"P.{ob.name}.L", pole)),
               add_default_chain(ob, "b.R", 4, empty(f"T.{ob.name}.R"))] for ob in rigs]
    same_pose_in_modes(rigs, MODES, rng)

    def tips():
        for pb in poser.pose.bones:
            pb.rotation_quaternion = inside_limit(rng, pb)
        bpy.context.view_layer.update()
        return [world_tail(poser, "b.L"), world_tail(poser, "b.R")]

    assert spread_over_targets(rigs, chains, tips, 12) <= 1e-4


def test_a_torso_pose_depends_only_on_the_frame_inputs():
    """The same walk frames visited in another order give the same pose."""
    ob, chains, points, _ = torso_rig(True, True)
    poses = {}
    for f in list(range(0, FRAMES, 7)) + list(range(FRAMES - 1, -1, -9)):
        for chain, point in zip(chains, points[f]):
            chain.target.location = tuple(point)
        bpy.context.view_layer.update()
        if f in poses:
            np.testing.assert_allclose(world_rotations(ob), poses[f], atol=1e-6)
        poses[f] = world_rotations(ob)


MODES = ('QUATERNION', 'XYZ', 'ZYX', 'AXIS_ANGLE')


@pytest.mark.parametrize(("make", "count", "cone"), [
    (lambda: creature(0.0), 3, None),
    (lambda: creature(0.08), 3, None),
    (lambda: creature(0.0), 3, 1.0),
    (lambda: fork_rig(3, 1, False, None), 3, None),
    (lambda: fork_rig(2, 2, False, None), 4, None),
    (lambda: fork_rig(2, 1, True, None), 3, None),
], ids=["at one point", "0.08 apart", "at one point, cones", "3 branches", "2-bone trunk", "unequal branches"])
def test_a_fork_keeps_a_continuous_roll_the_same_in_every_rotation_mode(make, count, cone):
    """The trunk's roll, which branches starting at one point do not fix, follows the pose without IK:
    no bone turns 5 degrees between frames, and the same pose without IK stored in four rotation modes
    gives the same world pose (to 1e-4, default settings). Before: 180-degree flips between frames and
    between modes."""
    rng = np.random.default_rng(4)
    probe = make()
    bones = len(probe.pose.bones)
    bpy.data.objects.remove(probe)
    base = [Quaternion(axis / np.linalg.norm(axis), rng.uniform(0.05, 0.3)) for axis in rng.normal(size=(bones, 3))]
    rigs = []
    for k, mode in enumerate(MODES):
        ob = make()
        ob.name = f"Y.{mode}"
        for pb in [pb for pb in ob.pose.bones if pb.name[0] in "ab"] if cone is not None else ():
            pb.fabrik_limit.mode = 'CONE'
            limit = pb.fabrik_limit
            limit.cone_left = limit.cone_right = limit.cone_up = limit.cone_down = cone
        if not k:  # the walk on top of the pose without IK
            tips, points = walk(ob, FRAMES, (), base=base)
        for pb, q in zip(ob.pose.bones, base):
            pb.rotation_mode = mode
            set_rotation(pb, q)
        chains = [add_default_chain(ob, tip, count, empty(f"T.{tip}.{mode}", tuple(points[0, c])))
                  for c, tip in enumerate(tips)]
        rigs.append((ob, chains))
    previous = None
    for f in range(FRAMES):
        for _, chains in rigs:
            for chain, point in zip(chains, points[f]):
                chain.target.location = tuple(point)
        bpy.context.view_layer.update()
        reference = world_rotations(rigs[0][0])
        for ob, _ in rigs[1:]:
            # as lone chains, at default settings (before: 1e-2 with 200 iterations, the tree's passes
            # stopping short of converging at slightly different places; the roll flips gave order 1)
            assert np.abs(world_rotations(ob) - reference).max() <= 1e-4, (f, ob.name)
        if previous is not None:
            assert largest_turn(previous, reference) < 5.0, f
        previous = reference


def fork_rig(branches: int, trunk: int, unequal: bool, cone: float | None):
    """A trunk of ``trunk`` bones up +Z forking at one point into ``branches`` slightly bent 2-bone
    branches (the second branch's bones 1.5 times as long when ``unequal``), spread around the trunk;
    ``cone`` (radians) on every branch bone."""
    bones, top = [], None
    for k in range(trunk):
        bones.append((f"trunk{k}", (0, 0, k / trunk), (0, 0, (k + 1) / trunk), top, top is not None))
        top = f"trunk{k}"
    for b in range(branches):
        angle = 2.0 * math.pi * b / branches
        out, side = np.array([math.cos(angle), math.sin(angle), 1.1]), np.array([-math.sin(angle), math.cos(angle), 0])
        scale = 1.5 if unequal and b == 1 else 1.0
        mid = np.array([0, 0, 1.0]) + 0.35 * scale * out + 0.08 * side
        tip = np.array([0, 0, 1.0]) + 0.7 * scale * out
        bones += [(f"a{b}", (0, 0, 1.0), tuple(mid), top, True), (f"b{b}", tuple(mid), tuple(tip), f"a{b}", True)]
    ob = armature("Fork", bones)
    for pb in ob.pose.bones if cone is not None else ():
        if not pb.name.startswith("trunk"):
            pb.fabrik_limit.mode = 'CONE'
            limit = pb.fabrik_limit
            limit.cone_left = limit.cone_right = limit.cone_up = limit.cone_down = cone
    return ob


FORKS = [(2, 1, False, 1.0), (3, 1, False, None), (2, 2, False, None), (2, 1, True, None), (3, 2, True, 1.0)]


@pytest.mark.parametrize(("branches", "trunk", "unequal", "cone"), FORKS,
                         ids=["Y, cones", "3 branches", "2-bone trunk", "unequal branches", "3 unequal, cones"])
def test_forks_reach_their_walk_smoothly_whatever_the_pass_count(branches, trunk, unequal, cone):
    """Forks at one point walked through their own forward kinematics at default settings: every frame
    reached, no bone turns 3 degrees in a frame (measured 1.4-2.6; a Y with cones before: 4.01), and the
    pose is the same with 300 iterations and tolerance 1e-5 (to 1e-5): where the passes stop no longer
    shows."""
    ob = fork_rig(branches, trunk, unequal, cone)
    tips, points = walk(ob, FRAMES, ())
    chains = [add_default_chain(ob, tip, 2 + trunk, empty(f"T.{tip}", tuple(points[0, c])))
              for c, tip in enumerate(tips)]
    previous, worst = None, 0.0
    for f in range(FRAMES):
        for chain, point in zip(chains, points[f]):
            chain.target.location = tuple(point)
        bpy.context.view_layer.update()
        for chain in chains:
            assert chain.status == 'REACHED', (f, chain.name, chain.message)
        rotations = world_rotations(ob)
        if previous is not None:
            worst = max(worst, largest_turn(previous, rotations))
        previous = rotations
        if f % 40 == 0:
            for chain in chains:
                chain.iterations, chain.tolerance = 300, 1e-5
            bpy.context.view_layer.update()
            assert np.abs(world_rotations(ob) - rotations).max() <= 1e-5, f
            for chain in chains:
                chain.iterations, chain.tolerance = 30, 1e-3
            bpy.context.view_layer.update()
    assert worst < 3.0


def blender_tree_ik(ob, tips: list[str], count: int, points: np.ndarray) -> float:
    """Blender's tree IK (one IK constraint per tip, default settings) on ``ob`` through the targets
    ``points`` (frames, tips, 3): its largest per-frame bone turn, every frame checked on target."""
    targets = [empty(f"B.{tip}", tuple(points[0, c])) for c, tip in enumerate(tips)]
    for tip, target in zip(tips, targets):
        constraint = ob.pose.bones[tip].constraints.new('IK')
        constraint.target, constraint.chain_count = target, count
    previous, worst = None, 0.0
    for f in range(len(points)):
        for target, point in zip(targets, points[f]):
            target.location = tuple(point)
        bpy.context.view_layer.update()
        for tip, point in zip(tips, points[f]):
            assert np.linalg.norm(world_tail(ob, tip) - point) <= 1e-3, (f, tip)
        rotations = world_rotations(ob)
        if previous is not None:
            worst = max(worst, largest_turn(previous, rotations))
        previous = rotations
    return worst


Y_POLES = {"b.L": (0.45, 1.0, 1.5), "b.R": (-0.45, 1.0, 1.5)}  # in front of the elbows
SMOOTH_FORKS = [("Y at one point", lambda: creature(0.0), 3, None),
                ("Y at one point, poles", lambda: creature(0.0), 3, Y_POLES),
                ("Y 0.08 apart, poles", lambda: creature(0.08), 3, Y_POLES),
                ("Y 0.08 apart", lambda: creature(0.08), 3, None),
                ("Y at one point, cones", lambda: creature(0.0), 3, 1.0),
                ("3 branches", lambda: fork_rig(3, 1, False, None), 3, None),
                ("2-bone trunk", lambda: fork_rig(2, 2, False, None), 4, None),
                ("unequal branches", lambda: fork_rig(2, 1, True, None), 3, None),
                ("3 unequal on a 2-bone trunk, cones", lambda: fork_rig(3, 2, True, 0.8), 4, 0.8)]


@pytest.mark.parametrize(("make", "count", "cone"), [case[1:] for case in SMOOTH_FORKS],
                         ids=[case[0] for case in SMOOTH_FORKS])
def test_forks_turn_no_more_a_frame_than_blenders_tree_ik(make, count, cone):
    """A fork walked through its own forward kinematics at default settings: FABRIK's largest per-frame
    bone turn is at most 1.25 times that of Blender's tree IK on the same rig and targets (issue 23 asks
    for 2 times; measured 0.95-1.05 times), every frame reached. ``cone`` (radians) limits every branch
    bone of FABRIK's rig; the walk stays inside it, so Blender's rig goes without. ``cone`` a dict: a pole
    for each branch instead, each elbow within 1 degree of the plane of its branch's root, target and pole;
    Blender's tree IK ignores poles, and the plane turns as the target passes the pole: at most 2 times
    (measured 1.54). Before, the fork settled onto the pose nearest its start in joint
    distances, which kept each branch's first bone still and swung its last: 1.6-2.8 times Blender's;
    with poles it did not settle: 3.7-4.9 times, 28-57 of 800 tip-frames missed on the benchmark's Y."""
    ob = make()
    tips, points = walk(ob, FRAMES, ())
    poles = cone if isinstance(cone, dict) else {}
    cone = None if poles else cone
    for pb in ob.pose.bones if cone is not None else ():
        if pb.name[0] in "ab":
            pb.fabrik_limit.mode = 'CONE'
            limit = pb.fabrik_limit
            limit.cone_left = limit.cone_right = limit.cone_up = limit.cone_down = cone
    chains = [add_default_chain(ob, tip, count, empty(f"T.{tip}", tuple(points[0, c])),
                                empty(f"P.{tip}", poles[tip]) if poles else None) for c, tip in enumerate(tips)]
    previous, worst = None, 0.0
    for f in range(FRAMES):
        for chain, point in zip(chains, points[f]):
            chain.target.location = tuple(point)
        bpy.context.view_layer.update()
        for chain, point in zip(chains, points[f]):
            assert chain.status == 'REACHED', (f, chain.name, chain.message)
            if poles:
                upper = ob.pose.bones[chain.tip_bone].parent.name
                assert plane_degrees(world_head(ob, upper), point, np.array(poles[chain.tip_bone]),
                                     world_tail(ob, upper)) <= 1.0, f
        rotations = world_rotations(ob)
        if previous is not None:
            worst = max(worst, largest_turn(previous, rotations))
        previous = rotations
    blender = blender_tree_ik(make(), tips, count, points)
    assert worst <= (2.0 if poles else 1.25) * blender, (worst, blender)
