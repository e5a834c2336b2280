"""Why doesn't it reach? Each reason set up on a real rig: ``limited_by``, ``limited_bone``, the gap in the
message (within 1% of the gap the viewport shows), the reason gone once its cause is removed, and the
overlay's geometry for each reason."""

from __future__ import annotations

import math
import re

import bpy
import numpy as np
import pytest
from rigs import add_chain, armature, empty, straightish_chain, world_head, world_tail

from fabrik_addon import overlay

DISTANCE = re.compile(r"(\d+(?:\.\d+)?) (m|cm|mm)\b")
UNITS = {"m": 1.0, "cm": 0.01, "mm": 0.001}


def message_gap(message: str) -> float:
    """The first distance in a message, in metres."""
    found = DISTANCE.search(message)
    assert found, message
    return float(found.group(1)) * UNITS[found.group(2)]


def true_gap(ob, chain) -> float:
    return float(np.linalg.norm(world_tail(ob, chain.tip_bone) - np.array(chain.target.matrix_world.translation)))


def assert_says_gap(ob, chain) -> None:
    gap = true_gap(ob, chain)
    assert gap > chain.tolerance
    assert abs(message_gap(chain.message) - gap) <= 0.01 * gap, (chain.message, gap)


def limited(ob, bone: str, mode: str, *angles_deg: float) -> None:
    limit = ob.pose.bones[bone].fabrik_limit
    limit.mode = mode
    if mode == 'CONE':
        limit.cone_left = limit.cone_right = limit.cone_up = limit.cone_down = math.radians(angles_deg[0])
    elif mode == 'HINGE':
        limit.hinge_min, limit.hinge_max = (math.radians(a) for a in angles_deg)


def update() -> None:
    bpy.context.view_layer.update()


def assert_reached(chain) -> None:
    assert chain.status == 'REACHED', chain.message
    assert chain.limited_by == 'NONE' and chain.limited_bone == "" and chain.message == ""


def distance_to_polyline(point: np.ndarray, segments) -> float:
    best = math.inf
    for a, b in segments:
        ab = b - a
        t = 0.0 if not ab @ ab else min(1.0, max(0.0, float((point - a) @ ab / (ab @ ab))))
        best = min(best, float(np.linalg.norm(a + t * ab - point)))
    return best


def assert_gap_line(ob, chain, lines) -> None:
    tip, target = world_tail(ob, chain.tip_bone), np.array(chain.target.matrix_world.translation)
    assert any(np.allclose(a, tip, atol=1e-4) and np.allclose(b, target, atol=1e-6) for a, b in lines["gap"])


def assert_limit_outline(ob, bone: str, lines) -> None:
    """The outline lies at the bone's length around its head, and the bone's tail (on its limit) on it."""
    head, tail = world_head(ob, bone), world_tail(ob, bone)
    length = float(np.linalg.norm(tail - head))
    points = [p for pair in lines["limit"] for p in pair]
    assert points
    radii = [np.linalg.norm(p - head) for p in points if np.linalg.norm(p - head) > 1e-3 * length]
    assert np.allclose(radii, length, rtol=1e-5)  # Blender's positions are float32
    rim = [pair for pair in lines["limit"] if np.linalg.norm(pair[0] - head) > 1e-3 * length]  # no spokes
    assert distance_to_polyline(tail, rim) <= 0.01 * length


# --- LENGTH -----------------------------------------------------------------------------------------


@pytest.mark.usefixtures("solve_path")
def test_a_target_beyond_reach_says_how_far_and_the_chains_length():
    ob = straightish_chain("Arm", 3)
    target = empty("Target", (0.0, 1.0, 4.0))
    chain = add_chain(ob, "b2", 3, target)
    update()
    assert chain.status == 'UNREACHABLE'
    assert chain.limited_by == 'LENGTH' and chain.limited_bone == ""
    assert_says_gap(ob, chain)
    assert "beyond reach (chain 3 m)" in chain.message
    lines = overlay.chain_geometry(ob)
    assert_gap_line(ob, chain, lines)
    assert lines["limit"] == [] and lines["pole"] == []
    target.location = (0.0, 1.0, 2.5)  # within reach: nothing holds it
    update()
    assert_reached(chain)
    assert overlay.chain_geometry(ob) == {"gap": [], "limit": [], "pole": []}


