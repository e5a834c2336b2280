"""Solve the chains of one armature: validate, build the pre-IK pose, solve, write bone rotations."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from mathutils import Quaternion

from . import adapter, compat
from .solver import ChainLimits, ConeLimit, HingeLimit, solve_chain, solve_two_bone
from .solver.rotations import matrix_from_two_vectors

# Farther than this counts as "at infinity": Blender stores an infinite location as FLT_MAX (3.4e38),
# whose square overflows.
FAR_AWAY = 1e15
# Relative tolerance for a uniform, positive armature scale.
SCALE_TOLERANCE = 1e-5
ZERO_LENGTH = 1e-9


class ChainError(Exception):
    """A chain that cannot be solved; the message is shown in the panel."""


@dataclass
class ChainPlan:
    """A validated chain, with its bones ordered root to tip."""

    index: int
    bones: list[str]
    depth: int  # ancestors above the chain's root bone: parents are solved first


@dataclass
class RigState:
    """What one armature's solve needs to share between its chains."""

    world: np.ndarray
    inv_world: np.ndarray
    scale: float
    animated: set[tuple[str, int]]
    new_matrices: dict[str, np.ndarray] = field(default_factory=dict)


def chain_bones(ob, chain) -> list[str]:
    """Bone names of ``chain`` from its root to its tip; raises :class:`ChainError` when impossible."""
    if not chain.tip_bone:
        raise ChainError("Pick a tip bone")
    bone = ob.data.bones.get(chain.tip_bone)
    if bone is None:
        raise ChainError(f"Tip bone '{chain.tip_bone}' not found in '{ob.data.name}'")
    names = [bone.name]
    while bone.parent is not None and (chain.chain_length == 0 or len(names) < chain.chain_length):
        bone = bone.parent
        names.append(bone.name)
    if chain.chain_length and len(names) < chain.chain_length:
        raise ChainError(f"Chain length {chain.chain_length} is longer than the bone hierarchy "
                         f"({len(names)} bones up from '{chain.tip_bone}')")
    return names[::-1]


def plan_chains(ob) -> list[ChainPlan]:
    """Validate every enabled chain (marking invalid ones) and order the rest parents first."""
    plans = []
    for index, chain in enumerate(ob.fabrik.chains):
        if not chain.enabled:
            set_status(chain, 'NONE')
            continue
        try:
            bones = chain_bones(ob, chain)
            check_reference(ob, chain, bones, chain.target, chain.target_bone, "Target", required=True)
            check_reference(ob, chain, bones, chain.pole, chain.pole_bone, "Pole", required=False)
            if chain.solver == 'TWO_BONE' and len(solved_bones(chain, bones)) != 2:
                raise ChainError(f"The Two-Bone solver needs exactly 2 bones to place, this chain has "
                                 f"{len(solved_bones(chain, bones))}")
            for name in bones[1:]:
                if not ob.data.bones[name].use_inherit_rotation:
                    raise ChainError(f"Bone '{name}' does not inherit its parent's rotation")
        except ChainError as error:
            set_status(chain, 'INVALID', str(error))
            continue
        depth = 0
        parent = ob.data.bones[bones[0]].parent
        while parent is not None:
            depth += 1
            parent = parent.parent
        plans.append(ChainPlan(index, bones, depth))
    plans.sort(key=lambda plan: plan.depth)
    return plans


def solved_bones(chain, bones: list[str]) -> list[str]:
    """Bones whose directions the solver places: all, or all but the tip when it matches rotation."""
    return bones[:-1] if chain.match_target_rotation else bones


def check_reference(ob, chain, bones: list[str], target, bone_name: str, label: str, required: bool) -> None:
    if target is None:
        if required:
            raise ChainError(f"Pick a {label.lower()} object")
        return
    if target.type == 'ARMATURE' and bone_name:
        bone = target.data.bones.get(bone_name)
        if bone is None:
            raise ChainError(f"{label} bone '{bone_name}' not found in '{target.data.name}'")
        if target == ob:
            chain_set = set(bones)
            walk = bone
            while walk is not None:
                if walk.name in chain_set:
                    raise ChainError(f"{label} bone '{bone_name}' is moved by this chain")
                walk = walk.parent


