"""Progress lines that stay alive (issue #24): redrawn every `progress.HEARTBEAT` seconds while
one unit of work, or one engine call of the greedy pdp search, runs long; the time left measured
from the work done, "unknown" before any; `slow_only` lines (the sampling engine's phases
between MCMC runs) quiet for short work; every line stopped before the CLI's last line.

A stand-in for stderr notes when each line is written; the heartbeat is shortened so that
each test takes a few seconds, with a generous second of slack per redraw for a busy machine."""

from __future__ import annotations

import re
import sys
import time

import pytest

from ddpbayes import progress
from ddpbayes.engines import AdversaryLeakage, Engine, Witness
from ddpbayes.notions.lattice import greedy_pdp, layer_bounds
from ddpbayes.mechanisms import Laplace
from ddpbayes.model.loading import load_model
from ddpbayes.parallel import map_units
from ddpbayes.problem import Problem
from ddpbayes.queries import parse_query
from ddpbayes.settings import RunSettings

SLACK = 1.0  # seconds a redraw may come late on a loaded machine


class _Stderr:
    """A stand-in for sys.stderr (not a terminal) that notes when each line was written."""

    def __init__(self):
        self.lines: list[tuple[float, str]] = []

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> None:
        self.lines += [(time.monotonic(), line) for line in text.splitlines() if line]

    def flush(self) -> None:
        pass


def _sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@pytest.mark.slow  # issue #29: the default run stays under 8 minutes
def test_heartbeat_redraws_the_line_while_one_unit_runs_long(monkeypatch):
    """Two units of 3 s each, here, the heartbeat at 0.5 s (the default, HEARTBEAT = 5 s, keeps the
    issue #24 promise of a line within 10 s and every 10 s with room to spare): the line shows
    within a heartbeat (and a generous second for a loaded machine), is redrawn at least every
    heartbeat while a unit runs, says the time left is unknown until a unit is done, and then
    measures it from the work done (one unit of two done in about 3 s: about 3 s left)."""
    assert progress.HEARTBEAT <= 5
    monkeypatch.setattr(progress, "HEARTBEAT", 0.5)
    err = _Stderr()
    monkeypatch.setattr(sys, "stderr", err)
    start = time.monotonic()
    assert map_units(_sleep, [3.0, 3.0], RunSettings(workers=1, progress=True), "test", "naps") == [3.0, 3.0]
    end = time.monotonic()
    times = [start] + [t for t, _ in err.lines]
    assert times[1] - start < 0.5 + SLACK
    assert max(b - a for a, b in zip(times, times[1:])) < 0.5 + SLACK
    texts = [line for _, line in err.lines]
    pattern = r"ddpbayes: test ([012])/2 naps, (\S+)/s, (\d+) s elapsed, (unknown time|\d+ s) left"
    assert all(re.fullmatch(pattern, line) for line in texts), texts
    before = [line for t, line in err.lines if t < start + 2.5]
    assert before and all(re.fullmatch(pattern, line)[4] == "unknown time" for line in before)
    one_done = [int(re.fullmatch(pattern, line)[4][:-2]) for line in texts if " 1/2 " in line]
    assert one_done and all(1 <= left <= 6 for left in one_done)
    assert texts[-1].startswith("ddpbayes: test 2/2 naps")
    assert times[-1] <= end  # nothing drawn once the loop is over
    time.sleep(1.5)
    assert len(err.lines) == len(texts)


