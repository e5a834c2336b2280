"""What the panels and operators need from the context, asked in one place."""

from __future__ import annotations


def active_armature(context):
    """The active object if it is an armature, else None."""
    ob = context.object
    return ob if ob is not None and ob.type == 'ARMATURE' else None


def armature_in_pose_mode(context):
    """The active armature if it is in Pose Mode, else None."""
    ob = active_armature(context)
    return ob if ob is not None and context.mode == 'POSE' else None


def has_chains(cls, ob, missing: str) -> bool:
    """For an operator's ``poll``: ``ob`` is an armature with chains; otherwise say why not (``missing``:
    what to ask for when ``ob`` is None)."""
    if ob is None:
        cls.poll_message_set(missing)
        return False
    if not len(ob.fabrik.chains):
        cls.poll_message_set("This armature has no FABRIK chains")
        return False
    return True


def active_chain(context):
    """The active armature's active chain, or None (no armature, no chains)."""
    ob = active_armature(context)
    if ob is None or not len(ob.fabrik.chains):
        return None
    return ob.fabrik.chains[min(ob.fabrik.active_chain_index, len(ob.fabrik.chains) - 1)]