def test_a_target_beyond_the_stretch_cap_names_the_cap_and_reaches_with_a_higher_one():
    ob = straightish_chain("Arm", 3)
    target = empty("Target", (0.0, 1.0, 4.0))  # 4.12 from the root; 3 x 1.2 = 3.6
    chain = add_chain(ob, "b2", 3, target, use_stretch=True, max_stretch=1.2)
    update()
    assert chain.limited_by == 'LENGTH' and chain.limited_bone == ""
    assert_says_gap(ob, chain)
    beyond = math.sqrt(17.0) - 1.2 * sum(bone.length for bone in ob.data.bones)
    assert abs(message_gap(chain.message) - beyond) <= 0.01 * beyond
    assert "stretch capped at 1.2" in chain.message
    chain.max_stretch = 1.5
    update()
    assert_reached(chain)


def test_a_target_too_near_the_root_of_a_chain_that_cannot_fold_is_length():
    ob = armature("Arm", [("b0", (0, 0, 0), (0, 0, 2.0), None, False, 0.0),
                          ("b1", (0, 0, 2.0), (0, 0, 2.5), "b0", True, 0.0)])
    chain = add_chain(ob, "b1", 2, empty("Target", (0.0, 0.2, 0.5)))
    update()
    assert chain.limited_by == 'LENGTH'
    assert "too near the root" in chain.message
    assert_says_gap(ob, chain)


# --- LIMIT ------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("solve_path")
def test_a_cone_that_holds_a_reachable_target_short_is_named_and_removing_it_reaches():
    ob = straightish_chain("Tentacle", 3)
    limited(ob, "b1", 'CONE', 20.0)
    limited(ob, "b2", 'CONE', 20.0)
    target = empty("Target", (2.0, 0.0, 1.5))  # 2.5 from the root: within reach without limits
    chain = add_chain(ob, "b2", 3, target)
    update()
    assert chain.status == 'UNREACHABLE'
    assert chain.limited_by == 'LIMIT'
    bone = chain.limited_bone
    assert bone in {"b1", "b2"}
    assert_says_gap(ob, chain)
    assert re.search(rf"Cone limit of '{bone}' \((left|right|up|down) 20 degrees\) holds the tip ", chain.message)
    lines = overlay.chain_geometry(ob)
    assert_gap_line(ob, chain, lines)
    assert_limit_outline(ob, bone, lines)
    assert lines["pole"] == []
    ob.pose.bones[bone].fabrik_limit.mode = 'NONE'
    update()
    assert_reached(chain)


@pytest.mark.usefixtures("solve_path")
def test_a_hinge_that_holds_a_reachable_target_short_is_named_with_its_side():
    ob = straightish_chain("Leg", 2)
    limited(ob, "b1", 'HINGE', 0.0, 30.0)
    chain = add_chain(ob, "b1", 2, empty("Target", (0.0, 0.6, 0.8)))  # 1.0 from the root: a deep bend
    update()
    assert chain.limited_by == 'LIMIT' and chain.limited_bone == "b1"
    assert_says_gap(ob, chain)
    assert "Hinge limit of 'b1' (max 30 degrees) holds the tip " in chain.message
    lines = overlay.chain_geometry(ob)
    assert_limit_outline(ob, "b1", lines)
    ob.pose.bones["b1"].fabrik_limit.hinge_max = math.radians(150.0)
    update()
    assert_reached(chain)


# --- SOFTNESS ---------------------------------------------------------------------------------------


@pytest.mark.usefixtures("solve_path")
def test_softness_holds_the_tip_short_by_design_and_hard_ik_reaches():
    ob = straightish_chain("Arm", 3)
    chain = add_chain(ob, "b2", 3, empty("Target", (0.0, 0.5, 2.9)), softness=0.3)
    update()
    assert chain.limited_by == 'SOFTNESS' and chain.limited_bone == ""
    assert_says_gap(ob, chain)
    assert "Softness 0.30" in chain.message
    lines = overlay.chain_geometry(ob)
    assert_gap_line(ob, chain, lines)
    assert lines["limit"] == []
    chain.softness = 0.0
    update()
    assert_reached(chain)


