"""Rig-building kit shared by the tests, the demo and the benchmarks (not shipped in the extension).

``rigkit.chains`` builds joint positions with numpy alone (solver tests, solver benchmarks);
``rigkit.blender`` builds armatures, empties, skins and chains through ``bpy.data`` (Blender tests, demo,
Blender benchmark); ``rigkit.realrig`` real-sized rigs (Rigify's human metarig, an arm on an armature of many
other bones) with their chains and keyed targets. Import the submodule you need: this package imports
nothing itself, so the numpy half works without Blender.
"""
