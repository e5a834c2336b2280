"""Every standalone chain of many armatures in one pass.

Bulk reads (``foreach_get``) per armature, then one table of bones for all of them: pose math batched
across every chain of equal length whatever its armature, one :func:`.solver.solve_chains` call per
chain shape and settings (two-bone and limited chains are solved one by one), and one bulk write
(``foreach_set``) of each armature's quaternion channels. A numpy call costs 1-3 us whatever its
size, so the number of calls per frame, not the number of bones, is what this path keeps low; a few
short chains go through :mod:`.small` instead.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from mathutils import Quaternion

from .. import adapter, diagnostics
from ..solver import solve_chain, solve_chains, solve_two_bone
from ..solver.orient import chains_turns
from ..solver.rotations import (
    inverse3,
    matrices_from_quaternions,
    matrices_from_two_vectors,
    normalized,
    quaternion_from_matrix,
    slerp_quaternions,
)
from .base_pose import base_rotations, write_near_base
from .inputs import (
    ZERO_LENGTH,
    ArmatureFrame,
    ChainInputs,
    ChainResult,
    chain_inputs,
    pose_scale_flags,
    rest_side,
    unit_columns,
)
from .plan import ChainError, check_references_once

_Y = np.array([0.0, 1.0, 0.0])


@dataclass(eq=False)
class Part:
    """One armature's share of the batch; its bones sit at ``offset`` in the shared table."""

    arm: ArmatureFrame
    offset: int
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
    rel: np.ndarray  # (B, 4, 4) rest relative to the parent's rest
    lengths: np.ndarray  # (B,)
    quaternion: np.ndarray  # (B,) bool: rotation mode QUATERNION


@dataclass(eq=False, slots=True)
class Entry:
    """One chain of the batch: its inputs, then its result or why it has none."""

    inputs: ChainInputs
    target: tuple[float, ...] = ()  # ``inputs.target`` as floats, for stacking
    pole: tuple[float, ...] | None = None
    result: ChainResult | None = None
    invalid: str | None = None


Requests = dict[tuple, list[Entry]]  # chain shape and settings -> its chains


def solve(armatures: list[tuple[ArmatureFrame, list[tuple]]]) -> None:
    """Solve the standalone chains of ``armatures`` = [(armature, items), ...] (``items`` = [(chain, plan),
    ...], chains sharing no bones) and write their rotations."""
    parts: list[Part] = []
    columns: dict[str, list[np.ndarray]] = defaultdict(list)
    by_length: dict[int, list[tuple]] = defaultdict(list)  # chain length -> [(part, chain, plan), ...]
    blocks: dict[int, list[tuple]] = defaultdict(list)  # chain length -> [(part, bone rows, parents), ...]
    offset = 0
    for arm, items in armatures:
        part = Part(arm, offset)
        parts.append(part)
        plans_by_length: dict[int, list] = defaultdict(list)
        for chain, plan in items:
            by_length[len(plan.idx)].append((part, chain, plan))
            plans_by_length[len(plan.idx)].append(plan)
        used = []
        for length, plans in plans_by_length.items():
            rows = np.array([plan.idx for plan in plans])
            blocks[length].append((part, rows + offset, np.array([plan.parent for plan in plans])))
            used.append(rows.ravel())
        cache = arm.cache
        count = len(cache.names)
        columns["location"].append(adapter.bulk_read(arm.ev_bones, "location", count, 3))
        columns["scale"].append(adapter.bulk_read(arm.ev_bones, "scale", count, 3))
        columns["base"].append(base_rotations(arm.ob, arm.ev, np.concatenate(used), cache))
        columns["written"].append(adapter.bulk_read(arm.bones, "rotation_quaternion", count, 4))
        columns["rel"].append(cache.rel)
        columns["lengths"].append(cache.lengths)
        columns["quaternion"].append(cache.quaternion)
        offset += count
    if not parts:
        return
    table = Table(**{name: np.concatenate(arrays) for name, arrays in columns.items()})
    requests: Requests = defaultdict(list)
    groups = []
    for length, group in by_length.items():
        idx = np.concatenate([rows for _, rows, _ in blocks[length]])
        parent = np.tile(np.eye(4), (len(group), 1, 1))
        start = 0
        for part, rows, parents in blocks[length]:
            has = np.flatnonzero(parents >= 0)
            if len(has):  # standalone chains hang under no other chain: the evaluated pose holds
                parent[start + has] = part.evaluated_matrices()[parents[has]]
            start += len(rows)
        pre = _forward_kinematics(parent, table.rel[idx], table.base[idx], table.location[idx], table.scale[idx])
        tails = np.einsum("cij,cj->ci", pre[:, -1, :3, :3], table.lengths[idx[:, -1], None] * _Y) + pre[:, -1, :3, 3]
        every = np.concatenate([pre[..., :3, 3], tails[:, None]], axis=1)  # heads, then the tip's tail
        entries = _solve(group, pre, parent, every, requests)
        groups.append((group, idx, pre, parent, every, entries))
    solve_requests(requests)
    for group, idx, pre, parent, every, entries in groups:
        _write(table, group, idx, pre, parent, every, entries)
    for part in parts:
        if part.wrote:
            count = len(part.arm.cache.names)
            adapter.write_quaternions(part.arm.ob, table.written[part.offset:part.offset + count])


