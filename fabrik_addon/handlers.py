"""Frame-change and depsgraph handlers that solve every armature with chains.

Handlers never raise: a failing chain is marked invalid by :mod:`.rig.solve`, anything unexpected is printed.
A frame change always solves. An edit solves the rigs it concerns: a target or pole moved, a rig's
settings or pose changed, but not the update our own pose write causes (its *echo*).
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field

import bpy
from bpy.app.handlers import persistent

from . import cache, diagnostics
from .rig import base_pose, solve


@dataclass
class HandlerState:
    """What the handlers remember between calls: names and pointers, and the rigs' objects (Blender
    invalidates a kept object when it frees it: deleted, undone, another file loaded; reading it then raises
    ReferenceError, which :func:`rigs` takes as "look again")."""

    busy: bool = False  # a solve is running: the updates it causes are not new edits
    force: bool = True  # settings changed: solve every rig at the next update
    echo: set[str] = field(default_factory=set)  # armatures whose next update is the one our own write caused
    # Target or pole object (by pointer: stable when it is renamed) -> armatures that read it.
    feeds: dict[int, set[str]] = field(default_factory=dict)
    feeds_key: tuple = ()  # (settings generation, [rig names]) that ``feeds`` was read under
    feed_objects: list = field(default_factory=list)  # those target and pole objects
    rigs_key: tuple = ()  # (scene's session_uid, settings generation) that ``rig_names`` was read under
    rig_names: set[str] = field(default_factory=set)  # the armatures with chains then
    rig_objects: list[tuple] = field(default_factory=list)  # (name, object) of each, read under ``rigs_key``
    suspended: set[str] = field(default_factory=set)  # armatures paused, e.g. while a bake replays its keys
    frame: float | None = None  # the scene frame of the last solve (animation is evaluated afresh at another)
    scene: int = -1  # session uid of the scene ``unlinked`` belongs to
    unlinked: set[str] = field(default_factory=set)  # armatures once listed, not in the scene at the last look


_state = HandlerState()
_NOTHING: frozenset[str] = frozenset()


def request_solve() -> None:
    """Settings changed: rebuild cached plans and solve every rig at the next update."""
    _state.force = True
    cache.invalidate()


def rigs(scene, depsgraph) -> list[tuple]:
    """Armatures to solve, as ``(name, object, its chains, its evaluated object)``: with chains, switched
    on, not paused, not in Edit Mode (whose bones are being changed; leaving it updates the Armature,
    which solves again).

    Walking every object of the scene costs ~0.5 us each, every frame: 1.5 ms with a thousand
    targets. The armatures with chains are kept until chain settings change (which
    adding chains does), the scene changes, one of them goes missing, a collection or scene is
    updated (objects linked or unlinked), or an armature with chains that is not on the list shows
    up in an update (a duplicate or an appended rig). Each property read costs about a microsecond:
    the name and the chains are read once and handed on. A rig the depsgraph does not evaluate (not in
    the view layer: unlinked, excluded, disabled in viewports) is neither solved nor written.
    """
    key = (scene.session_uid, cache.generation())
    if _state.rigs_key == key:
        # The objects found then, not looked up by name: bpy.data.objects.get walks the file's objects
        # (156 us a frame for a rig named last of 1000 objects, 988 us of 5000).
        found = _state.rig_objects
        for name, ob in found:
            try:
                same = ob.name == name
            except ReferenceError:  # freed: deleted, undone, another file loaded
                same = False
            if not same:  # renamed or freed: look again
                _state.rigs_key = ()
                return rigs(scene, depsgraph)
    else:
        found = [(ob.name, ob) for ob in scene.objects if ob.type == 'ARMATURE' and len(ob.fabrik.chains)]
        listed = {name for name, _ in found}
        if _state.scene != key[0]:
            _state.scene, _state.unlinked = key[0], set()
        # Rigs of this scene unlinked since (a collection unlinked by a script sends no update) stay on the
        # list, skipped while not evaluated, so that relinking them (no update either) solves them again.
        objects = bpy.data.objects
        _state.unlinked = {name for name in (_state.unlinked | _state.rig_names) - listed
                           if (ob := objects.get(name)) is not None and ob.type == 'ARMATURE'}
        found += [(name, objects[name]) for name in _state.unlinked]
        _state.rigs_key, _state.rig_names, _state.rig_objects = key, {name for name, _ in found}, found
    out: list = []
    suspended = _state.suspended
    for name, ob in found:
        if ob.type != 'ARMATURE' or name in suspended or ob.mode == 'EDIT':
            continue
        settings = ob.fabrik
        chains = list(settings.chains)  # listed once: the solve indexes them per chain (a list is cheaper)
        if not chains:  # its chains removed since (by a script, which calls no update)
            solve.release_all(ob, depsgraph)
            continue
        if not settings.enabled:
            solve.leave_unsolved(ob, "FABRIK IK is switched off for this armature", depsgraph)
        elif ob.data.pose_position == 'REST':  # Blender shows the rest pose: nothing to solve or write
            solve.leave_unsolved(ob, "The armature shows its Rest Position", depsgraph)
        elif not (ev := ob.evaluated_get(depsgraph)).is_evaluated:  # unlinked, excluded or disabled: not shown
            solve.leave_unsolved(ob, NOT_EVALUATED, depsgraph)
        else:
            out.append((name, ob, chains, ev))  # (the solve reads ev again: handed on, 3k instructions a frame)
    return out


NOT_EVALUATED = "The armature is not in this view layer (unlinked, excluded or disabled in viewports)"


def forget_rigs() -> None:
    """Look for armatures with chains again at the next solve."""
    _state.rigs_key = ()


class suspended:
    """Context manager: no solving for the named armatures inside the block."""

    def __init__(self, names) -> None:
        self.names = set(names) - _state.suspended

    def __enter__(self) -> None:
        _state.suspended.update(self.names)

    def __exit__(self, *_exc) -> None:
        _state.suspended.difference_update(self.names)
        request_solve()


class resumed:
    """Context manager: the named armatures are solved again inside the block, even within :class:`suspended`
    (the snap measures what the live solve makes of the controls it placed)."""

    def __init__(self, names) -> None:
        self.names = set(names) & _state.suspended

    def __enter__(self) -> None:
        _state.suspended.difference_update(self.names)

    def __exit__(self, *_exc) -> None:
        _state.suspended.update(self.names)


def refresh_feeds(found) -> None:
    """Re-read which armatures each target or pole object feeds, when chain settings or the set of rigs
    (``found``: :func:`rigs`) changed since the last read (reading every chain's target each frame is
    what this avoids)."""
    key = (cache.generation(), [rig[0] for rig in found])
    if key == _state.feeds_key:
        return
    feeds = _state.feeds
    feeds.clear()
    objects = []
    for name, _, chains, _ in found:
        for chain in chains:
            for target in (chain.target, chain.pole):
                if target is not None:
                    feeds.setdefault(target.as_pointer(), set()).add(name)
                    objects.append(target)
    _state.feeds_key, _state.feed_objects = key, objects


def _concerns_rigs(data, updates) -> bool:
    """Whether an updated Armature or Action may change what a rig reads: it is the data or the action of a rig
    or of a target or pole object (read now: data can be swapped), or a rig, a target or a pole is updated with
    it (it carries one, by a parent or a constraint, drives a rig's bone, or animates one). Another character's
    bones posed or keyed concern no rig: beside a rigged Rigify metarig each such edit solved every rig again and
    rebuilt their caches (a pose edit 15 ms, p90 420 ms; a key 12 ms; 0.23-0.35 ms without FABRIK IK). A freed
    object means "look again", as a concerned update does."""
    pointer = data.original.as_pointer()
    armature = isinstance(data, bpy.types.Armature)
    names, feeds = _state.rig_names, _state.feeds
    try:
        for ob in [ob for _, ob in _state.rig_objects] + _state.feed_objects:
            if armature:
                if ob.type == 'ARMATURE' and ob.data.as_pointer() == pointer:
                    return True
            elif (adt := ob.animation_data) is not None and adt.action is not None and \
                    adt.action.as_pointer() == pointer:
                return True
        return any(isinstance(other := update.id, bpy.types.Object) and
                   (other.name in names or other.original.as_pointer() in feeds) for update in updates)
    except ReferenceError:
        return True


def solve_scene(scene, depsgraph, only: set[str] | None = None, fresh: bool = False) -> None:
    """Solve the rigs of ``scene`` (or only those named) and remember what each one reads. ``fresh``: the
    caller has just forgotten the keyed channels (a frame change)."""
    if _state.busy:
        return
    _state.busy = True
    try:
        frame = scene.frame_current_final
        if frame != _state.frame:  # (a frame set without frame_set)
            if not fresh:
                base_pose.forget_keyed()
            _state.frame = frame
        found = rigs(scene, depsgraph)
        refresh_feeds(found)
        todo = found if only is None else [rig for rig in found if rig[0] in only]
        if todo:
            names, obs, chains, evaluated = zip(*todo)  # (one pass: a list comprehension each cost ~0.3 us)
            solve.solve_armatures(obs, depsgraph, chains=chains, evaluated=evaluated)
            _state.echo.update(names)
        _state.force = False
    except Exception:  # a handler must never raise into Blender
        traceback.print_exc()
    finally:
        _state.busy = False


@persistent
def on_frame_change(scene, depsgraph) -> None:
    base_pose.forget_keyed()  # animation was just evaluated: keyed channels are fresh
    if depsgraph is not None and depsgraph.id_type_updated('ARMATURE'):
        # Bones edited since the last evaluation (a script, then frame_set): the depsgraph update that
        # drops the caches comes after this handler, and the solve no longer counts bones (cache.get).
        request_solve()
    solve_scene(scene, depsgraph, fresh=True)


@persistent
def on_depsgraph_update(scene, depsgraph) -> None:
    if _state.busy:
        return
    if _state.force:
        if any(isinstance(update.id, bpy.types.Action) for update in depsgraph.updates):
            base_pose.forget_keyed()  # keys edited: animation was evaluated afresh
        solve_scene(scene, depsgraph)
        return
    echo = set(_state.echo)
    _state.echo.clear()
    wanted: set[str] = set()
    updates = depsgraph.updates
    for update in updates:
        data = update.id
        if isinstance(data, bpy.types.Armature | bpy.types.Action):
            if not _concerns_rigs(data, updates):
                continue
            request_solve()  # bones or keys changed: cached rest data and keyed channels are stale
            base_pose.forget_keyed()
            solve_scene(scene, depsgraph)
            return
        if not isinstance(data, bpy.types.Object):
            if isinstance(data, bpy.types.Collection | bpy.types.Scene):
                forget_rigs()  # objects may have been linked to or unlinked from the scene
            continue
        name = data.name
        if update.is_updated_transform:
            wanted |= _state.feeds.get(data.original.as_pointer(), _NOTHING)
        # Our own write's echo is a pose (geometry) update; a moved armature (its parent or constraint target
        # moved, even a bone of an armature FABRIK IK does not drive) is news even right after a solve.
        if data.type == 'ARMATURE' and (update.is_updated_transform or
                                        (name not in echo and update.is_updated_geometry)):
            cache.edited()  # a bone's location or scale may have changed (.rig.small._start_pose)
            if name not in _state.rig_names and len(data.original.fabrik.chains):
                forget_rigs()  # a rig we do not know yet: duplicated, appended or linked
            wanted.add(name)
    if wanted:
        solve_scene(scene, depsgraph, only=wanted)


@persistent
def on_file_change(*_args) -> None:
    request_solve()
    _state.scene, _state.unlinked, _state.rigs_key, _state.rig_objects = -1, set(), (), []
    base_pose.forget_keyed()
    diagnostics.clear()


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
