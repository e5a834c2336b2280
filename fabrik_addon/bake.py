"""Bake the live IK pose to rotation keyframes (and scale Y keys for bones that stretch), and measure how far
the keys drift from it."""

from __future__ import annotations

import time
from dataclasses import dataclass

import bpy
import numpy as np
from bpy.app.translations import pgettext_rpt as rpt_
from bpy.props import BoolProperty, EnumProperty, FloatProperty, IntProperty
from mathutils import Euler, Quaternion

from . import adapter, compat, diagnostics, handlers
from .polls import active_armature
from .rig.plan import ChainError, check_dependencies, check_references, plan_chains

LINEAR = 1  # index of 'LINEAR' in Blender's keyframe interpolation enum, for foreach_set
# A stretching chain's bone is keyed on scale Y only if it leaves its scale without IK by more than this
# fraction somewhere in the range.
STRETCH_KEY_THRESHOLD = 1e-6


@dataclass
class BakeResult:
    frames: int
    bones: int
    keys: int
    seconds: float
    key_seconds: float  # of ``seconds``, spent writing keyframes (the rest: playing, solving, measuring)
    max_error: float
    mean_error: float
    chain_errors: dict[int, tuple[float, float]]
    note: str = ""  # what the user should know besides the numbers (a new action, invalid frames)


UNREGISTERED = "The FABRIK IK add-on was unregistered during the bake"


def check_range(start: int, end: int, step: int) -> None:
    """Raises ``ValueError`` (a message for the user) for a frame range that cannot be baked: empty, a step below 1,
    or frames Blender does not have (a scene frame lies within +-1048574: beyond, ``frame_set`` clamps, and a
    range of 2**32 frames ran out of memory with a traceback)."""
    if end < start:
        raise ValueError(rpt_("Frame range {}-{} is empty").format(start, end))
    if step < 1:
        raise ValueError(rpt_("Step must be at least 1"))
    frames = bpy.types.Scene.bl_rna.properties["frame_current"]
    if start < frames.hard_min or end > frames.hard_max:
        raise ValueError(rpt_("Frame range {}-{} goes beyond Blender's frames ({} to {})").format(
            start, end, frames.hard_min, frames.hard_max))


def registered() -> bool:
    """Whether our properties still exist: after unregistering, touching a chain would crash Blender."""
    return "fabrik" in bpy.types.Object.bl_rna.properties


def _check_alive(done: str) -> None:
    if not registered():
        raise ValueError(f"{UNREGISTERED}; {done}")


@dataclass
class BakeOptions:
    """How to bake (in the manner of ``bpy_extras.anim_utils.BakeOptions``); named as the operator's properties."""

    frame_start: int
    frame_end: int
    step: int = 1  # key every Nth frame; the last frame is always keyed
    reduce_tolerance: float = 0.0  # 0 keeps every key; above 0, drop keys while the pose stays within it
    disable_chains: bool = True  # switch the baked chains off afterwards so the keys play
    only_frames: list[int] | None = None  # key only these frames of the range (and its ends), not every step-th

    def frames(self) -> list[int]:
        """Every frame of the range: each is sampled and measured."""
        return list(range(self.frame_start, self.frame_end + 1))

    def keyed_frames(self) -> list[int]:
        if self.only_frames is not None:
            inside = {f for f in self.only_frames if self.frame_start <= f <= self.frame_end}
            return sorted(inside | {self.frame_start, self.frame_end})
        frames = list(range(self.frame_start, self.frame_end + 1, self.step))
        if frames[-1] != self.frame_end:
            frames.append(self.frame_end)
        return frames

    def budgets(self) -> list[float]:
        """Reduction budgets to try, loosest last.

        Budgets from a safe bound (a bone turned by an angle moves points by at most angle times their
        distance) keep far more keys than the tolerance needs, so the budget grows 4x at a time while
        replaying the keys still measures within the tolerance; the x1 bound always does.
        """
        return [4.0**k for k in range(7)] if self.reduce_tolerance > 0.0 else [1.0]


