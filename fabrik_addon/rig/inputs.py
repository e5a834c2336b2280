"""What a frame's solve reads: each armature's state (:class:`ArmatureFrame`) and each chain's inputs
(:class:`ChainInputs`, gathered by :func:`chain_inputs` for the few-chain and the batched path alike)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mathutils import Matrix, Vector

from .. import adapter, cache
from ..solver import ChainLimits, ConeLimit, HingeLimit, orient
from ..solver.rotations import matrices_from_quaternions, matrix_from_two_vectors
from .plan import ChainError, ChainPlan, ChainSettings, Layout, _hangs, layout, settings_of

# Farther than this counts as "at infinity": Blender stores an infinite location as FLT_MAX (3.4e38),
# whose square overflows.
FAR_AWAY = 1e15
# Relative tolerance for a uniform, positive armature scale.
SCALE_TOLERANCE = 1e-5
ZERO_LENGTH = 1e-9
# Session uids of targets and poles whose bone was not found in this solve (:class:`MissingBone`).
missed: list[int] = []


class _once:
    """A property worked out on first use and kept in the instance (``functools.cached_property``
    without its lock, which cost ~2.5 us a read on Python 3.11 in a handler that reads it per chain)."""

    def __init__(self, function) -> None:
        self.function = function
        self.name = function.__name__
        self.__doc__ = function.__doc__

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        value = instance.__dict__[self.name] = self.function(instance)
        return value


@dataclass(eq=False)
class ArmatureFrame:
    """One armature at this frame: what all its chains share."""

    ob: Any  # the armature object
    ev: Any  # its evaluated object
    chains: Any  # ``ob.fabrik.chains``, or the same chains as a list
    cache: cache.RigCache
    layout: Layout
    depsgraph: Any
    inv_world_m: Matrix  # armature object's world matrix inverted (mathutils: cheap single-point transforms)
    scale: float
    bones: Any  # ``ob.pose.bones``
    ev_bones: Any  # ``ev.pose.bones``
    # Chains hang below others: every write records its matrices in ``new_matrices`` for them.
    keep_matrices: bool = False
    # Armature-space pose matrices written this frame, for chains hanging below them.
    new_matrices: dict[str, Matrix | np.ndarray] = field(default_factory=dict)

    @_once
    def inv_world(self) -> np.ndarray:
        """``inv_world_m`` as numpy, made on first use (the few-chain path seldom needs it)."""
        return np.array(self.inv_world_m)

    @_once
    def layer(self) -> tuple[bool, Any]:
        """``(render, view_layer)`` of the depsgraph, read once per armature and frame for every chain's
        :func:`_in_view_layer` (neither changes while the handler runs)."""
        return self.depsgraph.mode == 'RENDER', self.depsgraph.view_layer

    @_once
    def kept(self) -> frozenset[str]:
        """The bones whose new pose matrices chains hanging below them read (:func:`parent_matrix`): the
        parents of the dependent chains' roots and their ancestors. Within a chain they are the first bones
        (each one's parent is kept too). The few-chain path records only these: on the Rigify metarig the
        legs, the right arm and the finger hold nothing another chain reads, 9 of its 14 bones, each record
        a matrix product and a numpy copy (~5% of the handler). Worked out once per layout."""
        memo = self.cache.kept
        if memo and memo[0] is self.layout:
            return memo[1]
        names, parents = self.cache.names, self.cache.parents
        out: set[str] = set()
        for group in self.layout.dependent:
            for plan in group:
                i = plan.parent
                while i >= 0 and names[i] not in out:
                    out.add(names[i])
                    i = int(parents[i])
        kept = frozenset(out)
        self.cache.kept = (self.layout, kept)
        return kept

    @_once
    def hangs(self) -> bool:
        """Whether the armature object has a parent or constraints (:func:`.plan.check_references_once`
        asks per chain; it cannot change while the handler runs)."""
        return _hangs(self.ob)


def armature_frame(ob, depsgraph, rig_cache: cache.RigCache, chains=None, bones=None, ev=None) -> ArmatureFrame:
    """The armature's state this frame; raises for a scale the solve cannot honour. ``chains``: its
    chains as a list, when already listed this frame (indexing a list is cheaper than the collection);
    ``bones``: its ``pose.bones``, when already read; ``ev``: its evaluated object, likewise.

    mathutils, not numpy, for these 4x4 operations: one call each instead of several. The comparisons
    are written so that NaN fails them.
    """
    if ev is None:
        ev = ob.evaluated_get(depsgraph)
    world_m = ev.matrix_world
    axes = world_m.to_scale()
    if not (world_m.to_3x3().determinant() > 0.0 and max(axes) - min(axes) <= SCALE_TOLERANCE * max(axes)
            and math.isfinite(sum(world_m.translation))):
        if not math.isfinite(sum(world_m.translation)) and math.isfinite(sum(axes)):
            raise ChainError("The armature object is at an invalid position (NaN or infinity); fix its transform "
                             "or whatever drives it")
        raise ChainError("The armature object has non-uniform, negative or zero scale; apply its scale")
    if chains is None:
        chains = ob.fabrik.chains
    plan = layout(ob, rig_cache, chains)
    return ArmatureFrame(ob, ev, chains, rig_cache, plan, depsgraph,
                         world_m.inverted(), (axes[0] + axes[1] + axes[2]) / 3.0,
                         ob.pose.bones if bones is None else bones, ev.pose.bones,
                         bool(plan.dependent))


@dataclass(eq=False, slots=True)
class ChainInputs:
    """One chain's solve inputs this frame, in armature space."""

    chain: Any  # its settings (solver, influence...)
    plan: ChainPlan
    placed: int  # bones whose directions the solver places (the tip may take the target's rotation)
    start: Any  # (placed + 1) joints of the pose without IK: list of Vectors or (placed + 1, 3) array
    target: Vector
    pole: Vector | None
    target_matrix: np.ndarray | None  # the target's 4x4 matrix, when the tip takes its orientation
    limits: ChainLimits | None
    tolerance: float
    iterations: int
    influence: float  # the chain's influence, read once
    settings: ChainSettings  # the chain's settings this frame (.plan.settings_of)


@dataclass(eq=False, slots=True)
class ChainResult:
    joints: Any  # solved joints, as ``ChainInputs.start``
    error: float  # tip-to-target distance, armature space
    iterations: int
    reached: bool
    converged: bool = True  # False: ran out of iterations while still closing in
    frames: Any = None  # with limits: the solved bone frames (N, 3, 3) the limits were measured in
    points: Any = None  # the solved joints as the solver gave them (float64), where ``joints`` rounds them


def chain_inputs(arm: ArmatureFrame, chain, plan: ChainPlan, joints, pre, parent, short, scale_flags=None,
                 references: tuple | None = None, settings: ChainSettings | None = None) -> ChainInputs:
    """Gather one chain's inputs; raises :class:`ChainError` for what cannot be solved.

    ``joints`` are the pose without IK's heads and the tip's tail, ``pre`` its armature-space bone
    matrices and ``parent`` the root's parent matrix (mathutils or numpy); ``short`` flags each
    segment too short to turn, or is None when none is; ``scale_flags`` see :func:`check_pose_scale`.
    ``references``: ``(target, pole, target_hangs, pole_hangs)`` when already read this frame
    (:func:`.plan.check_references_once`); ``settings``: the chain's (:func:`.plan.settings_of`), when at hand.
    """
    if settings is None:
        settings = settings_of(chain, plan)
    n = len(plan.cache_rows)
    placed = plan.placed
    if scale_flags is None or scale_flags or plan.scale_free:  # () from the batched path: nothing to check
        check_pose_scale(plan, pre, parent, scale_flags, uniform=not settings.use_stretch)
    if short is not None:
        for k in range(placed):
            if short[k]:
                raise ChainError(f"Bone '{plan.bones[k]}' has zero length")
    depsgraph = arm.depsgraph
    layer = arm.layer
    if references is None:
        target_ob, pole_ob, target_hangs, pole_hangs = chain.target, chain.pole, None, None
    else:
        target_ob, pole_ob, target_hangs, pole_hangs = references
    target = arm.inv_world_m @ world_position(target_ob, settings.target_bone, depsgraph, "Target", layer,
                                              target_hangs)
    pole = None
    if pole_ob is not None:
        pole = arm.inv_world_m @ world_position(pole_ob, settings.pole_bone, depsgraph, "Pole", layer, pole_hangs)
    target_matrix = None
    if placed < n:  # the tip takes the target's orientation
        target_matrix = arm.inv_world @ world_matrix(target_ob, settings.target_bone, depsgraph, "Target", layer,
                                                     target_hangs)
    start = joints[:placed + 1]
    influence = settings.influence  # blends the influence-1 pose with the pose without IK (.influence)
    limits = None
    if plan.limited:
        limits = limits_for(arm.ob, plan.bones[:placed], plan.bones, [np.asarray(m) for m in pre], np.asarray(start),
                            np.asarray(parent))
    return ChainInputs(chain, plan, placed, start, target, pole, target_matrix, limits,
                       settings.tolerance * plan.length, settings.iterations, influence, settings)


# Relative spread of a bone's axis lengths (armature space) still counted as uniform scale.
POSE_SCALE_TOLERANCE = 1e-4


def pose_scale_flags(pre: np.ndarray, uniform) -> np.ndarray:
    """(..., n) bools over armature-space bone matrices (..., n, 4, 4): negative scale, or non-uniform
    scale where ``uniform`` (bool, or (...,) bools per chain) asks for uniform scale."""
    m3 = pre[..., :3, :3]
    axes = np.sqrt(np.einsum("...ij,...ij->...j", m3, m3))
    top = axes.max(axis=-1)
    uneven = top - axes.min(axis=-1) > POSE_SCALE_TOLERANCE * top
    return (_determinants(m3, axes) <= 0.0) | (uneven & np.asarray(uniform)[..., None])


def _determinants(m3: np.ndarray, axes: np.ndarray) -> np.ndarray:
    """Determinants of 3x3 matrices with the signs of ``np.linalg.det``'s (all the flags need), at a
    fraction of its cost: by cofactors, and by LAPACK wherever that value is not finite or lies within
    1e-12 of the product of the column lengths from 0, far above either method's rounding error."""
    a, b, c = m3[..., 0, 0], m3[..., 0, 1], m3[..., 0, 2]
    d, e, f = m3[..., 1, 0], m3[..., 1, 1], m3[..., 1, 2]
    g, h, i = m3[..., 2, 0], m3[..., 2, 1], m3[..., 2, 2]
    with np.errstate(invalid="ignore", over="ignore"):  # non-finite input: decided by LAPACK below
        det = a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)
        doubtful = ~(np.abs(det) > 1e-12 * axes.prod(axis=-1))  # also where NaN or infinite
    if doubtful.any():
        det = np.where(doubtful, np.linalg.det(m3), det)
    return det


