"""Queries beyond linear: `expr:EXPR` and `fn:NAME` (issue #15; DESIGN §1.1).

Expected values come from numpy written here: the query's values; the global sensitivity by
brute force over the product of the domains (seed 000 §III); the leakage by enumerating the
joint law and taking the sup over a product grid of outputs — every query value and ±inf per
coordinate, where a Laplace log-ratio of mixtures attains its sup (between two breakpoints
it is (a u² + c)/(a' u² + c') in u = e^{y/b}, monotone) — and one case derived by hand.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy.special import logsumexp

import ddpbayes
from ddpbayes import DependenceModel, Finite, InputError, Interval
from ddpbayes.cli.main import main
from ddpbayes.queries import ExpressionQuery, FunctionQuery, parse_query

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE1 = ROOT / "models" / "ddp_example1.py"

# ----------------------------------------------------------------------------- reference


def chain(seed: int, sizes: list[int]) -> tuple[DependenceModel, np.ndarray, np.ndarray]:
    """x0 ~ Cat(p0), x_k ~ Cat(P_k[x_{k-1}]) with random tables (some entries 0): the PyMC model
    and its states X (S, n) with probabilities p (S,), enumerated in numpy."""
    rng = np.random.default_rng(seed)
    tables = [rng.dirichlet(np.ones(sizes[0]))]
    for k in range(1, len(sizes)):
        t = rng.uniform(0.05, 1, size=(sizes[k - 1], sizes[k])) * (rng.uniform(size=(sizes[k - 1], sizes[k])) > 0.2)
        t[:, 0] += t.sum(axis=1) == 0
        tables.append(t / t.sum(axis=1, keepdims=True))
    with pm.Model() as m:
        xs = [pm.Categorical("x0", p=tables[0])]
        for k in range(1, len(sizes)):
            xs.append(pm.Categorical(f"x{k}", p=pt.as_tensor_variable(tables[k])[xs[-1]]))
    X = np.array(list(itertools.product(*[range(s) for s in sizes])), dtype=float)
    p = tables[0][X[:, 0].astype(int)]
    for k in range(1, len(sizes)):
        p = p * tables[k][X[:, k - 1].astype(int), X[:, k].astype(int)]
    return DependenceModel(m, tuples=[f"x{k}" for k in range(len(sizes))]), X[p > 0], p[p > 0]


def leak(X: np.ndarray, p: np.ndarray, q: np.ndarray, b: float, i: int, known: tuple[int, ...]) -> float:
    """leak(i, K) for Laplace(b) on every output of q (S, C), from the definition (DESIGN §1)."""
    grids = [np.concatenate([np.unique(q[:, c]), [-np.inf, np.inf]]) for c in range(q.shape[1])]
    ys = np.array(list(itertools.product(*grids)))  # (G, C)
    # log Lap(y - q) up to a constant; at y = ±inf the common factor e^{∓y/b} is dropped
    logk = np.where(np.isinf(ys[:, None, :]), np.sign(ys[:, None, :]) * q[None] / b,
                    -np.abs(ys[:, None, :] - q[None]) / b).sum(axis=2)  # (G, S)
    best = 0.0
    for xk in {tuple(r) for r in X[:, list(known)]}:
        rows = np.all(X[:, list(known)] == np.array(xk), axis=1)
        logs = [logsumexp(logk[:, rows & (X[:, i] == t)], b=p[rows & (X[:, i] == t)], axis=1)
                - math.log(p[rows & (X[:, i] == t)].sum()) for t in np.unique(X[rows, i])]
        for a, c in itertools.permutations(range(len(logs)), 2):
            best = max(best, float(np.max(logs[a] - logs[c])))
    return best


def brute_sensitivity(f, domains: list[list[float]], k: int) -> float:
    """max over the product of the domains of ||f(t, x_{-k}) - f(t', x_{-k})||_1, pair by pair."""
    best = 0.0
    for x in itertools.product(*domains):
        for t in domains[k]:
            y = list(x)
            y[k] = t
            best = max(best, float(np.abs(np.asarray(f(np.array(x))) - np.asarray(f(np.array(y)))).sum()))
    return best


def finite_model(domains: list[list[float]]) -> DependenceModel:
    """Independent tuples with the given finite domains (only the names and domains matter)."""
    with pm.Model() as m:
        for k in range(len(domains)):
            pm.Categorical(f"x{k}", p=np.ones(len(domains[k])) / len(domains[k]))
    return DependenceModel(m, tuples=[f"x{k}" for k in range(len(domains))],
                           domains={f"x{k}": Finite(d) for k, d in enumerate(domains)})


# ----------------------------------------------------------------------------- parser and values


def test_values_equal_numpy():
    model = finite_model([[0, 1, 2], [0, 1], [-1, 3]])
    rng = np.random.default_rng(0)
    x = rng.uniform(-3, 3, size=(50, 3))
    a, b, c = x.T
    cases = {
        "x0*x1": a * b, "max(x0, x1, x2)": np.maximum(np.maximum(a, b), c), "x0 > 1 and x2 <= 0": (a > 1) & (c <= 0),
        "-x0**2 + 3 // 2 - x1 % 2": -a**2 + 1 - b % 2, "abs(x2) if x0 < 0 else exp(x1)": np.where(a < 0, abs(c), np.exp(b)),
        "where(x0 > x1, clip(x2, -1, 1), 0)": np.where(a > b, np.clip(c, -1, 1), 0), "not x0 > 0": ~(a > 0),
        "1 < x0 < 2": (1 < a) & (a < 2), "minimum(x0, x1) / 2": np.minimum(a, b) / 2, "7": np.full(50, 7.0),
    }
    for text, expected in cases.items():
        q = parse_query(f"expr:{text}").bind(model)
        assert q.values(x) == pytest.approx(np.asarray(expected, dtype=float)[:, None], abs=1e-12), text
    two = parse_query("expr:x0*x1; x2").bind(model).values(x)
    assert two == pytest.approx(np.column_stack([a * b, c]))


def test_vector_variable_values():
    with pm.Model() as m:
        pm.Bernoulli("x", p=0.5, shape=4)
    model = DependenceModel(m, tuples="x")
    x = np.random.default_rng(1).integers(0, 5, size=(30, 4)).astype(float)
    cases = {"max(x)": x.max(1), "sum(x > 3)": (x > 3).sum(1), "count(x)": (x != 0).sum(1), "mean(x)": x.mean(1),
             "x[0] * x[-1]": x[:, 0] * x[:, 3], "prod(x[1:3])": x[:, 1] * x[:, 2], "any(x == 4)": (x == 4).any(1),
             "sum(x) - max(x)": x.sum(1) - x.max(1)}
    for text, expected in cases.items():
        assert parse_query(f"expr:{text}").bind(model).values(x)[:, 0] == pytest.approx(expected.astype(float)), text
    assert parse_query("expr:2*x").bind(model).values(x) == pytest.approx(2 * x)  # one output per tuple


@pytest.mark.parametrize("text, message", [
    ("", "needs an expression"), ("x0 +", "not valid syntax"), ("__import__('os')", "calling '__import__'"),
    ("x0.real", "'x0.real'"), ("[x0]", "'[x0]'"), ("'a'", "constant 'a'"), ("x0 @ x1", "operator"),
    ("max()", "takes 1 to 64"), ("where(x0, 1)", "takes 3 arguments"), ("sum(x0, axis=0)", "keyword"),
    ("x0[x1]", "index [x1]"), ("lambda: 1", "lambda"), ("x0 in x1", "comparison"), ("True", "constant True"),
])
def test_bad_expressions_are_one_line_errors(text, message):
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")) as exc:
        parse_query(f"expr:{text}")
    assert "\n" not in str(exc.value)


def test_binding_errors_name_the_bad_token_and_the_valid_names():
    model = finite_model([[0, 1], [0, 1]])
    with pytest.raises(InputError, match=r"names 'y'.*it has: x0, x1"):
        parse_query("expr:x0*y").bind(model)
    with pytest.raises(InputError, match=r"selects nothing"):
        parse_query("expr:x0[3]").bind(model).check(model.domains)
    with pytest.raises(InputError, match=r"gives -?inf .* at x0=0, x1=0: it must be finite"):
        parse_query("expr:log(x0)").bind(model).values(np.zeros((1, 2)))
    with pytest.raises(InputError, match="bind it to the model"):
        parse_query("expr:x0").values(np.zeros((1, 2)))


def test_spec_reads_back():
    for spec in ("expr:x0*x1", "expr:max(x); sum(x>3)", "fn:stat"):
        assert parse_query(parse_query(spec).spec).spec == spec


# ----------------------------------------------------------------------------- sensitivity


@pytest.mark.parametrize("seed", range(6))
def test_exact_sensitivity_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 4))
    domains = [sorted({float(v) for v in rng.integers(-3, 4, size=int(rng.integers(1, 4)))}) for _ in range(n)]
    model = finite_model(domains)
    exprs = {"x0*x1": lambda x: x[0] * x[1], f"max(x0, x{n - 1}) - x1**2": lambda x: max(x[0], x[n - 1]) - x[1] ** 2,
             "x0*x1; abs(x1 - x0)": lambda x: [x[0] * x[1], abs(x[1] - x[0])],
             "(x0 > 0) + (x1 > 0)": lambda x: float(x[0] > 0) + float(x[1] > 0)}
    for text, f in exprs.items():
        q = parse_query(f"expr:{text}").bind(model)
        for k in range(n):
            expected = brute_sensitivity(f, domains, k)
            assert q.sensitivity(k, model.domains) == pytest.approx(expected, abs=1e-12)
            t, t_prime = q.sensitivity_pair(k, model.domains)  # dp's witness attains it
            attained = max(float(np.abs(np.asarray(f(np.array([*x[:k], t, *x[k + 1:]])))
                                        - np.asarray(f(np.array([*x[:k], t_prime, *x[k + 1:]])))).sum())
                           for x in itertools.product(*domains))
            assert attained == pytest.approx(expected, abs=1e-12) and t in domains[k] and t_prime in domains[k]


