"""Every standalone chain of many armatures in one pass.

Bulk reads (``foreach_get``) per armature, then one table of bones for all of them: pose math batched
across every chain of equal length whatever its armature, one :func:`.solver.solve_chains` call per
chain shape and settings (two-bone chains are solved one by one), and one bulk write (``foreach_set``)
of each armature's quaternion channels. A numpy call costs 1-3 us whatever its size, so the number of
calls per frame, not the number of bones, is what this path keeps low; a few short chains go through
:mod:`.small` instead, and so do chains with joint limits (:func:`.solve.solve_armatures`: one
implementation of their solve, which a float32 rounding of the start pose can move far).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from mathutils import Quaternion

from .. import adapter, diagnostics
from ..solver import solve_chains, solve_two_bone
from ..solver.orient import chains_turns
from ..solver.rotations import (
    inverse3,
    normalized,
    quaternion_from_matrix,
)
from ..solver.switches import BULK_KEY
from . import reach
from .base_pose import base_rotations, write_near_base
from .influence import blend_fraction, blend_rotations
from .inputs import (
    FAR_AWAY,
    ZERO_LENGTH,
    ArmatureFrame,
    _evaluated,
    _in_view_layer,
    check_pose_scale,
    forward_kinematics,
    pose_scale_flags,
    rest_side,
    unit_columns,
    world_matrix,
    world_position,
)
from .plan import ChainError, _hangs, check_dependencies, check_references_once

_Y = np.array([0.0, 1.0, 0.0])


@dataclass(eq=False, slots=True)
class Settings:
    """One armature's chain settings, read in bulk (one ``foreach_get`` each), by chain index."""

    match: list[bool]  # match_target_rotation
    influence: list[float]
    tolerance: list[float]
    iterations: list[int]
    softness: list[float]
    two_bone: list[bool]  # solver == 'TWO_BONE'
    arrays: dict[str, np.ndarray]  # match, influence (float64) and stretch (use_stretch) as arrays


def _settings(chains) -> Settings:
    """The chains' settings as :class:`Settings`: from :data:`..solver.switches.BULK_KEY` chains on one ``foreach_get``
    per setting (floats are stored as float32, read as such and widened exactly: the values each chain's
    property gives), below it chain by chain (a ``foreach_get`` costs ~10 us)."""
    count = len(chains)
    if count < BULK_KEY:
        listed = list(chains)
        matches, influences = [c.match_target_rotation for c in listed], [c.influence for c in listed]
        return Settings(matches, influences, [c.tolerance for c in listed], [c.iterations for c in listed],
                        [c.softness for c in listed], [c.solver == 'TWO_BONE' for c in listed],
                        {"match": np.array(matches, dtype=bool), "influence": np.array(influences),
                         "stretch": np.array([c.use_stretch for c in listed], dtype=bool)})

    def read(name: str, dtype) -> np.ndarray:
        out = np.empty(count, dtype=dtype)
        chains.foreach_get(name, out)
        return out

    two_bone = _TWO_BONE.get("value")
    if two_bone is None:  # the enum's value for 'TWO_BONE', as foreach_get gives it (count > 0 here)
        two_bone = _TWO_BONE["value"] = chains[0].bl_rna.properties["solver"].enum_items["TWO_BONE"].value
    match, influence = read("match_target_rotation", bool), read("influence", np.float32).astype(np.float64)
    return Settings(match.tolist(), influence.tolist(), read("tolerance", np.float32).tolist(),
                    read("iterations", np.int32).tolist(), read("softness", np.float32).tolist(),
                    (read("solver", np.int32) == two_bone).tolist(),
                    {"match": match, "influence": influence, "stretch": read("use_stretch", bool)})


_TWO_BONE: dict[str, int] = {}


@dataclass(eq=False)
class Part:
    """One armature's share of the batch; its bones sit at ``offset`` in the shared table."""

    arm: ArmatureFrame
    offset: int
    settings: Settings
    wrote: bool = False
    _matrices: np.ndarray | None = None

    def evaluated_matrices(self) -> np.ndarray:
        """Armature-space pose matrices (B, 4, 4) as evaluated, read in bulk on first use."""
        if self._matrices is None:
            count = len(self.arm.cache.names)
            self._matrices = adapter.bulk_matrices(self.arm.ev_bones, "matrix", count)
        return self._matrices


