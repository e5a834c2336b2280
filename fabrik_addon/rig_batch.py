"""Every standalone chain of one armature in one pass.

Bulk reads (``foreach_get``), pose math batched across chains of equal length, one
:func:`.solver.solve_chains` call per chain shape (two-bone and limited chains are solved one by one),
one bulk write (``foreach_set``) of the quaternion channels. Per-bone Blender calls cost 1.6-3 us
each, and Blender's own pose evaluation 3-7 us per bone, so anything per bone here is what limits a
crowd of chains.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from mathutils import Quaternion

from . import adapter, diagnostics
from .cache import RigCache
from .rig import (
    ZERO_LENGTH,
    ChainError,
    RigState,
    base_channels,
    capture_base,
    check_references,
    limits_for,
    unit_columns,
    world_point,
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


def solve_standalone(ob, ev, items: list[tuple], state: RigState, depsgraph, cache: RigCache) -> None:
    """Solve ``items`` = [(chain, plan), ...] (chains sharing no bones) and write their rotations."""
    count = len(cache.names)
    location = bulk(ev.pose.bones, "location", count, 3)
    scale = bulk(ev.pose.bones, "scale", count, 3)
    base = _base_rotations(ob, ev, items, cache, count)
    written = bulk(ob.pose.bones, "rotation_quaternion", count, 4)
    evaluated_matrices = None
    by_length: dict[int, list[tuple]] = defaultdict(list)
    for chain, plan in items:
        by_length[len(plan.bones)].append((chain, plan))
    wrote = False
    for group in by_length.values():
        idx = np.array([[cache.index[b] for b in plan.bones] for _, plan in group])
        parent = np.empty((len(group), 4, 4))
        for c in range(len(group)):
            p = cache.parents[idx[c, 0]]
            if p < 0:
                parent[c] = np.eye(4)
            elif cache.names[p] in state.new_matrices:
                parent[c] = state.new_matrices[cache.names[p]]
            else:
                if evaluated_matrices is None:
                    evaluated_matrices = bulk(ev.pose.bones, "matrix", count, 16).reshape(-1, 4, 4).transpose(0, 2, 1)
                parent[c] = evaluated_matrices[p]
        pre = _forward_kinematics(parent, cache.rel[idx], base[idx], location[idx], scale[idx])
        tails = np.einsum("cij,cj->ci", pre[:, -1, :3, :3], cache.lengths[idx[:, -1], None] * _Y) + pre[:, -1, :3, 3]
        solved = _solve(ob, group, idx, pre, parent, tails, state, depsgraph)
        wrote |= _write(ob, group, idx, pre, parent, solved, base, location, scale, written, state, cache)
    if wrote:
        ob.pose.bones.foreach_set("rotation_quaternion", written.astype(np.float32).ravel())
        ob.update_tag()  # foreach_set does not tag the object: without this the pose lags a frame


def _base_rotations(ob, ev, items, cache: RigCache, count: int) -> np.ndarray:
    """Each bone's rotation without IK (wxyz): keyed or driven channels as evaluated, others as stored."""
    base = cache.stored.copy()
    animated = cache.animated & cache.quaternion[:, None]
    if animated.any():
        evaluated = bulk(ev.pose.bones, "rotation_quaternion", count, 4)
        base[animated] = evaluated[animated]
    for _, plan in items:
        for name in plan.bones:
            i = cache.index[name]
            pb = ob.pose.bones[name]
            if not cache.captured[i]:
                capture_base(pb)
                cache.stored[i], cache.captured[i] = pb.fabrik_base.rotation, True
                if cache.quaternion[i]:
                    base[i] = np.where(animated[i], base[i], cache.stored[i])
            if not cache.quaternion[i]:
                channels = base_channels(pb, ev.pose.bones[name], cache.animated_paths)
                base[i] = tuple(adapter.quaternion_from_channels(pb.rotation_mode, channels))
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


