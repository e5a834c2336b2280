"""Solve the chains of armatures: validate, build the pose without IK, solve, write bone rotations."""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from mathutils import Matrix, Quaternion, Vector

from . import adapter, cache, diagnostics
from .solver import ChainLimits, ConeLimit, HingeLimit
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
    # Filled from the armature's cache when the layout is built (both are rebuilt together):
    idx: list[int] = field(default_factory=list)  # bone indices in the cache
    parent: int = -1  # cache index of the root bone's parent, -1 for none
    limited: bool = False  # a bone has a joint limit (limits_for tells which placed ones do, each frame)
    references_checked: bool = False  # target and pole passed check_references under these settings


@dataclass
class RigState:
    """What one armature's solve needs to share between its chains."""

    inv_world_m: Matrix  # armature object's world matrix inverted (mathutils: cheap single-point transforms)
    scale: float
    animated: set[tuple[str, int]]
    new_matrices: dict[str, np.ndarray] = field(default_factory=dict)

    @functools.cached_property
    def inv_world(self) -> np.ndarray:
        """``inv_world_m`` as numpy, made on first use (the few-chain path seldom needs it)."""
        return np.array(self.inv_world_m)


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


@dataclass
class Layout:
    """How an armature's chains are solved: cached until chain settings or bones change."""

    plans: list[ChainPlan]
    invalid: list[tuple[int, str]]
    free: list[ChainPlan]  # standalone chains under no other chain: one batched pass
    rest: list[list[ChainPlan]]  # chains below other chains, and trees: parents first
    labels: dict[int, str]  # chain index -> names of the chains it is solved together with


def plan_chains(ob) -> list[ChainPlan]:
    """Validate every enabled chain's bones (marking invalid ones) and order the rest parents first.

    Cached until chain settings change: only the checks that depend on nothing else live here;
    targets and poles are checked at every solve (:func:`check_references`).
    """
    return layout(ob).plans


def layout(ob, rig_cache: cache.RigCache | None = None) -> Layout:
    """The armature's chain plans under the current settings (``rig_cache``: its cache, if at hand)."""
    if rig_cache is None:
        rig_cache = cache.get(ob)
    chains = ob.fabrik.chains
    # Tip names too: a script may reorder or swap chains (move, remove + add) without touching a setting.
    key = (cache.generation(), tuple(chain.tip_bone for chain in chains))
    if key not in rig_cache.plans:
        plans, invalid = _plan_chains(ob)
        for plan in plans:
            plan.idx = [rig_cache.index[name] for name in plan.bones]
            plan.parent = int(rig_cache.parents[plan.idx[0]])
            plan.limited = bool(rig_cache.limited[plan.idx].any())
        moved = {bone for plan in plans for bone in plan.bones}
        free, rest, labels = [], [], {}
        for group in rig_tree.group_plans(plans):
            for plan in group:
                labels[plan.index] = ", ".join(chains[p.index].name for p in group if p is not plan)
            if len(group) == 1 and not _below(ob, group[0], moved):
                free.append(group[0])
            else:
                rest.append(group)
        rig_cache.plans = {key: Layout(plans, invalid, free, rest, labels)}
        for index, label in labels.items():
            diagnostics.set_group(chains[index], label)
    result: Layout = rig_cache.plans[key]
    for index, message in result.invalid:
        set_status(chains[index], 'INVALID', message)
    return result


def _plan_chains(ob) -> tuple[list[ChainPlan], list[tuple[int, str]]]:
    plans, invalid = [], []
    for index, chain in enumerate(ob.fabrik.chains):
        if not chain.enabled:
            continue
        try:
            bones = chain_bones(ob, chain)
            if chain.solver == 'TWO_BONE' and len(solved_bones(chain, bones)) != 2:
                raise ChainError(f"The Two-Bone solver needs exactly 2 bones to place, this chain has "
                                 f"{len(solved_bones(chain, bones))}")
            for name in bones[1:]:
                if not ob.data.bones[name].use_inherit_rotation:
                    raise ChainError(f"Bone '{name}' does not inherit its parent's rotation")
        except ChainError as error:
            invalid.append((index, str(error)))
            continue
        plans.append(ChainPlan(index, bones, bone_depth(ob.data.bones[bones[0]])))
    plans.sort(key=lambda plan: plan.depth)
    return plans, invalid


