"""Shared checks for the bad-input tests: handlers print no traceback, REACHED is never a lie."""

from __future__ import annotations

import bpy
import numpy as np
import pytest
from rigs import add_chain, empty, straightish_chain, world_tail

# A chain that says REACHED must show its tip this close to the target in the evaluated scene.
HONEST = 1e-3


@pytest.fixture
def no_traceback(capfd):
    """Fail the test when anything (our handlers or Blender reporting a Python error) printed a traceback,
    or the solve reported an unexpected error (caught so that the other chains keep solving)."""
    yield
    out, err = capfd.readouterr()
    assert "Traceback" not in err + out, err + out
    assert "Could not solve" not in err + out, err + out


def target_point(target, bone: str = "") -> np.ndarray:
    """World position of a target (object origin, or a bone's head) as Blender evaluates it now."""
    ev = target.evaluated_get(bpy.context.evaluated_depsgraph_get())
    if bone:
        return np.array(ev.matrix_world @ ev.pose.bones[bone].head)
    return np.array(ev.matrix_world.translation)


def assert_honest(ob, chain, point=None, tolerance: float = HONEST) -> None:
    """REACHED means the rendered tip is on the target; INVALID carries a message; nothing is NaN."""
    for pb in ob.pose.bones:
        assert np.isfinite(tuple(pb.rotation_quaternion) + tuple(pb.rotation_euler)
                           + tuple(pb.rotation_axis_angle)).all(), pb.name
    if chain.status == 'INVALID':
        assert chain.message, "INVALID without a reason"
        return
    if chain.status == 'REACHED':
        if point is None:
            point = target_point(chain.target, chain.target_bone)
        tip = world_tail(ob, chain.tip_bone)
        off = float(np.linalg.norm(tip - point))
        assert off < tolerance, f"REACHED while the evaluated tip is {off:.4g} off the target ({chain.name})"


def neighbour(name: str = "Other", x: float = 4.0):
    """A second rig with a working chain, to show one failure does not stop the others."""
    ob = straightish_chain(name, 3, location=(x, 0.0, 0.0))
    target = empty(f"{name}Target", (x + 0.5, 0.5, 2.0))
    chain = add_chain(ob, "b2", 3, target)
    return ob, chain, target


def assert_neighbour_solves(ob, chain, target, where=(0.8, -0.4, 1.8)) -> None:
    """Move the neighbour's target: its chain follows and says REACHED."""
    x = ob.location.x
    target.location = (x + where[0], where[1], where[2])
    bpy.context.view_layer.update()
    assert chain.status == 'REACHED', (chain.status, chain.message)
    assert np.linalg.norm(world_tail(ob, chain.tip_bone) - np.array(target.location)) < HONEST
