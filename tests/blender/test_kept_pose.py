"""The few-chain path keeps each chain's pose without IK between frames and may write an armature's
rotations in one bulk call: neither may change what is solved or touch what it does not solve."""

import bpy
import numpy as np
import pytest
from mathutils import Quaternion
from rigs import add_chain, armature, empty, straightish_bones, world_tail


@pytest.fixture
def few_chain(monkeypatch):
    from fabrik_addon.rig import solve

    monkeypatch.setattr(solve, "SMALL_BONES", 10_000)


def rotations(ob) -> np.ndarray:
    return np.array([tuple(pb.rotation_quaternion) for pb in ob.pose.bones])


def solve_afresh() -> None:
    """Solve again with every cache dropped (no kept pose)."""
    from fabrik_addon import handlers

    handlers.request_solve()
    bpy.context.view_layer.update()


def hip_and_leg():
    """A hip bone, then an unconnected 3-bone leg below it; a target within reach."""
    bones = [("hip", (0.0, 0.0, -0.4), (0.0, 0.0, 0.0), None, False, 0.0)]
    for spec in straightish_bones(3, length=0.5, bend=0.05, prefix="leg"):
        name, head, tail, parent, connected, roll = spec
        bones.append((name, head, tail, parent or "hip", connected, roll))
    ob = armature("Rig", bones)
    target = empty("Target", (0.5, 0.3, 0.9))
    chain = add_chain(ob, "leg2", 3, target)
    bpy.context.view_layer.update()
    return ob, target, chain


EDITS = {
    "parent turned": lambda ob: setattr(ob.pose.bones["hip"], "rotation_quaternion",
                                        Quaternion((1.0, 0.0, 0.0), 0.3)),
    "root bone moved": lambda ob: setattr(ob.pose.bones["leg0"], "location", (0.05, -0.02, 0.01)),
    "chain bone scaled": lambda ob: setattr(ob.pose.bones["leg1"], "scale", (1.2, 1.2, 1.2)),
    "parent scaled": lambda ob: setattr(ob.pose.bones["hip"], "scale", (0.8, 0.8, 0.8)),
}


@pytest.mark.usefixtures("few_chain")
@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_kept_pose_without_ik_follows_each_change_of_its_inputs(edit):
    ob, target, chain = hip_and_leg()
    assert chain.status == 'REACHED'
    EDITS[edit](ob)
    bpy.context.view_layer.update()
    assert chain.status == 'REACHED', chain.message
    kept = rotations(ob)
    # The chain hangs where its parent now puts it, and reaches.
    np.testing.assert_allclose(world_tail(ob, "leg2"), np.array(target.location), atol=1e-4)
    solve_afresh()
    np.testing.assert_allclose(rotations(ob), kept, atol=1e-6)


@pytest.mark.usefixtures("few_chain")
def test_a_kept_pose_follows_keyed_inputs_over_frames():
    """Keys change the pose without IK with no settings update (nothing drops the caches): the kept
    pose must be made again whenever the parent's matrix, a base rotation, a location or a scale
    differs, and reused only where all repeat (held keys)."""
    ob, target, chain = hip_and_leg()
    hip, leg0, leg1 = (ob.pose.bones[name] for name in ("hip", "leg0", "leg1"))
    keys = [
        (hip, "rotation_quaternion", {1: Quaternion((0.0, 1.0, 0.0), 0.0), 4: Quaternion((0.0, 1.0, 0.0), 0.4)}),
        (hip, "scale", {6: (1.0, 1.0, 1.0), 8: (0.8, 0.8, 0.8)}),
        (leg0, "location", {8: (0.0, 0.0, 0.0), 10: (0.04, -0.03, 0.02)}),
        (leg1, "scale", {10: (1.0, 1.0, 1.0), 12: (1.15, 1.15, 1.15)}),
        (leg1, "rotation_quaternion", {12: Quaternion(), 14: Quaternion((1.0, 0.0, 0.0), 0.3)}),
    ]
    for bone, path, values in keys:
        for frame, value in values.items():
            setattr(bone, path, value)
            bone.keyframe_insert(path, frame=frame)
    frames = list(range(1, 17))
    played = {}
    for frame in frames:  # in order, caches kept: the kept pose is reused where inputs repeat
        bpy.context.scene.frame_set(frame)
        assert chain.status == 'REACHED', (frame, chain.message)
        np.testing.assert_allclose(world_tail(ob, "leg2"), np.array(target.location), atol=1e-4)
        played[frame] = rotations(ob)
    for frame in frames:  # each frame solved with every cache dropped
        bpy.context.scene.frame_set(frame)
        solve_afresh()
        np.testing.assert_allclose(rotations(ob), played[frame], atol=1e-6, err_msg=f"frame {frame}")


def spider():
    """Eight 3-bone legs and one bone no chain moves, turned by the user."""
    specs = [spec for c in range(8) for spec in straightish_bones(3, length=0.3, bend=0.02, prefix=f"c{c}b", x=0.1 * c)]
    specs.append(("tail", (0.0, -0.5, 0.0), (0.0, -1.0, 0.0), None, False, 0.0))
    ob = armature("Spider", specs)
    ob.pose.bones["tail"].rotation_quaternion = Quaternion((0.0, 0.0, 1.0), 0.7)
    for c in range(8):
        target = empty(f"T{c}", (0.1 * c + 0.3, 0.2, 0.6))
        add_chain(ob, f"c{c}b2", 3, target)
    return ob


@pytest.mark.usefixtures("few_chain")
def test_writing_an_armature_at_once_gives_the_bone_by_bone_pose_and_leaves_other_bones(monkeypatch):
    from fabrik_addon.rig import small

    bulk_writes = []
    write_all = small._write_all
    monkeypatch.setattr(small, "_write_all", lambda arm, pending: bulk_writes.append(len(pending))
                        or write_all(arm, pending))
    ob = spider()
    tail = tuple(ob.pose.bones["tail"].rotation_quaternion)
    bpy.context.view_layer.update()
    assert all(chain.status == 'REACHED' for chain in ob.fabrik.chains)
    assert bulk_writes and bulk_writes[-1] == 24  # the eight legs' bones, in one write
    at_once = rotations(ob)
    np.testing.assert_array_equal(tuple(ob.pose.bones["tail"].rotation_quaternion), tail)
    monkeypatch.setattr(small, "BULK_BONES_PER_WRITE", 0)  # never at once: bone by bone
    bulk_writes.clear()
    solve_afresh()
    assert not bulk_writes
    np.testing.assert_array_equal(rotations(ob), at_once)
    # And the evaluated pose shows what was written (the bulk write tags the armature).
    for chain in ob.fabrik.chains:
        np.testing.assert_allclose(world_tail(ob, chain.tip_bone), np.array(chain.target.location), atol=1e-4)
