"""Auditing under a fitted model (DESIGN §9.6, issue #41 item 3): --parameters mean, integrated:S
and draws:S against a brute force written here (each cluster's effect by Gauss-Hermite
quadrature, the records by enumeration, the draws' parameters averaged explicitly), on a small
hand-written fit in the `.fit.json` format `fitting/fitted.py` reads."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from scipy.special import expit

from ddpbayes.cli.main import main
from ddpbayes.cli.text import fitted_audit_text
from ddpbayes.errors import InputError
from ddpbayes.fitting.write import companions, model_text
from ddpbayes.plausible import Parameters, audit_fitted, parse_parameters
from ddpbayes.queries import parse_query

ROOT = Path(__file__).resolve().parent.parent
CLUSTER_INDEX = np.array([0, 0, 0, 1, 1, 1])  # two clusters of three rows: today's structured engine integrates them
X = np.array([[-1.0], [0.0], [1.0], [0.5], [-0.5], [1.5]])  # one standardised covariate
DRAWS = 12
THINNED_3 = [0, 6, 11]  # rint(linspace(0, 11, 3)): 5.5 rounds to the even 6
B = 1.0  # Laplace scale of the count


def posterior_draws() -> dict[str, list[float]]:
    """Twelve draws of (intercept, beta, sigma), spread as a posterior's would be."""
    k = np.arange(DRAWS)
    return {"intercept": (-0.4 + 0.3 * np.sin(k)).tolist(), "beta_age": (0.5 + 0.2 * np.cos(k)).tolist(),
            "sigma": (0.6 + 0.1 * k).tolist()}


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> Path:
    """MODEL.py and MODEL.fit.json as `ddpbayes fit` writes them (the model file from its template)."""
    out = tmp_path_factory.mktemp("fitted") / "villages.py"
    draws = posterior_draws()
    doc = {"format": 1, "template": "clustered",
           "parameters": {k: {"mean": float(np.mean(v)), "sd": float(np.std(v, ddof=1)), "hdi": [min(v), max(v)]}
                          for k, v in draws.items()},
           "data": {"file": "villages.csv", "rows": 6, "outcome": "pos", "cluster": ["village"], "clusters": 2,
                    "covariates": ["age"], "covariate_mean": [0.0], "covariate_sd": [1.0]},
           "table": {"clusters": ["a", "b"], "cluster_index": CLUSTER_INDEX.tolist(), "x": X.ravel().tolist()},
           "draws": draws}
    companions(out)[0].write_text(json.dumps(doc))
    out.write_text(model_text(out, doc))
    return out


def record_law(intercept: float, beta: float, sigma: float, nodes: int = 80) -> np.ndarray:
    """P(Y = y) for each y in {0,1}^6 (itertools.product order): the clusters are independent given
    the parameters; each one's effect u = sigma z, z ~ Normal(0, 1), by Gauss-Hermite (probabilists')."""
    z, w = np.polynomial.hermite_e.hermegauss(nodes)
    w = w / w.sum()
    ys = np.array(list(itertools.product((0, 1), repeat=len(CLUSTER_INDEX))))
    law = np.ones(len(ys))
    for c in (0, 1):
        rows = np.flatnonzero(CLUSTER_INDEX == c)
        p = expit(intercept + X[rows, 0] * beta + sigma * z[:, None])  # (nodes, rows)
        y = ys[:, rows][:, None, :]
        law *= np.prod(np.where(y == 1, p, 1 - p), axis=2) @ w
    return law


def idp_of_first_record(law: np.ndarray) -> float:
    """idp of y[0] under a Laplace(B) count: sup over y of |log L(y | 1) - log L(y | 0)|, on the
    integer breakpoints and the two tails (DESIGN §2.1), L(y | t) = sum_s P(s | t) e^(-|y - s| / B)."""
    ys = np.array(list(itertools.product((0, 1), repeat=len(CLUSTER_INDEX))))
    counts = ys.sum(axis=1)
    s = np.arange(len(CLUSTER_INDEX) + 1)
    w = np.array([[law[(ys[:, 0] == t) & (counts == v)].sum() for v in s] for t in (0, 1)])
    w /= w.sum(axis=1, keepdims=True)
    kernels = [np.exp(-np.abs(y - s) / B) for y in s] + [np.exp(s / B), np.exp(-s / B)]
    return max(abs(np.log(w[1] @ k) - np.log(w[0] @ k)) for k in kernels)


