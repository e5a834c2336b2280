"""IK/FK snapping: put a chain's target and pole on its FK pose, or make its IK pose the FK pose.

FK here is the chain's pose without IK: its bones' keyed channels, else their stored base rotation.
Both snaps go through Blender's own evaluation (the live solve writes the pose at influence 0 or 1)
rather than re-deriving it, so what they read is exactly what the viewport shows and what the solve
starts from. Chains that share bones (solved together as a tree) are always snapped together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import bpy
import numpy as np
from bpy.app.translations import pgettext_rpt as rpt_
from bpy.props import BoolProperty
from mathutils import Matrix, Vector

from . import adapter, compat, handlers, pole
from .polls import armature_in_pose_mode, has_chains
from .rig.base_pose import capture_base, capture_scale
from .rig.plan import ChainError, chain_bones, check_references
from .solver.prepare import EPS

# A target or pole counts as placed when its evaluated transform is this close (fraction of the chain's
# length; radians for the target's orientation) to the one asked for. Locations are float32: ~1e-7.
PLACE_TOLERANCE = 1e-5
# Writes per target or pole: the first, then corrections through its parent and constraints
# (an offset or a Child Of converges in one; a constraint that ignores its owner never does).
CORRECTIONS = 4
SWITCH_GROUP = "FABRIK IK"
# A straight FK pose (joints off the root-tip line by at most this fraction of its length) puts its tip at
# exactly full reach, where the solve reads the bend back from float32 lengths with square-root
# sensitivity: a relative error of 1e-7 bends a 2-bone arm by 4e-4 rad. Such a target goes this much
# farther out along the line instead, where the solve is straight (or stretched by that much) exactly.
STRAIGHT = 1e-5
BEYOND_REACH = 1e-6


@dataclass
class SnapResult:
    """What one snap did, for the operator's report."""

    snapped: list[str] = field(default_factory=list)  # chain names
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def snap_group(ob, index: int) -> list[int]:
    """Chain ``index`` and every chain sharing bones with it, directly or through others (one tree)."""
    bones = {}
    for i, chain in enumerate(ob.fabrik.chains):
        try:
            bones[i] = set(chain_bones(ob, chain))
        except ChainError:
            continue
    group, grown = {index}, True
    while grown:
        grown = False
        for i, names in bones.items():
            if i not in group and any(names & bones.get(j, set()) for j in group):
                group.add(i)
                grown = True
    return sorted(group)


def _applied(ob, chain) -> bool:
    """Whether the live solve drives the chain (at some influence)."""
    return bool(ob.fabrik.enabled and chain.enabled and ob.mode != 'EDIT')


def _bones_of(ob, indices: list[int], result: SnapResult) -> dict[int, list[str]]:
    found = {}
    for i in indices:
        chain = ob.fabrik.chains[i]
        try:
            found[i] = chain_bones(ob, chain)
        except ChainError as error:
            result.errors.append(rpt_("Chain '{}': {}").format(chain.name, str(error)))
    return found


# --- IK -> FK: move the target and pole onto the FK pose -------------------------------------------------


def snap_ik_to_fk(context, ob, indices: list[int], keyframe: bool) -> SnapResult:
    """Move the targets (and poles) of chains ``indices`` so that their IK solution is their FK pose.

    Afterwards, switching the chains on at full influence moves no joint (see the tests for figures).
    Chains switched off, or a rig switched off, show their FK pose as it is now: it becomes their
    stored pose without IK first, so switching them on starts from it.
    """
    result = SnapResult()
    chains = ob.fabrik.chains
    bones = _bones_of(ob, indices, result)
    for i in list(bones):
        chain = chains[i]
        problem = _reference_problem(ob, chain, bones[i])
        if problem:
            result.errors.append(problem)
            del bones[i]
    if not bones:
        return result

    saved, fk = read_fk_pose(context, ob, bones)
    # The armature keeps showing the FK pose while targets and poles are placed: solving it toward
    # half-placed targets would only cost time (a tree misses one target until both are placed).
    with handlers.suspended([ob.name]):
        for i, influence in saved.items():
            if chains[i].influence != influence:
                chains[i].influence = influence
        _place_all(context, ob, bones, fk.poses, fk.tails, fk.sides, fk.world, keyframe, result)
    handlers.request_solve()
    return result


