"""Differential history fuzz: copies of one set of rigs put through different random histories, then brought to
the same final inputs, must show one pose (the project's rule: the pose at a frame depends on that frame's
inputs, never on what was solved or done before).

Each copy holds the same rigs (a hip with a five-bone leg below it and a free side bone, keyed FK on part of a
quaternion; a Two-Bone arm under a keyed target; a torso whose arms share the spine, a tree, with a hand chain
hanging below it) with their own targets and poles, all in one place. Copy 0 has no history (it is built when
the others' histories are over, and solved first with the final inputs); the others take
random steps (targets and poles moved near, far, beyond reach and behind the root; rotations set by script on
chain bones, their parents and free bones, in every rotation mode; rotation modes changed; chains and rigs
switched off and on; chain length, iterations, tolerance, influence, solver changed; poles added and removed;
joint limits set, changed and removed), each followed by an update or a frame change (forward, backward, out of
order). Then every copy gets the same final inputs the way a user would give them: its chains switched off
(their bones given back their pose without IK), every bone posed and moded alike, the same settings, limits,
targets and poles, the chains switched on, the same frame. The stored pose without IK is then the same by its
own rule (the rotation a bone has when its chain takes it), so every bone's matrix must agree between copies.
"""

from __future__ import annotations

import math

import bpy
import numpy as np
from mathutils import Quaternion
from rigs import MODES, add_chain, armature, empty, key_path, set_rotation, straightish_bones, torso

# Copies in one place (rigs do not see each other's targets): their world coordinates are the same floats. 20
# units apart, a torso with hinges and targets out of reach ended 0.008 apart from the float32 rounding of its
# positions alone, no history needed.
SPACING = 0.0
FRAMES = 12


def leg_bones() -> list:
    """A hip, a five-bone leg below it (its top unconnected) and a side bone off the hip, in no chain."""
    bones = [("hip", (0.0, 0.0, -0.4), (0.0, 0.0, 0.0), None, False, 0.0),
             ("side", (0.0, 0.0, 0.0), (0.4, 0.1, 0.1), "hip", False, 0.0)]
    for name, head, tail, parent, connected, roll in straightish_bones(5, length=0.5, bend=0.05, prefix="leg"):
        bones.append((name, head, tail, parent or "hip", connected, roll))
    return bones


def arm_bones() -> list:
    return [("up", (0.0, 0.0, 0.0), (0.0, 0.1, 1.0), None, False, 0.0),
            ("lo", (0.0, 0.1, 1.0), (0.0, 0.0, 2.0), "up", True, 0.0)]


def build(copy: int) -> dict:
    """One copy of the rigs, its targets and poles (names end in ``_<copy>``)."""
    x = SPACING * copy
    leg = armature(f"Leg_{copy}", leg_bones(), (x, 0.0, 0.0))
    arm = armature(f"Arm_{copy}", arm_bones(), (x, 4.0, 0.0))
    body = torso(f"Torso_{copy}")
    body.location = (x, 8.0, 0.0)
    bpy.context.view_layer.objects.active = body
    bpy.ops.object.mode_set(mode='EDIT')
    hand = body.data.edit_bones.new("hand.L")
    hand.head, hand.tail = (1.2, 0.0, 1.1), (1.4, 0.0, 1.1)
    hand.parent = body.data.edit_bones["fore.L"]
    hand.use_connect = True
    bpy.ops.object.mode_set(mode='OBJECT')
    # Keyed FK on part of a quaternion: leg1's W and X keyed, Y and Z not.
    pb = leg.pose.bones["leg1"]
    for frame in (1, FRAMES):
        pb.rotation_quaternion = Quaternion((1.0, 0.0, 0.0), 0.2 if frame == 1 else -0.3)
        for index in (0, 1):
            pb.keyframe_insert("rotation_quaternion", index=index, frame=frame)
    pb.rotation_quaternion = Quaternion()
    targets = {name: empty(f"{name}_{copy}", location) for name, location in (
        ("leg_t", (x + 0.6, 0.3, 1.6)), ("leg_p", (x, -2.0, 1.0)), ("arm_t", (x, 4.0, 0.0)),
        ("arm_p", (x, 6.0, 1.0)), ("l_t", (x + 1.0, 8.5, 1.0)), ("r_t", (x - 1.0, 8.3, 1.2)),
        ("r_p", (x - 1.0, 6.0, 1.0)), ("h_t", (x + 1.2, 8.0, 0.7)))}
    key_path(targets["arm_t"], [(x + 0.8, 4.5, 1.2), (x - 0.4, 3.8, 1.5), (x + 1.5, 4.0, 0.5)], [1, 6, FRAMES])
    add_chain(leg, "leg4", 3, targets["leg_t"], tolerance=1e-5)  # leg0 and leg1 join later
    add_chain(arm, "lo", 2, targets["arm_t"], solver='TWO_BONE', tolerance=1e-5)
    add_chain(body, "fore.L", 4, targets["l_t"], tolerance=1e-5)
    add_chain(body, "fore.R", 4, targets["r_t"], pole=targets["r_p"], tolerance=1e-5)
    add_chain(body, "hand.L", 1, targets["h_t"], tolerance=1e-5)
    return {"rigs": [leg, arm, body], "targets": targets, "x": x}


