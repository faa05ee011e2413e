"""A diffprivlib mechanism or an OpenDP measurement audited directly (issue #28 item 6;
`mechanisms/interop.py`, docs/guide/mechanisms.md, "Interop").

- Each object ddpbayes recognises gives exactly the leakage of the flags the Interop table maps it to
  (household n = 4, the count, idp; identity for the selection and randomized response), through the
  same engine, and its description names the object.
- The laws recognised beyond tests/test_interop.py's (Ghosh's truncated geometric, the exponential
  mechanism, randomized response) are checked against diffprivlib's own samplers: chi-square on its
  counts passes, and fails for the parameter 20% off.
- Objects without a ddpbayes law are audited by the program engine: a certified lower bound, at most the
  exact leakage of the kernel they post-process; diffprivlib's are reproducible from the seed.
- Objects that are no mechanism, or whose parameters disagree, are one-line InputErrors.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import ddpbayes
from ddpbayes.cli.main import main
from ddpbayes.errors import InputError
from ddpbayes.mechanisms.interop import from_library
from ddpbayes.mechanisms.selection import ExponentialMechanism
from ddpbayes.mechanisms.truncated_geometric import TruncatedGeometric

N = 20_000
P_MIN = 1e-4
WRONG = 1.2  # a parameter this far off must be rejected by the same draws
RUNS = 2000  # program runs per stage: a fast, loose lower bound


@pytest.fixture(scope="module")
def dpl():
    return pytest.importorskip("diffprivlib.mechanisms", reason="diffprivlib is not installed (pip install '.[interop]')")


@pytest.fixture(scope="module")
def dp():
    prelude = pytest.importorskip("opendp.prelude", reason="OpenDP is not installed (pip install '.[interop]')")
    prelude.enable_features("contrib", "honest-but-curious")
    return prelude


@pytest.fixture(scope="module")
def model(household):
    return household(n=4)


def run(model, query, mechanism, **kw):
    return ddpbayes.audit(model, query, mechanism, "idp", information=None, **kw)


# ----------------------------------------------------------------------------- exact: same as the flags

DIFFPRIVLIB = {  # name: (object, query, flags, relative agreement)
    "Laplace": (lambda m: m.Laplace(epsilon=1, sensitivity=1), "count", ("laplace", {"epsilon": 1.0}), 0),
    "Laplace-delta": (lambda m: m.Laplace(epsilon=0.5, delta=0.1, sensitivity=2), "count",
                      ("laplace", {"scale": 2 / (0.5 - math.log(0.9))}), 0),
    "Geometric": (lambda m: m.Geometric(epsilon=1, sensitivity=1), "count", ("geometric", {"epsilon": 1.0}), 0),
    "GeometricTruncated": (lambda m: m.GeometricTruncated(epsilon=0.7, sensitivity=1, lower=0, upper=4), "count",
                           ("truncated_geometric", {"epsilon": 0.7, "params": {"n": "4"}}), 0),
    "GaussianAnalytic": (lambda m: m.GaussianAnalytic(epsilon=1, delta=1e-5, sensitivity=1), "count",
                         ("gaussian", {"epsilon": 1.0, "delta": 1e-5}), 1e-5),
    "Gaussian": (lambda m: m.Gaussian(epsilon=0.5, delta=1e-5, sensitivity=1), "count",
                 ("gaussian", {"scale": math.sqrt(2 * math.log(1.25 / 1e-5)) / 0.5, "delta": 1e-5}), 1e-12),
    "GaussianDiscrete": (lambda m: m.GaussianDiscrete(epsilon=1, delta=1e-5, sensitivity=1), "count",
                         ("discrete_gaussian", {"epsilon": 1.0, "delta": 1e-5}), 1e-5),
    "Binary": (lambda m: m.Binary(epsilon=1.2, value0="0", value1="1"), "identity",
               ("randomized_response", {"epsilon": 1.2}), 0),
    "Exponential": (lambda m: m.Exponential(epsilon=1, sensitivity=1, utility=[0, 0, 0, 0]), "identity",
                    ("exponential", {"epsilon": 1.0}), 0),
    "Exponential-monotonic": (lambda m: m.Exponential(epsilon=1, sensitivity=1, utility=[0, 0, 0, 0], monotonic=True),
                              "identity", ("exponential", {"epsilon": 1.0, "params": {"monotone": "true"}}), 0),
}


def assert_same(lib, flags, rel):
    """The same engine and leakage (exactly, or to `rel` where the library calibrates σ itself)."""
    assert lib.engine == flags.engine
    if rel == 0:
        assert lib.leakage == flags.leakage
    else:
        assert lib.leakage == pytest.approx(flags.leakage, rel=rel)


@pytest.mark.parametrize("name", list(DIFFPRIVLIB))
def test_diffprivlib_object_is_audited_as_its_flags(dpl, model, name):
    make, query, (kind, flags), rel = DIFFPRIVLIB[name]
    obj = make(dpl)
    lib = run(model, query, obj)
    assert_same(lib, run(model, query, kind, **flags), rel)
    assert lib.engine != "program"
    assert lib.mechanism["kind"] == kind
    assert lib.mechanism["from"].startswith(f"diffprivlib.mechanisms.{type(obj).__name__}(epsilon=")


OPENDP = {  # name: (maker, input type, scale, flags)
    "laplace": ("make_laplace", float, 1.0, ("laplace", {"scale": 1.0})),
    "integer-laplace": ("make_laplace", int, 1.0, ("geometric", {"scale": 1.0})),
    "geometric": ("make_geometric", int, 1.5, ("geometric", {"scale": 1.5})),
    "gaussian": ("make_gaussian", float, 2.0, ("gaussian", {"scale": 2.0})),
    "integer-gaussian": ("make_gaussian", int, 2.0, ("discrete_gaussian", {"scale": 2.0})),
}


def opendp_scalar(dp, maker, kind, scale):
    atom = dp.atom_domain(T=float, nan=False) if kind is float else dp.atom_domain(T=int)
    return getattr(dp.m, maker)(atom, dp.absolute_distance(T=kind), scale=scale)


@pytest.mark.parametrize("name", list(OPENDP))
def test_opendp_measurement_is_audited_as_its_flags(dp, model, name):
    maker, kind, scale, (flag_kind, flags) = OPENDP[name]
    lib = run(model, "count", opendp_scalar(dp, maker, kind, scale))
    assert_same(lib, run(model, "count", flag_kind, **flags), 0)
    assert lib.mechanism["kind"] == flag_kind and lib.mechanism["from"].startswith("opendp Measurement(input_domain=")
    assert "draws fit" in lib.mechanism["from"]


def test_opendp_vector_measurement_on_a_vector_query(dp, model):
    """vector_domain with l1_distance: the same Laplace noise on every coordinate, as --mechanism laplace."""
    meas = dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float), scale=2.0)
    assert_same(run(model, "identity", meas), run(model, "identity", "laplace", scale=2.0), 0)


# ----------------------------------------------------------------------------- the laws, against the samplers


def chi_square_p(samples, probs):
    observed = np.bincount(np.asarray(samples, dtype=int), minlength=len(probs))
    keep = probs * len(samples) >= 5
    observed = np.append(observed[keep], observed[~keep].sum())
    expected = np.append(probs[keep], probs[~keep].sum()) * len(samples)
    if expected[-1] == 0:
        observed, expected = observed[:-1], expected[:-1]
    return float(stats.chisquare(observed, expected).pvalue)


@pytest.mark.parametrize("a", [0, 2, 4])
def test_diffprivlib_truncated_geometric_is_ghosh(dpl, a):
    """GeometricTruncated(lower=0, upper=n) clamps the two-sided geometric: Ghosh et al.'s law on 0..n."""
    eps, n = 0.7, 4
    obj = dpl.GeometricTruncated(epsilon=eps, sensitivity=1, lower=0, upper=n, random_state=20 + a)
    draws = [obj.randomise(a) for _ in range(N)]

    def law(scale):
        return np.exp(TruncatedGeometric(scale, n=n).log_table(np.array([[a]]))[:, 0])
    assert chi_square_p(draws, law(1 / eps)) > P_MIN
    for wrong in (WRONG, 1 / WRONG):
        assert chi_square_p(draws, law(wrong / eps)) < P_MIN


