"""Issue #40, programs and user code (items 6, 11, 18–21): a program on a model whose tuples are one vector
variable, outputs too large for memory checked after the first call, outputs near the largest double, one
rule for empty outputs, a BaseException from user code as bad input, the "still running" notice per call,
fd 1 kept off stdout, forked children that stop, progress lines for long program audits and small slow
lattices, and a program's result shown as a lower bound everywhere."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest
from scipy.stats import betabinom

import ddpbayes
from ddpbayes import progress
from ddpbayes.auditing import AuditResult
from ddpbayes.engines import Witness
from ddpbayes.engines.program.certify import certify
from ddpbayes.engines.program.event import RowSet
from ddpbayes.errors import InputError
from ddpbayes.mechanisms.program import Program
from ddpbayes.model import usercode
from ddpbayes.problem import Adversary

RNG = np.random.default_rng(0)


def run_cli(*argv: str, cwd=None) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, "-m", "ddpbayes", *argv], capture_output=True, text=True, timeout=600,
                          cwd=cwd)
    return done.returncode, done.stdout, done.stderr


# ---------------------------------------------------------------------------------------------- item 18

def beta_bernoulli_idp(n: int = 4, a: float = 1.0, b: float = 1.0, s: float = 1.0) -> float:
    """idp of a Laplace(s) count on the Beta–Bernoulli model: given X_0 = t the others' count S is
    BetaBinomial(n - 1, a + t, b + 1 - t), L(y | t) = sum_k P(S = k | t) exp(-|y - t - k| / s). Between
    breakpoints the likelihood ratio is a Möbius function of exp(2y / s), monotone: its sup is at a
    breakpoint y in {0, ..., n} or a limit y -> +-inf, where it is sum_k P(k | t) exp(+-(t + k) / s) over t'."""
    k = np.arange(n)
    pk = [betabinom.pmf(k, n - 1, a + t, b + 1 - t) for t in (0, 1)]
    lik = [lambda y, t=t: np.sum(pk[t] * np.exp(-np.abs(y - t - k) / s)) for t in (0, 1)]
    ratios = [abs(math.log(lik[1](y) / lik[0](y))) for y in range(n + 1)]
    for sign in (1, -1):
        ends = [np.sum(pk[t] * np.exp(sign * (t + k) / s)) for t in (0, 1)]
        ratios.append(abs(math.log(ends[1] / ends[0])))
    return max(ratios)


def laplace_count(answers, rng):
    return answers[0] + rng.laplace(0.0, 1.0)


@pytest.mark.slow  # the prior sampler's compilation and 8,000 runs: about 10 s
def test_a_program_on_a_model_whose_tuples_are_one_vector_variable():
    """Before: IndexError (exit 3) in the program engine's routing, which read the tuples' variables as
    one per tuple. Now the records are drawn by rejection from the prior and the certified bound is below
    the closed form (1.8403 for n = 4)."""
    model = ddpbayes.load_model("beta_bernoulli")
    truth = beta_bernoulli_idp()
    assert truth == pytest.approx(1.8403, abs=1e-4)
    r = ddpbayes.audit(model, "count", Program(laplace_count), "idp", targets=[0], information=None,
                       program_runs=2000)
    assert r.engine == "program" and 0.2 < r.leakage <= truth


def test_output_size_is_checked_after_the_first_call():
    """Before: 10^7 numbers per run ended in a MemoryError at 3.3 GB. Now the first call's size bounds the
    batch before the other calls run: one call, then one line."""
    calls = []

    def huge(answers, rng):
        calls.append(1)
        return np.zeros(10**7)

    with pytest.raises(InputError, match="10,000,000 numbers each.*return fewer numbers per run") as info:
        Program(huge).sample(np.zeros((50_000, 1)), RNG)
    assert len(calls) == 1 and "\n" not in str(info.value)


def test_a_vectorized_programs_output_size_is_checked_after_the_probe():
    """A vectorized program makes a whole batch in one call: the two-row probe that gives the output's
    size bounds the batches before the first one is drawn."""
    sizes = []

    def draw(n, rng):
        sizes.append(n)
        return np.zeros((n, 10**7))

    with pytest.raises(InputError, match="10,000,000 numbers each.*return fewer numbers per run"):
        certify(draw, draw, n_search=100_000, n_check=100_000, confidence=0.95, rng=np.random.default_rng(0))
    assert sizes == [2]


# ---------------------------------------------------------------------------------------------- item 21