def check_pose_scale(plan: ChainPlan, pre, parent, flags=None, uniform: bool = True) -> None:
    """The chain's bones must have positive scale (own and inherited), uniform unless the chain stretches
    (whose writes keep non-uniform scale exact), and a bone that ignores its parent's scale may only sit
    under unit scale: else the pose FABRIK IK writes is not the one Blender shows.

    ``pre``: the bones' armature-space matrices (mathutils, or numpy with ``flags`` from
    :func:`pose_scale_flags` computed for many chains at once)."""
    if flags is None:
        flags = []
        for matrix in pre:
            if isinstance(matrix, Matrix):
                x, y, z = matrix.to_scale()
                top = max(x, y, z)
                flags.append(matrix.is_negative or (uniform and top - min(x, y, z) > POSE_SCALE_TOLERANCE * top))
            else:
                flags.append(bool(pose_scale_flags(np.asarray(matrix, dtype=np.float64), uniform)))
    for k, bad in enumerate(flags):
        if bad:
            raise ChainError(f"Bone '{plan.bones[k]}' has a negative or non-uniform scale (its own or inherited); "
                             "FABRIK IK turns bones of uniform positive scale only (non-uniform: with Stretch)")
    for k in plan.scale_free:
        above = pre[k - 1] if k else parent
        axes = above.to_scale() if isinstance(above, Matrix) else np.linalg.norm(np.asarray(above)[:3, :3], axis=0)
        if max(abs(a - 1.0) for a in axes) > POSE_SCALE_TOLERANCE:
            raise ChainError(f"Bone '{plan.bones[k]}' does not inherit its parent's scale (Inherit Scale: None) "
                             "while the parent is scaled; set it to Full")


