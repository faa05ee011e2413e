"""The clustered template's spatial Gaussian process (`--coords X,Y`, DESIGN §9.8, issue #41 item 1):
its prior and Moran's I against hand computations, bad input as one line (exit 2, nothing
written), the model file's fixed field under `mean`, `draws:S` and `integrated:S` against a brute
force written here, and (slow) parameter recovery over seeds and the spatial check's verdicts."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit, log_expit

from ddpbayes.cli.main import main
from ddpbayes.fitting.spatial import length_scale_prior, morans_i, neighbour_weights
from ddpbayes.fitting.write import companions, model_text
from ddpbayes.plausible import audit_fitted


def test_the_length_scale_prior_puts_2_5_percent_beyond_the_distances_the_data_can_see():
    """Places (0,0), (1,0), (3,0), (3,4): nearest-neighbour distances 1, 1, 2, 4 (median 1.5), largest 5."""
    mu, s = length_scale_prior(np.array([[0.0, 0.0], [1.0, 0.0], [3.0, 0.0], [3.0, 4.0]]))
    assert stats.lognorm.cdf(1.5, s, scale=np.exp(mu)) == pytest.approx(0.025, abs=1e-9)
    assert stats.lognorm.sf(5.0, s, scale=np.exp(mu)) == pytest.approx(0.025, abs=1e-9)


def test_morans_i_is_the_hand_formula_over_nearest_neighbours():
    """Four places on a line 0, 1, 2, 10 with one neighbour each: 0->1, 1->0 (tie with 2: the first),
    2->1, 10->2; I = sum_i d_i d_nb(i) / sum_i d_i^2."""
    coords = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [10.0, 0.0]])
    weights = neighbour_weights(coords, neighbours=1)
    assert weights.tolist() == [[0, 1, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]
    values = np.array([1.0, 2.0, 4.0, 8.0])
    d = values - values.mean()
    expected = (d[0] * d[1] + d[1] * d[0] + d[2] * d[1] + d[3] * d[2]) / (d**2).sum()
    assert morans_i(values, weights) == pytest.approx(expected, abs=1e-12)
    assert morans_i(np.full(4, 3.0), weights) == 0.0


GOOD = "village,pos,east,north\n" + "".join(f"v{i // 4},{(i * 7) % 3 == 0:d},{i // 4},{(i // 4) ** 2}\n"
                                            for i in range(24))
BAD = {
    "missing coordinate column": (GOOD, "east,height", r"column 'height' is not in"),
    "one coordinate column": (GOOD, "east", r"--coords names two columns X,Y, got 1"),
    "non-numeric coordinate": ("village,pos,east,north\n" + "a,0,1,2\na,1,1,2\nb,1,x,3\nb,0,x,3\nc,0,4,5\nc,1,4,5\n",
                               "east,north", r"column 'east' .* must hold numbers"),
    "all clusters at one point": ("village,pos,east,north\n" + "a,0,1,2\na,1,1,2\nb,1,1,2\nb,0,1,2\nc,0,1,2\nc,1,1,2\n",
                                  "east,north", r"lie at 1 place\(s\) of east,north: a spatial field needs at least"),
    "a cluster in two places": ("village,pos,east,north\n" + "a,0,1,2\na,1,1,2\nb,1,2,3\nb,0,2,9\nc,0,4,5\nc,1,4,5\n",
                                "east,north", r"cluster 'b' .* has two places .* data row 4 differs"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_coordinates_are_one_line_exit_2_and_nothing_written(case, tmp_path, capsys):
    text, coords, message = BAD[case]
    (tmp_path / "t.csv").write_text(text)
    code = main(["fit", str(tmp_path / "t.csv"), "--template", "clustered", "--cluster", "village", "--outcome", "pos",
                 "--coords", coords, "--out", str(tmp_path / "m.py"), "--quiet"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ") and re.search(message, err), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


def test_coordinates_that_also_name_the_clusters_must_be_numbers(tmp_path, capsys):
    """Gambia's villages are --cluster x,y --coords x,y: the cluster columns are read as text first."""
    text = "x,y,pos\n" + "1,2,0\n1,2,1\n3,q,1\n3,q,0\n4,5,0\n4,5,1\n"
    (tmp_path / "t.csv").write_text(text)
    code = main(["fit", str(tmp_path / "t.csv"), "--template", "clustered", "--cluster", "x,y", "--outcome", "pos",
                 "--coords", "x,y", "--quiet"])
    _, err = capsys.readouterr()
    assert code == 2 and "column 'y' of" in err and "data row 3 holds 'q'" in err, err