@pytest.mark.parametrize("monotonic", [False, True])
def test_diffprivlib_exponential_is_the_softmax(dpl, monotonic):
    eps, utility = 1.5, [0.0, 1.0, 3.0, 2.0]
    obj = dpl.Exponential(epsilon=eps, sensitivity=1, utility=utility, monotonic=monotonic, random_state=31)
    draws = [obj.randomise() for _ in range(N)]
    mech = from_library(obj)
    assert isinstance(mech, ExponentialMechanism) and mech.monotone is monotonic

    def law(scale):
        return np.exp(ExponentialMechanism(scale).log_table(np.array([utility]))[:, 0])
    assert chi_square_p(draws, law(mech.scale)) > P_MIN
    for wrong in (WRONG, 1 / WRONG):
        assert chi_square_p(draws, law(mech.scale * wrong)) < P_MIN


def test_diffprivlib_binary_is_randomized_response(dpl):
    eps = 1.2
    obj = dpl.Binary(epsilon=eps, value0="0", value1="1", random_state=41)
    kept = sum(obj.randomise("1") == "1" for _ in range(N))
    keep = from_library(obj).keep
    assert keep == pytest.approx(math.exp(eps) / (1 + math.exp(eps)), rel=1e-15)
    assert stats.binomtest(kept, N, keep).pvalue > P_MIN
    assert stats.binomtest(kept, N, math.exp(eps * WRONG) / (1 + math.exp(eps * WRONG))).pvalue < P_MIN


