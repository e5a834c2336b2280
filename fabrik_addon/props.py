"""Property groups: ``Object.fabrik`` (rig settings and chains) and ``PoseBone.fabrik_limit``."""

from __future__ import annotations

import math

import bpy
from bpy.props import (
    BoolProperty,
    CollectionProperty,
    EnumProperty,
    FloatProperty,
    FloatVectorProperty,
    IntProperty,
    PointerProperty,
    StringProperty,
)

from . import diagnostics


def _changed(self, context) -> None:
    """Any setting that changes the result asks the handlers to solve again."""
    from . import handlers

    handlers.request_solve()


def _chain_enabled_changed(self, context) -> None:
    """A chain switched off gives its bones back their pose without IK."""
    from .rig import base_pose

    if not self.enabled:
        base_pose.release(self.id_data, [self])
    _changed(self, context)


def _rig_enabled_changed(self, context) -> None:
    from .rig import base_pose

    if not self.enabled:
        base_pose.release(self.id_data, list(self.chains))
    _changed(self, context)


# Read-only results of the last solve. Named functions, not lambdas: Blender evaluates these postponed
# annotations from strings, and a lambda made there cannot see this module's names when it runs.
def _get_status(self) -> int:
    return diagnostics.STATUSES.index(diagnostics.of(self).status)


def _get_message(self) -> str:
    return diagnostics.of(self).message


def _get_error(self) -> float:
    return diagnostics.of(self).error


def _get_iterations(self) -> int:
    return diagnostics.of(self).iterations


def _get_group(self) -> str:
    return diagnostics.of(self).group


class FabrikJointLimit(bpy.types.PropertyGroup):
    """Joint limit of one pose bone, measured from its rest orientation in its parent's frame."""

    __slots__ = ()

    mode: EnumProperty(  # type: ignore[valid-type]
        name="Limit",
        description="How this bone's direction is limited relative to its parent",
        items=(
            ('NONE', "None", "The bone may point anywhere"),
            ('CONE', "Cone", "Elliptical cone from four angles around the rest direction"),
            ('HINGE', "Hinge", "Rotation about the bone's local X axis only, within a range"),
        ),
        default='NONE',
        update=_changed,
    )
    cone_left: FloatProperty(  # type: ignore[valid-type]
        name="Left", description="Largest deflection toward the bone's local -X axis",
        subtype='ANGLE', min=0.0, max=math.pi, default=math.radians(45.0), update=_changed,
    )
    cone_right: FloatProperty(  # type: ignore[valid-type]
        name="Right", description="Largest deflection toward the bone's local +X axis",
        subtype='ANGLE', min=0.0, max=math.pi, default=math.radians(45.0), update=_changed,
    )
    cone_up: FloatProperty(  # type: ignore[valid-type]
        name="Up", description="Largest deflection toward the bone's local +Z axis",
        subtype='ANGLE', min=0.0, max=math.pi, default=math.radians(45.0), update=_changed,
    )
    cone_down: FloatProperty(  # type: ignore[valid-type]
        name="Down", description="Largest deflection toward the bone's local -Z axis",
        subtype='ANGLE', min=0.0, max=math.pi, default=math.radians(45.0), update=_changed,
    )
    hinge_min: FloatProperty(  # type: ignore[valid-type]
        name="Min", description="Smallest rotation about local X (right-hand rule) from the rest pose",
        subtype='ANGLE', min=-math.pi, max=math.pi, default=0.0, update=_changed,
    )
    hinge_max: FloatProperty(  # type: ignore[valid-type]
        name="Max", description="Largest rotation about local X (right-hand rule) from the rest pose",
        subtype='ANGLE', min=-math.pi, max=math.pi, default=math.radians(150.0), update=_changed,
    )


class FabrikBasePose(bpy.types.PropertyGroup):
    """The rotation a chain bone has without IK when it has no keys: the start pose of every solve."""

    __slots__ = ()

    captured: BoolProperty(  # type: ignore[valid-type]
        name="Captured", description="A base rotation was stored for this bone", default=False,
    )
    rotation: FloatVectorProperty(  # type: ignore[valid-type]
        name="Base Rotation", description="Rotation (wxyz quaternion, basis space) the bone has without IK",
        size=4, default=(1.0, 0.0, 0.0, 0.0),
    )


