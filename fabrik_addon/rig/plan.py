"""Which chains an armature solves and how: validated bone lists, grouping into trees, reference checks.

Everything here changes only with chain settings, the armature's bones, undo or a file load, so the
result (:class:`Layout`) is cached with the armature's rest data until one of those happens.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import adapter, cache, diagnostics
from ..solver.fabrik import check_settings
from ..solver.switches import BULK_KEY
from . import renames


class ChainError(Exception):
    """A chain that cannot be solved; the message is shown in the panel."""


@dataclass
class ChainPlan:
    """A validated chain, with its bones ordered root to tip."""

    chain_index: int  # position in the armature's fabrik.chains
    bones: list[str]
    depth: int  # ancestors above the chain's root bone: parents are solved first
    # Filled from the armature's cache when the layout is built (both are rebuilt together):
    cache_rows: list[int] = field(default_factory=list)  # the bones' rows in the armature's cache (cache.RigCache)
    parent: int = -1  # cache index of the root bone's parent, -1 for none
    limited: bool = False  # a bone has a joint limit (limits_for tells which placed ones do, each frame)
    length: float = 0.0  # the bones' rest lengths summed (armature space): the tolerance is a fraction of it
    references_checked: bool = False  # target and pole passed check_references under these settings
    # Positions in ``bones`` of bones that ignore their parent's scale: solved only while it is 1.
    scale_free: list[int] = field(default_factory=list)
    # Side the rest chain bends to, in its root bone's rest axes, by number of placed bones (rest data).
    sides: dict[int, tuple[float, float, float]] = field(default_factory=dict)
    # The few-chain path's last pose without IK, with the exact inputs it was made from (.small._start_pose).
    start_pose: tuple | None = None
    # No key or driver moves or scales the chain's bones (rest data and the cache's animated paths, so valid while
    # the plan is): their location and scale change only by an edit (.small._start_pose); None until known.
    fixed_channels: bool | None = None
    # Settings in the layout's key (:func:`layout`: any change rebuilds the plan), so valid while the plan is:
    match_rotation: bool = False  # the tip takes the target's rotation (match_target_rotation)
    two_bone: bool = False  # solver == 'TWO_BONE'
    # Where no key or driver animates a chain setting (:func:`layout`), the solve's settings are read at the
    # plan's first solve and kept while the plan is (:func:`settings_of`); elsewhere read every frame.
    keep_settings: bool = False
    settings: ChainSettings | None = None

    @property
    def placed(self) -> int:
        """How many of the chain's bones the solver places: all, or all but a tip that matches rotation."""
        return len(self.cache_rows) - 1 if self.match_rotation else len(self.cache_rows)


@dataclass(eq=False, slots=True)
class ChainSettings:
    """The settings a chain's solve reads every frame, read in one place (:func:`settings_of`)."""

    target_bone: str
    pole_bone: str
    use_stretch: bool
    softness: float
    max_stretch: float
    influence: float
    tolerance: float
    iterations: int

    @classmethod
    def read(cls, chain) -> ChainSettings:
        tolerance, iterations = chain.tolerance, chain.iterations
        try:  # (a script can set a NaN tolerance, which the float path's solver would not see)
            check_settings(tolerance, iterations, 0.0)
        except ValueError as error:
            raise ChainError(str(error)) from error
        return cls(chain.target_bone, chain.pole_bone, chain.use_stretch, chain.softness, chain.max_stretch,
                   chain.influence, tolerance, iterations)


def settings_of(chain, plan: ChainPlan) -> ChainSettings:
    """The chain's settings this frame: kept on the plan where no key or driver animates a chain setting
    (every other change of one calls an update, which rebuilds the layout), else read now: 8 reads a chain
    a frame, with the layout key's 3 more ~3% of a lone 2-bone arm's frame handler and of the Rigify
    metarig's (callgrind, 344k -> 334k and 2315k -> 2251k instructions a frame). Read at the
    first solve, not when the layout is built: the first :func:`check_references` may rename a bone field
    (a bone renamed since, :mod:`.renames`)."""
    settings = plan.settings
    if settings is None:
        settings = ChainSettings.read(chain)
        if plan.keep_settings:
            plan.settings = settings
    return settings