@dataclass(eq=False)
class Table:
    """Per-bone arrays of every armature in the batch, concatenated in ``Part`` order."""

    location: np.ndarray  # (B, 3) evaluated
    scale: np.ndarray  # (B, 3) evaluated
    base: np.ndarray  # (B, 4) rotation without IK
    written: np.ndarray  # (B, 4) quaternion channels to write back (the current ones where unsolved)
    current: np.ndarray  # (B, 4) float32: the quaternion channels as read
    rel: np.ndarray  # (B, 4, 4) rest relative to the parent's rest
    lengths: np.ndarray  # (B,)
    quaternion: np.ndarray  # (B,) bool: rotation mode QUATERNION


@dataclass(eq=False, slots=True)
class Block:
    """An armature's standalone chains of one length in the batch, from its layout (cached with it)."""

    plans: list  # ChainPlan, in the order of the armature's items
    positions: list[int]  # their positions in the items
    rows: np.ndarray  # (k, n) bone indices in the armature's cache
    parents: np.ndarray  # (k,) cache index of each root's parent, -1 for none
    sides: np.ndarray  # (k, 3) the side each rest chain bends to (:func:`.inputs.rest_side`), root's rest axes
    index: np.ndarray  # (k,) the plans' chain indices


@dataclass(eq=False)
class Group:
    """Every chain of one length in the batch, row by row: inputs, then results."""

    items: list[tuple]  # (part, chain, plan)
    idx: np.ndarray  # (C, n) bone rows in the table
    pre: np.ndarray  # (C, n, 4, 4) armature-space pose without IK
    parent: np.ndarray  # (C, 4, 4) each root's parent matrix
    every: np.ndarray  # (C, n + 1, 3) heads, then the tip's tail
    sides: np.ndarray  # (C, 3) rest sides, root's rest axes
    parts: list  # the parts in the group, in order
    settings: dict[str, np.ndarray]  # per row: "match", "influence", "stretch" (Settings.arrays), "part" (its
    # position in ``parts``), "scale" (its armature's scale)
    moved: np.ndarray = field(init=False)  # solved joints (the pose without IK's past the placed ones)
    ok: np.ndarray = field(init=False)  # (C,) rows with inputs
    poles: dict[int, tuple] = field(default_factory=dict)  # rows with a pole -> it, armature space
    blend_targets: dict[int, np.ndarray] = field(default_factory=dict)  # rows at 0 < influence < 1 -> target
    frames: dict[int, np.ndarray] = field(default_factory=dict)  # rows whose tip takes the target's matrix
    targets: dict[int, tuple] = field(default_factory=dict)  # rows that stopped short -> target (.reach)
    invalid: dict[int, str] = field(default_factory=dict)  # rows whose batched solve raised
    error: np.ndarray = field(init=False)
    iterations: np.ndarray = field(init=False)
    reached: np.ndarray = field(init=False)
    converged: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        count = len(self.items)
        self.moved = self.every.copy()
        self.ok = np.ones(count, dtype=bool)
        self.error = np.zeros(count)
        self.iterations = np.zeros(count, dtype=np.int64)
        self.reached = np.zeros(count, dtype=bool)
        self.converged = np.ones(count, dtype=bool)

    def record(self, c: int, joints, error: float, iterations: int, reached: bool, converged: bool = True) -> None:
        """Row ``c``'s result from a one-chain solve."""
        self.moved[c, :len(joints)] = joints
        self.error[c], self.iterations[c], self.reached[c], self.converged[c] = error, iterations, reached, converged


# chain shape and settings -> [(group, rows, targets, poles, softness), ...] in the order the rows were gathered
Requests = dict[tuple, list[tuple]]


