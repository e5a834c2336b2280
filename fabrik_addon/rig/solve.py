"""The frame's solve: every armature's chains, each group by the strategy that suits it.

Chains under no other chain's bones come first. Where chains of one length hold many bones across
all armatures, they share one batched numpy pass (:mod:`.batch`); the others are solved one by one
in mathutils and floats (:mod:`.small`). Chains below another chain and chains sharing bones (trees,
:mod:`.tree`) follow, parents first, each seeing the poses already written.
"""

from __future__ import annotations

from collections import defaultdict

from .. import cache
from . import batch, small, tree
from .inputs import ArmatureFrame, armature_frame
from .plan import ChainError, set_status

# Standalone chains of one length holding up to this many bones across all armatures are solved by
# :mod:`.small`; above it, numpy across chains (:mod:`.batch`) is cheaper. Measured per frame, handler
# alone, Blender 5.0.1, one armature: 16 x 3 bones 1.0 ms few-chain against 1.5-1.7 batched, 1 x 50
# 1.0 against 1.6-1.8, 32 x 3 1.9-2.1 against 2.0-2.2 (even), 100 x 3 5.9 against 3.5.
SMALL_BONES = 96


def solve_armatures(obs, depsgraph) -> None:
    """Solve every enabled chain of the armature objects ``obs`` and write their bones' rotations."""
    frames: list[ArmatureFrame] = []
    bones_by_length: dict[int, int] = defaultdict(int)  # chain length -> bones in such standalone chains
    for ob in obs:
        chains = ob.fabrik.chains
        for chain in chains:
            if not chain.enabled:
                set_status(chain, 'NONE')
        try:
            arm = armature_frame(ob, depsgraph, cache.get(ob))
        except ChainError as error:
            for chain in chains:
                if chain.enabled:
                    set_status(chain, 'INVALID', str(error))
            continue
        for p in arm.layout.free:
            bones_by_length[len(p.idx)] += len(p.idx)
        frames.append(arm)
    batched = []
    for arm in frames:
        few: list[tuple] = []
        many: list[tuple] = []
        for p in arm.layout.free:
            (few if bones_by_length[len(p.idx)] <= SMALL_BONES else many).append((arm.chains[p.index], p))
        if few:
            small.solve(arm, few)
        if many:
            batched.append((arm, many))
    batch.solve(batched)
    for arm in frames:
        for group in arm.layout.dependent:
            try:
                if len(group) == 1:
                    small.solve(arm, [(arm.chains[group[0].index], group[0])])
                else:
                    tree.solve_group(arm, group)
            except ChainError as error:
                for plan in group:
                    set_status(arm.chains[plan.index], 'INVALID', str(error))
