"""Calibration under a fitted model (DESIGN §9.6, issue #41 item 4): `calibrate --parameters mean|integrated:S|
draws:S` against scales bisected here on a brute force (each village's effect by Gauss-Hermite quadrature, the
records by enumeration, a mixture over the draws written out), on a hand-written fit of two villages of two
children."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import expit

from ddpbayes.cli.main import main
from ddpbayes.fitting.write import companions, model_text
from ddpbayes.plausible import calibrate_fitted

CLUSTER_INDEX = np.array([0, 0, 1, 1])
DRAWS = {"intercept": [-0.2, -0.3, -0.4], "sigma": [1.0, 1.5, 0.5]}  # the widest village effect second
MEAN = {k: float(np.mean(v)) for k, v in DRAWS.items()}
EPSILON = 1.0


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> Path:
    """MODEL.py and MODEL.fit.json as `ddpbayes fit` writes them, no covariates."""
    out = tmp_path_factory.mktemp("fitted") / "villages.py"
    doc = {"format": 1, "template": "clustered",
           "parameters": {k: {"mean": MEAN[k], "sd": 0.5, "hdi": [min(v), max(v)]} for k, v in DRAWS.items()},
           "data": {"file": "villages.csv", "rows": 4, "outcome": "pos", "cluster": ["village"], "clusters": 2,
                    "covariates": [], "covariate_mean": [], "covariate_sd": []},
           "table": {"clusters": ["a", "b"], "cluster_index": CLUSTER_INDEX.tolist(), "x": []}, "draws": DRAWS}
    companions(out)[0].write_text(json.dumps(doc))
    out.write_text(model_text(out, doc))
    return out


def record_law(intercept: float, sigma: float, nodes: int = 80) -> np.ndarray:
    """P(Y = y) for y in {0,1}^4 (itertools.product order): villages independent given the
    parameters, each one's effect sigma z, z ~ Normal(0, 1), by Gauss-Hermite (probabilists')."""
    z, w = np.polynomial.hermite_e.hermegauss(nodes)
    w = w / w.sum()
    ys = np.array(list(itertools.product((0, 1), repeat=4)))
    law = np.ones(len(ys))
    for c in (0, 1):
        y = ys[:, CLUSTER_INDEX == c][:, None, :]
        p = expit(intercept + sigma * z)[None, :, None]
        law *= np.prod(np.where(y == 1, p, 1 - p), axis=2) @ w
    return law


def idp_of_first_child(law: np.ndarray, b: float) -> float:
    """idp of y[0] under the count with Laplace(b): the sup over outputs of |log L(y | 1) - log L(y | 0)|,
    on the integer breakpoints and the two tails, L(y | t) = sum_s P(count = s | y[0] = t) e^(-|y - s| / b)."""
    ys = np.array(list(itertools.product((0, 1), repeat=4)))
    s = np.arange(5)
    w = np.array([[law[(ys[:, 0] == t) & (ys.sum(axis=1) == v)].sum() for v in s] for t in (0, 1)])
    w /= w.sum(axis=1, keepdims=True)
    kernels = [np.exp(-np.abs(y - s) / b) for y in s] + [np.exp(s / b), np.exp(-s / b)]
    return max(abs(np.log(w[1] @ k) - np.log(w[0] @ k)) for k in kernels)


def bisected(law: np.ndarray) -> float:
    """The Laplace scale at which the brute-force leakage is epsilon (it falls with the scale)."""
    return brentq(lambda b: idp_of_first_child(law, b) - EPSILON, 0.05, 50.0, xtol=1e-13, rtol=1e-13)


def draw_law(k: int) -> np.ndarray:
    return record_law(DRAWS["intercept"][k], DRAWS["sigma"][k])


def run(fitted: Path, parameters: str):
    return calibrate_fitted(fitted, parameters, "count", "idp", EPSILON, targets=[0])


def test_mean_is_the_scale_of_the_posterior_means(fitted):
    c = run(fitted, "mean")
    assert c.scale == pytest.approx(bisected(record_law(MEAN["intercept"], MEAN["sigma"])), rel=1e-7)
    assert c.found.result.verdict == "pass" and c.found.result.leakage <= EPSILON
    doc = c.to_dict()
    assert doc["parameters"] == "mean" and doc["classic_dp"] == {"scale": 1.0, "epsilon_at_scale": 1 / c.scale}


def test_draws_is_the_largest_of_the_draws_own_scales(fitted):
    """Each draw's leakage falls with the scale, so the class meets epsilon from the largest draw's scale on;
    the widest draw leaks most at classic DP's scale and is solved first, and the two others meet epsilon at its
    scale without being solved."""
    own = [bisected(draw_law(k)) for k in range(3)]
    assert own[1] == max(own) and len(set(np.round(own, 6))) == 3
    c = run(fitted, "draws:3")
    assert c.scale == pytest.approx(max(own), rel=1e-7)
    assert list(c.solved) == [1] and c.solved[1] == pytest.approx(own[1], rel=1e-7)
    p = c.found.plausible
    expected = [idp_of_first_child(draw_law(k), c.scale) for k in range(3)]
    np.testing.assert_allclose(p["leakages"], expected, rtol=0, atol=1e-8)
    assert c.found.result.verdict == "pass" and p["share_meeting_claim"] == 1.0


def test_integrated_is_the_scale_of_the_mixture_over_the_draws(fitted):
    mixture = np.mean([draw_law(k) for k in range(3)], axis=0)
    c = run(fitted, "integrated:3")
    assert c.scale == pytest.approx(bisected(mixture), rel=1e-7)
    assert c.to_dict()["parameters"] == "integrated:3"


def test_the_command_names_the_mode_and_refuses_what_does_not_apply(fitted, capsys):
    code = main(["calibrate", str(fitted), "--query", "count", "--notion", "idp", "--epsilon", "1", "--target", "0",
                 "--parameters", "mean", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["parameters"] == "mean" and doc["verdict"] == "pass"
    for extra in (["--method", "dp"], ["--parameters", "draws:0"]):
        code = main(["calibrate", str(fitted), "--query", "count", "--notion", "idp", "--epsilon", "1", *extra])
        err = capsys.readouterr().err
        assert code == 2 and len(err.strip().splitlines()) == 1
    code = main(["calibrate", "household", "--query", "count", "--notion", "idp", "--epsilon", "1", "--target", "0"])
    assert code == 2 and "ddpbayes fit" in capsys.readouterr().err
