"""Size limits: how much ddpbayes builds before it refuses, with the flag that raises each.

Every limit is checked before the memory is allocated, so an oversized input ends in one line
(exit 2) naming the size and the flag, never in a MemoryError. `--max-states` bounds every
enumerated table: the joint state space, an inferred discrete support, the mechanism's kernel
and the output grid; `--max-adversaries` bounds the pdp lattice an engine must list. Whatever
they are raised to, a table that would not fit in the machine's available memory is refused.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ddpbayes.errors import InputError

DEFAULT_MAX_STATES = 1 << 22
DEFAULT_MAX_ADVERSARIES = 1 << 17
MAX_SECONDS = 86_400  # adversaries an engine estimates past a day are refused unless --force
FITS_ANYWHERE = 1 << 26  # bytes (64 MiB) below which the machine's memory is not read (50 us a read)

_max_states: ContextVar[int] = ContextVar("ddpbayes_max_states", default=DEFAULT_MAX_STATES)


def max_states() -> int:
    """The state limit in force (`--max-states`, default 2^22)."""
    return _max_states.get()


@contextmanager
def state_limit(limit: int | None) -> Iterator[int]:
    """Run the block with `limit` as the state limit (None keeps the one in force)."""
    if limit is None:
        yield max_states()
        return
    check_positive_int(limit, "--max-states")
    token = _max_states.set(limit)
    try:
        yield limit
    finally:
        _max_states.reset(token)


def check_states(size: int, what: str, unit: str = "states", limit: int | None = None, advice: str = "",
                 bytes_per: int = 8) -> None:
    """Refuse `what` of `size` cells above the state limit, or needing more than the machine's
    available memory at `bytes_per` bytes a cell, before it is built."""
    limit = max_states() if limit is None else limit
    if size > limit:
        raise InputError(f"{what} has {count_text(size)} {unit}, over the limit of {count_text(limit)} "
                         f"(raise --max-states{advice})")
    if size * bytes_per > FITS_ANYWHERE:
        check_memory(size * bytes_per, what, f"{count_text(size)} {unit}")


def count_text(n: int) -> str:
    """A count for a message: `4,194,304`, or `about 1.13e+4515` past 18 digits (a state space of
    thousands of tuples has more digits than Python will turn into a string)."""
    if abs(n) < 10**18:
        return f"{n:,}"
    exponent = math.floor(math.log10(abs(n)))
    mantissa = 10 ** (math.log10(abs(n)) - exponent)
    return f"about {'-' if n < 0 else ''}{mantissa:.3g}e+{exponent}"


def available_memory() -> int:
    """Bytes this machine can still allocate: MemAvailable of /proc/meminfo, else free physical pages."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return 1 << 62  # no way to tell: no bound


def check_memory(nbytes: int, what: str, size: str = "", flag: str = "--max-states", advice: str = "") -> None:
    """Refuse `what`, needing about `nbytes`, when that exceeds the machine's available memory,
    whatever the limits were raised to (DESIGN §2.4): a limit is a choice, memory is not. The
    message ends with `advice`, by default that `flag` cannot raise it."""
    if nbytes <= FITS_ANYWHERE:
        return
    free = available_memory()
    if nbytes > free:
        of = f" ({size})" if size else ""
        raise InputError(f"{what}{of} would need about {byte_text(nbytes)}, more than this machine's available "
                         f"memory ({byte_text(free)})" + (f": {advice}" if advice else f", whatever {flag} allows"))


def byte_text(n: int) -> str:
    """`n` bytes in binary units: 384 KiB, 1.31 PiB; past 1024 EiB, `about 1.2e+40 EiB`."""
    units = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    k = min(len(units) - 1, max(0, (int(n).bit_length() - 1) // 10))
    if k == 0:
        return f"{int(n)} bytes"
    if n >= 1 << 70:  # n / 1024**6 may not fit in a float
        return f"{count_text(n >> 60)} EiB"
    return f"{n / 1024**k:.3g} {units[k]}"


def positive_finite(value) -> bool:
    """A real number (not a bool) that is finite and above zero."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def check_positive_finite(value, what: str) -> float:
    """`value`, or an InputError naming `what` unless it is a positive finite number."""
    if not positive_finite(value):
        raise InputError(f"{what} must be a positive finite number, got {value}")
    return value


def check_positive_int(value, flag: str) -> int:
    """A positive integer option, or an InputError naming `flag`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{flag} must be a positive integer, got {value}")
    return value
