"""`fastexp.exp_parts` against numpy's exponential over its whole range [-708, 0], and a loop of it
read back through `scratch`'s bit view as its callers do (geo/kernels.py, the SMC proposal density)."""

import math

import numba
import numpy as np

from ddpbayes.fastexp import CUT, exp_parts, scratch


@numba.njit
def _exp_loop(x, work, q, bits, scale):
    for i in range(len(x)):
        q[i], bits[i] = exp_parts(x[i])
    out = np.empty(len(x))
    for i in range(len(x)):
        out[i] = q[i] * scale[i]
    return out


def test_exp_parts_is_the_exponential_within_a_few_ulps():
    """Every x in [-600, 0] (random, the ends, the multiples of ln 2 / 2 where the reduction turns, and
    values a hair either side of 0): relative error below 4e-15 (libm's own is about 1e-16); below the
    cut, exactly 0."""
    rng = np.random.default_rng(0)
    turns = -math.log(2) / 2 * np.arange(0, 2043)
    x = np.concatenate([rng.uniform(CUT, 0.0, 200_000), rng.uniform(-1.0, 0.0, 10_000), turns[turns >= CUT],
                        np.nextafter(turns[turns >= CUT], 0.0), [0.0, -0.0, -1e-300, CUT, -5e-324]])
    got = _exp_loop(x, *scratch(len(x)))
    assert np.max(np.abs(got / np.exp(x) - 1.0)) < 4e-15
    below = np.array([np.nextafter(CUT, -np.inf), -700.0, -800.0, -1e6, -np.inf])
    assert np.all(_exp_loop(below, *scratch(len(below))) == 0.0)