def test_dp_witness_of_a_non_monotone_query():
    """|x0 - 1| on {0, 1, 2}: the change that matters is 1 vs 0 or 2 (not the ends 2 vs 0)."""
    model = finite_model([[0, 1, 2], [0, 1]])
    r = ddpbayes.audit(model, "expr:abs(x0 - 1)", "laplace", "dp", scale=0.5, targets=[0])
    assert r.leakage == pytest.approx(2.0)
    assert 1.0 in (r.witness.t, r.witness.t_prime) and r.witness.t != r.witness.t_prime


def test_sensitivity_enumeration_respects_max_states():
    model = finite_model([list(range(10))] * 3)
    with pytest.raises(InputError, match=r"1,000 states, over the limit of 999 \(raise --max-states"):
        ddpbayes.audit(model, "expr:x0*x1*x2", "laplace", "dp", epsilon=1.0, max_states=999)


# ----------------------------------------------------------------------------- exact engine vs brute force


@pytest.mark.parametrize("seed", range(3))
def test_exact_engine_pdp_lattice_matches_bruteforce(seed):
    rng = np.random.default_rng(200 + seed)
    sizes = [int(s) for s in rng.integers(2, 4, size=3)]
    model, X, p = chain(seed, sizes)
    b = float(rng.uniform(0.5, 2.0))
    queries = {"x0*x1*x2": X.prod(1, keepdims=True), "max(x0, x1, x2)": X.max(1, keepdims=True),
               "(x0 > 0) + (x1 > 1) + (x2 > 0)": (1.0 * (X[:, 0] > 0) + (X[:, 1] > 1) + (X[:, 2] > 0))[:, None],
               "x0*x2; x1 - x2**2": np.column_stack([X[:, 0] * X[:, 2], X[:, 1] - X[:, 2] ** 2])}
    for text, q in queries.items():
        r = ddpbayes.audit(model, f"expr:{text}", "laplace", "pdp", scale=b, lattice=True, engine="exact")
        assert r.engine == "exact"
        for node in r.lattice:
            i, known = node.adversary.target, tuple(sorted(node.adversary.known))
            assert node.value == pytest.approx(leak(X, p, q.astype(float), b, i, known), abs=1e-9), (text, i, known)


