"""Killed runs leave nothing behind: the embedded Dask cluster's worker processes die with the
audit that started them, Ctrl-C (SIGINT to the whole process group, as a terminal sends it) and
SIGTERM stop an audit on Dask workers within 5 s with one line and no `dask-scratch-space`
(issues #24, #25), `report` removes its temporary directory on SIGTERM and sweeps those of
killed runs, and an unusable --out is bad input.

Real processes throughout: the audits below sample with PyMC on two Dask workers, the reports in
their own process. They start at once (each needs ~10-20 s of imports and compilation; a
minute or more on a busy machine, which no clock below counts: each times what the program
promises, from the signal on); the audit stopped while its cluster starts and the reports refused for their --out
run forked after the imports (tests/forked.py)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from forked import run_cli, start_code

from ddpbayes.cli.main import main
from ddpbayes.errors import InputError
from ddpbayes.reports.render.atomic import write_directory

ROOT = Path(__file__).resolve().parent.parent
DDPBAYES = Path(sys.executable).with_name("ddpbayes")
AUDIT = ["audit", str(ROOT / "models" / "beta_bernoulli.py"), "--query", "count", "--mechanism", "laplace",
         "--epsilon", "1", "--notion", "idp", "--engine", "sampling", "--draws", "20000", "--tune", "1000",
         "--chains", "2", "--seed", "0", "--workers", "2"]
# a report that samples for minutes: killed while sampling, its temporary directory is surely there
SAMPLING_SPEC = f"""
model = "{ROOT / "models" / "beta_bernoulli.py"}"
query = "count"
notions = ["idp"]
engine = "sampling"
draws = 20000
tune = 1000

[mechanism]
kind = "laplace"
epsilon = 1.0
"""
SAMPLING = "ddpbayes: sampling"
# the audits killed while they sample on Dask workers, by the signal each gets (while the cluster starts:
# test_sigterm_while_the_cluster_starts)
AUDITS = {"audit SIGKILL": signal.SIGKILL, "audit SIGTERM": signal.SIGTERM, "audit SIGINT": signal.SIGINT}
CONTAGIOUS_SPEC = ROOT / "reports" / "specs" / "contagious_family.toml"
# --out given -> the path its error names, in the directory the report runs in
UNUSABLE = {"file.txt/sub": lambda d: d / "file.txt" / "sub", "/sys/x": lambda d: Path("/sys/x")}


def _stat(pid: int) -> tuple[str, int, int] | None:
    """State, parent pid and session of a process; None if there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    state, ppid, _, session = stat.rsplit(")", 1)[1].split()[:4]
    return state, int(ppid), int(session)


def _live(stat: tuple[str, int, int] | None) -> bool:
    return stat is not None and stat[0] != "Z"  # a zombie has ended


def _processes() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def _cmdline(pid: int) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return None


def _workers(parent: int) -> list[int]:
    """Live Python processes `parent` started with multiprocessing (Dask's worker processes, not
    compilers)."""
    return [pid for pid in _processes() if _live(stat := _stat(pid)) and stat[1] == parent
            and b"multiprocessing" in (_cmdline(pid) or b"")]


def _session(sid: int) -> list[int]:
    """Live processes of session `sid` (a run's process and everything it started)."""
    return [pid for pid in _processes() if _live(stat := _stat(pid)) and stat[2] == sid]


