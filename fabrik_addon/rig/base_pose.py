"""The pose without IK: each bone's stored base rotation (and, for stretching chains, scale), captured,
read back, restored and released.

Never the previous IK output, so the pose at a frame depends only on that frame's inputs. A bone given back
(no chain drives it any more) forgets its stored rotation: a chain that takes it again takes the pose it has
then, as a chain added then would, whatever the bone went through before.
"""

from __future__ import annotations

import numpy as np
from mathutils import Matrix, Quaternion, Vector

from .. import adapter, cache
from .inputs import ArmatureFrame
from .plan import ChainError, chain_bones

# Rotation channels as animation left them at this frame, by armature (session uid) and bone name: (as
# first read, as FABRIK IK's last solve left the bone). Once FABRIK IK writes a keyed bone, its evaluated
# channels hold that write until animation is evaluated again (a frame change, an edited action); an edit
# at the same frame (a target moved) read them as the pose without IK and solved from the last result
# (3.9e-4 off after a target moved away and back). A bone whose channels are what FABRIK IK left gives
# the kept ones; any other value is new (animation evaluated, or the user posed the bone) and is kept.
_keyed: dict[int, dict[str, tuple[tuple[float, ...], tuple[float, ...] | None]]] = {}
_read: set[tuple[int, str]] = set()  # (armature, bone) read since the last remember_written: solved now


def forget_keyed() -> None:
    """Animation was evaluated afresh (frame change, action edited, file loaded): read keyed channels again."""
    _keyed.clear()
    _read.clear()


def _kept(uid: int, per: dict, name: str, current: tuple[float, ...]) -> tuple[float, ...]:
    _read.add((uid, name))
    entry = per.get(name)
    if entry is not None and (current == entry[1] or current == entry[0]):  # our own write, or unchanged
        return entry[0]
    per[name] = (current, None)
    return current


def keyed_channels(ob, name: str, evaluated_bone) -> tuple[float, ...]:
    """A bone's rotation channels as animation (or the user) gives them at this frame (see :data:`_keyed`)."""
    per = _keyed.get(ob.session_uid)
    if per is None:
        per = _keyed[ob.session_uid] = {}
    return _kept(ob.session_uid, per, name, tuple(adapter.read_rotation(evaluated_bone)))


def remember_written(ob, bones) -> None:
    """After a solve of armature ``ob`` (``bones``: its pose bones): note what the keyed bones it solved
    now hold (bones it did not solve may be posed by the user meanwhile: their value is news)."""
    if not _keyed:  # no keyed bone read since the frame changed (the usual frame of unkeyed chains)
        return
    uid = ob.session_uid
    per = _keyed.get(uid)
    if not per:
        return
    for name, (kept, _) in per.items():
        if (uid, name) in _read:
            _read.discard((uid, name))
            pb = bones.get(name)
            if pb is not None:
                per[name] = (kept, tuple(adapter.read_rotation(pb)))


def base_channels(pose_bone, evaluated_bone, animated: set[tuple[str, int]]) -> tuple[float, ...]:
    """The bone's rotation channels without IK: keyed or driven ones as animated, the others as stored."""
    path = adapter.rotation_data_path(pose_bone.name, pose_bone.rotation_mode)
    stored = stored_channels(pose_bone)
    keyed = [(path, i) in animated for i in range(len(stored))]
    if not any(keyed):
        return tuple(stored)
    current = keyed_channels(pose_bone.id_data, pose_bone.name, evaluated_bone)
    return tuple(current[i] if keyed[i] else stored[i] for i in range(len(current)))


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
        current = keyed_channels(ob, name, ev.pose.bones[name])
        q = Quaternion([current[k] if mask[k] else q[k] for k in range(4)])
        return q.normalized() if q.magnitude > 0.0 else Quaternion()
    q = q.normalized() if q.magnitude > 0.0 else Quaternion()
    rig_cache.static_base[i] = q  # neither keyed nor driven: the same every frame until captured again
    return q


