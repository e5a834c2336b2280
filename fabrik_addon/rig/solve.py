"""The frame's solve: every armature's chains, each group by the strategy that suits it.

Chains under no other chain's bones come first. Where chains of one length hold many bones across
all armatures, they share one batched numpy pass (:mod:`.batch`); the others are solved one by one
in mathutils and floats (:mod:`.small`). Chains below another chain and chains sharing bones (trees,
:mod:`.tree`) follow, parents first, each seeing the poses already written.
"""

from __future__ import annotations

from collections import defaultdict

from .. import cache, diagnostics
from . import batch, small, tree
from .base_pose import release
from .inputs import ArmatureFrame, armature_frame
from .plan import ChainError, set_status

# Standalone chains of one length holding up to this many bones across all armatures are solved by
# :mod:`.small`; above it, numpy across chains (:mod:`.batch`) is cheaper. Measured per frame, handler
# alone, Blender 5.0.1, one armature: 16 x 3 bones 1.0 ms few-chain against 1.5-1.7 batched, 1 x 50
# 1.0 against 1.6-1.8, 32 x 3 1.9-2.1 against 2.0-2.2 (even), 100 x 3 5.9 against 3.5.
SMALL_BONES = 96


def solve_armatures(obs, depsgraph, retry: bool = True, chains: list | None = None) -> None:
    """Solve every enabled chain of the armature objects ``obs`` and write their bones' rotations.

    Each armature, each strategy call and each tree is isolated: whatever goes wrong marks only the
    chains concerned INVALID with a message. An armature whose bones were renamed or replaced behind
    its cache (a lookup fails) is rebuilt and solved once more on its own. ``chains``: each armature's
    ``fabrik.chains``, when already read.
    """
    frames: list[ArmatureFrame] = []
    stale: list = []
    bones_by_length: dict[int, int] = defaultdict(int)  # chain length -> bones in such standalone chains
    for k, ob in enumerate(obs):
        # indexed per chain below: a list is cheaper than the collection
        listed = list(ob.fabrik.chains if chains is None else chains[k])
        try:
            for chain in listed:
                if not chain.enabled:
                    if diagnostics.of(chain).status in POSED:  # switched off by animation: no update ran
                        release(ob, [chain], ob.evaluated_get(depsgraph))
                    set_status(chain, 'NONE')
            bones = ob.pose.bones
            arm = armature_frame(ob, depsgraph, cache.get(ob, bones, count=False), listed, bones)
        except ChainError as error:
            _mark(listed, str(error))
            continue
        except Exception as error:  # noqa: BLE001 - one armature's failure never stops the others
            _failed(ob, None, error, stale if retry else None)
            continue
        for p in arm.layout.free:
            bones_by_length[len(p.idx)] += len(p.idx)
        frames.append(arm)
    batched = []
    for arm in frames:
        few: list[tuple] = []
        many: list[tuple] = []
        scaled = arm.cache.scaled
        for p in arm.layout.free:
            chain = arm.chains[p.index]
            # Stretch (and a stretch just switched off) writes scale, which only the few-chain path does.
            # (the cheap test first: a chain bound for the few-chain path needs no other read)
            few_chain = bones_by_length[len(p.idx)] <= SMALL_BONES or chain.use_stretch \
                or (scaled and not scaled.isdisjoint(p.idx))
            (few if few_chain else many).append((chain, p))
        if few:
            _isolated(arm, [c for c, _ in few], stale if retry else None, small.solve, arm, few)
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
            chains = [arm.chains[plan.index] for plan in group]
            if len(group) == 1:
                _isolated(arm, chains, stale if retry else None, small.solve, arm, [(chains[0], group[0])],
                          False)
            else:
                _isolated(arm, chains, stale if retry else None, tree.solve_group, arm, group)
    for ob in stale:
        cache.drop(ob)
        solve_armatures([ob], depsgraph, retry=False)


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


def settle(ob, reason: str, depsgraph) -> None:
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
