"""Chain settings the solve reads are kept between frames where no key or driver animates one
(``rig.plan.settings_of``: every other change of a setting calls its update). These check that every way
of changing them is still followed at the next frame: a script's write, a driver or an action added or
assigned after the chain solved, and chains reordered or removed by a script (which call no update)."""

import bpy
import numpy as np
import pytest
from rigs import add_chain, empty, straightish_chain, world_tail

TARGET = (0.6, -0.4, 2.0)


def _rig():
    ob = straightish_chain("Arm", 3)
    target = empty("Target", TARGET)
    chain = add_chain(ob, "b2", 3, target)
    bpy.context.scene.frame_set(1)
    assert chain.status == 'REACHED', chain.message
    return ob, chain, target


def _gap(ob, target) -> float:
    return float(np.linalg.norm(world_tail(ob, "b2") - np.array(target.matrix_world.translation)))


def _fk_tip(ob) -> np.ndarray:
    """The tip of the pose without IK: the chain switched off for one evaluation (its update releases it)."""
    chain = ob.fabrik.chains[0]
    chain.enabled = False
    bpy.context.view_layer.update()
    tip = world_tail(ob, "b2")
    chain.enabled = True
    bpy.context.view_layer.update()
    return tip


@pytest.mark.usefixtures("solve_path")
def test_settings_written_by_a_script_between_frames_are_followed():
    ob, chain, target = _rig()
    fk = _fk_tip(ob)
    chain.influence = 0.0  # exactly the pose without IK
    bpy.context.scene.frame_set(2)
    np.testing.assert_allclose(world_tail(ob, "b2"), fk, atol=1e-6)
    chain.influence = 1.0
    chain.iterations, chain.tolerance = 1, 0.0  # one pass from the curled start can no longer settle to 0
    target.location = (0.3, 0.5, 2.4)
    bpy.context.scene.frame_set(3)
    assert chain.last_iterations <= 1
    chain.iterations, chain.tolerance = 100, 1e-4
    bpy.context.scene.frame_set(4)
    assert chain.status == 'REACHED' and _gap(ob, target) < 1e-3


@pytest.mark.usefixtures("solve_path")
def test_a_driver_added_to_a_setting_after_the_chain_solved_is_followed_every_frame():
    ob, chain, target = _rig()
    fk = _fk_tip(ob)
    fcurve = chain.driver_add("influence")
    fcurve.driver.expression = "0.0 if frame < 5 else 1.0"
    for frame, on in ((2, False), (5, True), (3, False), (6, True)):
        bpy.context.scene.frame_set(frame)
        if on:
            assert _gap(ob, target) < 1e-3, frame
        else:
            np.testing.assert_allclose(world_tail(ob, "b2"), fk, atol=1e-6, err_msg=str(frame))
    ob.animation_data.drivers.remove(fcurve)
    chain.influence = 1.0
    bpy.context.scene.frame_set(2)
    assert _gap(ob, target) < 1e-3


@pytest.mark.usefixtures("solve_path")
def test_keys_on_a_setting_follow_when_their_action_is_unassigned_and_assigned_again():
    ob, chain, target = _rig()
    fk = _fk_tip(ob)
    chain.influence = 0.0
    chain.keyframe_insert("influence", frame=1)
    chain.influence = 1.0
    chain.keyframe_insert("influence", frame=10)
    action = ob.animation_data.action
    bpy.context.scene.frame_set(1)
    np.testing.assert_allclose(world_tail(ob, "b2"), fk, atol=1e-6)
    ob.animation_data.action = None  # no keys now: the setting's own value (1.0 from the last key) holds
    chain.influence = 1.0
    bpy.context.scene.frame_set(2)
    assert _gap(ob, target) < 1e-3
    ob.animation_data.action = action  # keyed again: influence 0 at frame 1, whatever the setting says
    bpy.context.scene.frame_set(1)
    np.testing.assert_allclose(world_tail(ob, "b2"), fk, atol=1e-6)
    bpy.context.scene.frame_set(10)
    assert _gap(ob, target) < 1e-3


@pytest.mark.usefixtures("solve_path")
def test_chains_on_the_same_tip_swapped_by_a_script_solve_with_their_own_settings():
    """Two chains with their own targets on one tip; a move (no update) swaps their positions: the chain
    switched on reaches its own target, with its own settings, not those of the position it took."""
    ob = straightish_chain("Arm", 3)
    near, far = empty("Near", TARGET), empty("Far", (-0.6, 0.4, 2.0))
    first = add_chain(ob, "b2", 3, near, influence=1.0)
    first.name = "first"
    second = add_chain(ob, "b2", 3, far, influence=0.0)
    second.name, second.enabled = "second", False
    bpy.context.scene.frame_set(1)
    fk = _fk_tip(ob)
    assert _gap(ob, near) < 1e-3
    ob.fabrik.chains.move(1, 0)
    first, second = ob.fabrik.chains["first"], ob.fabrik.chains["second"]
    bpy.context.scene.frame_set(2)
    assert first.status == 'REACHED' and _gap(ob, near) < 1e-3
    assert second.status == 'NONE'
    first.enabled, second.enabled = False, True  # the one switched on now holds influence 0
    bpy.context.scene.frame_set(3)
    np.testing.assert_allclose(world_tail(ob, "b2"), fk, atol=1e-6)
    ob.fabrik.chains.remove(1)  # "first" (switched off) removed by a script
    second = ob.fabrik.chains["second"]
    second.influence = 1.0
    bpy.context.scene.frame_set(4)
    assert second.status == 'REACHED' and _gap(ob, far) < 1e-3