def set_status(chain, status: str, message: str = "", error: float = 0.0, iterations: int = 0) -> None:
    """Write diagnostics only when they change, so the panel's data does not churn every frame."""
    if chain.status != status:
        chain.status = status
    if chain.message != message:
        chain.message = message
    if abs(chain.last_error - error) > 1e-12:
        chain.last_error = error
    if chain.last_iterations != iterations:
        chain.last_iterations = iterations


def world_point(target, bone_name: str, depsgraph, label: str) -> np.ndarray:
    """World-space 4x4 matrix of a target or pole (object, or the head of one of its bones), evaluated."""
    ev = target.evaluated_get(depsgraph)
    matrix = adapter.matrix_to_np(ev.matrix_world)
    if target.type == 'ARMATURE' and bone_name:
        matrix = matrix @ adapter.matrix_to_np(ev.pose.bones[bone_name].matrix)
    if not np.isfinite(matrix).all() or np.abs(matrix[:3, 3]).max() > FAR_AWAY:
        raise ChainError(f"{label} '{target.name}' is at an invalid position (NaN or infinity)")
    return matrix


def rig_state(ob, depsgraph) -> RigState:
    ev = ob.evaluated_get(depsgraph)
    world = adapter.matrix_to_np(ev.matrix_world)
    axes = np.linalg.norm(world[:3, :3], axis=0)
    det = np.linalg.det(world[:3, :3])
    if not np.isfinite(world).all() or det <= 0.0 or np.ptp(axes) > SCALE_TOLERANCE * axes.max():
        raise ChainError("The armature object has non-uniform, negative or zero scale; apply its scale")
    animated = set()
    for fcurve in compat.animated_fcurves(ob):
        animated.add((fcurve.data_path, fcurve.array_index))
    if ob.animation_data is not None:
        for fcurve in ob.animation_data.drivers:
            animated.add((fcurve.data_path, fcurve.array_index))
    return RigState(world, np.linalg.inv(world), float(axes.mean()), animated)


def base_rotation(pose_bone, evaluated_bone, animated: set[tuple[str, int]]) -> Quaternion:
    """The bone's rotation without IK: keyed or driven channels as evaluated, the others as stored.

    Never the previous IK output, so the pose at a frame depends only on that frame's inputs.
    """
    mode = pose_bone.rotation_mode
    path = f'pose.bones["{pose_bone.name}"].{adapter.rotation_path(mode)}'
    stored = stored_channels(pose_bone)
    current = adapter.read_rotation(evaluated_bone)
    values = [current[i] if (path, i) in animated else stored[i] for i in range(len(current))]
    return adapter.quaternion_from_channels(mode, values)


def stored_channels(pose_bone) -> tuple[float, ...]:
    """The stored base rotation in the bone's own rotation mode (captured from its pose on first use)."""
    base = pose_bone.fabrik_base
    if not base.captured:
        capture_base(pose_bone)
    q = Quaternion(base.rotation)
    return adapter.channels_from_quaternion(pose_bone.rotation_mode, q, adapter.read_rotation(pose_bone))


def capture_base(pose_bone) -> None:
    """Store the bone's current rotation as its pose without IK."""
    q = adapter.quaternion_from_channels(pose_bone.rotation_mode, adapter.read_rotation(pose_bone))
    pose_bone.fabrik_base.rotation = tuple(q)
    pose_bone.fabrik_base.captured = True


def restore_base(pose_bone) -> None:
    """Put back the stored pose without IK (used when a chain is disabled or removed)."""
    base = pose_bone.fabrik_base
    if base.captured:
        adapter.write_rotation(pose_bone, Quaternion(base.rotation), adapter.read_rotation(pose_bone))


def release(ob, chains) -> None:
    """Give the bones of ``chains`` back their stored pose, except bones another active chain still drives."""
    active = set()
    if ob.fabrik.enabled:
        for chain in ob.fabrik.chains:
            if chain.enabled and all(chain != c for c in chains):
                try:
                    active.update(chain_bones(ob, chain))
                except ChainError:
                    pass
    for chain in chains:
        try:
            names = chain_bones(ob, chain)
        except ChainError:
            continue
        for name in names:
            if name not in active:
                restore_base(ob.pose.bones[name])


def rest_relative(bone) -> np.ndarray:
    """Rest matrix of a bone relative to its parent's rest matrix (armature space for a root bone)."""
    local = adapter.matrix_to_np(bone.matrix_local)
    if bone.parent is None:
        return local
    return np.linalg.inv(adapter.matrix_to_np(bone.parent.matrix_local)) @ local