@pytest.mark.parametrize("output", [np.array([]), (), (np.zeros(0), np.zeros((0, 3))), [[]]])
def test_empty_outputs_follow_one_rule(output):
    """Before: an empty array was accepted (and certified leakage 0) while an empty tuple was refused.
    One rule now: a run returns at least one number."""
    with pytest.raises(InputError, match="returned an empty output"):
        Program(lambda a, r: output, "empty").sample(np.zeros((3, 1)), RNG)

    def vec(a, r):
        return np.zeros((len(a), 0))
    vec.vectorized = True
    with pytest.raises(InputError, match="returned an empty output"):
        Program(vec).sample(np.zeros((3, 1)), RNG)


def test_outputs_near_the_largest_double_give_the_same_certificate_without_warnings():
    """Before: outputs near 1e308 overflowed the event search's means, variances and quantiles
    (RuntimeWarnings on stderr). The search is invariant to scaling an output by a power of two, and
    the certificate is now the same for Laplace outputs and the same times 2^1019 (up to 8.4e307)."""
    def draw(t: float, factor: float):
        return lambda n, g: (np.clip(t + g.laplace(0.0, 1.0, n), -15, 15) * factor).reshape(-1, 1)

    certs = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for factor in (1.0, 2.0**1019):
            certs.append(certify(draw(1.0, factor), draw(0.0, factor), n_search=4000, n_check=4000,
                                 confidence=0.95, rng=np.random.default_rng(5)))
    assert certs[0].eps_lcb > 0.3 and certs[1].eps_lcb == certs[0].eps_lcb
    assert certs[1].counts == certs[0].counts


# ---------------------------------------------------------------------------------------------- item 19

class Custom(BaseException):
    pass


@pytest.mark.parametrize("exc", [GeneratorExit("bye"), Custom("mine")])
def test_a_base_exception_from_a_program_is_bad_input(exc):
    def raises(a, r):
        raise exc
    with pytest.raises(InputError, match=f"program raises raised {type(exc).__name__}: "):
        Program(raises).sample(np.zeros((2, 1)), RNG)


def test_ctrl_c_in_a_program_stays_an_interrupt():
    def stopped(a, r):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        Program(stopped).sample(np.zeros((2, 1)), RNG)


MODEL = '''
import pymc as pm
from ddpbayes import DependenceModel


class Custom(BaseException):
    pass


def build(n: int = 2):
    {body}
'''


@pytest.mark.parametrize("body,name", [("raise GeneratorExit('bye')", "GeneratorExit"),
                                       ("raise Custom('mine')", "Custom")])
def test_a_base_exception_from_build_is_bad_input(tmp_path, body, name):
    path = tmp_path / "model.py"
    path.write_text(MODEL.format(body=body))
    with pytest.raises(InputError, match=f"build\\(\\) in '.*' raised {name}: "):
        ddpbayes.load_model(path)
    path.write_text(MODEL.format(body="pass") + f"\n{body}\n")
    with pytest.raises(InputError, match=f"failed to import: {name}: "):
        ddpbayes.load_model(path)


@pytest.mark.slow  # a subprocess: the import of PyMC
def test_a_base_exception_from_build_exits_2_with_one_line(tmp_path):
    """Before: a traceback and exit 1, which a CI script reads as "the claim fails"."""
    path = tmp_path / "model.py"
    path.write_text(MODEL.format(body="raise GeneratorExit('bye')"))
    code, out, err = run_cli("audit", str(path), "--query", "count", "--mechanism", "laplace", "--scale", "1",
                             "--notion", "idp")
    assert (code, out) == (2, "") and len(err.splitlines()) == 1 and "GeneratorExit: bye" in err


# ---------------------------------------------------------------------------------------------- item 20

def test_writes_to_fd_1_go_to_stderr_while_user_code_runs(capfd):
    import os

    with usercode.user_code():
        os.write(1, b"from fd 1\n")
    os.write(1, b"after\n")
    out, err = capfd.readouterr()
    assert out == "after\n" and "from fd 1" in err


