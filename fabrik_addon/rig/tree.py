"""Chains that share bones, solved together as one tree (see :func:`.solver.solve_tree`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from mathutils import Matrix, Quaternion

from .. import adapter, diagnostics
from ..solver import ConeLimit, HingeLimit, TreeResult, solve_tree
from ..solver.reach import format_distance, out_of_iterations
from ..solver.rotations import matrix_from_two_vectors
from ..solver.tree import PLANE_SLACK, off_plane
from . import reach, small
from .base_pose import base_channels, base_scale, restore_scale, stretched_local
from .influence import GRID, blend_rotations, first_fraction, tip_distances
from .inputs import (
    ArmatureFrame,
    basis_location,
    check_pose_scale,
    parent_matrix,
    segment_frames,
    unit_columns,
    world_matrix,
)
from .plan import ChainError, ChainPlan, bone_depth, check_references_once, set_status, settings_of


@dataclass
class _Tree:
    """The tree's bones, parents before children, and their pose without IK."""

    names: list[str]
    index: dict[str, int]
    data: list  # Bone
    ev_bones: list  # evaluated PoseBone
    pose_bones: list  # PoseBone
    rel: list[np.ndarray]  # rest matrices relative to the parent
    locations: list[tuple]  # location as composed into the basis (.inputs.basis_location)
    channels: list[tuple]  # rotation channels without IK
    base: list  # Quaternion without IK
    top_parent: np.ndarray  # armature-space matrix of the first bone's parent
    stretching: set[str]  # bones of stretching chains
    scales: dict[str, object]  # scale without IK of bones that stretch or stretched until now
    pre: dict[str, np.ndarray]  # armature-space matrices without IK


@dataclass
class _Goals:
    """The joints :func:`.solver.solve_tree` moves (bone heads, then effector tails) and what pulls them."""

    joints: list[np.ndarray]
    parents: list[int]
    effectors: list[int]
    targets: list[np.ndarray]
    target_frames: list[np.ndarray]
    poles: list[np.ndarray]  # NaN rows for chains without a pole
    weights: list[float]
    children: list[list[int]] = field(default_factory=list)
    limits: dict = field(default_factory=dict)  # solve_tree's joint-limit arguments (_tree_limits), once solved


def solve_group(arm: ArmatureFrame, plans: list[ChainPlan]) -> None:
    """Solve the chains of ``plans`` (which share bones) as one tree and write every bone's rotation;
    then each chain's own branch again as a lone chain (:func:`_solve_branches`).

    Where a branch solved again carries a joint limit (which the tree's first solve leaves out), the tree is solved
    again with every limit, continued from the first solve's pose (:func:`.solver.solve_tree`'s ``near``); where
    that reaches every target it is the pose, and its limited branches keep it (:func:`_fitted_branch`). Else, as
    before that: the branches from the first solve, then the tree with every limit where one misses or leaves its
    pole's plane (:func:`_solve_with_every_limit`)."""
    chains = [arm.chains[p.chain_index] for p in plans]
    tree = _pose_without_ik(arm, chains, plans)
    goals = _goals(arm, tree, chains, plans)
    result = _solve(arm, tree, goals, chains, plans)
    left_out = any(_limited_again(arm, c, p, plans) for c, p in zip(chains, plans))
    again = _solve(arm, tree, goals, chains, plans, every_limit=True, near=result.joints) if left_out else None
    if again is not None and again.continued:
        result = again
        _finish(arm, tree, goals, result, chains, plans, result.reached, True)
    else:
        _finish(arm, tree, goals, result, chains, plans, result.reached if not left_out else None, not left_out)
    # Branches with poles that the continued fit did not hold are solved again as lone chains, as after the first.
    off = _off_planes(arm, tree, goals, chains, plans) if left_out and result.continued != "held" else 0.0
    if left_out and (not all(diagnostics.of(c).status == 'REACHED' for c in chains) or off > PLANE_SLACK):
        # Where the continued fit missed, ``again`` is the tree solved with every limit from its pose without IK.
        _solve_with_every_limit(arm, tree, goals, result, chains, plans, off, None if again is None or again.continued
                                else again)
    influences = [settings_of(c, p).influence for c, p in zip(chains, plans)]
    if min(influences) < 1.0:
        _blend_influence(arm, tree, goals, chains, plans, influences)


