"""Every standalone chain of one armature in one pass.

Bulk reads (``foreach_get``), pose math batched across chains of equal length, one
:func:`.solver.solve_chains` call per chain shape (two-bone and limited chains are solved one by one),
one bulk write (``foreach_set``) of the quaternion channels. Per-bone Blender calls cost 1.6-3 us
each, and Blender's own pose evaluation 3-7 us per bone, so anything per bone here is what limits a
crowd of chains.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from mathutils import Quaternion

from . import adapter, diagnostics
from .cache import RigCache
from .rig import (
    ZERO_LENGTH,
    ChainError,
    RigState,
    base_channels,
    base_rotation,
    check_references,
    limits_for,
    unit_columns,
    world_point,
    world_position,
)
from .solver import solve_chain, solve_chains, solve_two_bone
from .solver.rotations import (
    matrices_from_quaternions,
    matrices_from_two_vectors,
    quaternion_from_matrix,
    slerp_quaternions,
)

_Y = np.array([0.0, 1.0, 0.0])


def bulk(collection, attribute: str, count: int, width: int) -> np.ndarray:
    flat = np.empty(count * width, dtype=np.float32)
    collection.foreach_get(attribute, flat)
    return flat.reshape(count, width).astype(np.float64)


@dataclass
class Pending:
    """One armature's standalone chains between preparation and writing."""

    ob: object
    cache: RigCache
    state: RigState
    location: np.ndarray
    scale: np.ndarray
    base: np.ndarray
    written: np.ndarray
    groups: list[tuple] = field(default_factory=list)  # (chains and plans, bone indices, pre, parent, entries)
    keep_matrices: bool = True  # record written matrices for chains hanging below these


Requests = dict[tuple, list[tuple]]  # chain shape and settings -> [(chain, entry), ...], across armatures


def prepare(ob, ev, items: list[tuple], state: RigState, depsgraph, cache: RigCache, requests: Requests,
            keep_matrices: bool = True) -> Pending:
    """Read the pose, build each chain's joints and solve what cannot be batched; plain FABRIK chains
    go into ``requests`` so chains of equal shape from every armature share one batched solve."""
    count = len(cache.names)
    pending = Pending(ob, cache, state, bulk(ev.pose.bones, "location", count, 3),
                      bulk(ev.pose.bones, "scale", count, 3), _base_rotations(ob, ev, items, cache, count),
                      bulk(ob.pose.bones, "rotation_quaternion", count, 4), keep_matrices=keep_matrices)
    evaluated_matrices = None
    by_length: dict[int, list[tuple]] = defaultdict(list)
    for chain, plan in items:
        by_length[len(plan.bones)].append((chain, plan))
    for group in by_length.values():
        idx = np.array([[cache.index[b] for b in plan.bones] for _, plan in group])
        parent = np.tile(np.eye(4), (len(group), 1, 1))
        for c in np.flatnonzero(cache.parents[idx[:, 0]] >= 0):
            p = cache.parents[idx[c, 0]]
            if cache.names[p] in state.new_matrices:
                parent[c] = state.new_matrices[cache.names[p]]
            else:
                if evaluated_matrices is None:
                    evaluated_matrices = bulk(ev.pose.bones, "matrix", count, 16).reshape(-1, 4, 4).transpose(0, 2, 1)
                parent[c] = evaluated_matrices[p]
        pre = _forward_kinematics(parent, cache.rel[idx], pending.base[idx], pending.location[idx], pending.scale[idx])
        tails = np.einsum("cij,cj->ci", pre[:, -1, :3, :3], cache.lengths[idx[:, -1], None] * _Y) + pre[:, -1, :3, 3]
        every = np.concatenate([pre[..., :3, 3], tails[:, None]], axis=1)  # heads, then the tip's tail
        entries = _solve(ob, group, idx, pre, parent, every, state, depsgraph, cache, requests)
        pending.groups.append((group, idx, pre, parent, every, entries))
    return pending


def solve_requests(requests: Requests) -> None:
    """One :func:`solve_chains` call per chain shape and settings, for every armature at once."""
    for (_, has_pole, tolerance, iterations), members in requests.items():
        try:
            results = solve_chains(np.stack([e["joints"] for _, e in members]),
                                   np.stack([e["target"] for _, e in members]), tolerance=tolerance,
                                   max_iterations=iterations,
                                   poles=np.stack([e["pole"] for _, e in members]) if has_pole else None)
        except ValueError as error:
            for _, entry in members:
                entry["invalid"] = str(error)
            continue
        for k, (_, entry) in enumerate(members):
            entry.update(solved=results.joints[k], error=float(results.error[k]),
                         iterations=int(results.iterations[k]), reached=bool(results.reached[k]))
    requests.clear()


