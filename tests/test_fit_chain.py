"""`ddpbayes fit --template chain` (issue #41, DESIGN §9.5): the written model file, read by the
structured engine, equals a brute force over the chain's joint table built here by hand; the
checks' statistics by hand; bad input is one line (exit 2, nothing written); and (slow) the
parameters are recovered over seeds, and dependence is flagged in chains and not in independent states."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import numpy as np
import pytest
from bruteforce import leak_bruteforce

from ddpbayes.cli.main import main
from ddpbayes.fitting.fitted import FORMAT

STATES = ["a", "b"]


def written_model(tmp_path: Path, kappa: list[float], m: np.ndarray, init: np.ndarray, counts: np.ndarray) -> Path:
    """A chain fit's files as `ddpbayes fit` writes them: its model text, a hand-made `.fit.json`
    (draws of kappa, m (D, 2, 2), init (D, 2); two individuals' transition counts (2, 2, 2))."""
    from ddpbayes.fitting.write import model_text

    draws = {"kappa": list(kappa)} | {f"init_{s}": init[:, j].tolist() for j, s in enumerate(STATES)}
    draws |= {f"m_{s}_{t}": m[:, a, b].tolist() for a, s in enumerate(STATES) for b, t in enumerate(STATES)}
    means = {k: {"mean": float(np.mean(v))} for k, v in draws.items()}
    doc = {"format": FORMAT, "template": "chain", "parameters": means,
           "draws": draws, "data": {"file": "t.csv", "rows": 7, "outcome": "place", "cluster": ["person"],
                                    "clusters": 2, "covariates": [], "time": "day", "states": STATES},
           "table": {"clusters": ["p", "q"], "counts": counts.ravel().tolist(), "lengths": [4, 3]}}
    out = tmp_path / "chain.py"
    out.with_name("chain.fit.json").write_text(json.dumps(doc))
    out.write_text(model_text(out, doc))
    return out


def test_the_written_chain_is_the_posterior_mean_chain_the_structured_engine_reads_exactly(tmp_path):
    """Two draws; individual q (transitions a->a once, a->b once, b->a once over its 3 days). Its
    chain: P_q = mean over draws of (kappa m_s + n_q[s]) / (kappa + N_qs), init the mean init; the
    sum over its 3 days with Laplace(1): idp of each day = a brute force over the 8 sequences."""
    import ddpbayes

    kappa = [2.0, 6.0]
    m = np.array([[[0.7, 0.3], [0.4, 0.6]], [[0.9, 0.1], [0.2, 0.8]]])
    init = np.array([[0.5, 0.5], [0.8, 0.2]])
    counts = np.array([[[2, 1], [0, 0]], [[1, 1], [1, 0]]])
    out = written_model(tmp_path, kappa, m, init, counts)
    p_q = np.mean([(k * m[d] + counts[1]) / (k * m[d] + counts[1]).sum(axis=1, keepdims=True)
                   for d, k in enumerate(kappa)], axis=0)
    p0 = init.mean(axis=0)
    joint = np.zeros((2, 2, 2))
    for x in itertools.product(range(2), repeat=3):
        joint[x] = p0[x[0]] * p_q[x[0], x[1]] * p_q[x[1], x[2]]
    model = ddpbayes.load_model(str(out), {"individual": "q"})
    assert model.n == 3
    for day in range(3):
        result = ddpbayes.audit(model, "sum", "laplace", "idp", scale=1.0, target=day)
        expected = leak_bruteforce(joint, [[0, 1]] * 3, [1.0] * 3, 1.0, day)
        assert result.leakage == pytest.approx(expected, rel=1e-6)
    draw = ddpbayes.load_model(str(out), {"individual": "q", "parameters": "draw:1", "n": 5})
    assert draw.n == 5


def test_the_stay_share_and_the_longest_run_by_hand():
    from ddpbayes.fitting.chain import mean_longest_run, stay_share

    seqs = np.array([[0, 0, 1, 1, 1, 0], [2, 2, 2, 2, 0, 0]])  # the second is 4 long: its last two are padding
    lengths = np.array([6, 4])
    assert stay_share(seqs, lengths) == pytest.approx((3 + 3) / (5 + 3))
    assert mean_longest_run(seqs, lengths) == pytest.approx((3 + 4) / 2)


GOOD = "person,day,place\n" + "".join(f"p{i // 4},{i % 4},{'ab'[(i * i) % 3 == 0]}\n" for i in range(12))
BAD = {
    "missing column": (GOOD, ["--id", "person", "--time", "day", "--state", "where"], r"column 'where' is not in"),
    "no time": (GOOD, ["--id", "person", "--state", "place"], r"needs --id COL, --time COL and --state COL"),
    "text time": ("person,day,place\np,mon,a\np,tue,b\nq,mon,a\nq,tue,a\n",
                  ["--id", "person", "--time", "day", "--state", "place"], r"must hold numbers"),
    "one state": ("person,day,place\np,1,a\np,2,a\nq,1,a\nq,2,a\n",
                  ["--id", "person", "--time", "day", "--state", "place"], r"holds one state"),
    "one individual": ("person,day,place\np,1,a\np,2,b\n", ["--id", "person", "--time", "day", "--state", "place"],
                       r"has one individual"),
    "one observation": ("person,day,place\np,1,a\np,2,b\nq,1,a\n",
                        ["--id", "person", "--time", "day", "--state", "place"], r"individual 'q' .* has one row"),
    "two states at one time": ("person,day,place\np,1,a\np,1,b\nq,1,a\nq,2,b\n",
                               ["--id", "person", "--time", "day", "--state", "place"], r"two rows at day = 1"),
    "NaN state": ("person,day,place\np,1,a\np,2,\nq,1,a\nq,2,b\n",
                  ["--id", "person", "--time", "day", "--state", "place"], r"missing value.* data row 2"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_exit_2_and_nothing_written(case, tmp_path, capsys):
    text, argv, message = BAD[case]
    path = tmp_path / "t.csv"
    path.write_text(text)
    capsys.readouterr()
    code = main(["fit", str(path), "--template", "chain", *argv, "--out", str(tmp_path / "m.py"), "--quiet"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1 and captured.err.startswith("error: ")
    assert re.search(message, captured.err), captured.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


MEAN = np.array([[0.8, 0.15, 0.05], [0.2, 0.7, 0.1], [0.1, 0.2, 0.7]])
NAMES = ["away", "home", "work"]  # sorted: the fit numbers the states in this order


def simulate(seed: int, kappa: float | None, people: int = 20, days: int = 30) -> str:
    """Each person's P_i ~ Dirichlet(kappa MEAN[s]) per row (NAMES order), a uniform first state;
    kappa None: every state independent and uniform (no dependence)."""
    rng = np.random.default_rng(seed)
    lines = ["person,day,place"]
    for i in range(people):
        p = np.array([rng.dirichlet(kappa * row) for row in MEAN]) if kappa else np.full((3, 3), 1 / 3)
        x = rng.integers(0, 3)
        for t in range(days):
            lines.append(f"p{i},{t},{NAMES[x]}")
            x = rng.choice(3, p=p[x])
    return "\n".join(lines) + "\n"


def fit_simulated(tmp_path: Path, seed: int, kappa: float | None) -> dict:
    import ddpbayes

    path = tmp_path / f"sim{seed}.csv"
    path.write_text(simulate(seed, kappa))
    return ddpbayes.fit(path, "chain", id="person", time="day", state="place", seed=seed, draws=500).to_dict()


@pytest.mark.slow  # four fits, about 20 s each
def test_the_parameters_are_recovered_and_the_dependence_flagged_over_seeds(tmp_path):
    """Four tables (20 people x 30 days, kappa 20): the 94% HDIs of kappa and the nine m_s_t miss the
    truth at most 5 times in 40 (expected 2.4; 6 or more: probability 3.6%, binomial), every fit
    converges and the checks find the dependence."""
    misses = 0
    for seed in range(4):
        doc = fit_simulated(tmp_path, seed, 20.0)
        assert doc["diagnostics"]["ok"], doc["diagnostics"]["failures"]
        truth = {"kappa": 20.0} | {f"m_{s}_{t}": MEAN[a, b] for a, s in enumerate(NAMES) for b, t in enumerate(NAMES)}
        for name, value in truth.items():
            low, high = doc["parameters"][name]["hdi"]
            misses += not low <= value <= high
        assert doc["checks"]["dependence_supported"]
    assert misses <= 5


@pytest.mark.slow
def test_the_checks_do_not_flag_dependence_in_independent_states(tmp_path):
    for seed in (11, 12):
        doc = fit_simulated(tmp_path, seed, None)
        assert not doc["checks"]["dependence_supported"]
        assert doc["checks"]["stay_share"]["independent"]["p_value"] >= 0.01


def test_an_individuals_rows_are_ordered_by_time_whatever_the_file_order(tmp_path):
    """p's rows (days 3, 1, 2 in file order) are b, a, b by time: one b->a and one a->b transition."""
    from ddpbayes.fitting.chain import read

    path = tmp_path / "t.csv"
    path.write_text("person,day,place\np,3,b\nq,1,a\np,1,b\nq,2,a\np,2,a\n")
    data = read(path, {"id": "person", "time": "day", "state": "place"}, 100)
    assert data.labels == ("p", "q") and data.states == ("a", "b")
    assert [s.tolist() for s in data.sequences] == [[1, 0, 1], [0, 0]]
    assert data.counts.tolist() == [[[0, 1], [1, 0]], [[1, 0], [0, 0]]]