def _until(condition, timeout: float) -> bool:
    """Poll `condition` until it holds (True) or `timeout` seconds pass (False)."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.1)
    return True


class Run:
    """A `ddpbayes` process in its own session, its stderr piped to the test."""

    def __init__(self, argv: list[str], cwd: Path | None = None):
        # SIGINT as a terminal leaves it: a test run started in the background of a shell without job control
        # has SIGINT ignored, which the children would inherit (and Ctrl-C would then stop nothing)
        self.proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True,
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def wait_sampling(self, workers: int = 0) -> None:
        """Block until the run samples (on `workers` Dask worker processes, when not 0)."""
        for line in self.proc.stderr:
            if line.startswith(SAMPLING) and "MCMC runs" in line and (not workers or "Dask workers" in line):
                break
        else:
            pytest.fail(f"exited {self.proc.wait()} before sampling")
        assert _until(lambda: len(_workers(self.proc.pid)) >= workers, 60), "no worker process was started"

    def kill(self, sig: int, group: bool = False) -> int:
        """Send `sig` (to the process group: a terminal's Ctrl-C), reap the process, return its
        exit code."""
        if group:
            os.killpg(self.proc.pid, sig)
        else:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=30)

    def last_words(self) -> list[str]:
        """What the run wrote on stderr from now to its end, progress lines left out."""
        return [line for line in self.proc.stderr.read().splitlines() if not line.startswith("ddpbayes: ")]

    def end(self) -> None:
        """Kill the whole session (orphans included, if the code under test left any)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.proc.stderr.close()


def _spawned(parent: int) -> list[int]:
    """Live processes `parent` spawned with multiprocessing (a Dask worker process from its first instant)."""
    return [pid for pid in _processes() if _live(stat := _stat(pid)) and stat[1] == parent
            and b"spawn_main" in (_cmdline(pid) or b"")]


def test_sigterm_while_the_cluster_starts(tmp_path, monkeypatch):
    """SIGTERM once the embedded cluster has spawned a worker process, before the cluster is up (no line yet
    that the units run on Dask): exit 143 within 5 s of the signal, the one line `terminated`, no process of
    the run left 5 s later, no scratch folder. The audit runs forked after the imports, in a session of its
    own (tests/forked.py), so it reaches its cluster's start within a second."""
    monkeypatch.chdir(tmp_path)
    program = f"import os\nimport sys\nos.setsid()\nsys.argv = {['ddpbayes', *AUDIT]!r}\n" \
              "from ddpbayes.cli.main import main\nmain()\n"
    with start_code(program) as run:
        pid = run.child.pid
        try:
            assert _until(lambda: _spawned(pid) or run.child.exitcode is not None, 120), "no worker process started"
            assert run.child.exitcode is None and "Dask workers" not in run.stderr()
            sent = time.monotonic()
            os.kill(pid, signal.SIGTERM)
            code, _, err = run.finish(timeout=30)
            took = time.monotonic() - sent
            assert _until(lambda: not _session(pid), 5), f"orphaned processes {_session(pid)}"
        finally:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert (code, took < 5) == (143, True), (code, took)
    assert [line for line in err.splitlines() if not line.startswith("ddpbayes: ")] == ["terminated"]
    assert os.listdir(tmp_path) == []
    assert list(Path(tempfile.gettempdir()).glob(f"ddpbayes-dask-{pid}-*")) == []


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The `ddpbayes` processes to kill, started together: three audits and two reports."""
    d = tmp_path_factory.mktemp("signals")
    (d / "spec.toml").write_text(textwrap.dedent(SAMPLING_SPEC))
    for name in ("killed", "terminated", *AUDITS):
        (d / name).mkdir()
    report = [str(DDPBAYES), "report"]
    started = {
        **{name: Run([str(DDPBAYES), *AUDIT], cwd=d / name) for name in AUDITS},
        "report SIGKILL": Run([*report, str(d / "spec.toml"), "--out", str(d / "killed" / "r")]),
        "report SIGTERM": Run([*report, str(d / "spec.toml"), "--out", str(d / "terminated" / "r")]),
    }
    yield d, started
    for run in started.values():
        run.end()


@pytest.mark.parametrize("name", AUDITS)
def test_worker_processes_die_with_audit(runs, name):
    """Killed while its two Dask workers sample: no process of the run is left 5 s later, and no
    `dask-scratch-space` in the folder it ran in. Stopped by SIGINT or SIGTERM, it also ends within 5 s of the signal, exit 130 or 143, on one
    line (no traceback from a worker, the scheduler or Dask's exit handlers), its scratch folder
    removed."""
    d, started = runs
    run, sig = started[name], AUDITS[name]
    run.wait_sampling(workers=2)
    sent = time.monotonic()
    code = run.kill(sig, group=sig == signal.SIGINT)
    took = time.monotonic() - sent
    assert _until(lambda: not _session(run.proc.pid), 5), f"orphaned processes {_session(run.proc.pid)}"
    assert not (d / name / "dask-scratch-space").exists()
    if sig == signal.SIGKILL:
        return
    assert (code, took < 5) == ({signal.SIGINT: 130, signal.SIGTERM: 143}[sig], True), (code, took)
    assert run.last_words() == [{signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}[sig]]
    assert list(Path(tempfile.gettempdir()).glob(f"ddpbayes-dask-{run.proc.pid}-*")) == []
    assert os.listdir(d / name) == []


def test_report_sigterm_cleans_up(runs):
    d, started = runs
    run = started["report SIGTERM"]
    run.wait_sampling()
    assert run.kill(signal.SIGTERM) == 143
    assert run.last_words() == ["terminated"]
    assert list((d / "terminated").iterdir()) == []
    assert _until(lambda: not _session(run.proc.pid), 5), f"orphaned processes {_session(run.proc.pid)}"


def test_report_sweeps_dirs_of_killed_runs(runs):
    d, started = runs
    run = started["report SIGKILL"]
    run.wait_sampling()
    run.kill(signal.SIGKILL)
    assert _until(lambda: not _session(run.proc.pid), 5), f"orphaned processes {_session(run.proc.pid)}"
    parent = d / "killed"
    stale = [p.name for p in parent.iterdir()]
    assert len(stale) == 1 and re.fullmatch(rf"\.r\.{run.proc.pid}\.\w{{8}}\.tmp", stale[0]), stale
    live = parent / f".r.{os.getpid()}.abcd1234.tmp"  # another report still being written: kept
    live.mkdir()
    assert main(["report", str(CONTAGIOUS_SPEC), "--out", str(parent / "r"), "--quiet"]) == 0
    assert sorted(p.name for p in parent.iterdir()) == [live.name, "r"]
    assert (parent / "r" / "results.json").is_file()


@pytest.mark.parametrize("out", UNUSABLE)
def test_unusable_out_is_bad_input(tmp_path, monkeypatch, out):
    """A file in the way of --out, or a read-only place: exit 2, one line naming the path, nothing left behind."""
    (tmp_path / "file.txt").write_text("in the way")
    monkeypatch.chdir(tmp_path)  # the forked program runs in the caller's folder
    code, printed, err = run_cli(["report", str(CONTAGIOUS_SPEC), "--out", out, "--quiet"], timeout=120)
    lines = err.splitlines()
    assert (code, printed) == (2, "")
    assert len(lines) == 1 and lines[0].startswith(f"error: --out {UNUSABLE[out](tmp_path)}: cannot create it: "), lines
    assert (tmp_path / "file.txt").read_text() == "in the way"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_sweep_restores_report_set_aside_by_killed_run(tmp_path):
    """A run killed between its two renames left the previous report set aside and no --out: the
    next run puts it back before anything else, so a failure of that run still leaves it."""
    finished = subprocess.Popen(["true"])
    finished.wait()
    old = tmp_path / f".r.{finished.pid}.abcd1234.old"
    old.mkdir()
    (old / "results.json").write_text("{}")

    def build(tmp: Path) -> None:
        raise InputError("the new report fails")

    with pytest.raises(InputError):
        write_directory(tmp_path / "r", "results.json", build)
    assert [p.name for p in tmp_path.iterdir()] == ["r"] and (tmp_path / "r" / "results.json").read_text() == "{}"


def test_main_from_python_gives_back_the_callers_sigterm_handler(monkeypatch):
    """`main([...])` makes SIGTERM raise while it runs and gives the caller's handler back after
    (it was left installed in the caller's process)."""
    import ddpbayes.cli.main as cli_main

    seen, run = [], cli_main._main
    monkeypatch.setattr(cli_main, "_main", lambda argv: seen.append(signal.getsignal(signal.SIGTERM)) or run(argv))

    def mine(signum, frame):  # the caller's own handler
        pass

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        assert main([]) == 2
        assert signal.getsignal(signal.SIGTERM) is mine
        assert seen[0] is not mine and seen[0].__name__ == "on_sigterm"
    finally:
        signal.signal(signal.SIGTERM, previous)
