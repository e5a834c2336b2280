"""An armature's standalone chains one at a time, in mathutils and plain floats.

For a few short chains a numpy call (1-3 us each, whatever its size) costs more than the arithmetic
it does, and the batched path (:mod:`.rig_batch`) makes dozens of them per armature. Here every step is
a mathutils 4x4 operation (under 1 us) or float arithmetic, the solvers are the float entry points of
the core (:func:`.solver.fabrik.solve_points`, :func:`.solver.two_bone.two_bone_points`), and rotations
are written bone by bone (1.6-3 us each, which also tags the armature for re-evaluation).

The results match the batched path's: same start pose, same solvers, same rotation rules.
"""

from __future__ import annotations

import math

import numpy as np
from mathutils import Matrix, Quaternion, Vector

from . import adapter, diagnostics
from .cache import RigCache
from .rig import (
    ZERO_LENGTH,
    ChainError,
    RigState,
    base_channels,
    base_rotation,
    check_references_once,
    limits_for,
    parent_matrix,
    unit_columns,
    world_point,
    world_position,
)
from .solver import solve_chain, solve_two_bone
from .solver.fabrik import solve_points
from .solver.two_bone import two_bone_points

# Standalone chains of one length holding up to this many bones across all armatures are solved here;
# above it, numpy across chains (:mod:`.rig_batch`) is cheaper. Measured per frame, handler alone,
# Blender 5.0.1, one armature: 16 x 3 bones 1.0 ms here against 1.5-1.7 batched, 1 x 50 1.0 against
# 1.6-1.8, 32 x 3 1.9-2.1 against 2.0-2.2 (even), 100 x 3 5.9 against 3.5.
SMALL_BONES = 96


def solve(ob, ev, items: list[tuple], state: RigState, depsgraph, cache: RigCache, keep_matrices: bool) -> None:
    """Solve ``items`` = [(chain, plan), ...] (chains sharing no bones) and write their rotations."""
    bones = ob.pose.bones, ev.pose.bones
    for chain, plan in items:
        try:
            _solve_chain(ob, ev, bones, chain, plan, state, depsgraph, cache, keep_matrices)
        except (ChainError, ValueError) as error:
            diagnostics.record(chain, 'INVALID', str(error))


def _solve_chain(ob, ev, bones, chain, plan, state: RigState, depsgraph, cache: RigCache,
                 keep_matrices: bool) -> None:
    check_references_once(ob, chain, plan)
    idx = plan.idx
    n = len(idx)
    evaluated = bones[1]
    p = plan.parent
    if p < 0:
        parent = Matrix.Identity(4)
    elif not state.new_matrices:  # nothing moved above this chain this frame: the evaluated pose holds
        parent = evaluated[cache.names[p]].matrix.copy()
    else:
        parent = Matrix(parent_matrix(ob, ev, ob.data.bones[plan.bones[0]], state).tolist())

    # The pose without IK: forward kinematics from the parent, the base rotations and the evaluated
    # location and scale.
    base, pre = [], []
    m = parent
    for i in idx:
        q = base_rotation(ob, ev, cache, i)
        pb = evaluated[cache.names[i]]
        m = m @ cache.rel_matrices[i] @ Matrix.LocRotScale(pb.location, q, pb.scale)
        base.append(q)
        pre.append(m)
    joints = [mk.translation for mk in pre] + [pre[-1] @ Vector((0.0, float(cache.lengths[idx[-1]]), 0.0))]
    placed = n - 1 if chain.match_target_rotation else n
    segments = [(joints[k + 1] - joints[k]).length for k in range(placed)]
    longest = max(segments, default=0.0)
    for k, length in enumerate(segments):
        if length <= ZERO_LENGTH * max(1.0, longest):
            raise ChainError(f"Bone '{plan.bones[k]}' has zero length")

    target = state.inv_world_m @ world_position(chain.target, chain.target_bone, depsgraph, "Target")
    pole = None
    if chain.pole is not None:
        pole = state.inv_world_m @ world_position(chain.pole, chain.pole_bone, depsgraph, "Pole")
    frame = None
    if placed < n:  # the tip takes the target's orientation
        frame = unit_columns(state.inv_world @ world_point(chain.target, chain.target_bone, depsgraph, "Target"))
    tolerance = chain.tolerance / state.scale
    start = joints[:placed + 1]
    limits = None
    if plan.limited:
        limits = limits_for(ob, plan.bones[:placed], plan.bones, [np.array(mk) for mk in pre], np.array(start),
                            np.array(parent))
    if not placed:
        solved, error, iterations = start, (start[0] - target).length, 0
    elif limits is not None:
        solver = solve_two_bone if chain.solver == 'TWO_BONE' else solve_chain
        result = solver(np.array(start), np.array(target), pole=None if pole is None else np.array(pole),
                        tolerance=tolerance, max_iterations=chain.iterations, limits=limits)
        solved, error, iterations = [Vector(p) for p in result.joints], result.error, result.iterations
    elif chain.solver == 'TWO_BONE':
        points = two_bone_points(start, target.to_tuple(), None if pole is None else pole.to_tuple(), segments[0],
                                 segments[1])
        solved, iterations = [Vector(p) for p in points], 1
        error = (solved[2] - target).length
    else:
        points, error, iterations = solve_points(start, target.to_tuple(), None if pole is None else pole.to_tuple(),
                                                 tolerance=tolerance,
                                                 max_iterations=chain.iterations)
        solved = [Vector(p) for p in points]

    if not math.isfinite(error + sum(sum(p) for p in solved)):
        raise ChainError("The solve gave a non-finite pose; the pose was left as it was")
    _write(bones, chain, plan, parent, pre, base, joints, solved, frame, state, cache, keep_matrices)
    diagnostics.record(chain, 'REACHED' if error <= tolerance else 'UNREACHABLE', "", error * state.scale,
                       iterations)


