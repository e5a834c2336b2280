# FABRIK IK: every job a user or CI runs. Each target creates the venv it needs on first use.
PYTHON ?= python3.11
VENV := .venv
VENV42 := .venv-42
PY := $(VENV)/bin/python
PY42 := $(VENV42)/bin/python
PYTEST_ARGS ?=

# Both pinned bpy wheels (Blender 4.2 and 5.0) are built for CPython 3.11 only.
define check_python
	@command -v $(PYTHON) >/dev/null 2>&1 || { \
	  echo "error: '$(PYTHON)' was not found. The bpy wheels need Python 3.11 with venv and pip:"; \
	  echo "  Debian/Ubuntu: sudo apt install python3.11 python3.11-venv   macOS: brew install python@3.11"; \
	  echo "  or any Python 3.11 (pyenv, python.org); then run make again, or point make at it:"; \
	  echo "  make PYTHON=/path/to/python3.11 $(MAKECMDGOALS)"; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || { \
	  echo "error: '$(PYTHON)' is Python $$($(PYTHON) -c 'import platform; print(platform.python_version())'),"; \
	  echo "  but the bpy wheels need Python 3.11: make PYTHON=/path/to/python3.11 $(MAKECMDGOALS)"; exit 1; }
endef

.PHONY: demo test test-fast test-42 lint typecheck build bench bake clean

$(VENV)/.stamp: requirements/blender-5.0.txt requirements/dev.txt
	$(check_python)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r requirements/blender-5.0.txt -r requirements/dev.txt
	touch $@

$(VENV42)/.stamp: requirements/blender-4.2.txt requirements/dev.txt
	$(check_python)
	$(PYTHON) -m venv $(VENV42)
	$(VENV42)/bin/pip install -q --disable-pip-version-check -r requirements/blender-4.2.txt -r requirements/dev.txt
	touch $@

## demo: build four rigs, solve live, render out/demo.png, save out/demo.blend (live) and out/demo_baked.blend, out/demo_report.json
demo: $(VENV)/.stamp
	$(PY) scripts/demo.py

## test: lint, type-check, then the whole suite on Blender 5.0 and on Blender 4.2 side by side: each half keeps
## one core busy, so on two cores both take about the time of one. The 4.2 half's output goes to out/test-42.log
## and is printed after the 5.0 half's; both must pass. Each half ends with its 15 slowest tests. Ctrl-C stops both
## (a background job of a non-interactive shell ignores it). The solver's own tests (no Blender) and the Blender
## tests marked solver_bound are shared between the halves, each run once, about half on each (tests/conftest.py).
test: lint typecheck $(VENV42)/.stamp
	@mkdir -p out
	@echo "Blender 4.2 half running beside the 5.0 half: out/test-42.log, printed below when both are done"
	@FABRIK_SOLVER_SHARD=1/2 $(PY42) -m pytest --durations=15 $(PYTEST_ARGS) > out/test-42.log 2>&1 & half42=$$!; \
	trap 'kill $$half42 2>/dev/null; exit 130' INT TERM; \
	FABRIK_SOLVER_SHARD=0/2 $(PY) -m pytest --durations=15 $(PYTEST_ARGS); status50=$$?; \
	wait $$half42; status42=$$?; \
	echo "==== Blender 4.2 half (out/test-42.log) ===="; cat out/test-42.log; \
	echo "Blender 5.0 half exit $$status50, Blender 4.2 half exit $$status42"; \
	[ $$status50 -eq 0 ] && [ $$status42 -eq 0 ]

## test-fast: the whole suite on Blender 5.0 only
test-fast: $(VENV)/.stamp
	$(PY) -m pytest $(PYTEST_ARGS)

test-42: $(VENV42)/.stamp
	$(PY42) -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.stamp
	$(VENV)/bin/ruff check fabrik_addon tests scripts rigkit

typecheck: $(VENV)/.stamp
	$(VENV)/bin/mypy

## build: the extension zip in dist/, built and validated by Blender's own tool
build: $(VENV)/.stamp
	$(PY) scripts/build_extension.py

bench: $(VENV)/.stamp
	$(PY) scripts/benchmark.py all

clean:
	rm -rf build dist out .pytest_cache .mypy_cache .ruff_cache
