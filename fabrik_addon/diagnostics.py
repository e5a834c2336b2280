"""Per-chain results of the last solve, kept outside Blender data.

Writing them into RNA properties every frame would tag the armature for another evaluation; the
chain's read-only properties (``status``, ``message``, ``last_error``...) read them from here instead.
"""

from __future__ import annotations

from dataclasses import dataclass

STATUSES = ('NONE', 'REACHED', 'UNREACHABLE', 'INVALID', 'NOT_CONVERGED')


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
    key = chain.as_pointer()
    entry = _results.get(key)
    if entry is None:  # (setdefault would build a Diagnostic on every call)
        entry = _results[key] = Diagnostic()
    entry.status, entry.message, entry.error, entry.iterations = status, message, error, iterations
    if group is not None:
        entry.group = group


def set_group(chain, label: str) -> None:
    _results.setdefault(chain.as_pointer(), Diagnostic()).group = label


def clear() -> None:
    _results.clear()


def record_solve(chain, reached: bool, converged: bool, error: float, iterations: int) -> None:
    """A solved chain's status: reached; ran out of iterations while still closing in (says so, with
    the count); or settled short, i.e. out of reach (under its limits)."""
    if reached:
        record(chain, 'REACHED', "", error, iterations)
    elif not converged:
        record(chain, 'NOT_CONVERGED', f"Did not converge in {iterations} iterations; raise Iterations",
               error, iterations)
    else:
        record(chain, 'UNREACHABLE', "Out of reach", error, iterations)
