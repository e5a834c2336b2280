"""An armature's standalone chains one at a time, in mathutils and plain floats.

For a few short chains a numpy call (1-3 us each, whatever its size) costs more than the arithmetic
it does, and the batched path (:mod:`.batch`) makes dozens of them per armature. Here every step is
a mathutils 4x4 operation (under 1 us) or float arithmetic, the solvers are the float entry points of
the core (:func:`.solver.fabrik.solve_points`, :func:`.solver.two_bone.two_bone_points`), and rotations
are written bone by bone (1.6-3 us each, which also tags the armature for re-evaluation).

The results match the batched path's: same start pose, same solvers, same rotation rules.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass

import numpy as np
from mathutils import Matrix, Quaternion, Vector

from .. import diagnostics
from ..adapter import bone_path
from ..cache import edits
from ..solver import orient, solve_chain, solve_two_bone
from ..solver.fabrik import solve_floats, solve_points
from ..solver.switches import BULK_BONES_PER_WRITE, BULK_FIXED_WRITES  # tests set small.BULK_BONES_PER_WRITE
from ..solver.two_bone import two_bone_points
from . import reach, roll
from .base_pose import base_rotation, base_scale, restore_scale, stretched_local, write_near_base
from .influence import blend_fraction, blend_rotations
from .inputs import (
    ZERO_LENGTH,
    ArmatureFrame,
    ChainInputs,
    ChainResult,
    basis_location,
    chain_inputs,
    pose_matrix,
    rest_side,
    unit_columns,
)
from .plan import ChainError, ChainPlan, check_references_once, settings_of


@dataclass(eq=False, slots=True)
class StartPose:
    """One chain's pose without IK, in mathutils: where its solve starts and its rotations blend from.

    Kept on the chain's plan while the inputs it was made from stay the same (:func:`_start_pose`), so
    nothing may change it in place.
    """

    parent: Matrix  # armature-space matrix of the root's parent
    pre: list[Matrix]  # armature-space matrix of each bone
    base: list[Quaternion]  # each bone's local rotation
    joints: list[Vector]  # heads, then the tip's tail
    scales: list[Vector] | None  # each bone's scale without IK where it may stretch, else None
    rotations: list[Quaternion]  # each bone's armature-space rotation (of ``pre``)
    coords: tuple[list[float], list[float], list[float]]  # x, y and z of the placed bones' joints
    segments: list[float]  # length of each placed bone, joint to joint (as solve_points measures it)
    short: list[bool] | None  # each placed bone too short to turn, or None when none is
    channels: list[tuple]  # each bone's evaluated (location, scale) as tuples, which the pose was made from
    scale_checked: bool = False  # chain_inputs found the scales solvable (non-stretching chains)
    frame: tuple | None = None  # orient.start_frame_floats of the placed joints, on first use
    frame_axes: Matrix | None = None  # its axes k, b and k x b as the rows of a matrix


def solve(arm: ArmatureFrame, items: list[tuple], free: bool = False) -> None:
    """Solve ``items`` = [(chain, plan), ...] (chains sharing no bones) and write their rotations.

    Quaternion channels are written bone by bone (each write 1-3 us, tagging the armature) or, where
    that would cost more, all at once after the last chain (:func:`_write_all`). ``free``: the chains
    hang below no other chain (the layout's free chains), so the evaluated pose above them holds even
    after other chains were written this frame, and their start poses are kept between frames (on the
    Rigify metarig the legs' were made afresh each frame once the spine had been written).
    """
    pending: list[tuple[int, Quaternion]] | None = [] if _write_at_once(arm, items) else None
    for chain, plan in items:
        try:
            _solve_chain(arm, chain, plan, pending, free)
        except (ChainError, ValueError) as error:
            diagnostics.record(chain, 'INVALID', str(error))
    if pending:
        _write_all(arm, pending)


# A rotation equal to the bone's channels is not written (nor, in one foreach_set, an armature's
# rotations none of which changed): every write tags the armature, and Blender then copies and
# re-evaluates its whole pose (the write floor: 0.01 ms a frame at 2 bones, 0.17 ms at 150, 2.2-3.0 ms at
# 1000), so a held pose under a still target, or a frame shown again, costs no re-evaluation. Only for
# bones whose rotation is neither keyed nor driven (those in the cache's ``static_base``): a keyed
# channel's evaluated value may differ from the original one (a render's depsgraph does not write
# animation back to it), so those are always written. Reading a bone's channels back costs as much as
# a third of writing them (5k instructions against 11k, one 2-bone arm, callgrind), so the few-chain
# path reads them back only where the solve gives what it wrote there last (the cache's ``written``):
# a rotation that differs from the last write is written without a look.



def _write_at_once(arm: ArmatureFrame, items: list[tuple]) -> bool:
    written = sum(len(plan.cache_rows) for _, plan in items)
    return written * BULK_BONES_PER_WRITE > len(arm.cache.names) + BULK_FIXED_WRITES * BULK_BONES_PER_WRITE


def _write_all(arm: ArmatureFrame, pending: list[tuple[int, Quaternion]]) -> None:
    """Every pose bone's quaternion read, the solved ones replaced, written back in one foreach_set
    (unless none changed: see above)."""
    rows = array('f', bytes(16 * len(arm.cache.names)))
    arm.bones.foreach_get("rotation_quaternion", rows)
    static = arm.cache.static_base
    changed = False
    for i, q in pending:
        j = 4 * i
        changed = changed or i not in static or tuple(rows[j:j + 4]) != q[:]
        rows[j], rows[j + 1], rows[j + 2], rows[j + 3] = q
    if not changed:
        return
    arm.bones.foreach_set("rotation_quaternion", rows)
    # foreach_set does not tag the object (without a tag the pose lags a frame). 'DATA' is the tag a
    # rotation written through RNA gives (the pose update's geometry tag); an empty refresh tags every component.
    arm.ob.update_tag(refresh={'DATA'})


def _start_pose(arm: ArmatureFrame, plan: ChainPlan, use_stretch: bool, free: bool = False) -> StartPose:
    """Forward kinematics from the parent, the base rotations and the evaluated location and scale.

    The pose without IK seldom changes while its target moves: the result is kept on ``plan`` with the
    exact values it was made from (floats compared with ``==``, never mathutils' one-ULP equality) and
    given back while they repeat, with what was derived from it (segments, checks, the start frame).
    Chains that stretch, or sit below a bone another chain moved this frame, are made afresh each time.
    """
    cache = arm.cache
    evaluated = arm.ev_bones
    names = cache.names
    p = plan.parent
    key: list | None
    parent = None
    if p < 0:
        key = [None]
    elif free or not arm.new_matrices:  # nothing moved above this chain this frame: the evaluated pose holds
        parent = evaluated[names[p]].matrix.copy()
        key = [(parent[0][:], parent[1][:], parent[2][:], parent[3][:])]
    else:
        parent, key = pose_matrix(arm, p), None
    # Bones that stretch, or stretched until now, start from their scale without IK, never the stretch
    # written on the previous frame (which the evaluated pose holds).
    scales = [base_scale(arm, names[i]) for i in plan.cache_rows] \
        if use_stretch or (cache.scaled and not cache.scaled.isdisjoint(plan.cache_rows)) else None
    if scales is not None:
        key = None
    base, channels = [], []
    static = cache.static_base
    memo = plan.start_pose
    fixed = plan.fixed_channels
    if fixed is None:
        fixed = plan.fixed_channels = _fixed_channels(cache, names, plan)
    if fixed and key is not None:
        # Location and scale neither keyed nor driven: they change only by an edit, which the depsgraph
        # handler counts (cache.edits; a script's edit then frame_set drops the plans: handlers.on_frame_change),
        # so the memo is keyed by that count instead of reading them (10 of a 10-bone chain's ~116 us a frame).
        key.append(edits())
        for i in plan.cache_rows:
            q = static.get(i)  # base_rotation's first step, without the call
            if q is None:
                q = base_rotation(arm.ob, arm.ev, cache, i)
            base.append(q)
            key.append(q[:])
        if memo is not None and memo[0] == key:
            return memo[1]
        for i in plan.cache_rows:
            pb = evaluated[names[i]]
            channels.append((basis_location(cache, i, pb), pb.scale[:]))
    else:
        for i in plan.cache_rows:
            q = static.get(i)  # base_rotation's first step, without the call
            if q is None:
                q = base_rotation(arm.ob, arm.ev, cache, i)
            pb = evaluated[names[i]]
            location, scale = basis_location(cache, i, pb), pb.scale[:]
            base.append(q)
            channels.append((location, scale))
            if key is not None:
                key += (q[:], location, scale)
        if key is not None and memo is not None and memo[0] == key:
            return memo[1]
    if parent is None:
        parent = Matrix.Identity(4)
    m = parent
    pre = []
    for k, i in enumerate(plan.cache_rows):
        location, scale = channels[k]
        m = m @ cache.rel_matrices[i] @ Matrix.LocRotScale(location, base[k], scale if scales is None else scales[k])
        pre.append(m)
    joints = [mk.translation for mk in pre] + [pre[-1] @ Vector((0.0, float(cache.lengths[plan.cache_rows[-1]]), 0.0))]
    placed = plan.placed
    xs, ys, zs = (list(c) for c in zip(*joints[:placed + 1]))
    sqrt = math.sqrt
    segments = [sqrt((xs[k + 1] - xs[k]) ** 2 + (ys[k + 1] - ys[k]) ** 2 + (zs[k + 1] - zs[k]) ** 2)
                for k in range(placed)]
    limit = ZERO_LENGTH * max(1.0, max(segments, default=0.0))
    short = [length <= limit for length in segments] if segments and min(segments) <= limit else None
    pose = StartPose(parent, pre, base, joints, scales, [mk.to_quaternion() for mk in pre], (xs, ys, zs), segments,
                     short, channels)
    if key is not None:
        plan.start_pose = (key, pose)
    return pose


def _fixed_channels(cache, names: list[str], plan: ChainPlan) -> bool:
    """Whether no key or driver animates the location or scale of the chain's bones."""
    animated = cache.animated_paths
    return not any((bone_path(names[i], channel), k) in animated
                   for i in plan.cache_rows for channel in ("location", "scale") for k in range(3))


def _solve_chain(arm: ArmatureFrame, chain, plan: ChainPlan, pending: list | None = None, free: bool = False) -> None:
    target, pole = chain.target, chain.pole  # each read once: ~1 us a read
    target_hangs, pole_hangs = check_references_once(arm.ob, chain, plan, arm.hangs, target, pole)
    settings = settings_of(chain, plan)
    use_stretch = settings.use_stretch
    pose = _start_pose(arm, plan, use_stretch, free)
    placed = len(pose.segments)
    inputs = chain_inputs(arm, chain, plan, pose.joints, pose.pre, pose.parent, pose.short,
                          () if pose.scale_checked else None, (target, pole, target_hangs, pole_hangs), settings)
    pose.scale_checked = pose.scales is None
    result = _solve_points(inputs, pose, use_stretch)
    if not math.isfinite(result.error + sum(map(sum, result.joints))):
        raise ChainError("The solve gave a non-finite pose; the bones show their pose without IK")
    segments = pose.segments
    stretch = (result.joints[1] - result.joints[0]).length / segments[0] \
        if use_stretch and placed and segments[0] > 0.0 else 1.0
    _write(arm, inputs, pose, result, stretch, pending)
    diagnostics.record_solve(chain, result.reached, result.converged, result.error * arm.scale, result.iterations)
    if not result.reached:
        reach.explain_small(chain, inputs, result, use_stretch, arm.scale)


def _solve_points(inputs: ChainInputs, pose: StartPose, use_stretch: bool) -> ChainResult:
    """The chain's solved joints (Vectors): float entry points of the core, numpy ones for limits."""
    start, target, pole, tolerance = inputs.start, inputs.target, inputs.pole, inputs.tolerance
    settings = inputs.settings
    softness = settings.softness
    soft = {"softness": softness, "use_stretch": use_stretch, "max_stretch": settings.max_stretch} \
        if softness or use_stretch else {}
    segments = pose.segments
    if not inputs.placed:
        solved, error, iterations = start, (start[0] - target).length, 0
    elif inputs.limits is not None:
        solver = solve_two_bone if inputs.plan.two_bone else solve_chain
        result = solver(np.array(start), np.array(target), pole=None if pole is None else np.array(pole),
                        tolerance=tolerance, max_iterations=inputs.iterations, limits=inputs.limits, **soft)
        return ChainResult([Vector(p) for p in result.joints], result.error, result.iterations, result.reached,
                           result.converged, result.frames)
    elif inputs.plan.two_bone:
        points = two_bone_points(start, target.to_tuple(), None if pole is None else pole.to_tuple(), segments[0],
                                 segments[1], **soft)
        solved, iterations = [Vector(p) for p in points], 1
        error = (solved[2] - target).length
        return ChainResult(solved, error, iterations, error <= tolerance, points=points)
    else:
        if soft:
            points, error, iterations = solve_points(start, target.to_tuple(),
                                                     None if pole is None else pole.to_tuple(), tolerance=tolerance,
                                                     max_iterations=inputs.iterations, **soft)
        else:  # what solve_points checks, the pose's checks and the target's read have checked
            xs, ys, zs = pose.coords
            if not math.isfinite(sum(xs) + sum(ys) + sum(zs)):
                raise ValueError("joints or target contain NaN or infinity")
            points, error, iterations = solve_floats(xs, ys, zs, segments, target.to_tuple(),
                                                     None if pole is None else pole.to_tuple(), tolerance,
                                                     inputs.iterations)
        solved = [Vector(p) for p in points]
        # solve_points stops early only by reaching or stalling: all passes used and still short is
        # running out of iterations.
        reached = error <= tolerance
        return ChainResult(solved, error, iterations, reached, reached or iterations < inputs.iterations, points=points)
    return ChainResult(solved, error, iterations, error <= tolerance)


def _blend(arm: ArmatureFrame, inputs: ChainInputs, pose: StartPose, rotations: list[Quaternion],
           scales: list[Vector], match: bool) -> tuple[list[Quaternion], list[Vector]]:
    """The influence-1 rotations (and stretch) blended toward the pose without IK (:mod:`.influence`)."""
    cache, plan = arm.cache, inputs.plan
    idx = list(plan.cache_rows)
    names = plan.bones
    location = np.array([basis_location(cache, i, arm.ev_bones[name]) for i, name in zip(idx, names)])
    own = np.array([arm.ev_bones[name].scale[:] for name in names]) if pose.scales is None else \
        np.array([v[:] for v in pose.scales])
    end = np.array([0.0, 0.0 if match else float(cache.lengths[idx[-1]]), 0.0, 1.0])
    base = np.array([q[:] for q in pose.base])
    full = np.array([q[:] for q in rotations])
    full_scale = np.array([v[:] for v in scales]) if scales else None
    fraction = blend_fraction(np.array(pose.parent), cache.rel[idx], location, own, base, full, end,
                              np.array(inputs.target), inputs.influence, full_scale)
    blended = [Quaternion(q) for q in blend_rotations(base, full, fraction)]
    if full_scale is None:
        return blended, scales
    return blended, [Vector(v) for v in own + fraction * (full_scale - own)]


def _turns(arm: ArmatureFrame, inputs: ChainInputs, pose: StartPose, result: ChainResult,
           tip_takes_target: bool) -> list[Quaternion] | None:
    """Each placed bone's world turn from its pose without IK to its solved one (None: no bone placed)."""
    placed, joints, solved = inputs.placed, pose.joints, result.joints
    if not placed:
        return None
    if result.frames is not None and inputs.limits is not None and inputs.limits.frames is not None:
        # As the limits measured them: hinges turn about X alone, the bone above a hinge rolls.
        return [Matrix((result.frames[k] @ inputs.limits.frames[k].T).tolist()).to_quaternion() for k in range(placed)]
    if inputs.limits is not None:
        return [Matrix(rows).to_quaternion() for rows in orient.segment_turns_floats(joints[:placed + 1], solved)]
    # The roll rule (.roll: the chain's frame, then parallel transport bone by bone).
    if pose.frame is None:
        side = pose.pre[0].to_3x3().normalized() @ Vector(rest_side(arm.ob, inputs.plan, placed))
        pose.frame, pose.frame_axes = roll.start_frame(joints[:placed + 1], side)
    return roll.chain_turns(pose.frame, pose.frame_axes, joints, solved, inputs.pole,
                            len(inputs.plan.cache_rows) - tip_takes_target, result.points)


def _write(arm: ArmatureFrame, inputs: ChainInputs, pose: StartPose, result: ChainResult, stretch: float,
           pending: list | None = None) -> None:
    """Turn each bone by its turn (:func:`.roll.chain_turns`: the segment's direction and the
    chain's roll toward its bend or pole), blend by influence, write the channels.

    The same rules as :func:`.batch._local_rotations`: offsets and twist ride along with the turn,
    a tip matching its target takes the target's orientation, the channels stay in the hemisphere of
    the pose without IK. Every rotation is computed before any is written, so a chain is written whole
    or not at all, and never with a non-finite value.

    A stretching chain also gets each bone's local scale Y: the value that makes the bone, composed
    under its stretched parent as Blender composes it (full scale inheritance), exactly ``stretch``
    times its length without IK, along exactly the solved direction (:func:`.base_pose.stretched_local`),
    the stretch of the solve toward the blended target below influence 1. Other chains never touch scale.

    ``pending``: a list to leave the quaternion channels in for :func:`_write_all`, else None.
    """
    cache, plan = arm.cache, inputs.plan
    influence = inputs.influence
    frame = None if inputs.target_matrix is None else unit_columns(inputs.target_matrix)
    placed = inputs.placed
    turns = _turns(arm, inputs, pose, result, frame is not None)
    rotations = []
    scales: list[Vector] = []
    last = len(plan.cache_rows) - 1
    stretching = pose.scales is not None and inputs.settings.use_stretch
    # Uniform scale (checked by chain_inputs unless the chain stretches): a bone's local rotation is its
    # parent's armature-space rotation, undone, composed with its own, all quaternions (a few mathutils
    # calls a bone where the 4x4 matrices took a dozen).
    above = pose.parent if stretching else pose.parent.to_quaternion().conjugated()
    inverse_rest = cache.rel_inverse_rotations
    check = 0.0
    for k, i in enumerate(plan.cache_rows):
        m = pose.pre[k]
        tip = frame is not None and k == last
        turn = None if tip or turns is None else turns[k]
        if not stretching:
            world = Matrix(frame.tolist()).to_quaternion() if turn is None else turn @ pose.rotations[k]
            q = (inverse_rest[i] @ above @ world).normalized()
            above = world.conjugated()
        else:
            assert pose.scales is not None
            # The bone's own axes, turned: a stretched parent may have sheared them out of square.
            rotation = Matrix(frame.tolist()) if turn is None else turn.to_matrix() @ m.to_3x3().normalized()
            grow = stretch if k < inputs.placed else 1.0
            q, scale = stretched_local(above @ cache.rel_matrices[i], rotation, m, pose.scales[k], grow)
            # The next bone's parent as Blender will compose it (the stretch may shear its X and Z).
            location = basis_location(cache, i, arm.ev_bones[plan.bones[k]])
            above = above @ cache.rel_matrices[i] @ Matrix.LocRotScale(location, q, scale)
            # Influence 0 is exactly the scale without IK; below 1 it blends (_blend).
            scales.append(pose.scales[k] if influence <= 0.0 else scale)
        start = pose.base[k]
        if influence <= 0.0:  # exactly the pose without IK, not a solve that reproduces it to rounding
            q = start.copy()
        if q.dot(start) < 0.0:
            q.negate()
        check += sum(q)
        rotations.append(q)
    if 0.0 < influence < 1.0 and placed and math.isfinite(check):
        rotations, scales = _blend(arm, inputs, pose, rotations, scales, frame is not None)
        check = sum(map(sum, rotations))
    if not math.isfinite(check + sum(map(sum, scales)) if scales else check):
        raise ChainError("The solve gave a non-finite rotation; the bones show their pose without IK")
    originals = arm.bones
    kept = arm.kept if arm.keep_matrices else ()
    static = cache.static_base
    last = cache.written
    final = pose.parent
    for k, (i, q) in enumerate(zip(plan.cache_rows, rotations)):
        name = plan.bones[k]
        if cache.modes[i] != 'QUATERNION':
            write_near_base(arm, name, q)
        elif pending is not None:
            pending.append((i, q))
        else:
            value = q[:]
            pb = originals[name]
            # Unchanged: not written (above). Read back only where the solve repeats its last write.
            if i not in static or last.get(i) != value or pb.rotation_quaternion[:] != value:
                pb.rotation_quaternion = q
            last[i] = value
        if scales:
            originals[name].scale = scales[k]
        elif pose.scales is not None:  # stretch just switched off (keyed): back to the scale without IK
            restore_scale(originals[name])
        if name in kept:  # chains hanging below these start from the pose just written
            location, scale = pose.channels[k]  # (evaluated at this frame: the start pose's key holds them)
            if scales:
                scale = scales[k]
            elif pose.scales is not None:
                scale = pose.scales[k]
            final = final @ cache.rel_matrices[i] @ Matrix.LocRotScale(location, q, scale)
            arm.new_matrices[name] = final

