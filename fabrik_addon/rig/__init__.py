"""Solving an armature's chains in Blender, one way down.

``solve`` (the frame's entry) picks a strategy per group of chains: ``small`` (a few standalone chains,
mathutils and floats), ``batch`` (many standalone chains, numpy across armatures) or ``tree`` (chains
sharing bones). They build on ``plan`` (which chains, validated and grouped), ``inputs`` (per-armature
and per-chain inputs of a frame) and ``base_pose`` (the pose without IK), which build on the add-on's
``cache``, ``adapter``, ``diagnostics`` and the solver core. No module imports one above it.
"""