# A spatial fit written by hand in the `.fit.json` format: two clusters of three rows, the field's
# posterior draws at the clusters beside the parameters' (the model file fixes it: DESIGN §9.8).
CLUSTER_INDEX = np.array([0, 0, 0, 1, 1, 1])
DRAWS = 6
B = 1.0  # Laplace scale of the count


def posterior_draws() -> tuple[dict[str, list[float]], np.ndarray]:
    k = np.arange(DRAWS)
    draws = {"intercept": (-0.3 + 0.2 * np.sin(k)).tolist(), "sigma": (0.9 + 0.1 * k).tolist(),
             "phi": (0.6 + 0.05 * k).tolist(), "gp_length_scale": (3.0 + 0.2 * k).tolist(),
             "sigma_iid": (0.5 + 0.1 * k).tolist()}
    field = np.column_stack([0.9 - 0.1 * k, -0.7 + 0.15 * np.cos(k)])  # (draws, clusters)
    return draws, field


@pytest.fixture(scope="module")
def spatial_fit(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("spatial") / "villages.py"
    draws, field = posterior_draws()
    doc = {"format": 1, "template": "clustered",
           "parameters": {k: {"mean": float(np.mean(v)), "sd": float(np.std(v, ddof=1)), "hdi": [min(v), max(v)]}
                          for k, v in draws.items()},
           "data": {"file": "villages.csv", "rows": 6, "outcome": "pos", "cluster": ["village"], "clusters": 2,
                    "covariates": [], "covariate_mean": [], "covariate_sd": [],
                    "spatial": {"coords": ["east", "north"], "units": "the units of east and north"}},
           "table": {"clusters": ["a", "b"], "cluster_index": CLUSTER_INDEX.tolist(), "x": [],
                     "coords": [0.0, 0.0, 3.0, 4.0]},
           "draws": draws, "field": {"mean": field.mean(axis=0).tolist(), "draws": field.tolist()}}
    companions(out)[0].write_text(json.dumps(doc))
    out.write_text(model_text(out, doc))
    return out


def record_law(intercept: float, sigma: float, field: np.ndarray, nodes: int = 80) -> np.ndarray:
    """P(Y = y) for each y in {0,1}^6 (itertools.product order) given the parameters and the field:
    the clusters independent, each one's iid effect u = sigma z (sigma: sigma_iid), z ~ Normal(0, 1),
    by Gauss-Hermite."""
    z, w = np.polynomial.hermite_e.hermegauss(nodes)
    w = w / w.sum()
    ys = np.array(list(itertools.product((0, 1), repeat=6)))
    law = np.ones(len(ys))
    for c in (0, 1):
        rows = np.flatnonzero(CLUSTER_INDEX == c)
        p = expit(intercept + field[c] + sigma * z)[:, None] * np.ones(len(rows))  # (nodes, rows)
        y = ys[:, rows][:, None, :]
        law *= np.prod(np.where(y == 1, p, 1 - p), axis=2) @ w
    return law


def idp_of_first_record(law: np.ndarray) -> float:
    """idp of y[0] under a Laplace(B) count: the largest log-ratio over the integer breakpoints and the tails."""
    ys = np.array(list(itertools.product((0, 1), repeat=6)))
    s = np.arange(7)
    w = np.array([[law[(ys[:, 0] == t) & (ys.sum(axis=1) == v)].sum() for v in s] for t in (0, 1)])
    w /= w.sum(axis=1, keepdims=True)
    kernels = [np.exp(-np.abs(y - s) / B) for y in s] + [np.exp(s / B), np.exp(-s / B)]
    return max(abs(np.log(w[1] @ k) - np.log(w[0] @ k)) for k in kernels)


def draw_law(k: int) -> np.ndarray:
    draws, field = posterior_draws()
    return record_law(draws["intercept"][k], draws["sigma_iid"][k], field[k])


def audit_args(parameters: str) -> dict:
    return dict(parameters=parameters, query="count", mechanism="laplace", notion="idp", scale=B, targets=[0],
                information=None)


def test_the_model_file_fixes_the_field_at_its_posterior_mean_or_one_draw(spatial_fit):
    from ddpbayes.fitting.fitted import read_fit

    draws, field = posterior_draws()
    np.testing.assert_allclose(read_fit(companions(spatial_fit)[0], "mean").offset, field.mean(axis=0))
    np.testing.assert_allclose(read_fit(companions(spatial_fit)[0], "draw:4").offset, field[4])
    assert read_fit(companions(spatial_fit)[0], "draw:4").sigma == draws["sigma_iid"][4]  # u_c: the iid part
    text = spatial_fit.read_text()
    assert "treated as known" in text and "(east, north," in text and "fit.offset[fit.cluster_index]" in text
    assert "u_c ~ Normal(0, sigma_iid)" in text


def test_mean_audits_the_field_fixed_at_its_posterior_mean_as_the_brute_force(spatial_fit):
    draws, field = posterior_draws()
    mean = record_law(float(np.mean(draws["intercept"])), float(np.mean(draws["sigma_iid"])), field.mean(axis=0))
    found = audit_fitted(spatial_fit, **audit_args("mean"))
    assert found.result.leakage == pytest.approx(idp_of_first_record(mean), abs=1e-8)


@pytest.mark.slow  # two audits (~6 s on a loaded machine)
def test_draws_audit_each_draws_field_as_the_brute_force(spatial_fit):
    """draws:2 (draws 0 and 5): each draw's field and parameters."""
    plausible = audit_fitted(spatial_fit, **audit_args("draws:2")).plausible
    assert plausible["posterior_draws"] == [0, 5]
    np.testing.assert_allclose(plausible["leakages"], [idp_of_first_record(draw_law(k)) for k in (0, 5)], atol=1e-8)


@pytest.mark.slow  # the draw index multiplies the quadrature's tables (~15 s on a loaded machine)
def test_integrated_mixes_the_draws_fields(spatial_fit):
    """The Bayesian adversary's law is the average over draws 0 and 5 of each one's law, field included:
    the field's uncertainty makes the two villages dependent."""
    law = np.mean([draw_law(k) for k in (0, 5)], axis=0)
    found = audit_fitted(spatial_fit, **audit_args("integrated:2"))
    assert found.result.leakage == pytest.approx(idp_of_first_record(law), abs=1e-8)


TRUTH = {"intercept": -0.3, "sigma": 1.0, "phi": 0.8, "gp_length_scale": 3.0}  # BYM2 (DESIGN §9.8)


def matern32(coords: np.ndarray, length_scale: float) -> np.ndarray:
    """Matern 3/2 correlations: (1 + sqrt(3) d / l) exp(-sqrt(3) d / l)."""
    d = np.sqrt(((coords[:, None, :] - coords[None, :, :]) ** 2).sum(axis=-1)) * np.sqrt(3) / length_scale
    return (1 + d) * np.exp(-d)


def simulate(seed: int, field: bool, clusters: int = 30, size: int = 20) -> str:
    """A table from the spatial template (places uniform on [0, 10]^2; f = sigma sqrt(phi) g, u_c ~
    Normal(0, sigma sqrt(1 - phi))), or without the field f."""
    rng = np.random.default_rng(seed)
    coords = rng.uniform(0, 10, (clusters, 2))
    cov = TRUTH["sigma"] ** 2 * TRUTH["phi"] * matern32(coords, TRUTH["gp_length_scale"])
    f = rng.multivariate_normal(np.zeros(clusters), cov) if field else np.zeros(clusters)
    u = rng.normal(0, TRUTH["sigma"] * np.sqrt(1 - TRUTH["phi"]), clusters)
    cluster = np.repeat(np.arange(clusters), size)
    y = rng.binomial(1, expit(TRUTH["intercept"] + f[cluster] + u[cluster]))
    return "village,pos,east,north\n" + "".join(f"c{c},{v},{coords[c, 0]:.17g},{coords[c, 1]:.17g}\n"
                                                for c, v in zip(cluster, y))


@pytest.mark.slow  # four NUTS fits of the spatial template (about a minute each on a loaded machine)
def test_the_gp_parameters_are_recovered_over_seeds(tmp_path):
    """Four tables with a known field (30 places, 20 rows each): the 94% HDIs of intercept, the total
    SD sigma, the field's share phi and the length scale miss the truth at most 3 times in 16 (expected about 1)."""
    import arviz as az
    import pymc as pm

    from ddpbayes.fitting.clustered import read, pymc_model

    misses = 0
    for seed in range(4):
        path = tmp_path / f"s{seed}.csv"
        path.write_text(simulate(seed, field=True))
        data = read(path, {"cluster": ["village"], "outcome": "pos", "covariates": [], "coords": ["east", "north"]},
                    10**6)
        idata = pm.sample(draws=500, tune=500, chains=2, cores=1, random_seed=seed, progressbar=False,
                          model=pymc_model(data), compute_convergence_checks=False)
        for name, value in TRUTH.items():
            low, high = az.hdi(idata.posterior[name].values.ravel(), hdi_prob=0.94)
            misses += not low <= value <= high
    assert misses <= 3


@pytest.mark.slow  # six NUTS fits (with and without the field, each with its references)
def test_the_spatial_check_flags_a_field_and_not_its_absence(tmp_path):
    import ddpbayes

    for field in (True, False):
        path = tmp_path / f"{field}.csv"
        path.write_text(simulate(7, field=field, clusters=40))
        doc = ddpbayes.fit(path, cluster="village", outcome="pos", coords="east,north", seed=7, draws=500,
                           chains=2).to_dict()
        checks = doc["checks"]
        assert checks["spatial_supported"] is field, checks["morans_i"]
        assert (checks["morans_i"]["without_field"]["p_value"] < 0.01) is field
        assert checks["morans_i"]["p_value"] >= 0.01  # the fitted template reproduces the data's Moran's I


def places_spatial(places: np.ndarray):
    import pandas as pd

    from ddpbayes.fitting.spatial import cluster_coordinates

    k = len(places)
    return cluster_coordinates(pd.DataFrame(places, columns=["e", "n"]), ["e", "n"], np.arange(k),
                               [str(i) for i in range(k)], "t")


def spatial_model(places: np.ndarray, sigma: float):
    """The template's cluster effects at `places` with sigma fixed, in a model of their own."""
    import pymc as pm

    from ddpbayes.fitting.spatial import effects

    spatial = places_spatial(places)
    with pm.Model(coords={"cluster": [str(i) for i in range(len(places))]}) as model:
        effect = effects(spatial, pm.Data("sigma", sigma))
    return model, effect, spatial.describe()["approximation"]


def hyperparameters(length_scale: float, phi: float) -> dict[str, float]:
    return {"gp_length_scale_log__": np.log(length_scale),
            "phi_logodds__": np.log(phi / (1 - phi)) if 0 < phi < 1 else np.inf * (phi - 0.5)}


def bym2_covariance(places: np.ndarray, length_scale: float, phi: float, sigma: float) -> np.ndarray:
    """By hand: sigma^2 (phi (R + 1e-6 I) + (1 - phi) I), R the Matern 3/2 correlations (unit diagonal:
    Var = sigma^2 whatever phi, plus the jitter)."""
    k = len(places)
    return sigma**2 * (phi * (matern32(places, length_scale) + 1e-6 * np.eye(k)) + (1 - phi) * np.eye(k))


def test_the_collapsed_effect_has_the_bym2_law_in_the_models_own_graph():
    """Up to 100 places the effect f + u is sampled as one vector: its density in the model (given
    the length scale, phi and sigma) is the Normal(0, bym2_covariance) density, at random points."""
    import pytensor
    from scipy.stats import multivariate_normal

    places = np.array([[0.0, 0.0], [1.0, 0.0], [3.0, 0.5], [2.0, 4.0], [5.0, 5.0]])
    sigma = 1.7
    model, effect, how = spatial_model(places, sigma)
    assert how == "exact"
    inputs = model.value_vars
    fn = pytensor.function(inputs, model.logp(vars=[effect], jacobian=False), on_unused_input="ignore",
                           mode="FAST_COMPILE")  # no C compilation: a few evaluations
    rng = np.random.default_rng(2)
    for phi in (0.05, 0.5, 0.95, 1.0):
        law = multivariate_normal(np.zeros(len(places)), bym2_covariance(places, 2.0, phi, sigma))
        for point in rng.normal(0, 2, (3, len(places))):
            values = hyperparameters(2.0, phi) | {"effect": point}
            found = fn(*[values[v.name] for v in inputs])
            assert found == pytest.approx(law.logpdf(point), abs=1e-8)


@pytest.mark.slow  # one model compiled, one function evaluated 1,020 times (~25 s on a loaded machine)
def test_above_100_places_the_hsgp_effect_has_the_bym2_law_approximately():
    """HSGP: the effect sigma (sqrt(phi) g + sqrt(1 - phi) z) is linear in its standard normal
    coefficients (gp_w, z), so its covariance is J J^T, J's columns the effect at each unit vector:
    at phi = 1 the approximate Matern correlations, at phi = 1/2 half of them plus half the identity."""
    import pytensor

    rng = np.random.default_rng(5)
    many = rng.uniform(0, 10, (120, 2))
    model, effect, how = spatial_model(many, 1.0)
    assert how.startswith("HSGP, 30 x 30")
    inputs = model.value_vars
    fn = pytensor.function(inputs, model.replace_rvs_by_values([effect])[0], on_unused_input="ignore")
    sizes = {"gp_w": 900, "z": 120}
    covariances = []
    for phi in (1.0, 0.5):
        columns = []
        for e in np.eye(sum(sizes.values())):
            parts = {"gp_w": e[:900], "z": e[900:]}
            columns.append(fn(*[(hyperparameters(5.0, phi) | parts)[v.name] for v in inputs]))
        jacobian = np.column_stack(columns)
        covariances.append(jacobian @ jacobian.T)
    assert np.abs(covariances[0] - matern32(many, 5.0)).max() < 0.01  # measured 0.003 (DESIGN §9.8)
    np.testing.assert_allclose(covariances[1], covariances[0] / 2 + np.eye(120) / 2, atol=1e-12)


def test_f_given_the_total_effect_is_the_gaussian_conditional_drawn_by_brute_force():
    """f ~ Normal(0, S_f), u ~ Normal(0, S_u) independent, S_f = sigma^2 phi (R + 1e-6 I), S_u =
    sigma^2 (1 - phi) I, b = f + u: f | b ~ Normal(S_f (S_f + S_u)^-1 b, S_f - S_f (S_f + S_u)^-1 S_f)
    (the joint Gaussian conditioned, by linear solves). 10,000 draws of each of two parameter sets:
    the sample mean and covariance within 5 standard errors of it, u = b - f, the same seed the same draws."""
    from ddpbayes.fitting.spatial import split

    places = np.array([[0.0, 0.0], [1.0, 0.0], [3.0, 0.5], [2.0, 4.0], [5.0, 5.0]])
    k, n = len(places), 10_000
    sets = [(0.8, 0.3, 1.5, np.array([0.5, -1.0, 0.2, 1.1, -0.4])),
            (1.6, 0.85, 4.0, np.array([1.2, 0.9, 1.5, -2.0, 0.1]))]
    sigma, phi, scale = (np.repeat([s[i] for s in sets], n) for i in range(3))
    effect = np.repeat(np.array([s[3] for s in sets]), n, axis=0)
    f, u = split(effect, sigma, phi, scale, places, np.random.default_rng(11))
    np.testing.assert_array_equal(u, effect - f)
    again, _ = split(effect, sigma, phi, scale, places, np.random.default_rng(11))
    np.testing.assert_array_equal(again, f)
    for j, (sd, share, length, b) in enumerate(sets):
        s_f = sd**2 * share * (matern32(places, length) + 1e-6 * np.eye(k))
        s_b = s_f + sd**2 * (1 - share) * np.eye(k)
        mean = s_f @ np.linalg.solve(s_b, b)
        cov = s_f - s_f @ np.linalg.solve(s_b, s_f)
        draws = f[j * n:(j + 1) * n]
        assert np.all(np.abs(draws.mean(axis=0) - mean) < 5 * np.sqrt(np.diag(cov) / n))
        se_cov = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / n)
        assert np.all(np.abs(np.cov(draws.T) - cov) < 5 * se_cov)
        assert np.diag(cov).min() > 0.01 * sd**2  # a real spread to compare, not a degenerate case


