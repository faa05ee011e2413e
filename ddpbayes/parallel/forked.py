"""Pieces of work that cannot be pickled, on this machine's cores: a forked pool (DESIGN §8).

A model built in Python (the Gowalla ego network) cannot go to Dask workers (`model.reference.portable`),
but the independent pieces of one unit (an SMC event's independent runs) can run in processes forked
from this one, which inherit the model and everything compiled on it. Each piece carries its own
generator, so the results do not depend on how many processes drew them; BLAS runs one thread
throughout, here too, so that the arithmetic is the same whichever process ran a piece.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

from threadpoolctl import threadpool_limits

from ddpbayes.parallel import units
from ddpbayes.parallel.cluster import cores, scheduler_address, worker_count

T = TypeVar("T")

PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies
_WORK: tuple[Callable, Sequence] | None = None  # the pool's function and items, set before forking


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
    global _WORK
    with threadpool_limits(limits=1, user_api="blas"):
        if processes < 2 or len(items) < 2:
            return [fn(item) for item in items]
        _WORK = (fn, items)
        pool = multiprocessing.get_context("fork").Pool(min(processes, len(items)), initializer=_ignore_sigint)
        try:
            out = pool.map(_piece, range(len(items)), chunksize=1)
            pool.close()
            return out
        finally:
            pool.terminate()
            pool.join()
            _WORK = None


def _piece(k: int):
    fn, items = _WORK
    return fn(items[k])


def _ignore_sigint() -> None:
    """A pool process leaves Ctrl-C to the parent (which ends the pool): no traceback of its own; on Linux it
    is killed when the parent dies (a SIGKILL, or a SIGTERM the parent does not handle, left it drawing)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
