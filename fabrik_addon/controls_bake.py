"""Bake FK (or motion-capture) animation to IK controls: key each chain's target and pole over a frame range
so that the live IK plays the FK pose back.

Built on the single-frame snap (:mod:`.snap`): every frame's FK pose is read the way
``pose.fabrik_snap_ik_to_fk`` reads it (the live solve at influence 0), and targets and poles are placed by
its rules (soft and straight poses, parents and offsets corrected). What a range adds: poles that keep
their side where the limb goes straight (the bend of the nearest bent frames, blended by distance), keys
written in one pass with linear interpolation (reduced within a tolerance if asked), and the true largest
joint distance measured by playing the controls back with IK on.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import SimpleNamespace

import bpy
import numpy as np
from bpy.app.translations import pgettext_rpt as rpt_
from bpy.props import BoolProperty, FloatProperty, IntProperty

from . import adapter, bake, compat, handlers, pole, snap
from .polls import active_armature, has_chains
from .rig.plan import ChainError, chain_bones, check_dependencies

TRANSFORM = ("location", "rotation_quaternion", "rotation_euler", "rotation_axis_angle", "scale")
# Tries of a reduction: the budget given to each control's keys, as a fraction of the tolerance. The
# joints can move more than their target (a limb near straight), so a budget whose keys measure over
# the tolerance is tightened; the last try keeps every key.
REDUCE_BUDGETS = (1.0, 0.5, 0.25, 0.125, 0.0)


@dataclass
class ControlsOptions:
    """How to bake FK to controls; named as the operator's properties."""

    frame_start: int
    frame_end: int
    step: int = 1  # key every Nth frame; the last frame is always keyed
    reduce_tolerance: float = 0.0  # 0 keeps every key; above 0, drop control keys while the joints stay within
    create_controls: bool = True  # a missing target or pole becomes a new empty (else: an error)
    enable_chains: bool = True  # afterwards the chains are on, at full influence where it is not animated

    def range(self) -> bake.BakeOptions:
        return bake.BakeOptions(self.frame_start, self.frame_end, self.step)


@dataclass
class ControlsResult:
    """What a conversion did, for the report."""

    chains: list[str]
    frames: int
    keys: int  # control keys written (per channel)
    max_error: float  # largest joint distance between the FK pose and the IK playback, scene units
    max_relative: float  # the same in lengths of the chain it occurs on
    seconds: float
    created: list[str] = field(default_factory=list)  # names of new empties
    notes: list[str] = field(default_factory=list)


@dataclass
class Control:
    """A target or pole to key: an object, or a pose bone of an armature."""

    thing: bpy.types.Object
    bone: str
    rotation: bool  # its rotation is keyed too (a target with Match Target Rotation)

    def owner(self):
        return self.thing.pose.bones[self.bone] if self.is_bone() else self.thing

    def is_bone(self) -> bool:
        return self.thing.type == 'ARMATURE' and bool(self.bone)

    def key(self) -> tuple[int, str]:
        return self.thing.as_pointer(), self.bone if self.is_bone() else ""

    def path(self, attribute: str) -> str:
        return adapter.bone_path(self.bone, attribute) if self.is_bone() else attribute

    def label(self) -> str:
        return f"{self.thing.name}: {self.bone}" if self.is_bone() else self.thing.name


def chain_group(ob, all_chains: bool) -> list[int]:
    """Every chain of ``ob``, or the active one and every chain sharing bones with it."""
    return snap._indices(ob, all_chains)


