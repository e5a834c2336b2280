"""Chains follow renamed bones, as Blender's own constraints do.

A chain names bones: its tip (``tip_bone``), and the target's and pole's (``target_bone``,
``pole_bone``). Blender renames a constraint's subtarget in C code whenever a bone is renamed; an
add-on gets no such call. So each bone a chain names carries an ID property, :data:`KEY` (an integer
that custom properties of a Bone keep through Bone.name, EditBone.name and PoseBone.name renames alike),
and the chain keeps the same integer per field. When a chain's stored name is not found, or names a
bone with another identity (names swapped), the bone with the chain's identity is looked up and the
stored name updated. Limits and the pose without IK live on the pose bone, and Blender renames
F-curve paths itself, so they need nothing.
"""

from __future__ import annotations

import random

# ID property on a data Bone (and its EditBone): the bone's identity for FABRIK IK chains.
KEY = "fabrik_id"

# The chain's bone fields, and the object whose armature each names a bone of.
FIELDS = ("tip_bone", "target_bone", "pole_bone")


def _id_key(name: str) -> str:
    """ID property on the chain holding the identity of the bone field ``name`` names."""
    return f"{name}_id"


def armature_of(chain, name: str):
    """The armature object whose bone the chain's field ``name`` names, or None (no such object, or not an
    armature)."""
    if name == "tip_bone":
        return chain.id_data
    ob = chain.target if name == "target_bone" else chain.pole
    return ob if ob is not None and ob.type == 'ARMATURE' else None


def remember(chain, name: str) -> None:
    """Note the identity of the bone the chain's field ``name`` now names (marking the bone if it has none
    yet); a name that names no bone forgets it, so the chain never follows a bone it was moved away from."""
    ob = armature_of(chain, name)
    bone = ob.data.bones.get(getattr(chain, name)) if ob is not None and getattr(chain, name) else None
    try:
        if bone is None:
            if _id_key(name) in chain:
                del chain[_id_key(name)]
            return
        ident = bone.get(KEY)
        if not isinstance(ident, int) or ident <= 0:
            ident = bone[KEY] = random.randint(1, 2**31 - 1)
        chain[_id_key(name)] = ident
    except (AttributeError, TypeError, RuntimeError):  # linked data: not writable here, names only
        pass


def remember_all(chain) -> None:
    for name in FIELDS:
        remember(chain, name)


def resolve(chain, name: str, data):
    """The bone (of armature data ``data``) that the chain's field ``name`` means, following a rename:
    the bone carrying the chain's identity when there is one, else the bone of that name, else None.

    A stored name that moved is updated (a chain with no identity yet, as in files from before
    renames were followed, is given one)."""
    stored = getattr(chain, name)
    bone = data.bones.get(stored) if stored else None
    ident = chain.get(_id_key(name))
    if ident is None:
        if bone is not None:
            remember(chain, name)
        return bone
    if bone is not None and bone.get(KEY) == ident:
        return bone
    found = next((b for b in data.bones if b.get(KEY) == ident), None)
    if found is None:  # the bone is gone: its name decides, as for a constraint, and is remembered
        if bone is not None:
            remember(chain, name)
        return bone
    try:
        setattr(chain, name, found.name)
    except (AttributeError, TypeError, RuntimeError):  # linked, not overridable: solve the bone all the same
        pass
    return found


def follow(chain) -> bool:
    """Update the chain's target and pole bone names after renames; whether any changed."""
    changed = False
    for name in FIELDS[1:]:
        ob = armature_of(chain, name)
        stored = getattr(chain, name)
        if ob is None or not stored:
            continue
        bone = resolve(chain, name, ob.data)
        changed |= bone is not None and bone.name != stored
    return changed
