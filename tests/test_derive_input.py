"""`ddpbayes derive` on bad input: one line, exit 2, and never a hang (issue 11).

Every bad input runs the command line in a process of its own with a timeout (forked from a
server that imported ddpbayes once: tests/forked.py), so a check that stops working fails here
instead of hanging (or dying with a traceback). Reading any of them takes well under a second;
one input that works runs the real `python -m ddpbayes.cli.main`, Python's start and imports included.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import warnings

import pytest
import sympy

from ddpbayes import InputError
from ddpbayes.cli.main import main
from ddpbayes.symbolic import derive_gaussian
from ddpbayes.symbolic.parse import MAX_CHARS, MAX_DEPTH, MAX_NODES, parse_vector
from forked import run_cli

TIMEOUT = 90  # seconds: about 1 s on an idle machine, generous for a loaded one; a hang (9**9**9) runs for hours
EYE = "[[1,0],[0,1]]"
SYMBOLIC_6X6 = str([[f"s{min(i, j)}{max(i, j)}" for j in range(6)] for i in range(6)]).replace("'", "")

GAUSSIAN_COV = [
    ("[[sqrt(-1),0],[0,1]]", r"entry \[0,0\] 'sqrt\(-1\)' is not a real number"),
    ("[[1,log(-2)],[log(-2),1]]", r"entry \[0,1\] 'log\(-2\)' is not a real number"),
    ("[[(-8)**(1/3),0],[0,1]]", r"entry \[0,0\] '\(-8\)\*\*\(1/3\)' is not a real number"),
    ("[[1,2j],[2j,1]]", r"entry \[0,1\] '2j' is not a real number"),
    ("[[1,rho*sqrt(-1)],[rho*sqrt(-1),1]]", r"entry \[0,1\] 'rho\*sqrt\(-1\)': 'sqrt\(-1\)' is not a real number"),
    ("[[1e400,0],[0,1]]", r"entry \[0,0\] '1e400' is not a finite number"),
    ("[[inf,0],[0,1]]", r"entry \[0,0\] 'inf' is not a finite number"),
    ("[[log(0),0],[0,1]]", r"entry \[0,0\] 'log\(0\)' is not a finite number"),
    ("[[1/0,0],[0,1]]", r"entry \[0,0\] '1/0' divides by zero"),
    ("[[1,rho/(rho-rho)],[rho/(rho-rho),1]]", r"entry \[0,1\] 'rho/\(rho-rho\)' divides by zero"),
    ("[[1,1/(log(4)-2*log(2))],[0,1]]", r"entry \[0,1\] .* divides by zero"),
    ("[[0**-1,0],[0,1]]", r"entry \[0,0\] '0\*\*-1' divides by zero"),
    ("[[9**9**9,0],[0,1]]", r"entry \[0,0\] '9\*\*9\*\*9' is too large to compute: about 369,693,100 digits"),
    ("[[9**9**9**9,0],[0,1]]", r"entry \[0,0\] '9\*\*9\*\*9\*\*9': '9\*\*9\*\*9' is too large to compute"),
    ("[[10**(10**300),0],[0,1]]", r"is too large to compute"),
    ("[[2**1024,0],[0,1]]", r"entry \[0,0\] '2\*\*1024' is too large: about 1.80e\+308"),
    ("[[exp(exp(exp(1000))),0],[0,1]]", r"'exp\(1000\)' is too large: about 1.97e\+434"),
    ("[[1e-320,0],[0,1]]", r"'1e-320' is too small"),
    ("[[(x+y)**100000,0],[0,1]]", r"'\(x\+y\)\*\*100000' has an exponent too large for sympy's algebra"),
    ("[[1,rho**(10**300)],[rho**(10**300),1]]", r"has an exponent too large for sympy's algebra"),
    ("[[1,(rho**60)*(rho**60)],[0,1]]", r"has a power too large for sympy's algebra: rho\*\*120"),
    ("[[exp(700),0],[0,1]]", r"has a power too large for sympy's algebra: exp\(700\)"),
    ("[[1,rho*10**300*10**300],[0,1]]", r"too large: about 1.00e\+600"),
    ("[[((10**300+1)/10**300)**4,0],[0,1]]", r"too large to compute: about 1,200 digits"),
    ("[[" + "1+" * MAX_CHARS + "1,0],[0,1]]", rf"--cov is too long: .* characters \(at most {MAX_CHARS:,}\)"),
    ("[[" + "+".join(["x"] * (MAX_NODES // 2 + 1)) + ",0],[0,1]]", rf"--cov is too large: more than {MAX_NODES:,}"),
    ("[[" + "sqrt(" * (MAX_DEPTH + 1) + "2" + ")" * (MAX_DEPTH + 1) + ",0],[0,1]]", r"--cov is nested too deeply"),
    ("[[" + "-" * 5000 + "1,0],[0,1]]", r"--cov is nested too deeply"),
    ("[[1,__import__('os')],[1,1]]", r"entry \[0,1\]: cannot read"),
]

OTHER = [
    (["gaussian", "--cov", EYE, "--weights", "9**9**9,1"], r"--weights entry 0 '9\*\*9\*\*9' is too large to compute"),
    (["gaussian", "--cov", EYE, "--weights", "1,sqrt(-1)"], r"--weights entry 1 'sqrt\(-1\)' is not a real number"),
    (["gaussian", "--cov", EYE, "--weights", "1e400,1"], r"--weights entry 0 '1e400' is not a finite number"),
    (["gaussian", "--cov", EYE, "--weights", "[1,1/0]"], r"--weights entry 1 '1/0' divides by zero"),
    (["gaussian", "--cov", EYE, "--mean", "1/0,0"], r"--mean entry 0 '1/0' divides by zero"),
    (["gaussian", "--cov", EYE, "--mean", "0,exp(exp(1000))"], r"--mean entry 1 .* is too large"),
    (["gaussian", "--cov", EYE, "--width", "1e400"], r"--width must be a positive finite number"),
    (["gaussian", "--cov", EYE, "--scale", "nan"], r"--scale must be a positive finite number"),
    (["gaussian", "--cov", EYE, "--time-limit", "0"], r"--time-limit must be a positive number"),
    (["gaussian-rho", "--cov", "[[sqrt(-1),0],[0,1]]"], r"--cov entry \[0,0\] 'sqrt\(-1\)' is not a real number"),
    (["gaussian-rho", "--cov", "[[1e400,0],[0,1]]"], r"--cov entry \[0,0\] '1e400' is not a finite number"),
    (["gaussian-rho", "--cov", "[[1,1/0],[1/0,1]]"], r"--cov entry \[0,1\] '1/0' divides by zero"),
    (["gaussian-rho", "--cov", "[[9**9**9,0],[0,1]]"], r"'9\*\*9\*\*9' is too large to compute"),
    (["gaussian-rho", "--cov", "[[1,0.5],[0.5,1]]", "--widths", "1e400,1"], r"width_i must be a positive finite"),
    # bounded input, slow algebra (minutes): the time limit ends it on one line
    (["gaussian", "--cov", SYMBOLIC_6X6, "--time-limit", "1"], r"did not finish within --time-limit 1 s"),
]


def run_derive(args: list[str]) -> tuple[int, str, str]:
    return run_cli(["derive", *args], timeout=TIMEOUT)


def run_derive_in_python(args: list[str]) -> tuple[int, str, str]:
    p = subprocess.run([sys.executable, "-m", "ddpbayes.cli.main", "derive", *args],
                       capture_output=True, text=True, timeout=TIMEOUT)
    return p.returncode, p.stdout, p.stderr


def assert_one_error_line(code: int, stderr: str, pattern: str) -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 2, stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr
    assert re.search(pattern, lines[0]), lines[0]


@pytest.mark.parametrize("cov, pattern", GAUSSIAN_COV, ids=[c[:40] for c, _ in GAUSSIAN_COV])
def test_bad_covariance_is_one_line_exit_2(cov, pattern):
    code, out, err = run_derive(["gaussian", "--cov", cov])
    assert_one_error_line(code, err, pattern)
    assert out == ""


@pytest.mark.parametrize("args, pattern", OTHER, ids=[" ".join(a)[:50] for a, _ in OTHER])
def test_bad_vectors_widths_and_rho_are_one_line_exit_2(args, pattern):
    code, out, err = run_derive(args)
    assert_one_error_line(code, err, pattern)


# --- what still works -----------------------------------------------------------------------


def test_symbolic_covariance_with_a_moderate_power_still_works():
    code, out, err = run_derive_in_python(["gaussian", "--cov", "[[1, rho**2],[rho**2, 1]]", "--format", "json"])
    assert code == 0 and err == "", err
    expr = sympy.sympify(json.loads(out)["expression"])
    assert expr.subs({"rho": 0.5, "width": 2, "b": 4}) == pytest.approx(0.625)


def test_numeric_power_and_boundary_values_still_work(capsys):
    assert main(["derive", "gaussian", "--cov", "[[2**10, 0],[0,1]]", "--width", "1", "--scale", "1"]) == 0
    assert "value        1.0" in capsys.readouterr().out
    assert main(["derive", "gaussian-rho", "--cov", "[[4, 2**1023/2**1022],[2, 1]]", "--widths", "1,1"]) == 0
    assert "value        0.5" in capsys.readouterr().out
    # the largest powers allowed: AR(1) with 101 tuples, exp(100), 2**1023
    assert main(["derive", "gaussian-rho", "--cov", "[[1, rho**100],[rho**100, 1]]"]) == 0
    assert "rho**100" in capsys.readouterr().out
    assert parse_vector("exp(100), 2**1023, 1e-308, 1e308", "w")[1] == sympy.Integer(2) ** 1023


def test_sums_products_and_powers_read_as_python_reads_them():
    pairs = {"1-2-3": -4, "2/4/2": sympy.Rational(1, 4), "2-3+4*5/10-6": -5, "2**3**2": 512, "-2**2": -4,
             "2^10": 1024, "1.5*4/3": 2, "(1-2)*(3-4)/(5-7)": sympy.Rational(-1, 2)}
    assert parse_vector(",".join(pairs), "w") == list(pairs.values())
    a, b, c = sympy.symbols("a b c", real=True)
    assert parse_vector("a-b-c, a/b/c, a*b/c*a, a-(b-c)", "w") == [a - b - c, a / b / c, a**2 * b / c, a - b + c]
    long_sum = "+".join(f"x{k}" for k in range(3 * MAX_DEPTH))  # one level of nesting, however long
    assert len(parse_vector(long_sum, "w")[0].args) == 3 * MAX_DEPTH


def test_psd_check_is_relative_to_the_scale():
    with pytest.raises(InputError, match="not positive semi-definite"):
        derive_gaussian("[[1e-300,2e-300],[2e-300,1e-300]]")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow in the eigenvalue check
        assert derive_gaussian("[[1e308,1e308],[1e308,1e308]]", width=1, scale=1).value == pytest.approx(2.0)


def test_time_limit_in_process_restores_the_alarm(capsys):
    before = signal.getsignal(signal.SIGALRM)
    assert main(["derive", "gaussian", "--cov", SYMBOLIC_6X6, "--time-limit", "0.5"]) == 2
    assert "did not finish within --time-limit 0.5 s" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGALRM) is before and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