def test_vector_tuples_with_a_discrete_latent_match_bruteforce():
    pz, pr = np.array([0.3, 0.7]), np.array([[0.2, 0.5, 0.9], [0.8, 0.4, 0.1]])
    with pm.Model() as m:
        z = pm.Categorical("z", p=pz)
        pm.Bernoulli("x", p=pt.as_tensor_variable(pr)[z], shape=3)
    model = DependenceModel(m, tuples="x")
    X = np.array(list(itertools.product([0, 1], repeat=3)), dtype=float)
    p = sum(pz[z] * np.prod(np.where(X == 1, pr[z], 1 - pr[z]), axis=1) for z in range(2))
    for text, q in {"max(x)": X.max(1), "sum(x > 0) * x[1]": X.sum(1) * X[:, 1], "x[0]*x[2]": X[:, 0] * X[:, 2]}.items():
        r = ddpbayes.audit(model, f"expr:{text}", "laplace", "idp", scale=0.7)
        for i in range(3):
            assert r.per_target[i] == pytest.approx(leak(X, p, q[:, None], 0.7, i, ()), abs=1e-9), (text, i)


def test_product_of_two_dependent_bits_by_hand():
    """X0 ~ Bern(1/2), X1 = X0 with prob 0.9: the product X0 X1 is 1 only at (1, 1).
    Target X0, nobody known: given X0 = 1, q = 1 w.p. 0.9 (else 0); given X0 = 0, q = 0.
    L(y|1)/L(y|0) = 0.9 e^{-|y-1|/b}/e^{-|y|/b} + 0.1, largest for y >= 1: 0.9 e^{1/b} + 0.1."""
    with pm.Model() as m:
        x0 = pm.Bernoulli("x0", p=0.5)
        pm.Bernoulli("x1", p=pt.switch(pt.eq(x0, 1), 0.9, 0.1))
    model = DependenceModel(m, tuples=["x0", "x1"])
    b = 1.3
    r = ddpbayes.audit(model, "expr:x0*x1", "laplace", "idp", scale=b, targets=[0])
    assert r.leakage == pytest.approx(math.log(0.9 * math.exp(1 / b) + 0.1), abs=1e-12)
    dp = ddpbayes.audit(model, "expr:x0*x1", "laplace", "dp", scale=b)
    assert dp.leakage == pytest.approx(1 / b)  # sensitivity 1 by hand: (1,1) vs (0,1)