# --- ITERATIONS -------------------------------------------------------------------------------------


def folded3():
    """Three bones out of any plane, the last folded back: the curl cannot fold them onto a target near
    the root, so FABRIK passes remain to be run (past the curl's peak the start straightens instead and
    reaches every target farther out)."""
    joints = [(0.0, 0.0, 0.0), (-0.01, 0.48, -0.66), (0.31, 0.29, -1.62), (0.1, -0.07, -1.48)]
    return armature("Folded", [(f"b{k}", joints[k], joints[k + 1], f"b{k - 1}" if k else None, k > 0, 0.0)
                               for k in range(3)])


@pytest.mark.usefixtures("solve_path")
def test_one_iteration_on_a_hard_target_says_iterations():
    ob = folded3()
    chain = add_chain(ob, "b2", 3, empty("Target", (-0.5, 0.04, -0.03)), iterations=1, tolerance=1e-4)
    update()
    assert chain.status == 'NOT_CONVERGED'
    assert chain.limited_by == 'ITERATIONS' and chain.limited_bone == ""
    assert_says_gap(ob, chain)
    assert chain.message.startswith("Did not converge in 1 iterations")
    assert overlay.chain_geometry(ob)["limit"] == []
    chain.iterations = 100
    update()
    assert_reached(chain)


def test_a_limited_chain_given_too_few_iterations_for_a_reachable_target_says_iterations():
    """Issue 23: a 5-bone leg (a coned hip, four hinged joints, a pole) whose target is its own pose's tip. Its
    fits settle whatever Iterations says; with 1 or 2, their limited FABRIK fallback ran out of passes 0.45 m
    short and the chain said "Cone limit of 'b0' (up 11 degrees) holds the tip 0.448 m short" (out of reach); with
    3 it reaches."""
    joints = [(0.0, 0.25 * math.sin(math.pi * k / 5), 2.0 * k / 5) for k in range(6)]
    ob = armature("Leg", [(f"b{k}", joints[k], joints[k + 1], f"b{k - 1}" if k else None, k > 0, 0.0)
                          for k in range(5)])
    limit = ob.pose.bones["b0"].fabrik_limit
    limit.mode = 'CONE'
    limit.cone_left, limit.cone_right, limit.cone_up, limit.cone_down = 0.3, 0.9, 0.2, 0.7
    for k in range(1, 5):
        limit = ob.pose.bones[f"b{k}"].fabrik_limit
        limit.mode, limit.hinge_min, limit.hinge_max = 'HINGE', 0.0, 2.4
    pose_without_ik = [(0.99958, -0.02121, 0.01817, 0.00829), (0.99690, -0.00577, -0.02373, -0.07481),
                       (0.99833, 0.02219, -0.02585, -0.04660), (0.98925, -0.00552, 0.13184, 0.06300),
                       (0.99609, -0.06752, -0.01336, -0.05543)]
    for k, rotation in enumerate(pose_without_ik):
        ob.pose.bones[f"b{k}"].rotation_quaternion = rotation
    chain = add_chain(ob, "b4", 5, empty("Target", (0.04323, -0.36186, 0.59954)),
                      pole=empty("Pole", (0.22894, -1.44616, -0.47882)), tolerance=1e-3, iterations=1)
    for iterations in (1, 2):
        chain.iterations = iterations
        update()
        assert chain.status == 'NOT_CONVERGED', chain.message
        assert chain.limited_by == 'ITERATIONS' and chain.limited_bone == ""
        assert chain.message.startswith(f"Did not converge in {iterations} iterations")
        assert_says_gap(ob, chain)
    chain.iterations = 30
    update()
    assert_reached(chain)


