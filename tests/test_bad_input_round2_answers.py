"""Issue #25, "Bad input, round two": inputs that gave a silent wrong answer or crashed now give the
right answer or one line on stderr with exit 2. Every expected number is derived here by hand or by
enumeration, never by the engine under test."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import ddpbayes

# ----------------------------------------------------------------------------- information at tiny scales


def household_joint(n: int = 4, p_house: float = 0.2, p_sick: float = 0.8, p_base: float = 0.1):
    """models/household.py enumerated: the states of x0..x_{n-1} (2^n, n) and their probabilities."""
    xs = np.array(list(itertools.product([0, 1], repeat=n)))
    p = np.zeros(len(xs))
    for h, ph in ((1, p_house), (0, 1 - p_house)):
        rate = p_sick if h else p_base
        p += ph * np.prod(np.where(xs == 1, rate, 1 - rate), axis=1)
    return xs, p


def entropy(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-np.sum(p * np.log(p)))


def conditional_entropy(x: np.ndarray, key: np.ndarray, p: np.ndarray) -> float:
    """H(X | K) for rows of (x, key) with probabilities p."""
    total = 0.0
    for k in np.unique(key, axis=0):
        rows = np.all(key.reshape(len(p), -1) == np.asarray(k).reshape(1, -1), axis=1)
        pk = p[rows].sum()
        total += pk * entropy(np.array([p[rows & (x == v)].sum() for v in (0, 1)]) / pk)
    return total


def kl_at_top(xs: np.ndarray, p: np.ndarray, b: float) -> float:
    """D(y) for y >= n (where it is largest as b -> 0): only X_0 = 1 can give count n, X_0 = 0 is one
    level below, so g_0/g_1 -> (w_{0,n-1}/w_{1,n}) e^{-1/b} and
    D -> p_0/b + p_0 log(p_0 w_{1,n}/w_{0,n-1}) + p_1 log p_1."""
    n, count, x0 = xs.shape[1], xs.sum(axis=1), xs[:, 0]
    p0, p1 = p[x0 == 0].sum(), p[x0 == 1].sum()
    w0, w1 = p[(x0 == 0) & (count == n - 1)].sum(), p[(x0 == 1) & (count == n)].sum()
    return p0 / b + p0 * math.log(p0 * w1 / w0) + p1 * math.log(p1)


def dense_kl(xs: np.ndarray, p: np.ndarray, b: float) -> float:
    """max of D(y) = Σ_t p_t log(p_t f(y) / g_t(y)) over y = level + b u, u in [-50, 50] by 1/16."""
    count, x0 = xs.sum(axis=1), xs[:, 0]
    y = (np.arange(xs.shape[1] + 1)[:, None] + b * np.linspace(-50, 50, 1601)[None, :]).reshape(-1)
    log_k = -np.abs(y[None, :] - count[:, None]) / b  # the common 1/(2b) cancels in D
    log_g = np.array([np.logaddexp.reduce(np.log(p[x0 == t])[:, None] + log_k[x0 == t], axis=0) for t in (0, 1)])
    log_pt = np.log([p[x0 == 0].sum(), p[x0 == 1].sum()])
    log_f = np.logaddexp(log_g[0], log_g[1])
    return float(np.max(np.sum(np.exp(log_pt)[:, None] * (log_pt[:, None] + log_f[None, :] - log_g), axis=0)))


@pytest.mark.parametrize("scale", [1e-3, 1e-20, 1e-200, 1e-300])
def test_information_respects_its_bounds_at_tiny_scales(household, scale):
    """As b -> 0 the output is the count itself: I(X_0; Y) -> I(X_0; count) = H(X_0) - H(X_0 | count),
    I(X_0; Y | X_(0)) -> H(X_0 | X_(0)) (the count and the others give X_0), and sup_y D -> P(X_0 = 0)/b
    (at y = n only X_0 = 1 is possible, at distance 1/b in the log-density from X_0 = 0). At b = 1e-3
    the levels are 1000 scales apart, so the limits hold to e^{-1000}. Before: MI 13,172.9 nats at
    1e-20 for a binary tuple, 1.3e184 at 1e-200, a crash at 1e-300."""
    xs, p = household_joint()
    x0 = xs[:, 0]
    h_x0 = entropy(np.array([p[x0 == 0].sum(), p[x0 == 1].sum()]))
    mi_limit = h_x0 - conditional_entropy(x0, xs.sum(axis=1), p)
    cmi_limit = conditional_entropy(x0, xs[:, 1:], p)
    r = ddpbayes.audit(household(), "count", "laplace", "idp", scale=scale, targets=[0], information="nats")
    info = r.information
    assert info["mutual_information"] <= h_x0
    assert info["mutual_information"] == pytest.approx(mi_limit, abs=1e-9)
    assert info["conditional_mutual_information"] == pytest.approx(cmi_limit, abs=1e-9)
    assert info["kl_max"] == pytest.approx(kl_at_top(xs, p, scale), rel=1e-12)
    if scale == 1e-3:  # no y between the levels does better: a dense scan, D computed state by state
        assert info["kl_max"] >= dense_kl(xs, p, scale) - 1e-9
    assert all(info["holds"].values())


@pytest.mark.parametrize("mechanism,scale", [("laplace", 1e300), ("geometric", 1e20), ("geometric", 1e300)])
def test_information_at_a_huge_scale_vanishes(household, mechanism, scale):
    """The output carries nothing about X_0 (MI of order 1/b^2). Before, geometric noise at 1e20 crashed
    (α = e^{-1/b} rounds to 1: log1p(-1))."""
    r = ddpbayes.audit(household(), "count", mechanism, "idp", scale=scale, targets=[0], information="nats")
    assert r.information["mutual_information"] == pytest.approx(0.0, abs=1e-15)
    assert r.information["kl_max"] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("flag", [["--scale", "1e-300"], ["--epsilon", "1e300"]])
def test_cli_tiny_scale_prints_the_measures(capsys, models_dir, flag):
    """Before: internal error 'Unknown format code 'g' for object of type 'str'' (exit 3)."""
    from ddpbayes.cli.main import main

    code = main(["audit", str(models_dir / "household.py"), "--query", "count", "--mechanism", "laplace", *flag,
                 "--notion", "idp", "--target", "0"])
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    line = next(x for x in out.splitlines() if x.strip().startswith("I(X_i; Y) "))
    assert 0 < float(line.split()[2]) < math.log(2)


# ----------------------------------------------------------------------------- user code: fn: queries, build()

HOUSEHOLD = '''
import pymc as pm
from ddpbayes import DependenceModel


def build(n: int = 4):
    with pm.Model() as m:
        h = pm.Bernoulli("h", 0.2)
        for k in range(n):
            pm.Bernoulli(f"x{k}", pm.math.switch(h, 0.8, 0.1))
    return DependenceModel(m, tuples=[f"x{k}" for k in range(n)])
'''


def write_model(tmp_path, extra: str = "", name: str = "model.py"):
    path = tmp_path / name
    path.write_text(HOUSEHOLD + extra)
    return path


def test_fn_query_updating_its_input_in_place(tmp_path):
    """`s = x["x0"]; s += x["x1"]; ...` used to write into the engine's own table of states: the
    leakage stayed right but KL/MI did not. References: scipy quad over y and a dense grid, on the
    household enumerated here."""
    from test_information import kl_dense, mi_quad

    path = write_model(tmp_path, '''

def total(x):
    s = x["x0"]
    for k in range(1, 4):
        s += x[f"x{k}"]
    return s
''')
    model = ddpbayes.load_model(path)
    r = ddpbayes.audit(model, "fn:total", "laplace", "idp", scale=1.0, targets=[0], information="nats")
    xs, p = household_joint()
    t, q = xs[:, 0].astype(float), xs.sum(axis=1).astype(float)
    assert r.information["mutual_information"] == pytest.approx(mi_quad(t, q, p, 1.0), abs=1e-9)
    assert r.information["kl_max"] == pytest.approx(kl_dense(t, q, p, 1.0), abs=1e-8)


def cli(*argv: str) -> tuple[int, str, str]:
    """`ddpbayes argv` in a process of its own (forked after the imports: tests/forked.py): (exit code, stdout, stderr)."""
    from forked import run_cli

    return run_cli(list(argv))


PRINTS = '''

print("hello from the import")
_build = build


def build(n: int = 4):
    print("hello from build()")
    return _build(n)


def loud(x):
    print("hello from the query")
    return x["x0"] + x["x1"]
'''


def test_user_prints_keep_json_clean(tmp_path):
    """Before: build()'s and the query's prints went into stdout and broke --format json."""
    import json

    path = write_model(tmp_path, PRINTS)
    code, out, err = cli("audit", str(path), "--query", "fn:loud", "--mechanism", "laplace", "--scale", "1",
                         "--notion", "idp", "--format", "json", "--information", "none")
    assert code == 0, err
    assert json.loads(out)["notion"] == "idp"
    assert "hello from build()" in err and "hello from the query" in err and "hello from the import" in err


@pytest.mark.parametrize("where,call", [("build", "os._exit(0)"),
                                        pytest.param("build", "sys.exit(0)", marks=pytest.mark.slow),
                                        ("query", "os._exit(0)"),
                                        pytest.param("query", "raise SystemExit(0)", marks=pytest.mark.slow),
                                        ("import", "os._exit(0)")])  # the slow ones: the default run's 8 minutes
def test_an_exit_in_user_code_is_one_line(tmp_path, where, call):
    """Before: os._exit(0) in build() or a query ended the run with exit 0 and no output."""
    body = {"build": f"\n\n_build = build\n\n\ndef build(n: int = 4):\n    {call}\n",
            "query": f"\n\ndef leave(x):\n    {call}\n",
            "import": f"\n{call}\n"}[where]
    path = write_model(tmp_path, "\nimport os\nimport sys\n" + body)
    query = "fn:leave" if where == "query" else "count"
    code, out, err = cli("audit", str(path), "--query", query, "--mechanism", "laplace", "--scale", "1",
                         "--notion", "idp")
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1 and "exit(0)" in err and err.startswith("error: "), err


def test_user_code_blocks_interleaved_across_threads_restore_stdout_and_exit(capsys):
    """Two threads (a Dask worker's) enter and leave `user_code` out of order: inside, prints go to stderr
    and os._exit raises SystemExit; after the last one leaves, stdout and os._exit are the originals."""
    import os
    import sys
    import threading

    from ddpbayes.model.usercode import user_code

    before = (sys.stdout, os._exit)
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    caught = []

    def a():
        with user_code():
            a_in.set()
            b_in.wait()
            print("from a")
        a_out.set()

    def b():
        a_in.wait()
        with user_code():
            b_in.set()
            a_out.wait()
            try:
                os._exit(3)
            except SystemExit as exc:
                caught.append(exc.code)

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert caught == [3] and (sys.stdout, os._exit) == before
    out, err = capsys.readouterr()
    assert out == "" and "from a" in err


@pytest.mark.parametrize("fails", [False, True])
def test_model_variables_carry_no_creation_trace_and_the_limit_is_restored(tmp_path, fails):
    """PyTensor's traceback__limit is 0 while the file loads (no `tag.trace` is recorded: DESIGN §4),
    and restored afterwards, also when build() raises."""
    import pytensor

    from ddpbayes.errors import InputError
    from ddpbayes.model.loading import load_model

    extra = "\n\n_build = build\n\n\ndef build(n: int = 4):\n    raise ValueError('no')\n" if fails else ""
    with pytensor.config.change_flags(traceback__limit=5):
        if fails:
            with pytest.raises(InputError, match="raised ValueError: no"):
                load_model(write_model(tmp_path, extra))
        else:
            model = load_model(write_model(tmp_path, extra))
            assert [v.tag.trace for v in model.model.free_RVs] == [[]] * 5
        assert pytensor.config.traceback__limit == 5


@pytest.mark.parametrize("where", ["build", "import"])
def test_an_endless_build_shows_life_and_stops_on_ctrl_c(tmp_path, where):
    """Before: a build() (or a model file) that never returns gave no sign of life. Now a line on stderr
    after a few seconds (NOTICE_AFTER, shortened here), and Ctrl-C ends the run: exit 130, last line
    'interrupted'."""
    from forked import start_code

    loop = "\n    while True:\n        pass\n"
    path = write_model(tmp_path, "\n\ndef build(n: int = 4):" + loop if where == "build" else "\n\nif True:" + loop)
    argv = ["audit", str(path), "--query", "count", "--mechanism", "laplace", "--scale", "1", "--notion", "idp"]
    # Ctrl-C's handler as a terminal leaves it (a test run in the background of a shell has SIGINT ignored)
    script = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
              "from ddpbayes.model import usercode; usercode.NOTICE_AFTER = 0.5; "
              f"from ddpbayes.cli.main import main; sys.exit(main({argv!r}))")
    with start_code(script) as run:  # forked after the imports (tests/forked.py): a process of its own
        first = run.first_line(timeout=120)
        said = {"build": "build() in model file", "import": "the import of model file"}[where]
        assert first.startswith(said) and "still running" in first and "Ctrl-C" in first
        run.interrupt()
        code, out, err = run.finish(timeout=30)
    assert code == 130 and out == ""
    assert err.splitlines()[-1] == "interrupted"


def test_a_worker_builds_the_model_the_audit_started_with(tmp_path):
    """Before: a worker rebuilt the model from the file as it was when the unit arrived, so editing the
    file during a --workers/--scheduler audit mixed two models. The reference now carries the text: the
    model a worker unpickles (`ModelRef.load`, what `DependenceModel.__reduce__` runs there) is the
    original, whatever the file says now."""
    import pickle

    path = write_model(tmp_path, "\nP_HOUSE = 0.2\n")
    model = ddpbayes.load_model(path)
    path.write_text(HOUSEHOLD + "\nP_HOUSE = 0.5\n")
    rebuilt = pickle.loads(pickle.dumps(model))
    assert rebuilt is not model and rebuilt.source.P_HOUSE == 0.2
    assert rebuilt.origin == model.origin


# ----------------------------------------------------------------------------- parameters, expressions, counts


def test_a_long_run_of_minus_signs_is_one_line():
    """Before: MemoryError in the parser (exit 3), and the message would have echoed 100,000 characters."""
    from ddpbayes.errors import InputError
    from ddpbayes.model.loading import parse_params

    with pytest.raises(InputError, match="nested too deeply") as info:
        parse_params(["n=" + "-" * 100_000 + "1"])
    assert len(str(info.value)) < 300


@pytest.mark.parametrize("text,match", [("x0[::0]", "step 0"), ("x0 + " + "9" * 400, "beyond double precision"),
                                        ("x0 * 1e400", "beyond double precision"), ("x0[::-0]", "step 0")])
def test_expression_constants_are_checked_when_parsed(text, match):
    """Before: 'slice step cannot be zero' (ValueError) and 'int too large to convert to float', exit 3."""
    from ddpbayes.errors import InputError
    from ddpbayes.queries.expression import parse_expression

    with pytest.raises(InputError, match=match) as info:
        parse_expression(text)
    assert len(str(info.value)) < 300


def test_a_state_count_of_thousands_of_digits_is_one_line():
    """markov_chain.py -p n=15000: 2^15000 states. Before: 'Exceeds the limit (4300 digits) for integer string
    conversion' (exit 3). log10(2^15000) = 15000 log10(2) = 4515.45: about 2.82e+4515."""
    from ddpbayes.errors import InputError
    from ddpbayes.limits import check_states, count_text

    with pytest.raises(InputError, match=r"about 2\.82e\+4515 states, over the limit of 4,194,304 \(raise"):
        check_states(2**15000, "the joint state space")
    assert count_text(4_194_304) == "4,194,304"
    assert count_text(10**18) == "about 1e+18"


# ----------------------------------------------------------------------------- the attack at extreme epsilons


@pytest.mark.parametrize("b", [1e-300, 1e-200, 1e-3, 0.7, 1e3, 1e200, 1e300])
def test_laplace_normal_density_at_every_scale(b):
    """log of the Laplace(b) + Normal(σ²) density. Before: b**2 overflowed (OverflowError at epsilon 1e-300)
    or underflowed (RuntimeWarnings and nan at 1e300). References: as b -> 0 the Normal density, as
    b -> inf 1/(2b) (relative error of order σ/b or b/σ, far below the tolerance at the extremes); between,
    the convolution integrated numerically around its kink."""
    import warnings

    from scipy import integrate

    from ddpbayes.attack.posterior import laplace_normal_logpdf

    sigma, r = 0.1, np.array([-0.35, 0.0, 0.02, 0.5])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = laplace_normal_logpdf(r, b, np.full(r.shape, sigma))
    if b <= 1e-200:
        expected = -r**2 / (2 * sigma**2) - math.log(sigma * math.sqrt(2 * math.pi))
    elif b >= 1e200:
        expected = np.full(r.shape, -math.log(2) - math.log(b))
    else:
        def density(x):  # over the Normal's ±12σ, cut at the Laplace kernel's kink z = x
            def integrand(z):
                return math.exp(-abs(x - z) / b - z * z / (2 * sigma**2)) / (2 * b * sigma * math.sqrt(2 * math.pi))
            return sum(integrate.quad(integrand, lo, hi, epsabs=0, epsrel=1e-12, limit=200)[0]
                       for lo, hi in ((-12 * sigma, x), (x, 12 * sigma)))
        expected = np.log([density(x) for x in r])
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("epsilon", ["1e-300", "1e300"])
def test_attack_at_extreme_epsilons(epsilon):
    """Before: OverflowError (exit 3) at 1e-300; RuntimeWarnings on stderr at 1e300."""
    code, out, err = cli("attack", "--epsilons", epsilon, "--targets", "5", "--grid", "5")
    assert code == 0, err
    assert "Warning" not in err and "nan" not in out
