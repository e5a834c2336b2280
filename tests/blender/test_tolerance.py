"""REACHED means the tip is within the tolerance, a fraction of the chain's own length (default 1e-3), of
the target: for chains from millimetres to tens of metres, on every solving path."""

import bpy
import numpy as np
import pytest
from rigs import armature, empty, straightish_bones, straightish_chain, world_tail

SIZES = (0.002, 0.05, 1.0, 20.0)  # chain lengths, scene units


def default_chain(ob, tip: str, length: int, target):
    """A chain with every setting at its default."""
    chain = ob.fabrik.chains.add()
    chain.tip_bone, chain.chain_length, chain.target = tip, length, target
    return chain


def reach_point(size: float, fraction: float, direction) -> tuple:
    """A point ``fraction`` of a 4-bone chain's length (``size``) from its root at the origin."""
    d = np.asarray(direction, dtype=float)
    return tuple(fraction * size * d / np.linalg.norm(d))


DIRECTIONS = ((1.0, 0.3, 0.5), (-0.4, 1.0, 0.2), (0.2, -0.5, 1.0))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_a_target_just_out_of_reach_is_unreachable_at_any_size(size, direction, solve_path):
    ob = straightish_chain("Arm", 4, length=size / 4, bend=size / 40)
    length = sum(b.length for b in ob.data.bones)
    target = empty("Target", reach_point(length, 1.01, direction))
    chain = default_chain(ob, "b3", 4, target)
    bpy.context.scene.frame_set(1)
    assert chain.status == 'UNREACHABLE', (chain.status, chain.last_error)
    assert chain.last_error == pytest.approx(0.01 * length, rel=0.02)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_reached_means_within_a_thousandth_of_the_chain_at_any_size(size, direction, solve_path):
    ob = straightish_chain("Arm", 4, length=size / 4, bend=size / 40)
    length = sum(b.length for b in ob.data.bones)
    target = empty("Target", reach_point(length, 0.7, direction))
    chain = default_chain(ob, "b3", 4, target)
    bpy.context.scene.frame_set(1)
    assert chain.status == 'REACHED', (chain.status, chain.message)
    miss = np.linalg.norm(world_tail(ob, "b3") - np.array(target.location))
    assert miss <= 1e-3 * length
    assert chain.last_error == pytest.approx(miss, abs=1e-6 * length)  # float32 bone matrices


@pytest.mark.parametrize("scale", (0.01, 30.0))
def test_the_armature_object_scale_does_not_change_what_reached_means(scale, solve_path):
    """A chain 4 units long in its armature, the object scaled: the tolerance scales with it."""
    ob = straightish_chain("Arm", 4)
    ob.scale = (scale,) * 3
    length = 4.0 * scale
    out = empty("Out", reach_point(length, 1.01, DIRECTIONS[0]))
    chain = default_chain(ob, "b3", 4, out)
    bpy.context.scene.frame_set(1)
    assert chain.status == 'UNREACHABLE', (chain.status, chain.last_error)
    out.location = reach_point(length, 0.6, DIRECTIONS[1])
    bpy.context.scene.frame_set(2)
    assert chain.status == 'REACHED', chain.message
    assert np.linalg.norm(world_tail(ob, "b3") - np.array(out.location)) <= 1e-3 * length


@pytest.mark.parametrize("size", (0.05, 20.0))
def test_chains_sharing_bones_reach_within_their_own_length_too(size):
    """Two arms on one spine (a tree), each reaching within a thousandth of its own chain's length."""
    s = size / 4
    bones = [*straightish_bones(2, s, s / 10, prefix="s"),
             ("l0", (0.0, 0.1 * s, 2 * s), (-s, 0.1 * s, 2 * s), "s1", False),
             ("l1", (-s, 0.1 * s, 2 * s), (-2 * s, 0.2 * s, 2 * s), "l0", True),
             ("r0", (0.0, 0.1 * s, 2 * s), (s, 0.1 * s, 2 * s), "s1", False),
             ("r1", (s, 0.1 * s, 2 * s), (2 * s, 0.2 * s, 2 * s), "r0", True)]
    ob = armature("Torso", bones)
    goals = {"l1": empty("Left", (-1.5 * s, 0.5 * s, 2.5 * s)), "r1": empty("Right", (1.2 * s, 0.8 * s, 2.6 * s))}
    chains = {tip: default_chain(ob, tip, 4, goal) for tip, goal in goals.items()}
    bpy.context.scene.frame_set(1)
    for tip, chain in chains.items():
        assert chain.group
        assert chain.status == 'REACHED', (chain.status, chain.message, chain.last_error)
        length = sum(ob.data.bones[name].length for name in ("s0", "s1", tip[0] + "0", tip))
        assert np.linalg.norm(world_tail(ob, tip) - np.array(goals[tip].location)) <= 1e-3 * length


def test_the_default_tolerance_says_it_is_a_fraction_of_the_chain():
    prop = bpy.types.FabrikChain.bl_rna.properties["tolerance"] if hasattr(bpy.types, "FabrikChain") else None
    if prop is None:
        ob = straightish_chain("Arm", 2)
        prop = ob.fabrik.chains.add().bl_rna.properties["tolerance"]
    assert prop.default == pytest.approx(1e-3)
    assert "fraction of the chain's length" in prop.description
    assert "scene units" in prop.description  # what it meant before, for files saved then


@pytest.mark.parametrize("tolerance", (0.01, 0.05))
@pytest.mark.parametrize("size", (0.05, 20.0))
def test_a_looser_tolerance_scales_with_the_chain_too(tolerance, size, solve_path):
    """A target ``tolerance`` / 2 of the chain's length beyond its reach reads as reached, at 2 x it not."""
    ob = straightish_chain("Arm", 4, length=size / 4, bend=size / 40)
    length = sum(b.length for b in ob.data.bones)
    target = empty("Target", reach_point(length, 1.0 + tolerance / 2, DIRECTIONS[2]))
    chain = default_chain(ob, "b3", 4, target)
    chain.tolerance = tolerance
    bpy.context.scene.frame_set(1)
    assert chain.status == 'REACHED', (chain.status, chain.last_error)
    target.location = reach_point(length, 1.0 + 2 * tolerance, DIRECTIONS[2])
    bpy.context.scene.frame_set(2)
    assert chain.status == 'UNREACHABLE', (chain.status, chain.last_error)