def parent_matrix(ob, ev, bone, state: RigState) -> np.ndarray:
    """Armature-space pose matrix of ``bone``'s parent this frame (identity for a root bone).

    A parent already moved by another chain this frame is taken from that solve; a parent below
    such a bone is recomputed from it; any other is taken from the evaluated pose.
    """
    parent = bone.parent
    if parent is None:
        return np.eye(4)
    if parent.name in state.new_matrices:
        return state.new_matrices[parent.name]
    walk = parent.parent
    while walk is not None and walk.name not in state.new_matrices:
        walk = walk.parent
    if walk is None:
        return adapter.matrix_to_np(ev.pose.bones[parent.name].matrix)
    pb = ev.pose.bones[parent.name]
    basis = adapter.matrix_to_np(pb.matrix_basis)
    return parent_matrix(ob, ev, parent, state) @ rest_relative(parent) @ basis


def limits_for(ob, placed: list[str], bones: list[str], pre: list[np.ndarray], joints: np.ndarray,
               parent: np.ndarray):
    """ChainLimits for the placed bones, or None when none of them has a limit."""
    items: list[ConeLimit | HingeLimit | None] = []
    for name in placed:
        limit = ob.pose.bones[name].fabrik_limit
        if limit.mode == 'CONE':
            items.append(ConeLimit(limit.cone_left, limit.cone_right, limit.cone_up, limit.cone_down))
        elif limit.mode == 'HINGE':
            if limit.hinge_min > limit.hinge_max:
                raise ChainError(f"Bone '{name}': hinge Min is greater than Max")
            items.append(HingeLimit(limit.hinge_min, limit.hinge_max))
        else:
            items.append(None)
    if all(item is None for item in items):
        return None
    data = ob.data.bones
    n = len(placed)
    # Rest joints as the solver sees them: heads, then the tip's tail (or, when the tip matches the
    # target's rotation, the tip's head).
    end = data[bones[n]].head_local if n < len(bones) else data[placed[-1]].tail_local
    rest_joints = np.array([np.array(data[name].head_local) for name in placed] + [np.array(end)])
    bones_placed = [data[name] for name in placed]
    rest_frames = segment_frames([adapter.matrix_to_np(b.matrix_local) for b in bones_placed], rest_joints)
    pose_frames = segment_frames(pre[:n], joints)
    offsets = np.empty((n, 3, 3))
    first_parent = bones_placed[0].parent
    parent_rest = np.eye(3) if first_parent is None else unit_columns(adapter.matrix_to_np(first_parent.matrix_local))
    offsets[0] = parent_rest.T @ rest_frames[0]
    offsets[1:] = np.swapaxes(rest_frames[:-1], 1, 2) @ rest_frames[1:]
    return ChainLimits(items, frames=pose_frames, rest_offsets=offsets, base_frame=unit_columns(parent))


def segment_frames(matrices: list[np.ndarray], joints: np.ndarray) -> np.ndarray:
    """Bone frames turned so their Y axis follows the joint-to-joint segment (offsets ride along)."""
    frames = []
    for i, m in enumerate(matrices):
        frame = unit_columns(m)
        seg = joints[i + 1] - joints[i]
        frames.append(matrix_from_two_vectors(frame[:, 1], seg / np.linalg.norm(seg)) @ frame)
    return np.array(frames)


def unit_columns(matrix: np.ndarray) -> np.ndarray:
    m = np.array(matrix)[:3, :3]
    return m / np.linalg.norm(m, axis=0)


def solve_armature(ob, depsgraph) -> None:
    """Solve every enabled chain of armature object ``ob`` and write its bones' rotations."""
    chains = ob.fabrik.chains
    try:
        state = rig_state(ob, depsgraph)
    except ChainError as error:
        for chain in chains:
            if chain.enabled:
                set_status(chain, 'INVALID', str(error))
        return
    from . import rig_tree

    ev = ob.evaluated_get(depsgraph)
    for group in rig_tree.group_plans(plan_chains(ob)):
        try:
            if len(group) == 1:
                chain = chains[group[0].index]
                if chain.group:
                    chain.group = ""
                solve_one(ob, ev, chain, group[0], state, depsgraph)
            else:
                rig_tree.solve_group(ob, ev, [chains[p.index] for p in group], group, state, depsgraph)
        except ChainError as error:
            for plan in group:
                set_status(chains[plan.index], 'INVALID', str(error))


