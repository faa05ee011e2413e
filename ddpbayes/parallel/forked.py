"""Pieces of work that cannot be pickled, on this machine's cores: a forked pool (DESIGN §8).

A model built in Python (the Gowalla ego network) cannot go to Dask workers (`model.reference.portable`),
but the independent pieces of one unit (an SMC event's independent runs) can run in processes forked
from this one, which inherit the model and everything compiled on it. Each piece carries its own
generator, so the results do not depend on how many processes drew them; BLAS runs one thread
throughout, here too, so that the arithmetic is the same whichever process ran a piece.

The pool (`Forked`) is run by the calling thread alone: one task in flight per process, results read
with `multiprocessing.connection.wait` as they come. `multiprocessing.Pool` was not: its worker-handler
thread waits on the result pipe among its sentinels, so while a large result is in the pipe (a batch's
million classifier scores, 8 MB) it spins, polling the processes' exit codes, and took about a core
from the computation (the program certifier with two processes used twice the CPU of one, §2.6).
"""

from __future__ import annotations

import ctypes
import multiprocessing
import pickle
import signal
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import wait
from typing import Any, TypeVar

from threadpoolctl import threadpool_limits

from ddpbayes.parallel import units
from ddpbayes.parallel.cluster import cores, scheduler_address, worker_count

T = TypeVar("T")

PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies


def local_processes(workers: int, scheduler: str | None = None) -> int:
    """How many processes forked pieces may use: 1 inside a unit of work on a Dask worker (units do not
    nest), in a daemonic process (it may have no children) or where fork is missing; else the worker
    count (`--workers`, DDPBAYES_WORKERS, else every core; with a scheduler, this machine's cores)."""
    if units._inside or multiprocessing.current_process().daemon:
        return 1
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return cores() if scheduler_address(scheduler) else worker_count(workers)


def forked_map(fn: Callable[..., T], items: Sequence, processes: int) -> list[T]:
    """[fn(item) for item in items] in order: here when `processes` < 2 or fewer than two items, else in
    that many forked processes (at most one per item), one item a task. An error in a piece is raised
    here; an interrupt here ends the pool (its processes ignore SIGINT: the parent stops them)."""
    with threadpool_limits(limits=1, user_api="blas"):
        if processes < 2 or len(items) < 2:
            return [fn(item) for item in items]
        with Forked(lambda k: fn(items[k]), min(processes, len(items))) as pool:  # the items inherited, not pickled
            return list(pool.imap(range(len(items))))


class Forked:
    """`processes` processes forked from this one, each running fn on the tasks it is sent: fn and
    everything it reaches are inherited, only the tasks and results are pickled. `imap` yields the
    results in the tasks' order; a task's error is raised here (with the piece's traceback as its
    cause); a process that dies mid-task is an error, not a hang. Closed (`close`, or the context's
    exit) its processes are stopped."""

    def __init__(self, fn: Callable[[Any], Any], processes: int):
        context = multiprocessing.get_context("fork")
        self.links, self.processes = [], []
        try:
            for _ in range(processes):
                here, there = context.Pipe()
                process = context.Process(target=_serve, args=(fn, there), daemon=True)
                process.start()
                there.close()
                self.links.append(here)
                self.processes.append(process)
        except BaseException:
            self.close()
            raise

    def imap(self, tasks: Sequence) -> Iterator:
        """fn(task) for each task, in order, as the processes finish them (one task in flight each). Left
        before the last result (an error, or the caller stopping), the pool is closed: results still in
        flight would be read as the next call's."""
        waiting = list(range(len(tasks)))[::-1]
        busy: dict[int, int] = {}  # process -> the task it runs
        done: dict[int, Any] = {}
        following = 0
        try:
            while following < len(tasks):
                for k in range(len(self.links)):
                    if k not in busy and waiting:
                        busy[k] = waiting.pop()
                        self.links[k].send(tasks[busy[k]])
                ready = wait([self.links[k] for k in busy] + [self.processes[k].sentinel for k in busy])
                for k in list(busy):
                    if self.links[k] in ready:
                        ok, value = _received(self.links[k], self.processes[k])
                        if not ok:
                            error, remote = value
                            raise error from RemoteTraceback(remote)
                        done[busy.pop(k)] = value
                    elif self.processes[k].sentinel in ready:
                        raise _died(self.processes[k])
                while following in done:
                    following += 1  # before the yield: a caller that stops at the last result (zip) leaves it done
                    yield done.pop(following - 1)
        finally:
            if following < len(tasks):
                self.close()

    def close(self) -> None:
        """Stop the processes (SIGTERM); closing twice does nothing more."""
        for link in self.links:
            link.close()
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.join()

    def __enter__(self) -> Forked:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _received(link, process) -> tuple[bool, Any]:
    """(True, result) or (False, (error, its traceback there)) read from a process's link, as if the
    process had raised an error when it died before sending it all."""
    try:
        return link.recv()
    except (EOFError, OSError):
        process.join()
        return False, (_died(process), "")


def _died(process) -> RuntimeError:
    """The error of a forked process that ended before sending its task's result."""
    return RuntimeError(f"a forked process died running a task (exit code {process.exitcode})")


def _serve(fn: Callable[[Any], Any], link) -> None:
    """A pool process: fn on each task received, (True, result) or (False, (the error, its traceback))
    sent back, until the link closes. SIGTERM ends it (`close`), whatever the parent's handler was."""
    _ignore_sigint()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _keep_freed_memory()
    while True:
        try:
            task = link.recv()
        except (EOFError, OSError):
            return
        try:
            reply = (True, fn(task))
        except BaseException as error:  # noqa: BLE001 (every error goes back to the caller)
            reply = (False, _portable(error))
        link.send(reply)


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt(3)'s parameters (glibc)
KEPT = 32 << 20  # arrays up to this size come from the heap (glibc's largest mmap threshold)
TRIM = 1 << 30  # and the heap gives back memory only above this much free at its top


def _keep_freed_memory() -> None:
    """Let a pool process's heap keep what its tasks free, for the next task's arrays (glibc's
    mallopt; elsewhere nothing). Forked before the parent's large arrays raised glibc's dynamic
    thresholds, a process returned each batch's arrays to the system and faulted them in again:
    520,144 page faults in NoisyHist1's check against 9 in the parent, 30% more CPU, and on this
    machine's sandbox the faults also cost wall time no process is charged for (benchmarks/README)."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None) if sys.platform.startswith("linux") else None
    if mallopt is not None:
        mallopt(M_MMAP_THRESHOLD, KEPT)
        mallopt(M_TRIM_THRESHOLD, TRIM)


def _portable(error: BaseException) -> tuple[BaseException, str]:
    """The error as it can be pickled (itself, or a RuntimeError naming it) and its traceback here, raised
    in the caller with the traceback as its cause (`multiprocessing.pool`'s way)."""
    remote = "".join(traceback.format_exception(error))
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:  # noqa: BLE001
        error = RuntimeError(f"{type(error).__name__}: {error}")
    return error, remote


class RemoteTraceback(Exception):
    """The traceback of an error raised in a forked process, shown as the re-raised error's cause."""

    def __str__(self) -> str:
        return "\n" + self.args[0]


def _ignore_sigint() -> None:
    """A pool process leaves Ctrl-C to the parent (which ends the pool): no traceback of its own; on Linux it
    is killed when the parent dies (a SIGKILL, or a SIGTERM the parent does not handle, left it drawing)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
