"""The tests that need one Blender version, not both, shared between the two halves of ``make test``.

Those are the solver's tests (tests/solver, no Blender) and the Blender tests marked ``solver_bound``: tests of
what the solver makes of a rig (trees with joint limits), whose time goes to the solve, not to Blender, and whose
Blender side (reading the rig, writing the pose in every rotation mode) other tests check on both versions.
``FABRIK_SOLVER_SHARD="K/N"`` (K a comma-separated list) keeps those whose node id hashes (CRC-32) to one of the K
modulo N and deselects the others; every other Blender test runs in both halves. ``make test`` runs the Blender 5.0
half with ``0/2`` and the 4.2 half with ``1/2``, so each of them runs once, on one of the two Blender (and numpy)
versions; without the variable (``make test-fast``, a plain ``pytest``) every test runs.
"""

from __future__ import annotations

import os
import zlib

import pytest

SHARD = "FABRIK_SOLVER_SHARD"


def _shard(value: str) -> tuple[set[int], int]:
    try:
        kept, count = value.split("/")
        shares, n = {int(k) for k in kept.split(",")}, int(count)
    except ValueError:
        raise pytest.UsageError(
            f"{SHARD}={value!r}: expected K/N, K a comma-separated list, e.g. 0/3 or 1,2/3") from None
    if not shares <= set(range(n)):  # also refuses N < 1: K is never empty
        raise pytest.UsageError(f"{SHARD}={value!r}: each K must be one of 0..N-1")
    return shares, n


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    value = os.environ.get(SHARD)
    if not value:
        return
    shares, n = _shard(value)
    kept, dropped = [], []
    for item in items:
        shared = item.nodeid.startswith("tests/solver/") or item.get_closest_marker("solver_bound") is not None
        (dropped if shared and zlib.crc32(item.nodeid.encode()) % n not in shares else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
