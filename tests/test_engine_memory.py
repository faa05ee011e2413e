"""Every engine on a small clustered model answers within a memory bound or refuses in one line (issue #41).

The model the issue names: 4 clusters of 5 Bernoulli records, a Normal effect per cluster on the logit scale,
the count released with Laplace noise. The sampling engine once took 5.1 GB on it and `--engine auto` grew to
24 GB until the kernel killed it. Each engine runs in its own process with its address space bounded
(RLIMIT_AS, so a regression fails here instead of taking the machine) and `--max-states` lowered; it must either
answer (exit 0, a finite leakage) with a peak resident set under PEAK, or refuse in one line (exit 2).
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ADDRESS_SPACE = 8 << 30  # bytes of address space each audit may map
PEAK = 1536 << 20  # bytes of resident memory an answer may take at most
MAX_STATES = 1 << 20  # --max-states: every table and grid an engine builds is bounded by it

MODEL = '''
import numpy as np
import pymc as pm

from ddpbayes import DependenceModel


def build() -> DependenceModel:
    cluster = np.repeat(np.arange(4), 5)
    with pm.Model() as m:
        u = pm.Normal("u", 0.0, 1.0, shape=4)
        pm.Bernoulli("y", logit_p=-0.5 + u[cluster], shape=20)
    return DependenceModel(m, tuples="y")
'''


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, resource.getrlimit(resource.RLIMIT_AS)[1]))


def _audit(path: Path, engine: str, draws: int = 100) -> tuple[int, str, str, int]:
    """`ddpbayes audit` of idp of record 0 by `engine` in a bounded process: its exit status, stdout, stderr and
    peak resident set (bytes, its own rusage)."""
    args = [sys.executable, "-m", "ddpbayes", "audit", str(path), "--query", "count", "--mechanism", "laplace",
            "--scale", "1", "--notion", "idp", "--target", "0", "--engine", engine, "--seed", "0",
            "--max-states", str(MAX_STATES), "--draws", str(draws), "--tune", "100", "--chains", "2",
            "--format", "json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out, err = path.with_suffix(".out"), path.with_suffix(".err")
    with out.open("w") as o, err.open("w") as e:
        proc = subprocess.Popen(args, stdout=o, stderr=e, env=env, preexec_fn=_bounded)
        _, status, usage = os.wait4(proc.pid, 0)
    return os.waitstatus_to_exitcode(status), out.read_text(), err.read_text(), usage.ru_maxrss * 1024


@pytest.mark.slow  # four processes, each importing PyMC and compiling the model: minutes on a loaded machine
@pytest.mark.parametrize("engine", ["structured", "exact", "auto", "sampling"])
def test_each_engine_answers_within_memory_or_refuses_in_one_line(engine, tmp_path):
    path = tmp_path / "four_clusters.py"
    path.write_text(MODEL)
    code, out, err, peak = _audit(path, engine)
    assert code in (0, 2), err[-2000:]
    if code == 2:
        lines = [line for line in err.splitlines() if not line.startswith("ddpbayes:")]  # progress lines
        assert len(lines) == 1 and lines[0].startswith("error: "), err
        return
    assert math.isfinite(json.loads(out)["leakage"])
    assert peak <= PEAK, f"{engine}: peak resident set {peak / 2**20:.0f} MiB"


@pytest.mark.slow  # imports PyMC and compiles the model in a subprocess
def test_an_mcmc_run_too_large_for_memory_is_refused_before_drawing(tmp_path):
    """10^10 draws of 21 values: far more than any machine's memory, refused in one line before the first draw."""
    path = tmp_path / "four_clusters.py"
    path.write_text(MODEL)
    code, _, err, peak = _audit(path, "sampling", draws=10**10)
    lines = [line for line in err.splitlines() if not line.startswith("ddpbayes:")]
    assert code == 2 and len(lines) == 1 and "an MCMC run's draws" in lines[0] and "lower --draws" in lines[0], err
    assert peak <= PEAK