def base_rotations(ob, ev, used: np.ndarray, rig_cache: cache.RigCache) -> np.ndarray:
    """Every bone's rotation without IK (wxyz, (B, 4)): keyed or driven channels as evaluated, others as
    stored; ``used`` are the bones the chains move, the ones whose base may still need capturing."""
    # Captured first, so that a bone captured now mixes and normalises as on every other frame (through
    # base_rotation it took the mathutils route: 3.6e-7 off at a frame where a chain took its bones again).
    for i in used[~rig_cache.captured[used]].tolist():
        capture_base(ob.pose.bones[rig_cache.names[i]])
    base = rig_cache.stored.copy()
    animated = rig_cache.animated & rig_cache.quaternion[:, None]
    if animated.any():
        evaluated = adapter.bulk_read(ev.pose.bones, "rotation_quaternion", len(rig_cache.names), 4)
        uid = ob.session_uid
        per = _keyed.setdefault(uid, {})
        names = rig_cache.names
        for i in np.flatnonzero(animated.any(axis=1)).tolist():  # as animation gave them (_keyed)
            evaluated[i] = _kept(uid, per, names[i], tuple(evaluated[i].tolist()))
        base[animated] = evaluated[animated]
    for i in used[~rig_cache.quaternion[used]]:
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
    """Store the bone's current rotation as its pose without IK.

    Where the bone's channels are still those the stored rotation gives (a bone given back its pose without IK
    and not posed since; keyed or driven channels, which animation sets, are not compared), the stored rotation
    is kept as it is: giving a bone back and taking it again then changes nothing, not even by the float32
    rounding of a conversion between rotation modes."""
    base = pose_bone.fabrik_base
    channels = adapter.read_rotation(pose_bone)
    rig_cache = cache.peek(pose_bone.id_data)
    if not _shows(pose_bone, Quaternion(base.rotation), channels, rig_cache):
        base.rotation = tuple(adapter.quaternion_from_channels(pose_bone.rotation_mode, channels))
    base.captured = True
    if rig_cache is not None and pose_bone.name in rig_cache.index:
        i = rig_cache.index[pose_bone.name]
        # As stored (float32), as a cache built afresh reads it.
        rig_cache.stored[i], rig_cache.captured[i] = tuple(base.rotation), True
        rig_cache.static_base.pop(i, None)


def _shows(pose_bone, q: Quaternion, channels: tuple, rig_cache) -> bool:
    """Whether the bone's rotation ``channels`` are those ``q`` gives in its rotation mode (float32, as Blender
    stores both), keyed or driven ones (``rig_cache``'s animated paths) not compared."""
    mode = pose_bone.rotation_mode
    given = adapter.channels_from_quaternion(mode, q, channels)
    animated = rig_cache.animated_paths if rig_cache is not None else ()
    path = adapter.rotation_data_path(pose_bone.name, mode)
    return all((path, k) in animated or np.float32(a) == np.float32(b)
               for k, (a, b) in enumerate(zip(given, channels)))


def _forget(pose_bone) -> None:
    """The bone is given back (no chain drives it): whatever it is posed to from now on is its pose without IK,
    taken (:func:`capture_base`) when a chain drives it again."""
    pose_bone.fabrik_base.captured = False
    rig_cache = cache.peek(pose_bone.id_data)
    if rig_cache is not None and pose_bone.name in rig_cache.index:
        i = rig_cache.index[pose_bone.name]
        rig_cache.captured[i] = False
        rig_cache.static_base.pop(i, None)


def restore_base(pose_bone, evaluated_bone=None, animated: set | None = None) -> None:
    """Put back the pose without IK (used when a chain is disabled or removed, or no longer drives the bone):
    the stored one, or with ``evaluated_bone``, its keyed or driven channels as evaluated and the others as
    stored. The bone is the user's again: its stored rotation is forgotten (:func:`_forget`), so a chain
    that takes it again starts from the pose it has then, as a chain added then would (a stored rotation
    kept instead overwrote a pose made by hand meanwhile, and a lone 4-bone chain lengthened over a bone
    posed while it was free ended 0.39 units from one that had never held that bone)."""
    base = pose_bone.fabrik_base
    if not base.captured:
        return
    if evaluated_bone is not None and animated:
        setattr(pose_bone, adapter.rotation_path(pose_bone.rotation_mode),
                base_channels(pose_bone, evaluated_bone, animated))
    else:
        adapter.write_rotation(pose_bone, Quaternion(base.rotation), adapter.read_rotation(pose_bone))
    _forget(pose_bone)


