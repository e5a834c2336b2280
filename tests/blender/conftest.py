"""Real Blender (the bpy wheel) for every test here: factory settings before each, rigs built via bpy.data."""

from __future__ import annotations

import sys
from pathlib import Path

import bpy
import numpy as np
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


def world_tail(ob, bone: str) -> np.ndarray:
    """Evaluated world-space tail of ``bone``: what the viewport and renders show now."""
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    return np.array(ev.matrix_world @ ev.pose.bones[bone].tail)


def world_head(ob, bone: str) -> np.ndarray:
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    return np.array(ev.matrix_world @ ev.pose.bones[bone].head)