class FabrikChain(bpy.types.PropertyGroup):
    """One IK chain: a tip bone and the bones above it, following a target."""

    __slots__ = ()

    name: StringProperty(name="Name", description="Name of this chain", default="Chain")  # type: ignore[valid-type]
    enabled: BoolProperty(  # type: ignore[valid-type]
        name="Enabled", description="Solve this chain every frame", default=True, update=_chain_enabled_changed,
    )
    tip_bone: StringProperty(  # type: ignore[valid-type]
        name="Tip Bone", description="Last bone of the chain; its tail is the end effector", update=_changed,
    )
    chain_length: IntProperty(  # type: ignore[valid-type]
        name="Chain Length", description="Bones from the tip up the parent hierarchy (0: up to the root bone)",
        min=0, max=255, default=2, update=_changed,
    )
    solver: EnumProperty(  # type: ignore[valid-type]
        name="Solver", description="How the chain is solved",
        items=(
            ('FABRIK', "FABRIK", "Iterative FABRIK for any number of bones"),
            ('TWO_BONE', "Two-Bone", "Exact law-of-cosines solution for chains of two bones"),
        ),
        default='FABRIK', update=_changed,
    )
    target: PointerProperty(  # type: ignore[valid-type]
        name="Target", description="Object the chain reaches for", type=bpy.types.Object, update=_changed,
    )
    target_bone: StringProperty(  # type: ignore[valid-type]
        name="Target Bone", description="Bone of the target armature to reach for (its head)", update=_changed,
    )
    pole: PointerProperty(  # type: ignore[valid-type]
        name="Pole", description="Object the chain bends toward", type=bpy.types.Object, update=_changed,
    )
    pole_bone: StringProperty(  # type: ignore[valid-type]
        name="Pole Bone", description="Bone of the pole armature to bend toward (its head)", update=_changed,
    )
    iterations: IntProperty(  # type: ignore[valid-type]
        name="Iterations", description="Largest number of FABRIK passes per frame",
        min=1, max=1000, default=30, update=_changed,
    )
    tolerance: FloatProperty(  # type: ignore[valid-type]
        name="Tolerance", description="Stop once the tip is this close to the target (scene units)",
        min=0.0, default=0.001, precision=4, subtype='DISTANCE', update=_changed,
    )
    match_target_rotation: BoolProperty(  # type: ignore[valid-type]
        name="Match Target Rotation",
        description="The tip bone's head lands on the target and it takes the target's orientation; "
                    "the bones above it form the chain",
        default=False, update=_changed,
    )
    influence: FloatProperty(  # type: ignore[valid-type]
        name="Influence", description="Blend between the pose without IK (0) and the full IK pose (1)",
        min=0.0, max=1.0, default=1.0, subtype='FACTOR', update=_changed,
    )
    weight: FloatProperty(  # type: ignore[valid-type]
        name="Weight", description="Pull of this chain where chains share bones (solved together as a tree)",
        min=0.0, max=1.0, default=1.0, subtype='FACTOR', update=_changed,
    )
    # Results of the last solve, for the panel and scripts: read-only, kept outside Blender data.
    status: EnumProperty(  # type: ignore[valid-type]
        name="Status", description="Outcome of the last solve",
        items=(
            ('NONE', "Not Solved", "Not solved yet"),
            ('REACHED', "Reached", "The tip is within tolerance of the target"),
            ('UNREACHABLE', "Unreachable", "The target is out of reach; the chain gets as close as it can"),
            ('INVALID', "Invalid", "The chain cannot be solved; see the message"),
            ('NOT_CONVERGED', "Not Converged",
             "The solve ran out of iterations while still closing in on the target; raise Iterations"),
        ),
        get=_get_status,
    )
    message: StringProperty(  # type: ignore[valid-type]
        name="Message", description="Why the chain is invalid, if it is",
        get=_get_message,
    )
    last_error: FloatProperty(  # type: ignore[valid-type]
        name="Distance", description="Distance from the tip to the target after the last solve",
        subtype='DISTANCE', get=_get_error,
    )
    last_iterations: IntProperty(  # type: ignore[valid-type]
        name="Iterations Used", description="FABRIK passes used by the last solve",
        get=_get_iterations,
    )
    group: StringProperty(  # type: ignore[valid-type]
        name="Group", description="Chains sharing bones with this one, solved together as a tree",
        get=_get_group,
    )
    bake_max_error: FloatProperty(  # type: ignore[valid-type]
        name="Bake Max Error", description="Largest distance between live IK and baked pose in the last bake",
        subtype='DISTANCE', default=-1.0,
    )
    bake_mean_error: FloatProperty(  # type: ignore[valid-type]
        name="Bake Mean Error", description="Mean distance between live IK and baked pose in the last bake",
        subtype='DISTANCE', default=-1.0,
    )


class FabrikRigSettings(bpy.types.PropertyGroup):
    """FABRIK IK settings of one armature object."""

    __slots__ = ()

    enabled: BoolProperty(  # type: ignore[valid-type]
        name="Enabled", description="Solve this armature's chains (rig-wide switch)", default=True,
        update=_rig_enabled_changed,
    )
    chains: CollectionProperty(  # type: ignore[valid-type]
        name="Chains", description="IK chains of this armature", type=FabrikChain,
    )
    active_chain_index: IntProperty(  # type: ignore[valid-type]
        name="Active Chain", description="Chain shown in the panel", default=0, min=0,
    )