def bake_controls(context, ob, indices: list[int], options: ControlsOptions, progress=None) -> ControlsResult:
    """Key the targets (and poles) of chains ``indices`` so that their live IK reproduces the bones' FK
    animation over the frame range. Raises ``ValueError`` (a message for the user) with nothing changed
    when it cannot."""
    started = time.perf_counter()
    bones = _check(ob, indices, options)
    scene = context.scene
    frames = options.range().frames()
    keyed = options.range().keyed_frames()
    chains = ob.fabrik.chains
    saved_rig = ob.fabrik.enabled
    saved = {i: (chains[i].enabled, chains[i].influence, chains[i].target, chains[i].pole) for i in bones}
    original_frame = scene.frame_current
    created: list[bpy.types.Object] = []
    controls: dict[tuple[int, str], Control] = {}
    originals: dict[tuple[int, str], object] = {}
    total = len(frames) * 2 + len(keyed)
    try:
        if options.create_controls:
            created = _create_controls(ob, bones)
        controls = _controls(ob, bones)
        originals = {k: c.owner().matrix_basis.copy() for k, c in controls.items()}
        # Pass 1: the FK pose at every frame, read with the chains on at influence 0.
        if not ob.fabrik.enabled:
            ob.fabrik.enabled = True
        for i in bones:
            chains[i].enabled = True
        fk = []
        for k, frame in enumerate(frames):
            scene.frame_set(frame)
            _, pose = snap.read_fk_pose(context, ob, bones)
            fk.append(pose)
            if progress:
                progress(k + 1, total)
        joints = {i: np.array([[np.array(m.translation) for m in pose.poses[i]] + [np.array(pose.tails[i])]
                               for pose in fk]) for i in bones}
        sides = {i: steady_sides(joints[i], np.array([pose.sides[i] for pose in fk])) for i in bones}
        for i, (_enabled, influence, _target, _pole) in saved.items():
            chains[i].influence = influence
        # Pass 2: place the controls at the keyed frames (the armature keeps its pose meanwhile).
        values = _place(context, ob, bones, controls, fk, sides, frames, keyed, progress, total)
    except BaseException:
        _undo(ob, saved, saved_rig, controls, originals, created)
        scene.frame_set(original_frame)
        handlers.request_solve()
        raise
    # Pass 3: key, play the controls back with IK on at full influence, and measure (tightening a reduction
    # whose keys miss the tolerance).
    notes = [note for note in (bake._own_action(c.thing) for c in controls.values()) if note]
    animated = {fcurve.data_path for fcurve in compat.animated_fcurves(ob)}
    ob.fabrik.enabled = True
    for i in saved:
        chains[i].enabled = True
        if chains[i].path_from_id("influence") not in animated:
            chains[i].influence = 1.0
    lengths = {i: float(np.linalg.norm(np.diff(joints[i][0], axis=0), axis=1).sum()) for i in bones}
    budgets = REDUCE_BUDGETS if options.reduce_tolerance > 0.0 else (0.0,)
    where = [frames.index(frame) for frame in keyed]
    reaches = {_key_of(chains[i].target, chains[i].target_bone): (joints[i][where, 0], lengths[i])
               for i in bones if len(bones[i]) >= 2}
    done = len(frames) + len(keyed)
    try:
        for attempt, budget in enumerate(budgets):
            keys = _write(controls, values, keyed, frames, reaches, options.reduce_tolerance * budget)
            error, relative = _measure(context, ob, bones, joints, frames, lengths)
            if progress:
                progress(min(done + len(frames) * (attempt + 1), total - 1), total)
            if budget == 0.0 or error <= options.reduce_tolerance:
                break
    finally:
        if not options.enable_chains:
            ob.fabrik.enabled = saved_rig
            for i, (enabled, influence, _target, _pole) in saved.items():
                chains[i].enabled, chains[i].influence = enabled, influence
        scene.frame_set(original_frame)
        handlers.request_solve()
    if progress:
        progress(total, total)
    return ControlsResult([chains[i].name for i in bones], len(frames), keys, error, relative,
                          time.perf_counter() - started, [empty.name for empty in created], notes)