def test_a_process_forked_by_user_code_does_not_carry_on():
    """The forked child ends where the user's code returns to ddpbayes: only the parent says it carried on."""
    script = textwrap.dedent("""
        import os
        from ddpbayes.model.usercode import user_code
        with user_code():
            child = os.fork()
        os.waitpid(child, 0)
        print("carried on", flush=True)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "carried on\n"


FORKS = '''
import os

FORKED = []


def forks(answers, rng):
    if not FORKED:
        FORKED.append(os.fork())
        os.write(1, b"a write to fd 1\\n")
    return answers[0] + rng.laplace(0.0, 1.0)
'''


@pytest.mark.slow  # a subprocess audit
def test_a_forking_program_leaves_one_json_document(tmp_path):
    """The child of os.fork() in a program stops at the call's return; the parent's JSON is alone on stdout
    (the fd 1 writes of both went to stderr)."""
    (tmp_path / "prog.py").write_text(FORKS)
    code, out, err = run_cli("audit", "household", "--query", "count", "--mechanism", "program:prog.py:forks",
                             "--notion", "idp", "--target", "0", "--program-runs", "500", "--format", "json",
                             cwd=tmp_path)
    assert code == 0, err
    assert json.loads(out)["lower_bound"] is True
    assert err.count("a write to fd 1") == 2


def test_a_program_call_that_runs_long_gets_the_notice(monkeypatch, capfd):
    """One call past NOTICE_AFTER (shortened here) says so; many short calls that add up to more do not."""
    monkeypatch.setattr(usercode, "NOTICE_AFTER", 0.3)

    def short(a, r):
        time.sleep(0.05)
        return 1.0

    Program(short).sample(np.zeros((12, 1)), RNG)
    assert "still running" not in capfd.readouterr().err

    def slow(a, r):
        time.sleep(1.2 if a[0] == 0 else 0.0)
        return 1.0

    Program(slow).sample(np.array([[1.0], [0.0]]), RNG)
    assert "program slow (one call) is still running after" in capfd.readouterr().err


@pytest.mark.slow  # a subprocess audit, stopped by Ctrl-C
def test_an_endless_program_shows_life_and_stops_on_ctrl_c(tmp_path):
    """Before: a program that never returned gave no sign of life. Now the notice model builds get
    (NOTICE_AFTER shortened here), and Ctrl-C ends the run: exit 130, last line 'interrupted'."""
    import signal

    (tmp_path / "prog.py").write_text("def forever(answers, rng):\n    while True:\n        pass\n")
    script = ("import sys; from ddpbayes.model import usercode; usercode.NOTICE_AFTER = 0.5; "
              "from ddpbayes.cli.main import main; sys.exit(main(sys.argv[1:]))")
    proc = subprocess.Popen([sys.executable, "-c", script, "audit", "household", "--query", "count", "--mechanism",
                             "program:prog.py:forever", "--notion", "idp", "--target", "0"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        first = proc.stderr.readline()
        assert first.startswith("program forever (one call) is still running after") and "Ctrl-C" in first
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130 and out == ""
    assert err.splitlines()[-1] == "interrupted"


# ---------------------------------------------------------------------------------------------- item 11

class _Stderr:
    """sys.stderr (not a terminal) that keeps the lines written."""

    def __init__(self):
        self.lines: list[str] = []

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> None:
        self.lines += [line for line in text.splitlines() if line]

    def flush(self) -> None:
        pass


def test_a_long_program_audit_shows_progress_a_short_one_none(household, monkeypatch):
    """The program engine's line counts the program's runs (4 x --program-runs per adversary); it is
    drawn once the audit has taken a heartbeat (shortened here to 0.3 s), never for a short one."""
    err = _Stderr()
    monkeypatch.setattr(sys, "stderr", err)
    model = household()
    ddpbayes.audit(model, "count", Program(laplace_count), "idp", targets=[0], information=None,
                   program_runs=200, progress=True)
    assert not any("certifying the program" in line for line in err.lines)

    monkeypatch.setattr(progress, "HEARTBEAT", 0.3)

    def slow(answers, rng):
        time.sleep(0.0005)
        return laplace_count(answers, rng)

    ddpbayes.audit(model, "count", Program(slow), "idp", targets=[0], information=None, program_runs=500,
                   progress=True)
    drawn = [line for line in err.lines if "certifying the program" in line]
    assert drawn and drawn[-1].startswith("ddpbayes: certifying the program 2,000/2,000 runs")


def test_a_slow_lattice_of_one_chunk_shows_progress(household, monkeypatch):
    """A lattice smaller than a chunk (a sparse-vector mechanism's few slow adversaries) had no line at all;
    it now has one once it has taken a heartbeat (0.3 s here; each engine call slowed by 1 s)."""
    from ddpbayes.engines.exact.engine import ExactEngine

    err = _Stderr()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(progress, "HEARTBEAT", 0.3)
    real = ExactEngine.leakage

    def slowed(self, problem):
        time.sleep(1.0)
        return real(self, problem)

    monkeypatch.setattr(ExactEngine, "leakage", slowed)
    ddpbayes.audit(household(n=3), "count", "laplace", "pdp", scale=1.0, information=None, progress=True)
    assert err.lines and err.lines[-1].startswith("ddpbayes: pdp 12/12 adversaries")


def test_short_inner_lines_do_not_hide_a_long_outer_one(monkeypatch):
    """Each audit of a calibration now opens its own `slow_only` line; the timer redraws the newest line
    at least a heartbeat old, so a run of short audits (0.2 s each, heartbeat 0.3 s) leaves the outer
    line drawn and draws none of theirs."""
    err = _Stderr()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(progress, "HEARTBEAT", 0.3)
    with progress.Progress("outer", None, "audits", slow_only=True) as outer:
        for _ in range(8):
            with progress.Progress("inner", 1, "adversaries", slow_only=True) as inner:
                time.sleep(0.2)
                inner.advance(1)
            outer.advance(1)
    assert any(line.startswith("ddpbayes: outer") for line in err.lines)
    assert not any("inner" in line for line in err.lines)


# ---------------------------------------------------------------------------------------------- item 6

def test_a_programs_result_is_a_lower_bound_in_every_view(household):
    r = ddpbayes.audit(household(), "count", Program(laplace_count), "idp", targets=[0], information=None,
                       program_runs=500)
    assert r.lower_bound and r.to_dict()["lower_bound"] is True and r.to_dataframe().attrs["lower_bound"] is True
    assert json.loads(r.to_json())["lower_bound"] is True
    text = repr(r)
    assert f"leakage>={r.leakage:g}"[:16] in text and "(a lower bound: certified for a program)" in text
    assert "y=-" not in text and f"event {r.diagnostics['event']}" in text
    assert "leakage (lower bound)" in r._repr_html_() and "y=-" not in r._repr_html_()
    from ddpbayes.cli.text import audit_text

    witness = [line for line in audit_text(r).splitlines() if line.startswith("witness")]
    assert witness and witness[0].endswith(f"event {r.diagnostics['event']}")


def _result(y, diagnostics=None) -> AuditResult:
    w = Witness(Adversary(0, frozenset()), {}, 1.0, 0.0, y)
    return AuditResult(notion="idp", leakage=1.0, per_target=[1.0], witness=w, engine="exact", verdict=None,
                       claim=None, seconds=0.0, diagnostics=diagnostics, tuples=["x0"])


def test_a_witness_without_a_finite_y_says_what_it_is():
    assert repr(_result((2.0,))).endswith("t=1 t'=0, y=2)")
    assert repr(_result((math.inf,))).endswith("y → +∞)")
    assert repr(_result((1.0, -math.inf))).endswith("y → (1, -∞))")
    assert repr(_result(None)).endswith("y: none)")
    assert repr(_result(None, {"event": "output in {5, 6, 8}"})).endswith("event output in {5, 6, 8})")


def test_an_event_shows_its_outputs_sorted():
    assert RowSet(np.array([[8.0], [5.0], [6.0]])).describe() == "output in {5, 6, 8}"
    assert RowSet(np.array([[1.0, 2.0], [0.0, 3.0]])).describe() == "output in {(0, 3), (1, 2)}"


@pytest.mark.parametrize("d", [1, 3])
def test_an_event_of_outputs_holds_exactly_its_rows(d):
    """RowSet.contains against membership written here (coordinate by coordinate, -0.0 equal to 0.0,
    nan to nan), for events of 1 to 7 outputs (compared directly up to DIRECT_ROWS, hashed above),
    rows in either memory order; outputs of another width are in no event."""
    rng = np.random.default_rng(d)
    values = np.array([0.0, -0.0, 1.0, np.nan, 2.5])
    x = rng.choice(values, size=(600, d))

    def same(u, v):
        return all(a == b or (math.isnan(a) and math.isnan(b)) for a, b in zip(u, v))

    for m in range(1, 8):
        rows = rng.choice(values, size=(m, d))
        expected = np.array([any(same(r, s) for s in rows) for r in x])
        assert expected.any() and (d == 1 or not expected.all())
        event = RowSet(rows)
        assert np.array_equal(event.contains(x), expected)
        assert np.array_equal(event.contains(np.asfortranarray(x)), expected)
        assert not event.contains(np.ones((5, d + 1))).any()