# --- POLE -------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("solve_path")
def test_a_hinge_and_a_pole_that_disagree_say_pole_and_without_the_pole_it_reaches(monkeypatch):
    """Eight hinged bones (3 units) on limited FABRIK, which stops 8.4 cm short; the fit in hinge coordinates,
    which takes chains of up to 10 bones with hinges, reaches this target with the pole (as in
    tests/solver/test_shortfall.py, the chain is sent to limited FABRIK to keep the POLE reason tested)."""
    from fabrik_addon.solver import fabrik

    ob = straightish_chain("Leg", 8, length=0.375)
    for k in range(8):
        limited(ob, f"b{k}", 'HINGE', 0.0, 150.0)
    pole = empty("Pole", (0.0, -3.0, 1.5))
    chain = add_chain(ob, "b7", 8, empty("Target", (0.0, -1.0, 2.0)), pole=pole)
    update()
    assert 8 <= fabrik.HINGE_FIT_MAX_BONES and chain.status == 'REACHED', chain.message
    monkeypatch.setattr(fabrik, "HINGE_FIT_MAX_BONES", 7)
    chain.target.location = (0.0, -1.0, 2.0 + 1e-6)  # a new solve (the same target is not solved again)
    update()
    assert chain.limited_by == 'POLE'
    assert chain.limited_bone == "b0"
    assert_says_gap(ob, chain)
    assert "The pole and the hinge of 'b0' disagree" in chain.message
    lines = overlay.chain_geometry(ob)
    assert_gap_line(ob, chain, lines)
    assert lines["pole"] and np.allclose(lines["pole"][0][1], pole.location, atol=1e-6)
    head = world_head(ob, "b0")
    assert np.allclose([np.linalg.norm(p - head) for pair in lines["limit"] for p in pair if
                        np.linalg.norm(p - head) > 1e-3], 0.375, rtol=1e-5)
    chain.pole = None
    update()
    assert_reached(chain)


# --- trees and the panel ----------------------------------------------------------------------------


def test_a_tree_branch_out_of_reach_is_named_in_its_message():
    from test_tree_rig import torso

    ob = torso()
    left = add_chain(ob, "fore.L", 4, empty("L", (3.5, 0.0, 1.0)))
    right = add_chain(ob, "fore.R", 4, empty("R", (-3.5, 0.0, 1.0)))
    update()
    assert left.group and right.group
    for chain, name in ((left, "fore.L"), (right, "fore.R")):
        assert chain.limited_by == 'LENGTH' and chain.limited_bone == ""
        assert chain.message.startswith(f"Branch '{name}': Target ")
        assert_says_gap(ob, chain)
    left.target.location = (0.9, 0.2, 1.0)
    right.target.location = (-0.9, 0.2, 1.0)
    update()
    assert_reached(left)
    assert_reached(right)


def test_the_panel_shows_the_reason_under_the_status_and_the_overlay_switch():
    from test_panels import draw_all

    ob = straightish_chain("Arm", 3)
    chain = add_chain(ob, "b2", 3, empty("Target", (0.0, 1.0, 4.0)))
    update()
    shown = draw_all(ob)
    status = next(k for k, text in enumerate(shown) if text.startswith("Unreachable"))
    assert shown[status + 1] == chain.message
    assert "show_reach_overlay" in shown
    assert ob.fabrik.show_reach_overlay is False


def test_no_draw_handler_without_a_gpu():
    assert bpy.app.background
    assert overlay._handles == []


def test_the_reasons_are_the_property_items_in_order():
    from fabrik_addon.solver.reach import REASONS

    ob = straightish_chain("Arm", 2)
    items = add_chain(ob, "b1", 2, None).bl_rna.properties["limited_by"].enum_items
    assert [item.identifier for item in items] == list(REASONS)


@pytest.mark.usefixtures("solve_path")
def test_the_reason_follows_the_frame_even_when_read_late():
    from rigs import key_path

    ob = straightish_chain("Arm", 3)
    target = empty("Target")
    key_path(target, [(0.0, 1.0, 4.0), (0.0, 0.5, 2.0), (0.0, 0.0, 5.0)], [1, 2, 3])
    chain = add_chain(ob, "b2", 3, target)
    scene = bpy.context.scene
    scene.frame_set(1)  # out of reach, never read
    scene.frame_set(2)
    assert_reached(chain)
    scene.frame_set(3)
    scene.frame_set(1)
    assert chain.limited_by == 'LENGTH'
    assert_says_gap(ob, chain)
    scene.frame_set(3)
    assert chain.limited_by == 'LENGTH'
    assert_says_gap(ob, chain)
