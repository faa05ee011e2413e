"""Categorical outcomes of the clustered template (DESIGN §9.9, issue #41 item 1): the model file
audited under --parameters mean, draws:S and integrated:S against a brute force written here (the
records enumerated, each cluster's effects integrated by scipy: quad in one dimension, a
Gauss-Hermite product rule of 60 nodes per dimension in two and three), on small hand-written fits
in the `.fit.json` format; the outcome's levels read; bad input; and (slow) parameter recovery and
the checks on data simulated from the template."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import integrate
from scipy.special import expit, log_softmax, roots_hermitenorm

from ddpbayes.errors import InputError
from ddpbayes.fitting.categorical import outcome_levels
from ddpbayes.fitting.write import companions, model_text
from ddpbayes.plausible import audit_fitted
from ddpbayes.settings import RunSettings

B = 1.0  # Laplace scale of the released sum of level indices
CLUSTER_INDEX = np.array([0, 0, 0, 1, 1])  # two clusters, of three and two rows
X = np.array([-1.0, 0.0, 1.0, 0.5, -0.5])  # one standardised covariate
DRAWS = 4


def multinomial_draws(levels: int) -> dict[str, list[float]]:
    """DRAWS draws of the baseline-category logit's parameters over `levels` levels a, b, c, ..."""
    k = np.arange(DRAWS)
    out = {}
    for j, v in enumerate("bcd"[:levels - 1]):
        out[f"intercept_{v}"] = (0.3 * (j - 0.5) + 0.2 * np.sin(k + j)).tolist()
        out[f"beta_age_{v}"] = (0.4 - 0.5 * j + 0.1 * np.cos(k)).tolist()
        out[f"sigma_{v}"] = (0.7 + 0.3 * j + 0.1 * k).tolist()
    return out


def ordered_draws() -> dict[str, list[float]]:
    k = np.arange(DRAWS)
    return {"cut_1": (-0.6 + 0.1 * np.sin(k)).tolist(), "cut_2": (0.9 + 0.1 * np.cos(k)).tolist(),
            "beta_age": (0.5 + 0.1 * k).tolist(), "sigma": (0.8 + 0.2 * k).tolist()}


def write_fit(folder: Path, draws: dict[str, list[float]], levels: list[str], link: str, index=CLUSTER_INDEX,
              x=X) -> Path:
    """MODEL.py and MODEL.fit.json as `ddpbayes fit` writes them (the model file from its template)."""
    out = folder / "survey.py"
    doc = {"format": 1, "template": "clustered",
           "parameters": {k: {"mean": float(np.mean(v)), "sd": float(np.std(v, ddof=1)), "hdi": [min(v), max(v)]}
                          for k, v in draws.items()},
           "data": {"file": "survey.csv", "rows": len(index), "outcome": "grade", "levels": levels,
                    "reference": levels[0], "link": link, "cluster": ["school"], "clusters": int(index.max()) + 1,
                    "covariates": ["age"], "covariate_mean": [0.0], "covariate_sd": [1.0]},
           "table": {"clusters": [f"s{c}" for c in range(index.max() + 1)], "cluster_index": index.tolist(),
                     "x": x.tolist()},
           "draws": draws}
    companions(out)[0].write_text(json.dumps(doc))
    out.write_text(model_text(out, doc))
    return out


def multinomial_cluster_law(values: dict[str, float], x: np.ndarray, levels: int) -> np.ndarray:
    """P(y_rows = each configuration) of one cluster (itertools.product order), u_j = sigma_j z_j integrated
    by a Gauss-Hermite product rule of 60 nodes per dimension (probabilists', scipy)."""
    z, w = roots_hermitenorm(60)
    w = w / w.sum()
    others = "bcd"[:levels - 1]
    grid = np.array(list(itertools.product(range(60), repeat=levels - 1)))  # (N, levels - 1) node indices
    weight = np.prod(w[grid], axis=1)
    u = z[grid] * np.array([values[f"sigma_{v}"] for v in others])  # (N, levels - 1)
    eta = np.array([values[f"intercept_{v}"] for v in others]) + x[:, None, None] * np.array(
        [values[f"beta_age_{v}"] for v in others]) + u[None]  # (rows, N, levels - 1)
    logp = log_softmax(np.concatenate([np.zeros((*eta.shape[:2], 1)), eta], axis=-1), axis=-1)
    configs = np.array(list(itertools.product(range(levels), repeat=len(x))))
    return np.array([np.exp(sum(logp[r, :, y[r]] for r in range(len(x)))) @ weight for y in configs])


