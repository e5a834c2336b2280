"""Per-chain results of the last solve, kept outside Blender data.

Writing them into RNA properties every frame would tag the armature for another evaluation; the
chain's read-only properties (``status``, ``message``, ``last_error``...) read them from here instead.
"""

from __future__ import annotations

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
    limited_by: str = 'NONE'  # a .solver.reach.REASONS entry: what holds the tip short
    limited_bone: str = ""
    shortfall: Shortfall | None = None  # the numbers and the overlay's geometry (armature space)
    branch: str = ""  # the chain's name when it is solved in a tree


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
    entry.limited_by, entry.limited_bone, entry.shortfall = 'NONE', "", None
    if group is not None:
        entry.group = group


def set_group(chain, label: str) -> None:
    _results.setdefault(chain.as_pointer(), Diagnostic()).group = label


def clear() -> None:
    _results.clear()


def record_solve(chain, reached: bool, converged: bool, error: float, iterations: int) -> None:
    """A solved chain's status: reached; ran out of iterations while still closing in (says so, with
    the count); or settled short, i.e. out of reach (under its limits)."""
    key = chain.as_pointer()
    entry = _results.get(key)
    if entry is None:
        entry = _results[key] = Diagnostic()
    if reached:  # the common case without the calls (this runs per chain per frame)
        entry.status, entry.message = 'REACHED', ""
        if entry.shortfall is not None or entry.limited_by != 'NONE':
            entry.limited_by, entry.limited_bone, entry.shortfall = 'NONE', "", None
    else:
        entry.status, entry.message = solve_status(reached, converged, iterations)
        entry.limited_by, entry.limited_bone, entry.shortfall = 'NONE', "", None  # until explained
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
            entry.status, entry.message = 'REACHED', ""
            if entry.shortfall is not None or entry.limited_by != 'NONE':
                entry.limited_by, entry.limited_bone, entry.shortfall = 'NONE', "", None
        else:
            entry.status, entry.message = solve_status(hit, settled, count)
            entry.limited_by, entry.limited_bone, entry.shortfall = 'NONE', "", None  # until explained
        entry.error, entry.iterations = error, count


def record_shortfall(chain, why: Shortfall, bone_names: list[str], scale: float, branch: str = "") -> None:
    """Why a solved chain stops short (:func:`.solver.reach.explain`): the reason, the bone, and the
    message in one sentence with numbers (``scale``: armature to world units; ``branch``: the chain's
    name, for chains solved in a tree)."""
    from .solver.reach import describe

    message = describe(why, bone_names, scale)
    if branch:
        message = f"Branch '{branch}': {message}"
    bone = bone_names[why.bone] if 0 <= why.bone < len(bone_names) else ""
    record_reason(chain, why.reason, bone, message, why)


def record_reason(chain, reason: str, bone: str, message: str, why: Shortfall | None = None) -> None:
    entry = _results.get(chain.as_pointer())
    if entry is None:
        entry = _results[chain.as_pointer()] = Diagnostic()
    entry.limited_by, entry.limited_bone, entry.message, entry.shortfall = reason, bone, message, why