POLES = {("Leg", "leg4"): "leg_p", ("Arm", "lo"): "arm_p", ("Torso", "fore.R"): "r_p"}
LIMIT_BONES = {"Leg": ["leg1", "leg2", "leg3", "leg4"], "Arm": ["lo"], "Torso": ["fore.L", "upper.L", "fore.R"]}


def kind(ob) -> str:
    return ob.name.split("_")[0]


def random_rotation(rng, spread: float = 0.8) -> Quaternion:
    axis = rng.normal(size=3)
    return Quaternion(axis / np.linalg.norm(axis), float(rng.uniform(-spread, spread)))


def random_point(rng, copy: dict, ob) -> tuple:
    """Near the rig, far, beyond reach or behind its root."""
    origin = np.array(ob.location)
    where = rng.random()
    if where < 0.5:
        offset = rng.normal(0.0, 0.8, 3) + (0.0, 0.0, 1.0)
    elif where < 0.7:
        offset = rng.normal(0.0, 6.0, 3)
    elif where < 0.85:
        offset = (0.0, 0.0, -rng.uniform(0.1, 2.0))  # behind (below) the root
    else:
        offset = rng.normal(0.0, 0.05, 3)  # on the root
    return tuple(float(v) for v in origin + offset)


def limit_values(rng, mode: str) -> dict:
    if mode == 'CONE':
        return {key: float(rng.uniform(0.05, 1.5)) for key in ("cone_left", "cone_right", "cone_up", "cone_down")}
    if mode == 'HINGE':
        low = float(rng.uniform(-1.5, 0.5))
        return {"hinge_min": low, "hinge_max": low + float(rng.uniform(0.1, 2.0))}
    return {}


def draw(rng, copy: dict) -> tuple:
    """One random edit of ``copy`` and then an update or a frame change, as data: ``(rig kind, what, arguments,
    sync)`` with ``sync`` None for an update, else the frame to set."""
    ob = copy["rigs"][int(rng.integers(3))]
    chains = ob.fabrik.chains
    chain = chains[int(rng.integers(len(chains)))].name
    bone = ob.pose.bones[int(rng.integers(len(ob.pose.bones)))].name
    what = rng.random()
    if what < 0.2:
        edit = ("target", list(copy["targets"])[int(rng.integers(len(copy["targets"])))],
                tuple(np.array(random_point(rng, copy, ob)) - (copy["x"], 0.0, 0.0)))
    elif what < 0.4:
        edit = ("rotation", bone, tuple(random_rotation(rng)))
    elif what < 0.47:
        edit = ("mode", bone, MODES[int(rng.integers(len(MODES)))])
    elif what < 0.55:
        edit = ("chain", chain, "enabled", None)  # toggled
    elif what < 0.58:
        edit = ("rig",)  # toggled
    elif what < 0.66:
        edit = ("chain", chain, "chain_length", int(rng.integers(1, 6)))
    elif what < 0.7:
        edit = ("chain", chain, "iterations", int(rng.integers(1, 60)))
    elif what < 0.74:
        edit = ("chain", chain, "tolerance", float(10.0 ** rng.uniform(-6, -1)))
    elif what < 0.78:
        edit = ("chain", chain, "influence", float(rng.choice([0.0, 0.3, 1.0])))
    elif what < 0.84:
        edit = ("pole", chain)  # toggled
    elif what < 0.94:
        bones = LIMIT_BONES[kind(ob)]
        mode = ['NONE', 'CONE', 'HINGE'][int(rng.integers(3))]
        edit = ("limit", bones[int(rng.integers(len(bones)))], mode, limit_values(rng, mode))
    else:
        edit = ("chain", chain, "solver", None)  # toggled
    sync = None if rng.random() < 0.6 else int(rng.integers(-2, FRAMES + 4))
    return (kind(ob), edit, sync)


