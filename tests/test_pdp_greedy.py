"""Seed 003's greedy pdp search (Li et al.'s weighted hierarchical graph, top-k known sets per
layer) for every engine, labelled a lower bound (issue 13; DESIGN §3.2)."""

from __future__ import annotations

import json
import math

import numpy as np
import pymc as pm
import pytest

import ddpbayes
import ddpbayes.auditing.run as audit_module
from ddpbayes import DependenceModel, InputError, Interval, RunSettings
from ddpbayes.auditing import judge
from ddpbayes.cli.main import main
from ddpbayes.engines import ENGINES, AdversaryLeakage, Engine, Witness
from ddpbayes.notions.lattice import greedy_pdp, layer_bounds
from ddpbayes.mechanisms import Laplace
from ddpbayes.problem import Adversary, Problem
from ddpbayes.progress import Progress
from ddpbayes.queries import parse_query
from ddpbayes.reports import load_spec
from ddpbayes.settings import DEFAULT_TOP_K

LOWER_BOUND = "greedy pdp search (top-k = {k} per layer, Li et al.): a lower bound on the pdp leakage, not a verification"
CHAIN = ["--query", "count", "--mechanism", "laplace", "--epsilon", "1", "--notion", "pdp"]
GAUSSIAN_QUERY = "linear:1,-1,2,0.5,-2,1"


def random_gaussian(n: int, seed: int) -> DependenceModel:
    """X ~ N(0, A A^T / n + 0.3 I), A standard normal: mixed-sign correlations, domains [0, 1]."""
    a = np.random.default_rng(seed).normal(size=(n, n))
    with pm.Model() as m:
        pm.MvNormal("x", mu=np.zeros(n), cov=a @ a.T / n + 0.3 * np.eye(n))
    return DependenceModel(m, tuples="x", domains=Interval(0, 1))


@pytest.fixture(scope="module")
def models(models_dir) -> dict[str, tuple[DependenceModel, str]]:
    load = ddpbayes.load_model
    return {
        "household": (load(models_dir / "household.py", {"n": 5}), "count"),
        "markov_chain": (load(models_dir / "markov_chain.py", {"n": 6, "p01": 0.1, "p10": 0.4}), "count"),
        "mixed_correlation": (load(models_dir / "mixed_correlation.py", {}), "sum"),
        "markov_default": (load(models_dir / "markov_chain.py", {"n": 6}), "count"),
        "random_gaussian": (random_gaussian(6, seed=5), GAUSSIAN_QUERY),
    }


def pdp(model: DependenceModel, query: str, **kw) -> ddpbayes.AuditResult:
    """pdp under Laplace(1), without the information measures (no test here reads them; they took 90% of the
    written-out greedy's ~150 audits)."""
    return ddpbayes.audit(model, query, "laplace", "pdp", scale=1.0, information=None, **kw)


# ----------------------------------------------------------------------------- (a) against the exhaustive pdp


@pytest.mark.parametrize("name", ["household", "markov_chain", "mixed_correlation"])
def test_wide_greedy_is_exhaustive_and_narrow_lies_between_idp_and_pdp(models, name):
    """k = 2^(n-1) keeps every known set of every layer: the exhaustive pdp, target by target.
    k = 1 visits fewer: at most pdp, and at least idp (layer 0, K = {}, is always visited)."""
    model, query = models[name]
    exhaustive = pdp(model, query)
    idp = ddpbayes.audit(model, query, "laplace", "idp", scale=1.0)
    wide = pdp(model, query, pdp_greedy=2 ** (model.n - 1))
    assert wide.leakage == pytest.approx(exhaustive.leakage, rel=1e-12)
    assert wide.per_target == pytest.approx(exhaustive.per_target, rel=1e-12)
    narrow = pdp(model, query, pdp_greedy=1)
    for g, e, i in zip(narrow.per_target, exhaustive.per_target, idp.per_target):
        assert i * (1 - 1e-12) <= g <= e * (1 + 1e-12)
    assert narrow.reason == LOWER_BOUND.format(k=1)


