"""Trees with joint limits (issue 23): targets from the rig's own pose inside every cone are reached, the
limits are kept, and a reachable target a tree misses says "did not converge", never "out of reach"."""

import math

import bpy
import numpy as np
from mathutils import Quaternion
from rigs import armature, empty, world_tail

# Inside poses turn each coned bone by at most this fraction of its cone.
SPAN = 0.95


def coned_fork(branches: int, cone: float, hinge: bool = False):
    """A 2-bone trunk up +Z forking at its tail into ``branches`` bent 2-bone branches spread around it;
    a CONE of ``cone`` radians on every bone but the forking one (whose children move as one body), or a
    HINGE (+-2.5 rad about local X) on each branch's second bone when ``hinge``."""
    bones = [("trunk0", (0, 0, 0), (0, 0, 0.5), None, False), ("trunk1", (0, 0, 0.5), (0, 0, 1.0), "trunk0", True)]
    for b in range(branches):
        angle = 2.0 * math.pi * b / branches
        out = np.array([math.cos(angle), math.sin(angle), 1.1])
        side = np.array([-math.sin(angle), math.cos(angle), 0.0])
        mid = np.array([0, 0, 1.0]) + 0.35 * out + 0.08 * side
        tip = np.array([0, 0, 1.0]) + 0.7 * out
        bones += [(f"a{b}", (0, 0, 1.0), tuple(mid), "trunk1", True), (f"b{b}", tuple(mid), tuple(tip), f"a{b}", True)]
    ob = armature("Fork", bones)
    for pb in ob.pose.bones:
        if pb.name == "trunk1":
            continue
        limit = pb.fabrik_limit
        if hinge and pb.name.startswith("b"):
            limit.mode = 'HINGE'
            limit.hinge_min, limit.hinge_max = -2.5, 2.5
        else:
            limit.mode = 'CONE'
            limit.cone_left = limit.cone_right = limit.cone_up = limit.cone_down = cone
    return ob


def inside_pose(ob, rng, cone: float, hinge: bool = False, still: tuple[str, ...] = ("trunk1",)) -> list[np.ndarray]:
    """Tips of a random pose of every limited bone inside its limit (swings about local X and Z of at most
    half the cone; a hinge about X alone), the pose then reset."""
    names = [pb.name for pb in ob.pose.bones]
    for n in names:
        if n in still:
            continue
        if hinge and n.startswith("b"):
            axis, angle = np.array([1.0, 0.0, 0.0]), rng.uniform(-1.5, 1.5)
        else:
            phi = rng.uniform(0.0, 2.0 * math.pi)
            axis, angle = np.array([math.cos(phi), 0.0, math.sin(phi)]), rng.uniform(0.0, SPAN * cone)
        ob.pose.bones[n].rotation_quaternion = Quaternion(axis, angle)
    bpy.context.view_layer.update()
    tips = [world_tail(ob, n) for n in names if not ob.pose.bones[n].children]
    for n in names:
        ob.pose.bones[n].rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    bpy.context.view_layer.update()
    return tips


def coned_chains(ob, tips: list[np.ndarray]) -> list:
    chains = []
    for n, point in zip((pb.name for pb in ob.pose.bones if not pb.children), tips):
        chain = ob.fabrik.chains.add()
        chain.name = chain.tip_bone = n
        chain.chain_length = 4
        chain.target = empty(f"T.{n}", tuple(point))
        chains.append(chain)
    return chains