@dataclass
class BakedBones:
    """The bones a bake keys: each once, in chain order, with their rotation modes."""

    names: list[str]
    modes: list[str]
    of_chain: dict[int, list[str]]  # chain index -> its bones
    stretching: list[str]  # bones of stretching chains: their scale is sampled, and keyed where it changes


@dataclass
class Samples:
    """The live IK over the frame range: what the keys are made from and measured against."""

    live: np.ndarray  # (frames, bones, 2, 3) world-space heads and tails
    tracks: list[np.ndarray]  # per bone, (keyed frames, channels), continuous frame to frame
    reaches: list[float]  # per bone, how far a turn of it can move baked points (reduction only)
    scales: dict[str, np.ndarray]  # stretched bones -> their scale Y at the keyed frames
    invalid: dict[str, list[int]]  # chain name -> frames at which it was invalid (its keys: the pose without IK)


def bake_chains(context, ob, chain_indices: list[int], options: BakeOptions, progress=None) -> BakeResult:
    """Sample the live IK of ``chain_indices`` over the frames and key each bone's rotation channels (and
    the scale Y of bones that stretch).

    Raises ``ValueError`` (with a message for the user) when nothing can be baked.
    """
    check_range(options.frame_start, options.frame_end, options.step)
    if ob.mode == 'EDIT':
        raise ValueError(f"'{ob.name}' is in Edit Mode: leave it to bake")
    if not ob.fabrik.enabled:
        raise ValueError(f"FABRIK IK is switched off for '{ob.name}': switch it on to bake")
    if ob.data.pose_position == 'REST':
        raise ValueError(f"'{ob.name}' shows its Rest Position: switch to Pose Position to bake")
    bones = baked_bones(ob, chain_indices)
    scene = context.scene
    started = time.perf_counter()
    original_frame = scene.frame_current
    keyed = False
    try:
        samples = sample(context, ob, bones, options, progress)
        note = _own_action(ob)
        keys, key_seconds, baked = write_keys(context, ob, bones, samples, options, progress)
        keyed = True
    finally:
        # Only a bake that keyed its range switches its chains off: one that failed leaves them as they were.
        if keyed and options.disable_chains and registered():
            for i in chain_indices:
                ob.fabrik.chains[i].enabled = False
        scene.frame_set(original_frame)
    _check_alive("keys were written but the chains were not switched off")
    for name, frames in samples.invalid.items():
        note += (" " if note else "") + (f"Chain '{name}' was invalid at {len(frames)} frames (from {frames[0]}), "
                                         "where the keys hold the pose without IK.")
    seconds = time.perf_counter() - started
    drift = np.linalg.norm(baked - samples.live, axis=-1)  # (frames, bones, 2)
    chain_errors = measure(ob, bones, drift)
    return BakeResult(len(samples.live), len(bones.names), keys, seconds, key_seconds, float(drift.max()),
                      float(drift.mean()), chain_errors, note)


def baked_bones(ob, chain_indices: list[int]) -> BakedBones:
    """The bones of valid chains with valid targets; raises ``ValueError`` naming the chains that are not."""
    chains = ob.fabrik.chains
    handlers.request_solve()
    plans = {plan.chain_index: plan for plan in plan_chains(ob)}
    missing = [chains[i].name for i in chain_indices if i not in plans]
    if missing:
        raise ValueError(f"Cannot bake invalid or disabled chains: {', '.join(missing)}")
    for i in chain_indices:
        try:
            check_references(ob, chains[i], plans[i].bones)
            check_dependencies(ob, chains[i], plans[i])
        except ChainError as error:
            raise ValueError(f"Cannot bake chain '{chains[i].name}': {error}") from error
    names: list[str] = []
    of_chain: dict[int, list[str]] = {}
    stretching: list[str] = []
    for i in chain_indices:
        of_chain[i] = plans[i].bones
        names.extend(b for b in plans[i].bones if b not in names)
        if chains[i].use_stretch:
            stretching.extend(b for b in plans[i].bones if b not in stretching)
    return BakedBones(names, [ob.pose.bones[name].rotation_mode for name in names], of_chain, stretching)


