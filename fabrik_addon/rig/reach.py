"""Why a chain stopped short: the solver's answer (:func:`.solver.reach.explain`) from one solving path's
inputs and result, recorded for the panel, scripts and the viewport overlay.

Called by each path only for chains that did not reach, so reaching chains pay nothing for it; even then
the path only leaves the inputs (copies, no Blender data) and the explanation is made when first read
(the panel, a script, the overlay): playback with chains held short re-solves nothing.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import numpy as np

from .. import diagnostics
from ..solver.reach import describe, explain


def explain_small(chain, inputs, result, use_stretch: bool, scale: float) -> None:
    """A chain solved by :mod:`.small` (``inputs``: its ChainInputs, ``result``: its ChainResult)."""
    placed = inputs.placed
    if not placed:
        return
    _record(chain, inputs.plan.bones[:placed], scale, np.array(inputs.start, dtype=np.float64),
            np.array(inputs.target, dtype=np.float64), np.array(result.joints, dtype=np.float64),
            reached=result.reached, converged=result.converged, tolerance=inputs.tolerance,
            max_iterations=inputs.iterations, pole=None if inputs.pole is None else np.array(inputs.pole),
            limits=inputs.limits, softness=chain.softness, use_stretch=use_stretch, max_stretch=chain.max_stretch,
            two_bone=inputs.plan.two_bone)


def explain_rows(group, valid: list[int]) -> None:
    """The rows ``valid`` of a :mod:`.batch` group that did not reach (batched chains never stretch)."""
    n = group.idx.shape[1]
    for c in valid:
        if group.reached[c] or c not in group.targets:
            continue
        part, chain, plan = group.items[c]
        placed = n - 1 if group.settings["match"][c] else n
        if not placed:
            continue
        i = plan.chain_index
        _record(chain, plan.bones[:placed], float(group.settings["scale"][c]), group.every[c, :placed + 1],
                np.array(group.targets[c]), group.moved[c, :placed + 1], reached=False,
                converged=bool(group.converged[c]), tolerance=part.settings.tolerance[i] * plan.length,
                max_iterations=part.settings.iterations[i], pole=group.poles.get(c),
                softness=part.settings.softness[i], two_bone=part.settings.two_bone[i])


def _record(chain, bones, scale: float, start, target, joints, branch: str = "", **settings) -> None:
    # Copies: the arrays of a solving path are reused on the next frame.
    diagnostics.explain_later(chain, partial(_explanation, list(bones), scale, branch, np.array(start, dtype=float),
                                             np.array(target, dtype=float), np.array(joints, dtype=float), settings))


def _explanation(bones: list[str], scale: float, branch: str, start, target, joints,
                 settings: dict) -> diagnostics.Explanation:
    why = explain(start, target, joints, **settings)
    if branch and why.reason == 'ITERATIONS' and settings["converged"]:
        # A branch that settled short with nothing of its own to blame (no limit, no length, no softness): the tree's
        # passes settled where its other targets pull the shared bones. As a lone chain this reads as a stall
        # ("raise Iterations"), which raising them does not mend (a torso whose other hand's target lay beyond
        # reach held this hand 0.59 m short of its own pose's tip at 100 iterations and at 300).
        why = replace(why, reason='SHARED')
    message = describe(why, bones, scale)
    if branch:
        message = f"Branch '{branch}': {message}"
    return diagnostics.Explanation(why.reason, bones[why.bone] if 0 <= why.bone < len(bones) else "", message, why)


def explain_branch(chain, plan, names: list[str], joints, parents: list[int], effector: int, result, target,
                   pole, limits: dict, scale: float, max_iterations: int, length: float) -> None:
    """A chain solved in a tree (:mod:`.tree`), explained as the branch from its first bone to its
    effector would be on its own, with the limits it carries when it starts at the tree's root; the
    message names the branch."""
    first = names.index(plan.bones[0])
    path = [effector]
    while path[-1] != first and parents[path[-1]] >= 0:
        path.append(parents[path[-1]])
    path.reverse()
    if len(path) < 2:
        return
    chain_limits = None
    if limits and path[0] == 0:
        from ..solver import ChainLimits

        ends = path[1:]
        chain_limits = ChainLimits([limits["limits"][j] for j in ends], limits["frames"][ends],
                                   limits["rest_offsets"][ends], limits["base_frame"])
    pole = None if pole is None or not np.isfinite(pole).all() else np.asarray(pole)
    _record(chain, [names[j] for j in path[:-1]], scale, np.asarray(joints, dtype=np.float64)[path],
            np.asarray(target, dtype=np.float64), np.asarray(result.joints)[path], branch=chain.name,
            reached=False, converged=result.converged, tolerance=chain.tolerance * length,
            max_iterations=max_iterations, pole=pole, limits=chain_limits, softness=chain.softness,
            use_stretch=chain.use_stretch, max_stretch=chain.max_stretch)