def _solve(ob, group, idx, pre, parent, tails, state: RigState, depsgraph) -> dict[int, dict]:
    """Solve each chain of one length; invalid chains are recorded and left out of the result."""
    n = idx.shape[1]
    heads = pre[..., :3, 3]
    out: dict[int, dict] = {}
    batches: dict[tuple, list[int]] = defaultdict(list)
    for c, (chain, plan) in enumerate(group):
        try:
            check_references(ob, chain, plan.bones)
            placed = n - 1 if chain.match_target_rotation else n
            joints = heads[c, :placed + 1] if placed < n else np.vstack([heads[c], tails[c]])
            if placed:
                seg = np.linalg.norm(np.diff(joints, axis=0), axis=1)
                if (seg <= ZERO_LENGTH * max(1.0, float(seg.max()))).any():
                    raise ChainError(f"Bone '{plan.bones[int(np.argmin(seg))]}' has zero length")
            target_world = world_point(chain.target, chain.target_bone, depsgraph, "Target")
            target = (state.inv_world @ target_world[:, 3])[:3]
            pole = None
            if chain.pole is not None:
                pole = (state.inv_world @ world_point(chain.pole, chain.pole_bone, depsgraph, "Pole")[:, 3])[:3]
            tolerance = chain.tolerance / state.scale
            entry = {"placed": placed, "joints": joints, "target": target, "frame": state.inv_world @ target_world,
                     "tolerance": tolerance}
            out[c] = entry
            limits = None
            if placed:
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
                batches[(placed, pole is not None, tolerance, chain.iterations)].append(c)
        except (ChainError, ValueError) as error:
            out.pop(c, None)
            diagnostics.record(chain, 'INVALID', str(error))
    for (_, has_pole, tolerance, iterations), members in batches.items():
        try:
            results = solve_chains(np.stack([out[c]["joints"] for c in members]),
                                   np.stack([out[c]["target"] for c in members]), tolerance=tolerance,
                                   max_iterations=iterations,
                                   poles=np.stack([out[c]["pole"] for c in members]) if has_pole else None)
        except ValueError as error:
            for c in members:
                out.pop(c)
                diagnostics.record(group[c][0], 'INVALID', str(error))
            continue
        for k, c in enumerate(members):
            out[c].update(solved=results.joints[k], error=float(results.error[k]),
                          iterations=int(results.iterations[k]), reached=bool(results.reached[k]))
    return out


def _write(ob, group, idx, pre, parent, solved, base, location, scale, written, state: RigState,
           cache: RigCache) -> bool:
    """Turn each bone by its segment's from-to rotation, blend by influence, write; True if any
    quaternion channel went into ``written``."""
    valid = sorted(solved)
    if not valid:
        return False
    n = idx.shape[1]
    vidx, vpre, vparent = idx[valid], pre[valid], parent[valid]
    before = np.tile(_Y, (len(valid), n, 1))
    after = before.copy()
    heads = vpre[..., :3, 3].copy()
    for v, c in enumerate(valid):
        entry = solved[c]
        p = entry["placed"]
        before[v, :p] = np.diff(entry["joints"], axis=0)
        after[v, :p] = np.diff(entry["solved"], axis=0)
        heads[v] = entry["solved"][:n]
    before /= np.linalg.norm(before, axis=-1, keepdims=True)
    after /= np.linalg.norm(after, axis=-1, keepdims=True)
    turn = matrices_from_two_vectors(before.reshape(-1, 3), after.reshape(-1, 3)).reshape(len(valid), n, 3, 3)
    ik = vpre.copy()
    ik[..., :3, :3] = turn @ vpre[..., :3, :3]
    ik[..., :3, 3] = heads
    for v, c in enumerate(valid):
        if solved[c]["placed"] < n:  # the tip takes the target's orientation, keeping its own scale
            ik[v, -1, :3, :3] = unit_columns(solved[c]["frame"]) * np.linalg.norm(vpre[v, -1, :3, :3], axis=0)
    above = np.concatenate([vparent[:, None], ik[:, :-1]], axis=1)
    local = np.linalg.inv(above @ cache.rel[vidx]) @ ik
    rotation = local[..., :3, :3] / np.linalg.norm(local[..., :3, :3], axis=-2, keepdims=True)
    q = quaternion_from_matrix(rotation)
    influence = np.array([group[c][0].influence for c in valid])
    partial = influence < 1.0
    if partial.any():
        q[partial] = slerp_quaternions(base[vidx[partial]], q[partial],
                                       np.broadcast_to(influence[partial, None], vidx[partial].shape))
    # The hemisphere of the pose without IK: the channel values, not only the pose, then depend on the
    # frame's inputs alone.
    q = np.where(np.einsum("...i,...i->...", q, base[vidx])[..., None] < 0.0, -q, q)
    final = _forward_kinematics(vparent, cache.rel[vidx], q, location[vidx], scale[vidx])
    wrote = False
    for v, c in enumerate(valid):
        chain, plan = group[c]
        for k, name in enumerate(plan.bones):
            state.new_matrices[name] = final[v, k]
            i = vidx[v, k]
            if cache.quaternion[i]:
                written[i] = q[v, k]
                wrote = True
            else:
                pb = ob.pose.bones[name]
                near = base_channels(pb, ob.evaluated_get(state.depsgraph).pose.bones[name], cache.animated_paths)
                adapter.write_rotation(pb, Quaternion(q[v, k]), near)
        entry = solved[c]
        diagnostics.record(chain, 'REACHED' if entry["reached"] else 'UNREACHABLE', "",
                           entry["error"] * state.scale, entry["iterations"])
    return wrote