def apply(copy: dict, record: tuple) -> None:
    """Make the edit of a :func:`draw` record on ``copy``, then update or change the frame."""
    owner, edit, sync = record
    ob = next(ob for ob in copy["rigs"] if kind(ob) == owner)
    what = edit[0]
    if what == "target":
        copy["targets"][edit[1]].location = tuple(np.array(edit[2]) + (copy["x"], 0.0, 0.0))
    elif what == "rotation":
        set_rotation(ob.pose.bones[edit[1]], Quaternion(edit[2]))
    elif what == "mode":
        ob.pose.bones[edit[1]].rotation_mode = edit[2]
    elif what == "rig":
        ob.fabrik.enabled = not ob.fabrik.enabled
    elif what == "chain":
        chain = ob.fabrik.chains[edit[1]]
        _, _, name, value = edit
        if name == "enabled":
            value = not chain.enabled
        elif name == "solver":
            value = 'FABRIK' if chain.solver == 'TWO_BONE' else 'TWO_BONE'
        setattr(chain, name, value)
    elif what == "pole":
        chain = ob.fabrik.chains[edit[1]]
        pole = POLES.get((owner, edit[1]))
        if pole is not None:
            chain.pole = None if chain.pole is not None else copy["targets"][pole]
    elif what == "limit":
        limit = ob.pose.bones[edit[1]].fabrik_limit
        limit.mode = edit[2]
        for key, value in edit[3].items():
            setattr(limit, key, value)
    if sync is None:
        bpy.context.view_layer.update()
    else:
        bpy.context.scene.frame_set(sync)


def final_inputs(rng) -> dict:
    """The inputs every copy ends with, drawn once."""
    inputs: dict = {"frame": int(rng.integers(1, FRAMES + 1)), "bones": {}, "chains": {}, "limits": {},
                    "targets": {}}
    probe = build(99)
    try:
        for ob in probe["rigs"]:
            for pb in ob.pose.bones:
                mode = MODES[int(rng.integers(len(MODES)))] if rng.random() < 0.4 else 'QUATERNION'
                inputs["bones"][(kind(ob), pb.name)] = (mode, random_rotation(rng, 0.5))
            for chain in ob.fabrik.chains:
                pole = POLES.get((kind(ob), chain.name))
                inputs["chains"][(kind(ob), chain.name)] = {
                    "chain_length": int(rng.integers(1, 6)) if kind(ob) == "Leg" else chain.chain_length,
                    "enabled": bool(rng.random() < 0.9), "influence": float(rng.choice([1.0, 1.0, 0.6])),
                    "iterations": int(rng.choice([100, 20])), "tolerance": float(rng.choice([1e-5, 1e-3])),
                    "pole": pole if pole is not None and rng.random() < 0.5 else None}
            for bone in LIMIT_BONES[kind(ob)]:
                mode = ['NONE', 'NONE', 'CONE', 'HINGE'][int(rng.integers(4))]
                inputs["limits"][(kind(ob), bone)] = (mode, limit_values(rng, mode))
            for name in probe["targets"]:
                if name != "arm_t":  # keyed
                    owner = {"leg": 0, "arm": 1}.get(name.split("_")[0], 2)
                    point = np.array(random_point(rng, probe, probe["rigs"][owner])) - (probe["x"], 0.0, 0.0)
                    inputs["targets"][name] = tuple(point)
    finally:
        for ob in [*probe["rigs"], *probe["targets"].values()]:
            data = ob.data
            bpy.data.objects.remove(ob)
            if data is not None:
                bpy.data.armatures.remove(data)
    bpy.context.view_layer.update()
    return inputs


def finish(copy: dict, inputs: dict) -> None:
    """Bring ``copy`` to ``inputs`` as a user would: chains off, bones posed, settings set, chains on."""
    for ob in copy["rigs"]:
        ob.fabrik.enabled = True
        for chain in ob.fabrik.chains:
            chain.enabled = False
    bpy.context.view_layer.update()
    for ob in copy["rigs"]:
        for pb in ob.pose.bones:
            mode, q = inputs["bones"][(kind(ob), pb.name)]
            pb.rotation_mode = mode
            set_rotation(pb, q)
        for (owner, bone), (mode, values) in inputs["limits"].items():
            if owner == kind(ob):
                limit = ob.pose.bones[bone].fabrik_limit
                limit.mode = mode
                for key, value in values.items():
                    setattr(limit, key, value)
        for chain in ob.fabrik.chains:
            settings = inputs["chains"][(kind(ob), chain.name)]
            chain.chain_length = settings["chain_length"]
            chain.iterations = settings["iterations"]
            chain.tolerance = settings["tolerance"]
            chain.influence = settings["influence"]
            chain.pole = None if settings["pole"] is None else copy["targets"][settings["pole"]]
            chain.solver = 'TWO_BONE' if kind(ob) == "Arm" else 'FABRIK'
    for name, point in inputs["targets"].items():
        copy["targets"][name].location = tuple(np.array(point) + (copy["x"], 0.0, 0.0))
    bpy.context.view_layer.update()
    for ob in copy["rigs"]:
        for chain in ob.fabrik.chains:
            chain.enabled = inputs["chains"][(kind(ob), chain.name)]["enabled"]
    bpy.context.view_layer.update()


