"""The curled start: the curl search with the kept Horner terms changes nothing, and the batched start
(solver/start_batch.py, many chains at once) equals the single-chain one (solver/start.py) chain by chain."""

import math
import random

import numpy as np
import pytest

from fabrik_addon.solver import start
from fabrik_addon.solver.start import _curl_angle, _evaluate, curled_start
from fabrik_addon.solver.start_batch import _curl_angles, _evaluate_all, _horner_terms, curled_starts
from rigkit.chains import random_chain, reachable_target


def _random_chain(rng: random.Random, n: int) -> tuple[list[float], list[float], list[float], list[float]]:
    xs, ys, zs = [0.0], [0.0], [0.0]
    for _ in range(n):
        d = [rng.gauss(0.0, 0.5), rng.gauss(0.0, 0.5), 1.0]
        scale = rng.uniform(0.2, 1.0) / math.sqrt(sum(v * v for v in d))
        xs.append(xs[-1] + d[0] * scale)
        ys.append(ys[-1] + d[1] * scale)
        zs.append(zs[-1] + d[2] * scale)
    lengths = [math.dist((xs[k], ys[k], zs[k]), (xs[k + 1], ys[k + 1], zs[k + 1])) for k in range(n)]
    return xs, ys, zs, lengths


def test_curl_angle_with_the_kept_horner_terms_is_the_same_float_and_a_root_of_f():
    rng = random.Random(11)
    roots = 0
    for _ in range(400):
        n = rng.randint(2, 12)
        xs, ys, zs, lengths = _random_chain(rng, n)
        shape = start._shape(tuple(xs), tuple(ys), tuple(zs), tuple(lengths), None)
        along, across, p, horner = shape.along, shape.across, shape.p, shape.horner
        assert p == math.fsum(along)
        total = math.fsum(lengths)
        r = rng.uniform(0.05, 1.0) * total
        offset, scale = p * p - r * r, total * total
        kept = start._curl_angle(across, offset, scale, n, horner)
        assert kept == start._curl_angle(across, offset, scale, n)  # the same float, not merely close
        f, _ = start._evaluate(across, kept, offset)
        if abs(f) <= 1e-9 * scale:
            roots += 1
        else:  # the curl cannot match the distance: it stopped where |F| stops shrinking
            assert abs(f) <= abs(start._evaluate(across, 0.0, offset)[0])
    assert roots > 300  # most random targets within reach are matched exactly by the curl


def _chain(offsets: list[float]) -> tuple[list[float], list[float], list[float], list[float]]:
    """Joints up the z axis, each bone's tip pushed along x by ``offsets``."""
    n = len(offsets)
    xs, ys, zs = [0.0] + offsets, [0.0] * (n + 1), [0.25 * k for k in range(n + 1)]
    lengths = [math.dist((xs[k], ys[k], zs[k]), (xs[k + 1], ys[k + 1], zs[k + 1])) for k in range(n)]
    return xs, ys, zs, lengths


POLES = [(0.5 * math.cos(0.3 * i), -1.0 + 0.1 * i, 0.5) for i in range(12)]


def test_a_moving_pole_keeps_a_bent_chains_shape_cached_and_its_axis_is_the_poles_own():
    """A bent chain's curl axis does not depend on the pole, so a pole that moves every frame must not
    make the kept shape new each frame; what is kept is what passing the pole would have computed."""
    xs, ys, zs, lengths = _chain([0.0, 0.05, 0.02, 0.0])
    start._shape.cache_clear()
    starts = [start.curled_start(xs, ys, zs, lengths, (0.3, 0.2, 0.6), pole) for pole in POLES]
    assert start._shape.cache_info().misses == 1
    kept = start._shape(tuple(xs), tuple(ys), tuple(zs), tuple(lengths), None)
    assert not kept[13]
    for pole in POLES:
        fresh = start._shape.__wrapped__(tuple(xs), tuple(ys), tuple(zs), tuple(lengths), pole)
        assert fresh[:11] == kept[:11]
    assert len({tuple(s[0]) for s in starts}) > 1  # the pole still rolls the start


def test_a_straight_chain_takes_its_curl_axis_from_the_pole():
    xs, ys, zs, lengths = _chain([0.0, 0.0, 0.0, 0.0])
    start._shape.cache_clear()
    axes = set()
    for pole in POLES[:6]:
        start.curled_start(xs, ys, zs, lengths, (0.3, 0.2, 0.6), pole)
        axes.add(start._shape(tuple(xs), tuple(ys), tuple(zs), tuple(lengths), pole).axis)
    assert start._shape(tuple(xs), tuple(ys), tuple(zs), tuple(lengths), None).pole_decides
    assert len(axes) == 6  # each pole its own axis, so each its own kept shape


@pytest.mark.parametrize("n", [2, 3, 10, 20])
def test_batched_evaluation_is_the_single_chain_one(n):
    rng = np.random.default_rng(700 + n)
    count = 64
    across = rng.normal(size=(count, n)) + 1j * rng.normal(size=(count, n))
    c = rng.uniform(-np.pi, np.pi, count)
    offset = rng.normal(size=count)
    f, df = _evaluate_all(_horner_terms(across), c, offset)
    for row in range(count):
        f1, df1 = _evaluate(across[row].tolist(), float(c[row]), float(offset[row]))
        size = float(np.abs(across[row]).sum()) ** 2 * n  # the largest terms summed: rounding is relative to it
        assert abs(f[row] - f1) <= 1e-14 * size
        assert abs(df[row] - df1) <= 1e-14 * size


@pytest.mark.parametrize("n", [2, 3, 7, 15])
def test_batched_curl_finds_the_single_chain_root(n):
    """Chains finish the search at different steps; each keeps the root its own search finds."""
    rng = np.random.default_rng(720 + n)
    count = 80
    across = rng.normal(size=(count, n)) + 1j * rng.normal(size=(count, n))
    across[::4] = across[::4].real + 0j  # straight across the axis: F'(0) = 0
    along = rng.normal(size=(count, n)) * 0.3
    total = np.abs(across).sum(axis=1) + np.abs(along).sum(axis=1)
    r = rng.uniform(0.02, 0.99, count) * total
    r[::5] = np.hypot(np.abs(across[::5].sum(axis=1)), along[::5].sum(axis=1))  # the target already reached
    p = along.sum(axis=1)
    offset, scale = p * p - r * r, total * total
    batch = _curl_angles(across, offset, scale, n)
    for row in range(count):
        single = _curl_angle(across[row].tolist(), float(offset[row]), float(scale[row]), n)
        assert batch[row] == pytest.approx(single, abs=1e-12)


@pytest.mark.parametrize("with_pole", [False, True])
def test_curled_starts_are_the_single_chain_starts(with_pole):
    rng = np.random.default_rng(740 + with_pole)
    for n in (2, 4, 10):
        joints = np.stack([random_chain(rng, n, 3) for _ in range(30)])
        lengths = np.linalg.norm(np.diff(joints, axis=1), axis=2)
        targets = np.stack([reachable_target(rng, j) for j in joints])
        poles = joints[:, 0] + rng.normal(size=(30, 3)) * 2.0 if with_pole else None
        batch = curled_starts(joints, targets, poles, lengths)
        for c in range(len(joints)):
            xs, ys, zs = curled_start(joints[c, :, 0].tolist(), joints[c, :, 1].tolist(), joints[c, :, 2].tolist(),
                                      lengths[c].tolist(), targets[c].tolist(),
                                      None if poles is None else poles[c].tolist())
            np.testing.assert_allclose(batch[c], np.array([xs, ys, zs]).T, atol=1e-9)