def brute_force_draw(k: int) -> float:
    d = posterior_draws()
    return idp_of_first_record(record_law(d["intercept"][k], d["beta_age"][k], d["sigma"][k]))


def audit_args(parameters: str, **kw):
    return dict(parameters=parameters, query="count", mechanism="laplace", notion="idp", scale=B, targets=[0],
                information=None) | kw


@pytest.fixture(scope="module")
def plausible(fitted):
    """draws:3 with a claim between the draws' leakages."""
    claim = float(np.median([brute_force_draw(k) for k in THINNED_3]))
    return audit_fitted(fitted, **audit_args("draws:3", claim=claim))


def test_each_plausible_model_leaks_what_the_brute_force_gives(plausible):
    expected = [brute_force_draw(k) for k in THINNED_3]
    p = plausible.plausible
    assert p["posterior_draws"] == THINNED_3 and p["draws"] == 3
    np.testing.assert_allclose(p["leakages"], expected, rtol=0, atol=1e-8)
    assert p["median"] == pytest.approx(np.median(expected), abs=1e-8)
    assert p["p95"] == pytest.approx(np.percentile(expected, 95), abs=1e-8)
    assert p["max"] == pytest.approx(max(expected), abs=1e-8)
    assert plausible.result.leakage == pytest.approx(max(expected), abs=1e-8)


def test_the_class_meets_the_claim_only_when_every_draw_does(plausible):
    """The claim is the median of three distinct leakages: two of three draws meet it, so the class fails."""
    p, r = plausible.plausible, plausible.result
    assert p["share_meeting_claim"] == pytest.approx(2 / 3)
    assert r.verdict == "fail" and "for 67% of plausible models (2 of 3 posterior draws)" in r.verdict_reason
    doc = plausible.to_dict()
    assert doc["parameters"] == "draws:3" and doc["plausible"]["max"] == p["max"]
    text = fitted_audit_text(plausible)
    assert text.startswith("parameters draws:3") and "meets epsilon" in text


def test_integrated_equals_the_average_over_the_draws(fitted):
    """The Bayesian adversary's law of the records is the average of the three draws' laws."""
    d = posterior_draws()
    law = np.mean([record_law(d["intercept"][k], d["beta_age"][k], d["sigma"][k]) for k in THINNED_3], axis=0)
    found = audit_fitted(fitted, **audit_args("integrated:3"))
    assert found.result.leakage == pytest.approx(idp_of_first_record(law), abs=1e-8)
    assert found.to_dict()["parameters"] == "integrated:3"
    assert any("integrated over 3 posterior draws" in n for n in found.result.notes)


@pytest.mark.slow  # two audits of the mean model through the command line, ~6 s on a loaded machine
def test_mean_is_the_posterior_means_and_the_same_seed_gives_the_same_json(fitted, capsys):
    d = posterior_draws()
    expected = idp_of_first_record(record_law(*(float(np.mean(d[k])) for k in ("intercept", "beta_age", "sigma"))))
    argv = ["audit", str(fitted), "--query", "count", "--mechanism", "laplace", "--scale", str(B), "--notion", "idp",
            "--target", "0", "--seed", "3", "--format", "json"]
    docs = []
    for _ in range(2):
        assert main(argv) == 0
        docs.append(json.loads(capsys.readouterr().out))
        docs[-1].pop("seconds")
    assert docs[0] == docs[1]
    assert docs[0]["parameters"] == "mean" and docs[0]["leakage"] == pytest.approx(expected, abs=1e-8)


@pytest.mark.parametrize("text, parsed", [("mean", Parameters("mean")), ("draw:0", Parameters("draw", 0)),
                                          ("integrated", Parameters("integrated", 200)),
                                          ("draws", Parameters("draws", 200)), ("draws:50", Parameters("draws", 50))])
def test_parameters_are_read(text, parsed):
    assert parse_parameters(text) == parsed


@pytest.mark.parametrize("text", ["median", "mean:3", "draw", "draw:x", "draws:0", "draws:-2", "draws:x", "integrated:"])
def test_a_bad_parameters_value_is_refused(text):
    with pytest.raises(InputError, match="--parameters takes mean"):
        parse_parameters(text)


def cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(["audit", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("case", ["not fitted", "too many draws", "with -p", "other -p", "draw out of range", "bad mode"])
def test_bad_input_is_one_line_exit_2(case, fitted, capsys):
    model, extra, message = {
        "not fitted": (str(ROOT / "models" / "household.py"), ["--parameters", "mean"], "is not one"),
        "too many draws": (str(fitted), ["--parameters", "draws:13"], "asks for 13 posterior draws; the fit has 12"),
        "with -p": (str(fitted), ["--parameters", "mean", "-p", "parameters='mean'"], "not both"),
        "other -p": (str(fitted), ["-p", "n=3"], "takes one parameter"),
        "draw out of range": (str(fitted), ["--parameters", "draw:12"], "K from 0 to 11"),
        "bad mode": (str(fitted), ["--parameters", "all"], "takes mean, draw:K"),
    }[case]
    code, out, err = cli(capsys, model, "--query", "count", "--mechanism", "laplace", "--scale", "1", "--notion", "idp",
                         *extra)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ") and message in err, err


@pytest.mark.parametrize("verdicts, expected", [([None, None], None), (["pass", "pass"], "pass"),
                                                (["pass", "fail", "inconclusive"], "fail"),
                                                (["pass", "inconclusive"], "inconclusive")])
def test_the_class_verdict_needs_every_plausible_model(verdicts, expected):
    from ddpbayes.plausible.audit import class_verdict

    assert class_verdict(verdicts) == expected


def test_draws_are_thinned_evenly_with_the_first_and_the_last():
    from ddpbayes.fitting.posterior import thinned

    assert thinned(1000, 5).tolist() == [0, 250, 500, 749, 999]  # 249.75 and 749.25 round to the nearest draw
    assert thinned(4, 4).tolist() == [0, 1, 2, 3]
    with pytest.raises(InputError, match="asks for 5 posterior draws; the fit has 4"):
        thinned(4, 5)


@pytest.mark.parametrize("mode, says", [("mean", "parameters mean    the posterior means"),
                                        ("draw:4", "parameters draw:4    one posterior draw"),
                                        ("integrated:3", "parameters integrated:3    integrated over 3 posterior draws")])
def test_the_text_names_how_the_parameters_were_set(plausible, mode, says):
    from ddpbayes.plausible import FittedAudit

    assert fitted_audit_text(FittedAudit(parse_parameters(mode), plausible.result)).startswith(says)


def idp_of_record(law: np.ndarray, weights: np.ndarray, target: int) -> float:
    """idp of y[target] under a Laplace(B) release of weights . y, as `idp_of_first_record` does for the count."""
    ys = np.array(list(itertools.product((0, 1), repeat=len(CLUSTER_INDEX))))
    answers, s = ys @ weights, np.arange(weights.sum() + 1)
    w = np.array([[law[(ys[:, target] == t) & (answers == v)].sum() for v in s] for t in (0, 1)])
    w /= w.sum(axis=1, keepdims=True)
    kernels = [np.exp(-np.abs(y - s) / B) for y in s] + [np.exp(s / B), np.exp(-s / B)]
    return max(abs(np.log(w[1] @ k) - np.log(w[0] @ k)) for k in kernels)


@pytest.fixture(scope="module")
def every_draw(fitted):
    """draws:12, every draw after the first by the per-cluster factors (`plausible.clusters`)."""
    return audit_fitted(fitted, **audit_args("draws:12"))


def test_per_cluster_draws_equal_a_fresh_audit_of_each_draw_and_the_brute_force(fitted, every_draw):
    """Each draw's leakage from the per-cluster factors is the structured engine's on build(parameters="draw:K"),
    audited afresh in its own model (no table shared), to 1e-12; and the brute force's to 1e-10."""
    from ddpbayes.auditing import audit
    from ddpbayes.model.loading import load_model

    found = every_draw.plausible["leakages"]
    for k in (6, 11):  # draw 0 is the engine's own audit in draws:S
        fresh = audit(load_model(fitted, {"parameters": f"draw:{k}"}), "count", "laplace", "idp", scale=B, targets=[0],
                      information=None, progress=False)
        assert fresh.engine == "structured" and abs(found[k] - fresh.leakage) <= 1e-12
    np.testing.assert_allclose(found, [brute_force_draw(k) for k in range(DRAWS)], rtol=0, atol=1e-10)
    assert every_draw.result.leakage == max(found) and every_draw.result.witness is not None


def test_per_cluster_factors_read_weights_and_any_target(fitted):
    """A release of some rows only (weight 0 elsewhere) and a target in the second cluster, all 12 draws at once,
    against the brute force with those weights."""
    from ddpbayes.fitting.fitted import read_fit
    from ddpbayes.fitting.posterior import read_draws
    from ddpbayes.mechanisms import Laplace
    from ddpbayes.engines.structured.clusters import ClusterRelease, draws_leakages

    fit = companions(fitted)[0]
    weights = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    release = ClusterRelease(weights, Laplace(B), [4, 0], 1 << 25)
    values, nodes = draws_leakages(read_fit(fit), read_draws(fit, DRAWS), release)
    d = posterior_draws()
    laws = [record_law(d["intercept"][k], d["beta_age"][k], d["sigma"][k]) for k in range(DRAWS)]
    expected = [[idp_of_record(law, weights.astype(int), t) for t in (4, 0)] for law in laws]
    np.testing.assert_allclose(values, expected, rtol=0, atol=1e-10)
    assert set(nodes) <= {32, 64, 128, 256}


def test_draws_below_the_guard_are_left_to_the_engine(fitted, every_draw, monkeypatch):
    """With every coefficient below the guard, every draw is audited by the engine: the same leakages."""
    from ddpbayes.engines.structured import clusters

    monkeypatch.setattr(clusters, "GUARD", 2.0)
    by_engine = audit_fitted(fitted, **audit_args("draws:2"))
    expected = [every_draw.plausible["leakages"][k] for k in (0, 11)]
    np.testing.assert_allclose(by_engine.plausible["leakages"], expected, rtol=0, atol=1e-12)


def pdp_of_first_record(law: np.ndarray, known: list[int]) -> float:
    """pdp of y[0] knowing the records `known` under a Laplace(B) count: the max over x_K of idp's sup with every
    law conditioned on x_K (DESIGN §1)."""
    ys = np.array(list(itertools.product((0, 1), repeat=len(CLUSTER_INDEX))))
    counts = ys.sum(axis=1)
    s = np.arange(len(CLUSTER_INDEX) + 1)
    kernels = [np.exp(-np.abs(y - s) / B) for y in s] + [np.exp(s / B), np.exp(-s / B)]
    best = 0.0
    for x_k in itertools.product((0, 1), repeat=len(known)):
        given = np.all(ys[:, known] == x_k, axis=1)
        w = np.array([[law[given & (ys[:, 0] == t) & (counts == v)].sum() for v in s] for t in (0, 1)])
        w /= w.sum(axis=1, keepdims=True)
        best = max(best, *(abs(np.log(w[1] @ k) - np.log(w[0] @ k)) for k in kernels))
    return best


@pytest.mark.parametrize("known", [[1], [1, 2]])
def test_pdp_draws_by_per_cluster_factors_equal_the_brute_force(fitted, known):
    """draws:3, pdp of y[0] knowing some of its cluster (row 1: row 2 unknown; rows 1 and 2, other covariates: 4
    configurations, the count then leaking as classic DP's 1/b): the per-cluster factors give each draw's leakage,
    equal to the brute force's max over x_K, and so does the audit."""
    from ddpbayes.engines.structured.clusters import plausible_leakages
    from ddpbayes.fitting.fitted import read_fit
    from ddpbayes.fitting.posterior import read_draws
    from ddpbayes.problem import Adversary

    d = posterior_draws()
    expected = [pdp_of_first_record(record_law(d["intercept"][k], d["beta_age"][k], d["sigma"][k]), known)
                for k in THINNED_3]
    found = audit_fitted(fitted, **audit_args("draws:3", notion="pdp", known=known))
    np.testing.assert_allclose(found.plausible["leakages"], expected, rtol=0, atol=1e-8)
    fit = companions(fitted)[0]
    problem = found.result.problem.with_adversaries([Adversary(0, frozenset(known))])
    fast = plausible_leakages(problem, read_fit(fit), read_draws(fit, 3), [0])
    np.testing.assert_allclose(fast[:, 0], expected, rtol=0, atol=1e-8)


@pytest.fixture(scope="module")
def integrated_all(fitted):
    """integrated:12 (every draw) of y[0], and the brute force's explicit mixture of the 12 draws' laws."""
    d = posterior_draws()
    law = np.mean([record_law(d["intercept"][k], d["beta_age"][k], d["sigma"][k]) for k in range(DRAWS)], axis=0)
    return audit_fitted(fitted, **audit_args("integrated:12")), law


def test_integrated_by_per_cluster_factors_equals_the_brute_force_mixture(fitted, integrated_all):
    """integrated:12 (every draw) and a release of some rows with a target in the second cluster: the
    brute force's explicit mixture of the 12 draws' laws (quadrature per cluster, records enumerated)."""
    from ddpbayes.fitting.fitted import read_fit
    from ddpbayes.fitting.posterior import read_draws
    from ddpbayes.engines.structured.clusters import integrated_leakages

    found, law = integrated_all
    assert found.result.leakage == pytest.approx(idp_of_first_record(law), abs=1e-8)
    assert found.result.engine == "structured" and "per-cluster factors" in found.result.notes[0]
    problem = found.result.problem
    weights = np.array([1, 0, 1, 1, 0, 1])
    problem = dataclasses.replace(problem, query=parse_query("linear:" + ",".join(map(str, weights))).bind(problem.model))
    fit = companions(fitted)[0]
    leaks, _, _ = integrated_leakages(problem, read_fit(fit), read_draws(fit, DRAWS), [4, 0])
    np.testing.assert_allclose([a.value for a in leaks], [idp_of_record(law, weights, t) for t in (4, 0)], rtol=0,
                               atol=1e-8)
    assert leaks[0].witness.adversary.target == 4 and {leaks[0].witness.t, leaks[0].witness.t_prime} == {0.0, 1.0}


def test_integrated_witness_attains_its_leakage_under_the_brute_force(integrated_all):
    """The witness the per-cluster path prints, (t, t', y): log L(y | t) − log L(y | t') under the brute force's
    mixture, L(y | t) = Σ_s P(count = s | y[0] = t) e^(−|y − s| / B) (a y beyond every count: the tail's
    kernel e^(±s / B)), is the reported leakage."""
    found, law = integrated_all
    w = found.result.witness
    assert w.adversary.target == 0 and w.known_values == {} and w.t != w.t_prime and len(w.y) == 1
    ys = np.array(list(itertools.product((0, 1), repeat=len(CLUSTER_INDEX))))
    counts = ys.sum(axis=1)
    s = np.arange(len(CLUSTER_INDEX) + 1)

    def log_l(t: float) -> float:
        given = np.array([law[(ys[:, 0] == t) & (counts == v)].sum() for v in s]) / law[ys[:, 0] == t].sum()
        y = w.y[0]
        kernel = np.exp(np.sign(y) * s / B) if np.isinf(y) else np.exp(-np.abs(y - s) / B)
        return float(np.log(given @ kernel))

    assert log_l(w.t) - log_l(w.t_prime) == pytest.approx(found.result.leakage, abs=1e-9)
    assert found.result.leakage == pytest.approx(idp_of_first_record(law), abs=1e-8)


def test_integrated_by_per_cluster_factors_equals_the_engine_on_the_draw_index_model(fitted):
    """The structured engine on `integrated_model` (the latent draw index J in its cliques) gives the same."""
    from ddpbayes.auditing import audit
    from ddpbayes.fitting.posterior import integrated_model

    fast = audit_fitted(fitted, **audit_args("integrated:3")).result
    engine = audit(integrated_model(companions(fitted)[0], 3), "count", "laplace", "idp", scale=B, targets=[0],
                   information=None, engine="structured", progress=False)
    assert abs(fast.leakage - engine.leakage) <= 1e-10
    assert fast.witness.t == engine.witness.t and fast.witness.y == engine.witness.y


@pytest.mark.slow  # three engine audits of the edited draws: ~6 s on a loaded machine
def test_a_model_file_that_is_not_the_fits_template_is_audited_draw_by_draw(fitted, tmp_path):
    """An edited model file (twice the fitted sigma): the per-cluster factors disagree with its first draw's audit,
    so every draw is audited from the file, as a fresh audit of that file's draw gives."""
    from ddpbayes.auditing import audit
    from ddpbayes.model.loading import load_model

    edited = tmp_path / "edited.py"
    companions(edited)[0].write_text(companions(fitted)[0].read_text())
    text = fitted.read_text().replace("villages.fit.json", "edited.fit.json")
    edited.write_text(text.replace("fit.sigma", "2.0 * fit.sigma"))
    found = audit_fitted(edited, **audit_args("draws:2")).plausible["leakages"]
    fresh = audit(load_model(edited, {"parameters": "draw:11"}), "count", "laplace", "idp", scale=B, targets=[0],
                  information=None, progress=False).leakage
    assert found[1] == fresh and abs(found[1] - brute_force_draw(11)) > 1e-3