@dataclass
class FkPose:
    """The FK pose of some chains at one frame, in world space (chain index -> values)."""

    world: Matrix  # the armature's world matrix
    poses: dict[int, list[Matrix]]  # each bone's world matrix, root first
    tails: dict[int, Vector]  # the tip bone's tail
    sides: dict[int, np.ndarray]  # the root bone's Z axis: the bend side used when the pose is straight


def read_fk_pose(context, ob, bones: dict[int, list[str]]) -> tuple[dict[int, float], FkPose]:
    """The FK pose of chains ``bones`` (index -> bone names) as the live solve shows it at influence 0
    (or, not driven, as shown now). Driven chains are left at influence 0: the first value returned
    holds their influences, to be put back once nothing needs the FK pose shown any more."""
    chains = ob.fabrik.chains
    saved = {}
    for i, names in bones.items():
        chain = chains[i]
        if _applied(ob, chain):
            saved[i] = chain.influence
            if chain.influence != 0.0:
                chain.influence = 0.0
            _replay_keys(ob, names, chain.use_stretch, context.scene.frame_current)
        else:
            for name in names:
                capture_base(ob.pose.bones[name])
    depsgraph = context.evaluated_depsgraph_get()
    ev = ob.evaluated_get(depsgraph)
    world = ev.matrix_world.copy()
    poses = {i: [world @ ev.pose.bones[name].matrix for name in names] for i, names in bones.items()}
    tails = {i: world @ ev.pose.bones[names[-1]].tail for i, names in bones.items()}
    sides = {i: np.array(poses[i][0].col[2][:3]) for i in bones}
    return saved, FkPose(world, poses, tails, sides)


def _replay_keys(ob, names: list[str], scale: bool, frame: int) -> None:
    """Put the keyed values of the bones' rotation (and scale) channels at ``frame`` back into them.

    The live solve reads keyed channels as evaluated, and between frame changes Blender does not
    evaluate F-curves again: the channels then hold the IK pose the solve wrote last, so the pose at
    influence 0 would be that IK pose instead of the keyed FK pose.
    """
    fcurves = {(fcurve.data_path, fcurve.array_index): fcurve for fcurve in compat.animated_fcurves(ob)}
    if not fcurves:
        return
    for name in names:
        pb = ob.pose.bones[name]
        for attribute in [adapter.rotation_path(pb.rotation_mode)] + (["scale"] if scale else []):
            path = pb.path_from_id(attribute)
            values = list(getattr(pb, attribute))
            keyed = False
            for k in range(len(values)):
                fcurve = fcurves.get((path, k))
                if fcurve is not None and not fcurve.mute:
                    values[k], keyed = fcurve.evaluate(frame), True
            if keyed:
                setattr(pb, attribute, values)


def _place_all(context, ob, bones: dict[int, list[str]], poses: dict, tails: dict, sides: dict, world: Matrix,
               keyframe: bool, result: SnapResult) -> None:
    """Put each chain's target on its FK tip and its pole on its FK bend (world matrices ``poses``)."""
    chains = ob.fabrik.chains
    frame = context.scene.frame_current
    poles: dict[int, PlacedPole] = {}
    for i, names in bones.items():
        chain = chains[i]
        pose = poses[i]
        length = sum(ob.data.bones[name].length for name in names) * _scale(world)
        tip = pose[-1]
        joints = np.array([np.array(m.translation) for m in pose] + [np.array(tails[i])])
        placed = joints[:-1] if chain.match_target_rotation else joints
        rotation = tip.to_quaternion() if chain.match_target_rotation else None
        location = Vector(_unsoftened(placed, _out_of_reach(placed, length), chain.softness))
        if chain.use_stretch and chain.softness > 0.0 and _in_soft_zone(placed, chain.softness):
            result.warnings.append(rpt_("Chain '{}': with Softness and Stretch, IK stretches any pose whose tip "
                                        "is in the soft zone, so this FK pose moves when switched to IK").format(
                                            chain.name))
        problem = _place(context, chain.target, chain.target_bone, location, rotation, length, rpt_("Target"))
        if problem:
            result.errors.append(rpt_("Chain '{}': {}").format(chain.name, problem))
            continue
        if keyframe:
            _key_transform(chain.target, chain.target_bone, rotation is not None, frame)
        elif _is_animated(chain.target, chain.target_bone):
            result.warnings.append(rpt_("Target '{}' is animated: turn on Keyframe, or the snap is lost at the "
                                        "next frame change").format(_label(chain.target, chain.target_bone)))
        if chain.pole is not None:
            point = Vector(pole.pole_position(joints, sides[i]))
            problem = _place(context, chain.pole, chain.pole_bone, point, None, length, rpt_("Pole"))
            if problem:
                result.errors.append(rpt_("Chain '{}': {}").format(chain.name, problem))
                continue
            poles[i] = PlacedPole(joints, np.array(location), point, length)
        result.snapped.append(chain.name)
    settle_poles(context, ob, bones, poles, result)
    if keyframe:
        for i in poles:
            _key_transform(chains[i].pole, chains[i].pole_bone, False, frame)