def _evaluated(target, depsgraph, label: str, layer: tuple[bool, Any] | None = None, hangs: bool | None = None):
    """The target as this frame evaluates it; refused when the view layer does not evaluate it and it moves.
    ``layer``: :attr:`ArmatureFrame.layer`, when at hand; ``hangs``: :func:`.plan._hangs` of the target,
    when already known."""
    ev = target.evaluated_get(depsgraph)
    if ((_hangs(target) if hangs is None else hangs) or target.animation_data is not None) \
            and not _in_view_layer(target, ev, depsgraph, layer):
        raise ChainError(f"{label} '{target.name}' is not evaluated in this view layer (hidden, disabled, excluded "
                         "or in another scene), so its animation cannot be followed; show it in this view layer")
    return ev


def _in_view_layer(target, ev, depsgraph, layer: tuple[bool, Any] | None = None) -> bool:
    """Whether the depsgraph evaluates ``target`` as a member of its view layer. An object our chains only
    point to may have an evaluated copy that nothing animates; Blender's own IK adds a relation, which
    an add-on cannot. ``layer``: the depsgraph's ``(mode == 'RENDER', view_layer)``, if already read."""
    if not ev.is_evaluated:
        return False
    if layer is None:
        layer = depsgraph.mode == 'RENDER', depsgraph.view_layer
    render, view_layer = layer
    if render:
        return True
    if target.visible_get(view_layer=view_layer):  # the common case, without a lookup by name
        return True
    # Invisible: evaluated only when merely hidden (the eye), not when excluded, in another scene or
    # disabled in viewports (its own or its collection's switch).
    return view_layer.objects.get(target.name) == target and target.hide_get(view_layer=view_layer)


