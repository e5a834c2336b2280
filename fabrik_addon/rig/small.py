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
from dataclasses import dataclass

import numpy as np
from mathutils import Matrix, Quaternion, Vector

from .. import diagnostics
from ..solver import orient, solve_chain, solve_two_bone
from ..solver.fabrik import solve_points
from ..solver.two_bone import two_bone_points
from .base_pose import base_rotation, base_scale, restore_scale, stretched_local, write_near_base
from .inputs import (
    ZERO_LENGTH,
    ArmatureFrame,
    ChainInputs,
    ChainResult,
    chain_inputs,
    parent_matrix,
    placed_count,
    rest_side,
    unit_columns,
)
from .plan import ChainError, ChainPlan, check_references_once


@dataclass(eq=False, slots=True)
class StartPose:
    """One chain's pose without IK, in mathutils: where its solve starts and its rotations blend from."""

    parent: Matrix  # armature-space matrix of the root's parent
    pre: list[Matrix]  # armature-space matrix of each bone
    base: list[Quaternion]  # each bone's local rotation
    joints: list[Vector]  # heads, then the tip's tail
    scales: list[Vector] | None  # each bone's scale without IK where it may stretch, else None


def solve(arm: ArmatureFrame, items: list[tuple]) -> None:
    """Solve ``items`` = [(chain, plan), ...] (chains sharing no bones) and write their rotations."""
    for chain, plan in items:
        try:
            _solve_chain(arm, chain, plan)
        except (ChainError, ValueError) as error:
            diagnostics.record(chain, 'INVALID', str(error))


def _start_pose(arm: ArmatureFrame, plan: ChainPlan, stretch: bool) -> StartPose:
    """Forward kinematics from the parent, the base rotations and the evaluated location and scale."""
    cache = arm.cache
    evaluated = arm.ev_bones
    p = plan.parent
    if p < 0:
        parent = Matrix.Identity(4)
    elif not arm.new_matrices:  # nothing moved above this chain this frame: the evaluated pose holds
        parent = evaluated[cache.names[p]].matrix.copy()
    else:
        parent = Matrix(parent_matrix(arm, arm.ob.data.bones[plan.bones[0]]).tolist())
    base, pre = [], []
    # Bones that stretch, or stretched until now, start from their scale without IK, never the stretch
    # written on the previous frame (which the evaluated pose holds).
    scales = [base_scale(arm, cache.names[i]) for i in plan.idx] \
        if stretch or (cache.scaled and not cache.scaled.isdisjoint(plan.idx)) else None
    m = parent
    for k, i in enumerate(plan.idx):
        q = base_rotation(arm.ob, arm.ev, cache, i)
        pb = evaluated[cache.names[i]]
        m = m @ cache.rel_matrices[i] @ Matrix.LocRotScale(pb.location, q, pb.scale if scales is None else scales[k])
        base.append(q)
        pre.append(m)
    joints = [mk.translation for mk in pre] + [pre[-1] @ Vector((0.0, float(cache.lengths[plan.idx[-1]]), 0.0))]
    return StartPose(parent, pre, base, joints, scales)


def _solve_chain(arm: ArmatureFrame, chain, plan: ChainPlan) -> None:
    check_references_once(arm.ob, chain, plan, arm.hangs)
    pose = _start_pose(arm, plan, chain.use_stretch)
    joints = pose.joints
    placed = placed_count(chain, len(plan.idx))
    segments = [(joints[k + 1] - joints[k]).length for k in range(placed)]
    longest = max(segments, default=0.0)
    limit = ZERO_LENGTH * max(1.0, longest)
    short = [length <= limit for length in segments] if segments and min(segments) <= limit else None
    inputs = chain_inputs(arm, chain, plan, joints, pose.pre, pose.parent, short)
    result = _solve_points(inputs, segments)
    if not math.isfinite(result.error + sum(sum(p) for p in result.joints)):
        raise ChainError("The solve gave a non-finite pose; the pose was left as it was")
    stretch = (result.joints[1] - result.joints[0]).length / segments[0] \
        if chain.use_stretch and placed and segments[0] > 0.0 else 1.0
    _write(arm, inputs, pose, result, stretch)
    diagnostics.record_solve(chain, result.reached, result.converged, result.error * arm.scale, result.iterations)


def _solve_points(inputs: ChainInputs, segments: list[float]) -> ChainResult:
    """The chain's solved joints (Vectors): float entry points of the core, numpy ones for limits."""
    chain, start, target, pole, tolerance = inputs.chain, inputs.start, inputs.target, inputs.pole, inputs.tolerance
    softness, use_stretch = chain.softness, chain.use_stretch
    soft = {"softness": softness, "use_stretch": use_stretch, "max_stretch": chain.max_stretch} \
        if softness or use_stretch else {}
    if not inputs.placed:
        solved, error, iterations = start, (start[0] - target).length, 0
    elif inputs.limits is not None:
        solver = solve_two_bone if chain.solver == 'TWO_BONE' else solve_chain
        result = solver(np.array(start), np.array(target), pole=None if pole is None else np.array(pole),
                        tolerance=tolerance, max_iterations=inputs.iterations, limits=inputs.limits, **soft)
        return ChainResult([Vector(p) for p in result.joints], result.error, result.iterations, result.reached,
                           result.converged, result.frames)
    elif chain.solver == 'TWO_BONE':
        points = two_bone_points(start, target.to_tuple(), None if pole is None else pole.to_tuple(), segments[0],
                                 segments[1], **soft)
        solved, iterations = [Vector(p) for p in points], 1
        error = (solved[2] - target).length
    else:
        points, error, iterations = solve_points(start, target.to_tuple(), None if pole is None else pole.to_tuple(),
                                                 tolerance=tolerance, max_iterations=inputs.iterations, **soft)
        solved = [Vector(p) for p in points]
        # solve_points stops early only by reaching or stalling: all passes used and still short is
        # running out of iterations.
        reached = error <= tolerance
        return ChainResult(solved, error, iterations, reached, reached or iterations < inputs.iterations)
    return ChainResult(solved, error, iterations, error <= tolerance)