def steady_sides(joints: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """Per frame, the side a pole goes to where the chain pose is straight: the bend of the nearest bent
    frames before and after, blended by their distance in frames (one of them alone at the ends, or
    where the two point opposite ways); ``fallback`` (frames, 3) when no frame bends. ``joints``:
    (frames, N + 1, 3). Frames that bend keep their own bend (:func:`.pole.pole_position` uses it)."""
    bends = [pole.bend_side(frame) for frame in joints]
    bent = [k for k, b in enumerate(bends) if b is not None]
    out = np.array(fallback, dtype=np.float64)
    if not bent:
        return out
    for k, b in enumerate(bends):
        if b is not None:
            out[k] = b
            continue
        before = max((j for j in bent if j < k), default=None)
        after = min((j for j in bent if j > k), default=None)
        if before is None or after is None:
            out[k] = bends[before if before is not None else after]
            continue
        t = (k - before) / (after - before)
        blend = (1.0 - t) * bends[before] + t * bends[after]
        nearest = bends[before] if t <= 0.5 else bends[after]
        out[k] = blend if np.linalg.norm(blend) > 0.1 else nearest
    return out


def _check(ob, indices: list[int], options: ControlsOptions) -> dict[int, list[str]]:
    """The chains' bones, or ``ValueError`` saying why they cannot be converted (nothing is changed)."""
    if ob is None or ob.type != 'ARMATURE':
        raise ValueError(rpt_("Select an armature"))
    if ob.mode == 'EDIT':
        raise ValueError(rpt_("'{}' is in Edit Mode: leave it first").format(ob.name))
    if ob.library is not None and ob.override_library is None:
        raise ValueError(rpt_("'{}' is linked from a library: make a library override first").format(ob.name))
    if ob.data.pose_position == 'REST':
        raise ValueError(rpt_("'{}' shows its Rest Position: switch to Pose Position").format(ob.name))
    bake.check_range(options.frame_start, options.frame_end, options.step)
    if not indices:
        raise ValueError(rpt_("'{}' has no FABRIK chains").format(ob.name))
    chains = ob.fabrik.chains
    bones = {}
    for i in indices:
        chain = chains[i]
        try:
            bones[i] = chain_bones(ob, chain)
        except ChainError as error:
            raise ValueError(rpt_("Chain '{}': {}").format(chain.name, str(error))) from error
        missing = [label for label, thing, needed in ((rpt_("target"), chain.target, True),
                                                      (rpt_("pole"), chain.pole, _wants_pole(ob, i, bones[i])))
                   if needed and thing is None]
        if missing and not options.create_controls:
            raise ValueError(rpt_("Chain '{}' has no {}: set it, or turn on Create Controls").format(
                chain.name, " or ".join(missing)))
        if chain.target is not None:
            problem = snap._reference_problem(ob, chain, bones[i])
            if problem:
                raise ValueError(problem)
        try:  # a control that moves with the chain's own bones (only the plan's bones are read)
            check_dependencies(ob, chain, SimpleNamespace(bones=bones[i]))
        except ChainError as error:
            raise ValueError(rpt_("Chain '{}': {}").format(chain.name, str(error))) from error
        for thing, bone in ((chain.target, chain.target_bone), (chain.pole, chain.pole_bone)):
            if thing is not None:
                problem = _held(Control(thing, bone, False))
                if problem:
                    raise ValueError(rpt_("Chain '{}': {}").format(chain.name, problem))
    return bones


def _held(control: Control) -> str:
    """Why keys on the control would not move it (a driver or constraint holds it), or ""."""
    owner = control.owner()
    active = [c.name for c in owner.constraints if not c.mute and c.influence > 0.0]
    if active:
        return rpt_("'{}' has constraints ({}): keys would not move it as placed; mute or remove them").format(
            control.label(), ", ".join(active))
    adt = control.thing.animation_data
    paths = {control.path(attribute) for attribute in TRANSFORM}
    driven = sorted({d.data_path for d in adt.drivers if d.data_path in paths} if adt is not None else set())
    if driven:
        return rpt_("'{}' is driven ({}): remove the drivers to key it").format(control.label(), ", ".join(driven))
    return ""


def _wants_pole(ob, index: int, names: list[str]) -> bool:
    """Whether a chain needs a pole: it bends (two bones or more) and is solved alone. Chains of a tree
    (sharing bones) keep their bend through the shared bones, and a pole added there would fight it
    (0.048 chain lengths off on a spine carrying two arms)."""
    return len(names) >= 2 and len(snap.snap_group(ob, index)) == 1


def _create_controls(ob, bones: dict[int, list[str]]) -> list[bpy.types.Object]:
    """Empties for missing targets (and poles, :func:`_wants_pole`), in the armature's collection."""
    made = []
    collection = ob.users_collection[0] if ob.users_collection else bpy.context.scene.collection
    size = 0.1 * max(ob.dimensions) if max(ob.dimensions) > 0 else 0.1
    for i, names in bones.items():
        chain = ob.fabrik.chains[i]
        for slot, shape, needed in (("target", 'SPHERE', True), ("pole", 'CONE', _wants_pole(ob, i, names))):
            if not needed or getattr(chain, slot) is not None:
                continue
            empty = bpy.data.objects.new(f"{chain.name}_{slot}", None)
            empty.empty_display_type, empty.empty_display_size = shape, size
            collection.objects.link(empty)
            setattr(chain, slot, empty)
            made.append(empty)
    return made


def _controls(ob, bones: dict[int, list[str]]) -> dict[tuple[int, str], Control]:
    found: dict[tuple[int, str], Control] = {}
    for i in bones:
        chain = ob.fabrik.chains[i]
        for thing, bone, rotation in ((chain.target, chain.target_bone, chain.match_target_rotation),
                                      (chain.pole, chain.pole_bone, False)):
            if thing is not None:
                control = Control(thing, bone, rotation)
                if control.key() in found:
                    control.rotation = control.rotation or found[control.key()].rotation
                found[control.key()] = control
    return found


def _place(context, ob, bones, controls, fk, sides, frames, keyed, progress, total) -> dict:
    """Place the controls on each keyed frame's FK pose; their channel values per keyed frame."""
    values: dict[tuple[int, str], list[tuple[tuple[float, ...], tuple[float, ...]]]] = {k: [] for k in controls}
    where = {frame: k for k, frame in enumerate(frames)}
    with handlers.suspended([ob.name]):
        for n, frame in enumerate(keyed):
            context.scene.frame_set(frame)
            k = where[frame]
            result = snap.SnapResult()
            snap._place_all(context, ob, bones, fk[k].poses, fk[k].tails, {i: sides[i][k] for i in bones},
                            fk[k].world, False, result)
            if result.errors:
                raise ValueError(rpt_("Frame {}: {}").format(frame, "; ".join(result.errors)))
            for key, control in controls.items():
                owner = control.owner()
                rotation = adapter.read_rotation(owner) if control.rotation else ()
                world: tuple[float, ...] = tuple(snap._world_matrix(context, control.thing, control.bone).translation)
                values[key].append((tuple(owner.location), rotation, world))
            if progress:
                progress(len(frames) + n + 1, total)
    return values


def _key_of(thing, bone: str) -> tuple[int, str]:
    return Control(thing, bone, False).key()


def _write(controls, values, keyed: list[int], frames: list[int], reaches: dict, tolerance: float) -> int:
    """Replace the controls' keys inside the range by linear keys at ``keyed`` frames (fewer within
    ``tolerance``, a distance); returns the keys written. ``reaches``: control key -> (the chain's root at
    the keyed frames, its length) for the targets of chains that bend."""
    written = 0
    at = np.array(keyed, dtype=np.float64)
    scale = max((length for _roots, length in reaches.values()), default=1.0)
    for key, control in controls.items():
        owner = control.owner()
        fcurves = compat.ensure_fcurves(control.thing)
        group = control.bone if control.is_bone() else "Object Transforms"
        tracks = []
        if not (control.is_bone() and owner.bone.use_connect):
            # Location: a key may go while every coordinate stays within tolerance / sqrt(3) (the distance
            # within tolerance): ``bake._reduce`` measures a 'SCALE' track by its largest coordinate.
            error = _target_error(np.array([v[2] for v in values[key]]), *reaches[key]) if key in reaches else None
            tracks.append(("location", 'SCALE', np.array([v[0] for v in values[key]]),
                           tolerance if error else tolerance / np.sqrt(3.0), error))
        if control.rotation:
            mode = owner.rotation_mode
            track = bake._continuous(mode, np.array([v[1] for v in values[key]], dtype=np.float64))
            tracks.append((adapter.rotation_path(mode), mode, track, tolerance / scale, None))
        for attribute, mode, track, budget, error in tracks:
            keep = bake._reduce(mode, track, budget, error) if budget > 0.0 else np.arange(len(track))
            path = control.path(attribute)
            for index in range(track.shape[1]):
                fcurve = fcurves.find(path, index=index) or compat.new_fcurve(fcurves, path, index, group)
                bake._replace_keys(fcurve, frames[0], frames[-1], at[keep], track[keep, index])
                written += len(keep)
    return written


def _target_error(placed: np.ndarray, roots: np.ndarray, length: float):
    """How far dropping the keys between keyed frames ``a`` and ``b`` moves a target's chain: the target's
    own move (world positions ``placed``), or the change of bend its distance from the chain's root
    (``roots``) makes, whichever is larger. Near full reach a straight line between two keys pulls the
    target in, and the bend of a limb of ``length`` grows with the square root of that (a two-bone limb's
    joint sits sqrt(length^2 - distance^2) / 2 off the line)."""
    def bend(points: np.ndarray, start: int, stop: int) -> np.ndarray:
        distance = np.linalg.norm(points - roots[start:stop], axis=1)
        return 0.5 * np.sqrt(np.maximum(length * length - distance * distance, 0.0))

    def error(a: int, b: int) -> np.ndarray:
        t = (np.arange(a + 1, b) - a) / (b - a)
        between = placed[a] + t[:, None] * (placed[b] - placed[a])
        moved = np.linalg.norm(between - placed[a + 1:b], axis=1)
        return np.maximum(moved, np.abs(bend(between, a + 1, b) - bend(placed[a + 1:b], a + 1, b)))
    return error


def _measure(context, ob, bones, joints, frames, lengths) -> tuple[float, float]:
    """Largest joint distance between the FK pose and the IK playback over ``frames``: in scene units,
    and in lengths of the chain it occurs on."""
    worst = relative = 0.0
    for k, frame in enumerate(frames):
        context.scene.frame_set(frame)
        ev = ob.evaluated_get(context.evaluated_depsgraph_get())
        world = ev.matrix_world
        for i, names in bones.items():
            played = np.array([tuple(world @ ev.pose.bones[name].head) for name in names]
                              + [tuple(world @ ev.pose.bones[names[-1]].tail)])
            distance = float(np.linalg.norm(played - joints[i][k], axis=1).max())
            worst = max(worst, distance)
            relative = max(relative, distance / lengths[i])
    return worst, relative


def _undo(ob, saved, saved_rig, controls, originals, created) -> None:
    """Put back what a failed conversion changed: chain settings, moved controls, new empties."""
    for key, matrix in originals.items():
        controls[key].owner().matrix_basis = matrix
    chains = ob.fabrik.chains
    for i, (enabled, influence, target, pole_object) in saved.items():
        chain = chains[i]
        chain.enabled, chain.influence = enabled, influence
        if chain.target != target:
            chain.target = target
        if chain.pole != pole_object:
            chain.pole = pole_object
    if ob.fabrik.enabled != saved_rig:
        ob.fabrik.enabled = saved_rig
    for empty in created:
        bpy.data.objects.remove(empty)


class POSE_OT_fabrik_bake_controls(bpy.types.Operator):
    bl_idname = "pose.fabrik_bake_controls"
    bl_label = "Bake FK to IK Controls"
    bl_description = ("Key the chain's target and pole over a frame range so that IK plays back the bones' own "
                      "(FK or motion-capture) animation")
    bl_options = {'REGISTER', 'UNDO'}

    frame_start: IntProperty(  # type: ignore[valid-type]
        name="Start Frame", description="First frame to convert (default: preview range, else scene range)",
        options={'SKIP_SAVE'},
    )
    frame_end: IntProperty(  # type: ignore[valid-type]
        name="End Frame", description="Last frame to convert (default: preview range, else scene range)",
        options={'SKIP_SAVE'},
    )
    step: IntProperty(  # type: ignore[valid-type]
        name="Step", description="Key the controls every Nth frame (the last frame is always keyed)", min=1,
        default=1,
    )
    reduce_tolerance: FloatProperty(  # type: ignore[valid-type]
        name="Reduce Tolerance",
        description="0 keeps every key; above 0, drop control keys while the joints stay within this distance",
        min=0.0, default=0.0, subtype='DISTANCE',
    )
    all_chains: BoolProperty(  # type: ignore[valid-type]
        name="All Chains", description="Convert every chain of the armature, not only the active one (and the "
                                       "chains sharing bones with it)",
        default=False, options={'SKIP_SAVE'},
    )
    create_controls: BoolProperty(  # type: ignore[valid-type]
        name="Create Controls", description="Add an empty for a missing target or pole",
        default=True,
    )
    enable_chains: BoolProperty(  # type: ignore[valid-type]
        name="Enable Chains", description="Switch the chains on afterwards (at full influence, unless animated) so "
                                          "the controls drive the bones",
        default=True,
    )

    @classmethod
    def poll(cls, context):
        return has_chains(cls, active_armature(context), "Select an armature")

    def invoke(self, context, event):
        bake.fill_range(self, context.scene)
        return context.window_manager.invoke_props_dialog(self)

    def execute(self, context):
        bake.fill_range(self, context.scene)
        ob = active_armature(context)
        if ob is None or not len(ob.fabrik.chains):
            self.report({'ERROR'}, rpt_("Select an armature with FABRIK chains"))
            return {'CANCELLED'}
        options = ControlsOptions(self.frame_start, self.frame_end, self.step, self.reduce_tolerance,
                                  self.create_controls, self.enable_chains)
        wm = context.window_manager
        wm.progress_begin(0, 100)
        try:
            result = bake_controls(context, ob, chain_group(ob, self.all_chains), options,
                                   progress=lambda done, total: wm.progress_update(int(100 * done / total)))
        except ValueError as error:
            self.report({'ERROR'}, str(error))
            return {'CANCELLED'}
        finally:
            wm.progress_end()
        for note in result.notes:
            self.report({'WARNING'}, note)
        self.report({'INFO'}, rpt_("Keyed the controls of {} over {} frames ({} keys{}); IK playback vs FK: "
                                   "largest joint distance {:.3g} ({:.2g} chain lengths)").format(
            ", ".join(result.chains), result.frames, result.keys,
            rpt_(", new: {}").format(", ".join(result.created)) if result.created else "",
            result.max_error, result.max_relative))
        return {'FINISHED'}
