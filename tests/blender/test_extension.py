"""The extension zip: built and validated by Blender's tool, installed as a user would, cleanly removed."""

import json
import os
import subprocess
import sys
from pathlib import Path

from rigs import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import build_extension  # noqa: E402


def test_zip_installs_enables_and_disables_cleanly(tmp_path):
    zip_path = build_extension.build(tmp_path / "dist", build_dir=tmp_path / "build")
    user = tmp_path / "user"
    env = dict(os.environ, HOME=str(user), BLENDER_USER_RESOURCES=str(user / "blender"))
    out = subprocess.run([sys.executable, str(Path(__file__).with_name("install_check.py")), "--", str(zip_path)],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    line = next(text for text in out.stdout.splitlines() if text.startswith("RESULT "))
    steps = json.loads(line[len("RESULT "):])
    assert steps["install"] == ["FINISHED"]
    assert (user / "blender" / "extensions" / "user_default" / "fabrik_ik" / "__init__.py").exists()
    every_class = sorted(["POSE_OT_fabrik_chain_add", "POSE_OT_fabrik_chain_remove", "POSE_OT_fabrik_bake",
                          "FABRIK_UL_chains", "VIEW3D_PT_fabrik", "VIEW3D_PT_fabrik_chain",
                          "VIEW3D_PT_fabrik_ikfk", "VIEW3D_PT_fabrik_limit", "VIEW3D_PT_fabrik_bake", "FabrikChain",
                          "FabrikRigSettings", "FabrikJointLimit", "FabrikBasePose"])
    properties = ["Object.fabrik", "PoseBone.fabrik_base", "PoseBone.fabrik_limit"]
    for step in ("after_install", "after_reenable", "after_second_cycle"):
        assert steps[step]["enabled"], step
        assert steps[step]["classes"] == every_class, step
        assert steps[step]["properties"] == properties, step
        assert set(steps[step]["handlers"].values()) == {1}, (step, steps[step]["handlers"])
    off = steps["after_disable"]
    assert not off["enabled"] and off["classes"] == [] and off["properties"] == []
    assert set(off["handlers"].values()) == {0}