def prepare_rows(villages: list[str], pos: list[int]):
    """The clustered template's view of a table of villages and outcomes, no covariates."""
    import pandas as pd

    from ddpbayes.fitting.clustered import prepare

    return prepare(pd.DataFrame({"village": villages, "pos": pos}), ["village"], "pos", [], "t")


def tiny_table():
    """Two villages: a of three rows (1, 0, 1), b of two (0, 0)."""
    return prepare_rows(["a", "a", "a", "b", "b"], [1, 0, 1, 0, 0])


def test_a_clusters_log_likelihood_integrates_its_effect_as_a_brute_force():
    """log p(y_c | eta, sd) = log of the integral over u ~ Normal(0, sd) of the product over c's rows of
    p^y (1 - p)^(1 - y), p = logit^-1(eta + u), by scipy's adaptive quadrature (a village of 63 rows
    too, as Gambia's largest); sd -> 0: the sum over the rows."""
    from scipy import integrate

    from ddpbayes.fitting.checks import cluster_loglik

    data = tiny_table()
    eta = np.array([[-0.4], [1.3]])  # two draws, one pattern per village (the same eta for both)
    eta = np.repeat(eta, len(data.trials), axis=1)
    sd = np.array([0.8, 2.0])
    found = cluster_loglik(eta, sd, data)
    for d in range(2):
        for c, ys in enumerate(([1, 0, 1], [0, 0])):
            def integrand(u):
                p = expit(eta[d, 0] + u)
                return np.prod([p if y else 1 - p for y in ys]) * stats.norm.pdf(u, 0, sd[d])

            value, _ = integrate.quad(integrand, -12 * sd[d], 12 * sd[d], epsabs=1e-13, epsrel=1e-12)
            assert found[d, c] == pytest.approx(np.log(value), abs=1e-9)
    big = prepare_rows(["a"] * 63 + ["b"] * 2, [1] * 50 + [0] * 13 + [0, 1])
    found = cluster_loglik(np.full((1, len(big.trials)), -0.6), np.array([3.0]), big)[0, 0]
    shift = 30.0  # the integrand near exp(-14): scaled up for quad's absolute tolerance

    def integrand(u):
        return np.exp(50 * log_expit(-0.6 + u) + 13 * log_expit(0.6 - u) + shift) * stats.norm.pdf(u, 0, 3.0)

    value, _ = integrate.quad(integrand, -36, 36, points=[0], limit=500, epsabs=0, epsrel=1e-12)
    assert found == pytest.approx(np.log(value) - shift, abs=1e-6)
    rows = cluster_loglik(eta, np.full(2, 1e-9), data)
    p = expit(eta[:, 0])
    np.testing.assert_allclose(rows, np.column_stack([2 * np.log(p) + np.log(1 - p), 2 * np.log(1 - p)]), atol=1e-8)


