"""Chains that share bones, solved together as one tree (see :func:`.solver.solve_tree`)."""

from __future__ import annotations

import numpy as np
from mathutils import Matrix

from .. import adapter
from ..solver import ConeLimit, HingeLimit, solve_tree
from ..solver.rotations import matrix_from_two_vectors
from . import reach
from .base_pose import base_channels, base_scale, restore_scale, stretched_local
from .inputs import ArmatureFrame, check_pose_scale, parent_matrix, segment_frames, unit_columns, world_matrix
from .plan import ChainError, ChainPlan, bone_depth, check_references_once, set_status


def solve_group(arm: ArmatureFrame, plans: list[ChainPlan]) -> None:
    """Solve the chains of ``plans`` (which share bones) as one tree and write every bone's rotation."""
    ob, ev, depsgraph = arm.ob, arm.ev, arm.depsgraph
    chains = [arm.chains[p.index] for p in plans]
    names: list[str] = []
    for plan in plans:
        names += [b for b in plan.bones if b not in names]
    names.sort(key=lambda n: bone_depth(ob.data.bones[n]))  # parents before children
    index = {name: k for k, name in enumerate(names)}
    data = [ob.data.bones[n] for n in names]
    ev_bones = [ev.pose.bones[n] for n in names]
    pose_bones = [ob.pose.bones[n] for n in names]
    rig_cache = arm.cache
    rel = [rig_cache.rel[rig_cache.index[n]] for n in names]  # rest matrices relative to the parent
    for chain, plan in zip(chains, plans):
        check_references_once(ob, chain, plan)
    channels = [base_channels(pb, eb, rig_cache.animated_paths) for pb, eb in zip(pose_bones, ev_bones)]
    base = [adapter.quaternion_from_channels(pb.rotation_mode, c) for pb, c in zip(pose_bones, channels)]
    top_parent = parent_matrix(arm, data[0])
    # Bones of stretching chains (and bones stretched until now) start from their scale without IK.
    stretching = {n for c, p in zip(chains, plans) if c.use_stretch for n in p.bones}
    scales = {n: base_scale(arm, n) for n in names if n in stretching or rig_cache.index[n] in rig_cache.scaled}

    pre: dict[str, np.ndarray] = {}
    for k, bone in enumerate(data):
        above = top_parent if k == 0 else pre[bone.parent.name]
        scale = scales.get(bone.name, ev_bones[k].scale)
        pre[bone.name] = above @ rel[k] @ adapter.basis_matrix(ev_bones[k].location, base[k], scale)

    for plan in plans:
        root_parent = parent_matrix(arm, data[index[plan.bones[0]]]) if plan.scale_free else None
        check_pose_scale(plan, [pre[n] for n in plan.bones], root_parent,
                         uniform=not arm.chains[plan.index].use_stretch)
    joints = [pre[n][:3, 3] for n in names]
    parents = [-1] + [index[b.parent.name] for b in data[1:]]
    effectors: list[int] = []
    targets: list[np.ndarray] = []
    target_frames: list[np.ndarray] = []
    poles: list[np.ndarray] = []
    weights: list[float] = []
    for chain, plan in zip(chains, plans):
        tip = plan.bones[-1]
        if chain.match_target_rotation:
            effector = index[tip]
        else:
            joints.append((pre[tip] @ np.array([0.0, data[index[tip]].length, 0.0, 1.0]))[:3])
            parents.append(index[tip])
            effector = len(joints) - 1
        if effector in effectors:
            raise ChainError(f"Chains '{chains[effectors.index(effector)].name}' and '{chain.name}' "
                             "end at the same point")
        effectors.append(effector)
        target_world = world_matrix(chain.target, chain.target_bone, depsgraph, "Target")
        target_frames.append(arm.inv_world @ target_world)
        targets.append(target_frames[-1][:3, 3])
        if chain.pole is not None:
            poles.append((arm.inv_world @ world_matrix(chain.pole, chain.pole_bone, depsgraph, "Pole")[:, 3])[:3])
        else:
            poles.append(np.full(3, np.nan))
        weights.append(chain.weight)
    tolerance = min(c.tolerance for c in chains) / arm.scale
    children_of: list[list[int]] = [[] for _ in joints]
    for j in range(1, len(joints)):
        children_of[parents[j]].append(j)
    rigid = [k for k in range(len(names)) if len(children_of[k]) >= 2]
    limits = _tree_limits(ob, names, data, pre, joints, parents, rigid, top_parent)
    try:
        result = solve_tree(np.array(joints), parents, effectors, np.array(targets), weights=weights,
                            poles=np.array(poles), rigid=rigid, tolerance=tolerance,
                            max_iterations=max(c.iterations for c in chains), **limits,
                            softness=[c.softness for c in chains], use_stretch=[c.use_stretch for c in chains],
                            max_stretch=[c.max_stretch for c in chains])
    except ValueError as exc:
        raise ChainError(str(exc)) from exc
    solved = result.joints

    # Pull of each joint's subtree, to weigh a branching bone's best-fit rotation.
    pull = np.zeros(len(joints))
    for effector, weight in zip(effectors, weights):
        j = effector
        while j >= 0:
            pull[j] += max(weight, 1e-6)
            j = parents[j]
    influence = {n: np.mean([c.influence for c, p in zip(chains, plans) if n in p.bones]) for n in names}
    matching = {p.bones[-1]: target_frames[i] for i, (c, p) in enumerate(zip(chains, plans))
                if c.match_target_rotation}

    new: dict[str, np.ndarray] = {}
    turns: dict[str, np.ndarray] = {}  # each bone's world turn from its pose without IK
    for k, name in enumerate(names):
        above = top_parent if k == 0 else new[data[k].parent.name]
        eb = ev_bones[k]
        head = (above @ rel[k] @ np.array([*eb.location, 1.0]))[:3]
        m = pre[name].copy()
        m[:3, 3] = head
        turn = np.eye(3) if k == 0 or data[k].parent.name not in turns else turns[data[k].parent.name]
        if name in matching:
            m[:3, :3] = unit_columns(matching[name]) * np.linalg.norm(pre[name][:3, :3], axis=0)
        elif children_of[k]:
            before = np.array([joints[j] - pre[name][:3, 3] for j in children_of[k]])
            after = np.array([solved[j] - head for j in children_of[k]])
            turn = _best_turn(before, after, pull[children_of[k]], turn)
            m[:3, :3] = turn @ pre[name][:3, :3]
        turns[name] = turn
        scale = scales.get(name, eb.scale)
        if name in stretching:
            # A bone's own factor is that of the segment it spans (bones with several children never grow).
            grow = float(result.bone_stretch[children_of[k][0]]) if len(children_of[k]) == 1 else 1.0
            q, wanted = stretched_local(Matrix((above @ rel[k]).tolist()), Matrix(unit_columns(m).tolist()),
                                        Matrix(pre[name].tolist()), scales[name], grow)
            scale = wanted if influence[name] >= 1.0 else scales[name] + (wanted - scales[name]) * influence[name]
        else:
            q = adapter.rotation_of(np.linalg.inv(above @ rel[k]) @ m)
        if influence[name] < 1.0:
            q = base[k].slerp(q, influence[name])
        adapter.write_rotation(pose_bones[k], q, channels[k])
        if name in stretching:
            pose_bones[k].scale = scale
        elif name in scales:  # stretch just switched off (keyed): back to the scale without IK
            restore_scale(pose_bones[k])
        new[name] = above @ rel[k] @ adapter.basis_matrix(eb.location, q, scale)
        arm.new_matrices[name] = new[name]

    for i, (chain, plan) in enumerate(zip(chains, plans)):
        tip = plan.bones[-1]
        end = new[tip][:3, 3] if chain.match_target_rotation else \
            (new[tip] @ np.array([0.0, data[index[tip]].length, 0.0, 1.0]))[:3]
        distance = float(np.linalg.norm(end - targets[i]))
        set_status(chain, 'REACHED' if distance <= chain.tolerance / arm.scale else 'UNREACHABLE', "",
                   distance * arm.scale, result.iterations)
        if distance > chain.tolerance / arm.scale:
            reach.explain_branch(chain, plan, names, joints, parents, effectors[i], result, targets[i], poles[i],
                                 limits, arm.scale, max(c.iterations for c in chains))


