"""`ddpbayes fit` (issue #41, DESIGN §9): the clustered template's checks against hand-written
statistics, bad input as one line (exit 2, nothing written), a fit that does not converge, the
written model file, and (slow) parameter recovery and the dependence checks on simulated data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.special import expit

from ddpbayes.cli.main import main
from ddpbayes.fitting.checks import icc, psis_loo

ROOT = Path(__file__).resolve().parents[1]
GAMBIA = ROOT / "models" / "data" / "gambia_malaria.csv"


def anova_icc(y: np.ndarray, cluster: np.ndarray) -> float:
    """The one-way ANOVA ICC from the rows themselves (sums of squares about the means)."""
    labels = np.unique(cluster)
    groups = [y[cluster == c] for c in labels]
    big_n, k = len(y), len(groups)
    grand = y.mean()
    msb = sum(len(g) * (g.mean() - grand) ** 2 for g in groups) / (k - 1)
    msw = sum(((g - g.mean()) ** 2).sum() for g in groups) / (big_n - k)
    n0 = (big_n - sum(len(g) ** 2 for g in groups) / big_n) / (k - 1)
    return (msb - msw) / (msb + (n0 - 1) * msw)


def test_the_icc_from_cluster_totals_is_the_anova_estimator():
    rng = np.random.default_rng(5)
    cluster = rng.integers(0, 7, 120)
    y = rng.binomial(1, expit(rng.normal(0, 1, 7))[cluster])
    sizes = np.bincount(cluster)
    assert icc(np.bincount(cluster, weights=y), sizes) == pytest.approx(anova_icc(y, cluster), rel=1e-12)


def test_the_gambia_icc_is_the_documented_one():
    """The data README: ICC = 0.160 with MSB = 1.348, MSW = 0.1934, n0 = 31.24 (65 villages)."""
    import pandas as pd

    table = pd.read_csv(GAMBIA, index_col=0)
    village = pd.factorize(table["x"].astype(str) + "," + table["y"].astype(str))[0]
    y = table["pos"].to_numpy()
    value = float(icc(np.bincount(village, weights=y), np.bincount(village)))
    assert value == pytest.approx(anova_icc(y, village), rel=1e-12)
    assert round(value, 3) == 0.160


def test_loo_over_distinct_rows_equals_arviz_over_every_row():
    """Rows sharing a pattern and an outcome share a pointwise log-likelihood: the weighted PSIS-LOO
    equals ArviZ's `loo` over the rows spelt out."""
    import arviz as az

    rng = np.random.default_rng(3)
    draws, patterns = 800, 5
    p = rng.beta(2 + np.arange(patterns), 3, (draws, patterns))
    ll_unique = np.concatenate([np.log(p), np.log1p(-p)], axis=1)
    weights = rng.integers(1, 6, 2 * patterns)
    ll_rows = np.repeat(ll_unique, weights, axis=1)
    idata = az.from_dict(posterior={"p": p[None]}, log_likelihood={"y": ll_rows[None]})
    reference = az.loo(idata, reff=1.0)
    mine = psis_loo(ll_unique, weights.astype(float), reff=1.0)
    assert mine["elpd"] == pytest.approx(reference.elpd_loo, rel=1e-10)
    assert mine["se"] == pytest.approx(reference.se, rel=1e-10)