def test_leave_one_cluster_out_loo_by_hand_on_ten_draws():
    """Ten draws: PSIS leaves the weights unsmoothed (a tail of 2 draws is too short to fit; k-hat
    inf), so each village's elpd is the harmonic-mean estimate -log mean_d exp(-ll_cd), by hand;
    every k-hat over 0.7, so the comparison is flagged unreliable."""
    from ddpbayes.fitting.checks import compare_cluster_loo

    rng = np.random.default_rng(3)
    ll_s, ll_p = rng.normal(-5, 0.5, (10, 3)), rng.normal(-6, 0.5, (10, 3))
    found = compare_cluster_loo(ll_s, ll_p, (1.0, 1.0))
    pointwise_s = -np.log(np.exp(-ll_s).mean(axis=0))
    pointwise_p = -np.log(np.exp(-ll_p).mean(axis=0))
    diff = pointwise_s - pointwise_p
    assert found["clusters"] == 3
    assert found["elpd"] == pytest.approx(pointwise_s.sum(), abs=1e-10)
    assert found["elpd_without_field"] == pytest.approx(pointwise_p.sum(), abs=1e-10)
    assert found["elpd_diff"] == pytest.approx(diff.sum(), abs=1e-10)
    assert found["se_diff"] == pytest.approx(np.sqrt(((diff - diff.mean()) ** 2).sum()), abs=1e-10)
    assert found["pareto_k_over_0_7"] == 3 and found["pareto_k_over_0_7_without_field"] == 3
    assert found["reliable"] is False


