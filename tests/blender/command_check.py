"""Run in a fresh Python with a throw-away user directory: install the built zip, then run the
``fabrik_bake`` command through the very callback the extension registered for ``blender --command``.

    python command_check.py -- ZIP CASES.json

CASES.json holds a list of argument lists. Prints one JSON line: the registered command ids, the
callback's module, and per case the exit code, stdout and stderr.
"""

import contextlib
import io
import json
import sys

import bpy  # isort: skip

registered = {}
_register = bpy.utils.register_cli_command


def spy(command_id, execute):
    registered[command_id] = execute
    return _register(command_id, execute)


def main():
    zip_path, cases_path = sys.argv[sys.argv.index("--") + 1:][:2]
    bpy.utils.register_cli_command = spy
    bpy.ops.extensions.package_install_files(filepath=zip_path, repo="user_default", enable_on_install=True)
    command = registered["fabrik_bake"]
    results = []
    for argv in json.loads(open(cases_path).read()):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = command(list(argv))
        results.append({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()})
    print("RESULT " + json.dumps({"commands": sorted(registered), "module": command.__module__,
                                  "results": results}))


main()