# ----------------------------------------------------------------------------- fn: queries and the CLI

MODEL_FILE = '''
import numpy as np
import pymc as pm
import pytensor.tensor as pt
from ddpbayes import DependenceModel

def build():
    with pm.Model() as m:
        x0 = pm.Bernoulli("x0", p=0.5)
        pm.Categorical("x1", p=pt.switch(pt.eq(x0, 1), np.array([0.1, 0.2, 0.7]), np.array([0.6, 0.3, 0.1])))
    return DependenceModel(m, tuples=["x0", "x1"])

def product(x):
    return x["x0"] * x["x1"]

def both(x):
    return [x["x0"] * x["x1"], np.maximum(x["x0"], x["x1"])]

def broken(x):
    return x["nope"]
'''


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "fnmodel.py"
    path.write_text(MODEL_FILE)
    return path


def test_function_query_from_the_model_file(model_file):
    model = ddpbayes.load_model(model_file)
    X = np.array([[a, c] for a in (0, 1) for c in range(3)], dtype=float)
    p = np.array([0.5 * (w[c]) for w in ([0.6, 0.3, 0.1], [0.1, 0.2, 0.7]) for c in range(3)])
    for fn, expr, q in (("product", "x0*x1", X.prod(1, keepdims=True)),
                        ("both", "x0*x1; max(x0, x1)", np.column_stack([X.prod(1), X.max(1)]))):
        r = ddpbayes.audit(model, f"fn:{fn}", "laplace", "pdp", scale=0.8, lattice=True)
        e = ddpbayes.audit(model, f"expr:{expr}", "laplace", "pdp", scale=0.8, lattice=True)
        assert r.leakage == pytest.approx(e.leakage, abs=1e-12)
        for node in r.lattice:
            i, known = node.adversary.target, tuple(sorted(node.adversary.known))
            assert node.value == pytest.approx(leak(X, p, q, 0.8, i, known), abs=1e-9)
        assert r.to_dict()["query"] == f"fn:{fn}"
    assert ddpbayes.audit(model, "fn:product", "laplace", "dp", epsilon=1.0).problem.mechanism.scale == 2.0
    with pytest.raises(InputError, match="raised KeyError"):
        ddpbayes.audit(model, "fn:broken", "laplace", "idp", scale=1.0)
    with pytest.raises(InputError, match=r"no function 'nothing' \(it defines: both, broken, product\)"):
        ddpbayes.audit(model, "fn:nothing", "laplace", "idp", scale=1.0)
    assert FunctionQuery("f", lambda x: x["x0"] + x["x1"]).bind(model).values(X)[:, 0] == pytest.approx(X.sum(1))
    with pytest.raises(InputError, match="not loaded from one"):
        FunctionQuery("f").bind(finite_model([[0, 1]]))