def sample(context, ob, bones: BakedBones, options: BakeOptions, progress=None) -> Samples:
    """Play the frame range with live IK: every frame's bone positions, the keyed frames' channels."""
    all_frames, keyed_frames = options.frames(), set(options.keyed_frames())
    pose_bones = [ob.pose.bones[name] for name in bones.names]
    values: dict[str, list[tuple[float, ...]]] = {name: [] for name in bones.names}
    scales: dict[str, list[float]] = {name: [] for name in bones.stretching}
    live = np.empty((len(all_frames), len(bones.names), 2, 3))
    total_steps = len(all_frames) * (1 + len(options.budgets()))
    invalid: dict[str, list[int]] = {}
    for k, frame in enumerate(all_frames):
        context.scene.frame_set(frame)
        _check_alive("nothing was keyed")
        live[k] = _heads_and_tails(ob, context.evaluated_depsgraph_get(), bones.names)
        for i in bones.of_chain:
            chain = ob.fabrik.chains[i]
            if diagnostics.of(chain).status == 'INVALID':
                invalid.setdefault(chain.name, []).append(frame)
        if frame in keyed_frames:
            for name, pb in zip(bones.names, pose_bones):
                values[name].append(adapter.read_rotation(pb))
                if name in scales:
                    scales[name].append(pb.scale[1])
        if progress:
            progress(k + 1, total_steps)
            _check_alive("nothing was keyed")
    # Continuous tracks and each bone's reach do not depend on the reduction budget: once, not per try.
    tracks = [_continuous(mode, np.array(values[name], dtype=np.float64)) for name, mode in zip(bones.names,
                                                                                                 bones.modes)]
    reaches = [_reach(live, b) for b in range(len(bones.names))] if options.reduce_tolerance > 0.0 else []
    # Only bones that do stretch get scale keys: a scale that never left its value without IK is not keyed.
    stretched = {}
    for name, track in scales.items():
        base = ob.pose.bones[name].fabrik_base
        rest = base.scale[1] if base.scale_captured else track[0]
        if np.abs(np.array(track) - rest).max(initial=0.0) > STRETCH_KEY_THRESHOLD * abs(rest):
            stretched[name] = np.array(track, dtype=np.float64)[:, None]
    return Samples(live, tracks, reaches, stretched, invalid)


def write_keys(context, ob, bones: BakedBones, samples: Samples, options: BakeOptions,
               progress=None) -> tuple[int, float, np.ndarray]:
    """Key the samples, reduced within the tolerance when one is set: (keys written, seconds spent
    writing them, the bone positions the final keys play)."""
    all_frames, keyed_frames, budgets = options.frames(), options.keyed_frames(), options.budgets()
    total_steps = len(all_frames) * (1 + len(budgets))
    tolerance = options.reduce_tolerance

    def write(factor: float) -> int:
        return _write_keys(ob, bones.names, bones.modes, keyed_frames, samples.tracks, samples.reaches, all_frames,
                           tolerance, factor, samples.scales)

    passed = None
    key_seconds = 0.0
    for attempt, factor in enumerate(budgets):
        writing = time.perf_counter()
        keys = write(factor)
        key_seconds += time.perf_counter() - writing
        baked = _replay(context, ob, bones.names, all_frames)
        if progress:
            progress(len(all_frames) * (2 + attempt), total_steps)
        _check_alive("keys were written but their fidelity was not measured")
        if tolerance <= 0.0 or np.linalg.norm(baked - samples.live, axis=-1).max() > tolerance:
            break
        passed = (factor, keys, baked)
    if tolerance > 0.0 and passed is not None and passed[0] != factor:
        # The looser budget overshot: put back the keys of the last one that measured within.
        writing = time.perf_counter()
        write(passed[0])
        key_seconds += time.perf_counter() - writing
        keys, baked = passed[1], passed[2]
    return keys, key_seconds, baked