@dataclass
class Layout:
    """How an armature's chains are solved: cached until chain settings or bones change."""

    plans: list[ChainPlan]
    invalid: list[tuple[int, str]]
    free: list[ChainPlan]  # standalone chains under no other chain: one batched pass
    dependent: list[list[ChainPlan]]  # chains below other chains, and trees: parents first
    labels: dict[int, str]  # chain index -> names of the chains it is solved together with
    moved: dict[str, str] = field(default_factory=dict)  # bone -> chain moving it (its own or an ancestor's)
    batch: dict = field(default_factory=dict)  # the batched path's arrays for these plans (:func:`.batch._blocks`)
    # Bones of the enabled chains (invalid ones included), and of every chain (switched off ones too):
    # bones in the first set at one solve and in neither at the next go back to their pose without IK
    # (.solve.release_dropped; a chain switched off gives its bones back itself, at once).
    driven: frozenset[str] = frozenset()
    listed: frozenset[str] = frozenset()


def chain_bones(ob, chain) -> list[str]:
    """Bone names of ``chain`` from its root to its tip; raises :class:`ChainError` when impossible."""
    if not chain.tip_bone:
        raise ChainError("Pick a tip bone")
    bone = renames.resolve(chain, "tip_bone", ob.data)  # renamed since: the stored name follows
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
    """Validate every enabled chain's bones (marking invalid ones) and order the rest parents first.

    Cached until chain settings change: only the checks that depend on nothing else live here;
    targets and poles are checked at every solve (:func:`check_references`).
    """
    return layout(ob).plans


def layout(ob, rig_cache: cache.RigCache | None = None, chains=None) -> Layout:
    """The armature's chain plans under the current settings (``rig_cache``: its cache, and ``chains``:
    its chains, listed, if at hand)."""
    if rig_cache is None:
        rig_cache = cache.get(ob)
    if chains is None:
        chains = ob.fabrik.chains
    # Every setting the layout reads, per chain in order: a script may reorder or swap chains (move,
    # remove + add) and animation may switch them, neither of which calls an update. Where no key or
    # driver animates a chain setting, any change of one calls an update (which bumps the generation):
    # the names and tip bones then tell a reorder or a removal (a move keeps each position's as_pointer).
    animated = rig_cache.settings_animated
    key: tuple
    if not animated:
        key = (cache.generation(), tuple([(chain.name, chain.tip_bone) for chain in chains]))
    elif len(chains) < BULK_KEY:
        key = (cache.generation(), tuple((chain.tip_bone, chain.enabled, chain.chain_length, chain.solver,
                                                 chain.match_target_rotation) for chain in chains))
    else:  # the same settings, the numbers read in bulk (one foreach_get each instead of one read per chain)
        key = (cache.generation(), tuple(chain.tip_bone for chain in chains),
               *(_bulk(ob.fabrik.chains, name, dtype) for name, dtype in _KEYED))
    result: Layout | None = rig_cache.plans.get(key)  # (one lookup: a tuple hashes its items at every lookup)
    if result is None:
        plans, invalid = _plan_chains(ob)
        for plan in plans:
            plan.cache_rows = [rig_cache.index[name] for name in plan.bones]
            plan.parent = int(rig_cache.parents[plan.cache_rows[0]])
            plan.limited = bool(rig_cache.limited[plan.cache_rows].any())
            plan.length = float(rig_cache.lengths[plan.cache_rows].sum())
            plan.keep_settings = not animated
        moved = {bone for plan in plans for bone in plan.bones}
        free, dependent, labels = [], [], {}
        for group in group_plans(plans):
            for plan in group:
                labels[plan.chain_index] = ", ".join(chains[p.chain_index].name for p in group if p is not plan)
            if len(group) == 1 and not _below(ob, group[0], moved):
                free.append(group[0])
            else:
                dependent.append(group)
        driven, listed = _driven(ob, plans, invalid)
        result = Layout(plans, invalid, free, dependent, labels, _moved(ob, plans), driven=driven, listed=listed)
        rig_cache.plans = {key: result}
        for index, label in labels.items():
            diagnostics.set_group(chains[index], label)
    for index, message in result.invalid:
        set_status(chains[index], 'INVALID', message)
    return result


