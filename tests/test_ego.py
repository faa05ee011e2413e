"""Ego-network sub-models (geo/ego.py) and the sample audit beside the CAR (attack/audit_near.py):
the CAR conditional against dense Gaussian conditioning of the full precision, the near model's
log-density against its conditionals evaluated in numpy, the exact CAR leakage against the
regression-coefficient formula written here, and one small end-to-end audit (DESIGN §7.1)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ddpbayes.attack.audit_near import audit_sample, ego_query, summary
from ddpbayes.attack.release import partition
from ddpbayes.attack.run import AttackData
from ddpbayes.geo.regions import region
from ddpbayes.auditing import audit
from ddpbayes.errors import InputError
from ddpbayes.geo.car import CarFit
from ddpbayes.geo.data import US_BOX
from ddpbayes.geo.ego import car_conditional, car_submodel, ego_members, friends_of, near_submodel, sample_users
from ddpbayes.geo.near import NearFit, conditional_logpdf, plane_km
from ddpbayes.mechanisms import Laplace
from ddpbayes.notions import IDP

FIT = CarFit(box=US_BOX, mu=(0.5, 0.4), alpha=0.9, alpha_interval=(0.8, 0.95), tau=(5.0, 9.0), draws=10, chains=2,
             seed=1, rhat_max=1.0, ess_bulk_min=400.0, seconds=1.0)
NEAR = NearFit(US_BOX, 39.17, (0.733, 0.267), (212.7,))
# 8 users: user 0 has friends 1 and 2 (friends of each other), 2 has an outside friend 3; 4-5-6 a chain; 7 alone
PAIRS = np.array([[0, 1], [0, 2], [1, 2], [2, 3], [4, 5], [5, 6], [3, 4]])


def _points(n: int = 8, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.2, 0.8, size=(n, 2))


def _dense_precision(n: int, tau: float, alpha: float) -> np.ndarray:
    w = np.zeros((n, n))
    w[PAIRS[:, 0], PAIRS[:, 1]] = w[PAIRS[:, 1], PAIRS[:, 0]] = 1
    d = w.sum(axis=1)
    return tau * (np.diag(np.where(d > 0, d, 1.0)) - alpha * w)


def test_car_conditional_is_dense_gaussian_conditioning():
    points, members = _points(), np.array([0, 1, 2])
    mean, precision = car_conditional(points, PAIRS, FIT, members)
    known = np.array([3, 4, 5, 6, 7])
    for a in range(2):
        sigma = np.linalg.inv(_dense_precision(8, FIT.tau[a], FIT.alpha))
        s_ek, s_kk = sigma[np.ix_(members, known)], sigma[np.ix_(known, known)]
        want_mean = FIT.mu[a] + s_ek @ np.linalg.solve(s_kk, points[known, a] - FIT.mu[a])
        want_cov = sigma[np.ix_(members, members)] - s_ek @ np.linalg.solve(s_kk, s_ek.T)
        block = slice(3 * a, 3 * a + 3)
        np.testing.assert_allclose(mean[block], want_mean, rtol=1e-10)
        np.testing.assert_allclose(np.linalg.inv(precision[block, block]), want_cov, rtol=1e-10)
    assert np.all(precision[:3, 3:] == 0)  # independent fields
    model = car_submodel(points, PAIRS, FIT, members)
    x = np.random.default_rng(0).random(6)
    logp = model.model.compile_logp()({"pos": x})
    r = x - mean
    want = -0.5 * r @ precision @ r - 3 * math.log(2 * math.pi) + 0.5 * np.linalg.slogdet(precision)[1]
    assert logp == pytest.approx(want, rel=1e-9)


def test_near_submodel_logp_is_its_conditionals():
    rng = np.random.default_rng(7)
    n = 40
    lat, lon = rng.uniform(30, 45, n), rng.uniform(-120, -75, n)
    km = plane_km(lat, lon, US_BOX)
    pairs = np.array([[0, 1], [0, 2], [1, 2], [2, 3], [2, 9], [5, 6]])
    friends = friends_of(pairs, n)
    members = ego_members(friends, 0)
    assert members.tolist() == [0, 1, 2]
    model = near_submodel(km, friends, NEAR, members)
    logp = model.model.compile_logp()
    others = km[3:]
    # the box's normalised units to km: affine, Jacobian = area of the unit square's image
    corner = plane_km(*US_BOX.denormalise(np.array([0.0, 1.0]), np.array([0.0, 1.0])), US_BOX)
    log_jacobian = math.log(abs(np.prod(corner[1] - corner[0])))
    h2 = NEAR.bandwidth_km ** 2
    for _ in range(5):
        u = rng.uniform(0, 1, size=(3, 2))
        x = plane_km(*US_BOX.denormalise(u[:, 0], u[:, 1]), US_BOX)
        d2 = ((x[0] - others) ** 2).sum(axis=1)
        log_pop = math.log(np.mean(np.exp(-d2 / (2 * h2)) / (2 * math.pi * h2)))  # the KDE, written here
        want = log_pop + 3 * log_jacobian
        want += conditional_logpdf(x[1:2], others, x[:1], NEAR)[0]  # friend 1: the target only (2 is in the ego)
        want += conditional_logpdf(x[2:3], others, np.vstack([x[:1], km[[3, 9]]]), NEAR)[0]  # 2: target, 3, 9
        assert logp({"pos": np.concatenate([u[:, 0], u[:, 1]])}) == pytest.approx(want, rel=1e-9, abs=1e-9)


def test_exact_car_leakage_is_the_regression_formula():
    points, members = _points(), np.array([0, 1, 2])
    labels = np.array([0, 0, 1, 1, 1, 0, 1, 0])  # members: clusters 0, 0, 1
    part = partition(points, labels, 2)
    query, rows = ego_query(part, members)
    assert rows == [(0, 0), (0, 1), (1, 0), (1, 1)]
    n0, n1 = 4, 4
    a_field = np.array([[1 / n0, 1 / n0, 0], [0, 0, 1 / n1]])  # cluster rows over one field's members
    b = 2 / 4  # Δ = 2 / min n_c at ε = 1
    result = audit(car_submodel(points, PAIRS, FIT, members), query, Laplace(b), IDP, targets=[0, 3],
                   information=None, engine="gaussian")
    known = [3, 4, 5, 6, 7]
    for a, target in ((0, 0), (1, 3)):
        sigma = np.linalg.inv(_dense_precision(8, FIT.tau[a], FIT.alpha))
        s_ek, s_kk = sigma[np.ix_(members, known)], sigma[np.ix_(known, known)]
        c = sigma[np.ix_(members, members)] - s_ek @ np.linalg.solve(s_kk, s_ek.T)
        beta = c[:, 0] / c[0, 0]  # the members' regression on the target, given the known users
        want = (1.0 - 0.0) * np.abs(a_field @ beta).sum() / b  # (hi - lo) |coefficient| / b over the rows
        assert result.per_target[target] == pytest.approx(want, rel=1e-9)


def test_sample_users_rule():
    friends = friends_of(PAIRS, 8)
    chosen = sample_users(friends, 3, seed=1)
    eligible = [u for u in range(8) if 1 <= len(friends[u]) <= 4]
    assert all(1 <= len(friends[u]) <= 4 for u in chosen) and len(set(chosen.tolist())) == 3
    assert chosen.tolist() == sample_users(friends, 3, seed=1).tolist()
    (first,) = sample_users(friends, 1, seed=1)  # the report's user: one draw of stream [seed, 30]
    assert first == np.random.default_rng([1, 30]).choice(eligible, size=1)[0]
    for count in range(1, len(eligible) + 1):  # every larger sample keeps her, and is sorted
        larger = sample_users(friends, count, seed=1)
        assert first in larger and larger.tolist() == sorted(set(larger.tolist())) and len(larger) == count
    with pytest.raises(InputError):
        sample_users(friends, 8, seed=1)  # user 7 has no friend


@pytest.mark.slow  # ~100 CPU s since the near model's events go to SMC (two modes): the default run's budget
def test_audit_sample_end_to_end_one_friend_user():
    rng = np.random.default_rng(11)
    n = 30
    lat, lon = rng.uniform(30, 45, n), rng.uniform(-120, -75, n)
    x, y = US_BOX.normalise(lat, lon)
    points = np.column_stack([x, y])
    pairs = np.array([[0, 1], [2, 3]])  # users 0 to 3 have one friend each
    data = AttackData(lat, lon, points, pairs, 0, 0, FIT, NEAR, region("us", US_BOX))
    part = partition(points, np.arange(n) % 3, 3)
    rows = audit_sample(data, part, NEAR, users=1, seed=0, draws=100, tune=100)
    (row,) = rows
    assert row["degree"] == 1 and row["car_engine"] == "gaussian"
    for name in ("x", "y"):
        near = row[f"near_{name}"]
        assert 0 <= near["lower"] <= near["estimate"] <= near["upper"]
        # m = 2, truncated sums only: each population sum λ, the friend (no known friend of her own) λ for the
        # target's normaliser; the leakage moves by twice the width
        assert near["density_error"] == pytest.approx(2 * 3 * math.log1p(1e-9))
        assert near["engine"] == "sampling" and near["verdict"] in ("pass", "fail", "inconclusive")
        assert near["verdict"] != "pass"  # the near model's score is unbounded: no bound over the domain
        assert row[f"car_{name}"] > 0
    s = summary(rows, 1, 0, 100, 100, 2)
    assert s["users"] == [row["id"]] and row["seconds"] >= near["seconds"]
    # the report shows the rows as audit_sample writes them: both coordinates, the CAR's exact value beside
    from ddpbayes.reports.render.attack_dependence import sections
    from ddpbayes.reports.render.document import Document, render_markdown

    view = {"near_fit": {"weights": list(NEAR.weights), "sigma_km": list(NEAR.sigma_km),
                         "bandwidth_km": NEAR.bandwidth_km, "diagnostics": {}},
            "audit": {"rows": rows, "summary": s}}
    table = sections(view)[1].blocks[1]
    assert [r[3] for r in table.rows] == ["x", "y"] and table.rows[0][0] == str(row["id"])
    assert "near-friend model audited" in render_markdown(Document("t", [], sections(view)))
