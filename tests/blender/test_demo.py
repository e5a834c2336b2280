"""``make demo``: the saved demo file is live (solves when opened), the baked copy plays its keys."""

import subprocess
import sys

import bpy
import numpy as np
import pytest
from rigs import ROOT, world_tail

from fabrik_addon import compat


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "demo.py"), "--frames", "12", "--no-render",
                          "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return out


def _rigs():
    return [ob for ob in bpy.data.objects if ob.type == 'ARMATURE']


def _rotation_curves(ob):
    return [fc for fc in compat.animated_fcurves(ob) if ".rotation_" in fc.data_path]


def test_demo_file_is_saved_live_and_solves_when_opened(demo_out):
    bpy.ops.wm.open_mainfile(filepath=str(demo_out / "demo.blend"))
    rigs = _rigs()
    assert sorted(ob.name for ob in rigs) == ["Arm", "Spider", "Tentacle", "Torso"]
    for frame in (1, 7):
        bpy.context.scene.frame_set(frame)
        for ob in rigs:
            assert ob.fabrik.enabled and not _rotation_curves(ob), ob.name
            for chain in ob.fabrik.chains:
                assert chain.enabled and chain.status == 'REACHED', (ob.name, chain.name, chain.message)
                goal = np.array(chain.target.matrix_world.translation)
                assert np.linalg.norm(world_tail(ob, chain.tip_bone) - goal) < 2e-3, (ob.name, chain.name)


def test_demo_baked_copy_has_keys_and_its_chains_switched_off(demo_out):
    bpy.ops.wm.open_mainfile(filepath=str(demo_out / "demo_baked.blend"))
    for ob in _rigs():
        assert _rotation_curves(ob), ob.name
        assert not any(chain.enabled for chain in ob.fabrik.chains), ob.name