def solve(armatures: list[tuple[ArmatureFrame, list[tuple]]]) -> None:
    """Solve the standalone chains of ``armatures`` = [(armature, items), ...] (``items`` = [(chain, plan),
    ...], chains sharing no bones) and write their rotations."""
    parts: list[Part] = []
    columns: dict[str, list[np.ndarray]] = defaultdict(list)
    by_length: dict[int, list[tuple]] = defaultdict(list)  # chain length -> [(part, chain, plan), ...]
    blocks: dict[int, list[tuple]] = defaultdict(list)  # chain length -> [(part, block), ...]
    offset = 0
    for arm, items in armatures:
        part = Part(arm, offset, _settings(arm.ob.fabrik.chains))
        parts.append(part)
        used = []
        for length, block in _blocks(arm, items).items():
            by_length[length] += [(part, items[k][0], plan) for k, plan in zip(block.positions, block.plans)]
            blocks[length].append((part, block))
            used.append(block.rows.ravel())
        cache = arm.cache
        count = len(cache.names)
        columns["location"].append(adapter.bulk_read(arm.ev_bones, "location", count, 3) * cache.located[:, None])
        columns["scale"].append(adapter.bulk_read(arm.ev_bones, "scale", count, 3))
        columns["base"].append(base_rotations(arm.ob, arm.ev, np.concatenate(used), cache))
        columns["written"].append(adapter.bulk_read(arm.bones, "rotation_quaternion", count, 4))
        columns["current"].append(columns["written"][-1].astype(np.float32))
        columns["rel"].append(cache.rel)
        columns["lengths"].append(cache.lengths)
        columns["quaternion"].append(cache.quaternion)
        offset += count
    if not parts:
        return
    table = Table(**{name: np.concatenate(arrays) for name, arrays in columns.items()})
    requests: Requests = defaultdict(list)
    groups = []
    for length, items in by_length.items():
        idx = np.concatenate([block.rows + part.offset for part, block in blocks[length]])
        parent = np.tile(np.eye(4), (len(items), 1, 1))
        start = 0
        for part, block in blocks[length]:
            has = np.flatnonzero(block.parents >= 0)
            if len(has):  # standalone chains hang under no other chain: the evaluated pose holds
                parent[start + has] = part.evaluated_matrices()[block.parents[has]]
            start += len(block.plans)
        pre = forward_kinematics(parent, table.rel[idx], table.base[idx], table.location[idx], table.scale[idx])
        tails = np.einsum("cij,cj->ci", pre[:, -1, :3, :3], table.lengths[idx[:, -1], None] * _Y) + pre[:, -1, :3, 3]
        every = np.concatenate([pre[..., :3, 3], tails[:, None]], axis=1)  # heads, then the tip's tail
        members = blocks[length]
        sides = np.concatenate([block.sides for _, block in members])
        settings = {name: np.concatenate([part.settings.arrays[name][block.index] for part, block in members])
                    for name in ("match", "influence", "stretch")}
        settings["part"] = np.concatenate([np.full(len(block.plans), k) for k, (_, block) in enumerate(members)])
        settings["scale"] = np.concatenate([np.full(len(block.plans), part.arm.scale) for part, block in members])
        group = Group(items, idx, pre, parent, every, sides, [part for part, _ in members], settings)
        _gather(group, requests)
        groups.append(group)
    solve_requests(requests)
    for group in groups:
        _write(table, group)
    for part in parts:
        if part.wrote:
            cache = part.arm.cache
            rows = slice(part.offset, part.offset + len(cache.names))
            # Nothing changed (a still target, a frame shown again): no write, so no re-evaluation of the
            # armature; as in .small (where the reason is), not with keyed or driven rotations.
            if not cache.animated.any() and np.array_equal(table.written[rows].astype(np.float32),
                                                           table.current[rows]):
                continue
            adapter.write_quaternions(part.arm.ob, table.written[rows])


def _blocks(arm: ArmatureFrame, items: list[tuple]) -> dict[int, Block]:
    """The armature's items by chain length (:class:`Block`), cached with its layout."""
    key = tuple(plan.chain_index for _, plan in items)
    cached = arm.layout.batch.get(key)
    if cached is None:
        by_length: dict[int, list[int]] = defaultdict(list)
        for k, (_, plan) in enumerate(items):
            by_length[len(plan.cache_rows)].append(k)
        cached = {}
        for length, positions in by_length.items():
            plans = [items[k][1] for k in positions]
            sides = [rest_side(arm.ob, plan, plan.placed) if plan.placed else (0.0, 0.0, 1.0) for plan in plans]
            cached[length] = Block(plans, positions, np.array([plan.cache_rows for plan in plans]),
                                   np.array([plan.parent for plan in plans]), np.array(sides),
                                   np.array([plan.chain_index for plan in plans]))
        arm.layout.batch[key] = cached
    return cached


