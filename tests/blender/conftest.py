"""Real Blender (the bpy wheel) for every test here: factory settings before each, rigs built via bpy.data."""

from __future__ import annotations

import sys
from pathlib import Path

import bpy
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).parent))

import fabrik_addon  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def addon():
    fabrik_addon.register()
    yield
    fabrik_addon.unregister()


@pytest.fixture(autouse=True)
def factory_settings():
    bpy.ops.wm.read_factory_settings(use_empty=True)
    yield


@pytest.fixture(params=["few-chain path", "batched path"])
def solve_path(request, monkeypatch):
    """Run a test through both ways of solving standalone chains: mathutils and plain floats chain by
    chain (rigs with few bones), and numpy across all armatures (the rest)."""
    from fabrik_addon.rig import solve

    monkeypatch.setattr(solve, "SMALL_BONES", 10_000 if request.param == "few-chain path" else 0)
    return request.param
