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

# Everything an animator may tune on a linked rig (a library override): settings, limits, base poses.
# New chains may be added on the override too.
OVERRIDABLE = {'LIBRARY_OVERRIDABLE'}
OVERRIDABLE_COLLECTION = {'LIBRARY_OVERRIDABLE', 'USE_INSERTION'}

# The chain's solvers, shared by the chain setting and the add-chain operator.
SOLVER_ITEMS = (
    ('FABRIK', "FABRIK", "Iterative FABRIK for any number of bones"),
    ('TWO_BONE', "Two-Bone", "Exact law-of-cosines solution for chains of exactly two bones"),
)


def _changed(self, context) -> None:
    """Any setting that changes the result asks the handlers to solve again."""
    from . import handlers

    handlers.request_solve()


def _chain_enabled_changed(self, context) -> None:
    """A chain switched off gives its bones back their pose without IK."""
    from .rig import base_pose

    if not self.enabled:
        base_pose.release(self.id_data, [self])
        diagnostics.record(self, 'NONE')  # released here: the next solve must not release it again
    _changed(self, context)


def _bone_field_changed(name: str):
    """Update of a bone name field (``tip_bone``, ``target_bone``, ``pole_bone``) or of the object whose
    bone it names: remember the bone's identity, so the chain follows it when it is renamed."""

    def update(self, context) -> None:
        from .rig import renames

        renames.remember(self, name)
        _changed(self, context)

    update.__name__ = f"_{name}_changed"
    return update


_tip_bone_changed = _bone_field_changed("tip_bone")
_target_bone_changed = _bone_field_changed("target_bone")
_pole_bone_changed = _bone_field_changed("pole_bone")


def _stretch_changed(self, context) -> None:
    """Stretch switched off gives the chain's bones back their scale without IK."""
    from .rig import base_pose

    if not self.use_stretch:
        base_pose.release(self.id_data, [self], rotations=False)
    _changed(self, context)


def _rig_enabled_changed(self, context) -> None:
    from .rig import base_pose

    if not self.enabled:
        base_pose.release(self.id_data, list(self.chains))
        for chain in self.chains:  # released here: the next solve must not release them again
            diagnostics.record(chain, 'NONE', "FABRIK IK is switched off for this armature")
    _changed(self, context)


# Read-only results of the last solve. Named functions, not lambdas: Blender evaluates these postponed
# annotations from strings, and a lambda made there cannot see this module's names when it runs.
def _get_status(self) -> int:
    return diagnostics.STATUSES.index(diagnostics.of(self).status)


def _get_message(self) -> str:
    why = diagnostics.explanation(self)
    return diagnostics.of(self).message if why is None else why.message


def _get_error(self) -> float:
    return diagnostics.of(self).error


def _get_iterations(self) -> int:
    return diagnostics.of(self).iterations


def _get_group(self) -> str:
    return diagnostics.of(self).group


def _get_limited_by(self) -> int:
    from .solver.reach import REASONS

    why = diagnostics.explanation(self)
    return 0 if why is None else REASONS.index(why.limited_by)


def _get_limited_bone(self) -> str:
    why = diagnostics.explanation(self)
    return "" if why is None else why.limited_bone


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
        override=OVERRIDABLE,
    )
    cone_left: FloatProperty(  # type: ignore[valid-type]
        name="Left", description="Largest deflection toward the bone's local -X axis",
        subtype='ANGLE', min=0.0, max=math.pi, default=math.radians(45.0), update=_changed,
        override=OVERRIDABLE,
    )
    cone_right: FloatProperty(  # type: ignore[valid-type]
        name="Right", description="Largest deflection toward the bone's local +X axis",
        subtype='ANGLE', min=0.0, max=math.pi, default=math.radians(45.0), update=_changed,
        override=OVERRIDABLE,
    )
    cone_up: FloatProperty(  # type: ignore[valid-type]
        name="Up", description="Largest deflection toward the bone's local +Z axis",
        subtype='ANGLE', min=0.0, max=math.pi, default=math.radians(45.0), update=_changed,
        override=OVERRIDABLE,
    )
    cone_down: FloatProperty(  # type: ignore[valid-type]
        name="Down", description="Largest deflection toward the bone's local -Z axis",
        subtype='ANGLE', min=0.0, max=math.pi, default=math.radians(45.0), update=_changed,
        override=OVERRIDABLE,
    )
    hinge_min: FloatProperty(  # type: ignore[valid-type]
        name="Min", description="Smallest rotation about local X (right-hand rule) from the rest pose",
        subtype='ANGLE', min=-math.pi, max=math.pi, default=0.0, update=_changed,
        override=OVERRIDABLE,
    )
    hinge_max: FloatProperty(  # type: ignore[valid-type]
        name="Max", description="Largest rotation about local X (right-hand rule) from the rest pose",
        subtype='ANGLE', min=-math.pi, max=math.pi, default=math.radians(150.0), update=_changed,
        override=OVERRIDABLE,
    )