def _solve_with_every_limit(arm: ArmatureFrame, tree: _Tree, goals: _Goals, result: TreeResult, chains: list,
                            plans: list[ChainPlan], off: float, solved: TreeResult | None = None) -> None:
    """A branch solved again from where the tree put the shared bones missed or left its pole's plane, and the
    tree had placed them without the branches' limits (free branches reach from more places than limited ones,
    and bend in their poles' planes from more): solve the tree again with every limit, where the fit places the
    shared bones so that the limited branches reach, in their poles' planes (:mod:`.solver.tree_fit`); kept only
    where it leaves fewer chains short, or as many and the branches nearer their planes (a target beyond reach
    is missed both ways, and the first solve's pose and status stand). ``off``: the first solve's
    :func:`_off_planes`; ``solved``: that solve with every limit where it was already made (a continued solve that
    missed: :func:`solve_group`), not solved twice."""
    before = _misses(chains)
    again = solved if solved is not None else _solve(arm, tree, goals, chains, plans, every_limit=True)
    _finish(arm, tree, goals, again, chains, plans, again.reached, True)
    misses = _misses(chains)
    if misses > before or (misses == before and not _off_planes(arm, tree, goals, chains, plans) < off):
        _finish(arm, tree, goals, result, chains, plans, again.reached, bool(result.continued))


