"""NumericalSVT (Wang et al. 2019; `mechanisms/numerical_svt.py`): its law against sampling, and its finite output
space against random outputs (no output outside it has a larger ratio of two mixtures)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from ddpbayes.mechanisms import make_mechanism
from ddpbayes.model.domains import Finite
from ddpbayes.queries import parse_query


def mechanism(k: int, cutoff: int = 1, eps: float = 1.0):
    return make_mechanism("numerical_sparse_vector", parse_query("identity"), [Finite([0, 1, 2])] * k, epsilon=eps,
                          params={"cutoff": str(cutoff), "sensitivity": "1", "threshold": "1"})


def test_pattern_law_and_values_against_sampling():
    mech = mechanism(3, cutoff=2)
    a = np.array([[2.0, 0.0, 1.0]])
    draws = mech.sample(np.repeat(a, 200_000, axis=0), np.random.default_rng(0))
    patterns, counts = np.unique(draws[:, :3], axis=0, return_counts=True)
    # a pattern's probability: the density at values z = a on its TRUE queries over the Laplace kernel's peak there
    kernel = 1 / (2 * mech.value_scale)
    for p, c in zip(patterns, counts):
        z = np.where(p == 1, a[0], 0.0)
        prob = np.exp(mech.log_prob(np.concatenate([p, z])[None], a))[0, 0] / kernel ** (p == 1).sum()
        sigma = np.sqrt(prob * (1 - prob) / 200_000)
        assert abs(c / 200_000 - prob) < 5 * sigma + 1e-12
    true = draws[:, 0] == 1  # the first query's released value: a_0 + Lap(3cs)
    assert stats.kstest(draws[true, 3] - a[0, 0], "laplace", args=(0, mech.value_scale)).pvalue > 1e-4


@pytest.mark.parametrize("seed", range(4))
def test_no_output_beats_the_output_space(seed):
    """For random mixtures over random answer vectors, the largest log-ratio over `output_space` is at least
    that over 20,000 random outputs (random reachable patterns, values anywhere): the sup is on the grid."""
    rng = np.random.default_rng(seed)
    mech = mechanism(3, cutoff=1)
    answers = rng.integers(0, 3, size=(4, 3)).astype(float)
    log_w = np.log(rng.dirichlet(np.ones(4), size=2))
    space = mech.output_space(answers)
    patterns = np.unique(space[:, :3], axis=0)
    random = patterns[rng.integers(len(patterns), size=20_000)]
    values = np.where(random == 1, rng.uniform(-15, 18, size=random.shape), 0.0)
    pick = rng.uniform(size=values.shape) < 0.1  # some values on the answers themselves
    values = np.where(pick & (random == 1), answers[rng.integers(4, size=len(random))], values)

    def sup(outputs):
        ll = logsumexp(log_w[:, None, :] + mech.log_prob(outputs, answers)[None], axis=2)
        return float(np.max(ll.max(axis=0) - ll.min(axis=0)))

    assert sup(space) >= sup(np.concatenate([random, values], axis=1)) - 1e-12


def test_private_at_its_epsilon_on_dp_sniper_pairs():
    """Wang et al. 2019: ε-DP. On DP-Sniper's pairs (a = 1^K vs one answer moved by one) the exact ratio stays
    within ε."""
    mech = mechanism(4, cutoff=2, eps=0.5)
    ones = np.ones(4)
    for other in (np.array([0.0, 1, 1, 1]), np.array([2.0, 1, 1, 1])):
        answers = np.stack([ones, other])
        lp = mech.log_prob(mech.output_space(answers), answers)
        finite = np.isfinite(lp).all(axis=1)
        assert np.max(np.abs(lp[finite, 0] - lp[finite, 1])) <= 0.5 + 1e-9
