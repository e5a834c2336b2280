"""The ``fabrik_bake`` command-line command: arguments, refusals and a bake through the built extension.

The end-to-end cases install the built zip into a throw-away user directory in a fresh process and call
the callback the extension registered with ``bpy.utils.register_cli_command``: what
``blender --command fabrik_bake ...`` calls.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import bpy
import pytest
from rigs import ROOT, add_chain, empty, key_path, straightish_chain

from fabrik_addon import cli, compat

sys.path.insert(0, str(ROOT / "scripts"))
import build_extension  # noqa: E402

PATH = [(1.0, 0.5, 2.5), (0.5, -1.0, 2.0), (-1.0, 1.0, 3.0)]


@pytest.mark.parametrize(("frames", "expected"), [
    ("1-250", (1, 250)), ("-10-20", (-10, 20)), ("-10--5", (-10, -5)), ("7", (7, 7)), ("0-0", (0, 0)),
])
def test_frame_ranges_include_negative_frames(frames, expected):
    for argv in (["s.blend", "--frames", frames, "--output", "o.blend"],
                 ["s.blend", "--frames=" + frames, "--output", "o.blend"]):
        options = cli.parse(argv)
        assert (options.start, options.end) == expected


@pytest.mark.parametrize(("argv", "message"), [
    (["s.blend", "--frames", "9-2", "--output", "o.blend"], "START must not be after END"),
    (["s.blend", "--frames", "1-2-3", "--output", "o.blend"], "bad frame range"),
    (["s.blend", "--frames", "a-b", "--output", "o.blend"], "bad frame range"),
    (["s.blend", "--frames", "1-5"], "--output"),
    (["s.blend", "--frames", "1-5", "--output", "s.blend"], "--in-place"),
    (["s.blend", "--frames", "1-5", "--output", "o.blend", "--in-place"], "not allowed with"),
    (["s.blend", "--frames", "1-5", "--output", "o.txt"], "must end in .blend"),
    (["s.blend", "--frames", "1-5", "--output", "missing_dir/o.blend"], "does not exist"),
    (["s.blend", "--frames", "1-5", "--output", "o.blend", "--step", "0"], "--step"),
    (["s.blend", "--frames", "1-99999999999", "--output", "o.blend"], "beyond Blender's frames"),
    (["s.blend", "--frames", "-1048575-0", "--output", "o.blend"], "beyond Blender's frames"),
    (["s.blend", "--frames", "1-5", "--output", "o.blend", "--reduce", "nan"], "--reduce"),
    (["s.blend", "--frames", "1-5", "--output", "o.blend", "--reduce", "inf"], "--reduce"),
    (["s.blend", "--frames", "1-5", "--output", "o.blend", "--reduce", "-1"], "--reduce"),
])
def test_bad_arguments_are_refused_with_a_message(argv, message):
    with pytest.raises(cli.UsageError, match=message.replace("-", r"\-")):
        cli.parse(argv)


def test_blenders_own_frame_limits_are_a_range_the_command_takes():
    options = cli.parse(["s.blend", "--frames", "-1048574-1048574", "--output", "o.blend"])
    assert (options.start, options.end) == (-1048574, 1048574)


def _scene(path: Path, enabled: bool = True) -> Path:
    bpy.ops.wm.read_factory_settings(use_empty=True)
    ob = straightish_chain("Arm", 4)
    target = empty("Target", PATH[0])
    key_path(target, PATH, [1, 10, 20])
    chain = add_chain(ob, "b3", 3, target)
    chain.enabled = enabled
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


@pytest.fixture(scope="module")
def command_run(tmp_path_factory):
    """Every end-to-end case in one fresh process with only the built extension installed."""
    tmp = tmp_path_factory.mktemp("command")
    live = _scene(tmp / "live.blend")
    off = _scene(tmp / "off.blend", enabled=False)
    in_place = _scene(tmp / "in_place.blend")
    text = tmp / "notes.blend"
    text.write_text("not a blend file\n")
    cases = {
        "negative": [str(live), "--frames", "-10-5", "--output", str(tmp / "negative.blend")],
        "negative_equals": [str(live), "--frames=-10--5", "--output", str(tmp / "negative_equals.blend")],
        "same_path": [str(live), "--frames", "1-5", "--output", str(live)],
        "not_blend": [str(text), "--frames", "1-5", "--output", str(tmp / "x.blend")],
        "switched_off": [str(off), "--frames", "1-5", "--output", str(tmp / "off_out.blend")],
        "enable_chains": [str(off), "--frames", "1-5", "--output", str(tmp / "enabled.blend"), "--enable-chains"],
        "in_place": [str(in_place), "--frames", "2-4", "--in-place"],
    }
    before = {name: path.read_bytes() for name, path in (("live", live), ("off", off))}
    cases_path = tmp / "cases.json"
    cases_path.write_text(json.dumps(list(cases.values())))
    zip_path = build_extension.build(tmp / "dist", build_dir=tmp / "build")
    user = tmp / "user"
    env = dict(os.environ, HOME=str(user), BLENDER_USER_RESOURCES=str(user / "blender"))
    env.pop("PYTHONPATH", None)
    out = subprocess.run([sys.executable, str(Path(__file__).with_name("command_check.py")), "--", str(zip_path),
                          str(cases_path)], env=env, capture_output=True, text=True, timeout=300, cwd=tmp)
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(text for text in out.stdout.splitlines() if text.startswith("RESULT "))
    report = json.loads(line[len("RESULT "):])
    report["cases"] = dict(zip(cases, report.pop("results")))
    report["tmp"], report["before"], report["live"], report["off"] = tmp, before, live, off
    return report


def _keyed_frames(path: Path, bone: str = "b1") -> tuple[list[float], bool]:
    bpy.ops.wm.open_mainfile(filepath=str(path))
    ob = bpy.data.objects["Arm"]
    curves = {(fc.data_path, fc.array_index): fc for fc in compat.animated_fcurves(ob)}
    fcurve = curves[(f'pose.bones["{bone}"].rotation_quaternion', 0)]
    return [kp.co.x for kp in fcurve.keyframe_points], ob.fabrik.chains[0].enabled


def test_the_extension_registers_the_command_from_its_own_package(command_run):
    assert "fabrik_bake" in command_run["commands"]
    assert command_run["module"] == "bl_ext.user_default.fabrik_ik.cli"


@pytest.mark.parametrize(("case", "frames"), [("negative", range(-10, 6)), ("negative_equals", range(-10, -4))])
def test_command_bakes_negative_frame_ranges_into_a_new_file(command_run, case, frames):
    result = command_run["cases"][case]
    assert result["code"] == 0, result["stderr"]
    assert "live IK vs keys: max" in result["stdout"]
    keyed, enabled = _keyed_frames(command_run["tmp"] / f"{case}.blend")
    assert keyed == [float(f) for f in frames]
    assert not enabled  # baked chains are switched off so the keys play
    assert command_run["live"].read_bytes() == command_run["before"]["live"]


def test_command_refuses_to_overwrite_the_input_without_in_place(command_run):
    result = command_run["cases"]["same_path"]
    assert result["code"] != 0
    assert "--in-place" in result["stderr"]
    assert command_run["live"].read_bytes() == command_run["before"]["live"]


def test_command_names_a_file_that_is_not_a_blend_file_without_a_traceback(command_run):
    result = command_run["cases"]["not_blend"]
    assert result["code"] != 0
    assert "is not a .blend file" in result["stderr"]
    assert "Traceback" not in result["stderr"]


def test_command_says_when_the_chains_are_switched_off_and_can_switch_them_on(command_run):
    off = command_run["cases"]["switched_off"]
    assert off["code"] != 0
    assert "switched off" in off["stderr"] and "--enable-chains" in off["stderr"]
    assert not (command_run["tmp"] / "off_out.blend").exists()
    on = command_run["cases"]["enable_chains"]
    assert on["code"] == 0, on["stderr"]
    keyed, _ = _keyed_frames(command_run["tmp"] / "enabled.blend")
    assert keyed == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert command_run["off"].read_bytes() == command_run["before"]["off"]


def test_command_overwrites_the_input_only_with_in_place(command_run):
    result = command_run["cases"]["in_place"]
    assert result["code"] == 0, result["stderr"]
    keyed, enabled = _keyed_frames(command_run["tmp"] / "in_place.blend")
    assert keyed == [2.0, 3.0, 4.0] and not enabled