def _blend_influence(arm: ArmatureFrame, tree: _Tree, goals: _Goals, chains: list, plans: list[ChainPlan],
                     influences: list[float]) -> None:
    """Influence below 1, as on lone chains (:mod:`.influence`): each bone's local rotation (a stretching bone's
    scale too) a fraction of its way from the pose without IK to the influence-1 pose just written, so no bone
    turns past its influence-1 rotation. Each chain's goal is its tip ``influence`` of the way from its distance
    without IK to its distance at influence 1. The bones on two or more chains' paths take one fraction: the
    first from which every chain's tip can reach its goal by a fraction of its own bones' way (0 at influence 0:
    the pose without IK); then each chain's own bones take the first at which its tip reaches its goal, or,
    where the shared bones alone bring it nearer, the first that takes it back out to its goal (so the tip is
    at its goal wherever a fraction puts it there, and nearer as influence grows). Blending every bone by its
    chains' mean influence instead let tips move away as influence grew, and a branch solved again from a
    half-turned trunk turned up to 50 degrees past its influence-1 rotation."""
    pose_bones, names, index = tree.pose_bones, tree.names, tree.index
    full = np.array([adapter.quaternion_from_channels(pb.rotation_mode, adapter.read_rotation(pb))[:]
                     for pb in pose_bones])
    base = np.array([q[:] for q in tree.base])
    own_scale = np.array([tuple(tree.scales.get(n, eb.scale)) for n, eb in zip(names, tree.ev_bones)])
    full_scale = np.array([tuple(pb.scale) if n in tree.stretching else own_scale[k]
                           for k, (n, pb) in enumerate(zip(names, pose_bones))])
    stretching = bool(tree.stretching)
    rel, location = np.array(tree.rel), np.array(tree.locations)
    paths, ends, parents = [], [], []
    for chain, plan in zip(chains, plans):
        path = [index[plan.bones[-1]]]
        while (parent := tree.data[path[-1]].parent) is not None and parent.name in index:
            path.append(index[parent.name])
        path.reverse()
        paths.append(path)
        parents.append(tree.top_parent if path[0] == 0 else parent_matrix(arm, tree.data[path[0]]))
        ends.append(np.array([0.0, 0.0 if chain.match_target_rotation else tree.data[path[-1]].length, 0.0, 1.0]))
    on_paths = np.zeros(len(names), dtype=int)
    for path in paths:
        on_paths[path] += 1
    shared = on_paths >= 2

    def distances(i: int, fractions: np.ndarray) -> np.ndarray:
        path = paths[i]
        return tip_distances(fractions, parents[i], rel[path], location[path], own_scale[path], base[path],
                             full[path], ends[i], goals.targets[i], full_scale[path] if stretching else None)

    ends_of = [distances(i, np.array([[0.0], [1.0]])) for i in range(len(paths))]
    goal = [float(d[0] + f * (d[1] - d[0])) for d, f in zip(ends_of, influences)]
    own = [~shared[path] for path in paths]

    def mixed(i: int, trunk: np.ndarray | float, s: np.ndarray | float) -> np.ndarray:
        """Fractions ``(C, len(path))``: ``trunk`` on the shared bones of chain ``i``'s path, ``s`` on its own."""
        return np.where(own[i][None, :], np.reshape(s, (-1, 1)), np.reshape(trunk, (-1, 1)))

    grid = np.linspace(0.0, 1.0, GRID + 1)

    def worst(trunk: np.ndarray) -> np.ndarray:
        """Per shared fraction, the most any chain's tip stays past its goal at the best of its own bones' fractions
        on the grid (a chain whose influence-1 pose is no nearer never holds the shared bones back)."""
        past = np.full(len(trunk), -np.inf)
        for i in range(len(paths)):
            d = distances(i, mixed(i, np.repeat(trunk, len(grid)), np.tile(grid, len(trunk))))
            best = d.reshape(len(trunk), len(grid)).min(axis=1)
            past = np.maximum(past, best - max(goal[i], float(ends_of[i][1])))
        return past

    shared_fraction = first_fraction(worst, 0.0, float(worst(np.zeros(1))[0]), float(worst(np.ones(1))[0]))
    fraction = np.full(len(names), shared_fraction)
    for i, path in enumerate(paths):
        if not own[i].any():
            continue
        rows = np.array(path)[own[i]]
        d0, d1 = ends_of[i]
        if not d1 < d0:  # influence 1 is no closer: as on lone chains
            fraction[rows] = influences[i]
            continue
        low, high = (float(d) for d in distances(i, mixed(i, shared_fraction, np.array([0.0, 1.0]))))
        if low > goal[i]:
            fraction[rows] = first_fraction(lambda s, i=i: distances(i, mixed(i, shared_fraction, s)), goal[i], low,
                                            high)
        else:  # the shared bones alone bring the tip nearer: its own bones the first fraction back out to the goal
            fraction[rows] = first_fraction(lambda s, i=i: -distances(i, mixed(i, shared_fraction, s)), -goal[i],
                                            -low, -high)
    blended = blend_rotations(base, full, fraction)
    new: dict[str, np.ndarray] = {}
    for k, name in enumerate(names):
        q = Quaternion(blended[k])
        adapter.write_rotation(pose_bones[k], q, tree.channels[k])
        scale = own_scale[k] + fraction[k] * (full_scale[k] - own_scale[k])
        if name in tree.stretching:
            pose_bones[k].scale = scale
        above = tree.top_parent if k == 0 else new[tree.data[k].parent.name]
        new[name] = above @ rel[k] @ adapter.basis_matrix(tree.locations[k], q, scale)
        arm.new_matrices[name] = new[name]


def _misses(chains: list) -> int:
    """How many of ``chains`` missed their targets (the last solve's)."""
    return sum(diagnostics.of(c).status != 'REACHED' for c in chains)


def _off_planes(arm: ArmatureFrame, tree: _Tree, goals: _Goals, chains: list, plans: list[ChainPlan]) -> float:
    """The largest angle (degrees) of the bend of a branch solved again with a pole and a joint limit off its
    pole's side of the plane of the branch's root, target and pole, as written (:func:`.solver.tree.off_plane`)."""
    worst = 0.0
    for i, (chain, plan) in enumerate(zip(chains, plans)):
        bones = _branch(plan, plans)
        if chain.pole is None or not _limited_again(arm, chain, plan, plans):
            continue
        # The branch's joints from its rotations as the lone chain's solve wrote them (it records no matrices).
        above = parent_matrix(arm, tree.data[tree.index[bones[0]]])
        heads = []
        for name in bones:
            k = tree.index[name]
            pb = tree.pose_bones[k]
            q = adapter.quaternion_from_channels(pb.rotation_mode, adapter.read_rotation(pb))
            above = above @ tree.rel[k] @ adapter.basis_matrix(tree.locations[k], q,
                                                               tree.scales.get(name, tree.ev_bones[k].scale))
            heads.append(above[:3, 3])
        worst = max(worst, off_plane(np.array([*heads, goals.targets[i]]), goals.targets[i], goals.poles[i]))
    return worst


