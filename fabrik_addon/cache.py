"""What does not change from frame to frame, per armature, as numpy arrays.

Keyed by the object's session uid (stable when objects are renamed or swap names) and checked against
its armature data's session uid and bone count (data swapped or bones deleted). Cleared on file load,
undo, armature edits and any change of chain settings; never holds bpy objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from mathutils import Matrix

from . import adapter, compat


@dataclass
class RigCache:
    """Rest data of one armature's bones, in ``pose.bones`` order."""

    names: list[str]
    index: dict[str, int]
    parents: np.ndarray  # (B,) parent bone index, -1 for root bones
    rel: np.ndarray  # (B, 4, 4) rest matrix relative to the parent's rest matrix
    lengths: np.ndarray  # (B,)
    modes: list[str]
    quaternion: np.ndarray  # (B,) bool: rotation mode QUATERNION
    stored: np.ndarray  # (B, 4) stored base rotation (wxyz), identity where none was captured
    captured: np.ndarray  # (B,) bool
    animated: np.ndarray  # (B, 4) bool: rotation channel components keyed or driven
    animated_paths: set[tuple[str, int]]
    action_key: tuple
    data_uid: int = -1  # session uid of the armature data the cache was built from
    limited: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # (B,) joint limit set
    # (B,) 1.0 where the bone's location channels move it, 0.0 for a connected bone, whose location Blender
    # never composes (BKE_pchan_to_mat4): see :func:`.rig.inputs.basis_location`.
    located: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # Bones with a stored base scale (stretched now or until now); a set: numpy's any() costs ~3 us a call.
    scaled: set[int] = field(default_factory=set)
    rel_matrices: list = field(default_factory=list)  # ``rel`` as mathutils matrices, for small groups
    # Each ``rel``'s rotation, conjugated (mathutils Quaternions): the few-chain path's local rotations.
    rel_inverse_rotations: list = field(default_factory=list)
    plans: dict = field(default_factory=dict)  # chain plans by settings generation
    # Base rotations (mathutils, never mutated by readers) of bones whose rotation is neither keyed
    # nor driven; dropped when the base is captured again or the action changes.
    static_base: dict = field(default_factory=dict)
    # The few-chain path's last write of each bone's quaternion channels (row -> wxyz tuple): the channels
    # are read back to skip an unchanged write only where the solve repeats it (.rig.small._write).
    written: dict = field(default_factory=dict)
    # The layout's ``driven`` that :func:`.rig.solve.release_dropped` last recorded for this armature: the
    # usual frame compares it without reading the object's session uid (~1k instructions a frame).
    released_for: frozenset | None = None
    # ``(layout, bones)``: the bones whose new pose matrices chains hanging below read (.rig.inputs.ArmatureFrame.kept)
    kept: tuple = ()
    # A key or driver animates a chain setting (a ``fabrik.`` path): settings are read every frame
    # (.rig.plan.layout), else once per layout, since any other change of them calls an update.
    settings_animated: bool = False


_caches: dict[int, RigCache] = {}
_generation = 0
_edits = 0  # edits of armatures (pose, object) seen in depsgraph updates, not our own writes


def generation() -> int:
    """Bumped whenever chain settings change, so cached chain plans are rebuilt."""
    return _generation


def edits() -> int:
    """Bumped by :func:`edited`: a pose without IK kept from an earlier solve whose bones' location and
    scale are neither keyed nor driven holds while it is the same (.rig.small._start_pose)."""
    return _edits


def edited() -> None:
    """An armature was edited (a depsgraph update that is not the echo of our own write)."""
    global _edits
    _edits += 1


def invalidate() -> None:
    global _generation
    _caches.clear()
    _generation += 1


def action_key(ob) -> tuple:
    adt = ob.animation_data
    if adt is None:
        return (None, 0, 0, 0)
    strips = sum(len(track.strips) + 1000 * track.mute for track in adt.nla_tracks)
    return (adt.action.session_uid if adt.action else None, len(compat.animated_fcurves(ob)), len(adt.drivers),
            strips)


def peek(ob) -> RigCache | None:
    """The cache of armature object ``ob`` if it has one now (never builds one)."""
    return _caches.get(ob.session_uid)