def test_a_narrow_search_misses_what_a_wider_one_finds(models):
    """Why the label: on a 6-tuple Gaussian model with mixed-sign correlations, k = 1 misses
    target 3's worst known set by more than a quarter; k = 2 finds it."""
    model, query = models["random_gaussian"]
    exhaustive = pdp(model, query, targets=[3])
    assert pdp(model, query, targets=[3], pdp_greedy=1).leakage < 0.75 * exhaustive.leakage
    assert pdp(model, query, targets=[3], pdp_greedy=2).leakage == pytest.approx(exhaustive.leakage, rel=1e-12)


def test_layer_bounds():
    """Per target: all 2^(n-1) known sets when k keeps every layer; 1 + (n-1) + ... + 1 for k = 1."""
    assert sum(layer_bounds(6, 32)) == 2**5 and layer_bounds(6, 10) == [1, 5, 10, 10, 5, 1]
    assert layer_bounds(6, 1) == [1, 5, 4, 3, 2, 1]
    assert layer_bounds(6, 2) == [1, 5, 8, 6, 4, 1]  # layer 2: 2 sets x 4 tuples; layer 5: the one set left


# ----------------------------------------------------------------------------- (b) against a greedy written out


def brute_greedy(model: DependenceModel, query: str, target: int, top_k: int, leak: dict) -> tuple[float, frozenset]:
    """The greedy search with plain loops, one audit per known set (memoised in `leak`): rank a
    layer by the value rounded to 9 digits, then the known set's sorted tuples; the best so far
    is replaced only by a strictly larger value."""
    def value(known: frozenset) -> float:
        if known not in leak:
            leak[known] = round(pdp(model, query, targets=[target], known=sorted(known)).leakage, 9)
        return leak[known]

    best = (value(frozenset()), frozenset())
    frontier = [frozenset()]
    for _ in range(1, model.n):
        layer = {k | {j} for k in frontier for j in range(model.n) if j != target and j not in k}
        ranked = sorted(layer, key=lambda k: (-value(k), sorted(k)))
        if value(ranked[0]) > best[0]:
            best = (value(ranked[0]), ranked[0])
        frontier = ranked[:top_k]
    return best


@pytest.mark.parametrize("name", ["random_gaussian", "markov_default"])
def test_search_equals_a_greedy_written_out(models, name):
    """Same adversary and value, target by target, for k = 1 and 2: on the Gaussian model the two
    differ (k = 1 goes astray at target 3); the Markov chain has many ties (every known set
    holding a neighbour of the target leaks exactly 1), so its path follows the tie rule."""
    model, query = models[name]
    for target in range(model.n):
        leak: dict = {}
        for k in (1, 2):
            value, known = brute_greedy(model, query, target, k, leak)
            found = pdp(model, query, targets=[target], pdp_greedy=k)
            assert found.leakage == pytest.approx(value, abs=1e-9), (target, k)
            assert found.witness.adversary == Adversary(target, known), (target, k)


class Scripted(Engine):
    """leak(0, K) read from a table (0 elsewhere), recording every adversary it is asked about:
    the search needs nothing else from an engine."""

    name = "scripted"

    def __init__(self, table: dict[tuple[int, ...], float]):
        self.table, self.asked = table, []

    def supports(self, problem):
        return None

    def dependence_sets(self, problem):
        return [frozenset()] * problem.model.n

    def leakage(self, problem):
        self.asked += problem.adversaries
        return [AdversaryLeakage(a, self.table.get(tuple(sorted(a.known)), 0.0), Witness(a, None, 1.0, 0.0, None))
                for a in problem.adversaries]


def test_ties_go_to_the_first_known_set_and_extensions_are_evaluated_once(household):
    """Target 0 of four tuples: {1} and {2} tie in layer 1 (to rounding), so k = 1 keeps {1} and
    finds {1, 3}; keeping {2} would have found {2, 3}. With k = 2, {1, 2} is reached from both
    kept sets and evaluated once."""
    table = {(): 0.5, (1,): 1.0, (2,): 1.0 + 1e-15, (3,): 0.5, (1, 2): 0.2, (1, 3): 3.0, (2, 3): 3.0, (1, 2, 3): 1.0}
    problem = Problem(household(n=4), parse_query("count"), Laplace(1.0))
    quiet = Progress("pdp", 0, "adversaries", enabled=False)
    engine = Scripted(table)
    [found] = greedy_pdp(engine, problem, [0], 1, 2, quiet)
    assert (found.adversary, found.value) == (Adversary(0, frozenset({1, 3})), 3.0)
    assert [tuple(sorted(a.known)) for a in engine.asked] == [(), (1,), (2,), (3,), (1, 2), (1, 3), (1, 2, 3)]
    engine = Scripted(table)
    greedy_pdp(engine, problem, [0], 2, 2, quiet)
    assert [tuple(sorted(a.known)) for a in engine.asked] == [(), (1,), (2,), (3,), (1, 2), (1, 3), (2, 3), (1, 2, 3)]
    assert len(engine.asked) == sum(layer_bounds(4, 2))