def _write(bones, chain, plan, parent: Matrix, pre: list[Matrix], base: list[Quaternion], joints: list[Vector],
           solved: list[Vector], frame, state: RigState, cache: RigCache, keep_matrices: bool) -> None:
    """Turn each bone by its segment's from-to rotation, blend by influence, write the channels.

    The same rules as :func:`.rig_batch._local_rotations`: offsets and twist ride along with the turn,
    a tip matching its target takes the target's orientation, the channels stay in the hemisphere of
    the pose without IK. Every rotation is computed before any is written, so a chain is written whole
    or not at all, and never with a non-finite value.
    """
    influence = chain.influence
    rotations = []
    above = parent
    last = len(plan.idx) - 1
    for k, i in enumerate(plan.idx):
        m = pre[k]
        if frame is not None and k == last:
            rotation = Matrix(frame.tolist())
        else:
            before, after = joints[k + 1] - joints[k], solved[k + 1] - solved[k]
            rotation = before.rotation_difference(after).to_matrix() @ m.to_3x3().normalized()
        ik = Matrix.LocRotScale(solved[k], rotation.to_quaternion(), m.to_scale())
        q = ((above @ cache.rel_matrices[i]).inverted() @ ik).to_3x3().normalized().to_quaternion()
        start = base[k]
        if influence < 1.0:
            q = start.slerp(q, influence)
        if q.dot(start) < 0.0:
            q.negate()
        rotations.append(q)
        above = ik
    if not math.isfinite(sum(sum(q) for q in rotations)):
        raise ChainError("The solve gave a non-finite rotation; the pose was left as it was")
    originals, evaluated = bones
    final = parent
    for k, (i, q) in enumerate(zip(plan.idx, rotations)):
        name = plan.bones[k]
        pb = originals[name]
        if cache.modes[i] == 'QUATERNION':
            pb.rotation_quaternion = q
        else:
            near = base_channels(pb, evaluated[name], cache.animated_paths)
            adapter.write_rotation(pb, q, near)
        if keep_matrices:  # chains hanging below these start from the pose just written
            ev_pb = evaluated[name]
            final = final @ cache.rel_matrices[i] @ Matrix.LocRotScale(ev_pb.location, q, ev_pb.scale)
            state.new_matrices[name] = np.array(final)