def finish(pending: Pending) -> None:
    """Write every solved chain of one armature: one bulk write of the quaternion channels."""
    wrote = False
    for group, idx, pre, parent, every, entries in pending.groups:
        wrote |= _write(pending, group, idx, pre, parent, every, entries)
    if wrote:
        pending.ob.pose.bones.foreach_set("rotation_quaternion", pending.written.astype(np.float32).ravel())
        pending.ob.update_tag()  # foreach_set does not tag the object: without this the pose lags a frame


def _base_rotations(ob, ev, items, cache: RigCache, count: int) -> np.ndarray:
    """Each bone's rotation without IK (wxyz): keyed or driven channels as evaluated, others as stored."""
    base = cache.stored.copy()
    animated = cache.animated & cache.quaternion[:, None]
    if animated.any():
        evaluated = bulk(ev.pose.bones, "rotation_quaternion", count, 4)
        base[animated] = evaluated[animated]
    used = np.array([cache.index[name] for _, plan in items for name in plan.bones])
    for i in used[~cache.captured[used] | ~cache.quaternion[used]]:
        base[i] = tuple(base_rotation(ob, ev, cache, i))
    norms = np.linalg.norm(base, axis=1, keepdims=True)
    return np.where(norms > 0.0, base / np.where(norms > 0.0, norms, 1.0), [1.0, 0.0, 0.0, 0.0])


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


def _solve(ob, group, idx, pre, parent, every, state: RigState, depsgraph, cache: RigCache,
           requests: Requests) -> dict[int, dict]:
    """Solve each chain of one length, or queue it in ``requests``; invalid chains are recorded and
    left out of the result."""
    n = idx.shape[1]
    seg = np.linalg.norm(np.diff(every, axis=1), axis=2)
    short = seg <= ZERO_LENGTH * np.maximum(1.0, seg.max(axis=1, keepdims=True))
    out: dict[int, dict] = {}
    for c, (chain, plan) in enumerate(group):
        try:
            check_references(ob, chain, plan.bones)
            placed = n - 1 if chain.match_target_rotation else n
            joints = every[c, :placed + 1]
            if short[c, :placed].any():
                raise ChainError(f"Bone '{plan.bones[int(np.argmax(short[c, :placed]))]}' has zero length")
            target = np.array(state.inv_world_m @ world_position(chain.target, chain.target_bone, depsgraph,
                                                                  "Target"))
            pole = None
            if chain.pole is not None:
                pole = np.array(state.inv_world_m @ world_position(chain.pole, chain.pole_bone, depsgraph, "Pole"))
            tolerance = chain.tolerance / state.scale
            entry = {"placed": placed, "joints": joints, "target": target, "tolerance": tolerance}
            if placed < n:  # the tip will take the target's orientation
                entry["frame"] = state.inv_world @ world_point(chain.target, chain.target_bone, depsgraph, "Target")
            out[c] = entry
            limits = None
            if placed and cache.limited[idx[c, :placed]].any():
                limits = limits_for(ob, plan.bones[:placed], plan.bones, list(pre[c]), joints, parent[c])
            if not placed:
                error = float(np.linalg.norm(joints[0] - target))
                entry.update(solved=joints, error=error, iterations=0, reached=error <= tolerance)
            elif chain.solver == 'TWO_BONE' or limits is not None:
                if chain.solver == 'TWO_BONE':
                    result = solve_two_bone(joints, target, pole=pole, tolerance=tolerance, limits=limits,
                                            max_iterations=chain.iterations)
                else:
                    result = solve_chain(joints, target, pole=pole, tolerance=tolerance,
                                         max_iterations=chain.iterations, limits=limits)
                entry.update(solved=result.joints, error=result.error, iterations=result.iterations,
                             reached=result.reached)
            else:
                entry["pole"] = pole
                requests[(placed, pole is not None, tolerance, chain.iterations)].append((chain, entry))
        except (ChainError, ValueError) as error:
            out.pop(c, None)
            diagnostics.record(chain, 'INVALID', str(error))
    return out