class MissingBone(ChainError):
    """A target's or pole's bone is not found: perhaps renamed (:func:`.solve.solve_armatures` then asks
    :func:`.renames.follow` and solves again)."""


def _pose_bone(target, ev, bone_name: str, label: str):
    pb = ev.pose.bones.get(bone_name)
    if pb is None:
        missed.append(target.session_uid)
        raise MissingBone(f"{label} bone '{bone_name}' not found in '{target.data.name}'")
    return pb


def rest_side(ob, plan: ChainPlan, placed: int) -> tuple[float, float, float]:
    """The side the chain's placed bones bend to at rest, in the root bone's rest axes (see
    :func:`.solver.orient.rest_side`); computed once per layout."""
    side = plan.sides.get(placed)
    if side is None:
        data = ob.data.bones
        bones = plan.bones
        end = data[bones[placed]].head_local if placed < len(bones) else data[bones[placed - 1]].tail_local
        rest = np.array([np.array(data[name].head_local) for name in bones[:placed]] + [np.array(end)])
        local = orient.rest_side(rest, unit_columns(adapter.matrix_to_np(data[bones[0]].matrix_local)))
        side = plan.sides[placed] = (float(local[0]), float(local[1]), float(local[2]))
    return side


def world_position(target, bone_name: str, depsgraph, label: str, layer: tuple[bool, Any] | None = None,
                   hangs: bool | None = None) -> Vector:
    """World-space position of a target or pole (object, or the head of one of its bones), evaluated.

    The cheap read for every chain, every frame; :func:`world_matrix` gives the whole matrix. ``hangs``:
    see :func:`_evaluated`.
    """
    ev = _evaluated(target, depsgraph, label, layer, hangs)
    if bone_name and target.type == 'ARMATURE':  # (the name at hand first: the type is another read)
        point = ev.matrix_world @ _pose_bone(target, ev, bone_name, label).head
    else:
        point = ev.matrix_world.translation
    x, y, z = point
    if not (abs(x) <= FAR_AWAY and abs(y) <= FAR_AWAY and abs(z) <= FAR_AWAY):  # also false for NaN
        raise ChainError(f"{label} '{target.name}' is at an invalid position (NaN or infinity)")
    return point