def drop(ob) -> None:
    """Forget ``ob``'s cache (bones renamed behind its back): the next :func:`get` rebuilds it."""
    _caches.pop(ob.session_uid, None)


def get(ob, bones=None, count: bool = True) -> RigCache:
    """The cache of armature object ``ob``, built on first use or after the action changed (``bones``:
    its ``pose.bones``, when already read).

    ``count``: rebuild it when the number of bones changed. Counting walks the whole collection (68 us
    a frame at 1000 bones, more than the solve of a 2-bone arm), so the per-frame solve skips it: the
    handlers drop every cache when the depsgraph reports an edited armature (:mod:`.handlers`), which
    adding or deleting bones always does.
    """
    key = action_key(ob)
    cache = _caches.get(ob.session_uid)
    if cache is None or cache.data_uid != ob.data.session_uid \
            or (count and len(cache.names) != len(ob.pose.bones if bones is None else bones)):
        cache = _caches[ob.session_uid] = _build(ob, key)
    elif cache.action_key != key:
        cache.animated, cache.animated_paths = _animated(ob, cache)
        cache.settings_animated = _settings_animated(cache.animated_paths)
        cache.action_key = key
        cache.static_base.clear()
    return cache


def _build(ob, key: tuple) -> RigCache:
    bones = ob.data.bones
    names = [pb.name for pb in ob.pose.bones]
    index = {name: i for i, name in enumerate(names)}
    count = len(names)
    by_bone = {b.name: k for k, b in enumerate(bones)}
    order = [by_bone[name] for name in names]
    local64 = adapter.bulk_matrices(bones, "matrix_local", count)[order]
    parents = np.array([index[bones[name].parent.name] if bones[name].parent else -1 for name in names], dtype=int)
    rel = local64.copy()
    has_parent = parents >= 0
    rel[has_parent] = np.linalg.inv(local64[parents[has_parent]]) @ local64[has_parent]
    lengths = np.array([bones[name].length for name in names])
    located = np.array([0.0 if bones[name].use_connect else 1.0 for name in names])
    modes = [pb.rotation_mode for pb in ob.pose.bones]
    stored = np.tile([1.0, 0.0, 0.0, 0.0], (count, 1))
    captured = np.zeros(count, dtype=bool)
    limited = np.zeros(count, dtype=bool)
    scaled = set()
    # Only bones that hold the add-on's properties are read: reading creates them (compat.has_group).
    for i, pb in enumerate(ob.pose.bones):
        if compat.has_group(pb, "fabrik_base"):
            base = pb.fabrik_base
            if base.captured:
                stored[i] = base.rotation
                captured[i] = True
            if base.scale_captured:
                scaled.add(i)
        if compat.has_group(pb, "fabrik_limit"):
            limited[i] = pb.fabrik_limit.mode != 'NONE'
    cache = RigCache(names, index, parents, rel, lengths, modes, np.array([m == 'QUATERNION' for m in modes]),
                     stored, captured, np.zeros((count, 4), dtype=bool), set(), key)
    cache.animated, cache.animated_paths = _animated(ob, cache)
    cache.settings_animated = _settings_animated(cache.animated_paths)
    cache.data_uid = ob.data.session_uid
    cache.limited = limited
    cache.located = located
    cache.scaled = scaled
    cache.rel_matrices = [Matrix(m.tolist()) for m in rel]
    cache.rel_inverse_rotations = [m.to_quaternion().conjugated() for m in cache.rel_matrices]
    return cache


def _settings_animated(paths: set[tuple[str, int]]) -> bool:
    return any(path.startswith("fabrik.") for path, _ in paths)


def _animated(ob, cache: RigCache) -> tuple[np.ndarray, set[tuple[str, int]]]:
    paths = set()
    for fcurve in (*compat.animated_fcurves(ob), *compat.nla_fcurves(ob)):
        paths.add((fcurve.data_path, fcurve.array_index))
    if ob.animation_data is not None:
        for fcurve in ob.animation_data.drivers:
            paths.add((fcurve.data_path, fcurve.array_index))
    mask = np.zeros((len(cache.names), 4), dtype=bool)
    for i, (name, mode) in enumerate(zip(cache.names, cache.modes)):
        prefix = adapter.rotation_data_path(name, mode)
        for k in range(4):
            mask[i, k] = (prefix, k) in paths
    return mask, paths