def _write(arm: ArmatureFrame, inputs: ChainInputs, pose: StartPose, result: ChainResult, stretch: float) -> None:
    """Turn each bone by its turn (:func:`.solver.orient.chain_turns`: the segment's direction and the
    chain's roll toward its bend or pole), blend by influence, write the channels.

    The same rules as :func:`.batch._local_rotations`: offsets and twist ride along with the turn,
    a tip matching its target takes the target's orientation, the channels stay in the hemisphere of
    the pose without IK. Every rotation is computed before any is written, so a chain is written whole
    or not at all, and never with a non-finite value.

    A stretching chain also gets each bone's local scale Y: the value that makes the bone, composed
    under its stretched parent as Blender composes it (full scale inheritance), exactly ``stretch``
    times its length without IK, along exactly the solved direction (:func:`.base_pose.stretched_local`),
    the stretch of the solve toward the blended target below influence 1. Other chains never touch scale.
    """
    cache, plan, joints = arm.cache, inputs.plan, pose.joints
    influence = inputs.chain.influence
    frame = None if inputs.target_matrix is None else unit_columns(inputs.target_matrix)
    placed = inputs.placed
    turns: list[Matrix] | None = None
    solved = result.joints
    transport = None  # the chain's turn so far, a Quaternion, when the bones are parallel transported
    if placed and result.frames is not None and inputs.limits is not None and inputs.limits.frames is not None:
        # As the limits measured them: hinges turn about X alone, the bone above a hinge rolls.
        turns = [Matrix((result.frames[k] @ inputs.limits.frames[k].T).tolist()) for k in range(placed)]
    elif placed and inputs.limits is not None:
        turns = [Matrix(rows) for rows in orient.segment_turns_floats(joints[:placed + 1], solved)]
    elif placed:
        # orient.chain_turns_floats with its per-bone loop below in mathutils (C: a fraction of the cost)
        side = pose.pre[0].to_3x3().normalized() @ Vector(rest_side(arm.ob, plan, placed))
        transport = Matrix(orient.chain_frame_turn_floats(joints[:placed + 1], solved, inputs.pole,
                                                          side)).to_quaternion()
    rotations = []
    scales: list[Vector] = []
    above = pose.parent
    last = len(plan.idx) - 1
    stretching = pose.scales is not None and inputs.chain.use_stretch
    for k, i in enumerate(plan.idx):
        m = pose.pre[k]
        if frame is not None and k == last:
            rotation = Matrix(frame.tolist())
        elif turns is not None:
            rotation = turns[k] @ m.to_3x3().normalized()
        else:
            assert transport is not None
            transport = (transport @ (joints[k + 1] - joints[k])).rotation_difference(solved[k + 1] - solved[k]) \
                @ transport
            rotation = transport.to_matrix() @ m.to_3x3().normalized()
        if not stretching:
            ik = Matrix.LocRotScale(solved[k], rotation.to_quaternion(), m.to_scale())
            q = ((above @ cache.rel_matrices[i]).inverted() @ ik).to_3x3().normalized().to_quaternion()
        else:
            assert pose.scales is not None
            grow = stretch if k < inputs.placed else 1.0
            q, scale = stretched_local(above @ cache.rel_matrices[i], rotation, m, pose.scales[k], grow)
            # The next bone's parent as Blender will compose it (the stretch may shear its X and Z).
            ik = above @ cache.rel_matrices[i] @ Matrix.LocRotScale(arm.ev_bones[plan.bones[k]].location, q, scale)
            # The solve already stretched toward the blended target (.inputs.blended_goal); influence 0 is
            # exactly the scale without IK.
            scales.append(pose.scales[k] if influence <= 0.0 else scale)
        start = pose.base[k]
        if influence <= 0.0:  # exactly the pose without IK, not a solve that reproduces it to rounding
            q = start.copy()
        elif influence < 1.0 and frame is not None and k == last:
            # The placed bones reached for the blended target (.inputs.blended_goal); the tip that takes
            # the target's orientation blends it.
            q = start.slerp(q, influence)
        if q.dot(start) < 0.0:
            q.negate()
        rotations.append(q)
        above = ik
    if not math.isfinite(sum(sum(q) for q in rotations) + sum(v.x + v.y + v.z for v in scales)):
        raise ChainError("The solve gave a non-finite rotation; the pose was left as it was")
    originals, evaluated = arm.bones, arm.ev_bones
    keep_matrices = arm.keep_matrices
    final = pose.parent
    for k, (i, q) in enumerate(zip(plan.idx, rotations)):
        name = plan.bones[k]
        if cache.modes[i] == 'QUATERNION':
            originals[name].rotation_quaternion = q
        else:
            write_near_base(arm, name, q)
        if scales:
            originals[name].scale = scales[k]
        elif pose.scales is not None:  # stretch just switched off (keyed): back to the scale without IK
            restore_scale(originals[name])
        if keep_matrices:  # chains hanging below these start from the pose just written
            ev_pb = evaluated[name]
            scale = scales[k] if scales else ev_pb.scale if pose.scales is None else pose.scales[k]
            final = final @ cache.rel_matrices[i] @ Matrix.LocRotScale(ev_pb.location, q, scale)
            arm.new_matrices[name] = np.array(final)

