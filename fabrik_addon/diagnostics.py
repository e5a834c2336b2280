"""Per-chain results of the last solve, kept outside Blender data.

Writing them into RNA properties every frame would tag the armature for another evaluation; the
chain's read-only properties (``status``, ``message``, ``last_error``...) read them from here instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .solver.reach import Shortfall

STATUSES = ('NONE', 'REACHED', 'UNREACHABLE', 'INVALID', 'NOT_CONVERGED')


@dataclass
class Diagnostic:
    status: str = 'NONE'
    message: str = ""
    error: float = 0.0
    iterations: int = 0
    group: str = ""
    # Why the tip stops short: None (it reached, or was not solved), or an Explanation, or the call that
    # makes one on first read (:func:`explanation`), so playback never pays for it unless it is shown.
    why: Explanation | Callable[[], Explanation] | None = None


@dataclass(frozen=True)
class Explanation:
    """What holds a chain's tip short: ``FabrikChain.limited_by``, ``limited_bone`` and ``message``, and
    the numbers and geometry behind them (armature space) for the overlay."""

    limited_by: str  # a .solver.reach.REASONS entry
    limited_bone: str
    message: str
    shortfall: Shortfall | None = None


_results: dict[int, Diagnostic] = {}
# Chains recorded INVALID since the solve began (a chain may come more than once): the solve gives their bones
# back at its end (.rig.solve.release_invalid) and clears the list at its start.
invalid: list = []


def of(chain) -> Diagnostic:
    return _results.get(chain.as_pointer()) or Diagnostic()


def record(chain, status: str, message: str = "", error: float = 0.0, iterations: int = 0,
           group: str | None = None) -> None:
    key = chain.as_pointer()
    entry = _results.get(key)
    if entry is None:  # (setdefault would build a Diagnostic on every call)
        entry = _results[key] = Diagnostic()
    entry.status, entry.message, entry.error, entry.iterations = status, message, error, iterations
    entry.why = None
    if status == 'INVALID':
        invalid.append(chain)
    if group is not None:
        entry.group = group


def set_group(chain, label: str) -> None:
    _results.setdefault(chain.as_pointer(), Diagnostic()).group = label


def clear() -> None:
    _results.clear()
    invalid.clear()


def record_solve(chain, reached: bool, converged: bool, error: float, iterations: int) -> None:
    """A solved chain's status: reached; ran out of iterations while still closing in (says so, with
    the count); or settled short, i.e. out of reach (under its limits)."""
    key = chain.as_pointer()
    entry = _results.get(key)
    if entry is None:
        entry = _results[key] = Diagnostic()
    if reached:  # the common case without the calls (this runs per chain per frame)
        entry.status, entry.message, entry.why = 'REACHED', "", None
    else:
        entry.status, entry.message = solve_status(reached, converged, iterations)
        entry.why = None  # until the solving path explains it
    entry.error, entry.iterations = error, iterations


def solve_status(reached: bool, converged: bool, iterations: int) -> tuple[str, str]:
    """Status and message of :func:`record_solve`."""
    if reached:
        return 'REACHED', ""
    if not converged:
        return 'NOT_CONVERGED', f"Did not converge in {iterations} iterations; raise Iterations"
    return 'UNREACHABLE', "Out of reach"


def record_solves(chains, reached, converged, errors, iterations) -> None:
    """:func:`record_solve` for many chains (lists of equal length), in one call."""
    results = _results
    for chain, hit, settled, error, count in zip(chains, reached, converged, errors, iterations):
        key = chain.as_pointer()
        entry = results.get(key)
        if entry is None:
            entry = results[key] = Diagnostic()
        if hit:
            entry.status, entry.message, entry.why = 'REACHED', "", None
        else:
            entry.status, entry.message = solve_status(hit, settled, count)
            entry.why = None  # until the solving path explains it
        entry.error, entry.iterations = error, count


def explain_later(chain, explain: Callable[[], Explanation]) -> None:
    """Why a solved chain stops short, made by ``explain`` (which holds no Blender data) when first read."""
    entry = _results.get(chain.as_pointer())
    if entry is None:
        entry = _results[chain.as_pointer()] = Diagnostic()
    entry.why = explain


def explanation(chain) -> Explanation | None:
    """What holds the chain's tip short after its last solve; None when it reached or was not solved."""
    entry = _results.get(chain.as_pointer())
    if entry is None or entry.why is None:
        return None
    why = entry.why
    if not isinstance(why, Explanation):
        try:
            why = why()
        except (ValueError, ArithmeticError, IndexError) as error:  # never in a getter or a draw
            why = Explanation('NONE', "", f"{entry.message} (could not tell why: {error})")
        entry.why = why
    return why