_KEYED = (("enabled", bool), ("chain_length", np.int32), ("solver", np.int32), ("match_target_rotation", bool))


def _bulk(chains, name: str, dtype) -> bytes:
    """One setting of every chain, read in one ``foreach_get``, as bytes (comparable, hashable)."""
    out = np.empty(len(chains), dtype=dtype)
    chains.foreach_get(name, out)
    return out.tobytes()


def _plan_chains(ob) -> tuple[list[ChainPlan], list[tuple[int, str]]]:
    plans, invalid = [], []
    overriders = _overriders(ob)
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
            check_bones(ob, bones, overriders)
        except ChainError as error:
            invalid.append((index, str(error)))
            continue
        data = ob.data.bones
        scale_free = [k for k, name in enumerate(bones)
                      if data[name].parent is not None and data[name].inherit_scale in ('NONE', 'NONE_LEGACY')]
        plans.append(ChainPlan(index, bones, bone_depth(data[bones[0]]), scale_free=scale_free,
                               match_rotation=chain.match_target_rotation, two_bone=chain.solver == 'TWO_BONE'))
    plans.sort(key=lambda plan: plan.depth)
    return plans, invalid


def _driven(ob, plans: list[ChainPlan], invalid: list[tuple[int, str]]) -> tuple[frozenset, frozenset]:
    """:attr:`Layout.driven` and :attr:`Layout.listed`: bones of the enabled chains (valid, and invalid
    ones whose bones can still be listed), and those with the switched off chains' bones."""
    driven = {name for plan in plans for name in plan.bones}
    chains = ob.fabrik.chains
    for index, _ in invalid:
        try:
            driven.update(chain_bones(ob, chains[index]))
        except ChainError:
            continue
    listed = set(driven)
    for chain in chains:
        if not chain.enabled:
            try:
                listed.update(chain_bones(ob, chain))
            except ChainError:
                continue
    return frozenset(driven), frozenset(listed)


def _overriders(ob) -> dict[str, str]:
    """Bones whose evaluated pose is not their channels: bone -> why (constraints, IK, drivers)."""
    found: dict[str, str] = {}
    for pb in ob.pose.bones:
        for constraint in pb.constraints:
            if constraint.mute or constraint.influence <= 0.0:
                continue
            found.setdefault(pb.name, f"Bone '{pb.name}' has constraint '{constraint.name}', whose effect FABRIK IK "
                                      "cannot see; mute it or leave the bone out of the chain")
            if constraint.type in ('IK', 'SPLINE_IK'):  # also moves the bones above it
                count = constraint.chain_count
                walk, k = pb.bone.parent, 1
                while walk is not None and (count == 0 or k < count):
                    found.setdefault(walk.name, f"Bone '{walk.name}' is also moved by constraint "
                                                f"'{constraint.name}' of bone '{pb.name}'")
                    walk, k = walk.parent, k + 1
    adt = ob.animation_data
    if adt is not None and adt.drivers:
        paths = {fcurve.data_path for fcurve in adt.drivers if not fcurve.mute}
        for pb in ob.pose.bones:
            if adapter.rotation_data_path(pb.name, pb.rotation_mode) in paths:
                found.setdefault(pb.name, f"Bone '{pb.name}' has a driver on its rotation, which overrides "
                                          "FABRIK IK")
    return found