def _limited_again(arm: ArmatureFrame, chain, plan: ChainPlan, plans: list[ChainPlan]) -> bool:
    """Whether the chain's branch is solved again as a lone chain (:func:`_solved_again`) and carries a joint
    limit, which the tree's first solve leaves out."""
    return _solved_again(arm, chain, plan, plans) and \
        bool(arm.cache.limited[[arm.cache.index[b] for b in _branch(plan, plans)]].any())


def _finish(arm: ArmatureFrame, tree: _Tree, goals: _Goals, result: TreeResult, chains: list,
            plans: list[ChainPlan], reachable: np.ndarray | None, every_limit: bool) -> None:
    """Write the tree's pose, say each chain's status, and solve each chain's branch again (``reachable``:
    per chain, whether a solve of the tree with every joint limit reached its target; ``every_limit``:
    ``result`` is such a solve)."""
    new = _write(arm, tree, goals, result, chains, plans)
    beyond = [_beyond_reach(goals, i, chain, plan) for i, (chain, plan) in enumerate(zip(chains, plans))]
    for i, (chain, plan) in enumerate(zip(chains, plans)):
        tip = plan.bones[-1]
        end = new[tip][:3, 3] if chain.match_target_rotation else \
            (new[tip] @ np.array([0.0, tree.data[tree.index[tip]].length, 0.0, 1.0]))[:3]
        distance = float(np.linalg.norm(end - goals.targets[i]))
        # As lone chains say it (diagnostics.solve_status): iterations that ran out while the tree was
        # still closing in are "did not converge", never "out of reach"; a target beyond the branch's length
        # is out of reach whatever the passes.
        reached = distance <= chain.tolerance * plan.length
        status, message = diagnostics.solve_status(reached, result.converged or beyond[i], result.iterations)
        set_status(chain, status, message, distance * arm.scale, result.iterations)
        if not reached:  # why (:mod:`.reach`), worked out when first read
            reach.explain_branch(chain, plan, tree.names, goals.joints, goals.parents, goals.effectors[i], result,
                                 goals.targets[i], goals.poles[i], goals.limits, arm.scale,
                                 max(c.iterations for c in chains), plan.length)
    _solve_branches(arm, chains, plans, result, reachable, every_limit, beyond)


def _beyond_reach(goals: _Goals, i: int, chain, plan: ChainPlan) -> bool:
    """Whether chain ``i``'s target lies farther from the tree's root than the bones from the root to its effector
    reach (stretched to the chain's cap): out of reach whatever the passes, as a lone chain beyond its length says
    (an unlimited torso whose hands' targets lay 1.1-1.4 m beyond reach said "did not converge" with 1-5
    iterations, "out of reach" with 100)."""
    joint, length = goals.effectors[i], 0.0
    while goals.parents[joint] >= 0:
        length += float(np.linalg.norm(goals.joints[joint] - goals.joints[goals.parents[joint]]))
        joint = goals.parents[joint]
    cap = chain.max_stretch if chain.use_stretch else 1.0
    distance = float(np.linalg.norm(goals.targets[i] - goals.joints[joint]))
    return distance > length * cap + chain.tolerance * plan.length


def _pose_without_ik(arm: ArmatureFrame, chains: list, plans: list[ChainPlan]) -> _Tree:
    """The bones of every chain, parents first, with their pose without IK (checked as chains' are)."""
    ob, ev = arm.ob, arm.ev
    names: list[str] = []
    for plan in plans:
        names += [b for b in plan.bones if b not in names]
    names.sort(key=lambda n: bone_depth(ob.data.bones[n]))  # parents before children
    index = {name: k for k, name in enumerate(names)}
    data = [ob.data.bones[n] for n in names]
    ev_bones = [ev.pose.bones[n] for n in names]
    pose_bones = [ob.pose.bones[n] for n in names]
    rig_cache = arm.cache
    rel = [rig_cache.rel[rig_cache.index[n]] for n in names]
    locations = [basis_location(rig_cache, rig_cache.index[n], eb) for n, eb in zip(names, ev_bones)]
    for chain, plan in zip(chains, plans):
        try:
            check_references_once(ob, chain, plan)
        except ChainError as error:  # the whole tree is refused: say which chain holds it up
            raise type(error)(f"Chain '{chain.name}': {error}") from error
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
        pre[bone.name] = above @ rel[k] @ adapter.basis_matrix(locations[k], base[k], scale)
    for plan in plans:
        root_parent = parent_matrix(arm, data[index[plan.bones[0]]]) if plan.scale_free else None
        check_pose_scale(plan, [pre[n] for n in plan.bones], root_parent,
                         uniform=not arm.chains[plan.chain_index].use_stretch)
    return _Tree(names, index, data, ev_bones, pose_bones, rel, locations, channels, base, top_parent, stretching,
                 scales, pre)