def ordered_cluster_law(values: dict[str, float], x: np.ndarray) -> np.ndarray:
    """P(y_rows = each configuration) of one cluster under the cumulative logit, u = sigma z by scipy's quad."""
    cuts = np.array([values["cut_1"], values["cut_2"]])

    def p(level: int, eta: float) -> float:
        cum = np.concatenate([[0.0], expit(cuts - eta), [1.0]])
        return cum[level + 1] - cum[level]

    def integrand(z: float, y) -> float:
        u = values["sigma"] * z
        return np.prod([p(t, values["beta_age"] * xr + u) for t, xr in zip(y, x)]) * np.exp(-z * z / 2) / np.sqrt(
            2 * np.pi)

    configs = itertools.product(range(3), repeat=len(x))
    return np.array([integrate.quad(integrand, -np.inf, np.inf, args=(y,), epsabs=1e-14, epsrel=1e-13)[0]
                     for y in configs])


def joint_law(cluster_law, levels: int, index=CLUSTER_INDEX, x=X) -> tuple[np.ndarray, np.ndarray]:
    """Every configuration of all the records (levels^n, itertools.product order) and its probability: the
    clusters independent given the parameters."""
    configs = np.array(list(itertools.product(range(levels), repeat=len(index))))
    law = np.ones(len(configs))
    for c in range(index.max() + 1):
        rows = np.flatnonzero(index == c)
        local = cluster_law(x[rows])
        code = np.ravel_multi_index(configs[:, rows].T, (levels,) * len(rows))
        law *= local[code]
    return configs, law


def idp_of_first_record(configs: np.ndarray, law: np.ndarray, levels: int) -> float:
    """idp of y[0] under a Laplace(B) sum of level indices: sup over y and t, t' of |log L(y | t) - log L(y | t')|
    on the integer breakpoints and the two tails (DESIGN §2.1), L(y | t) = sum_s P(s | t) e^(-|y - s| / B)."""
    sums = configs.sum(axis=1)
    s = np.arange(sums.max() + 1)
    w = np.array([[law[(configs[:, 0] == t) & (sums == v)].sum() for v in s] for t in range(levels)])
    w /= w.sum(axis=1, keepdims=True)
    kernels = np.array([np.exp(-np.abs(y - s) / B) for y in s] + [np.exp(s / B), np.exp(-s / B)])
    logs = np.log(w @ kernels.T)  # (levels, kernels)
    return float((logs.max(axis=0) - logs.min(axis=0)).max())


def draw_values(draws: dict[str, list[float]], k: int | None) -> dict[str, float]:
    """Draw k's parameters, or their means (k None)."""
    return {name: float(np.mean(v)) if k is None else v[k] for name, v in draws.items()}


def multinomial_idp(draws, k: int | None, levels: int, index=CLUSTER_INDEX, x=X) -> float:
    values = draw_values(draws, k)
    configs, law = joint_law(lambda xs: multinomial_cluster_law(values, xs, levels), levels, index, x)
    return idp_of_first_record(configs, law, levels)


def ordered_idp(k: int | None) -> float:
    values = draw_values(ordered_draws(), k)
    configs, law = joint_law(lambda xs: ordered_cluster_law(values, xs), 3)
    return idp_of_first_record(configs, law, 3)


def audit(model: Path, parameters: str, max_states: int = 1 << 22) -> float:
    found = audit_fitted(model, parameters, "sum", "laplace", "idp", scale=B, targets=[0], information=None,
                         settings=RunSettings(max_states=max_states))
    assert found.result.engine == "structured"
    return found.result.leakage


@pytest.fixture(scope="module")
def multinomial(tmp_path_factory) -> Path:
    return write_fit(tmp_path_factory.mktemp("multinomial"), multinomial_draws(3), ["a", "b", "c"],
                     "baseline-category logit")


