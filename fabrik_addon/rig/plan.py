"""Which chains an armature solves and how: validated bone lists, grouping into trees, reference checks.

Everything here changes only with chain settings, the armature's bones, undo or a file load, so the
result (:class:`Layout`) is cached with the armature's rest data until one of those happens.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import cache, diagnostics


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
class Layout:
    """How an armature's chains are solved: cached until chain settings or bones change."""

    plans: list[ChainPlan]
    invalid: list[tuple[int, str]]
    free: list[ChainPlan]  # standalone chains under no other chain: one batched pass
    dependent: list[list[ChainPlan]]  # chains below other chains, and trees: parents first
    labels: dict[int, str]  # chain index -> names of the chains it is solved together with


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
        free, dependent, labels = [], [], {}
        for group in group_plans(plans):
            for plan in group:
                labels[plan.index] = ", ".join(chains[p.index].name for p in group if p is not plan)
            if len(group) == 1 and not _below(ob, group[0], moved):
                free.append(group[0])
            else:
                dependent.append(group)
        rig_cache.plans = {key: Layout(plans, invalid, free, dependent, labels)}
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
    return sorted((sorted(g, key=lambda p: p.index) for g in groups.values()),
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