# ----------------------------------------------------------------------------- (c) verdicts


def test_verdict_fails_below_and_is_never_pass_above(models):
    model, query = models["markov_default"]
    found = pdp(model, query, pdp_greedy=1).leakage
    above = pdp(model, query, pdp_greedy=1, claim=found * 1.1)
    assert above.verdict == "inconclusive"
    assert "lower bound cannot pass" in above.verdict_reason and above.reason == LOWER_BOUND.format(k=1)
    below = pdp(model, query, pdp_greedy=1, claim=found * 0.9)
    assert below.verdict == "fail"
    doc = below.to_dict()
    assert doc["reason"] == LOWER_BOUND.format(k=1) and doc["settings"]["pdp_greedy"] == 1


def test_an_estimate_under_a_lower_bound_is_never_pass():
    """judge: the interval clears the claim, yet a lower bound on the notion cannot pass it."""
    adv = Adversary(0)
    estimate = AdversaryLeakage(adv, 1.0, Witness(adv, None, 1.0, 0.0, None), ci=(0.9, 1.1), diagnostics={"ok": True})
    assert judge(estimate, 2.0)[0] == "pass"
    verdict, reason = judge(estimate, 2.0, lower_bound=True)
    assert verdict == "inconclusive" and "lower bound cannot pass" in reason
    assert judge(estimate, 0.5, lower_bound=True)[0] == "fail"


# ----------------------------------------------------------------------------- limits and progress


def test_worst_case_over_the_limit_is_refused_before_any_work(models):
    """markov_chain n = 6, k = 2: 6 targets x (1 + 5 + 8 + 6 + 4 + 1) = 150 adversaries at most."""
    model, query = models["markov_default"]
    with pytest.raises(InputError, match=r"up to 150 adversaries .* over the limit of 149 .* lower --top-k"):
        pdp(model, query, pdp_greedy=2, max_adversaries=149)
    assert pdp(model, query, pdp_greedy=2, max_adversaries=150).leakage > 0


def test_progress_counts_to_the_worst_case(models, monkeypatch, capsys):
    """k = 2 on 6 tuples meets duplicate extensions; they count as done, so the line ends at
    150/150 (7 adversaries per engine call: layers span several calls)."""
    model, query = models["markov_default"]
    monkeypatch.setattr(audit_module, "CHUNK", 7)
    pdp(model, query, pdp_greedy=2, progress=True)
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines and "150/150 adversaries" in lines[-1] and "pdp greedy (top-k = 2)" in lines[-1]


# ----------------------------------------------------------------------------- (d), (e) the command line