def check_bones(ob, bones: list[str], overriders: dict[str, str]) -> None:
    """Bones whose evaluated pose FABRIK IK cannot predict: refused with the reason."""
    for name in bones:
        if name in overriders:
            raise ChainError(overriders[name])


def _moved(ob, plans: list[ChainPlan]) -> dict[str, str]:
    """Bones the chains move, with their descendants: bone -> name of the chain moving it."""
    chains = ob.fabrik.chains
    moved: dict[str, str] = {}
    data = ob.data.bones
    for plan in plans:
        label = chains[plan.chain_index].name
        for name in plan.bones:
            moved.setdefault(name, label)
        for child in data[plan.bones[0]].children_recursive:
            moved.setdefault(child.name, label)
    return moved


def group_plans(plans: list[ChainPlan]) -> list[list[ChainPlan]]:
    """Chains that share at least one bone, transitively, form one group; the rest stand alone."""
    root = list(range(len(plans)))  # union-find over plan positions

    def find(k: int) -> int:
        while root[k] != k:
            root[k] = root[root[k]]
            k = root[k]
        return k

    owner: dict[str, int] = {}
    for k, plan in enumerate(plans):
        for bone in plan.bones:
            if bone in owner:
                root[find(k)] = find(owner[bone])
            else:
                owner[bone] = k
    groups: dict[int, list[ChainPlan]] = {}
    for k, plan in enumerate(plans):
        groups.setdefault(find(k), []).append(plan)
    return sorted((sorted(g, key=lambda p: p.chain_index) for g in groups.values()),
                  key=lambda g: min(p.depth for p in g))


def _below(ob, plan: ChainPlan, moved: set[str]) -> bool:
    """Whether any ancestor of the chain's root is moved by another chain."""
    bone = ob.data.bones[plan.bones[0]].parent
    while bone is not None:
        if bone.name in moved:
            return True
        bone = bone.parent
    return False


def bone_depth(bone) -> int:
    """How many ancestors a bone has: parents are solved before their children."""
    depth = 0
    while bone.parent is not None:
        depth, bone = depth + 1, bone.parent
    return depth


def solved_bones(chain, bones: list[str]) -> list[str]:
    """Bones whose directions the solver places: all, or all but the tip when it matches rotation."""
    return bones[:-1] if chain.match_target_rotation else bones


def check_references(ob, chain, bones: list[str]) -> None:
    """Target and pole: set, existing, and not moved by the chain itself."""
    check_reference(ob, chain, bones, chain.target, chain.target_bone, "Target", required=True)
    check_reference(ob, chain, bones, chain.pole, chain.pole_bone, "Pole", required=False)


def follows_fabrik(obj, bone_name: str = "", seen: set | None = None) -> tuple | None:
    """Whether an object (or one of its bones) moves with a bone that FABRIK IK poses: (armature,
    bone, chain name) of the first such bone found through parents and constraint targets, else None."""
    seen = set() if seen is None else seen
    key = (obj.session_uid, bone_name)
    if key in seen or len(seen) > 64:
        return None
    seen.add(key)
    sources: list[tuple] = []
    if obj.type == 'ARMATURE' and bone_name:
        if len(obj.fabrik.chains):
            moved = _moved_of(obj)
            if bone_name in moved:
                return obj, bone_name, moved[bone_name]
        pb = obj.pose.bones.get(bone_name)
        while pb is not None:  # the bone and its ancestors, through their constraints
            sources += _constraint_sources(pb.constraints)
            pb = pb.parent
    parent = obj.parent
    if parent is not None:
        sources.append((parent, obj.parent_bone if obj.parent_type == 'BONE' and parent.type == 'ARMATURE' else ""))
    sources += _constraint_sources(obj.constraints)
    for source, bone in sources:
        found = follows_fabrik(source, bone, seen)
        if found is not None:
            return found
    return None


def _moved_of(obj) -> dict[str, str]:
    """The bones FABRIK IK moves on armature ``obj``: from its current layout when one is cached (this
    runs every frame for parented targets; the layout's key costs a read of every chain's settings)."""
    rig_cache = cache.peek(obj)
    if rig_cache is not None and rig_cache.plans:
        return next(iter(rig_cache.plans.values())).moved
    return layout(obj).moved


