"""The README's script example runs as written and does what it says."""

import re

import bpy
from rigs import ROOT


def example() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## From scripts"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_from_scripts_example_builds_solves_and_bakes(capsys):
    namespace: dict = {}
    exec(compile(example(), "README.md", "exec"), namespace)
    status, error, _iterations = capsys.readouterr().out.split()[:3]  # printed before the bake
    chain = namespace["chain"]
    assert status == 'REACHED' and float(error) < chain.tolerance
    assert not chain.enabled  # the bake switched it off
    arm = bpy.data.objects["Arm"]
    assert arm.animation_data is not None and arm.animation_data.action is not None
