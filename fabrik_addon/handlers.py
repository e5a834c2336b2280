"""Frame-change and depsgraph handlers that solve every armature with chains.

Handlers never raise: a failing chain is marked invalid by :mod:`.rig`, anything unexpected is printed.
Work is skipped when nothing an armature's solve reads has changed (its *fingerprint*), which is also
how the update caused by our own pose writes is recognised and ignored.
"""

from __future__ import annotations

import traceback

import bpy
from bpy.app.handlers import persistent

from . import rig

_busy = False
_fingerprints: dict[str, tuple] = {}
_relevant: set[str] = set()
_suspended: set[str] = set()  # armatures whose chains are paused, e.g. while a bake replays its keys


def request_solve() -> None:
    """Forget what was solved so the next update solves every rig again."""
    _fingerprints.clear()
    _relevant.clear()


def rigs(scene):
    for ob in scene.objects:
        if ob.type == 'ARMATURE' and ob.fabrik.enabled and len(ob.fabrik.chains) and ob.name not in _suspended:
            yield ob


class suspended:
    """Context manager: no solving for the named armatures inside the block."""

    def __init__(self, names) -> None:
        self.names = set(names) - _suspended

    def __enter__(self) -> None:
        _suspended.update(self.names)

    def __exit__(self, *_exc) -> None:
        _suspended.difference_update(self.names)
        request_solve()


def fingerprint(ob, depsgraph) -> tuple:
    """Everything one armature's solve reads, as plain values."""
    ev = ob.evaluated_get(depsgraph)
    scene = depsgraph.scene
    parts: list = [scene.frame_current, scene.frame_subframe, tuple(map(tuple, ev.matrix_world))]
    for chain in ob.fabrik.chains:
        parts.append((chain.enabled, chain.tip_bone, chain.chain_length, chain.solver, chain.target_bone,
                      chain.pole_bone, chain.iterations, chain.tolerance, chain.match_target_rotation,
                      chain.influence, chain.weight))
        for target in (chain.target, chain.pole):
            parts.append(None if target is None else (target.name, tuple(map(tuple, target.evaluated_get(
                depsgraph).matrix_world))))
        bone = ob.data.bones.get(chain.tip_bone)
        while bone is not None:
            pb = ob.pose.bones[bone.name]
            eb = ev.pose.bones[bone.name]
            limit = pb.fabrik_limit
            parts.append((tuple(pb.rotation_quaternion), tuple(pb.rotation_euler), tuple(pb.rotation_axis_angle),
                          pb.rotation_mode, tuple(pb.fabrik_base.rotation), tuple(eb.location), tuple(eb.scale),
                          tuple(eb.rotation_quaternion), tuple(eb.rotation_euler), limit.mode, limit.cone_left,
                          limit.cone_right, limit.cone_up, limit.cone_down, limit.hinge_min, limit.hinge_max))
            bone = bone.parent
        for target, name in ((chain.target, chain.target_bone), (chain.pole, chain.pole_bone)):
            if target is not None and target.type == 'ARMATURE' and name and name in target.pose.bones:
                parts.append(tuple(map(tuple, target.evaluated_get(depsgraph).pose.bones[name].matrix)))
    return tuple(parts)


def solve_scene(scene, depsgraph) -> None:
    """Solve every rig in ``scene`` whose inputs changed since its last solve."""
    global _busy
    if _busy:
        return
    _busy = True
    try:
        relevant = set()
        for ob in rigs(scene):
            relevant.add(ob.name)
            for chain in ob.fabrik.chains:
                relevant.update(t.name for t in (chain.target, chain.pole) if t is not None)
            before = fingerprint(ob, depsgraph)
            if _fingerprints.get(ob.name) == before:
                continue
            rig.solve_armature(ob, depsgraph)
            _fingerprints[ob.name] = fingerprint(ob, depsgraph)
        _relevant.clear()
        _relevant.update(relevant)
    except Exception:  # a handler must never raise into Blender
        traceback.print_exc()
    finally:
        _busy = False


@persistent
def on_frame_change(scene, depsgraph) -> None:
    solve_scene(scene, depsgraph)


@persistent
def on_depsgraph_update(scene, depsgraph) -> None:
    if _busy:
        return
    if not _relevant:
        solve_scene(scene, depsgraph)
        return
    for update in depsgraph.updates:
        data = update.id
        if isinstance(data, bpy.types.Armature):
            request_solve()
            break
        if isinstance(data, bpy.types.Object) and data.name in _relevant:
            break
    else:
        return
    solve_scene(scene, depsgraph)


@persistent
def on_file_change(*_args) -> None:
    request_solve()


HANDLERS = (
    ("frame_change_post", on_frame_change),
    ("depsgraph_update_post", on_depsgraph_update),
    ("load_post", on_file_change),
    ("undo_post", on_file_change),
    ("redo_post", on_file_change),
)


def _same(a, b) -> bool:
    return getattr(a, "__module__", None) == b.__module__ and getattr(a, "__name__", None) == b.__name__


def install() -> None:
    """Add our handlers, first removing any copy a reload left behind (matched by module and name)."""
    remove()
    for event, function in HANDLERS:
        getattr(bpy.app.handlers, event).append(function)
    request_solve()


def remove() -> None:
    for event, function in HANDLERS:
        handlers = getattr(bpy.app.handlers, event)
        for existing in [h for h in handlers if _same(h, function)]:
            handlers.remove(existing)
