"""The pose without IK: each bone's stored base rotation, captured, read back, restored and released.

Never the previous IK output, so the pose at a frame depends only on that frame's inputs.
"""

from __future__ import annotations

import numpy as np
from mathutils import Quaternion

from .. import adapter, cache
from .inputs import ArmatureFrame
from .plan import ChainError, chain_bones


def base_channels(pose_bone, evaluated_bone, animated: set[tuple[str, int]]) -> tuple[float, ...]:
    """The bone's rotation channels without IK: keyed or driven ones as evaluated, the others as stored."""
    mode = pose_bone.rotation_mode
    path = f'pose.bones["{pose_bone.name}"].{adapter.rotation_path(mode)}'
    stored = stored_channels(pose_bone)
    current = adapter.read_rotation(evaluated_bone)
    return tuple(current[i] if (path, i) in animated else stored[i] for i in range(len(current)))


def base_rotation(ob, ev, rig_cache: cache.RigCache, i: int) -> Quaternion:
    """Bone ``i``'s rotation without IK as a unit quaternion (see :func:`base_channels`).

    Captures the bone's base pose on first use. Quaternion bones mix the stored rotation with their
    keyed or driven components; other rotation modes are converted from their channels.
    """
    q = rig_cache.static_base.get(i)
    if q is not None:
        return q
    name = rig_cache.names[i]
    if not rig_cache.captured[i]:
        capture_base(ob.pose.bones[name])  # also fills the cache's stored row
    if not rig_cache.quaternion[i]:
        pb = ob.pose.bones[name]
        return adapter.quaternion_from_channels(pb.rotation_mode,
                                                base_channels(pb, ev.pose.bones[name], rig_cache.animated_paths))
    q = Quaternion(rig_cache.stored[i].tolist())
    mask = rig_cache.animated[i]
    if mask.any():
        current = ev.pose.bones[name].rotation_quaternion
        q = Quaternion([current[k] if mask[k] else q[k] for k in range(4)])
        return q.normalized() if q.magnitude > 0.0 else Quaternion()
    q = q.normalized() if q.magnitude > 0.0 else Quaternion()
    rig_cache.static_base[i] = q  # neither keyed nor driven: the same every frame until captured again
    return q


def base_rotations(ob, ev, used: np.ndarray, rig_cache: cache.RigCache) -> np.ndarray:
    """Every bone's rotation without IK (wxyz, (B, 4)): keyed or driven channels as evaluated, others as
    stored; ``used`` are the bones the chains move, the ones whose base may still need capturing."""
    base = rig_cache.stored.copy()
    animated = rig_cache.animated & rig_cache.quaternion[:, None]
    if animated.any():
        evaluated = adapter.bulk_read(ev.pose.bones, "rotation_quaternion", len(rig_cache.names), 4)
        base[animated] = evaluated[animated]
    for i in used[~rig_cache.captured[used] | ~rig_cache.quaternion[used]]:
        base[i] = tuple(base_rotation(ob, ev, rig_cache, i))
    norms = np.sqrt(np.einsum("ij,ij->i", base, base))[:, None]
    return np.where(norms > 0.0, base / np.where(norms > 0.0, norms, 1.0), [1.0, 0.0, 0.0, 0.0])


def write_near_base(arm: ArmatureFrame, name: str, q: Quaternion) -> None:
    """Write ``q`` into a bone's own rotation channels, continuous with its channels without IK."""
    pb = arm.bones[name]
    adapter.write_rotation(pb, q, base_channels(pb, arm.ev_bones[name], arm.cache.animated_paths))


def stored_channels(pose_bone) -> tuple[float, ...]:
    """The stored base rotation in the bone's own rotation mode (captured from its pose on first use)."""
    base = pose_bone.fabrik_base
    if not base.captured:
        capture_base(pose_bone)
    q = Quaternion(base.rotation)
    return adapter.channels_from_quaternion(pose_bone.rotation_mode, q, adapter.read_rotation(pose_bone))


def capture_base(pose_bone) -> None:
    """Store the bone's current rotation as its pose without IK."""
    q = adapter.quaternion_from_channels(pose_bone.rotation_mode, adapter.read_rotation(pose_bone))
    pose_bone.fabrik_base.rotation = tuple(q)
    pose_bone.fabrik_base.captured = True
    rig_cache = cache.peek(pose_bone.id_data.name)
    if rig_cache is not None and pose_bone.name in rig_cache.index:
        i = rig_cache.index[pose_bone.name]
        rig_cache.stored[i], rig_cache.captured[i] = tuple(q), True
        rig_cache.static_base.pop(i, None)


def restore_base(pose_bone) -> None:
    """Put back the stored pose without IK (used when a chain is disabled or removed)."""
    base = pose_bone.fabrik_base
    if base.captured:
        adapter.write_rotation(pose_bone, Quaternion(base.rotation), adapter.read_rotation(pose_bone))


def release(ob, chains) -> None:
    """Give the bones of ``chains`` back their stored pose, except bones another active chain still drives."""
    active = set()
    if ob.fabrik.enabled:
        for chain in ob.fabrik.chains:
            if chain.enabled and all(chain != c for c in chains):
                try:
                    active.update(chain_bones(ob, chain))
                except ChainError:
                    pass
    for chain in chains:
        try:
            names = chain_bones(ob, chain)
        except ChainError:
            continue
        for name in names:
            if name not in active:
                restore_base(ob.pose.bones[name])