def measure(ob, bones: BakedBones, drift: np.ndarray) -> dict[int, tuple[float, float]]:
    """Each chain's (max, mean) distance between the live IK and its keys, stored on the chain too."""
    chains = ob.fabrik.chains
    chain_errors = {}
    for i, names in bones.of_chain.items():
        part = drift[:, [bones.names.index(b) for b in names]]
        chain_errors[i] = (float(part.max()), float(part.mean()))
        chains[i].bake_max_error, chains[i].bake_mean_error = chain_errors[i]
    return chain_errors


def _own_action(ob) -> str:
    """Make sure the keys go into an action only ``ob`` plays: an action (or, on 4.4+, a slot) shared with
    another object, or linked from a library, is copied first. Returns what to tell the user, if anything."""
    adt = ob.animation_data
    if adt is None or adt.action is None:
        return ""
    action = adt.action
    slot = getattr(adt, "action_slot", None)
    sharing = sorted(other.name for other in bpy.data.objects
                     if other != ob and other.animation_data is not None and other.animation_data.action == action
                     and getattr(other.animation_data, "action_slot", None) == slot)
    if not sharing and action.is_editable:
        return ""
    copy = action.copy()
    copy.name = f"{ob.name}Action"
    identifier = slot.identifier if slot is not None else None
    adt.action = copy
    if identifier is not None:
        adt.action_slot = next((s for s in copy.slots if s.identifier == identifier), None)
    why = f"shared with {', '.join(repr(n) for n in sharing)}" if sharing else "linked from a library"
    return f"Action '{action.name}' is {why}: baked into a copy, '{copy.name}'."


def _replay(context, ob, bones: list[str], frames: list[int]) -> np.ndarray:
    """Heads and tails of ``bones`` as the keys play them, with this armature's IK paused."""
    out = np.empty((len(frames), len(bones), 2, 3))
    with handlers.suspended([ob.name]):
        for k, frame in enumerate(frames):
            context.scene.frame_set(frame)
            _check_alive("keys were written but their fidelity was not measured")
            out[k] = _heads_and_tails(ob, context.evaluated_depsgraph_get(), bones)
    return out


def _heads_and_tails(ob, depsgraph, bones: list[str]) -> np.ndarray:
    ev = ob.evaluated_get(depsgraph)
    world = ev.matrix_world
    return np.array([[tuple(world @ ev.pose.bones[name].head), tuple(world @ ev.pose.bones[name].tail)]
                     for name in bones])


def _write_keys(ob, bones, modes, frames, tracks, reaches, all_frames, reduce_tolerance, loosen=1.0,
                scales=None) -> int:
    """Replace the keys inside the frame range on each bone's rotation channels (and the scale Y of
    stretched bones, ``scales``); returns keys written."""
    fcurves = compat.ensure_fcurves(ob)
    written = 0
    channels = [(name, mode, adapter.rotation_data_path(name, mode), tracks[b], b) for b, (name, mode)
                in enumerate(zip(bones, modes))]
    channels += [(name, 'SCALE', adapter.bone_path(name, "scale"), track, bones.index(name))
                 for name, track in (scales or {}).items()]
    for name, mode, path, track, b in channels:
        keep = np.arange(len(frames))
        if reduce_tolerance > 0.0:
            # Each bone's rotation (and stretch) may spend an equal share of the tolerance; an angle (stretch)
            # error moves points at most angle (stretch) * reach, so keys are dropped while each stays within.
            budget = loosen * reduce_tolerance / (len(channels) * max(reaches[b], 1e-9))
            keep = _reduce(mode, track, budget)
        indices = [1] if mode == 'SCALE' else range(track.shape[1])
        for column, index in enumerate(indices):
            fcurve = fcurves.find(path, index=index) or compat.new_fcurve(fcurves, path, index, name)
            _replace_keys(fcurve, all_frames[0], all_frames[-1], np.array(frames, dtype=np.float64)[keep],
                          track[keep, column])
            written += len(keep)
    return written


