"""Bake the live IK pose to rotation keyframes, and measure how far the keys drift from it."""

from __future__ import annotations

import time
from dataclasses import dataclass

import bpy
import numpy as np
from bpy.props import BoolProperty, FloatProperty, IntProperty
from mathutils import Euler, Quaternion

from . import adapter, compat, handlers
from .rig.plan import ChainError, check_references, plan_chains

LINEAR = 1  # index of 'LINEAR' in Blender's keyframe interpolation enum, for foreach_set


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


def bake_chains(context, ob, chain_indices: list[int], frame_start: int, frame_end: int, step: int = 1,
                reduce_tolerance: float = 0.0, disable_chains: bool = True, progress=None) -> BakeResult:
    """Sample the live IK of ``chain_indices`` over the frames and key each bone's rotation channels.

    Raises ``ValueError`` (with a message for the user) when nothing can be baked.
    """
    if frame_end < frame_start:
        raise ValueError(f"Frame range {frame_start}-{frame_end} is empty")
    if step < 1:
        raise ValueError("Step must be at least 1")
    scene = context.scene
    chains = ob.fabrik.chains
    handlers.request_solve()
    plans = {plan.index: plan for plan in plan_chains(ob)}
    missing = [chains[i].name for i in chain_indices if i not in plans]
    if missing:
        raise ValueError(f"Cannot bake invalid or disabled chains: {', '.join(missing)}")
    for i in chain_indices:
        try:
            check_references(ob, chains[i], plans[i].bones)
        except ChainError as error:
            raise ValueError(f"Cannot bake chain '{chains[i].name}': {error}") from error
    bones: list[str] = []
    chain_bones: dict[int, list[str]] = {}
    for i in chain_indices:
        chain_bones[i] = plans[i].bones
        bones.extend(b for b in plans[i].bones if b not in bones)
    keyed_frames = list(range(frame_start, frame_end + 1, step))
    if keyed_frames[-1] != frame_end:
        keyed_frames.append(frame_end)
    all_frames = list(range(frame_start, frame_end + 1))
    pose_bones = [ob.pose.bones[name] for name in bones]
    modes = [pb.rotation_mode for pb in pose_bones]

    started = time.perf_counter()
    original_frame = scene.frame_current
    values: dict[str, list[tuple[float, ...]]] = {name: [] for name in bones}
    live = np.empty((len(all_frames), len(bones), 2, 3))
    # Reduction budgets from a safe bound (a bone turned by an angle moves points by at most angle
    # times their distance) keep far more keys than the tolerance needs, so the budget grows 4x at a
    # time while replaying the keys still measures within the tolerance; the x1 bound always does.
    loosen = [4.0**k for k in range(7)] if reduce_tolerance > 0.0 else [1.0]
    total_steps = len(all_frames) * (1 + len(loosen))
    try:
        for k, frame in enumerate(all_frames):
            scene.frame_set(frame)
            depsgraph = context.evaluated_depsgraph_get()
            live[k] = _heads_and_tails(ob, depsgraph, bones)
            if frame in keyed_frames:
                for name, pb in zip(bones, pose_bones):
                    values[name].append(adapter.read_rotation(pb))
            if progress:
                progress(k + 1, total_steps)
        # Continuous tracks and each bone's reach do not depend on the reduction budget: once, not per try.
        tracks = [_continuous(mode, np.array(values[name], dtype=np.float64)) for name, mode in zip(bones, modes)]
        reaches = [_reach(live, b) for b in range(len(bones))] if reduce_tolerance > 0.0 else []
        passed = None
        key_seconds = 0.0
        for attempt, factor in enumerate(loosen):
            writing = time.perf_counter()
            keys = _write_keys(ob, bones, modes, keyed_frames, tracks, reaches, all_frames, reduce_tolerance, factor)
            key_seconds += time.perf_counter() - writing
            baked = _replay(context, ob, bones, all_frames)
            if progress:
                progress(len(all_frames) * (2 + attempt), total_steps)
            if reduce_tolerance <= 0.0 or np.linalg.norm(baked - live, axis=-1).max() > reduce_tolerance:
                break
            passed = (factor, keys, baked)
        if reduce_tolerance > 0.0 and passed is not None and passed[0] != factor:
            # The looser budget overshot: put back the keys of the last one that measured within.
            writing = time.perf_counter()
            _write_keys(ob, bones, modes, keyed_frames, tracks, reaches, all_frames, reduce_tolerance, passed[0])
            key_seconds += time.perf_counter() - writing
            keys, baked = passed[1], passed[2]
    finally:
        if disable_chains:
            for i in chain_indices:
                chains[i].enabled = False
        scene.frame_set(original_frame)
    seconds = time.perf_counter() - started
    drift = np.linalg.norm(baked - live, axis=-1)  # (frames, bones, 2)
    chain_errors = {}
    for i in chain_indices:
        cols = [bones.index(b) for b in chain_bones[i]]
        part = drift[:, cols]
        chain_errors[i] = (float(part.max()), float(part.mean()))
        chains[i].bake_max_error, chains[i].bake_mean_error = chain_errors[i]
    return BakeResult(len(all_frames), len(bones), keys, seconds, key_seconds, float(drift.max()),
                      float(drift.mean()), chain_errors)


