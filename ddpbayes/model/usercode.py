"""Running the user's code — a model file, its build(), a `fn:` query, a program (DESIGN §4, §2.6).

Inside `user_code`: what it prints goes to stderr, so stdout carries the result alone (`--format
json` stays JSON), both Python's `print` and writes to file descriptor 1 (`os.write(1, ...)`, C
extensions): fd 1 is pointed at fd 2 while the block runs; an exit (sys.exit, exit(), os._exit)
raises SystemExit, which the caller turns into one line of bad input instead of the end of the run;
and a process the code forks ends when its copy of the block ends, so it cannot carry on the audit.
Any other `BaseException` but KeyboardInterrupt (GeneratorExit, a user's subclass) is bad input too
(`is_interrupt`). `watched` adds a line on stderr while a block runs long, so that an endless one shows
a sign of life (Ctrl-C stops it: the KeyboardInterrupt unwinds as anywhere else). `untraced` switches
off PyTensor's creation traces while a model file loads.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import time
from collections.abc import Iterator

NOTICE_AFTER = 5.0  # seconds of a watched block (one call of the user's code) before the first "still running" line
NOTICE_EVERY = 30.0  # seconds between the later ones

_lock = threading.Lock()
_depth = 0  # user_code blocks running, in any thread: stdout, fd 1 and os._exit are swapped while above zero
_saved: tuple = ()
_untraced_depth = 0  # untraced blocks running, in any thread: PyTensor's traceback__limit is 0 while above zero
_untraced_saved = 0
_real_exit = os._exit


def _exit_raises(code: int = 0) -> None:
    """os._exit while user code runs: an exit the caller reports, not a silent end of the process."""
    raise SystemExit(code)


def is_interrupt(exc: BaseException) -> bool:
    """Whether `exc`, raised while the user's code ran, is the user stopping the run (Ctrl-C, SIGTERM:
    exit 130/143) rather than the code failing (bad input, exit 2)."""
    return isinstance(exc, KeyboardInterrupt)


@contextlib.contextmanager
def user_code() -> Iterator[None]:
    """Run the block as the user's code: its stdout (sys.stdout and fd 1) goes to stderr, os._exit
    raises SystemExit. Both are process-wide, so they are swapped by the first block to enter and
    restored by the last to leave (threads of a Dask worker may run several at once). A process
    forked inside the block ends when it leaves the block (`leave_if_forked`)."""
    global _depth, _saved
    pid = os.getpid()
    with _lock:
        if _depth == 0:
            _saved = (sys.stdout, os._exit, _point_stdout_at_stderr())
            sys.stdout, os._exit = sys.stderr, _exit_raises
        _depth += 1
    try:
        yield
    finally:
        leave_if_forked(pid)
        with _lock:
            _depth -= 1
            if _depth == 0:
                stdout, os._exit, saved_fd = _saved
                sys.stdout = stdout
                _restore_stdout(saved_fd)


def leave_if_forked(pid: int) -> None:
    """Call where the user's code returns to ddpbayes, `pid` the process that called it: a process the
    code forked ends here, at once (no exit handlers, no flush of what it inherited), so that only the
    parent carries on the audit. Its exit status: 0 if the code returned, its exit code or 1 if it raised."""
    if os.getpid() == pid:
        return
    exc = sys.exc_info()[1]
    _real_exit(0 if exc is None else exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else 1)


def _point_stdout_at_stderr() -> int | None:
    """Point fd 1 at fd 2 (after flushing what was printed to stdout before); the saved fd 1, or None
    when either is not open (nothing to protect)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):  # closed, or None (no console)
        sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:
        return None
    try:
        os.dup2(2, 1)
    except OSError:
        os.close(saved)
        return None
    return saved


def _restore_stdout(saved: int | None) -> None:
    """Point fd 1 back at the saved stdout, after flushing what the user's code wrote to C's stdout buffer."""
    if saved is None:
        return
    with contextlib.suppress(OSError, ValueError, AttributeError):  # closed, or None (no console)
        sys.stderr.flush()
    _flush_c_stdio()
    os.dup2(saved, 1)
    os.close(saved)


def _flush_c_stdio() -> None:
    """fflush(NULL): what C code printed and its stdio still holds goes where fd 1 points now."""
    fflush = _c_fflush()
    if fflush is not None:
        fflush(None)


@functools.cache
def _c_fflush():
    """The C library's fflush, or None where there is no C library to ask (nothing buffered to lose)."""
    try:
        import ctypes

        return ctypes.CDLL(None).fflush
    except (OSError, AttributeError, TypeError):
        return None


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


class Watch:
    """One watched block: `what` runs since `started`; `restart()` starts the wait again (one watch
    over many calls of a program: the notice is about one call running long)."""

    def __init__(self, what: str):
        self.what = what
        self.restart()

    def restart(self) -> None:
        self.started, self.next = time.monotonic(), NOTICE_AFTER


_watches: dict[int, Watch] = {}  # the open watches of this process, by id
_watcher: tuple[int, threading.Thread] | None = None  # (pid, thread): a forked child starts its own


@contextlib.contextmanager
def watched(what: str) -> Iterator[Watch]:
    """While the block runs (in the main thread), a line on stderr once it has run NOTICE_AFTER
    seconds since it started (or since the Watch it yields was restarted), and every NOTICE_EVERY
    after: `what` is still running, and Ctrl-C stops it. One timer thread serves every watch."""
    watch = Watch(what)
    if threading.current_thread() is not threading.main_thread():
        yield watch
        return
    with _lock:
        _watches[id(watch)] = watch
        _start_watcher()
    try:
        yield watch
    finally:
        with _lock:
            _watches.pop(id(watch), None)


def _start_watcher() -> None:
    global _watcher
    if _watcher is None or _watcher[0] != os.getpid() or not _watcher[1].is_alive():
        thread = threading.Thread(target=_watch_loop, name="ddpbayes-build-notice", daemon=True)
        _watcher = (os.getpid(), thread)
        thread.start()


def _after_fork_in_child() -> None:
    """A forked process (the program engine's pool, a process forked by user code) starts with a free
    lock and no watches: another thread of the parent may have held the lock at the fork, and the
    parent's watches are not the child's to report."""
    global _lock, _watcher
    _lock = threading.Lock()
    _watches.clear()
    _watcher = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _watch_loop() -> None:
    """The timer: every tick, a line for each watch past its next notice; it ends when no watch is open."""
    global _watcher
    while True:
        time.sleep(min(0.25, NOTICE_AFTER / 4))
        with _lock:
            if not _watches:
                _watcher = None
                return
            due = []
            now = time.monotonic()
            for watch in _watches.values():
                waited = now - watch.started
                if waited >= watch.next:
                    due.append(f"{watch.what} is still running after {waited:.0f} s (Ctrl-C stops it)")
                    watch.next = waited + NOTICE_EVERY
        for line in due:  # sys.stderr as it is now: the thread may outlive the stream it started under
            print(line, file=sys.stderr, flush=True)
