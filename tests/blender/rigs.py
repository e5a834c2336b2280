"""Rig builders for the Blender tests: the shared ones from ``rigkit.blender``, under their short names."""

from __future__ import annotations

from rigkit.blender import (  # noqa: F401  (re-exported for the tests)
    ROOT,
    add_chain,
    armature,
    empty,
    forked,
    key_path,
    off_x,
    planar_chain,
    relative_rotations,
    set_rotation,
    straightish_bones,
    straightish_chain,
    torso,
    world_head,
    world_tail,
)