def _replace_keys(fcurve, first: int, last: int, frames: np.ndarray, values: np.ndarray) -> None:
    """Linear keys at ``frames`` in place of the F-curve's keys within [first, last]."""
    points = fcurve.keyframe_points
    for point in reversed(list(points)):
        if first <= point.co.x <= last:
            points.remove(point, fast=True)
    before = len(points)
    points.add(len(frames))
    co = np.empty(2 * len(points))
    points.foreach_get("co", co)
    co[2 * before::2] = frames
    co[2 * before + 1::2] = values
    points.foreach_set("co", co)
    interpolation = np.empty(len(points), dtype=np.int32)
    points.foreach_get("interpolation", interpolation)
    interpolation[before:] = LINEAR
    points.foreach_set("interpolation", interpolation)
    fcurve.update()


def _continuous(mode: str, track: np.ndarray) -> np.ndarray:
    """Keys continuous frame to frame: quaternions kept in one hemisphere, Eulers as the equivalent
    angles nearest the previous key (live IK writes channels relative to the pose without IK, so the
    playback order never changes them; continuity across frames is the bake's job)."""
    if mode == 'QUATERNION':
        for k in range(1, len(track)):
            if track[k] @ track[k - 1] < 0.0:
                track[k] = -track[k]
    elif mode != 'AXIS_ANGLE':
        for k in range(1, len(track)):
            track[k] = Euler(track[k], mode).to_quaternion().to_euler(mode, Euler(track[k - 1], mode))
    return track


def _reach(live: np.ndarray, b: int) -> float:
    """Farthest any baked bone point gets from bone ``b``'s head: how far a turn of ``b`` can move things."""
    head = live[:, b, 0][:, None, None, :]
    return float(np.linalg.norm(live - head, axis=-1).max())


def _reduce(mode: str, track: np.ndarray, budget: float, error=None) -> np.ndarray:
    """Douglas-Peucker over frames: keep the fewest keys whose linear interpolation stays within
    ``budget`` radians of every sampled rotation, interpolating channels the way Blender plays them.
    ``error(a, b)``, when given, measures the samples between keys ``a`` and ``b`` instead."""
    keep = {0, len(track) - 1}
    stack = [(0, len(track) - 1)]
    while stack:
        a, b = stack.pop()
        if b - a < 2:
            continue
        if error is not None:
            errors = error(a, b)
        else:
            t = (np.arange(a + 1, b) - a) / (b - a)
            between = track[a] + t[:, None] * (track[b] - track[a])
            errors = np.array([_angle(mode, x, y) for x, y in zip(between, track[a + 1:b])])
        worst = int(np.argmax(errors))
        if errors[worst] > budget:
            k = a + 1 + worst
            keep.add(k)
            stack += [(a, k), (k, b)]
    return np.array(sorted(keep))


def _angle(mode: str, played, sampled) -> float:
    if mode == 'SCALE':  # a scale track: its error is the difference in stretch
        return float(np.abs(np.asarray(played) - np.asarray(sampled)).max())
    p = adapter.quaternion_from_channels(mode, tuple(played))
    s = adapter.quaternion_from_channels(mode, tuple(sampled))
    return p.rotation_difference(s).angle if isinstance(p, Quaternion) else 0.0


def control_key_frames(ob, chain_indices: list[int]) -> list[int]:
    """Whole frames at which the chains' targets, poles (their transform channels) or influences have a key:
    where the animator keyed the controls. Keys between frames count at the nearest frame."""
    frames: set[int] = set()

    def collect(thing, paths) -> None:
        for fcurve in compat.animated_fcurves(thing):
            if fcurve.data_path in paths:
                frames.update(round(point.co.x) for point in fcurve.keyframe_points)

    transform = ("location", "rotation_quaternion", "rotation_euler", "rotation_axis_angle", "scale")
    for i in chain_indices:
        chain = ob.fabrik.chains[i]
        collect(ob, {chain.path_from_id("influence")})
        for thing, bone in ((chain.target, chain.target_bone), (chain.pole, chain.pole_bone)):
            if thing is not None:
                is_bone = thing.type == 'ARMATURE' and bool(bone)
                collect(thing, {adapter.bone_path(bone, name) if is_bone else name for name in transform})
    return sorted(frames)


def default_range(scene) -> tuple[int, int]:
    if scene.use_preview_range:
        return scene.frame_preview_start, scene.frame_preview_end
    return scene.frame_start, scene.frame_end