def solve_one(ob, ev, chain, plan: ChainPlan, state: RigState, depsgraph) -> None:
    bones = plan.bones
    data_bones = [ob.data.bones[name] for name in bones]
    rel = [rest_relative(b) for b in data_bones]
    pose_bones = [ob.pose.bones[name] for name in bones]
    ev_bones = [ev.pose.bones[name] for name in bones]
    base = [base_rotation(pb, eb, state.animated) for pb, eb in zip(pose_bones, ev_bones)]
    parent = parent_matrix(ob, ev, data_bones[0], state)

    # Pre-IK pose: the chain as it would be without IK this frame.
    pre = []
    matrix = parent
    for k, eb in enumerate(ev_bones):
        matrix = matrix @ rel[k] @ adapter.basis_matrix(eb.location, base[k], eb.scale)
        pre.append(matrix)
    tip_tail = pre[-1] @ np.array([0.0, data_bones[-1].length, 0.0, 1.0])
    placed = solved_bones(chain, bones)
    n = len(placed)
    heads = [m[:3, 3] for m in pre]
    joints = np.array(heads[: n + 1] if n < len(bones) else heads + [tip_tail[:3]])
    seg = np.linalg.norm(np.diff(joints, axis=0), axis=1)
    if n and (seg <= ZERO_LENGTH * max(1.0, float(seg.max()))).any():
        raise ChainError(f"Bone '{placed[int(np.argmin(seg))]}' has zero length")

    target_world = world_point(chain.target, chain.target_bone, depsgraph, "Target")
    target = (state.inv_world @ target_world[:, 3])[:3]
    pole = None
    if chain.pole is not None:
        pole = (state.inv_world @ world_point(chain.pole, chain.pole_bone, depsgraph, "Pole")[:, 3])[:3]

    if n:
        limits = limits_for(ob, placed, bones, pre, joints, parent)
        tolerance = chain.tolerance / state.scale
        try:
            if chain.solver == 'TWO_BONE':
                result = solve_two_bone(joints, target, pole=pole, tolerance=tolerance, limits=limits,
                                        max_iterations=chain.iterations)
            else:
                result = solve_chain(joints, target, pole=pole, tolerance=tolerance,
                                     max_iterations=chain.iterations, limits=limits)
        except ValueError as exc:
            raise ChainError(str(exc)) from exc
        solved, distance, iterations, reached = result.joints, result.error, result.iterations, result.reached
    else:
        solved, distance, iterations = joints, float(np.linalg.norm(joints[0] - target)), 0
        reached = distance <= chain.tolerance / state.scale

    # Full-IK armature-space matrices: each placed bone turned by its segment's from-to rotation.
    ik = []
    for k in range(n):
        before = joints[k + 1] - joints[k]
        after = solved[k + 1] - solved[k]
        turn = matrix_from_two_vectors(before / np.linalg.norm(before), after / np.linalg.norm(after))
        m = pre[k].copy()
        m[:3, :3] = turn @ pre[k][:3, :3]
        m[:3, 3] = solved[k]
        ik.append(m)
    if n < len(bones):  # the tip takes the target's orientation, keeping its own scale
        m = pre[-1].copy()
        scale = np.linalg.norm(pre[-1][:3, :3], axis=0)
        m[:3, :3] = unit_columns(state.inv_world @ target_world) * scale
        m[:3, 3] = solved[-1] if n else pre[-1][:3, 3]
        ik.append(m)

    # Local rotations, blended with the pose without IK by influence, then written.
    influence = chain.influence
    parent_ik, parent_new = parent, parent
    for k, pb in enumerate(pose_bones):
        local = np.linalg.inv(parent_ik @ rel[k]) @ ik[k]
        q = adapter.rotation_of(local)
        if influence < 1.0:
            q = base[k].slerp(q, influence)
        adapter.write_rotation(pb, q, adapter.read_rotation(pb))
        eb = ev_bones[k]
        parent_new = parent_new @ rel[k] @ adapter.basis_matrix(eb.location, q, eb.scale)
        state.new_matrices[bones[k]] = parent_new
        parent_ik = ik[k]
    set_status(chain, 'REACHED' if reached else 'UNREACHABLE', "", distance * state.scale, iterations)