def test_slow_only_line_stays_quiet_for_short_work_and_every_line_stops(monkeypatch):
    """A `slow_only` line (the sampling engine's planning and estimates) prints nothing for work
    shorter than a heartbeat; one left open by an interrupt is stopped by `close_all`, which the
    CLI calls before its last line, so no heartbeat follows that line."""
    monkeypatch.setattr(progress, "HEARTBEAT", 0.3)
    err = _Stderr()
    monkeypatch.setattr(sys, "stderr", err)
    quick = progress.Progress("quick", 3, "steps", slow_only=True)
    for _ in range(3):
        quick.advance(1)
    time.sleep(1.0)
    assert err.lines == []
    slow = progress.Progress("slow", 3, "steps", slow_only=True)
    time.sleep(1.0)
    assert err.lines and all(line.startswith("ddpbayes: slow 0/3 steps") for _, line in err.lines)
    progress.close_all()
    drawn = len(err.lines)
    time.sleep(1.0)
    assert len(err.lines) == drawn
    slow.advance(3)
    assert len(err.lines) == drawn



class _Slow(Engine):
    """Leakage 0 for every adversary, each call taking `seconds` (an engine call of the greedy
    search on a big model takes minutes: issue #24 saw six without an update)."""

    name = "slow"

    def __init__(self, seconds: float):
        self.seconds = seconds

    def supports(self, problem):
        return None

    def dependence_sets(self, problem):
        return [frozenset()] * problem.model.n

    def leakage(self, problem):
        time.sleep(self.seconds)
        return [AdversaryLeakage(a, 0.0, Witness(a, None, 1.0, 0.0, None)) for a in problem.adversaries]


@pytest.mark.slow  # issue #29: the default run stays under 8 minutes
def test_greedy_search_line_is_redrawn_during_a_long_engine_call(household, monkeypatch):
    """The greedy pdp search on three tuples, top-k 1: three layers, an engine call of 2 s each
    (longer than a heartbeat and its slack, so that a line drawn only per layer would fail). The
    line shows within a heartbeat and is redrawn while every call runs, and its count ends at the
    search's bound, sum(layer_bounds(3, 1)) = 1 + 2 + 1 = 4."""
    monkeypatch.setattr(progress, "HEARTBEAT", 0.3)
    err = _Stderr()
    monkeypatch.setattr(sys, "stderr", err)
    problem = Problem(household(n=3), parse_query("count"), Laplace(1.0))
    total = sum(layer_bounds(3, 1))
    assert total == 4
    start = time.monotonic()
    greedy_pdp(_Slow(2.0), problem, [0], 1, 1024, progress.Progress("pdp greedy", total, "adversaries"))
    times = [start] + [t for t, _ in err.lines]
    assert len(times) > 6 and max(b - a for a, b in zip(times, times[1:])) < 0.3 + SLACK
    assert err.lines[-1][1].startswith("ddpbayes: pdp greedy 4/4 adversaries")


def test_calibration_root_finding_shows_a_line_without_a_time_left(monkeypatch, models_dir):
    """`calibrate`'s root-finding runs audits until the scale is found, a number nobody knows in
    advance: once it has taken a heartbeat its line counts the audits and promises no time left.
    Each audit is slowed by 0.3 s here; the household's idp scale comes out as without the delay
    (the scale's value is checked in test_ddp_calibration.py; here only the line)."""
    from ddpbayes.ddp import calibration

    monkeypatch.setattr(progress, "HEARTBEAT", 0.5)
    real = calibration.audit

    def slow_audit(*args, **kwargs):
        time.sleep(0.3)
        return real(*args, **kwargs)

    model = load_model(models_dir / "household.py", {"n": 3})
    quick = calibration.exact_scale(model, parse_query("count"), "idp", 1.0, RunSettings(workers=1))[0]
    monkeypatch.setattr(calibration, "audit", slow_audit)
    err = _Stderr()
    monkeypatch.setattr(sys, "stderr", err)
    scale = calibration.exact_scale(model, parse_query("count"), "idp", 1.0, RunSettings(workers=1, progress=True))[0]
    assert scale == quick
    lines = [line for _, line in err.lines]
    assert lines and all(re.fullmatch(r"ddpbayes: calibrate \(idp, Laplace scale\) \d+ audits so far, \S+/s, "
                                      r"\d+ s elapsed, time left unknown", line) for line in lines), lines
