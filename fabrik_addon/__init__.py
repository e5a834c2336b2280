"""FABRIK IK: fast, controllable inverse kinematics for Blender armatures.

Blender modules are imported inside :func:`register` so that ``import fabrik_addon.solver`` works
without Blender.
"""


def register() -> None:
    from . import registration

    registration.register()


def unregister() -> None:
    from . import registration

    registration.unregister()