def solve_requests(requests: Requests) -> None:
    """One :func:`solve_chains` call per chain shape and settings, for every armature at once; the
    results go back into each group's rows."""
    for (placed, has_pole, iterations), members in requests.items():
        softness = [value for member in members for value in member[4]]
        tolerance = np.array([value for member in members for value in member[5]])
        try:
            results = solve_chains(
                np.concatenate([group.every[rows, :placed + 1] for group, rows, *_ in members]),
                np.array([target for member in members for target in member[2]]), tolerance=tolerance,
                max_iterations=iterations,
                poles=np.array([pole for member in members for pole in member[3]]) if has_pole else None,
                softness=np.array(softness) if any(softness) else 0.0)
        except ValueError as error:
            for group, rows, *_ in members:
                for c in rows:
                    group.invalid[c] = str(error)
            continue
        converged = results.converged
        start = 0
        for group, rows, targets, *_ in members:
            end = start + len(rows)
            group.moved[rows, :placed + 1] = results.joints[start:end]
            group.error[rows] = results.error[start:end]
            group.iterations[rows] = results.iterations[start:end]
            group.reached[rows] = results.reached[start:end]
            group.converged[rows] = True if converged is None else converged[start:end]
            if not results.reached[start:end].all():  # kept for .reach (why short), for those rows only
                group.targets.update((c, t) for c, t, hit in zip(rows, targets, results.reached[start:end]) if not hit)
            start = end
    requests.clear()


def _gather(group: Group, requests: Requests) -> None:
    """Each chain's inputs (those of :func:`.inputs.chain_inputs`: the same checks, reads and arithmetic in
    the same order, written out here because it runs per chain per frame), then its one-chain solve
    or its place in ``requests``; invalid chains are recorded and left out.

    The usual case (an object target, no pole) is written inline; everything else calls the functions
    :func:`.inputs.chain_inputs` calls.
    """
    items, pre, parent, every = group.items, group.pre, group.parent, group.every
    n = every.shape[1] - 1
    steps = np.diff(every, axis=1)
    seg = np.sqrt(np.einsum("cki,cki->ck", steps, steps))
    short = seg <= ZERO_LENGTH * np.maximum(1.0, seg.max(axis=1, keepdims=True))
    any_short = short.any(axis=1).tolist()
    scale_flags = pose_scale_flags(pre, ~group.settings["stretch"])
    any_scaled = scale_flags.any(axis=1).tolist()
    local: dict[tuple, list[tuple]] = defaultdict(list)  # requests of this group: [(row, target, pole, softness)]
    last = None
    for c, (part, chain, plan) in enumerate(items):
        if part is not last:  # what the armature's chains share
            last, arm, settings = part, part.arm, part.settings
            match, tolerances, iterations, softness, two_bone, influences = settings.match, settings.tolerance, \
                settings.iterations, settings.softness, settings.two_bone, settings.influence
            depsgraph, layer, inv_world_m, hangs = arm.depsgraph, arm.layer, arm.inv_world_m, arm.hangs
            render, view_layer = layer
        i = plan.chain_index
        try:
            # check_references_once
            target_ob = chain.target
            if target_ob is None:
                raise ChainError("Pick a target object")
            pole_ob = chain.pole
            if plan.references_checked:
                moves = target_ob.parent is not None or len(target_ob.constraints) > 0  # _hangs(target)
                if moves or (pole_ob is not None and _hangs(pole_ob)) or hangs:
                    check_dependencies(arm.ob, chain, plan)
            else:
                check_references_once(arm.ob, chain, plan, hangs)
                moves = _hangs(target_ob)
            # chain_inputs
            placed = n - 1 if match[i] else n
            if any_scaled[c] or plan.scale_free:
                check_pose_scale(plan, pre[c], parent[c], scale_flags[c].tolist() if any_scaled[c] else (),
                                 uniform=not group.settings["stretch"][c])
            if any_short[c]:
                for k in range(placed):
                    if short[c, k]:
                        raise ChainError(f"Bone '{plan.bones[k]}' has zero length")
            # world_position, with _evaluated and _in_view_layer's usual answer inline
            ev = target_ob.evaluated_get(depsgraph)
            if (target_ob.animation_data is not None or moves) \
                    and not (ev.is_evaluated and (render or target_ob.visible_get(view_layer=view_layer))) \
                    and not _in_view_layer(target_ob, ev, depsgraph, layer):
                _evaluated(target_ob, depsgraph, "Target", layer)  # raises: not evaluated in this view layer
            if target_ob.type == 'ARMATURE' and chain.target_bone:
                point = world_position(target_ob, chain.target_bone, depsgraph, "Target", layer)
            else:
                point = ev.matrix_world.translation
                x, y, z = point
                if not (abs(x) <= FAR_AWAY and abs(y) <= FAR_AWAY and abs(z) <= FAR_AWAY):  # also false for NaN
                    raise ChainError(f"Target '{target_ob.name}' is at an invalid position (NaN or infinity)")
            target = inv_world_m @ point
            pole = None
            if pole_ob is not None:
                pole = inv_world_m @ world_position(pole_ob, chain.pole_bone, depsgraph, "Pole", layer)
            if placed < n:  # the tip takes the target's orientation
                group.frames[c] = arm.inv_world @ world_matrix(target_ob, chain.target_bone, depsgraph, "Target",
                                                               layer)
            if 0.0 < influences[i] < 1.0 and placed:  # blended after the solve (.influence)
                group.blend_targets[c] = np.array(target)
            tolerance = tolerances[i] * plan.length  # a fraction of the chain's length (armature space)
            # solved here, or queued
            target_floats, pole_floats = target.to_tuple(), None if pole is None else pole.to_tuple()
            if not placed:
                start = every[c, :1]
                error = float(np.linalg.norm(start[0] - target_floats))
                group.record(c, start, error, 0, error <= tolerance)
            elif two_bone[i]:
                result = solve_two_bone(every[c, :placed + 1], target_floats, pole=pole_floats, tolerance=tolerance,
                                        max_iterations=iterations[i], softness=softness[i])
                group.record(c, result.joints, result.error, result.iterations, result.reached, result.converged)
                if not result.reached:
                    group.targets[c] = target_floats
            else:
                local[(placed, pole is not None, iterations[i])].append(
                    (c, target_floats, pole_floats, softness[i], tolerance))
            if pole_floats is not None:
                group.poles[c] = pole_floats
        except (ChainError, ValueError) as error:
            group.frames.pop(c, None)
            group.ok[c] = False
            diagnostics.record(chain, 'INVALID', str(error))
    for key, members in local.items():
        rows, targets, poles, softness, tolerances = zip(*members)
        requests[key].append((group, list(rows), targets, poles, softness, tolerances))


