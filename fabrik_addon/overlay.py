"""Viewport overlay "why doesn't it reach?": for the active armature's chains that stop short, the gap
from tip to target, the cone or hinge arc of the bone that holds the tip, and the pole line.

The geometry is a pure function of the last solve's :class:`.solver.reach.Shortfall` (``geometry``,
``chain_geometry``), which the tests call without a GPU; the draw handler that feeds it to the ``gpu``
module is added only where Blender has one (never in background mode, where ``gpu`` cannot draw).
"""

from __future__ import annotations

import math

import numpy as np

from . import diagnostics
from .solver.limits import ConeLimit, HingeLimit
from .solver.reach import Shortfall

# Segments of a cone's rim or a hinge's arc: smooth at any zoom a rigger uses (9 degrees a segment).
ARC_SEGMENTS = 40

# Each kind of line and the theme colour (Preferences > Themes > 3D Viewport) it is drawn in.
THEME_COLOURS = {"gap": "object_active", "limit": "bone_pose_active", "pole": "empty"}

Segments = list[tuple[np.ndarray, np.ndarray]]


def geometry(why: Shortfall, matrix_world=None, segments: int = ARC_SEGMENTS) -> dict[str, Segments]:
    """World-space line segments showing why a chain stops short.

    Parameters
    ----------
    why : Shortfall
        The chain's shortfall, armature space.
    matrix_world : array_like, shape (4, 4), optional
        The armature's world matrix (identity when None).
    segments : int
        Segments of a cone's rim or a hinge's arc.

    Returns
    -------
    dict
        ``"gap"``: the tip to the target; ``"limit"`` (LIMIT and POLE): the outline of the holding bone's
        limit at its length from its head (a cone's rim and four spokes, a hinge's arc and its two
        ends), empty otherwise; ``"pole"``: the chain's middle joint to its pole, when it has one. Each
        a list of ``(start, end)`` points, shape (3,).
    """
    world = np.eye(4) if matrix_world is None else np.asarray(matrix_world, dtype=np.float64)
    lines: dict[str, Segments] = {"gap": [(why.tip, why.target)], "limit": [], "pole": []}
    if why.pole is not None:
        lines["pole"].append((why.middle, why.pole))
    if why.reason in ('LIMIT', 'POLE') and why.limit_frame is not None and why.limit_origin is not None:
        lines["limit"] = limit_outline(why.limit, why.limit_frame, why.limit_origin, why.bone_length, segments)
    return {kind: [(_apply(world, a), _apply(world, b)) for a, b in pairs] for kind, pairs in lines.items()}


def limit_outline(limit, frame: np.ndarray, origin: np.ndarray, radius: float,
                  segments: int = ARC_SEGMENTS) -> Segments:
    """Line segments outlining ``limit`` (measured in ``frame``, columns X, Y, Z) at ``radius`` from
    ``origin``: every point on them is a direction the limit allows at its boundary."""
    if isinstance(limit, ConeLimit):
        rim = [origin + radius * (frame @ np.array(limit.rim(2.0 * math.pi * k / segments)))
               for k in range(segments + 1)]
        spokes = [(origin, rim[k * segments // 4]) for k in range(4)]
        return [(rim[k], rim[k + 1]) for k in range(segments)] + spokes
    if isinstance(limit, HingeLimit):
        angles = np.linspace(limit.min_angle, limit.max_angle, segments + 1)
        arc = [origin + radius * (frame @ np.array([0.0, math.cos(a), math.sin(a)])) for a in angles]
        return [(arc[k], arc[k + 1]) for k in range(segments)] + [(origin, arc[0]), (origin, arc[-1])]
    return []


def _apply(matrix: np.ndarray, point: np.ndarray) -> np.ndarray:
    return matrix[:3, :3] @ np.asarray(point, dtype=np.float64) + matrix[:3, 3]


def chain_geometry(ob) -> dict[str, Segments]:
    """:func:`geometry` of every enabled chain of armature ``ob`` that stopped short, merged by kind."""
    merged: dict[str, Segments] = {kind: [] for kind in THEME_COLOURS}
    world = np.array(ob.matrix_world)
    for chain in ob.fabrik.chains:
        explained = diagnostics.explanation(chain) if chain.enabled else None
        why = None if explained is None else explained.shortfall
        if why is not None:
            for kind, pairs in geometry(why, world).items():
                merged[kind] += pairs
    return merged


def theme_colours(context) -> dict[str, tuple[float, float, float, float]]:
    """Each kind of line's colour, from the user's theme (opaque)."""
    view = context.preferences.themes[0].view_3d
    return {kind: (*getattr(view, name)[:3], 1.0) for kind, name in THEME_COLOURS.items()}


def _draw() -> None:
    """The draw handler: the active armature's overlay, when its switch is on. Never raises."""
    import bpy

    try:
        context = bpy.context
        ob = context.object
        if ob is None or ob.type != 'ARMATURE' or not ob.fabrik.show_reach_overlay:  # type: ignore[attr-defined]
            return
        lines = chain_geometry(ob)
        if not any(lines.values()):
            return
        import gpu
        from gpu_extras.batch import batch_for_shader

        shader = gpu.shader.from_builtin('UNIFORM_COLOR')
        gpu.state.blend_set('ALPHA')
        gpu.state.line_width_set(2.0)
        for kind, colour in theme_colours(context).items():
            if lines[kind]:
                coords = [tuple(p) for pair in lines[kind] for p in pair]
                batch = batch_for_shader(shader, 'LINES', {"pos": coords})
                shader.uniform_float("color", colour)
                batch.draw(shader)
        gpu.state.line_width_set(1.0)
        gpu.state.blend_set('NONE')
    except Exception as error:  # a draw handler must never raise (it would every redraw)
        print(f"FABRIK IK overlay: {error}")


_handles: list = []


def install() -> None:
    """Add the draw handler, only where Blender has a GPU to draw with."""
    import bpy

    if bpy.app.background or _handles:
        return
    _handles.append(bpy.types.SpaceView3D.draw_handler_add(_draw, (), 'WINDOW', 'POST_VIEW'))


def remove() -> None:
    import bpy

    while _handles:
        bpy.types.SpaceView3D.draw_handler_remove(_handles.pop(), 'WINDOW')