def _write(pending: Pending, group, idx, pre, parent, every, solved) -> bool:
    """Turn each bone by its segment's from-to rotation, blend by influence, write; True if any
    quaternion channel went into ``pending.written``."""
    ob, cache, state = pending.ob, pending.cache, pending.state
    base, location, scale, written = pending.base, pending.location, pending.scale, pending.written
    for c in [c for c, entry in solved.items() if "invalid" in entry]:
        diagnostics.record(group[c][0], 'INVALID', solved.pop(c)["invalid"])
    valid = sorted(solved)
    if not valid:
        return False
    n = idx.shape[1]
    vidx, vpre, vparent = idx[valid], pre[valid], parent[valid]
    placed = np.array([solved[c]["placed"] for c in valid])
    joints = every[valid]
    moved = joints.copy()
    for v, c in enumerate(valid):
        moved[v, :placed[v] + 1] = solved[c]["solved"]
    before = np.diff(joints, axis=1)
    after = np.diff(moved, axis=1)
    matched = placed < n  # the tip's last segment does not turn: its orientation is set below
    before[matched, -1] = after[matched, -1] = _Y
    heads = moved[:, :n]
    influence = np.array([group[c][0].influence for c in valid])
    frames = [solved[c].get("frame") for c in valid]
    q = _local_rotations(vpre, vparent, cache.rel[vidx], before, after, heads, frames, base[vidx], influence)
    quaternion = cache.quaternion[vidx]
    written[vidx[quaternion]] = q[quaternion]
    for v, k in zip(*np.nonzero(~quaternion)):  # other rotation modes: converted one bone at a time
        name = cache.names[vidx[v, k]]
        pb = ob.pose.bones[name]
        near = base_channels(pb, ob.evaluated_get(state.depsgraph).pose.bones[name], cache.animated_paths)
        adapter.write_rotation(pb, Quaternion(q[v, k]), near)
    if pending.keep_matrices:  # chains hanging below these start from the pose just written
        final = _forward_kinematics(vparent, cache.rel[vidx], q, location[vidx], scale[vidx])
        for v, c in enumerate(valid):
            for k, name in enumerate(group[c][1].bones):
                state.new_matrices[name] = final[v, k]
    for c in valid:
        entry = solved[c]
        diagnostics.record(group[c][0], 'REACHED' if entry["reached"] else 'UNREACHABLE', "",
                           entry["error"] * state.scale, entry["iterations"])
    return bool(quaternion.any())


def _local_rotations(pre, parent, rel, before, after, heads, frames, base, influence) -> np.ndarray:
    """Each bone's new local rotation (wxyz, (C, n, 4)), batched in numpy.

    A bone turns by the from-to rotation of its segment on top of its pose without IK (so twist and
    offsets ride along); a tip matching its target takes the target's orientation (``frames``); the
    local rotation follows from the full-IK parent, then blends with the pose without IK by influence,
    in the hemisphere of the pose without IK (so channel values depend on the frame's inputs alone).
    """
    n = rel.shape[1]
    before /= np.linalg.norm(before, axis=-1, keepdims=True)
    after /= np.linalg.norm(after, axis=-1, keepdims=True)
    turn = matrices_from_two_vectors(before.reshape(-1, 3), after.reshape(-1, 3)).reshape(len(pre), n, 3, 3)
    ik = pre.copy()
    ik[..., :3, :3] = turn @ pre[..., :3, :3]
    ik[..., :3, 3] = heads
    for v, frame in enumerate(frames):
        if frame is not None:  # the tip takes the target's orientation, keeping its own scale
            ik[v, -1, :3, :3] = unit_columns(frame) * np.linalg.norm(pre[v, -1, :3, :3], axis=0)
    above = np.concatenate([parent[:, None], ik[:, :-1]], axis=1)
    local = np.linalg.inv(above @ rel) @ ik
    rotation = local[..., :3, :3] / np.linalg.norm(local[..., :3, :3], axis=-2, keepdims=True)
    q = quaternion_from_matrix(rotation)
    partial = influence < 1.0
    if partial.any():
        q[partial] = slerp_quaternions(base[partial], q[partial],
                                       np.broadcast_to(influence[partial, None], base[partial].shape[:-1]))
    return np.where(np.einsum("...i,...i->...", q, base)[..., None] < 0.0, -q, q)
