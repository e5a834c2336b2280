"""The roll rule of :mod:`..solver.orient` in mathutils: each bone's turn for the few-chain path.

:func:`..solver.orient.chains_turns` is the rule in numpy (the batched path). Here its step 1 (the
chain's frame) comes from the same float functions (:func:`..solver.orient.start_frame_floats`,
:func:`..solver.orient.solved_frame_floats`) and step 2 (parallel transport bone by bone) runs in
mathutils, whose C calls cost a fraction of numpy's per-call overhead on one short chain.
``tests/blender/test_roll.py`` holds the two equal.
"""

from __future__ import annotations

from collections.abc import Sequence

from mathutils import Matrix, Quaternion, Vector

from ..solver import orient


def start_frame(joints: Sequence[Vector], side: Vector) -> tuple[tuple, Matrix]:
    """The start pose's frame (:func:`..solver.orient.start_frame_floats`) and its axes ``k``, ``b`` and
    ``k x b`` as the rows of a matrix. It depends on the pose without IK alone: callers keep it while
    that pose holds."""
    frame = orient.start_frame_floats(joints, side)
    kx, ky, kz, bx, by, bz = frame[:6]
    return frame, Matrix(((kx, ky, kz), (bx, by, bz), (ky * bz - kz * by, kz * bx - kx * bz, kx * by - ky * bx)))


def chain_turns(frame: tuple, frame_axes: Matrix, joints: Sequence[Vector], solved: Sequence[Vector],
                pole: Vector | None, count: int, points: Sequence[Sequence[float]] | None = None) -> list[Quaternion]:
    """World turn of each of the first ``count`` bones from ``joints`` (the start pose) to ``solved``:
    the chain's turn as one piece (``[l c l x c] @ [k b k x b]^T``, as in
    :func:`..solver.orient.chains_turns`), then each bone by the least swing that puts its
    direction on the solved one, its parent's turn carried down (parallel transport). ``points``: the
    solved joints in the solver's float64, where there are: the chain's frame comes from them, since a
    straight chain's bend (below ``orient.SIDE_WEIGHT`` of its length) is within the single-precision
    rounding of ``solved`` for a small chain far from the origin (a metarig finger rolled 0.6-0.9 degrees
    a frame that way, straight toward a target moving along its axis)."""
    lx, ly, lz, cx, cy, cz = orient.solved_frame_floats(frame, solved if points is None else points, pole)
    transport = (Matrix(((lx, cx, ly * cz - lz * cy), (ly, cy, lz * cx - lx * cz), (lz, cz, lx * cy - ly * cx)))
                 @ frame_axes).to_quaternion()
    turns = []
    for k in range(count):
        transport = (transport @ (joints[k + 1] - joints[k])).rotation_difference(solved[k + 1] - solved[k]) @ transport
        turns.append(transport)
    return turns