def bone_depth(bone) -> int:
    """How many ancestors a bone has: parents are solved before their children."""
    depth = 0
    while bone.parent is not None:
        depth, bone = depth + 1, bone.parent
    return depth


def check_references(ob, chain, bones: list[str]) -> None:
    """Target and pole: set, existing, and not moved by the chain itself."""
    check_reference(ob, chain, bones, chain.target, chain.target_bone, "Target", required=True)
    check_reference(ob, chain, bones, chain.pole, chain.pole_bone, "Pole", required=False)


def check_references_once(ob, chain, plan: ChainPlan) -> None:
    """:func:`check_references` once per layout, then only whether the target still exists.

    Everything else it checks changes only through a chain setting, an armature edit, undo or a file
    load, each of which rebuilds the layout; a deleted target or pole object reads as None.
    """
    if chain.target is None:
        raise ChainError("Pick a target object")
    if not plan.references_checked:
        check_references(ob, chain, plan.bones)
        plan.references_checked = True


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
    diagnostics.record(chain, status, message, error, iterations)


def world_position(target, bone_name: str, depsgraph, label: str) -> Vector:
    """World-space position of a target or pole (object, or the head of one of its bones), evaluated.

    The cheap read for every chain, every frame; :func:`world_point` gives the whole matrix.
    """
    ev = target.evaluated_get(depsgraph)
    if target.type == 'ARMATURE' and bone_name:
        point = ev.matrix_world @ ev.pose.bones[bone_name].head
    else:
        point = ev.matrix_world.translation
    x, y, z = point
    if not (abs(x) <= FAR_AWAY and abs(y) <= FAR_AWAY and abs(z) <= FAR_AWAY):  # also false for NaN
        raise ChainError(f"{label} '{target.name}' is at an invalid position (NaN or infinity)")
    return point


def world_point(target, bone_name: str, depsgraph, label: str) -> np.ndarray:
    """World-space 4x4 matrix of a target or pole (object, or the head of one of its bones), evaluated."""
    ev = target.evaluated_get(depsgraph)
    matrix = adapter.matrix_to_np(ev.matrix_world)
    if target.type == 'ARMATURE' and bone_name:
        matrix = matrix @ adapter.matrix_to_np(ev.pose.bones[bone_name].matrix)
    if not np.isfinite(matrix).all() or np.abs(matrix[:3, 3]).max() > FAR_AWAY:
        raise ChainError(f"{label} '{target.name}' is at an invalid position (NaN or infinity)")
    return matrix


def rig_state(ob, depsgraph, rig_cache: cache.RigCache) -> RigState:
    """The armature's world transform this frame; raises for a scale the solve cannot honour.

    mathutils, not numpy, for these 4x4 operations: one call each instead of several. The comparisons
    are written so that NaN fails them.
    """
    world_m = ob.evaluated_get(depsgraph).matrix_world
    axes = world_m.to_scale()
    if not (world_m.to_3x3().determinant() > 0.0 and max(axes) - min(axes) <= SCALE_TOLERANCE * max(axes)
            and math.isfinite(sum(world_m.translation))):
        raise ChainError("The armature object has non-uniform, negative or zero scale; apply its scale")
    return RigState(world_m.inverted(), (axes[0] + axes[1] + axes[2]) / 3.0, rig_cache.animated_paths)


def base_channels(pose_bone, evaluated_bone, animated: set[tuple[str, int]]) -> tuple[float, ...]:
    """The bone's rotation channels without IK: keyed or driven ones as evaluated, the others as stored.

    Never the previous IK output, so the pose at a frame depends only on that frame's inputs.
    """
    mode = pose_bone.rotation_mode
    path = f'pose.bones["{pose_bone.name}"].{adapter.rotation_path(mode)}'
    stored = stored_channels(pose_bone)
    current = adapter.read_rotation(evaluated_bone)
    return tuple(current[i] if (path, i) in animated else stored[i] for i in range(len(current)))


