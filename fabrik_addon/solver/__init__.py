"""FABRIK IK solver core: pure numpy, no Blender imports.

Conventions: radians, wxyz quaternions, bone frames with Y along the bone (as in Blender).
"""

from .fabrik import solve_chain
from .fabrik_batch import solve_chains
from .limits import ChainLimits, ConeLimit, HingeLimit
from .result import ChainResults, SolveResult
from .tree import TreeLimits, TreeResult, resolve_tree_limits, solve_tree
from .two_bone import solve_two_bone

__all__ = [
    "ChainLimits",
    "ChainResults",
    "ConeLimit",
    "HingeLimit",
    "SolveResult",
    "TreeLimits",
    "TreeResult",
    "solve_chain",
    "resolve_tree_limits",
    "solve_chains",
    "solve_tree",
    "solve_two_bone",
]