def pose_of(copy: dict) -> dict:
    """Every bone's evaluated matrix in its armature's space."""
    return {(kind(ob), pb.name): np.array(pb.matrix) for ob in copy["rigs"] for pb in ob.pose.bones}


def difference(a: dict, b: dict) -> tuple[float, float, tuple]:
    """Largest distance (units) and angle (degrees) between the bones of two poses, and the bone of the largest."""
    worst, angle, where = 0.0, 0.0, ()
    for key, m in a.items():
        n = b[key]
        d = float(np.abs(m[:3, 3] - n[:3, 3]).max())
        # and the angle between their orientations (a bone turned about its head keeps its head)
        ra, rb = m[:3, :3] / np.linalg.norm(m[:3, :3], axis=0), n[:3, :3] / np.linalg.norm(n[:3, :3], axis=0)
        t = math.degrees(2.0 * math.asin(min(1.0, float(np.linalg.norm(ra - rb)) / math.sqrt(8.0))))
        if d > worst or (d == worst and t > angle):
            where = key
        worst, angle = max(worst, d), max(angle, t)
    return worst, angle, where


def run(seed: int, copies: int = 3, steps: int = 40, histories: list | None = None) -> list[tuple]:
    """Build ``copies - 1`` copies and give each ``steps`` random steps (or the records of ``histories``, one
    list per copy), then build copy 0, which has no history; bring all to one final input set. Returns for
    each copy with a history (its largest distance, angle, bone, its history) against copy 0."""
    rng = np.random.default_rng(seed)
    built = [None] + [build(k) for k in range(1, copies)]
    bpy.context.scene.frame_set(1)
    if histories is None:
        histories = [[] for _ in built[1:]]
        for _ in range(steps):
            for k in range(1, copies):
                record = draw(rng, built[k])
                histories[k - 1].append(record)
                apply(built[k], record)
    else:
        for k, history in enumerate(histories, start=1):
            for record in history:
                apply(built[k], record)
    inputs = final_inputs(np.random.default_rng(seed + 10_000))
    built[0] = build(0)
    for copy in built:
        finish(copy, inputs)
    bpy.context.scene.frame_set(inputs["frame"])
    poses = [pose_of(copy) for copy in built]
    return [(*difference(poses[0], poses[k]), histories[k - 1]) for k in range(1, copies)]


def shrink(seed: int, history: list, bad: float = 1e-3) -> list:
    """The shortest sublist of ``history`` found (chunks dropped while the difference stays above ``bad``)."""
    def fails(h):
        bpy.ops.wm.read_factory_settings(use_empty=True)
        return run(seed, copies=2, histories=[h])[0][0] > bad
    chunk = len(history) // 2
    while chunk >= 1:
        k = 0
        while k < len(history):
            trial = history[:k] + history[k + chunk:]
            if fails(trial):
                history = trial
            else:
                k += chunk
        chunk //= 2
    return history


if __name__ == "__main__":  # exploration: python tests/blender/history_fuzz.py FIRST_SEED COUNT [shrink]
    import os
    import sys

    import fabrik_addon
    from fabrik_addon.rig import solve

    fabrik_addon.register()
    if os.environ.get("SMALL_BONES"):  # 0: the batched path, 10000: the few-chain path
        solve.SMALL_BONES = int(os.environ["SMALL_BONES"])
    first, count = int(sys.argv[1]), int(sys.argv[2])
    for seed in range(first, first + count):
        bpy.ops.wm.read_factory_settings(use_empty=True)
        for k, (d, a, where, log) in enumerate(run(seed), start=1):
            print(f"seed {seed} copy {k}: {d:.3g} units {a:.3g} deg at {where}", flush=True)
            if d > 1e-4 and len(sys.argv) > 3:
                small = shrink(seed, log)
                print("shrunk:", *small, sep="\n  ", flush=True)