def _tree_limits(ob, names, data, pre, joints, parents, rigid, top_parent) -> dict:
    """Keyword arguments giving :func:`solve_tree` the bones' joint limits, or nothing when none is set.

    The limit of bone ``names[k]`` applies to its segment, the edge out of its head joint ``k``; it is
    measured in its parent bone's segment frame, turned by its rest offset, as for chains.
    """
    if not any(ob.pose.bones[name].fabrik_limit.mode != 'NONE' for name in names):
        return {}
    for k in rigid:
        if ob.pose.bones[names[k]].fabrik_limit.mode != 'NONE':
            raise ChainError(f"Bone '{names[k]}' branches to several chains and cannot carry a joint limit")
    count = len(joints)
    rest = [np.array(b.head_local) for b in data]
    for j in range(len(names), count):  # effector tails
        rest.append(np.array(data[parents[j]].tail_local))
    limit_of: list = [None] * count
    frames = np.tile(np.eye(3), (count, 1, 1))
    rest_frames = np.tile(np.eye(3), (count, 1, 1))
    for j in range(1, count):
        k = parents[j]  # the bone whose segment ends at joint j
        limit = ob.pose.bones[names[k]].fabrik_limit
        if limit.mode == 'CONE':
            limit_of[j] = ConeLimit(limit.cone_left, limit.cone_right, limit.cone_up, limit.cone_down)
        elif limit.mode == 'HINGE':
            if limit.hinge_min > limit.hinge_max:
                raise ChainError(f"Bone '{names[k]}': hinge Min is greater than Max")
            limit_of[j] = HingeLimit(limit.hinge_min, limit.hinge_max)
        frames[j] = segment_frames([pre[names[k]]], np.array([joints[k], joints[j]]))[0]
        rest_frames[j] = segment_frames([adapter.matrix_to_np(data[k].matrix_local)], np.array([rest[k], rest[j]]))[0]
    top = data[0].parent
    base_rest = np.eye(3) if top is None else unit_columns(adapter.matrix_to_np(top.matrix_local))
    offsets = np.empty((count, 3, 3))
    offsets[0] = np.eye(3)
    for j in range(1, count):
        above = base_rest if parents[j] == 0 else rest_frames[parents[j]]
        offsets[j] = above.T @ rest_frames[j]
    return {"limits": limit_of, "frames": frames, "rest_offsets": offsets, "base_frame": unit_columns(top_parent)}


def _best_turn(before: np.ndarray, after: np.ndarray, weights: np.ndarray, parent_turn: np.ndarray) -> np.ndarray:
    """Rotation taking the ``before`` offsets onto the ``after`` offsets: exact for one, best fit for more.

    One offset leaves the roll free: the bone takes its parent's turn and then the least swing onto its
    new direction (parallel transport, as :func:`.solver.orient.chain_turns` does down a chain), so it
    twists relative to its parent by no more than its direction demands.
    """
    a = before / np.linalg.norm(before, axis=1)[:, None]
    b = after / np.linalg.norm(after, axis=1)[:, None]
    if len(a) == 1:
        carried = parent_turn @ a[0]
        return matrix_from_two_vectors(carried / np.linalg.norm(carried), b[0]) @ parent_turn
    # Weighted Kabsch: the rotation minimising sum(w * |R a - b|^2).
    u, _, vt = np.linalg.svd((a * weights[:, None]).T @ b)
    d = np.sign(np.linalg.det(vt.T @ u.T))
    return vt.T @ np.diag([1.0, 1.0, d]) @ u.T
