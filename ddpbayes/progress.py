"""A progress line on stderr for long loops: done/total, rate, time elapsed and time left
(DESIGN §2.4).

On a terminal the line is redrawn in place (at most ten times a second); otherwise a line is
printed at every tenth of the work, so logs stay short. Whatever the work does, the newest line
at least `HEARTBEAT` seconds old is also redrawn every `HEARTBEAT` seconds by a timer thread
(issue #24: a line within 10 s, and at least every 10 s, even while one unit runs for minutes). The time left is measured, never
guessed: the work left at the rate of the work done, "unknown" before any is done. The CLI
calls `close_all` before its last line (an error, "interrupted"), so nothing is drawn after it.
"""

from __future__ import annotations

import sys
import threading
import time
import weakref

HEARTBEAT = 5.0  # seconds: the longest a started line goes without being redrawn

_lock = threading.Lock()  # one line drawn at a time (the work's thread and the timer)
_open: list[weakref.ref[Progress]] = []  # bars started and not finished, oldest first
_timer: threading.Thread | None = None


class Progress:
    """The line of one loop over `total` items of `unit` (shown when `enabled`). A `slow_only`
    line is not drawn until the timer first draws it: a phase shorter than HEARTBEAT seconds
    prints nothing."""

    def __init__(self, label: str, total: int | None, unit: str, enabled: bool = True, slow_only: bool = False):
        """`total` None: a loop of unknown length (a root-finding), whose line gives no time left."""
        self.label, self.total, self.unit, self.enabled = label, total, unit, enabled
        self.silent = slow_only  # True until the timer draws the line
        self.done, self.start, self.shown_tenth = 0, time.monotonic(), 0
        self.shown_at = self.start  # the timer's first redraw is HEARTBEAT after the start
        self.tty = sys.stderr.isatty()
        if enabled:
            _watch(self)

    def advance(self, count: int) -> None:
        self.done += count
        if not self.enabled:
            return
        if self.silent:
            self.enabled = not self.finished  # done before the timer drew it: never shown
            return
        now = time.monotonic()
        tenth = 10 * self.done // max(1, self.total) if self.total is not None else self.shown_tenth
        if (self.tty and now - self.shown_at >= 0.1) or (not self.tty and tenth > self.shown_tenth) or self.finished:
            self.shown_tenth = tenth
            self._draw(now)

    @property
    def finished(self) -> bool:
        return self.total is not None and self.done >= self.total

    def close(self) -> None:
        """No more lines from this bar (its loop ended, early or, `slow_only`, before it was drawn)."""
        self.enabled = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        """The loop is over, finished or not (an error, an interrupt): `close`."""
        self.close()

    def _draw(self, now: float) -> None:
        with _lock:
            if not self.enabled:
                return
            self.shown_at, self.silent = now, False
            end = "" if self.tty and not self.finished else "\n"
            print(("\r" if self.tty else "") + self._line(now), end=end, file=sys.stderr, flush=True)
            if self.finished:
                self.enabled = False

    def _line(self, now: float) -> str:
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / elapsed
        if self.total is None:  # no end known: no time left to promise
            return (f"ddpbayes: {self.label} {self.done:,} {self.unit} so far, {_rate(rate)}/s, "
                    f"{duration(elapsed)} elapsed, time left unknown")
        left = (self.total - self.done) / rate if rate > 0 else float("inf")
        return (f"ddpbayes: {self.label} {self.done:,}/{self.total:,} {self.unit}, {_rate(rate)}/s, "
                f"{duration(elapsed)} elapsed, {duration(left)} left")


def close_all() -> None:
    """Stop every open line (the CLI's last word follows): a line left open on a terminal is
    ended, so that word starts on a line of its own."""
    with _lock:
        bars = [bar for ref in _open if (bar := ref()) is not None]
        _open.clear()
        if any(bar.enabled and bar.tty and bar.shown_at > bar.start for bar in bars):
            print(file=sys.stderr, flush=True)
        for bar in bars:
            bar.enabled = False


def _watch(bar: Progress) -> None:
    """Have the timer redraw `bar` (held weakly: a bar dropped with its loop is forgotten)."""
    global _timer
    with _lock:
        _open.append(weakref.ref(bar))
        if _timer is None or not _timer.is_alive():
            _timer = threading.Thread(target=_beat, name="ddpbayes-progress", daemon=True)
            _timer.start()


def _beat() -> None:
    """The timer: redraw the newest open bar that started at least HEARTBEAT seconds ago (the
    innermost loop that is long: the work under way; a younger one, e.g. each short audit of a
    calibration, would hide the outer line) when it has not been drawn for HEARTBEAT seconds;
    end when no bar is open."""
    global _timer
    while True:
        time.sleep(min(1.0, HEARTBEAT / 4))
        now = time.monotonic()
        with _lock:
            _open[:] = [ref for ref in _open if (bar := ref()) is not None and bar.enabled]
            if not _open:
                _timer = None
                return
            due = [b for b in (ref() for ref in _open) if b is not None and now - b.start >= HEARTBEAT]
            newest = due[-1] if due else None
            del due
        if newest is not None and now - newest.shown_at >= HEARTBEAT:
            newest._draw(now)
        del newest


def _rate(rate: float) -> str:
    """1,234 or 5.6 or 0.012 (two significant digits below ten)."""
    return f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"


def duration(seconds: float) -> str:
    """12 s, 4 min 10 s, 6.7 h, 3.2 days."""
    if seconds != seconds or seconds == float("inf"):
        return "unknown time"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60)} s"
    if seconds < 86400 * 2:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:,.1f} days"
