"""A bake never damages data and never reports a fidelity it did not measure."""

import subprocess
import sys

import bpy
import numpy as np
import pytest
from rigs import ROOT, add_chain, armature, empty, key_path, straightish_chain, world_tail
from status_checks import no_traceback  # noqa: F401

from fabrik_addon import compat

pytestmark = pytest.mark.usefixtures("solve_path", "no_traceback")

PATH = [(1.0, 0.5, 2.5), (0.5, -1.0, 2.0), (-1.0, 1.0, 3.0), (0.2, 0.3, 1.0)]
FRAMES = [1, 6, 12, 20]


def rig(name="Arm", location=(0.0, 0.0, 0.0), prefix="b"):
    ob = straightish_chain(name, 4, location=location, prefix=prefix)
    target = empty(f"{name}Target", PATH[0])
    key_path(target, [tuple(np.add(p, location)) for p in PATH], FRAMES)
    chain = add_chain(ob, f"{prefix}3", 3, target)
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, 20
    bpy.context.view_layer.objects.active = ob
    return ob, target, chain


def keys(ob):
    """Every F-curve of ``ob``'s action (its slot), as {(path, index): [(frame, value), ...]}."""
    return {(fc.data_path, fc.array_index): [tuple(kp.co) for kp in fc.keyframe_points]
            for fc in compat.animated_fcurves(ob)}


def tails(ob, bone, frames):
    out = []
    for frame in frames:
        bpy.context.scene.frame_set(frame)
        out.append(world_tail(ob, bone))
    return np.array(out)


def test_bake_with_the_rig_switched_off_is_refused_and_changes_nothing():
    ob, target, chain = rig()
    ob.fabrik.enabled = False
    with pytest.raises(RuntimeError, match="switched off"):
        bpy.ops.pose.fabrik_bake(frame_start=1, frame_end=20)
    assert chain.enabled and not ob.fabrik.enabled
    assert not keys(ob)
    assert chain.bake_max_error == -1.0


@pytest.mark.parametrize(("start", "end"), [(-2 ** 31, 2 ** 31 - 1), (1, 1048575), (-1048575, 1)])
def test_a_range_beyond_blenders_frames_is_refused_and_changes_nothing(start, end):
    """Blender's frames run from -1048574 to 1048574 (frame_set clamps beyond): a range past them is refused with
    a message (the whole int range ran out of memory with a traceback, and switched the chain off)."""
    ob, target, chain = rig()
    with pytest.raises(RuntimeError, match="beyond Blender's frames"):
        bpy.ops.pose.fabrik_bake(frame_start=start, frame_end=end)
    assert chain.enabled
    assert not keys(ob)
    assert chain.bake_max_error == -1.0


def test_a_bake_that_fails_while_sampling_leaves_its_chains_switched_on(monkeypatch):
    from fabrik_addon import bake

    ob, target, chain = rig()

    def fail(*_args, **_kwargs):
        raise ValueError("sampling failed")

    monkeypatch.setattr(bake, "sample", fail)
    with pytest.raises(RuntimeError, match="sampling failed"):
        bpy.ops.pose.fabrik_bake(frame_start=1, frame_end=20)
    assert chain.enabled
    assert not keys(ob)


def test_bake_in_edit_mode_is_refused_and_changes_nothing():
    ob, target, chain = rig()
    bpy.ops.object.mode_set(mode='EDIT')
    with pytest.raises(RuntimeError, match="Edit Mode"):
        bpy.ops.pose.fabrik_bake(frame_start=1, frame_end=20)
    bpy.ops.object.mode_set(mode='OBJECT')
    assert chain.enabled
    assert not keys(ob)
    assert chain.bake_max_error == -1.0


def test_bake_of_a_disabled_chain_alone_is_refused():
    ob, target, chain = rig()
    add_chain(ob, "b3", 2, target, enabled=False)
    ob.fabrik.active_chain_index = 1
    with pytest.raises(RuntimeError, match="disabled"):
        bpy.ops.pose.fabrik_bake(frame_start=1, frame_end=20, only_active_chain=True)
    assert not keys(ob)


def _share(a, b, same_slot: bool):
    """Give ``b`` the action of ``a`` (and on 4.4+ its slot, or a slot of its own)."""
    action = a.animation_data.action
    adt = b.animation_data or b.animation_data_create()
    adt.action = action
    if compat.SLOTTED_ACTIONS:
        if same_slot:
            adt.action_slot = a.animation_data.action_slot
        else:
            adt.action_slot = action.slots.new('OBJECT', b.name)