def _write(table: Table, group: Group) -> None:
    """Turn each bone (:func:`_turns`), blend by influence, and put the quaternion channels into
    ``table.written`` (other rotation modes are written bone by bone)."""
    items = group.items
    for c, message in group.invalid.items():
        diagnostics.record(items[c][1], 'INVALID', message)
        group.ok[c] = False
    rows = np.flatnonzero(group.ok)
    if not len(rows):
        return
    valid = rows.tolist()
    if len(valid) == len(items):
        rows = slice(None)  # views, not copies
    vidx, vpre, vparent = group.idx[rows], group.pre[rows], group.parent[rows]
    n = group.idx.shape[1]
    placed = np.where(group.settings["match"][rows], n - 1, n)
    joints = group.every[rows]
    moved = group.moved[rows]
    turn = _turns(group, valid, vpre, joints, moved, placed, rows)
    heads = moved[:, :n]
    influence = group.settings["influence"][rows]
    frames = [group.frames.get(c) for c in valid] if group.frames else [None] * len(valid)
    q = _local_rotations(vpre, vparent, table.rel[vidx], turn, heads, frames, table.base[vidx], influence)
    for v, c in enumerate(valid):
        target = group.blend_targets.get(c)
        if target is not None and np.isfinite(q[v]).all():
            i = vidx[v]
            end = np.array([0.0, 0.0 if frames[v] is not None else float(table.lengths[i[-1]]), 0.0, 1.0])
            fraction = blend_fraction(vparent[v], table.rel[i], table.location[i], table.scale[i], table.base[i],
                                      q[v], end, target, float(influence[v]))
            q[v] = blend_rotations(table.base[i], q[v], fraction)
    finite = np.isfinite(q).all(axis=(1, 2)) & np.isfinite(moved).all(axis=(1, 2))
    if not finite.all():  # never write a non-finite value: such chains show their pose without IK (INVALID)
        for v in np.flatnonzero(~finite):
            diagnostics.record(items[valid[v]][1], 'INVALID', "The solve gave a non-finite pose; the bones show "
                               "their pose without IK")
        keep_rows = np.flatnonzero(finite)
        valid = [valid[v] for v in keep_rows]
        rows = valid
        vidx, vpre, vparent, q = vidx[keep_rows], vpre[keep_rows], vparent[keep_rows], q[keep_rows]
    quaternion = table.quaternion[vidx]
    table.written[vidx[quaternion]] = q[quaternion]
    for v, k in zip(*np.nonzero(~quaternion)):  # other rotation modes: converted one bone at a time
        part, _, plan = items[valid[v]]
        write_near_base(part.arm, plan.bones[k], Quaternion(q[v, k]))
    keep = [v for v, c in enumerate(valid) if items[c][0].arm.keep_matrices]
    if keep:  # chains hanging below these start from the pose just written
        final = forward_kinematics(vparent[keep], table.rel[vidx[keep]], q[keep], table.location[vidx[keep]],
                                    table.scale[vidx[keep]])
        for row, v in enumerate(keep):
            part, _, plan = items[valid[v]]
            for k, name in enumerate(plan.bones):
                part.arm.new_matrices[name] = final[row, k]
    for k in np.unique(group.settings["part"][rows][quaternion.any(axis=1)]).tolist():
        group.parts[k].wrote = True
    diagnostics.record_solves([items[c][1] for c in valid], group.reached[rows].tolist(),
                              group.converged[rows].tolist(),
                              (group.error[rows] * group.settings["scale"][rows]).tolist(),
                              group.iterations[rows].tolist())
    if not group.reached[rows].all():
        reach.explain_rows(group, valid)