@pytest.fixture(scope="module")
def ordered(tmp_path_factory) -> Path:
    return write_fit(tmp_path_factory.mktemp("ordered"), ordered_draws(), ["1", "2", "3"], "cumulative logit")


def test_the_multinomial_file_under_mean_leaks_what_the_brute_force_gives(multinomial):
    assert audit(multinomial, "mean") == pytest.approx(multinomial_idp(multinomial_draws(3), None, 3), abs=1e-8)


def test_the_ordered_file_under_mean_leaks_what_the_brute_force_gives(ordered):
    assert audit(ordered, "mean") == pytest.approx(ordered_idp(None), abs=1e-8)


@pytest.mark.slow  # four levels: three effects per cluster in one clique, a 3-D tensor-product rule (~30 s)
def test_four_levels_three_effects_per_cluster_in_one_clique(tmp_path):
    """Settled at 64 nodes per axis (64^3 per clique, times 4 slots and 13 partial sums: over the default
    --max-states, 2^22, so raised to 2^25)."""
    index, x = np.array([0, 0, 1, 1]), np.array([-1.0, 0.5, 1.0, -0.5])
    draws = multinomial_draws(4)
    model = write_fit(tmp_path, draws, ["a", "b", "c", "d"], "baseline-category logit", index, x)
    assert audit(model, "mean", 1 << 25) == pytest.approx(multinomial_idp(draws, None, 4, index, x), abs=1e-8)


@pytest.mark.slow  # two draws' audits and the draw-index model: ~30 s on a loaded machine
def test_draws_and_integrated_run_on_the_file_and_equal_the_brute_force(ordered):
    """draws:2 is the worst of draws 0 and 3 (thinned evenly); integrated:2 the mixture of their laws."""
    assert audit(ordered, "draws:2") == pytest.approx(max(ordered_idp(0), ordered_idp(3)), abs=1e-8)
    values = [draw_values(ordered_draws(), k) for k in (0, 3)]
    mixed = [joint_law(lambda xs, v=v: ordered_cluster_law(v, xs), 3) for v in values]
    law = (mixed[0][1] + mixed[1][1]) / 2
    assert audit(ordered, "integrated:2") == pytest.approx(idp_of_first_record(mixed[0][0], law, 3), abs=1e-8)


@pytest.mark.parametrize("values, levels, first", [
    (["b", "a", "c", "a"], ("a", "b", "c"), [1, 0, 2, 0]),
    ([10, 2, 3, 2], ("2", "3", "10"), [2, 0, 1, 0]),  # integers sorted as numbers, not as text
    ([" x", "y ", "x", "z"], ("x", "y", "z"), [0, 1, 0, 2]),
    (["1.0", "3", "2.0", "1"], ("1", "2", "3"), [0, 2, 1, 0]),
])
def test_levels_are_sorted_and_indexed(values, levels, first):
    found, y = outcome_levels(pd.Series(values).astype(str), "grade", "t.csv")
    assert found == levels and y.tolist() == first


@pytest.mark.parametrize("values, message", [
    ([0.5, 1, 2], r"fractional number \(0\.5, data row 1\)"),
    ([str(i) for i in range(21)], r"21 levels, over 20"),
])
def test_bad_outcomes_are_refused(values, message):
    with pytest.raises(InputError, match=message):
        outcome_levels(pd.Series(values).astype(str), "grade", "t.csv")


@pytest.mark.parametrize("ordered", [False, True])
def test_coords_with_levels_are_refused_in_one_line(tmp_path, ordered):
    """--coords with K > 2 levels: refused before any fitting, one line saying why (DESIGN §9.9)."""
    from ddpbayes.fitting.categorical import read

    table = tmp_path / "t.csv"
    table.write_text("school,grade,x,y\n" + "".join(f"s{k % 3},{'abc'[k % 3]},{k % 3},{k % 2}\n" for k in range(9)))
    options = {"cluster": ["school"], "outcome": "grade", "covariates": [], "coords": ["x", "y"], "ordered": ordered}
    with pytest.raises(InputError, match=r"^--coords is not built for a categorical outcome \(3 levels of 'grade'\): "
                                         r"the spatial field is one effect per cluster[^\n]*$"):
        read(table, options, 1000)


