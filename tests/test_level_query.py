"""`level:L[:w0,w1,...]`, the count of records of one value (issue #41, the natural release for categorical
records): audited by the structured engine on a categorical clustered fit and by the exact and structured
engines on a discrete model, each against a brute force written here (the records enumerated, the Laplace
log-ratio's sup over outputs at the integer breakpoints and the two tails, DESIGN §2.1); its sensitivity; its
parse errors (one line, exit 2)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pymc as pm
import pytest
from test_fit_categorical import (
    CLUSTER_INDEX,
    draw_values,
    joint_law,
    multinomial_cluster_law,
    multinomial_draws,
    write_fit,
)
from test_fitted_report import write_spec

import ddpbayes
from ddpbayes import DependenceModel, Finite, Interval
from ddpbayes.cli.main import main
from ddpbayes.errors import InputError
from ddpbayes.plausible import audit_fitted
from ddpbayes.queries import parse_query
from ddpbayes.reports.views.fitted import cluster_query
from ddpbayes.settings import RunSettings

B = 0.8  # Laplace scale
TYPES = np.array([[0.7, 0.2, 0.1], [0.2, 0.5, 0.3]])  # P(record = 0, 1, 2 | household type z = 0, 1)
P_TYPE = 0.4  # P(z = 1)
CHAIN = str(Path(__file__).resolve().parent.parent / "models" / "categorical_chain.py")  # five Categorical(3) days


def laplace_idp(configs: np.ndarray, law: np.ndarray, level: int, weights: np.ndarray, target: int) -> float:
    """sup over y and t, t' of log L(y | t) - log L(y | t'), L(y | t) = Σ_s P(s | t) e^(-|y - s| / B) with
    s = Σ_k w_k 1[x_k = L] (integer weights): its sup is at an integer s or a tail (y -> ±inf)."""
    sums = ((configs == level) * weights).sum(axis=1).astype(int)
    s = np.arange(sums.min(), sums.max() + 1)
    w = np.array([[law[(configs[:, target] == t) & (sums == v)].sum() for v in s]
                  for t in np.unique(configs[:, target])])
    w /= w.sum(axis=1, keepdims=True)
    kernels = np.array([np.exp(-np.abs(y - s) / B) for y in s] + [np.exp((s - s.max()) / B),
                                                                   np.exp((s.min() - s) / B)])
    logs = np.log(w @ kernels.T)
    return float((logs.max(axis=0) - logs.min(axis=0)).max())


# --------------------------------------------------------------------------- a categorical clustered fit


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """The fit file (three levels, two clusters of three and two records) and the brute force's joint law under
    the draws' means (each cluster's two effects integrated by a 60 x 60 Gauss-Hermite rule)."""
    draws = multinomial_draws(3)
    model = write_fit(tmp_path_factory.mktemp("level"), draws, ["a", "b", "c"], "baseline-category logit")
    values = draw_values(draws, None)
    return model, joint_law(lambda xs: multinomial_cluster_law(values, xs, 3), 3)


def fitted_idp(model, query: str, targets: list[int]) -> list[float]:
    """The targets' idp under the draws' means, by the structured engine."""
    found = audit_fitted(model, "mean", query, "laplace", "idp", scale=B, targets=targets, information=None,
                         settings=RunSettings(engine="structured"))
    assert found.result.engine == "structured"
    return [found.result.per_target[t] for t in targets]


def test_the_count_of_a_level_in_a_cluster_on_a_categorical_fit_equals_the_brute_force(fitted):
    """Level b counted in cluster 0 (records 0-2): record 0's idp is the brute force's; record 3, in the other
    cluster, is independent of cluster 0's records under fixed parameters and leaks nothing."""
    model, (configs, law) = fitted
    query = cluster_query("cluster:b", CLUSTER_INDEX == 0, ["a", "b", "c"], model)  # a report spec's query
    assert query == "level:1:1,1,1,0,0"
    found = fitted_idp(model, query, [0, 3])
    assert found[0] == pytest.approx(laplace_idp(configs, law, 1, np.array([1, 1, 1, 0, 0]), 0), abs=1e-8)
    assert found[1] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.slow  # two more audits of the fit, ~6 s each on a loaded machine
@pytest.mark.parametrize("query, level, weights, target", [
    ("level:2", 2, [1] * 5, 4),  # level c over every record
    ("level:0:2,-1,0,1,0", 0, [2, -1, 0, 1, 0], 1),
])
def test_other_level_counts_on_a_categorical_fit_equal_the_brute_force(fitted, query, level, weights, target):
    model, (configs, law) = fitted
    assert fitted_idp(model, query, [target])[0] == pytest.approx(
        laplace_idp(configs, law, level, np.array(weights), target), abs=1e-8)


# --------------------------------------------------------------------------- a discrete model


