"""`ddpbayes fit --template chain --regimes R` (issue #41, DESIGN §9.5): the forward algorithm
against a sum over every regime path written here; the sorting of the regimes; the written model
file, read by the structured engine, against a brute force over (z, x) written here; the regime
check's statistic by hand; bad input one line, exit 2; and (slow) the parameters recovered over
seeds from two well-separated regimes, the regimes flagged in them and not in a plain chain."""

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


def path_sum(x: list[int], rho: np.ndarray, a: np.ndarray, p: np.ndarray) -> float:
    """log p(x_1..x_T | x_0): the sum over every regime path z_1..z_T of
    rho[z_1] p[z_1, x_0, x_1] prod_t a[z_t-1, z_t] p[z_t, x_t-1, x_t]."""
    total = 0.0
    for z in itertools.product(range(len(rho)), repeat=len(x) - 1):
        term = rho[z[0]] * p[z[0], x[0], x[1]]
        for t in range(2, len(x)):
            term *= a[z[t - 2], z[t - 1]] * p[z[t - 1], x[t - 1], x[t]]
        total += term
    return float(np.log(total))


def random_law(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.dirichlet(np.ones(shape[-1]), size=shape[:-1])


def test_the_forward_algorithm_is_the_sum_over_every_regime_path():
    """Three regimes, three states, four individuals of 3 to 6 days (padded to 6): NumPy's forward per
    draw (two draws) and PyTensor's (the fit's likelihood) against the enumeration of 3^5 paths."""
    import pytensor
    import pytensor.tensor as pt

    from ddpbayes.fitting.regimes import forward, forward_tensor

    rng = np.random.default_rng(7)
    seqs = [rng.integers(0, 3, n).tolist() for n in (3, 6, 4, 5)]
    prev = np.zeros((4, 5), np.int64)
    nxt, mask = prev.copy(), np.zeros((4, 5), bool)
    for i, s in enumerate(seqs):
        prev[i, :len(s) - 1], nxt[i, :len(s) - 1], mask[i, :len(s) - 1] = s[:-1], s[1:], True
    laws = [(random_law(rng, 3), random_law(rng, 3, 3), random_law(rng, 3, 3, 3)) for _ in range(2)]
    expected = np.array([[path_sum(s, *law) for s in seqs] for law in laws])
    got = forward(*(np.log(np.stack(v)) for v in zip(*laws)), prev, nxt, mask)
    assert got == pytest.approx(expected, abs=1e-12)
    r, a, p = pt.vector("r"), pt.matrix("a"), pt.tensor3("p")
    compiled = pytensor.function([r, a, p], forward_tensor(r, a, p, prev, nxt, mask))
    for law, want in zip(laws, expected):
        assert compiled(*(np.log(v) for v in law)) == pytest.approx(want, abs=1e-12)


def test_the_regimes_are_sorted_by_their_mean_stay_probability_in_every_draw():
    """Two draws of three regimes: each draw's regimes permuted together in every variable."""
    import arviz as az

    from ddpbayes.fitting.regimes import ordered

    rng = np.random.default_rng(3)
    p = random_law(rng, 1, 2, 3, 2, 2)
    rho, a = random_law(rng, 1, 2, 3), random_law(rng, 1, 2, 3, 3)
    idata = ordered(az.from_dict(posterior={"regime_init": rho.copy(), "regime_transition": a.copy(),
                                            "transition": p.copy(), "init": random_law(rng, 1, 2, 2)}))
    post = idata.posterior
    for d in range(2):
        order = np.argsort([np.trace(p[0, d, r]) for r in range(3)])
        assert post["transition"].values[0, d] == pytest.approx(p[0, d, order])
        assert post["regime_init"].values[0, d] == pytest.approx(rho[0, d, order])
        assert post["regime_transition"].values[0, d] == pytest.approx(a[0, d][np.ix_(order, order)])
        stays = np.trace(post["transition"].values[0, d], axis1=-2, axis2=-1)
        assert np.all(np.diff(stays) >= 0)


def test_the_window_variance_of_the_stay_share_by_hand():
    """Windows of 2 transitions: the first individual's 6 transitions (stay, stay | move, stay | stay, stay) give
    shares 1, 1/2, 1: variance 1/18; the second's 4 (move, move | stay, stay): 0, 1: variance 1/4; mean of both."""
    from ddpbayes.fitting.regimes import window_length, window_stay_variance

    seqs = np.array([[0, 0, 0, 1, 1, 1, 1], [0, 1, 0, 0, 0, 9, 9]])
    lengths = np.array([7, 5])
    assert window_stay_variance(seqs, lengths, 2) == pytest.approx((1 / 18 + 1 / 4) / 2)
    assert window_length(lengths) == 2  # sqrt of the median 5 transitions, floored


# A regime fit written by hand: two regimes, two states, three posterior draws.
INIT = np.array([[0.6, 0.4], [0.5, 0.5], [0.3, 0.7]])
RHO = np.array([[0.7, 0.3], [0.5, 0.5], [0.2, 0.8]])
A = np.array([[[0.8, 0.2], [0.1, 0.9]], [[0.6, 0.4], [0.3, 0.7]], [[0.9, 0.1], [0.25, 0.75]]])
P = np.array([[[[0.3, 0.7], [0.6, 0.4]], [[0.9, 0.1], [0.2, 0.8]]],
              [[[0.5, 0.5], [0.5, 0.5]], [[0.95, 0.05], [0.1, 0.9]]],
              [[[0.2, 0.8], [0.7, 0.3]], [[0.8, 0.2], [0.05, 0.95]]]])


def regime_draws() -> dict[str, list[float]]:
    draws = {f"init_{s}": INIT[:, j].tolist() for j, s in enumerate(STATES)}
    draws |= {f"regime_init_{r}": RHO[:, r].tolist() for r in range(2)}
    draws |= {f"regime_{r}_{q}": A[:, r, q].tolist() for r in range(2) for q in range(2)}
    return draws | {f"p_{r}_{s}_{t}": P[:, r, a, b].tolist() for r in range(2) for a, s in enumerate(STATES)
                    for b, t in enumerate(STATES)}


@pytest.fixture(scope="module")
def regime_file(tmp_path_factory) -> Path:
    """The files `ddpbayes fit --regimes 2` writes, its `.fit.json` by hand: individuals p (4 days), q (3 days)."""
    from ddpbayes.fitting.write import model_text

    draws = regime_draws()
    doc = {"format": FORMAT, "template": "chain", "draws": draws,
           "parameters": {k: {"mean": float(np.mean(v))} for k, v in draws.items()},
           "data": {"file": "t.csv", "rows": 7, "outcome": "place", "cluster": ["person"], "clusters": 2,
                    "covariates": [], "time": "day", "states": STATES, "regimes": 2},
           "table": {"clusters": ["p", "q"], "counts": [2, 1, 0, 0, 1, 1, 1, 0], "lengths": [4, 3]}}
    out = tmp_path_factory.mktemp("regimes") / "days.py"
    out.with_name("days.fit.json").write_text(json.dumps(doc))
    out.write_text(model_text(out, doc))
    return out


def joint(init: np.ndarray, rho: np.ndarray, a: np.ndarray, p: np.ndarray, n: int) -> np.ndarray:
    """P(x_0..x_n-1) by enumeration of every (z, x): z_1 ~ rho, z_t ~ a[z_t-1], x_t ~ p[z_t, x_t-1]."""
    out = np.zeros((2,) * n)
    for x in itertools.product(range(2), repeat=n):
        for z in itertools.product(range(2), repeat=n - 1):
            term = init[x[0]] * rho[z[0]] * p[z[0], x[0], x[1]]
            for t in range(2, n):
                term *= a[z[t - 2], z[t - 1]] * p[z[t - 1], x[t - 1], x[t]]
            out[x] += term
    return out


def test_the_written_regime_chain_under_mean_is_the_brute_force_over_regimes_and_states(regime_file):
    """Individual p (4 days), the posterior means fixed, the sum with Laplace(1): idp of each day = a brute force
    over the 16 sequences, each the sum over its 8 regime paths."""
    import ddpbayes

    model = ddpbayes.load_model(str(regime_file), {"individual": "p"})
    assert model.n == 4
    law = joint(INIT.mean(0), RHO.mean(0), A.mean(0), P.mean(0), 4)
    for day in range(4):
        result = ddpbayes.audit(model, "sum", "laplace", "idp", scale=1.0, target=day)
        assert result.leakage == pytest.approx(leak_bruteforce(law, [[0, 1]] * 4, [1.0] * 4, 1.0, day), abs=1e-9)


def test_draws_on_the_regime_file_are_each_draws_brute_force(regime_file):
    """draws:2 (draws 0 and 2) of individual q's 3 days: each draw's worst day by enumeration."""
    from ddpbayes.plausible import audit_fitted

    got = audit_fitted(regime_file, "draws:2", "sum", "laplace", "idp", scale=1.0, targets=[0, 1, 2],
                       build={"individual": "q"})
    expected = [max(leak_bruteforce(joint(INIT[d], RHO[d], A[d], P[d], 3), [[0, 1]] * 3, [1.0] * 3, 1.0, day)
                    for day in range(3)) for d in (0, 2)]
    assert got.plausible["leakages"] == pytest.approx(expected, abs=1e-9)


@pytest.mark.slow
def test_integrated_on_the_regime_file_is_the_mixture_over_draws_by_brute_force(regime_file):
    """integrated:3, individual q: the mixture (1/3) sum_d of the draws' joint laws, by enumeration."""
    from ddpbayes.plausible import audit_fitted

    got = audit_fitted(regime_file, "integrated:3", "sum", "laplace", "idp", scale=1.0, targets=[0, 1, 2],
                       build={"individual": "q"}, information=None)
    mixed = sum(joint(INIT[d], RHO[d], A[d], P[d], 3) for d in range(3)) / 3
    for day in range(3):
        assert got.result.per_target[day] == pytest.approx(leak_bruteforce(mixed, [[0, 1]] * 3, [1.0] * 3, 1.0, day),
                                                           abs=1e-9)


GOOD = "person,day,place\n" + "".join(f"p{i // 6},{i % 6},{'ab'[(i * i) % 3 == 0]}\n" for i in range(18))
SHORT = "person,day,place\n" + "".join(f"p{i // 4},{i % 4},{'ab'[i % 2]}\n" for i in range(12))
TWO_ROWS = "person,day,place\np,1,a\np,2,b\np,3,b\np,4,a\np,5,a\nq,1,a\nq,2,b\n"
BAD = {
    "one regime": (GOOD, ["--regimes", "1"], r"--regimes must be an integer of at least 2"),
    "no regime": (GOOD, ["--regimes", "0"], r"--regimes must be an integer of at least 2"),
    "every sequence short": (SHORT, ["--regimes", "2"], r"under 5 rows: the sequences are too short"),
    "an individual of two rows": (TWO_ROWS, ["--regimes", "2"], r"individual 'q' .* has 2 rows"),
    "another template": (GOOD, ["--regimes", "2", "--template", "clustered"], r"--regimes applies to the chain"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_exit_2_and_nothing_written(case, tmp_path, capsys):
    text, argv, message = BAD[case]
    path = tmp_path / "t.csv"
    path.write_text(text)
    template = [] if "--template" in argv else ["--template", "chain"]
    capsys.readouterr()
    code = main(["fit", str(path), *template, "--id", "person", "--time", "day", "--state", "place", *argv,
                 "--out", str(tmp_path / "m.py"), "--quiet"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1 and captured.err.startswith("error: ")
    assert re.search(message, captured.err), captured.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


SWITCHY = np.array([[0.3, 0.7], [0.7, 0.3]])  # regime 0: moves most days (mean stay 0.3)
STICKY = np.array([[0.95, 0.05], [0.05, 0.95]])  # regime 1: stays (mean stay 0.95)
SPELLS = np.array([[0.9, 0.1], [0.1, 0.9]])  # regime spells of 10 days on average


def simulate(seed: int, regimes: bool, people: int = 30, days: int = 40) -> str:
    """Two well-separated regimes (a uniform first state and first regime); `regimes` False: each person one
    chain P_i ~ Dirichlet(10 m_s), m the average of the two regimes' matrices (no switching)."""
    rng = np.random.default_rng(seed)
    lines = ["person,day,place"]
    for i in range(people):
        own = np.array([rng.dirichlet(10 * row) for row in (SWITCHY + STICKY) / 2])
        x, z = rng.integers(0, 2), rng.integers(0, 2)
        for t in range(days):
            if t > 0:
                z = rng.choice(2, p=SPELLS[z]) if t > 1 else z
                x = rng.choice(2, p=(SWITCHY, STICKY)[z][x] if regimes else own[x])
            lines.append(f"p{i},{t},{STATES[x]}")
    return "\n".join(lines) + "\n"


def fit_simulated(tmp_path: Path, seed: int, regimes: bool) -> dict:
    import ddpbayes

    path = tmp_path / f"sim{seed}.csv"
    path.write_text(simulate(seed, regimes))
    return ddpbayes.fit(path, "chain", id="person", time="day", state="place", regimes=2, seed=seed,
                        draws=500).to_dict()


@pytest.mark.slow  # three fits of three NUTS runs each, minutes under load
def test_the_regimes_are_recovered_and_flagged_over_seeds(tmp_path):
    """Three tables (30 people x 40 days): the 94% HDIs of the 4 regime transitions and the 8 regime
    matrices' entries miss the truth at most 4 times in 36 (expected 2.2; 5 or more: probability 7%,
    binomial), every fit converges, and the regime check flags the regimes."""
    truth = {f"regime_{r}_{q}": SPELLS[r, q] for r in range(2) for q in range(2)}
    truth |= {f"p_{r}_{s}_{t}": (SWITCHY, STICKY)[r][a, b] for r in range(2) for a, s in enumerate(STATES)
              for b, t in enumerate(STATES)}
    misses = 0
    for seed in range(3):
        doc = fit_simulated(tmp_path, seed, True)
        assert doc["diagnostics"]["ok"], doc["diagnostics"]["failures"]
        for name, value in truth.items():
            low, high = doc["parameters"][name]["hdi"]
            misses += not low <= value <= high
        assert doc["checks"]["regimes_supported"]
    assert misses <= 4


@pytest.mark.slow
def test_the_regime_check_does_not_flag_a_plain_chain(tmp_path):
    doc = fit_simulated(tmp_path, 21, False)
    assert not doc["checks"]["regimes_supported"]
    assert doc["checks"]["window_stay_variance"]["chain"]["p_value"] >= 0.01
