"""The analytic two-bone pose on plain floats (law of cosines), shared by :mod:`.two_bone` and the
two-bone case of :mod:`.fabrik`."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .prepare import EPS
from .rotations import perpendicular_floats, turn_floats

Point = tuple[float, float, float]


def law_of_cosines_points(start: Sequence[Sequence[float]], target: Sequence[float], pole: Sequence[float] | None,
                    l1: float, l2: float) -> list[Point]:
    """The analytic two-bone joints for three (x, y, z) start joints: the middle joint in the start's bend
    plane (or rolled to ``pole``), bones ``l1`` and ``l2`` long; no softness or stretch (those are
    :func:`.two_bone.two_bone_points`, which calls this)."""
    (rx, ry, rz), (ex, ey, ez), (sx, sy, sz) = start
    tx, ty, tz = target
    scale = l1 + l2
    relx, rely, relz = tx - rx, ty - ry, tz - rz
    d = math.sqrt(relx * relx + rely * rely + relz * relz)
    ax, ay, az = sx - rx, sy - ry, sz - rz
    a = math.sqrt(ax * ax + ay * ay + az * az)
    if a <= EPS * scale:
        ax, ay, az = ex - rx, ey - ry, ez - rz
        a = math.sqrt(ax * ax + ay * ay + az * az)
    ax, ay, az = ax / a, ay / a, az / a
    ux, uy, uz = (relx / d, rely / d, relz / d) if d > EPS * scale else (ax, ay, az)
    root = (rx, ry, rz)
    if d >= scale:
        return [root, (rx + l1 * ux, ry + l1 * uy, rz + l1 * uz), (rx + scale * ux, ry + scale * uy, rz + scale * uz)]
    if d <= abs(l1 - l2):
        # Fully folded: the tip as near the target as the lengths allow, on the target's side.
        e = l1 if l1 >= l2 else -l1
        f = abs(l1 - l2)
        return [root, (rx + e * ux, ry + e * uy, rz + e * uz), (rx + f * ux, ry + f * uy, rz + f * uz)]
    bx, by, bz = _bend_direction(root, (ex, ey, ez), (ux, uy, uz), (ax, ay, az), pole, scale)
    cos_a = min(1.0, max(-1.0, (l1 * l1 + d * d - l2 * l2) / (2.0 * l1 * d)))
    sin_a = math.sqrt(1.0 - cos_a * cos_a)
    elbow = (rx + l1 * (cos_a * ux + sin_a * bx), ry + l1 * (cos_a * uy + sin_a * by),
             rz + l1 * (cos_a * uz + sin_a * bz))
    return [root, elbow, (tx, ty, tz)]


def _bend_direction(root: Point, elbow: Point, u: Point, aim: Point, pole: Sequence[float] | None,
                    scale: float) -> Point:
    """Unit vector perpendicular to ``u`` on the side the middle joint should go."""
    ux, uy, uz = u
    if pole is not None:
        wx, wy, wz = pole[0] - root[0], pole[1] - root[1], pole[2] - root[2]
        t = wx * ux + wy * uy + wz * uz
        wx, wy, wz = wx - t * ux, wy - t * uy, wz - t * uz
        w = math.sqrt(wx * wx + wy * wy + wz * wz)
        if w > EPS * scale:
            return wx / w, wy / w, wz / w
    ax, ay, az = aim
    vx, vy, vz = elbow[0] - root[0], elbow[1] - root[1], elbow[2] - root[2]
    t = vx * ax + vy * ay + vz * az
    vx, vy, vz = vx - t * ax, vy - t * ay, vz - t * az
    v = math.sqrt(vx * vx + vy * vy + vz * vz)
    if v > EPS * scale:
        # The start pose's bend, rolled by the minimal rotation that aims the chain at the target.
        rx, ry, rz = turn_floats(ax, ay, az, ux, uy, uz, vx / v, vy / v, vz / v)
        t = rx * ux + ry * uy + rz * uz
        rx, ry, rz = rx - t * ux, ry - t * uy, rz - t * uz
        r = math.sqrt(rx * rx + ry * ry + rz * rz)
        if r > EPS:
            return rx / r, ry / r, rz / r
    return perpendicular_floats(ux, uy, uz)
