"""Running the user's code — a model file, its build(), a `fn:` query (DESIGN §4).

Inside `user_code`: what it prints goes to stderr, so stdout carries the result alone (`--format
json` stays JSON); and an exit (sys.exit, exit(), os._exit) raises SystemExit, which the caller
turns into one line of bad input instead of the end of the run. `watched` adds a line on stderr
while a model file's import or build() runs long, so that an endless one shows a sign of life (Ctrl-C stops it: the
KeyboardInterrupt unwinds as anywhere else). `untraced` switches off PyTensor's creation traces while a
model file loads.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator

NOTICE_AFTER = 5.0  # seconds of a model file's import or build() before the first "still running" line
NOTICE_EVERY = 30.0  # seconds between the later ones

_lock = threading.Lock()
_depth = 0  # user_code blocks running, in any thread: stdout and os._exit are swapped while above zero
_saved: tuple = ()
_untraced_depth = 0  # untraced blocks running, in any thread: PyTensor's traceback__limit is 0 while above zero
_untraced_saved = 0


def _exit_raises(code: int = 0) -> None:
    """os._exit while user code runs: an exit the caller reports, not a silent end of the process."""
    raise SystemExit(code)


@contextlib.contextmanager
def user_code() -> Iterator[None]:
    """Run the block as the user's code: its stdout goes to stderr, os._exit raises SystemExit.
    Both are process-wide, so they are swapped by the first block to enter and restored by the last
    to leave (threads of a Dask worker may run several at once)."""
    global _depth, _saved
    with _lock:
        if _depth == 0:
            _saved = (sys.stdout, os._exit)
            sys.stdout, os._exit = sys.stderr, _exit_raises
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                sys.stdout, os._exit = _saved


@contextlib.contextmanager
def untraced() -> Iterator[None]:
    """PyTensor records where each variable was created (`tag.trace`: up to `traceback__limit` frames
    read through linecache), a third of the time PyMC takes to build a 1,000-variable chain; ddpbayes
    never shows those traces, so the limit is 0 inside the block and restored by the last block to leave."""
    global _untraced_depth, _untraced_saved
    from pytensor import config

    with _lock:
        if _untraced_depth == 0:
            _untraced_saved, config.traceback__limit = config.traceback__limit, 0
        _untraced_depth += 1
    try:
        yield
    finally:
        with _lock:
            _untraced_depth -= 1
            if _untraced_depth == 0:
                config.traceback__limit = _untraced_saved


@contextlib.contextmanager
def watched(what: str) -> Iterator[None]:
    """While the block runs (in the main thread), a line on stderr after NOTICE_AFTER seconds and
    every NOTICE_EVERY after: `what` is still running, and Ctrl-C stops it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    done = threading.Event()
    stream = sys.stderr

    def beat() -> None:
        waited, wait = 0.0, NOTICE_AFTER
        while not done.wait(wait):
            waited += wait
            print(f"{what} is still running after {waited:.0f} s (Ctrl-C stops it)", file=stream, flush=True)
            wait = NOTICE_EVERY

    thread = threading.Thread(target=beat, name="ddpbayes-build-notice", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
