"""SIGTERM handled like Ctrl-C, so that `kill` runs the same cleanup (temporary directories,
the embedded Dask cluster) and the CLI ends on one line (DESIGN §2.4)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: unwinds like KeyboardInterrupt."""


def install_sigterm() -> None:
    """Make SIGTERM raise `Terminated` in this process (from the main thread only; Python
    delivers signals there). A process forked later gets SIGTERM's default action back."""
    if threading.current_thread() is not threading.main_thread():
        return
    owner = os.getpid()

    def on_sigterm(signum: int, frame) -> None:
        if os.getpid() != owner:  # a forked child: die as SIGTERM would have it
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        raise Terminated()

    signal.signal(signal.SIGTERM, on_sigterm)


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """`install_sigterm` inside, the caller's SIGTERM handler back after (`main([...])` called
    from Python must not leave its handler in the caller's process)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = signal.getsignal(signal.SIGTERM)
    install_sigterm()
    try:
        yield
    finally:
        if saved is not None:  # None: not set from Python, nothing to restore
            signal.signal(signal.SIGTERM, saved)


@contextmanager
def held() -> Iterator[None]:
    """SIGINT and SIGTERM ignored inside (the cleanup after one: a second one would cut it short
    with a traceback), their handlers restored after; in a thread other than the main one, as is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            if handler is not None:  # None: not set from Python, nothing to restore
                signal.signal(sig, handler)