@pytest.mark.parametrize("same_slot", [True, False], ids=["same slot", "own slot"])
def test_an_action_shared_with_another_armature_is_never_rewritten_for_it(same_slot):
    if not same_slot and not compat.SLOTTED_ACTIONS:
        pytest.skip("slots exist from Blender 4.4")
    ob, target, chain = rig()
    twin = straightish_chain("Twin", 4, location=(3.0, 0.0, 0.0))
    for frame, angle in ((1, 0.2), (20, -0.4)):  # keys on a chain bone, in the action the twin will share
        for pb in (ob.pose.bones["b2"],):
            pb.rotation_quaternion = (np.cos(angle), np.sin(angle), 0.0, 0.0)
            pb.keyframe_insert("rotation_quaternion", frame=frame)
    _share(ob, twin, same_slot)
    twin_keys = keys(twin)
    twin_tails = tails(twin, "b3", range(1, 21))
    live = tails(ob, "b3", range(1, 21))
    bpy.context.view_layer.objects.active = ob
    try:
        result = bpy.ops.pose.fabrik_bake(frame_start=1, frame_end=20)
    except RuntimeError as error:
        assert "shared" in str(error)
        assert chain.enabled
    else:
        assert result == {'FINISHED'}
        if same_slot or not compat.SLOTTED_ACTIONS:
            assert ob.animation_data.action != twin.animation_data.action, "baked into the shared action"
        np.testing.assert_allclose(tails(ob, "b3", range(1, 21)), live, atol=1e-4)
    assert keys(twin) == twin_keys
    np.testing.assert_allclose(tails(twin, "b3", range(1, 21)), twin_tails, atol=1e-6)


NAMES = ['up"per', 'back\\slash', 'both\\"x', "plain"]


def quoted_rig():
    bones = []
    head = (0.0, 0.0, 0.0)
    for i, name in enumerate(NAMES):
        tail = (0.0, 0.1 if i == 1 else 0.0, head[2] + 1.0)
        bones.append((name, head, tail, NAMES[i - 1] if i else None, i > 0, 0.0))
        head = tail
    ob = armature("Quoted", bones)
    target = empty("QT", PATH[0])
    key_path(target, PATH, FRAMES)
    chain = add_chain(ob, "plain", 3, target)
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, 20
    return ob, target, chain


def test_keyed_start_pose_of_bones_with_quotes_and_backslashes():
    ob, target, chain = quoted_rig()
    pb = ob.pose.bones[NAMES[1]]
    for frame, angle in ((1, 0.1), (20, 0.9)):
        pb.rotation_quaternion = (np.cos(angle), 0.0, 0.0, np.sin(angle))
        pb.keyframe_insert("rotation_quaternion", frame=frame)
    chain.influence = 0.0
    fcurves = {fc.array_index: fc for fc in compat.animated_fcurves(ob)}
    for frame in (4, 11, 17):
        bpy.context.scene.frame_set(frame)
        keyed = np.array([fcurves[k].evaluate(frame) for k in range(4)])  # Blender normalizes when posing
        np.testing.assert_allclose(tuple(pb.rotation_quaternion), keyed / np.linalg.norm(keyed), atol=1e-5,
                                   err_msg=f"frame {frame}")


def test_bake_of_bones_with_quotes_and_backslashes_resolves_and_plays_back():
    ob, target, chain = quoted_rig()
    live = tails(ob, "plain", range(1, 21))
    assert bpy.ops.pose.fabrik_bake(frame_start=1, frame_end=20) == {'FINISHED'}
    baked = keys(ob)
    assert len(baked) == 3 * 4
    for path, _index in baked:
        ob.path_resolve(path)  # raises for an unresolvable path
    assert 0.0 <= chain.bake_max_error < 1e-4
    np.testing.assert_allclose(tails(ob, "plain", range(1, 21)), live, atol=1e-4)


UNREGISTER_SCRIPT = r"""
import sys
sys.path[:0] = [{root!r}, {tests!r}]
import bpy
import fabrik_addon
from fabrik_addon import bake, handlers
from rigs import add_chain, empty, key_path, straightish_chain

fabrik_addon.register()
bpy.ops.wm.read_factory_settings(use_empty=True)
ob = straightish_chain("Arm", 3)
target = empty("T", (0.5, 0.5, 2.0))
key_path(target, [(0.5, 0.5, 2.0), (-0.5, 0.3, 2.2)], [1, 30])
add_chain(ob, "b2", 3, target)
bpy.context.view_layer.objects.active = ob
calls = [0]

def pull_the_rug(*_args):
    calls[0] += 1
    if calls[0] == 5:
        fabrik_addon.unregister()

if {where!r} == "progress":
    progress = pull_the_rug
else:
    progress = None
    def frame_handler(*_args):
        pull_the_rug()
    bpy.app.handlers.frame_change_pre.append(frame_handler)
try:
    bake.bake_chains(bpy.context, ob, [0], bake.BakeOptions(1, 30), progress=progress)
    print("outcome: finished")
except Exception as error:  # the bake may refuse with a message
    print("outcome:", type(error).__name__, error)
if progress is None:  # the 4.2 wheel crashes at exit while a Python frame handler is installed, ours or not
    bpy.app.handlers.frame_change_pre.remove(frame_handler)
print("survived")
"""


@pytest.mark.parametrize("where", ["progress", "frame handler"])
def test_unregistering_during_a_bake_does_not_crash(tmp_path, where):
    script = tmp_path / "unregister.py"
    script.write_text(UNREGISTER_SCRIPT.format(root=str(ROOT), tests=str(ROOT / "tests" / "blender"), where=where))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
    assert "survived" in run.stdout
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    assert "outcome: ValueError" in run.stdout and "unregistered" in run.stdout, run.stdout
