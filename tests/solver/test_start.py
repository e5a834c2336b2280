"""The curled start's curl search (solver/start.py): the kept Horner terms change nothing."""

import math
import random

from fabrik_addon.solver import start


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
        along, across, p, horner = shape[9], shape[10], shape[11], shape[12]
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
        axes.add(start._shape(tuple(xs), tuple(ys), tuple(zs), tuple(lengths), pole)[:3])
    assert start._shape(tuple(xs), tuple(ys), tuple(zs), tuple(lengths), None)[13]
    assert len(axes) == 6  # each pole its own axis, so each its own kept shape
