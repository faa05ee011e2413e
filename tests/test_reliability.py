"""Issue 11: every oversized or bad input ends in one line and exit 2, before the memory is
allocated; loading is fast and imports nothing it need not; numbers stay in double precision.

Each test would have caught the failure the issue reports (named in its docstring). Memory is
measured with tracemalloc, which sees NumPy's allocations: a guard that works refuses with a
small peak, where the old code allocated gigabytes.
"""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
import textwrap
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from bruteforce import household_idp_closed_form, leak_bruteforce

import ddpbayes
import ddpbayes.auditing.run as audit_module
from ddpbayes import DependenceModel, InputError
from ddpbayes.cli.main import main
from ddpbayes.model import supports as supports_module

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"
COUNT = ["--query", "count", "--mechanism", "laplace", "--epsilon", "1"]
MiB = 2**20


def run_cli(args: list[str], capsys) -> tuple[int, list[str], str]:
    """Run the CLI in this process with every RuntimeWarning an error (a warning would be an
    extra line on stderr); return the exit code, the stderr lines and stdout."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        code = main(args)
    out, err = capsys.readouterr()
    return code, [line for line in err.splitlines() if line.strip()], out


def one_line_error(args: list[str], capsys, *needles: str) -> str:
    code, lines, _ = run_cli(args, capsys)
    assert code == 2, (code, lines)
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def peak_mib(fn) -> float:
    """Peak traced allocation (MiB) while `fn` runs."""
    tracemalloc.start()
    try:
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak / MiB


def model_file(tmp_path: Path, name: str, source: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    return str(path)


# ----------------------------------------------------------------------------- memory and size guards


def test_pdp_lattice_refused_with_its_cost(household):
    """household n = 20, pdp: 20 x 2^19 adversaries were listed in memory (7.6 GB, MemoryError).
    Now refused at once, naming the count, the flag, the time and (with --lattice) the memory."""
    model = household(n=20)
    with pytest.raises(InputError) as err:
        ddpbayes.audit(model, "count", "laplace", "pdp", epsilon=1.0, lattice=True)
    message = str(err.value)
    for needle in ("10,485,760 adversaries", "20 targets x 2^19", "--max-adversaries", "would take about", "GiB"):
        assert needle in message, message
    assert peak_mib(lambda: pytest.raises(InputError, ddpbayes.audit, model, "count", "laplace", "pdp",
                                          epsilon=1.0)) < 64


def test_lattice_limit_is_the_flag(household, capsys):
    """--max-adversaries sets the bound: household n = 6 has 6 x 2^5 = 192 pdp adversaries."""
    path = str(MODELS / "household.py")
    one_line_error(["audit", path, "-p", "n=6", *COUNT, "--notion", "pdp", "--max-adversaries", "191"], capsys,
                   "192 adversaries", "over the limit of 191")
    code, _, _ = run_cli(["audit", path, "-p", "n=6", *COUNT, "--notion", "pdp", "--max-adversaries", "192"], capsys)
    assert code == 0


def test_streamed_lattice_equals_one_pass(household, monkeypatch, capsys):
    """The lattice is evaluated CHUNK adversaries at a time with a running worst: chunks of 7
    give the same leakage, witness, per-target values and lattice as one pass, and a progress
    line counts them."""
    model = household(n=5, p_sick=0.7)
    whole = ddpbayes.audit(model, "count", "laplace", "pdp", scale=1.3, lattice=True)
    monkeypatch.setattr(audit_module, "CHUNK", 7)
    chunked = ddpbayes.audit(model, "count", "laplace", "pdp", scale=1.3, lattice=True, progress=True)
    assert chunked.leakage == whole.leakage
    assert chunked.witness == whole.witness
    assert chunked.per_target == whole.per_target
    assert [(r.adversary, r.value) for r in chunked.lattice] == [(r.adversary, r.value) for r in whole.lattice]
    assert len(whole.lattice) == 5 * 2**4
    assert "80/80 adversaries" in capsys.readouterr().err


def test_mechanism_kernel_bounded_by_max_states(capsys, tmp_path):
    """One Categorical tuple of 20,000 levels: the Laplace kernel is levels x (levels + 2)
    cells (2.98 GiB); --max-states did not bound it. Now refused before it is built."""
    path = model_file(tmp_path, "wide", """
        import numpy as np, pymc as pm
        from ddpbayes import DependenceModel

        def build(k=20000):
            with pm.Model() as m:
                pm.Categorical("x", p=np.ones(k) / k)
            return DependenceModel(m, tuples=["x"])
        """)
    model = ddpbayes.load_model(path)
    with pytest.raises(InputError, match=r"kernel \(20,000 query values\) has 400,040,000 cells.*--max-states"):
        ddpbayes.audit(model, "sum", "laplace", "idp", scale=1.0)
    assert peak_mib(lambda: pytest.raises(InputError, ddpbayes.audit, model, "sum", "laplace", "idp", scale=1.0)) < 64
    one_line_error(["audit", path, "--query", "sum", "--mechanism", "laplace", "--scale", "1", "--notion", "idp"],
                   capsys, "--max-states")


@pytest.mark.parametrize("dist", ["pm.Binomial('x', n=10**9, p=0.5)", "pm.DiscreteUniform('x', 0, 10**9)"])
def test_huge_support_refused_before_it_is_listed(dist, tmp_path, capsys):
    """Binomial(n=1e9) and DiscreteUniform(0, 1e9) supports were built as lists of 1e9 values,
    and the MemoryError was blamed on build(). Now refused at once, naming the size and flag."""
    path = model_file(tmp_path, "huge", f"""
        import pymc as pm
        from ddpbayes import DependenceModel

        def build():
            with pm.Model() as m:
                {dist}
            return DependenceModel(m, tuples=["x"])
        """)
    with pytest.raises(InputError, match=r"1,000,000,001 values, over the limit of 4,194,304 \(raise --max-states\)"):
        ddpbayes.load_model(path)
    assert peak_mib(lambda: pytest.raises(InputError, ddpbayes.load_model, path)) < 64
    one_line_error(["audit", path, "--query", "sum", "--mechanism", "laplace", "--scale", "1", "--notion", "idp"],
                   capsys, "1,000,000,001 values")


def test_support_limit_follows_max_states(tmp_path):
    """The same flag raises (or lowers) the limit on inferred supports."""
    path = model_file(tmp_path, "binomial", """
        import pymc as pm
        from ddpbayes import DependenceModel

        def build(n=100):
            with pm.Model() as m:
                pm.Binomial("x", n=n, p=0.5)
            return DependenceModel(m, tuples=["x"])
        """)
    with pytest.raises(InputError, match="101 values, over the limit of 50"):
        ddpbayes.load_model(path, max_states=50)
    assert ddpbayes.load_model(path, max_states=101).domains[0].values == tuple(float(v) for v in range(101))


@pytest.mark.slow  # issue #29: the default run stays under 8 minutes
def test_many_tuples_refused_early():
    """beta_bernoulli with n = 10^5 spent its time in per-tuple support inference and an O(n^2)
    sensitivity (46 s and 1.2 GB at n = 10^6). Now both are linear and the sampling engine's
    run limit refuses it; the refusal peaks far below the old footprint."""
    def run():
        model = ddpbayes.load_model(MODELS / "beta_bernoulli.py", {"n": 100_000})
        ddpbayes.audit(model, "count", "laplace", "idp", epsilon=1.0)

    # 10^5 targets x (2 target values that choose the witness + 2 fresh runs that bound it, issue #27)
    with pytest.raises(InputError, match=r"needs about 400000 MCMC runs \(over 200\)"):
        run()
    assert peak_mib(lambda: pytest.raises(InputError, run)) < 400


# ----------------------------------------------------------------------------- fast loading


def test_supports_evaluated_by_one_function(monkeypatch):
    """Supports were inferred with one pm.draw (a fresh compile, 0.37 s) per variable. Now
    constants are read off the graph and the rest evaluated by one function for all variables."""
    compiled = []
    real = pytensor.function

    def counting(*args, **kwargs):
        compiled.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(supports_module.pytensor, "function", counting)
    with pm.Model() as m:
        for k in range(40):  # bounds written as expressions: nothing to read off the graph
            pm.DiscreteUniform(f"u{k}", pt.floor(pt.as_tensor(k / 2)), k + 3)
        for k in range(40):
            pm.Binomial(f"b{k}", n=pt.as_tensor(k) + 1, p=0.3)
        for k in range(40):
            pm.Categorical(f"c{k}", p=np.ones(k + 2) / (k + 2))
    rvs = m.free_RVs
    domains = supports_module.supports(rvs)
    assert len(compiled) <= 1
    for k in range(40):
        assert domains[k].values == tuple(float(v) for v in range(k // 2, k + 4))
        assert domains[40 + k].values == tuple(float(v) for v in range(k + 2))
        assert domains[80 + k].values == tuple(float(v) for v in range(k + 2))
    compiled.clear()
    supports_module.supports(rvs)  # cached on the variables
    assert compiled == []


def test_lazy_package_keeps_its_functions():
    """`import ddpbayes` loads PyMC only on first use of a name; importing the modules behind
    those names (as the engines and reports do) must not shadow them."""
    import ddpbayes.auditing  # noqa: F401
    import ddpbayes.model.loading  # noqa: F401

    assert callable(ddpbayes.audit) and callable(ddpbayes.load_model)
    assert ddpbayes.audit is ddpbayes.auditing.audit


def test_help_and_argument_errors_do_not_import_pymc():
    """`ddpbayes --help` and argument errors imported PyMC (5-10 s). Now nothing heavy is
    imported before a command runs (the figures are in benchmarks/bench_load.py)."""
    code = textwrap.dedent("""
        import sys
        from ddpbayes.cli.main import main
        codes = [main(args) for args in (["audit", "m.py", "--query", "count"], ["calibrate", "--bogus"],
                                         ["derive", "gaussian"], ["report"])]
        for args in (["--help"], ["audit", "--help"], ["derive", "gaussian", "--help"]):
            try:
                main(args)
            except SystemExit as e:
                codes.append(e.code)
        heavy = sorted(m for m in ("pymc", "pytensor", "arviz", "sympy", "scipy", "matplotlib") if m in sys.modules)
        print(codes, heavy)
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "[2, 2, 2, 2, 0, 0, 0] []", (out.stdout, out.stderr)