def test_ordered_with_two_levels(tmp_path):
    """--ordered with two levels: 0/1 is the binary logit's table (cutpoint = -intercept, the same prior), fitted
    by the binary template; two other levels are refused in one line saying how to code them."""
    from ddpbayes.fitting.categorical import read
    from ddpbayes.fitting.clustered import ClusteredData

    table = tmp_path / "t.csv"
    options = {"cluster": ["school"], "outcome": "grade", "covariates": [], "ordered": True}
    table.write_text("school,grade\n" + "".join(f"s{k % 3},{(k // 3) % 2}\n" for k in range(12)))
    assert isinstance(read(table, options, 1000), ClusteredData)
    table.write_text("school,grade\n" + "".join(f"s{k % 3},{'lh'[(k // 3) % 2]}\n" for k in range(12)))
    with pytest.raises(InputError, match=r"^column 'grade' of .* two levels \(h, l\): .* code them as 0/1, h as 0"):
        read(table, options, 1000)


TRUE = {"intercept_b": 0.3, "intercept_c": -0.4, "beta_age_b": 0.6, "beta_age_c": -0.5, "sigma_b": 0.9,
        "sigma_c": 0.6}


def simulated(seed: int, clusters: int = 24, rows: int = 15, effects: bool = True) -> str:
    """A table drawn from the baseline-category template at TRUE (levels a, b, c; a the reference), `age` a
    standard normal covariate (the fit standardises it again: its SD is near 1), or without cluster effects."""
    rng = np.random.default_rng(seed)
    lines = ["school,grade,age"]
    for g in range(clusters):
        u = rng.normal(0.0, 1.0, 2) * np.array([TRUE["sigma_b"], TRUE["sigma_c"]]) * effects
        age = rng.normal(0.0, 1.0, rows)
        eta = np.array([TRUE["intercept_b"], TRUE["intercept_c"]]) + age[:, None] * np.array(
            [TRUE["beta_age_b"], TRUE["beta_age_c"]]) + u
        p = np.exp(log_softmax(np.concatenate([np.zeros((rows, 1)), eta], axis=1), axis=1))
        lines += [f"s{g},{'abc'[rng.choice(3, p=pr)]},{a:.6f}" for pr, a in zip(p, age)]
    return "\n".join(lines) + "\n"


def fit_table(tmp_path: Path, text: str, seed: int) -> dict:
    from ddpbayes.fitting import fit

    path = tmp_path / f"grades{seed}.csv"
    path.write_text(text)
    return fit(path, cluster="school", outcome="grade", covariates="age", seed=seed, draws=500, tune=500,
               chains=2).doc


@pytest.mark.slow  # four fits of 360 rows (about a minute each on an idle machine)
def test_the_parameters_are_recovered_over_seeds(tmp_path):
    """The 94% HDIs cover the true parameters in at least 20 of the 24 (parameter, seed) cases (a coverage
    of 0.94 gives 22.6 on average; P(fewer than 20) < 0.03), and every fit names the levels in order."""
    covered = 0
    for seed in range(4):
        doc = fit_table(tmp_path, simulated(seed), seed)
        assert doc["data"]["levels"] == ["a", "b", "c"] and doc["data"]["reference"] == "a"
        assert list(doc["parameters"]) == list(TRUE)
        mean, sd = doc["data"]["covariate_mean"][0], doc["data"]["covariate_sd"][0]
        for name, value in TRUE.items():  # on the fit's scale: age standardised
            level = name[-1]
            value = {"intercept": value + TRUE[f"beta_age_{level}"] * mean, "beta": value * sd}.get(
                name.partition("_")[0], value)
            low, high = doc["parameters"][name]["hdi"]
            covered += low <= value <= high
    assert covered >= 20


