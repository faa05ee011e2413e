"""The forked pool (`parallel.Forked`, DESIGN §8): results in order, a task's error raised in the caller with
the task's traceback, a process that dies an error (not a hang), and the processes' heap kept between tasks."""

from __future__ import annotations

import ctypes
import os
import resource
import sys

import numpy as np
import pytest

from ddpbayes.parallel.forked import Forked, RemoteTraceback

ARRAY = 1_000_000  # floats: 8 MB, far above glibc's first mmap threshold (128 KB)


def test_results_come_back_in_the_tasks_order_from_a_closure():
    """A closure (not picklable) on two processes, more tasks than processes, tasks of unequal length:
    the results in the tasks' order, each computed by a forked process."""
    base = 100

    def slow_first(k: int) -> tuple[int, int]:
        if k == 0:
            sum(range(300_000))
        return base + k * k, os.getpid()

    with Forked(slow_first, 2) as pool:
        out = list(pool.imap(list(range(7))))
    assert [v for v, _ in out] == [base + k * k for k in range(7)]
    assert os.getpid() not in {pid for _, pid in out}


def test_a_tasks_error_is_raised_here_with_its_traceback_as_cause():
    def task(k: int) -> int:
        if k == 3:
            raise ValueError(f"bad task {k}")
        return k

    with Forked(task, 2) as pool:
        with pytest.raises(ValueError, match="bad task 3") as caught:
            list(pool.imap([1, 2, 3, 4]))
    assert isinstance(caught.value.__cause__, RemoteTraceback)
    assert "in task" in str(caught.value.__cause__)  # the frame where it was raised, in the forked process


def test_an_error_that_cannot_be_pickled_is_named():
    class Local(Exception):  # a local class: pickle cannot find it by name
        pass

    def task(k: int) -> int:
        raise Local("local failure")

    with Forked(task, 2) as pool:
        with pytest.raises(RuntimeError, match="Local: local failure"):
            list(pool.imap([0, 1]))


def test_a_process_that_dies_in_a_task_is_an_error_not_a_hang():
    def task(k: int) -> int:
        if k == 2:
            os._exit(7)
        return k

    with Forked(task, 2) as pool:
        with pytest.raises(RuntimeError, match="died running a task"):
            list(pool.imap([0, 1, 2, 3]))


@pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(ctypes.CDLL(None), "mallopt"),
                    reason="glibc's mallopt")
def test_a_process_keeps_its_freed_arrays_for_the_next_task():
    """A task allocating and freeing 8 MB twenty times: in a pool process, from the second task on, nearly no
    page faults (the heap keeps what was freed). Left to glibc's defaults, a process forked before large
    frees maps each array afresh, 2,048 pages a time (measured: about 1,800 faults a task)."""
    def churn(_: int) -> int:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for seed in range(20):
            x = np.random.default_rng(seed).random(ARRAY)
            assert 0.4 < x.mean() < 0.6
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    with Forked(churn, 1) as pool:
        faults = list(pool.imap([0, 1, 2]))
    assert max(faults[1:]) < 200, faults


def test_a_pool_left_before_its_last_result_is_closed():
    """The caller stops after the first result (or a task fails): the pool's processes are stopped, so no result
    still in flight can be read as a later call's."""
    pool = Forked(lambda k: k, 2)
    results = pool.imap([0, 1, 2, 3])
    assert next(results) == 0
    results.close()
    assert all(not p.is_alive() for p in pool.processes)


def test_a_pool_read_to_its_last_result_by_zip_serves_the_next_call():
    """zip stops at the shorter list without asking the results for more after the last: the pool stays open
    for the next call (the certifier reads each batch's results that way, then maps the next batches)."""
    with Forked(lambda k: 2 * k, 2) as pool:
        assert [r for _, r in zip(range(3), pool.imap([0, 1, 2]))] == [0, 2, 4]
        assert list(pool.imap([5, 6])) == [10, 12]