def table(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


GOOD = "village,pos,age\n" + "".join(f"v{i // 4},{(i * 7) % 3 == 0:d},{i % 5}\n" for i in range(24))


def fit_cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["fit", *argv, "--quiet"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


BAD = {
    "missing column": (GOOD, ["--cluster", "village", "--outcome", "positive"], r"column 'positive' is not in"),
    "mistyped covariate": ("village,pos,age\n" + "a,0,1\na,1,x\nb,0,2\nb,1,3\n",
                           ["--cluster", "village", "--outcome", "pos", "--covariates", "age"], r"must hold numbers"),
    "two text levels": ("village,pos\na,yes\na,no\nb,no\nb,yes\n", ["--cluster", "village", "--outcome", "pos"],
                        r"has 2 level\(s\) \(no, yes\).*code two levels as 0/1"),
    "fractional outcome": ("village,pos\na,0\na,2.5\nb,1\nb,0\n", ["--cluster", "village", "--outcome", "pos"],
                           r"fractional number \(2\.5, data row 2\)"),
    "21 levels": ("village,pos\n" + "".join(f"v{i % 2},{i}\n" for i in range(21)),
                  ["--cluster", "village", "--outcome", "pos"], r"has 21 levels, over 20"),
    "categorical with coords": ("village,pos,x,y\na,0,0,0\na,2,0,0\nb,1,1,1\nb,0,1,1\nc,1,2,0\nc,2,2,0\n",
                                ["--cluster", "village", "--outcome", "pos", "--coords", "x,y"],
                                r"--coords is not built for a categorical outcome"),
    "ordered two text levels": ("village,pos\na,no\na,yes\nb,yes\nb,no\n", ["--cluster", "village", "--outcome",
                                                                            "pos", "--ordered"],
                                r"has two levels \(no, yes\): with two levels the ordered"),
    "a cluster of one": ("village,pos\na,0\na,1\nb,1\nc,0\nc,1\n", ["--cluster", "village", "--outcome", "pos"],
                         r"cluster 'b' .* has one row"),
    "all-zero outcome": ("village,pos\na,0\na,0\nb,0\nb,0\n", ["--cluster", "village", "--outcome", "pos"],
                         r"is 0 in every row: nothing to fit"),
    "NaN": ("village,pos\na,0\na,\nb,1\nb,0\n", ["--cluster", "village", "--outcome", "pos"],
            r"missing value.* data row 2"),
    "NaN cluster": ("village,pos\na,0\n,1\nb,1\nb,0\n", ["--cluster", "village", "--outcome", "pos"],
                    r"column 'village' .* missing value"),
    "one cluster": ("village,pos\na,0\na,1\n", ["--cluster", "village", "--outcome", "pos"], r"has one cluster"),
    "constant covariate": ("village,pos,age\na,0,1\na,1,1\nb,1,1\nb,0,1\n",
                           ["--cluster", "village", "--outcome", "pos", "--covariates", "age"], r"same in every row"),
    "no rows": ("village,pos\n", ["--cluster", "village", "--outcome", "pos"], r"has no data rows"),
    "out not .py": (GOOD, ["--cluster", "village", "--outcome", "pos", "--out", "{tmp}/m.txt"], r"must name a \.py"),
    "negative draws": (GOOD, ["--cluster", "village", "--outcome", "pos", "--draws", "-1"], r"--draws must be a positive"),
    "one chain": (GOOD, ["--cluster", "village", "--outcome", "pos", "--chains", "1"], r"--chains must be at least 2"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_exit_2_and_nothing_written(case, tmp_path, capsys):
    text, argv, message = BAD[case]
    path = table(tmp_path, text)
    out = tmp_path / "model.py"
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, stdout, stderr = fit_cli(capsys, str(path), "--template", "clustered", *argv,
                                   *([] if "--out" in argv else ["--out", str(out)]))
    assert code == 2 and stdout == ""
    assert len(stderr.strip().splitlines()) == 1 and stderr.startswith("error: ")
    import re

    assert re.search(message, stderr), stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


def test_a_huge_table_is_refused_before_it_is_read_whole(tmp_path, capsys):
    """10^7 rows: refused after reading at most --max-rows + 1 of them (the default 10^6)."""
    import resource

    path = tmp_path / "huge.csv"
    path.write_text("village,pos\n" + "a,0\nb,1\n" * 5_000_000)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code, _, stderr = fit_cli(capsys, str(path), "--template", "clustered", "--cluster", "village", "--outcome", "pos")
    assert code == 2 and "more than 1,000,000 rows (raise --max-rows" in stderr
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 400_000  # KiB: not the 10^7 rows


def test_a_parquet_table_without_pyarrow_is_one_line(tmp_path, capsys):
    pytest.importorskip("pandas")
    try:
        import pyarrow  # noqa: F401

        pytest.skip("pyarrow is installed")
    except ImportError:
        pass
    path = table(tmp_path, "not parquet", "t.parquet")
    code, _, stderr = fit_cli(capsys, str(path), "--template", "clustered", "--cluster", "v", "--outcome", "pos")
    assert code == 2 and "needs pyarrow" in stderr


SMALL = "village,pos,age\n" + "".join(f"v{i // 5},{int((i * 7) % 3 == 0) ^ (i // 5 % 2)},{i % 4}\n" for i in range(30))


@pytest.fixture(scope="module")
def short_fits(tmp_path_factory):
    """One fit of 30 rows in 6 villages far too short to converge (2 chains x 30 draws), run without and
    with --force (the second compiles from PyTensor's cache)."""
    folder = tmp_path_factory.mktemp("fits")
    data = folder / "small.csv"
    data.write_text(SMALL)
    runs = {}
    for force in (False, True):
        out = folder / f"{'forced' if force else 'plain'}.py"
        argv = ["fit", str(data), "--template", "clustered", "--cluster", "village", "--outcome", "pos", "--covariates",
                "age", "--draws", "30", "--tune", "30", "--chains", "2", "--seed", "7", "--out", str(out),
                "--format", "json", "--quiet", *(["--force"] if force else [])]
        import contextlib
        import io

        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = main(argv)
        runs[force] = (code, json.loads(stdout.getvalue()), stderr.getvalue(), out)
    return folder, runs


@pytest.mark.slow  # two short fits: four PyMC compilations, 20 s on an idle machine
def test_a_fit_that_does_not_converge_names_the_parameter_and_writes_nothing(short_fits):
    folder, runs = short_fits
    code, doc, stderr, out = runs[False]
    assert code == 4 and doc["model"] is None and not doc["diagnostics"]["ok"]
    assert "bulk ESS" in stderr and "nothing written" in stderr
    assert any(f.startswith(("intercept", "beta_age", "sigma", "u[")) for f in doc["diagnostics"]["failures"])
    assert not out.exists() and not out.with_name("plain.fit.json").exists()
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith("plain")) == []


@pytest.mark.slow
def test_forced_the_model_file_is_written_and_is_the_template_with_fixed_parameters(short_fits):
    """The written model loads like any model; its log-density at a point is the template's, by hand,
    with the posterior means (and with one draw under parameters="draw:K")."""
    import ddpbayes
    from scipy.stats import norm

    _, runs = short_fits
    code, doc, stderr, out = runs[True]
    assert code == 4 and doc["model"] == str(out) and "written anyway" in stderr
    assert {"intercept", "beta_age", "sigma"} == set(doc["parameters"])
    fit = json.loads(out.with_name("forced.fit.json").read_text())
    assert out.with_name("forced.posterior.nc").stat().st_size > 0
    rows = [line.split(",") for line in SMALL.splitlines()[1:]]
    village = np.array([int(r[0][1:]) for r in rows])
    y = np.array([int(r[1]) for r in rows])
    age = np.array([float(r[2]) for r in rows])
    z = (age - age.mean()) / age.std()
    u = np.linspace(-1, 1, 6)
    for parameters, value in (("mean", lambda name: fit["parameters"][name]["mean"]),
                              ("draw:5", lambda name: fit["draws"][name][5])):
        model = ddpbayes.load_model(str(out), {"parameters": parameters})
        assert model.n == 30
        logp = model.model.compile_logp()({"u": u, "y": y})
        eta = value("intercept") + value("beta_age") * z + u[village]
        expected = norm.logpdf(u, 0, value("sigma")).sum() + (y * eta - np.logaddexp(0, eta)).sum()
        assert logp == pytest.approx(expected, rel=1e-9)


TRUTH = {"intercept": -0.5, "beta": 0.8, "sigma": 0.9}


def simulate(seed: int, sigma: float, clusters: int = 40, size: int = 15) -> tuple[str, dict[str, float]]:
    """A table from the clustered template: y ~ Bernoulli(logit^-1(a + b x + u_c)), u_c ~ Normal(0, sigma),
    x ~ Normal(0, 1); and the truth on the fit's scale (x standardised by its sample mean m and SD s:
    a + b x = (a + b m) + (b s) (x - m) / s)."""
    rng = np.random.default_rng(seed)
    cluster = np.repeat(np.arange(clusters), size)
    x = rng.normal(0.0, 1.0, cluster.size)
    u = rng.normal(0.0, 1.0, clusters) * sigma
    y = rng.binomial(1, expit(TRUTH["intercept"] + TRUTH["beta"] * x + u[cluster]))
    text = "village,pos,x\n" + "".join(f"c{c},{v},{a:.17g}\n" for c, v, a in zip(cluster, y, x))
    truth = {"intercept": TRUTH["intercept"] + TRUTH["beta"] * x.mean(), "beta_x": TRUTH["beta"] * x.std(),
             "sigma": sigma}
    return text, truth


def fit_simulated(tmp_path: Path, seed: int, sigma: float) -> tuple[dict, dict]:
    import ddpbayes

    text, truth = simulate(seed, sigma)
    path = table(tmp_path, text, f"sim{seed}.csv")
    return ddpbayes.fit(path, cluster="village", outcome="pos", covariates="x", seed=seed, draws=500).to_dict(), truth


@pytest.mark.slow
def test_the_parameters_are_recovered_and_the_dependence_flagged_over_seeds(tmp_path):
    """Five tables from the template (40 clusters of 15, sigma 0.9): the 94% HDIs of intercept, beta and
    sigma miss the truth at most 3 times in 15 (expected 0.9; 4 or more: probability 1.1%), every fit
    converges, and the checks find the dependence in each."""
    misses = 0
    for seed in range(5):
        doc, truth = fit_simulated(tmp_path, seed, TRUTH["sigma"])
        assert doc["diagnostics"]["ok"], doc["diagnostics"]["failures"]
        for name, value in truth.items():
            low, high = doc["parameters"][name]["hdi"]
            misses += not low <= value <= high
        assert doc["checks"]["dependence_supported"]
        assert doc["checks"]["icc"]["independent"]["p_value"] < 0.01
    assert misses <= 3


@pytest.mark.slow
def test_the_checks_do_not_flag_dependence_in_independent_records(tmp_path):
    """sigma = 0: independent records; the template without cluster effects reproduces the ICC."""
    for seed in (11, 12):
        doc, _ = fit_simulated(tmp_path, seed, 0.0)
        assert not doc["checks"]["dependence_supported"]
        assert doc["checks"]["icc"]["independent"]["p_value"] >= 0.01


@pytest.mark.slow
def test_same_seed_same_document_and_the_text_says_what_failed(short_fits):
    """The two short fits share data and seed: their documents differ only where --force wrote files."""
    from ddpbayes.cli.fit_cmd import fit_text

    _, runs = short_fits
    plain, forced = runs[False][1], runs[True][1]
    assert forced["model"] and plain["model"] is None
    ignore = {"model", "posterior", "seconds"}
    assert {k: v for k, v in plain.items() if k not in ignore} == {k: v for k, v in forced.items() if k not in ignore}
    text = fit_text(plain)
    assert "convergence: FAILED" in text and "bulk ESS" in text and "model: not written" in text
    assert "intra-cluster correlation: data" in text and "LOO elpd" in text


def test_the_fitted_parameters_are_the_means_or_one_draw_and_nothing_else(tmp_path):
    from ddpbayes.errors import InputError
    from ddpbayes.fitting.fitted import FORMAT, read_fit

    doc = {"format": FORMAT, "template": "clustered", "data": {"covariates": ["age"]},
           "parameters": {"intercept": {"mean": -0.5}, "beta_age": {"mean": 0.3}, "sigma": {"mean": 1.2}},
           "draws": {"intercept": [-0.4, -0.6], "beta_age": [0.2, 0.4], "sigma": [1.1, 1.3]},
           "table": {"clusters": ["a", "b"], "cluster_index": [0, 0, 1], "x": [-1.0, 0.0, 1.0]}}
    path = tmp_path / "m.fit.json"
    path.write_text(json.dumps(doc))
    mean, draw = read_fit(path), read_fit(path, "draw:1")
    assert (mean.intercept, mean.beta.tolist(), mean.sigma) == (-0.5, [0.3], 1.2)
    assert (draw.intercept, draw.beta.tolist(), draw.sigma) == (-0.6, [0.4], 1.3)
    assert mean.x.shape == (3, 1) and mean.cluster_index.tolist() == [0, 0, 1] and mean.n_clusters == 2
    for bad in ("draw:2", "draw:-1", "median", "draws:5"):
        with pytest.raises(InputError, match=r"'mean' or 'draw:K' with K from 0 to 1"):
            read_fit(path, bad)
    path.write_text("{not json")
    with pytest.raises(InputError, match="cannot be read"):
        read_fit(path)
