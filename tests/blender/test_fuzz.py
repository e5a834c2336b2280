"""Property fuzz: random and extreme values on every chain and limit property, random frames.

Thousands of steps with a fixed seed on rigs covering standalone chains, a tree and a chain below
another chain; after each step no handler printed a traceback and no bone holds a NaN.
"""

import math

import bpy
import numpy as np
import pytest
from rigs import add_chain, armature, empty, key_path, straightish_chain
from status_checks import no_traceback  # noqa: F401

pytestmark = pytest.mark.usefixtures("solve_path", "no_traceback")

STEPS = 1500
F32_PI = float(np.float32(math.pi))
FLOATS = [0.0, -0.0, 1e-12, 0.5, 1.0, F32_PI, -F32_PI, math.pi, 2 * math.pi, -1.0, 1e6, -1e6, 1e30, 3.4e38,
          float("inf"), float("-inf"), float("nan")]
INTS = [0, 1, 2, 3, 4, 5, 10, 255, 256, -1, 2**31 - 1]


def scene():
    torso = armature("Torso", [
        ("spine0", (0, 0, 0.0), (0, 0, 0.6), None, False, 0.0),
        ("spine1", (0, 0, 0.6), (0, 0, 1.2), "spine0", True, 0.0),
        ("upper.L", (0.2, 0, 1.15), (0.7, 0, 1.1), "spine1", False, 0.0),
        ("fore.L", (0.7, 0, 1.1), (1.2, 0, 1.1), "upper.L", True, 0.0),
        ("hand.L", (1.2, 0, 1.1), (1.4, 0, 1.1), "fore.L", True, 0.0),
        ("upper.R", (-0.2, 0, 1.15), (-0.7, 0, 1.1), "spine1", False, 0.0),
        ("fore.R", (-0.7, 0, 1.1), (-1.2, 0, 1.1), "upper.R", True, 0.0),
        ("zero", (0, 0, 1.2), (0, 0, 1.2 + 1e-7), "spine1", True, 0.0),
    ])
    arm = straightish_chain("Arm", 5, location=(3.0, 0.0, 0.0))
    tail = straightish_chain("Tail", 2, location=(-3.0, 0.0, 0.0))
    targets = [empty(f"T{i}", (0.5 * i, 0.3, 1.5)) for i in range(4)]
    key_path(targets[0], [(1.0, 0.5, 1.4), (0.2, -0.8, 0.7), (1.3, 0.4, 2.0)], [1, 10, 20])
    add_chain(torso, "fore.L", 4, targets[0])
    add_chain(torso, "fore.R", 4, targets[1], pole=targets[2])
    add_chain(torso, "hand.L", 1, targets[2])  # below the tree
    add_chain(arm, "b4", 3, targets[3], pole=targets[1])
    add_chain(arm, "b1", 2, targets[1], solver='TWO_BONE')
    add_chain(tail, "b1", 2, torso, target_bone="fore.L")
    bpy.context.view_layer.update()
    return [torso, arm, tail], targets


CHAIN_PROPS = ["enabled", "tip_bone", "chain_length", "solver", "target", "target_bone", "pole", "pole_bone",
               "iterations", "tolerance", "match_target_rotation", "influence", "weight", "name"]
LIMIT_PROPS = ["mode", "cone_left", "cone_right", "cone_up", "cone_down", "hinge_min", "hinge_max"]


def random_value(rng, prop, rigs, targets):
    rna = prop
    if rna.type == 'FLOAT':
        return FLOATS[rng.integers(len(FLOATS))] if rng.random() < 0.6 else float(rng.normal(0.0, 4.0))
    if rna.type == 'INT':
        return INTS[rng.integers(len(INTS))] if rng.random() < 0.5 else int(rng.integers(0, 8))
    if rna.type == 'BOOLEAN':
        return bool(rng.random() < (0.8 if rna.identifier == 'enabled' else 0.5))
    if rna.type == 'ENUM':
        items = [item.identifier for item in rna.enum_items]
        return items[rng.integers(len(items))]
    if rna.type == 'STRING':
        names = [b.name for ob in rigs for b in ob.data.bones] + ["", "nope", 'q"uote', "\\"]
        return names[rng.integers(len(names))]
    if rna.type == 'POINTER':
        objects = [None, *rigs, *targets]
        return objects[rng.integers(len(objects))]
    raise AssertionError(rna.type)


def assign(owner, name, value):
    try:
        setattr(owner, name, value)
    except (TypeError, ValueError, OverflowError):
        pass  # Blender refused the value itself: what the UI would do