def test_derivations_and_noise_checks_do_not_import_pymc():
    """`ddpbayes derive` is sympy alone, and the mechanisms (asked by the command line's noise
    checks) and queries read only the model's domains: none loads PyMC (#26 moved the GDP maths
    under mechanisms/, and the model package loaded the contract, hence PyMC, on any import)."""
    code = textwrap.dedent("""
        import sys
        from ddpbayes.cli.main import main
        code = main(["derive", "gaussian", "--cov", "[[1, 0.5], [0.5, 1]]", "--mechanism", "gaussian", "--sigma", "2"])
        import ddpbayes.mechanisms, ddpbayes.queries, ddpbayes.symbolic
        print(code, sorted(m for m in ("pymc", "pytensor", "arviz") if m in sys.modules))
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "0 []", (out.stdout, out.stderr)


# ----------------------------------------------------------------------------- exit codes and messages


@pytest.mark.parametrize("flags, needle", [
    (["--seed", "-1"], "--seed must be an integer from 0 to 4294967295, got -1"),
    (["--seed", str(2**32)], "--seed must be an integer"),
    (["--draws", "1", "--tune", "1"], "--draws must be at least 8"),
    (["--tune", "-1"], "--tune must be a non-negative integer"),
    (["--chains", "0"], "--chains must be a positive integer"),
    (["--max-states", "0"], "--max-states must be a positive integer"),
    (["--max-adversaries", "0"], "--max-adversaries must be a positive integer"),
])
def test_bad_settings_exit_2(flags, needle, capsys):
    """--seed -1 and --draws 1 --tune 1 ("math domain error") ended in exit 3."""
    one_line_error(["audit", str(MODELS / "beta_bernoulli.py"), *COUNT, "--notion", "idp", "--engine", "sampling",
                    *flags], capsys, needle)


def test_rejected_model_parameters_on_sampling_engine(capsys):
    """beta_bernoulli -p a=-1.0 passed build() and failed inside a prior draw: exit 3."""
    one_line_error(["audit", str(MODELS / "beta_bernoulli.py"), "-p", "a=-1.0", *COUNT, "--notion", "idp",
                    "--target", "0"], capsys, "the model rejects its own parameters")


@pytest.mark.parametrize("source, needle", [
    ("import sys\nsys.exit(0)\n", "failed to import: SystemExit"),
    ("raise SystemExit(5)\n", "failed to import: SystemExit"),
    ("def build():\n    raise SystemExit(3)\n", "build() in"),
])
def test_model_that_exits_is_a_model_error(source, needle, tmp_path, capsys):
    """A model file raising SystemExit made ddpbayes exit with that code (or 0, silently)."""
    path = tmp_path / "exits.py"
    path.write_text(source)
    one_line_error(["audit", str(path), *COUNT, "--notion", "idp"], capsys, needle, "must not exit")


def test_directory_as_model_says_so(capsys):
    """A directory given as the model was reported as "does not exist"."""
    one_line_error(["audit", str(MODELS), *COUNT, "--notion", "idp"], capsys, "is a directory")


@pytest.mark.parametrize("query, noise, notion, needle", [
    ("count", ["--scale", "1e-320"], "idp", "scale must be at least 2.225e-308"),
    ("count", ["--epsilon", "1e308"], "idp", "--epsilon 1e+308 sets the scale to 1e-308"),
    ("linear:1e300,1,1,1", ["--scale", "1e-10"], "idp", "1e-10 is too small for query values spanning 1e+300"),
    ("linear:1e308,1,1,1", ["--scale", "0.1"], "dp", "overflows double precision"),
    ("linear:1e308,1e308,1,1", ["--scale", "1"], "idp", "overflow double precision"),
])
def test_extreme_numbers_give_one_line(query, noise, notion, needle, capsys):
    """--scale 1e-320, --epsilon 1e308 and linear:1e308,... printed numpy RuntimeWarnings (and
    an infinite leakage where the true one is finite). Now one line naming the limit."""
    one_line_error(["audit", str(MODELS / "household.py"), "--query", query, "--mechanism", "laplace", *noise,
                    "--notion", notion], capsys, needle)


def test_tiny_scale_still_answers_when_representable(capsys):
    """--scale 1e-307: every log-density is finite, so the answer is the finite 1/b."""
    code, lines, out = run_cli(["audit", str(MODELS / "household.py"), "--query", "count", "--mechanism", "laplace",
                                "--scale", "1e-307", "--notion", "dp", "--format", "json"], capsys)
    assert code == 0 and lines == []
    assert json.loads(out)["leakage"] == pytest.approx(1 / 1e-307, rel=1e-15)


def test_one_chain_is_told_to_add_chains(capsys):
    """--chains 1 was told to raise --draws/--tune, with an ArviZ warning on stderr: R-hat
    needs at least 2 chains, so say that."""
    code, lines, out = run_cli(["audit", str(MODELS / "beta_bernoulli.py"), "-p", "n=2", *COUNT, "--notion", "idp",
                                "--engine", "sampling", "--draws", "60", "--tune", "60", "--chains", "1",
                                "--claim", "9", "--target", "0", "--seed", "1"], capsys)
    assert code == 4, (code, lines, out)
    assert "needs at least 2 per run: raise --chains" in out
    assert [line for line in lines if not line.startswith("ddpbayes: sampling")] == []  # progress lines only


def test_float32_constants_do_not_leak_into_the_joint(household, tmp_path):
    """PyTensor stores 0.5 and 0.25 as float32 constants: the joint summed to 0.99999999238 on
    plain Bernoulli(0.5) tuples ("cover 1 of the prior mass" note) and leakages lost digits.
    The exact engine now works in float64 throughout: no note, and the hand closed form to 1e-12."""
    path = model_file(tmp_path, "bern", """
        import pymc as pm
        from ddpbayes import DependenceModel

        def build(n=8):
            with pm.Model() as m:
                for k in range(n):
                    pm.Bernoulli(f"x{k}", 0.5)
            return DependenceModel(m, tuples=[f"x{k}" for k in range(n)])
        """)
    result = ddpbayes.audit(ddpbayes.load_model(path), "count", "laplace", "idp", scale=0.7)
    assert result.notes == []
    assert result.leakage == pytest.approx(1 / 0.7, abs=1e-12)  # independent tuples: w / b
    model = household(n=5, p_house=0.5, p_sick=0.75, p_base=0.25)  # every constant exact in float32
    got = ddpbayes.audit(model, "count", "laplace", "idp", scale=1.0)
    assert got.notes == []
    assert got.leakage == pytest.approx(household_idp_closed_form(5, 1.0, ph=0.5, ps=0.75, pb=0.25), abs=1e-12)


# ----------------------------------------------------------------------------- the shipped Categorical chain


def _chain_joint(n: int, k: int, p_stay: float) -> np.ndarray:
    """P(x) = (1/k) prod_t P[x_{t-1}, x_t], P = p_stay on the diagonal, (1 - p_stay)/(k - 1) off it."""
    joint = np.zeros((k,) * n)
    for x in itertools.product(range(k), repeat=n):
        p = 1.0 / k
        for a, b in zip(x, x[1:]):
            p *= p_stay if a == b else (1 - p_stay) / (k - 1)
        joint[x] = p
    return joint


@pytest.mark.parametrize("n, k, p_stay, scale", [(2, 3, 0.7, 1.0), (3, 4, 0.55, 2.0), (4, 3, 0.9, 0.8), (3, 3, 1 / 3, 1.0)])
def test_categorical_chain_against_brute_force(n, k, p_stay, scale):
    """models/categorical_chain.py, sum with Laplace(b), every pdp adversary against the dense-grid
    brute force of tests/bruteforce.py on a joint written from the transition matrix."""
    model = ddpbayes.load_model(MODELS / "categorical_chain.py", {"n": n, "k": k, "p_stay": p_stay})
    result = ddpbayes.audit(model, "sum", "laplace", "pdp", scale=scale, lattice=True)
    joint, values = _chain_joint(n, k, p_stay), [list(range(k))] * n
    for r in result.lattice:
        expected = leak_bruteforce(joint, values, [1.0] * n, scale, r.adversary.target, sorted(r.adversary.known))
        assert r.value == pytest.approx(expected, abs=1e-8), r.adversary
    if math.isclose(p_stay, 1 / k):  # rows of P uniform: independent days, every notion (k - 1)/b
        assert result.leakage == pytest.approx((k - 1) / scale, abs=1e-12)


def test_float32_constants_in_a_gaussian_model():
    """sqrt(0.5) of a float32 constant is computed in float32 (7 digits); the Gaussian engine now
    reads every parameter in float64. Hand derivation: Var a = 1/2, Cov(a, b) = 1/4,
    Var b = 1/8 + 1/4 = 3/8; sum with Laplace(1) on [0, 1]: leak(a) = 1 + (1/4)/(1/2) = 3/2,
    leak(b) = 1 + (1/4)/(3/8) = 5/3."""
    with pm.Model() as m:
        a = pm.Normal("a", 0, pm.math.sqrt(0.5))
        pm.Normal("b", 0.5 * a, pm.math.sqrt(0.25))
    result = ddpbayes.audit(DependenceModel(m, tuples=["a", "b"], domains=ddpbayes.Interval(0, 1)), "sum", "laplace",
                            "idp", scale=1.0)
    assert result.engine == "gaussian"
    assert result.per_target == pytest.approx([1.5, 5 / 3], abs=1e-13)


def test_float32_constants_on_a_tree_against_enumeration():
    """A binary family tree (root r; children a, b; grandchildren c of a, d of b) with
    P(child = 1 | parent) = switch(parent, 0.75, 0.25): both constants are exact in float32, so
    PyTensor built the tree's terms in float32 and pdp answers were off by 4e-8. The joint is
    written here from the tree; every target with known sets of size 0, 1 and 2, to 1e-12."""
    parents = {"r": None, "a": "r", "b": "r", "c": "a", "d": "b"}
    with pm.Model() as m:
        rv: dict = {}
        for name, par in parents.items():
            rv[name] = pm.Bernoulli(name, 0.5 if par is None else pm.math.switch(rv[par], 0.75, 0.25))
    names = list(parents)
    model = DependenceModel(m, tuples=names)
    joint = np.zeros((2,) * 5)
    for x in itertools.product((0, 1), repeat=5):
        value = dict(zip(names, x))
        joint[x] = math.prod(
            (q if value[name] else 1 - q)
            for name, par in parents.items()
            for q in [0.5 if par is None else (0.75 if value[par] else 0.25)])
    for i in range(5):
        others = [j for j in range(5) if j != i]
        for known in ([], others[:1], others[1:3]):
            got = ddpbayes.audit(model, "count", "laplace", "pdp", scale=0.9, targets=[i], known=known)
            assert got.leakage == pytest.approx(leak_bruteforce(joint, [[0, 1]] * 5, [1] * 5, 0.9, i, known),
                                                abs=1e-12), (i, known)
