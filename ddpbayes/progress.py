"""A progress line on stderr for long loops: done/total, rate and time left.

On a terminal the line is redrawn in place (at most ten times a second); otherwise a line is
printed at every tenth of the work, so logs stay short.
"""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, label: str, total: int, unit: str, enabled: bool = True):
        self.label, self.total, self.unit, self.enabled = label, total, unit, enabled
        self.done, self.start, self.shown_at, self.shown_tenth = 0, time.monotonic(), 0.0, 0
        self.tty = sys.stderr.isatty()

    def advance(self, count: int) -> None:
        self.done += count
        if not self.enabled:
            return
        now = time.monotonic()
        tenth = 10 * self.done // max(1, self.total)
        if (self.tty and now - self.shown_at >= 0.1) or (not self.tty and tenth > self.shown_tenth) or self.done >= self.total:
            self.shown_at, self.shown_tenth = now, tenth
            end = "" if self.tty and self.done < self.total else "\n"
            print(("\r" if self.tty else "") + self._line(now), end=end, file=sys.stderr, flush=True)

    def _line(self, now: float) -> str:
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / elapsed
        left = (self.total - self.done) / rate if rate > 0 else float("inf")
        return (f"ddpbayes: {self.label} {self.done:,}/{self.total:,} {self.unit}, {rate:,.0f}/s, "
                f"{duration(left)} left")


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