def _goals(arm: ArmatureFrame, tree: _Tree, chains: list, plans: list[ChainPlan]) -> _Goals:
    """The tree's joints and each chain's effector, target, pole and weight."""
    index, pre, data, depsgraph = tree.index, tree.pre, tree.data, arm.depsgraph
    goals = _Goals([pre[n][:3, 3] for n in tree.names], [-1] + [index[b.parent.name] for b in data[1:]],
                   [], [], [], [], [])
    tails: dict[str, int] = {}  # tip bone -> the joint at its tail (two chains on one tip bone end there both)
    for chain, plan in zip(chains, plans):
        tip = plan.bones[-1]
        if chain.match_target_rotation:
            effector = index[tip]
        elif tip in tails:
            effector = tails[tip]
        else:
            goals.joints.append((pre[tip] @ np.array([0.0, data[index[tip]].length, 0.0, 1.0]))[:3])
            goals.parents.append(index[tip])
            effector = tails[tip] = len(goals.joints) - 1
        if effector in goals.effectors:
            raise ChainError(f"Chains '{chains[goals.effectors.index(effector)].name}' and '{chain.name}' "
                             "end at the same point")
        goals.effectors.append(effector)
        target_world = world_matrix(chain.target, chain.target_bone, depsgraph, "Target")
        goals.target_frames.append(arm.inv_world @ target_world)
        goals.targets.append(goals.target_frames[-1][:3, 3])
        if chain.pole is not None:
            pole = world_matrix(chain.pole, chain.pole_bone, depsgraph, "Pole")
            goals.poles.append((arm.inv_world @ pole[:, 3])[:3])
        else:
            goals.poles.append(np.full(3, np.nan))
        goals.weights.append(chain.weight)
    goals.children = [[] for _ in goals.joints]
    for j in range(1, len(goals.joints)):
        goals.children[goals.parents[j]].append(j)
    return goals


def _solve(arm: ArmatureFrame, tree: _Tree, goals: _Goals, chains: list, plans: list[ChainPlan],
           every_limit: bool = False, near: np.ndarray | None = None) -> TreeResult:
    """:func:`.solver.solve_tree` on the tree (``near``: its pose to continue from); bones with several children
    turn as rigid bodies. The limits of branches solved again as lone chains are left out unless ``every_limit``."""
    tolerance = min(c.tolerance * p.length for c, p in zip(chains, plans))  # fractions of each chain's length
    rigid = [k for k in range(len(tree.names)) if len(goals.children[k]) >= 2]
    resolved_again = set() if every_limit else \
        {b for c, p in zip(chains, plans) if _solved_again(arm, c, p, plans) for b in _branch(p, plans)}
    limits = goals.limits = _tree_limits(arm.ob, tree.names, tree.data, tree.pre, goals.joints, goals.parents,
                                         rigid, tree.top_parent, resolved_again)
    try:
        return solve_tree(np.array(goals.joints), goals.parents, goals.effectors, np.array(goals.targets),
                          weights=goals.weights, poles=np.array(goals.poles), rigid=rigid, tolerance=tolerance,
                          max_iterations=max(c.iterations for c in chains), **limits,
                          softness=[c.softness for c in chains], use_stretch=[c.use_stretch for c in chains],
                          max_stretch=[c.max_stretch for c in chains], near=near)
    except ValueError as exc:
        raise ChainError(str(exc)) from exc