@pytest.mark.slow  # two fits of 360 rows
def test_the_checks_flag_dependence_simulated_with_it_and_not_without(tmp_path):
    with_effects = fit_table(tmp_path, simulated(11), 11)["checks"]
    without = fit_table(tmp_path, simulated(12, effects=False), 12)["checks"]
    assert with_effects["dependence_supported"] and not without["dependence_supported"]
    assert set(with_effects["levels"]) == {"a", "b", "c"}
    assert min(b["icc"]["independent"]["p_value"] for b in with_effects["levels"].values()) < 0.01 / 3
    assert min(b["icc"]["independent"]["p_value"] for b in without["levels"].values()) > 0.01 / 3


def test_a_level_with_one_row_is_read_and_a_binary_outcome_stays_binary(tmp_path):
    from ddpbayes.fitting import categorical
    from ddpbayes.fitting.clustered import ClusteredData

    path = tmp_path / "t.csv"
    path.write_text("school,grade\ns1,low\ns1,mid\ns2,low\ns2,top\ns2,mid\n")
    options = {"cluster": ["school"], "outcome": "grade", "covariates": []}
    data = categorical.read(path, options, 100)
    assert data.levels == ("low", "mid", "top") and data.y.tolist() == [0, 1, 0, 2, 1]
    assert data.totals.tolist() == [[1, 1, 0], [1, 1, 1]]
    assert data.parameter_names() == ["intercept_mid", "intercept_top", "sigma_mid", "sigma_top"]
    ordered = categorical.read(path, options | {"ordered": True}, 100)
    assert ordered.parameter_names() == ["cut_1", "cut_2", "sigma"]
    path.write_text("school,grade\ns1,0\ns1,1\ns2,1\ns2,1\n")
    assert isinstance(categorical.read(path, options, 100), ClusteredData)


TRUE_ORDERED = {"cut_1": -0.7, "cut_2": 0.9, "beta_age": 0.6, "sigma": 0.9}


def simulated_ordered(seed: int, clusters: int = 24, rows: int = 15) -> str:
    """A table drawn from the cumulative-logit template at TRUE_ORDERED (levels 1 < 2 < 3)."""
    rng = np.random.default_rng(seed)
    lines = ["school,grade,age"]
    for g in range(clusters):
        u = rng.normal(0.0, TRUE_ORDERED["sigma"])
        age = rng.normal(0.0, 1.0, rows)
        below = expit(np.array([TRUE_ORDERED["cut_1"], TRUE_ORDERED["cut_2"]])[None, :]
                      - (TRUE_ORDERED["beta_age"] * age + u)[:, None])
        p = np.diff(np.concatenate([np.zeros((rows, 1)), below, np.ones((rows, 1))], axis=1), axis=1)
        lines += [f"s{g},{1 + rng.choice(3, p=pr)},{a:.6f}" for pr, a in zip(p, age)]
    return "\n".join(lines) + "\n"


@pytest.mark.slow  # four fits of 360 rows
def test_the_ordered_parameters_are_recovered_over_seeds(tmp_path):
    """--ordered: the 94% HDIs cover the true parameters in at least 13 of the 16 (parameter, seed) cases
    (P(fewer) < 0.02 at a coverage of 0.94)."""
    from ddpbayes.fitting import fit

    covered = 0
    for seed in range(4):
        path = tmp_path / f"ordered{seed}.csv"
        path.write_text(simulated_ordered(seed))
        doc = fit(path, cluster="school", outcome="grade", covariates="age", ordered=True, seed=seed, draws=500,
                  tune=500, chains=2).doc
        assert doc["data"]["levels"] == ["1", "2", "3"] and doc["data"]["link"] == "cumulative logit"
        mean, sd = doc["data"]["covariate_mean"][0], doc["data"]["covariate_sd"][0]
        shift = TRUE_ORDERED["beta_age"] * mean  # age standardised: the cutpoints absorb its mean
        truth = {"cut_1": TRUE_ORDERED["cut_1"] - shift, "cut_2": TRUE_ORDERED["cut_2"] - shift,
                 "beta_age": TRUE_ORDERED["beta_age"] * sd, "sigma": TRUE_ORDERED["sigma"]}
        for name, value in truth.items():
            low, high = doc["parameters"][name]["hdi"]
            covered += low <= value <= high
    assert covered >= 13