def step(rng, rigs, targets, log):
    kind = rng.random()
    ob = rigs[rng.integers(len(rigs))]
    chains = ob.fabrik.chains
    if kind < 0.45 and len(chains):
        chain = chains[int(rng.integers(len(chains)))]
        name = CHAIN_PROPS[rng.integers(len(CHAIN_PROPS))]
        value = random_value(rng, chain.bl_rna.properties[name], rigs, targets)
        log.append(f"{ob.name}.chains[{chain.name}].{name} = {value!r}")
        assign(chain, name, value)
    elif kind < 0.7:
        pb = ob.pose.bones[int(rng.integers(len(ob.pose.bones)))]
        name = LIMIT_PROPS[rng.integers(len(LIMIT_PROPS))]
        value = random_value(rng, pb.fabrik_limit.bl_rna.properties[name], rigs, targets)
        log.append(f"{ob.name}.{pb.name}.fabrik_limit.{name} = {value!r}")
        assign(pb.fabrik_limit, name, value)
    elif kind < 0.78:
        target = targets[rng.integers(len(targets))]
        far = rng.random() < 0.1
        value = tuple(float(v) for v in (rng.normal(0.0, 1e20 if far else 1.5, 3)))
        log.append(f"{target.name}.location = {value}")
        target.location = value
    elif kind < 0.83:
        pb = ob.pose.bones[int(rng.integers(len(ob.pose.bones)))]
        mode = ['QUATERNION', 'XYZ', 'ZYX', 'AXIS_ANGLE'][rng.integers(4)]
        log.append(f"{ob.name}.{pb.name}.rotation_mode = {mode}")
        pb.rotation_mode = mode
    elif kind < 0.87:
        on = bool(rng.random() < 0.7)  # mostly on: a fuzz of switched-off rigs would test little
        log.append(f"{ob.name}.fabrik.enabled = {on}")
        ob.fabrik.enabled = on
    elif kind < 0.9:
        if rng.random() < 0.5 and len(chains) < 6:
            tip = ob.pose.bones[int(rng.integers(len(ob.pose.bones)))].name
            log.append(f"{ob.name}.chains.add({tip})")
            add_chain(ob, tip, int(rng.integers(0, 4)), targets[rng.integers(len(targets))])
        elif len(chains) > 1:
            a, b = int(rng.integers(len(chains))), int(rng.integers(len(chains)))
            if rng.random() < 0.5:
                log.append(f"{ob.name}.chains.move({a}, {b})")
                chains.move(a, b)
            else:
                log.append(f"{ob.name}.chains.remove({a})")
                chains.remove(a)
    elif kind < 0.92:  # users rename bones in Object Mode; chains name their tip, so only some follow
        bone = ob.data.bones[int(rng.integers(len(ob.data.bones)))]
        new = f"{bone.name.split('~')[0]}~{int(rng.integers(100))}"
        log.append(f"{ob.name}.data.bones[{bone.name}].name = {new}")
        bone.name = new
    elif kind < 0.94:  # rigs that swap names, and Rest Position switched
        a, b = rigs[0], rigs[int(rng.integers(1, len(rigs)))]
        log.append(f"swap names {a.name} <-> {b.name}")
        old_a, old_b = a.name, b.name
        a.name = "swap~"
        b.name = old_a
        a.name = old_b
    elif kind < 0.96:
        position = 'REST' if rng.random() < 0.3 else 'POSE'
        log.append(f"{ob.name}.data.pose_position = {position}")
        ob.data.pose_position = position
    if rng.random() < 0.5:
        frame = int(rng.integers(-5, 30))
        log.append(f"frame_set({frame})")
        bpy.context.scene.frame_set(frame)
    else:
        log.append("update")
        bpy.context.view_layer.update()


def heal(rigs) -> None:
    """Rigs on, in Pose Position, chains on with their tips renamed back: the next steps break them again."""
    for ob in rigs:
        ob.fabrik.enabled = True
        ob.data.pose_position = 'POSE'
        for bone in ob.data.bones:
            bone.name = bone.name.split('~')[0]
        for chain in ob.fabrik.chains:
            chain.enabled = True


def assert_no_nan(rigs, log, evaluated: bool):
    depsgraph = bpy.context.evaluated_depsgraph_get() if evaluated else None
    for ob in rigs:
        for pb in ob.pose.bones:
            values = (*pb.rotation_quaternion, *pb.rotation_euler, *pb.rotation_axis_angle)
            assert all(math.isfinite(v) for v in values), (ob.name, pb.name, values, log[-8:])
        if depsgraph is not None:
            ev = ob.evaluated_get(depsgraph)
            for pb in ev.pose.bones:
                assert all(math.isfinite(v) for row in pb.matrix for v in row), (ob.name, pb.name, log[-8:])


def test_property_fuzz_never_raises_and_never_writes_nan(capfd):
    rng = np.random.default_rng(14)
    rigs, targets = scene()
    log: list[str] = []
    solving = 0
    for k in range(STEPS):
        if k % 100 == 99:  # heal now and then, so that most steps have chains to solve
            log.append("heal")
            heal(rigs)
        step(rng, rigs, targets, log)
        assert_no_nan(rigs, log, evaluated=k % 10 == 0)
        solving += any(chain.status in {'REACHED', 'UNREACHABLE'} for ob in rigs for chain in ob.fabrik.chains)
        out, err = capfd.readouterr()  # every step: report the steps that led to a traceback
        assert "Traceback" not in err + out and "Could not solve" not in err + out, \
            (err + out)[-3000:] + "\n" + "\n".join(log[-10:])
        for ob in rigs:  # an unexpected error caught per chain, or a slider end the solver refused
            for chain in ob.fabrik.chains:
                assert "Could not solve" not in chain.message and "got 3.1415927" not in chain.message \
                    and "got -3.1415927" not in chain.message, chain.message + "\n" + "\n".join(log[-10:])
    assert solving > STEPS // 3, f"only {solving} of {STEPS} steps solved a chain: the fuzz tests too little"