@pytest.mark.parametrize("flags, message", [
    (["--query", "expr:x0*y"], "names 'y'"),
    (["--query", "expr:open('f')"], "calling 'open' is not allowed"),
    (["--query", "fn:missing"], "no function 'missing'"),
    (["--query", "fn:broken"], "raised KeyError"),
    (["--query", "sum", "--sensitivity", "1"], "applies to expr: and fn:"),
    (["--query", "expr:x0*x1", "--sensitivity", "-1"], "--sensitivity must be a positive finite number"),
])
def test_cli_errors_are_one_line_exit_2(model_file, capsys, flags, message):
    code = main(["audit", str(model_file), *flags, "--mechanism", "laplace", "--scale", "1", "--notion", "idp"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1


def test_cli_sensitivity_on_a_continuous_model(capsys):
    args = ["audit", str(EXAMPLE1), "--query", "expr:d_i*d_j", "--mechanism", "laplace", "--notion", "dp"]
    assert main([*args, "--epsilon", "1", "--query", "expr:log(d_i)"]) == 2
    assert "give --sensitivity S" in capsys.readouterr().err
    assert main([*args, "--epsilon", "1", "--sensitivity", "2", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["leakage"] == 1.0 and out["sensitivity_given"] == 2.0 and out["mechanism"]["scale"] == 2.0


def test_interval_domains_refuse_only_what_needs_the_sensitivity():
    with pm.Model() as m:
        pm.Uniform("a", 0, 1)
    model = DependenceModel(m, tuples=["a"], domains={"a": Interval(0, 1)})
    q = ExpressionQuery("a**2").bind(model)
    q.check(model.domains)  # parsing, binding and checking need no sensitivity
    assert q.values(np.array([[0.5]]))[0, 0] == 0.25


def test_report_spec_takes_a_sensitivity(tmp_path):
    from ddpbayes.reports.input import load_spec

    def spec(query: str, extra: str = "") -> object:
        path = tmp_path / "s.toml"
        path.write_text(f'model = "{EXAMPLE1}"\nquery = "{query}"\nnotions = ["dp"]\n{extra}'
                        '[mechanism]\nkind = "laplace"\nepsilon = 1.0\n')
        return load_spec(path)

    s = spec("expr:d_i*d_j", "sensitivity = 2\n")
    assert s.sensitivity == 2.0 and s.to_dict()["sensitivity"] == 2.0 and s.query_object().given == 2.0
    with pytest.raises(InputError, match=r"key 'sensitivity': --sensitivity applies to expr: and fn:"):
        spec("sum", "sensitivity = 2\n")
    with pytest.raises(InputError, match=r"key 'query': .*calling 'open'"):
        spec("expr:open(1)")


def test_long_or_deep_expressions_are_refused_in_one_line():
    for text in ["+".join(["x0"] * 200), "(" * 300 + "x0" + ")" * 300, "-" * 150 + "x0", "x0+" * 700 + "x0"]:
        with pytest.raises(InputError, match="levels deep|not valid syntax|over the limit") as exc:
            parse_query(f"expr:{text}")
        assert "\n" not in str(exc.value) and len(str(exc.value)) < 300