def _write(arm: ArmatureFrame, tree: _Tree, goals: _Goals, result: TreeResult, chains: list,
           plans: list[ChainPlan]) -> dict[str, np.ndarray]:
    """Turn every bone onto the solved joints, parents first, and write it (the influence-1 pose:
    :func:`_blend_influence` blends it); returns the new armature-space matrices. Each bone turns by the
    solve's own turn where the tree had joint limits (:attr:`.TreeResult.turns`), else by :func:`_best_turn`."""
    solved, children_of, pre, scales = result.joints, goals.children, tree.pre, tree.scales
    # Pull of each joint's subtree, to weigh a branching bone's best-fit rotation.
    pull = np.zeros(len(goals.joints))
    for effector, weight in zip(goals.effectors, goals.weights):
        j = effector
        while j >= 0:
            pull[j] += max(weight, 1e-6)
            j = goals.parents[j]
    matching = {p.bones[-1]: goals.target_frames[i] for i, (c, p) in enumerate(zip(chains, plans))
                if c.match_target_rotation}
    new: dict[str, np.ndarray] = {}
    turns: dict[str, np.ndarray] = {}  # each bone's world turn from its pose without IK
    for k, name in enumerate(tree.names):
        parent = tree.data[k].parent
        above = tree.top_parent if k == 0 else new[parent.name]
        eb, rel = tree.ev_bones[k], tree.rel[k]
        head = (above @ rel @ np.array([*tree.locations[k], 1.0]))[:3]
        m = pre[name].copy()
        m[:3, 3] = head
        turn = np.eye(3) if k == 0 or parent.name not in turns else turns[parent.name]
        if name in matching:
            m[:3, :3] = unit_columns(matching[name]) * np.linalg.norm(pre[name][:3, :3], axis=0)
        elif children_of[k] and result.turns is not None:
            # Solved with joint limits: the turn the limits were measured in (the forking bone's roll
            # fixes its branches' limit frames; a hinge turns about its local X), so the pose written is
            # the pose solved. _best_turn's roll differed: hinges up to 24.6 degrees off local X, and the
            # branches solved again from that trunk missed targets the tree reached.
            turn = result.turns[children_of[k][0]]
            m[:3, :3] = turn @ pre[name][:3, :3]
        elif children_of[k]:
            before = np.array([goals.joints[j] - pre[name][:3, 3] for j in children_of[k]])
            after = np.array([solved[j] - head for j in children_of[k]])
            turn = _best_turn(before, after, pull[children_of[k]], turn)
            m[:3, :3] = turn @ pre[name][:3, :3]
        turns[name] = turn
        scale = scales.get(name, eb.scale)
        if name in tree.stretching:
            # A bone's own factor is that of the segment it spans (bones with several children never grow).
            grow = float(result.bone_stretch[children_of[k][0]]) if len(children_of[k]) == 1 else 1.0
            q, scale = stretched_local(Matrix((above @ rel).tolist()), Matrix(unit_columns(m).tolist()),
                                       Matrix(pre[name].tolist()), scales[name], grow)
        else:
            q = adapter.rotation_of(np.linalg.inv(above @ rel) @ m)
        adapter.write_rotation(tree.pose_bones[k], q, tree.channels[k])
        if name in tree.stretching:
            tree.pose_bones[k].scale = scale
        elif name in scales:  # stretch just switched off (keyed): back to the scale without IK
            restore_scale(tree.pose_bones[k])
        new[name] = above @ rel @ adapter.basis_matrix(tree.locations[k], q, scale)
        arm.new_matrices[name] = new[name]
    return new