def fill_range(operator, scene) -> None:
    """An operator's ``frame_start`` / ``frame_end`` the caller did not set: :func:`default_range`."""
    start, end = default_range(scene)
    if not operator.properties.is_property_set("frame_start"):
        operator.frame_start = start
    if not operator.properties.is_property_set("frame_end"):
        operator.frame_end = end


class POSE_OT_fabrik_bake(bpy.types.Operator):
    bl_idname = "pose.fabrik_bake"
    bl_label = "Bake FABRIK IK"
    bl_description = ("Key the live IK pose of the chains' bones over a frame range: rotation channels, and scale Y "
                      "of bones that stretch")
    bl_options = {'REGISTER', 'UNDO'}

    frame_start: IntProperty(  # type: ignore[valid-type]
        name="Start Frame", description="First frame to bake (default: preview range, else scene range)",
        options={'SKIP_SAVE'},
    )
    frame_end: IntProperty(  # type: ignore[valid-type]
        name="End Frame", description="Last frame to bake (default: preview range, else scene range)",
        options={'SKIP_SAVE'},
    )
    step: IntProperty(  # type: ignore[valid-type]
        name="Step", description="Key every Nth frame (the last frame is always keyed)", min=1, default=1,
    )
    only_active_chain: BoolProperty(  # type: ignore[valid-type]
        name="Only Active Chain", description="Bake the active chain only, else every enabled chain",
        default=False,
    )
    disable_chains: BoolProperty(  # type: ignore[valid-type]
        name="Disable Chains", description="Switch the baked chains off afterwards so the keys play",
        default=True,
    )
    reduce_tolerance: FloatProperty(  # type: ignore[valid-type]
        name="Reduce Tolerance",
        description="0 keeps every key; above 0, drop keys while the pose stays within this distance",
        min=0.0, default=0.0, subtype='DISTANCE',
    )
    key_frames: EnumProperty(  # type: ignore[valid-type]
        name="Key Frames", description="Which frames of the range get bone keys",
        items=(('ALL', "All", "Every frame (every Step-th)"),
               ('CONTROLS', "Controls",
                "Only where the chains' targets, poles or influences have a key, and the range ends: the "
                "baked action stays as editable as the controls")),
        default='ALL',
    )

    @classmethod
    def poll(cls, context):
        ob = active_armature(context)
        if ob is None:
            cls.poll_message_set("Select an armature")
            return False
        if not any(chain.enabled for chain in ob.fabrik.chains):
            cls.poll_message_set("This armature has no enabled FABRIK chains")
            return False
        return True

    def invoke(self, context, event):
        fill_range(self, context.scene)
        return context.window_manager.invoke_props_dialog(self)

    def execute(self, context):
        fill_range(self, context.scene)
        ob = context.object
        settings = ob.fabrik
        if self.only_active_chain:
            indices = [min(settings.active_chain_index, len(settings.chains) - 1)]
        else:
            indices = [i for i, chain in enumerate(settings.chains) if chain.enabled]
        wm = context.window_manager
        wm.progress_begin(0, 100)
        try:
            only = control_key_frames(ob, indices) if self.key_frames == 'CONTROLS' else None
            options = BakeOptions(self.frame_start, self.frame_end, self.step, self.reduce_tolerance,
                                  self.disable_chains, only)
            result = bake_chains(context, ob, indices, options,
                                 progress=lambda done, total: wm.progress_update(int(100 * done / total)))
        except ValueError as error:
            self.report({'ERROR'}, str(error))
            return {'CANCELLED'}
        finally:
            wm.progress_end()
        fps = result.frames / result.seconds if result.seconds > 0 else float("inf")
        self.report({'INFO'}, rpt_("Baked {} frames of {} bones ({} keys) at {:.0f} frames/s ({:.0f}% writing keys); "
                                   "live IK vs keys: max {:.3g}, mean {:.3g}").format(
            result.frames, result.bones, result.keys, fps, 100 * result.key_seconds / result.seconds,
            result.max_error, result.mean_error))
        if result.note:
            self.report({'WARNING'}, result.note)
        return {'FINISHED'}