def _replay(context, ob, bones: list[str], frames: list[int]) -> np.ndarray:
    """Heads and tails of ``bones`` as the keys play them, with this armature's IK paused."""
    out = np.empty((len(frames), len(bones), 2, 3))
    with handlers.suspended([ob.name]):
        for k, frame in enumerate(frames):
            context.scene.frame_set(frame)
            out[k] = _heads_and_tails(ob, context.evaluated_depsgraph_get(), bones)
    return out


def _heads_and_tails(ob, depsgraph, bones: list[str]) -> np.ndarray:
    ev = ob.evaluated_get(depsgraph)
    world = ev.matrix_world
    return np.array([[tuple(world @ ev.pose.bones[name].head), tuple(world @ ev.pose.bones[name].tail)]
                     for name in bones])


def _write_keys(ob, bones, modes, frames, tracks, reaches, all_frames, reduce_tolerance, loosen=1.0) -> int:
    """Replace the keys inside the frame range on each bone's rotation channels; returns keys written."""
    fcurves = compat.ensure_fcurves(ob)
    first, last = all_frames[0], all_frames[-1]
    written = 0
    for b, (name, mode) in enumerate(zip(bones, modes)):
        track = tracks[b]
        keep = np.arange(len(frames))
        if reduce_tolerance > 0.0:
            # Each bone may spend an equal share of the tolerance; its angle error moves points at most
            # angle * reach, so keys are dropped while every bone stays within its angular share.
            budget = loosen * reduce_tolerance / (len(bones) * max(reaches[b], 1e-9))
            keep = _reduce(mode, track, budget)
        path = f'pose.bones["{name}"].{adapter.rotation_path(mode)}'
        for index in range(track.shape[1]):
            fcurve = fcurves.find(path, index=index) or compat.new_fcurve(fcurves, path, index, name)
            points = fcurve.keyframe_points
            for point in reversed(list(points)):
                if first <= point.co.x <= last:
                    points.remove(point, fast=True)
            before = len(points)
            points.add(len(keep))
            co = np.empty(2 * len(points))
            points.foreach_get("co", co)
            co[2 * before::2] = np.array(frames, dtype=np.float64)[keep]
            co[2 * before + 1::2] = track[keep, index]
            points.foreach_set("co", co)
            interpolation = np.empty(len(points), dtype=np.int32)
            points.foreach_get("interpolation", interpolation)
            interpolation[before:] = LINEAR
            points.foreach_set("interpolation", interpolation)
            fcurve.update()
            written += len(keep)
    return written


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


def _reduce(mode: str, track: np.ndarray, budget: float) -> np.ndarray:
    """Douglas-Peucker over frames: keep the fewest keys whose linear interpolation stays within
    ``budget`` radians of every sampled rotation, interpolating channels the way Blender plays them."""
    keep = {0, len(track) - 1}
    stack = [(0, len(track) - 1)]
    while stack:
        a, b = stack.pop()
        if b - a < 2:
            continue
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
    p = adapter.quaternion_from_channels(mode, tuple(played))
    s = adapter.quaternion_from_channels(mode, tuple(sampled))
    return p.rotation_difference(s).angle if isinstance(p, Quaternion) else 0.0


def default_range(scene) -> tuple[int, int]:
    if scene.use_preview_range:
        return scene.frame_preview_start, scene.frame_preview_end
    return scene.frame_start, scene.frame_end


class POSE_OT_fabrik_bake(bpy.types.Operator):
    bl_idname = "pose.fabrik_bake"
    bl_label = "Bake FABRIK IK"
    bl_description = "Key the live IK pose of the chains' bones (rotation channels only) over a frame range"
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

    @classmethod
    def poll(cls, context):
        ob = context.object
        if ob is None or ob.type != 'ARMATURE':
            cls.poll_message_set("Select an armature")
            return False
        if not any(chain.enabled for chain in ob.fabrik.chains):
            cls.poll_message_set("This armature has no enabled FABRIK chains")
            return False
        return True

    def invoke(self, context, event):
        self._fill_range(context.scene)
        return context.window_manager.invoke_props_dialog(self)

    def _fill_range(self, scene) -> None:
        start, end = default_range(scene)
        if not self.properties.is_property_set("frame_start"):
            self.frame_start = start
        if not self.properties.is_property_set("frame_end"):
            self.frame_end = end

    def execute(self, context):
        self._fill_range(context.scene)
        ob = context.object
        settings = ob.fabrik
        if self.only_active_chain:
            indices = [min(settings.active_chain_index, len(settings.chains) - 1)]
        else:
            indices = [i for i, chain in enumerate(settings.chains) if chain.enabled]
        wm = context.window_manager
        wm.progress_begin(0, 100)
        try:
            result = bake_chains(context, ob, indices, self.frame_start, self.frame_end, self.step,
                                 self.reduce_tolerance, self.disable_chains,
                                 progress=lambda done, total: wm.progress_update(int(100 * done / total)))
        except ValueError as error:
            self.report({'ERROR'}, str(error))
            return {'CANCELLED'}
        finally:
            wm.progress_end()
        fps = result.frames / result.seconds if result.seconds > 0 else float("inf")
        self.report({'INFO'}, f"Baked {result.frames} frames of {result.bones} bones ({result.keys} keys) "
                              f"at {fps:.0f} frames/s ({100 * result.key_seconds / result.seconds:.0f}% writing "
                              f"keys); live IK vs keys: max {result.max_error:.3g}, mean {result.mean_error:.3g}")
        return {'FINISHED'}