def _solve_branches(arm: ArmatureFrame, chains: list, plans: list[ChainPlan], result: TreeResult,
                    reachable: np.ndarray | None, every_limit: bool, beyond: list[bool]) -> None:
    """Each chain's own bones below the ones it shares, solved again as a lone chain (:mod:`.small`) from
    where the tree put the bone above them: a pole rolls the branch, hinges turn about X in their plane
    and the curled start makes the branch a function of its target, as on a lone chain.

    The tree's passes decide the shared bones; their branch poses depended on the pass count (a torso's
    forearm turned 63 degrees in a frame, 29 degrees off its hinge), and their poles rolled the shared
    bone above the branch with it (elbows 27 degrees off the plane of shoulder, target and pole).

    A branch that misses says "did not converge" where the tree ran out of iterations ("raise Iterations", as
    a lone chain says it) or a solve of the tree with every joint limit reached that chain's target
    (``reachable``: the target is; the message says that the branch's own solve missed it); "out of reach"
    otherwise, and wherever the target lies beyond the branch's length (``beyond``, per chain).

    Where the tree was solved with every joint limit (``every_limit``) and reached the chain's target, and the
    branch's own solve misses it, the branch keeps the tree's pose (limits kept, in its pole's plane where the
    fit held it there: :mod:`.solver.tree_fit`). The two measure the branch's limits from different starts: the
    tree turns each bone from its pose without IK under the unturned trunk, the lone chain from its pose
    without IK under the trunk as solved, so the bone above a branch's cone can sit at another roll. A Y with
    a coned 2-bone trunk missed a reachable target by 7.5 cm that way, 7.3 cm in another rotation mode.
    """
    rig_cache = arm.cache
    for i, (chain, plan) in enumerate(zip(chains, plans)):
        last = len(plan.bones) - len(_branch(plan, plans))
        if last >= len(plan.bones) or not _solved_again(arm, chain, plan, plans) or \
                _fitted_branch(arm, chain, plan, plans, result.continued):
            continue
        last -= 1
        rows = plan.cache_rows[last + 1:]
        branch = ChainPlan(plan.chain_index, plan.bones[last + 1:], plan.depth + last + 1, cache_rows=rows,
                           parent=int(rig_cache.parents[rows[0]]), limited=bool(rig_cache.limited[rows].any()),
                           references_checked=plan.references_checked,
                           scale_free=[k - last - 1 for k in plan.scale_free if k > last],
                           match_rotation=plan.match_rotation,
                           length=plan.length,  # the tolerance is a fraction of the whole chain's length
                           settings=replace(settings_of(chain, plan), influence=1.0))  # blended with the tree's
        # The tree's pose and status (a copy: the solve below records anew), where it may be kept.
        kept = (_branch_pose(arm, branch.bones), replace(diagnostics.of(chain))) \
            if every_limit and bool(result.reached[i]) else None
        small.solve(arm, [(chain, branch)])
        entry = diagnostics.of(chain)
        if kept is not None and entry.status != 'REACHED' and kept[1].status == 'REACHED':
            tree_pose, tree_status = kept
            _restore_branch_pose(arm, tree_pose)
            set_status(chain, tree_status.status, tree_status.message, tree_status.error, tree_status.iterations)
            continue
        if entry.status != 'UNREACHABLE' or beyond[i]:
            continue
        if not result.converged:
            # The chain's own setting, as its explanation quotes it: the tree's passes, restarts included, can
            # be several times it ("Did not converge in 5 iterations" with Iterations at 1).
            set_status(chain, 'NOT_CONVERGED', f"Branch '{chain.name}': "
                       + out_of_iterations(chain.iterations, format_distance(entry.error)), entry.error,
                       result.iterations)
        elif reachable is not None and bool(reachable[i]):
            # Not the iterations: the tree's passes settled, and the branch, solved again on its own from the
            # shared bones they left, stops short of a target the tree with every limit reaches.
            set_status(chain, 'NOT_CONVERGED', f"Branch '{chain.name}': did not converge: its own solve stops "
                       f"{format_distance(entry.error)} short of a target the tree reaches with every joint limit "
                       "(more iterations do not help)", entry.error, result.iterations)


def _fitted_branch(arm: ArmatureFrame, chain, plan: ChainPlan, plans: list[ChainPlan], continued: str) -> bool:
    """Whether the chain's limited branch keeps the pose of a tree solve continued from the first
    (``continued``: :attr:`.solver.TreeResult.continued`), which kept its limits and reached its target: a branch
    without a pole always, one with a pole where that fit held it toward its pole's plane. A lone chain's solve
    from a trunk that leaves its target at the edge of what its limits allow can take another reaching roll from
    one frame to the next (a coned Y with hinged tips, from the first solve's trunk: 46 degrees in a frame)."""
    return bool(continued) and _limited_again(arm, chain, plan, plans) and \
        (chain.pole is None or continued == "held")