def test_the_field_at_a_cluster_given_the_others_is_the_partitioned_gaussian_conditional():
    """f ~ Normal(0, S), S = sigma^2 phi (R + 1e-6 I): f_c | f_-c ~ Normal(S_c,-c S_-c,-c^-1 f_-c,
    S_cc - S_c,-c S_-c,-c^-1 S_-c,c), by linear solves on the partition, for every c and two draws."""
    from ddpbayes.fitting.spatial import field_given_others

    places = np.array([[0.0, 0.0], [1.0, 0.0], [3.0, 0.5], [2.0, 4.0], [5.0, 5.0]])
    f = np.array([[0.4, -0.2, 0.9, -1.1, 0.3], [1.5, 1.2, 0.1, -0.6, -0.9]])
    sigma, phi, scale = np.array([0.8, 1.6]), np.array([0.3, 0.9]), np.array([1.5, 4.0])
    mean, variance = field_given_others(f, sigma, phi, scale, places)
    for d in range(2):
        s = sigma[d] ** 2 * phi[d] * (matern32(places, scale[d]) + 1e-6 * np.eye(len(places)))
        for c in range(len(places)):
            rest = np.delete(np.arange(len(places)), c)
            weights = np.linalg.solve(s[np.ix_(rest, rest)], s[rest, c])
            assert mean[d, c] == pytest.approx(weights @ f[d, rest], abs=1e-9)
            assert variance[d, c] == pytest.approx(s[c, c] - weights @ s[rest, c], rel=1e-9)


def test_a_clusters_effect_sd_may_differ_by_cluster():
    """sd (D, k): village a's effect integrated with sd 0.5, b's with 2.5, each as the brute force."""
    from scipy import integrate

    from ddpbayes.fitting.checks import cluster_loglik

    data = tiny_table()
    eta = np.full((1, len(data.trials)), 0.3)
    found = cluster_loglik(eta, np.array([[0.5, 2.5]]), data)
    for c, (ys, sd) in enumerate((([1, 0, 1], 0.5), ([0, 0], 2.5))):
        def integrand(u):
            p = expit(0.3 + u)
            return np.prod([p if y else 1 - p for y in ys]) * stats.norm.pdf(u, 0, sd)

        value, _ = integrate.quad(integrand, -12 * sd, 12 * sd, epsabs=1e-13, epsrel=1e-12)
        assert found[0, c] == pytest.approx(np.log(value), abs=1e-7)  # 32 adaptive nodes: 6e-9 off at sd 2.5