class FabrikBasePose(bpy.types.PropertyGroup):
    """The rotation (and, for stretching chains, scale) a chain bone has without IK when it has no keys:
    the start pose of every solve."""

    __slots__ = ()

    captured: BoolProperty(  # type: ignore[valid-type]
        name="Captured", description="A base rotation was stored for this bone", default=False,
        override=OVERRIDABLE,
    )
    rotation: FloatVectorProperty(  # type: ignore[valid-type]
        name="Base Rotation", description="Rotation (wxyz quaternion, basis space) the bone has without IK",
        size=4, default=(1.0, 0.0, 0.0, 0.0),
        override=OVERRIDABLE,
    )
    scale_captured: BoolProperty(  # type: ignore[valid-type]
        name="Scale Captured", description="A base scale was stored for this bone (it belongs to a stretching chain)",
        default=False,
        override=OVERRIDABLE,
    )
    scale: FloatVectorProperty(  # type: ignore[valid-type]
        name="Base Scale", description="Scale the bone has without IK (stretch writes on top of it)",
        size=3, default=(1.0, 1.0, 1.0),
        override=OVERRIDABLE,
    )


class FabrikChain(bpy.types.PropertyGroup):
    """One IK chain: a tip bone and the bones above it, following a target."""

    __slots__ = ()

    name: StringProperty(  # type: ignore[valid-type]
        name="Name", description="Name of this chain", default="Chain", override=OVERRIDABLE,
    )
    enabled: BoolProperty(  # type: ignore[valid-type]
        name="Enabled", description="Solve this chain every frame", default=True, update=_chain_enabled_changed,
        override=OVERRIDABLE,
    )
    tip_bone: StringProperty(  # type: ignore[valid-type]
        name="Tip Bone", description="Last bone of the chain; its tail is the end effector",
        update=_tip_bone_changed,
        override=OVERRIDABLE,
    )
    chain_length: IntProperty(  # type: ignore[valid-type]
        name="Chain Length", description="Bones from the tip up the parent hierarchy (0: up to the root bone)",
        min=0, max=255, default=2, update=_changed,
        override=OVERRIDABLE,
    )
    solver: EnumProperty(  # type: ignore[valid-type]
        name="Solver", description="How the chain is solved", items=SOLVER_ITEMS, default='FABRIK', update=_changed,
        override=OVERRIDABLE,
    )
    target: PointerProperty(  # type: ignore[valid-type]
        name="Target", description="Object the chain reaches for", type=bpy.types.Object,
        update=_target_bone_changed, override=OVERRIDABLE,
    )
    target_bone: StringProperty(  # type: ignore[valid-type]
        name="Target Bone", description="Bone of the target armature to reach for (its head)",
        update=_target_bone_changed,
        override=OVERRIDABLE,
    )
    pole: PointerProperty(  # type: ignore[valid-type]
        name="Pole", description="Object the chain bends toward", type=bpy.types.Object,
        update=_pole_bone_changed, override=OVERRIDABLE,
    )
    pole_bone: StringProperty(  # type: ignore[valid-type]
        name="Pole Bone", description="Bone of the pole armature to bend toward (its head)",
        update=_pole_bone_changed,
        override=OVERRIDABLE,
    )
    iterations: IntProperty(  # type: ignore[valid-type]
        name="Iterations", description="Largest number of FABRIK passes per frame",
        min=1, max=1000, default=30, update=_changed,
        override=OVERRIDABLE,
    )
    tolerance: FloatProperty(  # type: ignore[valid-type]
        name="Tolerance",
        description="Stop once the tip is within this fraction of the chain's length of the target (0.001: a "
                    "thousandth of it, for chains of any size). Earlier builds read it as a distance in scene units; "
                    "a value saved by them now means that fraction: the same for a chain 1 unit long",
        min=0.0, max=1.0, default=0.001, precision=5, step=0.01, update=_changed,
        override=OVERRIDABLE,
    )
    match_target_rotation: BoolProperty(  # type: ignore[valid-type]
        name="Match Target Rotation",
        description="The tip bone's head lands on the target and it takes the target's orientation; "
                    "the bones above it form the chain",
        default=False, update=_changed,
        override=OVERRIDABLE,
    )
    softness: FloatProperty(  # type: ignore[valid-type]
        name="Softness",
        description="Fraction of the chain's reach over which the tip eases toward full extension, so the "
                    "chain never snaps straight (soft IK); 0 reaches exactly",
        min=0.0, max=0.5, default=0.0, subtype='FACTOR', override={'LIBRARY_OVERRIDABLE'}, update=_changed,
    )
    use_stretch: BoolProperty(  # type: ignore[valid-type]
        name="Stretch",
        description="Scale the chain's bones along their length (pose scale Y, all by one factor) so the tip "
                    "reaches a target beyond full extension",
        default=False, override={'LIBRARY_OVERRIDABLE'}, update=_stretch_changed,
    )
    max_stretch: FloatProperty(  # type: ignore[valid-type]
        name="Max Stretch",
        description="Largest stretch factor; beyond it the chain reaches toward the target without growing more",
        min=1.0, soft_max=5.0, default=1.5, override={'LIBRARY_OVERRIDABLE'}, update=_changed,
    )
    influence: FloatProperty(  # type: ignore[valid-type]
        name="Influence", description="Blend between the pose without IK (0) and the full IK pose (1)",
        min=0.0, max=1.0, default=1.0, subtype='FACTOR', update=_changed,
        override=OVERRIDABLE,
    )
    weight: FloatProperty(  # type: ignore[valid-type]
        name="Weight", description="Pull of this chain where chains share bones (solved together as a tree)",
        min=0.0, max=1.0, default=1.0, subtype='FACTOR', update=_changed,
        override=OVERRIDABLE,
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
        name="Message", description="Why the chain is invalid, or what holds its tip short, if anything",
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
    limited_by: EnumProperty(  # type: ignore[valid-type]
        name="Limited By", description="What holds the tip short of the target after the last solve",
        items=(
            ('NONE', "Nothing", "The chain reached its target, or was not solved"),
            ('LENGTH', "Length", "The target is beyond the chain's reach (stretch and its maximum included)"),
            ('LIMIT', "Joint Limit", "A joint limit holds the tip short of a target the chain could otherwise reach"),
            ('SOFTNESS', "Softness", "Soft IK holds the tip short by design"),
            ('ITERATIONS', "Iterations", "The solve ran out of iterations"),
            ('POLE', "Pole", "A hinge and the pole disagree"),
            ('SHARED', "Shared Bones",
             "The tree's other targets pull the bones this chain shares with them (its tree settled short)"),
        ),
        get=_get_limited_by,
    )
    limited_bone: StringProperty(  # type: ignore[valid-type]
        name="Limited Bone", description="The bone whose joint limit holds the tip short (empty otherwise)",
        get=_get_limited_bone,
    )
    bake_max_error: FloatProperty(  # type: ignore[valid-type]
        name="Bake Max Error", description="Largest distance between live IK and baked pose in the last bake",
        subtype='DISTANCE', default=-1.0,
        override=OVERRIDABLE,
    )
    bake_mean_error: FloatProperty(  # type: ignore[valid-type]
        name="Bake Mean Error", description="Mean distance between live IK and baked pose in the last bake",
        subtype='DISTANCE', default=-1.0,
        override=OVERRIDABLE,
    )


class FabrikRigSettings(bpy.types.PropertyGroup):
    """FABRIK IK settings of one armature object."""

    __slots__ = ()

    enabled: BoolProperty(  # type: ignore[valid-type]
        name="Enabled", description="Solve this armature's chains (rig-wide switch)", default=True,
        update=_rig_enabled_changed,
        override=OVERRIDABLE,
    )
    chains: CollectionProperty(  # type: ignore[valid-type]
        name="Chains", description="IK chains of this armature", type=FabrikChain,
        override=OVERRIDABLE_COLLECTION,
    )
    active_chain_index: IntProperty(  # type: ignore[valid-type]
        name="Active Chain", description="Chain shown in the panel", default=0, min=0,
        override=OVERRIDABLE,
    )
    show_reach_overlay: BoolProperty(  # type: ignore[valid-type]
        name="Show Why Not Reached",
        description="Draw in the viewport, for this armature's chains that stop short, the gap from tip to "
                    "target, the limit of the bone that holds the tip and the pole line",
        default=False,
    )