def base_rotation(ob, ev, rig_cache, i: int) -> Quaternion:
    """Bone ``i``'s rotation without IK as a unit quaternion (see :func:`base_channels`).

    Captures the bone's base pose on first use. Quaternion bones mix the stored rotation with their
    keyed or driven components; other rotation modes are converted from their channels.
    """
    q = rig_cache.static_base.get(i)
    if q is not None:
        return q
    name = rig_cache.names[i]
    if not rig_cache.captured[i]:
        capture_base(ob.pose.bones[name])  # also fills the cache's stored row
    if not rig_cache.quaternion[i]:
        pb = ob.pose.bones[name]
        return adapter.quaternion_from_channels(pb.rotation_mode,
                                                base_channels(pb, ev.pose.bones[name], rig_cache.animated_paths))
    q = Quaternion(rig_cache.stored[i].tolist())
    mask = rig_cache.animated[i]
    if mask.any():
        current = ev.pose.bones[name].rotation_quaternion
        q = Quaternion([current[k] if mask[k] else q[k] for k in range(4)])
        return q.normalized() if q.magnitude > 0.0 else Quaternion()
    q = q.normalized() if q.magnitude > 0.0 else Quaternion()
    rig_cache.static_base[i] = q  # neither keyed nor driven: the same every frame until captured again
    return q


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
    rig_cache = cache.peek(pose_bone.id_data.name)
    if rig_cache is not None and pose_bone.name in rig_cache.index:
        i = rig_cache.index[pose_bone.name]
        rig_cache.stored[i], rig_cache.captured[i] = tuple(q), True
        rig_cache.static_base.pop(i, None)


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


def solve_armatures(obs, depsgraph) -> None:
    """Solve every enabled chain of the armature objects ``obs`` and write their bones' rotations.

    Chains under no other chain's bones come first. Where chains of one length hold many bones across
    all armatures, they share one batched numpy pass (:mod:`.rig_batch`); the others are solved one
    by one in mathutils and floats (:mod:`.rig_small`). Chains below another chain and chains sharing
    bones (trees) follow, parents first, each seeing the poses already written.
    """
    prepared = []
    bones_by_length: dict[int, int] = defaultdict(int)  # chain length -> bones in such standalone chains
    for ob in obs:
        chains = ob.fabrik.chains
        for chain in chains:
            if not chain.enabled:
                set_status(chain, 'NONE')
        rig_cache = cache.get(ob)
        try:
            state = rig_state(ob, depsgraph, rig_cache)
        except ChainError as error:
            for chain in chains:
                if chain.enabled:
                    set_status(chain, 'INVALID', str(error))
            continue
        plan = layout(ob, rig_cache)
        for p in plan.free:
            bones_by_length[len(p.idx)] += len(p.idx)
        prepared.append((ob, chains, ob.evaluated_get(depsgraph), state, rig_cache, plan))
    batched, later = [], []
    for ob, chains, ev, state, rig_cache, plan in prepared:
        few: list[tuple] = []
        many: list[tuple] = []
        for p in plan.free:
            (few if bones_by_length[len(p.idx)] <= rig_small.SMALL_BONES else many).append((chains[p.index], p))
        rest = plan.rest
        if few:
            rig_small.solve(ob, ev, few, state, depsgraph, rig_cache, keep_matrices=bool(rest))
        if many:
            batched.append((ob, ev, many, state, rig_cache, bool(rest)))
        if rest:
            later.append((ob, chains, ev, state, rig_cache, rest))
    rig_batch.solve(batched, depsgraph)
    for ob, chains, ev, state, rig_cache, rest in later:
        for group in rest:
            try:
                if len(group) == 1:
                    rig_small.solve(ob, ev, [(chains[group[0].index], group[0])], state, depsgraph, rig_cache,
                                    keep_matrices=True)
                else:
                    rig_tree.solve_group(ob, ev, [chains[p.index] for p in group], group, state, depsgraph)
            except ChainError as error:
                for plan in group:
                    set_status(chains[plan.index], 'INVALID', str(error))


def _below(ob, plan: ChainPlan, moved: set[str]) -> bool:
    """Whether any ancestor of the chain's root is moved by another chain."""
    bone = ob.data.bones[plan.bones[0]].parent
    while bone is not None:
        if bone.name in moved:
            return True
        bone = bone.parent
    return False


# The solving modules build on this one (plans, states, checks): imported last, once, rather than inside the
# per-frame functions.
from . import rig_batch, rig_small, rig_tree  # noqa: E402