def _turns(group: Group, valid: list[int], pre, joints, moved, placed, rows) -> np.ndarray:
    """Each placed bone's world turn ``(C, n, 3, 3)`` (:func:`.solver.orient.chains_turns`: its segment's
    direction and the chain's roll toward its bend or pole); identity for a tip matching its target."""
    count, n = pre.shape[0], pre.shape[1]
    turn = np.zeros((count, n, 3, 3))
    turn[..., _DIAGONAL, _DIAGONAL] = 1.0
    poles = None
    if group.poles:
        nan = (np.nan, np.nan, np.nan)
        poles = np.array([group.poles.get(c, nan) for c in valid])
    sides = np.einsum("cij,cj->ci", normalized(pre[:, 0, :3, :3], axis=-2), group.sides[rows])
    for count_placed in np.unique(placed).tolist():
        if not count_placed:
            continue
        chosen = np.flatnonzero(placed == count_placed)
        if len(chosen):
            every = slice(None) if len(chosen) == count else chosen
            turn[every, :count_placed] = chains_turns(joints[every, :count_placed + 1],
                                                      moved[every, :count_placed + 1],
                                                      None if poles is None else poles[every], sides[every])
    return turn


_DIAGONAL = np.arange(3)


def _local_rotations(pre, parent, rel, turn, heads, frames, base, influence) -> np.ndarray:
    """Each bone's new local rotation (wxyz, (C, n, 4)), batched in numpy.

    A bone turns by ``turn`` on top of its pose without IK (so twist and offsets ride along); a tip
    matching its target takes the target's orientation (``frames``); the local rotation follows from
    the full-IK parent (a matched tip then blends with the pose without IK by influence; the other bones
    reached for a blended target), in the hemisphere of the pose without IK (so channel values depend on
    the frame's inputs alone).
    """
    ik = pre.copy()
    ik[..., :3, :3] = turn @ pre[..., :3, :3]
    ik[..., :3, 3] = heads
    for v, frame in enumerate(frames):
        if frame is not None:  # the tip takes the target's orientation, keeping its own scale
            ik[v, -1, :3, :3] = unit_columns(frame) * np.linalg.norm(pre[v, -1, :3, :3], axis=0)
    above = np.concatenate([parent[:, None], ik[:, :-1]], axis=1)
    # The 3x3 block of inv(above @ rel) @ ik, all the local rotation needs (the matrices are affine).
    local = inverse3(above[..., :3, :3] @ rel[..., :3, :3]) @ ik[..., :3, :3]
    rotation = normalized(local, axis=-2)
    q = quaternion_from_matrix(rotation)
    off = influence <= 0.0  # exactly the pose without IK, not a solve that reproduces it to rounding
    if off.any():
        q[off] = base[off]
    return np.where(np.einsum("...i,...i->...", q, base)[..., None] < 0.0, -q, q)