def household(n: int = 3) -> DependenceModel:
    """n Categorical(3) records sharing a household type z ~ Bernoulli(P_TYPE)."""
    with pm.Model() as m:
        z = pm.Bernoulli("z", P_TYPE)
        for k in range(n):
            pm.Categorical(f"y{k}", p=pm.math.constant(TYPES)[z])
    return DependenceModel(m, tuples=[f"y{k}" for k in range(n)])


def household_law(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every configuration of the records and its probability, z summed out by hand."""
    configs = np.array(list(itertools.product(range(3), repeat=n)))
    law = sum(pz * np.prod(TYPES[z][configs], axis=1) for z, pz in ((0, 1 - P_TYPE), (1, P_TYPE)))
    return configs, law


@pytest.mark.parametrize("engine", ["exact", "structured"])
@pytest.mark.parametrize("query, level, weights", [
    ("level:1", 1, [1, 1, 1]),
    ("level:2:1,3,0", 2, [1, 3, 0]),  # tuple 2 unread, yet dependent on the others
])
def test_engines_on_a_discrete_model_equal_the_brute_force(engine, query, level, weights):
    found = ddpbayes.audit(household(), query, "laplace", "idp", scale=B, settings=RunSettings(engine=engine))
    configs, law = household_law(3)
    assert found.engine == engine
    assert found.per_target == pytest.approx([laplace_idp(configs, law, level, np.array(weights), t)
                                              for t in range(3)], abs=1e-9)


def test_values_count_the_level():
    q = parse_query("level:2:1,0,-2")
    assert q.values(np.array([[2, 2, 2], [0, 1, 2], [1, 1, 1]])).ravel().tolist() == [-1.0, -2.0, 0.0]
    assert parse_query("level:2:1,0,-2").spec == "level:2:1,0,-2" and parse_query("LEVEL:1.5").spec == "level:1.5"


# --------------------------------------------------------------------------- sensitivity


def test_sensitivity_is_the_weight_where_the_tuple_can_be_the_level_and_another_value():
    q = parse_query("level:1:2,-3,1,1,4")
    domains = [Finite([0, 1, 2]), Finite([0, 1]), Finite([0, 2]), Finite([1]), Interval(0.0, 5.0)]
    assert [q.sensitivity(k, domains) for k in range(5)] == [2.0, 3.0, 0.0, 0.0, 4.0]
    assert q.sensitivity_pair(1, domains) == (1.0, 0.0) and q.sensitivity_pair(2, domains) is None


def test_dp_of_a_level_count_is_each_weight_over_the_scale():
    found = ddpbayes.audit(household(), "level:1:1,-2,0", "laplace", "dp", scale=B)
    assert found.per_target == pytest.approx([1 / B, 2 / B, 0.0])


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("spec, fragment", [
    ("level", "needs the value counted"),
    ("level:x", "comma-separated numbers"),
    ("level:1,2", "counts one value"),
    ("level:1:", "needs comma-separated weights"),
    ("level:1:1,nan,1", "finite numbers"),
    ("level:1:1,1", "has 2 weights but the model has 5 tuples"),
])
def test_bad_level_queries_are_one_line_and_exit_2(capsys, spec, fragment):
    code = main(["audit", CHAIN, "--query", spec, "--mechanism", "laplace", "--scale", "1", "--notion", "idp"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and fragment in err and "\n" not in err and "Traceback" not in err


def test_the_parser_refuses_a_level_without_a_value():
    with pytest.raises(InputError, match="level:L or level:L:w0,w1"):
        parse_query("level:")


# --------------------------------------------------------------------------- a report spec's query = "cluster:L"


def test_cluster_is_the_count_of_the_cluster_on_a_binary_fit():
    assert cluster_query("cluster", np.array([True, False, True]), None, Path("s.toml")) == "linear:1,0,1"
    assert cluster_query("level:1", np.array([True, False]), ["a", "b", "c"], Path("s.toml")) == "level:1"


@pytest.mark.parametrize("query, levels, says", [
    ("cluster", ["a", "b", "c"], "s.toml: key 'query' 'cluster' needs a level of the categorical outcome: use "
                                 "cluster:L, L one of a, b, c"),
    ("cluster:d", ["a", "b", "c"], "'cluster:d' names no level of the categorical outcome"),
    ("cluster:1", None, "names a level ('cluster:1') but the fit's outcome is binary: use 'cluster'"),
])
def test_cluster_queries_that_do_not_fit_the_outcome_are_one_line(query, levels, says):
    with pytest.raises(InputError) as e:
        cluster_query(query, np.array([True, False, True]), levels, Path("s.toml"))
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_spec_naming_no_level_after_cluster_is_refused_before_fitting(tmp_path, capsys):
    spec = write_spec(tmp_path)
    spec.write_text(spec.read_text().replace('query = "cluster"', 'query = "cluster:"'))
    code = main(["report", str(spec), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "must name a level after 'cluster:'" in err, err
    assert not (tmp_path / "out").exists()
