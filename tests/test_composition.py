"""Several releases audited jointly (seed 000 §V-A, Thms 3–4; DESIGN §3.1b).

Expectations come from the definition written here: the joint law enumerated in numpy, the
product of every release's own kernel, and a sup over a product grid of outputs holding every
breakpoint, points inside every gap and points beyond the extremes (where the Laplace log-ratio
equals its limit) — or from hand derivations (independent tuples, a Gaussian pair); never from
the engine under test.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from bruteforce import coordinate_grid, household_joint, leak_grid, states
from scipy import integrate, stats

import ddpbayes
from ddpbayes import DependenceModel, InputError, Interval
from ddpbayes.cli.main import main
from ddpbayes.composition import compose, parse_release

# ----------------------------------------------------------------------------- the reference


def composed_kernel(parts):
    """log Π_c p_c(y_c | q_c) up to constants; `parts`: (columns, kind, parameter) per release,
    Laplace(b) or randomized response(eps) on its columns."""

    def k(y: np.ndarray, q: np.ndarray) -> np.ndarray:  # y (G, C), q (S, C) -> (G, S)
        total = np.zeros((len(y), len(q)))
        for cols, kind, param in parts:
            d = y[:, None, cols] - q[None, :, cols]
            if kind == "laplace":
                total -= np.abs(d).sum(axis=2) / param
            else:
                keep = math.exp(param) / (1 + math.exp(param))
                total += np.where(d == 0, math.log(keep), math.log(1 - keep)).sum(axis=2)
        return total

    return k


def chain(seed: int, sizes: list[int]) -> tuple[DependenceModel, np.ndarray, np.ndarray]:
    """x0 ~ Cat(p0), x_k ~ Cat(P_k[x_0..x_{k-1}]) with random tables (some entries 0), as a PyMC
    model and as numpy states X (S, n) with probabilities p (S,)."""
    rng = np.random.default_rng(seed)
    tables = []
    for k in range(len(sizes)):
        t = rng.uniform(0.05, 1, size=sizes[: k + 1]) * (rng.uniform(size=sizes[: k + 1]) > 0.2)
        t[..., 0] += t.sum(axis=-1) == 0
        tables.append(t / t.sum(axis=-1, keepdims=True))
    with pm.Model() as m:
        xs = [pm.Categorical("x0", p=tables[0])]
        for k, t in enumerate(tables[1:], start=1):
            xs.append(pm.Categorical(f"x{k}", p=pt.as_tensor_variable(t)[tuple(xs)]))
    joint = tables[0]
    for t in tables[1:]:
        joint = joint[..., None] * t
    X, p = states(joint, [np.arange(s) for s in sizes])
    return DependenceModel(m, tuples=[f"x{k}" for k in range(len(sizes))]), X, p


def compare_lattice(result, X, p, q, kernel, grid) -> None:
    """Every pdp adversary of `result` (lattice=True) against the brute force, to 1e-9."""
    n = X.shape[1]
    assert len(result.lattice) == n * 2 ** (n - 1)
    for node in result.lattice:
        i, known = node.adversary.target, tuple(sorted(node.adversary.known))
        expected = leak_grid(X, p, q, kernel, grid, i, known)[0]
        assert node.value == pytest.approx(expected, abs=1e-9), (i, known)


# ----------------------------------------------------------------------------- exact engine vs brute force


@pytest.mark.parametrize("seed", range(8))
def test_random_chain_linear_releases_match_bruteforce(seed):
    rng = np.random.default_rng(100 + seed)
    sizes = [int(s) for s in rng.integers(2, 4, size=3)]
    model, X, p = chain(seed, sizes)
    w1, w2 = rng.integers(-2, 3, size=3), rng.integers(-2, 3, size=(2, 3))
    b1, b2 = (float(v) for v in rng.uniform(0.3, 2.0, size=2))
    specs = [f"linear:{','.join(map(str, w1))}:geometric:{b1!r}",  # its kernel is Laplace's at the integer y
             f"linear:{';'.join(','.join(map(str, r)) for r in w2)}:laplace:{b2!r}"]
    query, mech = compose(specs, model)
    q = np.column_stack([X @ w1, X @ w2.T])
    kernel = composed_kernel([([0], "laplace", b1), ([1, 2], "laplace", b2)])
    r = ddpbayes.audit(model, query, mech, "pdp", lattice=True)
    compare_lattice(r, X, p, q, kernel, coordinate_grid(q))


@pytest.mark.parametrize("seed", range(2))
def test_random_chain_randomized_response_and_sum_match_bruteforce(seed):
    model, X, p = chain(10 + seed, [2, 2, 2])
    eps, b = 0.7 + seed, 0.8
    query, mech = compose([f"identity:randomized_response:{eps}", f"sum:laplace:{b}"], model)
    q = np.column_stack([X, X.sum(axis=1)])
    sums = np.unique(q[:, 3])
    axis = np.unique(np.concatenate([sums, (sums[:-1] + sums[1:]) / 2, [sums[0] - 1, sums[-1] + 1]]))
    grid = np.array([(*bits, s) for bits in itertools.product([0.0, 1.0], repeat=3) for s in axis])
    kernel = composed_kernel([([0, 1, 2], "rr", eps), ([3], "laplace", b)])
    r = ddpbayes.audit(model, query, mech, "pdp", lattice=True)
    compare_lattice(r, X, p, q, kernel, grid)


@pytest.mark.parametrize("seed", range(3))
def test_random_chain_histogram_and_linear_match_bruteforce(seed):
    """A histogram (two bins, Laplace on each) and a linear release with another scale; numpy's
    bins: [e_j, e_{j+1}), the last closed, nothing outside."""
    model, X, p = chain(20 + seed, [3, 3, 2])
    b1, b2 = 0.6 + 0.5 * seed, 1.3
    query, mech = compose([f"histogram:0.5,1.5,2:laplace:{b1}", f"linear:1,-1,2:laplace:{b2}"], model)
    bins = np.stack([((X >= 0.5) & (X < 1.5)).sum(axis=1), ((X >= 1.5) & (X <= 2)).sum(axis=1)], axis=1)
    q = np.column_stack([bins, X @ np.array([1.0, -1, 2])])
    kernel = composed_kernel([([0, 1], "laplace", b1), ([2], "laplace", b2)])
    r = ddpbayes.audit(model, query, mech, "pdp", lattice=True)
    compare_lattice(r, X, p, q, kernel, coordinate_grid(q))


# ----------------------------------------------------------------------------- the bounds


def test_independent_tuples_attain_the_sequential_bound(models_dir):
    """Independent Bernoulli tuples: given X_i = t the other tuples' law is free of t, so each
    coordinate's likelihood is h_c(y_c - A_ci t) and, as every y_c -> ±inf with the sign of
    A_ci, the log-ratio tends to Σ_c |A_ci| / b_c (each Laplace factor's own sup). Target 0:
    1/1 + 1/0.5 = 3 = the sum of its releases' leakages 1 and 2; targets 1, 2: 1."""
    model = ddpbayes.load_model(models_dir / "independent.py", {"n": 3})
    query, mech = compose(["sum:laplace:1", "linear:1,0,0:laplace:0.5"], model)
    for notion in ("dp", "idp", "ddp", "pdp"):
        r = ddpbayes.audit(model, query, mech, notion)
        assert r.per_target == pytest.approx([3.0, 1.0, 1.0], abs=1e-9), notion
        c = r.composition
        assert [x["leakage"] for x in c["releases"]] == pytest.approx([1.0, 2.0], abs=1e-9)
        assert c["sequential_bound"] == pytest.approx(3.0, abs=1e-9)
        assert c["ratio_to_sequential"] == pytest.approx(1.0, abs=1e-9)
        assert c["sequential_respected"] is True and c["targets_over_sequential"] == []
        assert c["disjoint"] is False and c["parallel_bound"] is None


def xor_model(flip: float = 0.05) -> DependenceModel:
    """x0, x1 fair coins; x2 = x0 xor x1 except with probability `flip`: pairwise independent."""
    with pm.Model() as m:
        a, b = pm.Bernoulli("x0", 0.5), pm.Bernoulli("x1", 0.5)
        pm.Bernoulli("x2", pm.math.switch(pm.math.eq(a, b), flip, 1 - flip))
    return DependenceModel(m, tuples=["x0", "x1", "x2"])


def xor_states(flip: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    joint = np.zeros((2, 2, 2))
    for a, b, c in itertools.product(range(2), repeat=3):
        joint[a, b, c] = 0.25 * (1 - flip if c == (a ^ b) else flip)
    return states(joint, [np.arange(2)] * 3)


def test_sequential_composition_fails_for_a_mixture():
    """idp, target x0: x1 alone and x2 alone are independent of x0 (each release leaks exactly 0),
    but together they reveal x0 = x1 xor x2 (up to the flip): the joint leaks more than Σ = 0."""
    model, (X, p) = xor_model(), xor_states()
    b = 1.0
    query, mech = compose([f"linear:0,1,0:laplace:{b}", f"linear:0,0,1:laplace:{b}"], model)
    r = ddpbayes.audit(model, query, mech, "idp", targets=[0])
    q = X[:, 1:]
    expected = leak_grid(X, p, q, composed_kernel([([0], "laplace", b), ([1], "laplace", b)]), coordinate_grid(q), 0)[0]
    assert expected == pytest.approx(0.389235, abs=1e-6)  # the figure in docs/guide/mechanisms.md and DESIGN §3.1b
    assert r.leakage == pytest.approx(expected, abs=1e-9)
    c = r.composition
    assert [x["leakage"] for x in c["releases"]] == [0.0, 0.0]
    assert c["sequential_respected"] is False and c["ratio_to_sequential"] == math.inf
    assert c["targets_over_sequential"] == [{"target": "x0", "joint": r.leakage, "sequential_bound": 0.0}]
    # disjoint releases of pairwise-independent tuples: no dependent pair, and yet the parallel bound fails too
    assert c["disjoint"] is True and c["dependent_pairs"] == [] and c["parallel_respected"] is False


def test_sequential_bound_fails_at_the_notion_level():
    """A random chain (seed 2012, domains 3, 2, 2): releases w1·x with Lap(2) and w2·x with Lap(1).
    Under pdp the worst adversary of the joint leaks more than the sum of the releases' worst
    adversaries (each possibly another target and known set): Thm 3 fails for the notion itself."""
    model, X, p = chain(2012, [3, 2, 2])
    w1, w2, b1, b2 = np.array([0.0, 2, -2]), np.array([1.0, 2, -1]), 2.0, 1.0
    query, mech = compose([f"linear:0,2,-2:laplace:{b1}", f"linear:1,2,-1:laplace:{b2}"], model)
    r = ddpbayes.audit(model, query, mech, "pdp")
    advs = [(i, k) for i in range(3) for size in range(3) for k in itertools.combinations(set(range(3)) - {i}, size)]

    def worst(q, parts):
        return max(leak_grid(X, p, q, composed_kernel(parts), coordinate_grid(q), i, k)[0] for i, k in advs)

    joint = worst(np.column_stack([X @ w1, X @ w2]), [([0], "laplace", b1), ([1], "laplace", b2)])
    alone = [worst((X @ w)[:, None], [([0], "laplace", b)]) for w, b in ((w1, b1), (w2, b2))]
    assert r.leakage == pytest.approx(joint, abs=1e-9)
    assert [x["leakage"] for x in r.composition["releases"]] == pytest.approx(alone, abs=1e-9)
    assert joint / sum(alone) == pytest.approx(1.0609, abs=1e-4)  # docs/guide/mechanisms.md, DESIGN §3.1b
    assert r.composition["sequential_respected"] is False


def test_household_disjoint_dependent_releases(household):
    """household (a latent h): x0, x1 released apart from x2, x3. Every pair is dependent through
    h, so Thm 4's premise fails; the joint idp leakage exceeds max ε_t, and per target it exceeds
    even the sum of that target's own release leakages (brute force of each, written here)."""
    model = household(n=4)
    X, p = states(household_joint(4), [np.array([0.0, 1.0])] * 4)
    b1, b2 = 1.0, 2.0
    w1, w2 = np.array([1.0, 1, 0, 0]), np.array([0.0, 0, 1, 1])
    query, mech = compose([f"linear:1,1,0,0:laplace:{b1}", f"linear:0,0,1,1:laplace:{b2}"], model)
    r = ddpbayes.audit(model, query, mech, "idp")
    q = np.column_stack([X @ w1, X @ w2])
    joint = [leak_grid(X, p, q, composed_kernel([([0], "laplace", b1), ([1], "laplace", b2)]), coordinate_grid(q), i)[0]
             for i in range(4)]
    alone = [[leak_grid(X, p, (X @ w)[:, None], composed_kernel([([0], "laplace", b)]), coordinate_grid((X @ w)[:, None]),
                        i)[0] for i in range(4)] for w, b in ((w1, b1), (w2, b2))]
    assert r.per_target == pytest.approx(joint, abs=1e-9)
    c = r.composition
    for rel, own in zip(c["releases"], alone):
        assert rel["per_target"] == pytest.approx(own, abs=1e-9)
    assert all(joint[i] > alone[0][i] + alone[1][i] + 1e-3 for i in range(4))
    # docs/guide/mechanisms.md and DESIGN §3.1b: alone 1.469 and 0.728, jointly 1.973, x0's own sum 1.940, Σ 2.197
    assert (max(alone[0]), max(alone[1]), joint[0]) == pytest.approx((1.46873, 0.728013, 1.97344), abs=1e-5)
    assert (alone[0][0] + alone[1][0], max(alone[0]) + max(alone[1])) == pytest.approx((1.94032, 2.19674), abs=1e-5)
    assert [t["target"] for t in c["targets_over_sequential"]] == ["x0", "x1", "x2", "x3"]
    assert c["disjoint"] is True and len(c["dependent_pairs"]) == 4
    assert "premise fails" in c["parallel_premise"]
    assert c["parallel_bound"] == pytest.approx(max(map(max, alone)), abs=1e-9) and c["parallel_respected"] is False


def test_dp_of_histograms_whose_sensitivities_need_different_changes():
    """Tuple values 0..3; histogram A counts {0} and {1} (sensitivity 2 only for the change 0<->1),
    histogram B counts {2} and {3} (only 2<->3). Classic DP of the joint: the best single change
    moves A by 2 and B by 0, A by 1 and B by 1, ...: max(2/b, 1/b + 1/b) = 2 at b = 1, below Σ = 4."""
    with pm.Model() as m:
        for k in range(2):
            pm.DiscreteUniform(f"x{k}", 0, 3)
    model = DependenceModel(m, tuples=["x0", "x1"])
    query, mech = compose(["histogram:-0.5,0.5,1.5:laplace:1", "histogram:1.5,2.5,3.5:laplace:1"], model)
    r = ddpbayes.audit(model, query, mech, "dp")
    assert r.per_target == pytest.approx([2.0, 2.0])
    assert r.composition["sequential_bound"] == pytest.approx(4.0)
    # a non-linear query's change depends on the other tuples: the sum of the levels, said to be a bound
    query, mech = compose(["expr:x0*x1:laplace:1", "sum:laplace:1"], model)
    r = ddpbayes.audit(model, query, mech, "dp")
    assert r.per_target == pytest.approx([9.0 + 3.0] * 2) and "upper bound" in r.reason  # 3·3 - 0·3, 3 - 0


# ----------------------------------------------------------------------------- gaussian engine


def gaussian(cov) -> DependenceModel:
    with pm.Model() as m:
        pm.MvNormal("x", mu=np.zeros(len(cov)), cov=np.asarray(cov, dtype=float))
    return DependenceModel(m, tuples="x", domains=Interval(0, 1))


def test_gaussian_pair_per_release_scales_against_integration():
    """x ~ N(0, [[1, ρ], [ρ, 1]]) on [0, 1], y0 = x0 + Lap(b0), y1 = x1 + Lap(b1), target x0,
    idp. L(y | t) = Lap(y0 - t; b0) ∫ N(x1; ρt, 1 - ρ²) Lap(y1 - x1; b1) dx1: the first factor's
    log-ratio tends to (t - t')/b0 as y0 -> inf, the second's to ρ(t - t')/b1 as y1 -> ±inf, so
    leak = 1/b0 + |ρ|/b1; checked here by quadrature of the second factor at a far y1."""
    rho, b0, b1 = 0.6, 0.5, 1.5
    model = gaussian([[1, rho], [rho, 1]])
    query, mech = compose([f"linear:1,0:laplace:{b0}", f"linear:0,1:laplace:{b1}"], model)
    r = ddpbayes.audit(model, query, mech, "idp", targets=[0], engine="gaussian")
    assert r.leakage == pytest.approx(1 / b0 + rho / b1, abs=1e-12)

    def log_second(y1: float, t: float) -> float:
        sd = math.sqrt(1 - rho**2)
        f = integrate.quad(lambda x: stats.norm.pdf(x, rho * t, sd) * math.exp(-abs(y1 - x) / b1), -12, 12,
                           points=[y1], limit=200)[0]
        return math.log(f)

    y1 = 25.0
    numeric = 1 / b0 + log_second(y1, 1.0) - log_second(y1, 0.0)
    assert numeric == pytest.approx(r.leakage, abs=1e-6)
    assert r.composition["sequential_respected"] is True


def test_gaussian_random_releases_every_known_set():
    """Random covariance (n = 4), releases A1 (one row, b1) and A2 (two rows, b2): for every
    (i, K), c(i, K) from a numpy Schur complement and leak = Σ_c |c_c| / b_c (width 1); c is
    linear in A, so the joint leak is the sum of the releases' (Thm 3 attained adversary by
    adversary). pdp by the lattice and by the engine's search agree."""
    rng = np.random.default_rng(7)
    a = rng.normal(size=(4, 4))
    cov = a @ a.T / 4 + 0.3 * np.eye(4)
    model = gaussian(cov)
    rows = np.round(rng.normal(size=(3, 4)), 2)
    scales = np.array([0.7, 1.9, 1.9])
    specs = [f"linear:{','.join(map(str, rows[0]))}:laplace:0.7",
             "linear:" + ";".join(",".join(map(str, r)) for r in rows[1:]) + ":laplace:1.9"]
    query, mech = compose(specs, model)
    r = ddpbayes.audit(model, query, mech, "pdp", lattice=True, engine="gaussian")
    for node in r.lattice:
        i, known = node.adversary.target, sorted(node.adversary.known)
        s = [i] + [j for j in range(4) if j != i and j not in known]
        c = cov[np.ix_(s, s)]
        if known:
            c = c - cov[np.ix_(s, known)] @ np.linalg.inv(cov[np.ix_(known, known)]) @ cov[np.ix_(known, s)]
        coef = rows[:, s] @ c[0] / c[0, 0]
        assert node.value == pytest.approx(float(np.sum(np.abs(coef) / scales)), abs=1e-9), (i, known)
    fast = ddpbayes.audit(model, query, mech, "pdp", engine="gaussian")
    assert fast.per_target == pytest.approx(r.per_target, abs=1e-12)


def test_greedy_pdp_decides_no_bound(household):
    """A greedy pdp search gives lower bounds: the summary compares nothing."""
    model = household(n=4)
    query, mech = compose(["linear:1,1,0,0:laplace:1", "linear:0,0,1,1:laplace:2"], model)
    c = ddpbayes.audit(model, query, mech, "pdp", pdp_greedy=1).composition
    assert c["sequential_respected"] is None and c["parallel_respected"] is None
    assert c["targets_over_sequential"] == []


def test_structured_engine_refuses_a_composition(household):
    model = household(n=3)
    query, mech = compose(["sum:laplace:1", "linear:1,0,0:laplace:1"], model)
    with pytest.raises(InputError, match="composition of several releases"):
        ddpbayes.audit(model, query, mech, "idp", engine="structured")


# ----------------------------------------------------------------------------- parsing and the CLI


def test_parse_release_splits_from_the_right(household):
    model = household(n=3)
    r = parse_release("linear:1,2,0:laplace:0.5", model)
    assert r.query.spec == "linear:1,2,0" and r.mechanism.scale == 0.5
    assert parse_release("linear:1,2,0:laplace:eps=2", model).mechanism.scale == pytest.approx(1.0)
    assert parse_release("identity:rr:0.3", model).mechanism.epsilon == 0.3
    _, mech = compose(["identity:rr:0.3", "sum:laplace:1", "histogram:0,0.5,1:laplace:2"], model)
    assert [mech.coordinate(c).kind for c in range(6)] == ["randomized_response"] * 3 + ["laplace"] * 3
    assert [mech.coordinate(c).scale for c in (3, 4, 5)] == [1.0, 2.0, 2.0]
    assert [d["release"] for d in mech.describe()["releases"]] == ["identity:rr:0.3", "sum:laplace:1",
                                                                    "histogram:0,0.5,1:laplace:2"]


HOUSEHOLD = ["-p", "n=3"]


@pytest.mark.parametrize("flags, message", [
    ([], "give --query, --mechanism, --scale, --epsilon, --sigma or --rho"),
    (["--release", "sum:laplace:1"], "at least two --release"),
    (["--release", "sum:laplace:1", "--release", "count:laplace:1", "--scale", "1"], "drop --scale"),
    (["--release", "sum:laplace:1", "--query", "sum", "--release", "sum:laplace:2"], "drop --query"),
    (["--release", "sum:laplace", "--release", "sum:laplace:1"], "must be QUERY:MECHANISM:PARAM"),
    (["--release", "sum:laplace:x", "--release", "sum:laplace:1"], "PARAM 'x' is not a number"),
    (["--release", "sum:noise:1", "--release", "sum:laplace:1"], "unknown mechanism 'noise'"),
    (["--release", "linear:1,1:laplace:1", "--release", "sum:laplace:1"], "2 weights but the model has 3"),
    (["--release", "sum:laplace:-1", "--release", "sum:laplace:1"], "scale must be a positive"),
    (["--release", "sum:rr:eps=1", "--release", "sum:laplace:1"], "already its epsilon"),
    (["--query", "sum", "--mechanism", "laplace"], "give --scale, --epsilon, --sigma or --rho"),
    (["--release", "sum:gaussian:1", "--release", "sum:laplace:1"], "Gaussian releases are not composed"),
])
def test_cli_bad_releases_are_one_line_errors(models_dir, capsys, flags, message):
    code = main(["audit", str(models_dir / "household.py"), *HOUSEHOLD, "--notion", "idp", *flags])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1, err


def test_cli_json_and_text(models_dir, capsys):
    args = ["audit", str(models_dir / "household.py"), *HOUSEHOLD, "--notion", "ddp", "--release",
            "linear:1,0,0:laplace:1", "--release", "linear:0,1,1:laplace:eps=1"]
    assert main([*args, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    c = doc["composition"]
    assert doc["mechanism"]["kind"] == "composition" and [r["touched"] for r in c["releases"]] == [["x0"], ["x1", "x2"]]
    assert c["sequential_bound"] == pytest.approx(sum(r["leakage"] for r in c["releases"]))
    assert c["dependent_pairs"] == [{"release": 0, "tuple": "x0", "other_release": 1, "other_tuple": t}
                                    for t in ("x1", "x2")]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "sequential bound" in text and "parallel premise" in text


# ----------------------------------------------------------------------------- the report


def test_composition_report_equals_audit(models_dir, tmp_path):
    """The shipped composition spec: every number in results.json is `audit`'s with the composed
    releases, at the spec's noise and at every factor of the sweep (scales times the factor)."""
    spec = models_dir.parent / "reports" / "specs" / "composition_household.toml"
    out = tmp_path / "report"
    assert main(["report", str(spec), "--out", str(out), "--quiet"]) == 0
    data = json.loads((out / "results.json").read_text())
    assert {"index.html", "report.md", "results.json", "figures"} <= {p.name for p in out.iterdir()}
    model = ddpbayes.load_model(models_dir / "household.py", {"n": 4})
    for notion in ("idp", "dp"):
        query, mech = compose(["linear:1,1,0,0:laplace:1", "linear:0,0,1,1:laplace:2"], model)
        c = ddpbayes.audit(model, query, mech, notion).composition
        assert data["audits"][notion]["composition"]["joint"] == pytest.approx(c["joint"], abs=1e-12)
        point = next(p for p in data["sweep"][notion] if p["factor"] == 2)
        query, mech = compose(["linear:1,1,0,0:laplace:2", "linear:0,0,1,1:laplace:4"], model)
        assert point["joint"] == pytest.approx(ddpbayes.audit(model, query, mech, notion).leakage, abs=1e-12)
    assert "Thm 4 violated" in data["finding"]


@pytest.mark.parametrize("text, message", [
    ('releases = ["sum:laplace:1"]', "at least two"),
    ('releases = ["sum:laplace:1", "sum:laplace:2"]\nquery = "sum"', "unknown key 'query'"),
    ('releases = ["sum:laplace:1", "sum:laplace:2"]\nsweep = [1]', "'sweep'"),
    ('releases = ["sum:laplace:1", "sum:nope:2"]', "unknown mechanism 'nope'"),
])
def test_bad_composition_spec_is_one_line(models_dir, tmp_path, capsys, text, message):
    spec = tmp_path / "bad.toml"
    spec.write_text(f'model = "{models_dir / "household.py"}"\nnotions = ["idp"]\n{text}\n')
    assert main(["report", str(spec), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert message in err and "bad.toml" in err and err.count("\n") == 1, err