# ----------------------------------------------------------------------------- programs


def test_diffprivlib_without_a_law_is_a_reproducible_program(dpl, model):
    """LaplaceTruncated clamps Laplace(1) to [0, 4]: post-processing, so its certified lower bound is at
    most Laplace(1)'s exact leakage; diffprivlib's generator is seeded from the audit's."""
    obj = dpl.LaplaceTruncated(epsilon=1, sensitivity=1, lower=0, upper=4)
    first = run(model, "count", obj, program_runs=RUNS, targets=[0], seed=3)
    assert first.engine == "program" and first.mechanism["kind"] == "program"
    assert "no exact law for diffprivlib's LaplaceTruncated" in first.mechanism["why"]
    assert first.mechanism["from"].startswith("diffprivlib.mechanisms.LaplaceTruncated(")
    exact = run(model, "count", "laplace", scale=1.0, targets=[0]).leakage
    assert 0 < first.leakage <= exact
    assert run(model, "count", obj, program_runs=RUNS, targets=[0], seed=3).leakage == first.leakage


def test_diffprivlib_selection_without_a_law_is_a_program(dpl, model):
    """Permute-and-flip gets the query's answers as its utilities, run as a program."""
    obj = dpl.PermuteAndFlip(epsilon=1, sensitivity=1, utility=[0, 0, 0, 0])
    r = run(model, "identity", obj, program_runs=RUNS, targets=[0])
    assert r.engine == "program" and "PermuteAndFlip" in r.mechanism["why"]
    assert 0 <= r.leakage < math.inf


def test_opendp_measurement_that_is_not_its_noise_is_a_program(dp, model):
    """Laplace(1) rounded to integers: its map still says ε = d, but its draws are not Laplace; audited as
    a program, whose bound cannot exceed Laplace(1)'s exact leakage, and which says it is not seeded."""
    rounded = opendp_scalar(dp, "make_laplace", float, 1.0) >> dp.new_function(lambda x: float(round(x)), TO=float)
    r = run(model, "count", rounded, program_runs=RUNS, targets=[0])
    assert r.engine == "program"
    assert "do not follow the Laplace law" in r.mechanism["why"] and "not reproducible from --seed" in r.mechanism["why"]
    assert any("cannot be seeded" in note for note in r.notes)
    assert 0 < r.leakage <= run(model, "count", "laplace", scale=1.0, targets=[0]).leakage


def test_a_function_is_a_program(model):
    def noisy_count(answers, rng):
        return answers[0] + rng.laplace(0, 1.0)
    r = run(model, "count", noisy_count, program_runs=RUNS, targets=[0])
    assert r.engine == "program" and r.mechanism["name"] == "noisy_count"
    assert 0 < r.leakage <= run(model, "count", "laplace", scale=1.0, targets=[0]).leakage


