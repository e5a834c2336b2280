"""The frame's solve: every armature's chains, each group by the strategy that suits it.

Chains under no other chain's bones come first. Where chains of one length hold many bones across
all armatures, they share one batched numpy pass (:mod:`.batch`); the others are solved one by one
in mathutils and floats (:mod:`.small`). Chains below another chain and chains sharing bones (trees,
:mod:`.tree`) follow, parents first, each seeing the poses already written.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from .. import adapter, cache, diagnostics
from ..solver.switches import SMALL_BONES  # tests switch paths by setting solve.SMALL_BONES
from . import batch, inputs, renames, small, tree
from .base_pose import release, remember_written, restore_base, restore_scale
from .inputs import ArmatureFrame, armature_frame, basis_location, parent_matrix
from .plan import ChainError, bone_depth, chain_bones, set_status


def solve_armatures(obs, depsgraph, retry: bool = True, chains: Sequence[list] | None = None,
                    evaluated: Sequence | None = None) -> None:
    """Solve every enabled chain of the armature objects ``obs`` and write their bones' rotations.

    Each armature, each strategy call and each tree is isolated: whatever goes wrong marks only the
    chains concerned INVALID with a message. An armature whose bones were renamed or replaced behind
    its cache (a lookup fails) is rebuilt and solved once more on its own. ``chains``: each armature's
    ``fabrik.chains`` as a list, when already read; ``evaluated``: each one's evaluated object, likewise.
    """
    released: set[ArmatureFrame] = set()
    frames: list[ArmatureFrame] = []
    stale: list = []
    if retry:
        inputs.missed.clear()
        diagnostics.invalid.clear()  # (recorded outside a solve: not this solve's)
    bones_by_length: dict[int, int] = defaultdict(int)  # chain length -> bones in such standalone chains
    for k, ob in enumerate(obs):
        # indexed per chain below: a list is cheaper than the collection (the frame handler's are listed)
        listed = list(ob.fabrik.chains) if chains is None else chains[k]
        try:
            bones = ob.pose.bones
            rig_cache = cache.get(ob, bones, count=False)
            plans = rig_cache.plans
            arm = armature_frame(ob, depsgraph, rig_cache, listed, bones, None if evaluated is None else evaluated[k])
            # Chains switched off by animation (no update ran), or moved by a script onto a position whose
            # status is another chain's (statuses go by position): where neither can have happened since
            # the layout was built, switching a chain off called its update, which released it.
            if rig_cache.settings_animated or rig_cache.plans is not plans:
                for chain in listed:
                    if not chain.enabled:
                        if diagnostics.of(chain).status in POSED:
                            release(ob, [chain], ob.evaluated_get(depsgraph))
                        set_status(chain, 'NONE')
        except ChainError as error:
            _mark(listed, str(error))
            continue
        except Exception as error:  # noqa: BLE001 - one armature's failure never stops the others
            _failed(ob, None, error, stale if retry else None)
            continue
        for p in arm.layout.free:
            bones_by_length[len(p.cache_rows)] += len(p.cache_rows)
        frames.append(arm)
        if release_dropped(arm):  # chains below such bones are solved on the few-chain path, which reads
            released.add(arm)  # their new matrices (arm.new_matrices) instead of the evaluated pose
    batched = []
    for arm in frames:
        few: list[tuple] = []
        many: list[tuple] = []
        scaled = arm.cache.scaled
        for p in arm.layout.free:
            chain = arm.chains[p.chain_index]
            # Stretch (and a stretch just switched off) writes scale, which only the few-chain path does.
            # Limited chains are solved one by one whatever the path, by a solve that a float32 rounding of its
            # start can move far (a hinged two-bone arm 0.014 rad): one path for them, so none depends on which
            # path its armature took. (the cheap test first: a chain bound for the few-chain path needs no other read)
            few_chain = bones_by_length[len(p.cache_rows)] <= SMALL_BONES or chain.use_stretch or p.limited \
                or (scaled and not scaled.isdisjoint(p.cache_rows)) or arm in released
            (few if few_chain else many).append((chain, p))
        if few:
            # free: nothing above these chains moved this frame, unless bones a chain dropped were released
            _isolated(arm, [c for c, _ in few], stale if retry else None, small.solve, arm, few, arm not in released)
        if many:
            batched.append((arm, many))
    if batched:
        try:
            batch.solve(batched)
        except Exception:  # noqa: BLE001 - again armature by armature, so the others are solved
            for arm, many in batched:
                _isolated(arm, [c for c, _ in many], stale if retry else None, batch.solve, [(arm, many)])
    for arm in frames:
        if arm.ob in stale:
            continue
        for group in arm.layout.dependent:
            chains = [arm.chains[plan.chain_index] for plan in group]
            if len(group) == 1:
                _isolated(arm, chains, stale if retry else None, small.solve, arm, [(chains[0], group[0])])
            else:
                _isolated(arm, chains, stale if retry else None, tree.solve_group, arm, group)
    for arm in frames:
        remember_written(arm.ob, arm.bones)
    for ob in stale:
        cache.drop(ob)
        solve_armatures([ob], depsgraph, retry=False)
    if inputs.missed and retry:  # a target's or pole's bone not found: renamed, perhaps
        followed = [ob for ob in obs if any([renames.follow(chain) for chain in ob.fabrik.chains])]
        if followed:
            solve_armatures(followed, depsgraph, retry=False)
    if retry and diagnostics.invalid:
        release_invalid(depsgraph)


def release_invalid(depsgraph) -> None:
    """Chains this solve marked INVALID (and still are) leave their bones in their pose without IK, as a chain
    switched off does (:func:`.base_pose.release`), not in the pose the last frame that solved them wrote: the
    pose at a frame then depends on that frame alone, whichever frame was shown before it, and a bake keys the
    pose without IK there (an unkeyed 3-bone chain whose target was keyed to 1e30 on frames 5-9 showed frame 4's
    IK pose on frame 5 after frame 4 and frame 10's after frame 10). Bones already given back are left as they
    are (a pose made by hand while the chain is invalid stays)."""
    rigs: dict[int, tuple] = {}
    invalid = diagnostics.invalid[:]
    diagnostics.invalid.clear()
    for chain in invalid:
        ob = chain.id_data
        if diagnostics.of(chain).status == 'INVALID' and _holds(ob, chain):
            rigs.setdefault(ob.as_pointer(), (ob, {}))[1][chain.as_pointer()] = chain
    for ob, chains in rigs.values():
        try:
            release(ob, list(chains.values()), ob.evaluated_get(depsgraph))
        except Exception as error:  # noqa: BLE001 - bones gone under the chain: nothing to give back
            print(f"FABRIK IK: '{ob.name}': could not restore the pose without IK: {error}")


def _holds(ob, chain) -> bool:
    """Whether a bone of ``chain`` still keeps a stored pose without IK: once given back, a chain that stays invalid
    costs a walk of its own bones a frame, not :func:`.base_pose.release`'s walk of every chain of the rig."""
    try:
        names = chain_bones(ob, chain)
    except ChainError:
        return False
    bones = ob.pose.bones
    return any((pb := bones.get(name)) is not None and (pb.fabrik_base.captured or pb.fabrik_base.scale_captured)
               for name in names)


# Statuses of a chain whose bones FABRIK IK posed at its last solve.
POSED = ('REACHED', 'UNREACHABLE', 'NOT_CONVERGED')


def _isolated(arm: ArmatureFrame, chains: list, stale: list | None, function, *args) -> None:
    """Run one strategy call; a failure marks its chains INVALID (or the armature for a rebuild)."""
    if arm.ob in (stale or ()):
        return
    try:
        function(*args)
    except ChainError as error:
        _mark(chains, str(error))
    except Exception as error:  # noqa: BLE001 - a handler must never stop solving the others
        _failed(arm.ob, chains, error, stale)


def _failed(ob, chains: list | None, error: Exception, stale: list | None) -> None:
    """A lookup by bone name failed: rebuild and retry (``stale``), else mark the chains with the error."""
    if stale is not None and isinstance(error, KeyError | IndexError) and ob not in stale:
        stale.append(ob)
        return
    if isinstance(error, KeyError | IndexError):
        message = "The armature's bones changed (renamed, deleted or data swapped); check the chain's bones"
    else:
        message = f"Could not solve: {type(error).__name__}: {error}"
        print(f"FABRIK IK: '{ob.name}': {message}")
    _mark(ob.fabrik.chains if chains is None else chains, message)


def _mark(chains, message: str) -> None:
    for chain in chains:
        if chain.enabled:
            set_status(chain, 'INVALID', message)


# Per armature (session uid): the bones its enabled chains covered at its last solve (Layout.driven).
# (A chain switched off releases its bones at once; after that the user may pose them: never again.)
_driven: dict[int, frozenset[str]] = {}


def release_dropped(arm: ArmatureFrame) -> bool:
    """Bones no enabled chain covers any more (a chain shortened, retargeted, removed, even by a script or
    keys, which call no update) get their pose without IK back at once, keyed channels as animated.
    Whether any did."""
    driven = arm.layout.driven
    if arm.cache.released_for is driven:  # the same layout as last time: nothing dropped (the usual frame)
        return False
    uid = arm.ob.session_uid
    previous = _driven.get(uid)
    _driven[uid] = arm.cache.released_for = driven
    if previous is driven:
        return False
    if not previous:
        return False
    dropped = previous - arm.layout.listed
    if not dropped:
        return False
    bones, animated, data = arm.bones, arm.cache.animated_paths, arm.ob.data.bones
    found = [data[name] for name in dropped if name in data]  # (renamed or deleted since: nothing to give back)
    for bone in sorted(found, key=bone_depth):  # parents first, each seeing its parent's new matrix
        name = bone.name
        pb, ev = bones[name], arm.ev_bones[name]
        try:
            restore_base(pb, ev, animated)
            restore_scale(pb)
            # The chains solved below it read this, not the evaluated pose, which still holds the old one.
            q = adapter.quaternion_from_channels(pb.rotation_mode, adapter.read_rotation(pb))
            i = arm.cache.index[name]
            location = basis_location(arm.cache, i, ev)
            basis = adapter.basis_matrix(location, q, pb.scale)
            arm.new_matrices[name] = parent_matrix(arm, bone) @ arm.cache.rel[i] @ basis
        except Exception as error:  # noqa: BLE001 - a bone that cannot be given back is left as it is
            print(f"FABRIK IK: '{arm.ob.name}': could not restore the pose without IK of '{name}': {error}")
    return True


def release_all(ob, depsgraph) -> None:
    """An armature whose chains were all removed (by a script: no update ran): the bones they posed get
    their pose without IK back."""
    previous = _driven.pop(ob.session_uid, None)
    if (rig_cache := cache.peek(ob)) is not None:
        rig_cache.released_for = None
    if not previous:
        return
    bones, ev_bones = ob.pose.bones, ob.evaluated_get(depsgraph).pose.bones
    animated = cache.get(ob, bones).animated_paths
    for name in previous:
        pb = bones.get(name)
        if pb is None:
            continue
        try:
            restore_base(pb, ev_bones[name], animated)
            restore_scale(pb)
        except Exception as error:  # noqa: BLE001 - a bone that cannot be given back is left as it is
            print(f"FABRIK IK: '{ob.name}': could not restore the pose without IK of '{name}': {error}")


def leave_unsolved(ob, reason: str, depsgraph) -> None:
    """An armature that is not solved now (switched off, Rest Position): chains report why, and bones
    posed by a chain that was switched off by animation get their pose without IK back."""
    for chain in ob.fabrik.chains:
        diagnostic = diagnostics.of(chain)
        if not ob.fabrik.enabled and diagnostic.status in POSED:
            try:
                release(ob, [chain], ob.evaluated_get(depsgraph))
            except Exception as error:  # noqa: BLE001 - bones gone under the chain: nothing to give back
                print(f"FABRIK IK: '{ob.name}': could not restore the pose without IK: {error}")
        if diagnostic.status != 'NONE' or diagnostic.message != reason:
            set_status(chain, 'NONE', reason)