def base_scale(arm: ArmatureFrame, name: str) -> Vector:
    """A stretching chain bone's scale without IK: keyed or driven channels as evaluated, the others as
    stored (captured from the bone on first use), never the stretch written on the previous frame."""
    pb = arm.bones[name]
    base = pb.fabrik_base
    if not base.scale_captured:
        capture_scale(pb)
    scale = Vector(base.scale)
    path = adapter.bone_path(name, "scale")
    animated = arm.cache.animated_paths
    if (path, 0) in animated or (path, 1) in animated or (path, 2) in animated:
        current = arm.ev_bones[name].scale
        scale = Vector([current[k] if (path, k) in animated else scale[k] for k in range(3)])
    return scale


def capture_scale(pose_bone) -> None:
    """Store the bone's current scale as its scale without IK (stretch writes on top of it)."""
    pose_bone.fabrik_base.scale = tuple(pose_bone.scale)
    pose_bone.fabrik_base.scale_captured = True
    rig_cache = cache.peek(pose_bone.id_data)
    if rig_cache is not None and pose_bone.name in rig_cache.index:
        rig_cache.scaled.add(rig_cache.index[pose_bone.name])


def restore_scale(pose_bone) -> None:
    """Put back the scale without IK and forget it, so a later stretch captures the scale of that time."""
    base = pose_bone.fabrik_base
    if base.scale_captured:
        pose_bone.scale = tuple(base.scale)
        base.scale_captured = False
        rig_cache = cache.peek(pose_bone.id_data)
        if rig_cache is not None and pose_bone.name in rig_cache.index:
            rig_cache.scaled.discard(rig_cache.index[pose_bone.name])


def release(ob, chains, ev=None, rotations: bool = True) -> None:
    """Give the bones of ``chains`` back their pose without IK (rotation and, where stretched, scale),
    except bones another active chain still drives (its scale: another active stretching chain).
    ``ev``: the evaluated armature, whose keyed or driven rotation channels then count, as in a solve."""
    active, stretching = set(), set()
    if ob.fabrik.enabled:
        for chain in ob.fabrik.chains:
            if chain.enabled and all(chain != c for c in chains):
                try:
                    names = chain_bones(ob, chain)
                except ChainError:
                    continue
                active.update(names)
                if chain.use_stretch:
                    stretching.update(names)
    for chain in chains:
        try:
            names = chain_bones(ob, chain)
        except ChainError:
            continue
        animated = cache.get(ob).animated_paths if ev is not None else None
        for name in names:
            if rotations and name not in active:
                restore_base(ob.pose.bones[name], None if ev is None else ev.pose.bones.get(name), animated)
            if name not in stretching:
                restore_scale(ob.pose.bones[name])


def stretched_local(parent: Matrix, rotation: Matrix, pre: Matrix, base: Vector,
                    grow: float) -> tuple[Quaternion, Vector]:
    """A bone's local rotation and scale so that, under ``parent`` (the armature-space parent matrix
    times the rest offset, stretched parents included), its Y axis points exactly along ``rotation``'s
    Y and is ``grow`` times as long as in its pose without IK (``pre``).

    The local Y axis is ``v = parent^-1 d`` for the wanted direction ``d``; the rotation keeps that
    axis exactly (X made orthogonal to it, Z their cross product) and the scale Y is
    ``grow * |pre Y| * |v|``, the composed length then being ``grow * |pre Y|``. X and Z keep the
    scale without IK.
    """
    local = parent.to_3x3().inverted() @ rotation
    y = local.col[1]
    v = y.length
    y = y / v
    x = local.col[0]
    x = (x - y * x.dot(y)).normalized()
    turn = Matrix((x, y, x.cross(y))).transposed()
    return turn.to_quaternion(), Vector((base.x, grow * pre.col[1].xyz.length * v, base.z))