def world_matrix(target, bone_name: str, depsgraph, label: str, layer: tuple[bool, Any] | None = None,
                 hangs: bool | None = None) -> np.ndarray:
    """World-space 4x4 matrix of a target or pole (object, or the head of one of its bones), evaluated."""
    ev = _evaluated(target, depsgraph, label, layer, hangs)
    matrix = adapter.matrix_to_np(ev.matrix_world)
    if bone_name and target.type == 'ARMATURE':
        matrix = matrix @ adapter.matrix_to_np(_pose_bone(target, ev, bone_name, label).matrix)
    if not np.isfinite(matrix).all() or np.abs(matrix[:3, 3]).max() > FAR_AWAY:
        raise ChainError(f"{label} '{target.name}' is at an invalid position (NaN or infinity)")
    return matrix


def parent_matrix(arm: ArmatureFrame, bone) -> np.ndarray:
    """Armature-space pose matrix of ``bone``'s parent this frame (identity for a root bone), as numpy.

    A parent already moved by another chain this frame is taken from that solve; a parent below
    such a bone is recomputed from it; any other is taken from the evaluated pose. The walk goes by
    the cache's parent indices and rest matrices (reading them from the bones, inverting a rest matrix
    each time, cost 0.35 of the metarig's 0.49 s over 60 frames).
    """
    rig_cache = arm.cache
    return np.array(pose_matrix(arm, int(rig_cache.parents[rig_cache.index[bone.name]])))


def pose_matrix(arm: ArmatureFrame, i: int) -> Matrix:
    """Armature-space pose matrix of cache bone ``i`` this frame (identity for -1), as :func:`parent_matrix`
    gives it, in mathutils: for callers that hold the parent's cache index (:attr:`.plan.ChainPlan.parent`) and
    so need not read the bone and its name (4 RNA reads a hanging chain a frame).

    mathutils, not numpy: a walk is a few 4x4 products on one bone each, where numpy's per-call overhead
    and the conversions to and from it cost more than the products (the Rigify metarig's arms and finger
    took 45 us a frame in numpy). ``new_matrices`` holds mathutils matrices from the few-chain path and
    numpy ones from the batched path and trees: either is read. The result is a new matrix (callers may keep it).
    """
    if i < 0:
        return Matrix.Identity(4)
    rig_cache, moved = arm.cache, arm.new_matrices
    names, parents = rig_cache.names, rig_cache.parents
    name = names[i]
    found = moved.get(name)
    if found is not None:
        return found.copy() if isinstance(found, Matrix) else Matrix(found.tolist())
    walk = parents[i]
    while walk >= 0 and names[walk] not in moved:
        walk = parents[walk]
    if walk < 0:
        return arm.ev_bones[name].matrix.copy()
    return pose_matrix(arm, int(parents[i])) @ rig_cache.rel_matrices[i] @ arm.ev_bones[name].matrix_basis


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


def basis_location(rig_cache: cache.RigCache, i: int, pose_bone) -> tuple[float, float, float]:
    """Bone ``i``'s location as Blender composes it into the bone's basis: its location channels, or none for a
    connected bone, whose channels Blender never applies (``BKE_pchan_to_mat4``; a connected chain bone keyed with a
    location was solved 0.11 off its place and reported reached). ``pose_bone``: its (evaluated) pose bone."""
    return pose_bone.location[:] if rig_cache.located[i] else (0.0, 0.0, 0.0)


def basis_matrices(q: np.ndarray, location: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Basis matrices (..., 4, 4) = translation @ rotation @ scale, as Blender composes them."""
    m = np.zeros(q.shape[:-1] + (4, 4))
    m[..., :3, :3] = matrices_from_quaternions(q) * scale[..., None, :]
    m[..., :3, 3] = location
    m[..., 3, 3] = 1.0
    return m


def forward_kinematics(parent, rel, q, location, scale) -> np.ndarray:
    """Armature-space pose matrices (C, n, 4, 4) of chains from their parents' and their basis matrices
    (the batched path's start poses and written matrices, and the influence blend of both paths)."""
    local = rel @ basis_matrices(q, location, scale)
    out = np.empty_like(local)
    m = parent
    for k in range(local.shape[1]):
        m = m @ local[:, k]
        out[:, k] = m
    return out