def one_line(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def test_cli_refuses_the_whole_lattice_and_offers_the_greedy_search(models_dir, capsys):
    code = main(["audit", str(models_dir / "markov_chain.py"), "-p", "n=30", *CHAIN])
    lines = one_line(capsys)
    assert code == 2 and len(lines) == 1 and "--search greedy" in lines[0], lines


def test_cli_greedy_runs_and_says_lower_bound(models_dir, capsys):
    """n = 14 (about 3 s); n = 30 takes 30 s with the structured engine: deep layers know many
    tuples, and each one that borders an unknown day doubles the x_K it enumerates."""
    code = main(["audit", str(models_dir / "markov_chain.py"), "-p", "n=14", *CHAIN, "--pdp-greedy", "1",
                 "--target", "7", "--engine", "structured", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["reason"] == LOWER_BOUND.format(k=1) and out["settings"]["pdp_greedy"] == 1
    assert out["engine"] == "structured" and out["witness"]["target"] == 7
    assert [i for i, v in enumerate(out["per_target"]) if v is not None] == [7]
    assert math.isfinite(out["leakage"]) and out["verdict"] is None


@pytest.mark.parametrize("flags, needle", [
    (["--pdp-greedy", "-1"], "--pdp-greedy must be a non-negative integer"),
    (["--pdp-greedy", "x"], "argument --pdp-greedy: invalid int value: 'x'"),
    (["--pdp-greedy", "2", "--known", "1"], "--known fixes one"),
    (["--pdp-greedy", "2", "--lattice"], "--lattice lists every pdp adversary"),
])
def test_cli_bad_greedy_is_one_line(models_dir, capsys, flags, needle):
    code = main(["audit", str(models_dir / "household.py"), "-p", "n=3", *CHAIN, *flags])
    lines = one_line(capsys)
    assert code == 2 and len(lines) == 1 and needle in lines[0], lines


def test_greedy_with_another_notion_and_bad_settings_are_refused(models):
    model, query = models["household"]
    with pytest.raises(InputError, match="use it with --notion pdp, not idp"):
        ddpbayes.audit(model, query, "laplace", "idp", scale=1.0, pdp_greedy=2)
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(InputError, match="--pdp-greedy must be a non-negative integer"):
            RunSettings(pdp_greedy=bad)


# ----------------------------------------------------------------------------- --search full|greedy --top-k K


def cli_json(capsys, *flags) -> tuple[int, dict]:
    code = main(["audit", *flags, "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_search_greedy_is_pdp_greedy(models_dir, capsys):
    """--search greedy --top-k K and --pdp-greedy K are one search: the same JSON but for the time;
    --search greedy alone keeps DEFAULT_TOP_K sets per layer; --search full is the default. Without the
    information measures (the search does not change them; they took most of the six runs' time)."""
    base = [str(models_dir / "markov_chain.py"), "-p", "n=6", *CHAIN, "--information", "none"]
    runs = {}
    for name, flags in {"search": ["--search", "greedy", "--top-k", "2"], "old": ["--pdp-greedy", "2"],
                        "default_k": ["--search", "greedy"], "explicit_k": ["--search", "greedy", "--top-k",
                                                                             str(DEFAULT_TOP_K)],
                        "full": ["--search", "full"], "plain": []}.items():
        code, runs[name] = cli_json(capsys, *base, *flags)
        assert code == 0, name
        runs[name].pop("seconds")
    assert runs["search"] == runs["old"] and runs["default_k"] == runs["explicit_k"]
    assert runs["full"] == runs["plain"] and runs["plain"]["lower_bound"] is False and runs["plain"]["reason"] is None
    assert runs["search"]["lower_bound"] is True and runs["search"]["reason"] == LOWER_BOUND.format(k=2)
    assert runs["default_k"]["reason"] == LOWER_BOUND.format(k=DEFAULT_TOP_K)


def test_text_output_labels_a_lower_bound(models_dir, capsys):
    flags = ["--search", "greedy", "--top-k", "1"]
    code = main(["audit", str(models_dir / "markov_chain.py"), "-p", "n=6", *CHAIN, *flags])
    out = capsys.readouterr().out
    assert code == 0
    assert any(line.startswith("leakage    >= ") and line.endswith("(a lower bound: greedy search)")
               for line in out.splitlines()), out
    assert f"reason     {LOWER_BOUND.format(k=1)}" in out


@pytest.mark.parametrize("flags, needle", [
    (["--top-k", "2"], "--top-k sets how many known sets the greedy search keeps per layer"),
    (["--search", "full", "--top-k", "2"], "use it with --search greedy"),
    (["--search", "greedy", "--top-k", "0"], "--top-k must be a positive integer, got 0"),
    (["--search", "greedy", "--pdp-greedy", "2"], "--pdp-greedy K is --search greedy --top-k K: give one of them"),
    (["--search", "greedy", "--known", "1"], "--known fixes one"),
    (["--search", "greedy", "--lattice"], "--lattice lists every pdp adversary"),
    (["--search", "bogus"], "argument --search: invalid choice: 'bogus'"),
])
def test_cli_bad_search_is_one_line(models_dir, capsys, flags, needle):
    code = main(["audit", str(models_dir / "household.py"), "-p", "n=3", *CHAIN, *flags])
    lines = one_line(capsys)
    assert code == 2 and len(lines) == 1 and needle in lines[0], lines


def test_search_greedy_with_another_notion_is_one_line(models_dir, capsys):
    flags = [f if f != "pdp" else "idp" for f in CHAIN]
    code = main(["audit", str(models_dir / "household.py"), "-p", "n=3", *flags, "--search", "greedy"])
    lines = one_line(capsys)
    assert code == 2 and len(lines) == 1 and "use it with --notion pdp, not idp" in lines[0], lines


@pytest.mark.parametrize("seed", range(4))
def test_the_gaussian_engines_own_greedy_visits_what_the_search_visits(seed):
    """The gaussian engine's rank-one greedy (`pdp_worst(top_k=k)`, Python API and
    bench_gaussian.py) against the search every engine uses (`audit --search greedy`): the same
    known set and value for every target and k on random models (no ties), 6 to 8 tuples."""
    rng = np.random.default_rng(seed)
    n = 6 + seed % 3
    model = random_gaussian(n, seed=100 + seed)
    query = "linear:" + ",".join(f"{w:.3f}" for w in rng.normal(size=n))
    problem = Problem(model, parse_query(query), Laplace(1.0))
    for k in (1, 2, 3):
        own = ENGINES["gaussian"].pdp_worst(problem, range(n), top_k=k)
        found = pdp(model, query, pdp_greedy=k, engine="gaussian")
        assert [r.value for r in own] == pytest.approx(found.per_target, rel=1e-10)
        best = max(range(n), key=lambda i: own[i].value)
        assert found.witness.adversary == own[best].adversary


SPEC = """
model = "{model}"
params = {{ n = 4 }}
query = "count"
notions = {notions}
{extra}
[mechanism]
kind = "laplace"
scale = 1.0
"""


@pytest.mark.parametrize("notions, extra, needle", [
    ('["idp", "pdp"]', 'top_k = 2', "key 'top_k': top_k sets how many known sets"),
    ('["idp", "pdp"]', 'search = "greedy"\ntop_k = 0', "key 'top_k': top_k must be a positive integer"),
    ('["idp", "pdp"]', 'search = "wide"', "key 'search': unknown search 'wide'"),
    ('["idp"]', 'search = "greedy"', "key 'search' sets pdp's search, but 'notions' has no pdp"),
    ('["pdp"]', 'search = "greedy"\nknown = [1]', "key 'search': the greedy search searches the known sets"),
])
def test_bad_spec_search_is_refused(models_dir, tmp_path, notions, extra, needle):
    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(model=models_dir / "markov_chain.py", notions=notions, extra=extra))
    with pytest.raises(InputError, match=None) as info:
        load_spec(path)
    assert needle in str(info.value)


def test_spec_search_applies_to_pdp_only(models_dir, tmp_path):
    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(model=models_dir / "markov_chain.py", notions='["idp", "pdp"]',
                                extra='search = "greedy"\ntop_k = 2'))
    spec = load_spec(path)
    assert spec.audit_kwargs("pdp")["settings"].pdp_greedy == 2
    assert spec.audit_kwargs("idp")["settings"].pdp_greedy == 0
    assert spec.to_dict()["search"] == "greedy" and spec.to_dict()["top_k"] == 2


def test_report_labels_the_greedy_pdp_a_lower_bound(models_dir, tmp_path):
    """A report with search = "greedy": the pdp audit is the greedy one (a lower bound, said in the
    finding and the summary table), while the lattice picture still lists every node."""
    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(model=models_dir / "markov_chain.py", notions='["idp", "pdp"]',
                                extra='search = "greedy"\ntop_k = 1\ncalibrate = false\nsweep = [0.5, 1.0]'))
    assert main(["report", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert data["audits"]["pdp"]["lower_bound"] is True
    assert data["audits"]["pdp"]["reason"] == LOWER_BOUND.format(k=1)
    assert "pdp >= " in data["finding"]
    assert data["lattice"]["complete"] and len(data["lattice"]["points"]) == 4 * 2**3
    page = (tmp_path / "out" / "report.md").read_text()
    assert "(lower bound)" in page and "pdp is the greedy search's at every level: a lower bound." in page
