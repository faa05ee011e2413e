"""A linear query's global L1 sensitivity, max_k |w_k| (hi_k - lo_k) (0 where w_k = 0), computed over every tuple
at once (`Linear.global_sensitivity`, DESIGN §1.1): against the definition written here, on random weights with
zeros and domains that share objects, are unbounded or hold one value."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ddpbayes import Finite, Interval
from ddpbayes.queries import parse_query


def _definition(weights: list[float], domains: list) -> float:
    widths = [d.values[-1] - d.values[0] if isinstance(d, Finite) else d.hi - d.lo for d in domains]
    return max(0.0 if w == 0 else abs(w) * width for w, width in zip(weights, widths))


@pytest.mark.parametrize("seed", range(5))
def test_global_sensitivity_is_the_definition(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    pool = [Finite([0, 1]), Finite([-2, 0.5, 3]), Finite([4]), Interval(-1.0, 2.5)]
    domains = [pool[j] for j in rng.integers(len(pool), size=n)]
    weights = [float(w) if rng.random() > 0.3 else 0.0 for w in rng.normal(size=n).round(3)]
    query = parse_query("linear:" + ",".join(repr(w) for w in weights))
    assert query.global_sensitivity(domains) == _definition(weights, domains)
    assert parse_query("sum").global_sensitivity(domains) == _definition([1.0] * n, domains)
    assert parse_query("mean").global_sensitivity(domains) == _definition([1.0 / n] * n, domains)


def test_an_unbounded_domain_under_a_zero_weight_does_not_count():
    domains = [Finite([0, 1]), Interval(0.0, math.inf)]
    assert parse_query("linear:2,0").global_sensitivity(domains) == 2.0
    assert parse_query("linear:2,1").global_sensitivity(domains) == math.inf