# Stands for "not read yet" where None means "no object".
_UNREAD = object()


def _hangs(item) -> bool:
    """Whether an object may follow something else: a parent or constraints (0.3 us to ask)."""
    return item is not None and (item.parent is not None or len(item.constraints) > 0)


def _constraint_sources(constraints) -> list[tuple]:
    out = []
    for constraint in constraints:
        target = getattr(constraint, "target", None)
        if target is None or constraint.mute or constraint.influence <= 0.0:
            continue
        out.append((target, getattr(constraint, "subtarget", "") if target.type == 'ARMATURE' else ""))
    return out


def check_dependencies(ob, chain, plan: ChainPlan) -> None:
    """Refuse a chain whose target, pole or armature moves with bones FABRIK IK poses: its solve would
    read where they were before this frame's write (a cycle when it is its own chain)."""
    own = set(plan.bones)
    for child in ob.data.bones[plan.bones[0]].children_recursive:
        own.add(child.name)
    if ob.parent is not None or len(ob.constraints):
        found = follows_fabrik(ob)
        if found is not None:
            arm, bone, by = found
            raise ChainError(f"The armature follows bone '{bone}' of '{arm.name}', which FABRIK IK chain "
                             f"'{by}' moves; solving rigs in dependency order is not supported")
    for item, bone_name, label in ((chain.target, chain.target_bone, "Target"), (chain.pole, chain.pole_bone, "Pole")):
        if item is None:
            continue
        found = follows_fabrik(item, bone_name if item.type == 'ARMATURE' else "")
        if found is None:
            continue
        arm, bone, by = found
        if arm == ob and bone in own:
            raise ChainError(f"{label} '{item.name}' is moved by this chain (it follows bone '{bone}')")
        raise ChainError(f"{label} '{item.name}' follows bone '{bone}' of '{arm.name}', which FABRIK IK chain "
                         f"'{by}' moves; chains that follow other chains are not supported")


def check_references_once(ob, chain, plan: ChainPlan, ob_hangs: bool | None = None, target=_UNREAD,
                          pole=_UNREAD) -> tuple[bool, bool]:
    """:func:`check_references` once per layout, then only whether the target still exists, and
    :func:`check_dependencies` again each frame for a target, pole or armature that has a parent or
    constraints (parenting changes no chain setting).

    Everything else it checks changes only through a chain setting, an armature edit, undo or a file
    load, each of which rebuilds the layout; a deleted target or pole object reads as None.
    ``ob_hangs``: ``_hangs(ob)`` when already known this frame; ``target``, ``pole``: the chain's, when
    already read. Returns whether the target and the pole hang (:func:`_hangs`), for
    :func:`.inputs.world_position`.
    """
    if target is _UNREAD:
        target = chain.target
    if target is None:
        raise ChainError("Pick a target object")
    if pole is _UNREAD:
        pole = chain.pole
    target_hangs, pole_hangs = _hangs(target), _hangs(pole)
    if not plan.references_checked:
        check_references(ob, chain, plan.bones)
        check_dependencies(ob, chain, plan)
        plan.references_checked = True
    elif target_hangs or pole_hangs or (_hangs(ob) if ob_hangs is None else ob_hangs):
        check_dependencies(ob, chain, plan)  # parented since, or constrained: again
    return target_hangs, pole_hangs


def check_reference(ob, chain, bones: list[str], target, bone_name: str, label: str, required: bool) -> None:
    if target is None:
        if required:
            raise ChainError(f"Pick a {label.lower()} object")
        return
    if target.type == 'ARMATURE' and bone_name:
        bone = renames.resolve(chain, f"{label.lower()}_bone", target.data)  # renamed since: followed
        bone_name = chain.target_bone if label == "Target" else chain.pole_bone
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