def solve_requests(requests: Requests) -> None:
    """One :func:`solve_chains` call per chain shape and settings, for every armature at once."""
    for (_, has_pole, tolerance, iterations), members in requests.items():
        softness = [e.inputs.chain.softness for e in members]
        try:
            results = solve_chains(np.stack([e.inputs.start for e in members]),
                                   np.array([e.target for e in members]), tolerance=tolerance,
                                   max_iterations=iterations,
                                   poles=np.array([e.pole for e in members]) if has_pole else None,
                                   softness=np.array(softness) if any(softness) else 0.0)
        except ValueError as error:
            for entry in members:
                entry.invalid = str(error)
            continue
        errors, counts, reached = results.error.tolist(), results.iterations.tolist(), results.reached.tolist()
        converged = [True] * len(members) if results.converged is None else results.converged.tolist()
        for k, entry in enumerate(members):
            entry.result = ChainResult(results.joints[k], errors[k], counts[k], reached[k], converged[k])
    requests.clear()


def _basis(q: np.ndarray, location: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Basis matrices (..., 4, 4) = translation @ rotation @ scale, as Blender composes them."""
    m = np.zeros(q.shape[:-1] + (4, 4))
    m[..., :3, :3] = matrices_from_quaternions(q) * scale[..., None, :]
    m[..., :3, 3] = location
    m[..., 3, 3] = 1.0
    return m


def _forward_kinematics(parent, rel, q, location, scale) -> np.ndarray:
    """Armature-space pose matrices (C, n, 4, 4) of chains from their parents' and their basis matrices."""
    local = rel @ _basis(q, location, scale)
    out = np.empty_like(local)
    m = parent
    for k in range(local.shape[1]):
        m = m @ local[:, k]
        out[:, k] = m
    return out


def _solve(group, pre, parent, every, requests: Requests) -> dict[int, Entry]:
    """Solve each chain of one length, or queue it in ``requests``; invalid chains are recorded and
    left out of the result."""
    steps = np.diff(every, axis=1)
    seg = np.sqrt(np.einsum("cki,cki->ck", steps, steps))
    short = seg <= ZERO_LENGTH * np.maximum(1.0, seg.max(axis=1, keepdims=True))
    any_short = short.any(axis=1).tolist()
    scale_flags = pose_scale_flags(pre, np.array([not chain.use_stretch for _, chain, _ in group]))
    any_scaled = scale_flags.any(axis=1).tolist()
    out: dict[int, Entry] = {}
    for c, (part, chain, plan) in enumerate(group):
        try:
            check_references_once(part.arm.ob, chain, plan, part.arm.hangs)
            inputs = chain_inputs(part.arm, chain, plan, every[c], pre[c], parent[c],
                                  short[c] if any_short[c] else None,
                                  scale_flags[c].tolist() if any_scaled[c] else ())
            entry = out[c] = Entry(inputs)
            joints, target, pole, tolerance = inputs.start, inputs.target.to_tuple(), inputs.pole, inputs.tolerance
            if not inputs.placed:
                error = float(np.linalg.norm(joints[0] - target))
                entry.result = ChainResult(joints, error, 0, error <= tolerance)
            elif chain.solver == 'TWO_BONE' or inputs.limits is not None:
                solver = solve_two_bone if chain.solver == 'TWO_BONE' else solve_chain
                result = solver(joints, target, pole=None if pole is None else pole.to_tuple(), tolerance=tolerance,
                                limits=inputs.limits, max_iterations=inputs.iterations, softness=chain.softness)
                entry.result = ChainResult(result.joints, result.error, result.iterations, result.reached,
                                           result.converged, result.frames)
            else:
                entry.target = target
                entry.pole = None if pole is None else pole.to_tuple()
                requests[(inputs.placed, pole is not None, tolerance, inputs.iterations)].append(entry)
        except (ChainError, ValueError) as error:
            out.pop(c, None)
            diagnostics.record(chain, 'INVALID', str(error))
    return out


def _write(table: Table, group, idx, pre, parent, every, solved: dict[int, Entry]) -> None:
    """Turn each bone (:func:`_turns`), blend by influence, and put the quaternion channels into
    ``table.written`` (other rotation modes are written bone by bone)."""
    for c in [c for c, entry in solved.items() if entry.invalid is not None]:
        diagnostics.record(group[c][1], 'INVALID', solved.pop(c).invalid)
    valid = sorted(solved)
    if not valid:
        return
    n = idx.shape[1]
    vidx, vpre, vparent = idx[valid], pre[valid], parent[valid]
    placed = np.array([solved[c].inputs.placed for c in valid])
    joints = every[valid]
    moved = joints.copy()
    results = [solved[c].result for c in valid]
    if (placed == n).all():  # the usual case: every joint of every chain was placed
        moved[:] = [r.joints for r in results]
    else:
        for v, r in enumerate(results):
            moved[v, :placed[v] + 1] = r.joints
    turn = _turns(group, valid, solved, vpre, joints, moved, placed)
    heads = moved[:, :n]
    influence = np.array([group[c][1].influence for c in valid])
    frames = [solved[c].inputs.target_matrix for c in valid]
    q = _local_rotations(vpre, vparent, table.rel[vidx], turn, heads, frames, table.base[vidx], influence)
    finite = np.isfinite(q).all(axis=(1, 2)) & np.isfinite(moved).all(axis=(1, 2))
    if not finite.all():  # never write a non-finite value: such chains keep their pose
        for v in np.flatnonzero(~finite):
            diagnostics.record(group[valid[v]][1], 'INVALID', "The solve gave a non-finite pose; the pose was "
                               "left as it was")
        keep_rows = np.flatnonzero(finite)
        valid = [valid[v] for v in keep_rows]
        vidx, vpre, vparent, q = vidx[keep_rows], vpre[keep_rows], vparent[keep_rows], q[keep_rows]
    quaternion = table.quaternion[vidx]
    table.written[vidx[quaternion]] = q[quaternion]
    for v, k in zip(*np.nonzero(~quaternion)):  # other rotation modes: converted one bone at a time
        part, _, plan = group[valid[v]]
        write_near_base(part.arm, plan.bones[k], Quaternion(q[v, k]))
    keep = [v for v, c in enumerate(valid) if group[c][0].arm.keep_matrices]
    if keep:  # chains hanging below these start from the pose just written
        final = _forward_kinematics(vparent[keep], table.rel[vidx[keep]], q[keep], table.location[vidx[keep]],
                                    table.scale[vidx[keep]])
        for row, v in enumerate(keep):
            part, _, plan = group[valid[v]]
            for k, name in enumerate(plan.bones):
                part.arm.new_matrices[name] = final[row, k]
    for c, wrote in zip(valid, quaternion.any(axis=1).tolist()):
        part, chain, _ = group[c]
        part.wrote |= wrote
        result = solved[c].result
        diagnostics.record_solve(chain, result.reached, result.converged, result.error * part.arm.scale,
                                 result.iterations)


def _turns(group, valid, solved: dict[int, Entry], pre, joints, moved, placed) -> np.ndarray:
    """Each placed bone's world turn ``(C, n, 3, 3)`` (:func:`.solver.orient.chains_turns`: its segment's
    direction and the chain's roll toward its bend or pole); identity for a tip matching its target."""
    count, n = pre.shape[0], pre.shape[1]
    turn = np.zeros((count, n, 3, 3))
    turn[..., _DIAGONAL, _DIAGONAL] = 1.0
    entries = [solved[c].inputs for c in valid]
    nan = (np.nan, np.nan, np.nan)
    poles = np.array([nan if e.pole is None else e.pole.to_tuple() for e in entries])
    sides = np.array([rest_side(group[c][0].arm.ob, e.plan, e.placed) if e.placed else (0.0, 0.0, 1.0)
                      for c, e in zip(valid, entries)])
    sides = np.einsum("cij,cj->ci", normalized(pre[:, 0, :3, :3], axis=-2), sides)
    limited = np.array([solved[c].inputs.limits is not None for c in valid])
    for count_placed in np.unique(placed).tolist():
        if not count_placed:
            continue
        rows = np.flatnonzero((placed == count_placed) & ~limited)
        if len(rows):
            every = slice(None) if len(rows) == count else rows
            turn[every, :count_placed] = chains_turns(joints[every, :count_placed + 1],
                                                      moved[every, :count_placed + 1], poles[every], sides[every])
    for v in np.flatnonzero(limited):  # as the frames the limits were measured in (hinges: about X alone)
        p = placed[v]
        inputs, result = solved[valid[v]].inputs, solved[valid[v]].result
        if result.frames is not None and inputs.limits.frames is not None:
            turn[v, :p] = result.frames @ np.swapaxes(inputs.limits.frames, 1, 2)
        else:
            before = normalized(np.diff(joints[v, :p + 1], axis=0))
            turn[v, :p] = matrices_from_two_vectors(before, normalized(np.diff(moved[v, :p + 1], axis=0)))
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
    # The placed bones reached for the blended target (.inputs.blended_goal); a tip that takes the
    # target's orientation blends it.
    partial = (influence < 1.0) & np.array([frame is not None for frame in frames], dtype=bool)
    if partial.any():
        q[partial, -1] = slerp_quaternions(base[partial, -1], q[partial, -1], influence[partial])
    off = influence <= 0.0  # exactly the pose without IK, not a solve that reproduces it to rounding
    if off.any():
        q[off] = base[off]
    return np.where(np.einsum("...i,...i->...", q, base)[..., None] < 0.0, -q, q)