# ----------------------------------------------------------------------------- refused


@pytest.mark.parametrize("obj", [object(), 42, "not-a-kind-of-noise".encode(), [1, 2]])
def test_a_non_mechanism_is_a_one_line_input_error(model, obj):
    with pytest.raises(InputError) as err:
        run(model, "count", obj)
    assert "\n" not in str(err.value) and "as a mechanism" in str(err.value)


def test_inconsistent_objects_are_refused(dpl, model):
    geometric = dpl.Geometric(epsilon=1, sensitivity=1)
    geometric.epsilon = 2.0  # after diffprivlib cached its scale from epsilon = 1
    gaussian = dpl.GaussianAnalytic(epsilon=1, delta=1e-5, sensitivity=1)
    gaussian.delta = 1e-3
    for obj in (geometric, gaussian, dpl.Binary(epsilon=1, value0="no", value1="yes"),
                dpl.Laplace(epsilon=1, sensitivity=0)):
        with pytest.raises(InputError) as err:
            run(model, "count", obj)
        assert "\n" not in str(err.value)


# ----------------------------------------------------------------------------- from the command line

HOUSEHOLD = str(Path(__file__).resolve().parent.parent / "models" / "household.py")
SPECS = {  # name: (--mechanism py:MODULE:EXPRESSION, the same object built here)
    "diffprivlib": ("py:diffprivlib.mechanisms:Laplace(epsilon=1, sensitivity=1)",
                    lambda dpl, dp: dpl.Laplace(epsilon=1, sensitivity=1)),
    "opendp": ("py:opendp.prelude:enable_features('contrib') or m.make_laplace(atom_domain(T=float, nan=False), "
               "absolute_distance(T=float), scale=1.0)", lambda dpl, dp: opendp_scalar(dp, "make_laplace", float, 1.0)),
}


def comparable(doc: dict) -> dict:
    """The JSON without its wall time, and OpenDP's goodness-of-fit p-value (its sampler cannot be seeded)."""
    doc = {k: v for k, v in doc.items() if k != "seconds"}
    if "from" in doc["mechanism"]:
        doc["mechanism"] = {**doc["mechanism"], "from": re.sub(r"p = [^)]*", "p = …", doc["mechanism"]["from"])}
    return doc


@pytest.mark.slow  # two audits and a model build in-process: ~10 s
@pytest.mark.parametrize("name", list(SPECS))
def test_library_object_from_the_command_line_is_the_python_audit(dpl, dp, capsys, name):
    spec, build = SPECS[name]
    code = main(["audit", HOUSEHOLD, "-p", "n=4", "--query", "count", "--mechanism", spec, "--notion", "idp",
                 "--information", "none", "--format", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    model = ddpbayes.load_model(HOUSEHOLD, {"n": 4})
    expected = json.loads(ddpbayes.audit(model, "count", build(dpl, dp), "idp", information=None).to_json())
    assert comparable(json.loads(out.out)) == comparable(expected)
    assert json.loads(out.out)["mechanism"]["kind"] == "laplace"


@pytest.mark.parametrize("spec,message", [
    ("py:diffprivlib.mechanisms:Laplace(epsilon=1, sensitivity=", "the expression fails (SyntaxError"),
    ("py:no_such_module_here:X", "the module does not import (ModuleNotFoundError"),
    ("py:diffprivlib.mechanisms:Laplace(epsilon=-1, sensitivity=1)", "the expression fails (ValueError"),
    ("py:math", "py:MODULE:EXPRESSION"),
    ("py:math:pi", "cannot audit a float as a mechanism"),
])
def test_bad_library_spec_is_one_line_exit_2(dpl, capsys, spec, message):
    code = main(["audit", HOUSEHOLD, "-p", "n=2", "--query", "count", "--mechanism", spec, "--notion", "idp"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_library_spec_refuses_noise_flags(dpl, capsys):
    code = main(["audit", HOUSEHOLD, "-p", "n=2", "--query", "count", "--mechanism",
                 "py:diffprivlib.mechanisms:Laplace(epsilon=1, sensitivity=1)", "--epsilon", "1", "--notion", "idp"])
    assert code == 2 and "a library object makes its own noise: drop --epsilon" in capsys.readouterr().err
