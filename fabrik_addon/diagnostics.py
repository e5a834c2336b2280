"""Per-chain results of the last solve, kept outside Blender data.

Writing them into RNA properties every frame would tag the armature for another evaluation; the
chain's read-only properties (``status``, ``message``, ``last_error``...) read them from here instead.
"""

from __future__ import annotations

from dataclasses import dataclass

STATUSES = ('NONE', 'REACHED', 'UNREACHABLE', 'INVALID')


@dataclass
class Diagnostic:
    status: str = 'NONE'
    message: str = ""
    error: float = 0.0
    iterations: int = 0
    group: str = ""


_results: dict[int, Diagnostic] = {}


def of(chain) -> Diagnostic:
    return _results.get(chain.as_pointer()) or Diagnostic()


def record(chain, status: str, message: str = "", error: float = 0.0, iterations: int = 0,
           group: str | None = None) -> None:
    entry = _results.setdefault(chain.as_pointer(), Diagnostic())
    entry.status, entry.message, entry.error, entry.iterations = status, message, error, iterations
    if group is not None:
        entry.group = group


def set_group(chain, label: str) -> None:
    _results.setdefault(chain.as_pointer(), Diagnostic()).group = label


def clear() -> None:
    _results.clear()