def _branch_pose(arm: ArmatureFrame, bones: list[str]) -> list[tuple]:
    """The branch's written rotation channels and armature-space matrices (:func:`_restore_branch_pose`)."""
    return [(arm.bones[name], tuple(adapter.read_rotation(arm.bones[name])), arm.new_matrices.get(name))
            for name in bones]


def _restore_branch_pose(arm: ArmatureFrame, pose: list[tuple]) -> None:
    for pose_bone, channels, matrix in pose:
        setattr(pose_bone, adapter.rotation_path(pose_bone.rotation_mode), channels)
        if matrix is not None:
            arm.new_matrices[pose_bone.name] = matrix


def _solved_again(arm: ArmatureFrame, chain, plan: ChainPlan, plans: list[ChainPlan]) -> bool:
    """Whether :func:`_solve_branches` solves the chain's branch again: where it has a pole or a joint
    limit, which the tree's passes cannot honour as a lone chain does; not when it pulls nothing, nor
    when soft IK or stretch shape it, which the tree measures from the tree's root, a lone chain from
    its own. (Free branches keep the tree's pose: solved again, a Y's nearly straight branches near
    full reach took 0.54 degrees of difference between rotation modes from the lone chains' curl.)"""
    if chain.weight <= 0.0 or chain.softness or chain.use_stretch:
        return False
    bones = _branch(plan, plans)
    return chain.pole is not None or bool(arm.cache.limited[[arm.cache.index[b] for b in bones]].any())


def _branch(plan: ChainPlan, plans: list[ChainPlan]) -> list[str]:
    """The bones of ``plan`` below the last one it shares with another chain of the tree."""
    shared = {b for p in plans if p is not plan for b in p.bones}
    last = max((k for k, b in enumerate(plan.bones) if b in shared), default=-1)
    return plan.bones[last + 1:]


def _tree_limits(ob, names, data, pre, joints, parents, rigid, top_parent, branches: set[str] = frozenset()) -> dict:
    """Keyword arguments giving :func:`solve_tree` the bones' joint limits, or nothing when none is set.

    The limit of bone ``names[k]`` applies to its segment, the edge out of its head joint ``k``; it is
    measured in its parent bone's segment frame, turned by its rest offset, as for chains.
    """
    if not any(ob.pose.bones[name].fabrik_limit.mode != 'NONE' for name in names if name not in branches):
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
        if names[k] in branches:  # solved again as a lone chain, with its limits (_solve_branches)
            pass
        elif limit.mode == 'CONE':
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


# Children offsets this close to parallel (sine of the angle) count as one direction: float32 rest data
# puts coincident heads ~1e-7 apart.
PARALLEL = 1e-5


def _best_turn(before: np.ndarray, after: np.ndarray, weights: np.ndarray, parent_turn: np.ndarray) -> np.ndarray:
    """Rotation taking the ``before`` offsets onto the ``after`` offsets: exact for one, best fit for more.

    One offset leaves the roll free: the bone takes its parent's turn and then the least swing onto its
    new direction (parallel transport, as :func:`.solver.orient.chain_turns` does down a chain), so it
    twists relative to its parent by no more than its direction demands.
    """
    a = before / np.linalg.norm(before, axis=1)[:, None]
    b = after / np.linalg.norm(after, axis=1)[:, None]
    if len(a) > 1 and np.abs(np.cross(a[0], a[1:])).max() <= PARALLEL and (a[1:] @ a[0]).min() > 0.0:
        # Children in one direction (branches starting at one point): their offsets fix no roll, which
        # a best fit would take from float noise (180-degree flips between frames and rotation modes).
        # The bone turns as with one child, toward their weighted mean.
        mean = (b * weights[:, None]).sum(axis=0)
        a, b = a[:1], mean[None] / np.linalg.norm(mean)
    if len(a) == 1:
        carried = parent_turn @ a[0]
        return matrix_from_two_vectors(carried / np.linalg.norm(carried), b[0]) @ parent_turn
    # Weighted Kabsch: the rotation minimising sum(w * |R a - b|^2).
    u, _, vt = np.linalg.svd((a * weights[:, None]).T @ b)
    d = np.sign(np.linalg.det(vt.T @ u.T))
    return vt.T @ np.diag([1.0, 1.0, d]) @ u.T