# --- poles: turned back by the roll the live solve gives the chain ------------------------------------------------

# The solve rolls a chain toward its pole by the direction of the joints' centroid off the root-target line in
# its own start pose, which it builds from the FK pose in float32 and curls onto the target. On an S-shaped pose
# that centroid sits near the line (0.011 off on a 7-bone tentacle whose joints bulge 0.11 either way), so the
# start's rounding (its tip 9.5e-7 off the target) turns the centroid's direction by 4.8e-3 rad and rolls the
# chain 1.5e-4 of its length away from its FK pose. The curl does not depend on the pole: turning the pole back
# by the measured roll cancels it: one round brought that tentacle's bake from 1.5e-4 to 2.3e-5 chain lengths
# (the curl itself), a second changed nothing (2e-8). Rounds of measure-and-turn at most, for rigs where the
# pole does move the start; a roll that moves no joint more than ROLL_NOISE of the chain's length is left.
POLE_ROUNDS = 2
ROLL_NOISE = 1e-7
# The roll's error moves the joints by the start's rounding times (farthest joint off the line) / (the joints'
# centroid off it). Where that ratio is at most this, the move stays within a few roundings (~1e-6 of the
# chain's length) and the measuring solve is skipped: a two-bone limb's ratio is 1, the tentacle's S 10.2, the
# tests' S's 12-130. (The measurement doubled the range bake's time on the walk: 2.3 s -> 4.4 s.)
SKEWED = 4.0


@dataclass
class PlacedPole:
    """A pole the snap placed, and what it was placed for (world space)."""

    joints: np.ndarray  # (N + 1, 3): the FK heads, then the tip's tail
    goal: np.ndarray  # (3,): where the target was placed (on the root-tip line)
    point: Vector  # where the pole is now
    length: float  # the chain's length


def settle_poles(context, ob, bones: dict[int, list[str]], poles: dict[int, PlacedPole], result: SnapResult) -> None:
    """Turn each pole of ``poles`` (chain index -> placement) about its chain's root-target line by the roll that
    the live solve, at full influence, gives the chain against its FK pose (see :data:`POLE_ROUNDS`)."""
    chains = ob.fabrik.chains
    todo = {i: placed for i, placed in poles.items() if _roll_sensitive(placed.joints, placed.goal)}
    if ob.mode == 'EDIT' or ob.data.pose_position == 'REST':
        return
    for _round in range(POLE_ROUNDS):
        if not todo:
            return
        solved = solved_joints(context, ob, {i: bones[i] for i in todo})
        turned = {}
        for i, placed in todo.items():
            if i not in solved:
                continue
            angle = roll_angle(placed.joints, solved[i], placed.goal)
            if abs(angle) * _off_line(placed.joints, placed.goal).max() <= ROLL_NOISE * placed.length:
                continue
            point = Vector(turn_about(np.array(placed.point), placed.joints[0], placed.goal, angle))
            chain = chains[i]
            problem = _place(context, chain.pole, chain.pole_bone, point, None, placed.length, rpt_("Pole"))
            if problem:
                result.warnings.append(rpt_("Chain '{}': {}").format(chain.name, problem))
                continue
            placed.point = point
            turned[i] = placed
        todo = turned


def _roll_sensitive(joints: np.ndarray, goal: np.ndarray) -> bool:
    """Whether the pose ``joints`` bends, with its interior joints' centroid nearer its root-goal line than
    1 / :data:`SKEWED` of its farthest joint's distance from it (an S, or bends that nearly cancel)."""
    axis = roll_axis(joints, goal)
    if axis is None:
        return False
    across = _perpendicular(joints[1:-1] - joints[0], axis)
    return bool(np.linalg.norm(across, axis=1).max() > SKEWED * np.linalg.norm(across.mean(axis=0)))


def roll_axis(joints: np.ndarray, goal: np.ndarray) -> np.ndarray | None:
    """Unit root-to-goal direction of a chain pose ``joints`` (N + 1, 3) that bends off that line (by more
    than :data:`STRAIGHT` of its length); None for a straight pose, whose roll moves nothing."""
    root = joints[0]
    axis = np.asarray(goal, dtype=np.float64) - root
    norm = float(np.linalg.norm(axis))
    length = float(np.linalg.norm(np.diff(joints, axis=0), axis=1).sum())
    if norm <= 1e-9 * length or len(joints) < 3:
        return None
    return axis / norm if float(_off_line(joints, goal).max()) > STRAIGHT * length else None


def _off_line(joints: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """Distances of the interior joints of ``joints`` (N + 1, 3) from the line from its root to ``goal``."""
    return np.linalg.norm(_perpendicular(joints[1:-1] - joints[0], goal - joints[0]), axis=1)


def _perpendicular(offsets: np.ndarray, direction: np.ndarray) -> np.ndarray:
    axis = direction / np.linalg.norm(direction)
    return offsets - np.outer(offsets @ axis, axis)


def roll_angle(fk: np.ndarray, ik: np.ndarray, goal: np.ndarray) -> float:
    """The turn (radians, right-handed about the root-to-``goal`` line) that best carries the joints ``ik``
    onto the joints ``fk`` (both (N + 1, 3), same root), least squares over their offsets from the line."""
    axis = roll_axis(fk, goal)
    if axis is None:
        return 0.0
    u, v = (_perpendicular(points[1:-1] - fk[0], axis) for points in (fk, ik))
    return math.atan2(float(np.cross(v, u).sum(axis=0) @ axis), float(np.einsum("ij,ij->", v, u)))


def turn_about(point: np.ndarray, root: np.ndarray, goal: np.ndarray, angle: float) -> np.ndarray:
    """``point`` turned by ``angle`` (radians, right-handed) about the line from ``root`` to ``goal``."""
    axis = np.asarray(goal, dtype=np.float64) - root
    axis = axis / np.linalg.norm(axis)
    x = np.asarray(point, dtype=np.float64) - root
    c, s = math.cos(angle), math.sin(angle)
    return root + x * c + np.cross(axis, x) * s + axis * (axis @ x) * (1.0 - c)


def solved_joints(context, ob, bones: dict[int, list[str]]) -> dict[int, np.ndarray]:
    """World joints (heads, then the tip's tail) of chains ``bones`` as the live solve poses them now at full
    influence, chain index -> (N + 1, 3); chains it cannot solve are left out. The rig's and the chains'
    switches and every chain bone's channels are put back afterwards, exactly."""
    settings = ob.fabrik
    chains = settings.chains
    written = set()  # the bones any chain of the rig may write
    for chain in chains:
        try:
            written.update(chain_bones(ob, chain))
        except ChainError:
            continue
    channels = {name: _channels(ob.pose.bones[name]) for name in written}
    saved_rig = settings.enabled
    saved = {i: (chains[i].enabled, chains[i].influence) for i in bones}
    out = {}
    try:
        with handlers.resumed([ob.name]):
            if not settings.enabled:
                settings.enabled = True
            for i in bones:
                if not chains[i].enabled:
                    chains[i].enabled = True
                if chains[i].influence != 1.0:
                    chains[i].influence = 1.0
            handlers.request_solve()
            ob.update_tag()
            ev = ob.evaluated_get(context.evaluated_depsgraph_get())  # the live solve runs on this update
            world = ev.matrix_world
            for i, names in bones.items():
                if chains[i].status in ('INVALID', 'NONE'):
                    continue
                out[i] = np.array([tuple(world @ ev.pose.bones[name].head) for name in names]
                                  + [tuple(world @ ev.pose.bones[names[-1]].tail)])
    finally:
        for i, (enabled, influence) in saved.items():
            if chains[i].influence != influence:
                chains[i].influence = influence
            if chains[i].enabled != enabled:
                chains[i].enabled = enabled
        if settings.enabled != saved_rig:
            settings.enabled = saved_rig
        for name, values in channels.items():
            _put_channels(ob.pose.bones[name], values)
        context.view_layer.update()
    return out


_CHANNELS = ("rotation_quaternion", "rotation_euler", "rotation_axis_angle", "scale")


def _channels(pose_bone) -> tuple:
    return tuple(tuple(getattr(pose_bone, attribute)) for attribute in _CHANNELS)


def _put_channels(pose_bone, values: tuple) -> None:
    for attribute, value in zip(_CHANNELS, values, strict=True):
        if tuple(getattr(pose_bone, attribute)) != value:
            setattr(pose_bone, attribute, value)


def _out_of_reach(points: np.ndarray, length: float) -> np.ndarray:
    """Where the target goes for the FK joints ``points`` (root first, the reached point last): on the
    last point, or just beyond it along the line when the joints are straight (see ``STRAIGHT``)."""
    root, end = points[0], points[-1]
    axis = end - root
    reach = float(np.linalg.norm(axis))
    if len(points) < 3 or reach <= 0.0:
        return end
    axis = axis / reach
    offsets = points[1:-1] - root
    off_line = offsets - np.outer(offsets @ axis, axis)
    if float(np.linalg.norm(off_line, axis=1).max()) > STRAIGHT * length:
        return end
    return end + axis * (BEYOND_REACH * length)


def _in_soft_zone(points: np.ndarray, softness: float) -> bool:
    reach = float(np.linalg.norm(np.diff(points, axis=0), axis=1).sum())
    return float(np.linalg.norm(points[-1] - points[0])) > reach * (1.0 - softness)


def _unsoftened(points: np.ndarray, goal: np.ndarray, softness: float) -> np.ndarray:
    """Where to put a target so that soft IK (``softness``) eases it onto ``goal``, the FK pose's reached
    point (``points``: the FK joints, root first): along the same line from the root, at the distance
    the soft curve (:func:`.solver.soft.eased_distance`) maps onto the goal's. Without stretch the
    solve then aims at the goal itself and keeps the pose."""
    if softness <= 0.0:
        return goal
    root = points[0]
    reach = float(np.linalg.norm(np.diff(points, axis=0), axis=1).sum())
    width = softness * reach
    start = reach - width
    distance = float(np.linalg.norm(goal - root))
    if distance <= start or distance <= 0.0:
        return goal
    # Inverse of start - width * expm1((start - d) / width); at full reach, just past where the solve
    # counts the chain as straight (within EPS of its reach).
    x = max((start - distance) / width, -1.0 + 0.5 * EPS * reach / width)
    return root + (goal - root) * ((start - width * math.log1p(x)) / distance)


def _reference_problem(ob, chain, bones: list[str]) -> str:
    """Why the chain's target or pole cannot be moved onto its FK pose ("" when it can)."""
    if chain.target is None:
        return rpt_("Chain '{}' has no target").format(chain.name)
    try:
        check_references(ob, chain, bones)
    except ChainError as error:
        return rpt_("Chain '{}': {}").format(chain.name, str(error))
    above = set()  # bones the chain hangs from
    bone = ob.data.bones[bones[0]].parent
    while bone is not None:
        above.add(bone.name)
        bone = bone.parent
    carriers = set()  # the armature and the objects it hangs from: moving one of them moves the chain
    walk = ob
    while walk is not None:
        carriers.add(walk.as_pointer())
        walk = walk.parent
    if chain.pole == chain.target and (chain.target.type != 'ARMATURE' or chain.pole_bone == chain.target_bone):
        # One object (or bone) cannot sit on the tip and on the bend side at once: placing it as the pole would
        # move the target off the tip.
        return rpt_("Chain '{}': its pole is its target, '{}'; pick another object (or bone) for the pole").format(
            chain.name, _label(chain.target, chain.target_bone))
    for thing, bone_name in ((chain.target, chain.target_bone), (chain.pole, chain.pole_bone)):
        if thing is None:
            continue
        is_bone = thing.type == 'ARMATURE' and bool(bone_name)
        if thing.as_pointer() in carriers and not is_bone:
            return rpt_("Chain '{}': '{}' carries the armature; moving it would move the chain").format(
                chain.name, thing.name)
        if is_bone and thing == ob and bone_name in above:
            return rpt_("Chain '{}': bone '{}' carries the chain; moving it would move the chain").format(
                chain.name, bone_name)
        if thing.library is not None and thing.override_library is None:
            return rpt_("Chain '{}': '{}' is linked from a library and cannot be moved").format(chain.name,
                                                                                                thing.name)
        if thing.type == 'ARMATURE' and bone_name and thing.mode == 'EDIT':
            return rpt_("Chain '{}': armature '{}' is in Edit Mode").format(chain.name, thing.name)
    return ""


def _scale(world: Matrix) -> float:
    x, y, z = world.to_scale()
    return (x + y + z) / 3.0


def _label(thing, bone_name: str) -> str:
    return f"{thing.name}: {bone_name}" if thing.type == 'ARMATURE' and bone_name else thing.name


def _world_matrix(context, thing, bone_name: str) -> Matrix:
    """Evaluated world matrix of an object, or of one of its pose bones (what the solve reads)."""
    ev = thing.evaluated_get(context.evaluated_depsgraph_get())
    if thing.type == 'ARMATURE' and bone_name:
        return ev.matrix_world @ ev.pose.bones[bone_name].matrix
    return ev.matrix_world.copy()


def _write_world(context, thing, bone_name: str, matrix: Matrix) -> None:
    """Give an object or pose bone this world matrix through its own channels (parents, parent inverse
    and rest pose accounted for by Blender's own setters)."""
    if thing.type == 'ARMATURE' and bone_name:
        ev = thing.evaluated_get(context.evaluated_depsgraph_get())
        thing.pose.bones[bone_name].matrix = ev.matrix_world.inverted() @ matrix
    else:
        thing.matrix_world = matrix


def _place(context, thing, bone_name: str, location: Vector, rotation, length: float, label: str) -> str:
    """Move ``thing`` (keeping its scale, and its orientation unless ``rotation`` is given) so that it
    is evaluated at ``location``; "" when done, else why not (and ``thing`` is left as it was)."""
    pb = thing.pose.bones[bone_name] if thing.type == 'ARMATURE' and bone_name else None
    original = (pb if pb is not None else thing).matrix_basis.copy()
    now = _world_matrix(context, thing, bone_name)
    _loc, now_rotation, now_scale = now.decompose()
    wanted = Matrix.LocRotScale(location, now_rotation if rotation is None else rotation, now_scale)
    written = wanted
    off = angle = float("inf")
    for _attempt in range(CORRECTIONS):
        _write_world(context, thing, bone_name, written)
        got = _world_matrix(context, thing, bone_name)
        off = (got.translation - wanted.translation).length
        angle = 0.0 if rotation is None else got.to_quaternion().rotation_difference(rotation).angle
        if off <= PLACE_TOLERANCE * length and angle <= PLACE_TOLERANCE:
            return ""
        if abs(got.determinant()) < 1e-12:
            break
        # Whatever sits between the channels and the result (parent, constraints) taken as a fixed
        # transform on the left: correct the written matrix by it.
        written = written @ got.inverted() @ wanted
    (pb if pb is not None else thing).matrix_basis = original
    context.view_layer.update()
    return rpt_("{} '{}' cannot be placed on the FK pose (its parent or constraints hold it {:.3g} away); "
                "it was left where it was").format(label, _label(thing, bone_name), off)


# --- FK -> IK: the IK pose becomes the chain's own (FK) pose -------------------------------------------------


def snap_fk_to_ik(context, ob, indices: list[int], keyframe: bool, disable: bool) -> SnapResult:
    """Write the IK pose of chains ``indices`` into their bones' channels as their pose without IK
    (rotations, and the scale of stretching chains).

    The IK pose is the live solve at full influence (chains off or at a lower influence are solved at
    full influence for the snap). Keys those channels at the current frame when ``keyframe``;
    with ``disable``, the chains then go to influence 0 (keyed when ``keyframe``; a chain whose
    influence is animated but not keyed is switched off instead), so nothing moves.
    """
    result = SnapResult()
    if not ob.fabrik.enabled:
        result.errors.append(rpt_("FABRIK IK is switched off for '{}' (Solve This Rig)").format(ob.name))
        return result
    if ob.mode == 'EDIT':
        result.errors.append(rpt_("Leave Edit Mode first"))
        return result
    chains = ob.fabrik.chains
    bones = _bones_of(ob, indices, result)
    if not bones:
        return result
    saved = {i: (chains[i].enabled, chains[i].influence) for i in bones}
    for i in bones:
        if not chains[i].enabled:
            chains[i].enabled = True
        if chains[i].influence != 1.0:
            chains[i].influence = 1.0
    context.evaluated_depsgraph_get()  # the live solve writes the IK pose into the channels
    for i in list(bones):
        if chains[i].status == 'INVALID':
            result.errors.append(rpt_("Chain '{}': {}").format(chains[i].name, chains[i].message))
            del bones[i]

    frame = context.scene.frame_current
    animated = {fcurve.data_path for fcurve in compat.animated_fcurves(ob)}
    keyed_unkeyed = []
    with handlers.suspended([ob.name]):
        done: set[str] = set()
        stretching = {name for i, names in bones.items() if chains[i].use_stretch for name in names}
        for names in bones.values():
            for name in names:
                if name in done:
                    continue
                done.add(name)
                pb = ob.pose.bones[name]
                capture_base(pb)
                paths = [adapter.rotation_path(pb.rotation_mode)]
                if name in stretching:  # the stretch the solve wrote becomes the scale without IK too
                    capture_scale(pb)
                    paths.append("scale")
                for path in paths:
                    if keyframe:
                        pb.keyframe_insert(path, frame=frame, group=name)
                    elif pb.path_from_id(path) in animated and name not in keyed_unkeyed:
                        keyed_unkeyed.append(name)
        for i, (enabled, influence) in saved.items():
            chain = chains[i]
            restore_enabled = enabled
            if i in bones and disable:
                path = chain.path_from_id("influence")
                if keyframe:
                    chain.influence = influence
                    _key_switch(ob, chain, path, frame)
                elif path in animated:
                    chain.influence = influence
                    restore_enabled = False
                    result.warnings.append(rpt_("Chain '{}': its influence is animated, so it was switched off "
                                                "instead (turn on Keyframe to key the switch)").format(chain.name))
                else:
                    chain.influence = 0.0
            elif chain.influence != influence:
                chain.influence = influence
            if chain.enabled != restore_enabled:
                chain.enabled = restore_enabled
            if i in bones:
                result.snapped.append(chain.name)
    if keyed_unkeyed:
        result.warnings.append(rpt_("Bones with keys were not keyed ({}): turn on Keyframe, or their "
                                    "snapped pose is lost at the next frame change").format(", ".join(keyed_unkeyed)))
    context.view_layer.update()
    return result


def _key_switch(ob, chain, path: str, frame: int) -> None:
    """Key influence 0 at ``frame``; a chain whose influence had no keys keeps its influence one frame
    before, so earlier frames stay IK."""
    if path not in {fcurve.data_path for fcurve in compat.animated_fcurves(ob)}:
        ob.keyframe_insert(path, frame=frame - 1, group=SWITCH_GROUP)
    chain.influence = 0.0
    ob.keyframe_insert(path, frame=frame, group=SWITCH_GROUP)


# --- keys ------------------------------------------------------------------------------------------------------


def _is_animated(thing, bone_name: str) -> bool:
    """Whether the object's (or its pose bone's) location or rotation has F-curves in its action."""
    transform = ("location", "rotation_quaternion", "rotation_euler", "rotation_axis_angle")
    if thing.type == 'ARMATURE' and bone_name:
        pb = thing.pose.bones[bone_name]
        paths = {pb.path_from_id(name) for name in transform}
    else:
        paths = set(transform)
    return any(fcurve.data_path in paths for fcurve in compat.animated_fcurves(thing))


def _key_transform(thing, bone_name: str, rotation: bool, frame: int) -> None:
    """Key the location (and rotation, in its rotation mode) that a snap wrote, at ``frame``.

    Every channel, locked or not: the snap wrote them all, and an unkeyed one would jump back.
    """
    is_bone = thing.type == 'ARMATURE' and bool(bone_name)
    owner = thing.pose.bones[bone_name] if is_bone else thing
    group = bone_name if is_bone else "Object Transforms"
    if not (is_bone and owner.bone.use_connect):
        owner.keyframe_insert("location", frame=frame, group=group)
    if rotation:
        owner.keyframe_insert(adapter.rotation_path(owner.rotation_mode), frame=frame, group=group)


# --- operators -----------------------------------------------------------------------------------------------


def _indices(ob, all_chains: bool) -> list[int]:
    settings = ob.fabrik
    if all_chains:
        return list(range(len(settings.chains)))
    return snap_group(ob, min(settings.active_chain_index, len(settings.chains) - 1))


class _Snap:
    """What both snap operators share: the poll test, the keying default and the report."""

    @classmethod
    def can_snap(cls, context) -> bool:
        """An armature in Pose Mode with chains; otherwise say why not."""
        return has_chains(cls, armature_in_pose_mode(context), "Select an armature in Pose Mode")

    def keyframe_wanted(self, context) -> bool:
        """``keyframe`` as given, else the scene's auto-keying."""
        if self.properties.is_property_set("keyframe"):
            return bool(self.keyframe)
        return bool(context.scene.tool_settings.use_keyframe_insert_auto)

    def finish(self, result: SnapResult, verb: str) -> set[str]:
        for warning in result.warnings:
            self.report({'WARNING'}, warning)
        if not result.snapped:
            self.report({'ERROR'}, "; ".join(result.errors) or rpt_("Nothing to snap"))
            return {'CANCELLED'}
        if result.errors:
            self.report({'WARNING'}, rpt_("Snapped {}; not snapped: {}").format(", ".join(result.snapped),
                                                                               "; ".join(result.errors)))
        else:
            self.report({'INFO'}, rpt_("{}: {}").format(verb, ", ".join(result.snapped)))
        return {'FINISHED'}


class POSE_OT_fabrik_snap_ik_to_fk(_Snap, bpy.types.Operator):
    bl_idname = "pose.fabrik_snap_ik_to_fk"
    bl_label = "Snap IK to FK"
    bl_description = ("Move the active chain's target (and pole) onto its FK pose, so that switching to IK "
                      "moves nothing")
    bl_options = {'REGISTER', 'UNDO'}

    all_chains: BoolProperty(  # type: ignore[valid-type]
        name="All Chains", description="Snap every chain of the armature, not only the active one",
        default=False, options={'SKIP_SAVE'},
    )
    keyframe: BoolProperty(  # type: ignore[valid-type]
        name="Keyframe", description="Key the moved target and pole at the current frame "
                                     "(default: the scene's auto-keying)",
        default=False, options={'SKIP_SAVE'},
    )

    @classmethod
    def poll(cls, context):
        return cls.can_snap(context)

    def execute(self, context):
        ob = context.object
        result = snap_ik_to_fk(context, ob, _indices(ob, self.all_chains), self.keyframe_wanted(context))
        return self.finish(result, rpt_("Targets snapped to FK"))


class POSE_OT_fabrik_snap_fk_to_ik(_Snap, bpy.types.Operator):
    bl_idname = "pose.fabrik_snap_fk_to_ik"
    bl_label = "Snap FK to IK"
    bl_description = ("Make the active chain's IK pose its bones' own pose (their pose without IK), "
                      "then switch the chain to FK")
    bl_options = {'REGISTER', 'UNDO'}

    all_chains: BoolProperty(  # type: ignore[valid-type]
        name="All Chains", description="Snap every chain of the armature, not only the active one",
        default=False, options={'SKIP_SAVE'},
    )
    keyframe: BoolProperty(  # type: ignore[valid-type]
        name="Keyframe", description="Key the bones' rotations (and the switch) at the current frame "
                                     "(default: the scene's auto-keying)",
        default=False, options={'SKIP_SAVE'},
    )
    disable: BoolProperty(  # type: ignore[valid-type]
        name="Switch to FK", description="Set the chain's influence to 0 afterwards, so the pose stays as it is",
        default=True, options={'SKIP_SAVE'},
    )

    @classmethod
    def poll(cls, context):
        return cls.can_snap(context)

    def execute(self, context):
        ob = context.object
        result = snap_fk_to_ik(context, ob, _indices(ob, self.all_chains), self.keyframe_wanted(context),
                               self.disable)
        return self.finish(result, rpt_("FK snapped to IK"))
