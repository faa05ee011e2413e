"""`map_units`: [fn(item) for item in items], here or on Dask workers, with one progress bar.

Dask runs the units when there are at least two, more than one worker, every item can be sent
(`portable`), and this is not itself a unit on a worker (units do not nest). A worker that dies
in the middle of a unit has it rerun elsewhere (the scheduler's retries); the results are the
same because a unit's randomness is its own. A unit's error is raised here as it was raised
there (an InputError stays one line).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from ddpbayes.parallel.cluster import client_for, running, scheduler_address, worker_count, workers_chosen
from ddpbayes.parallel.modelref import portable
from ddpbayes.progress import Progress
from ddpbayes.settings import RunSettings

T = TypeVar("T")
WORTH = 20.0  # seconds of units left that start the embedded cluster when no workers were chosen

_inside = False  # True in a process while it runs a unit for Dask: units do not nest


def inside_unit() -> bool:
    return _inside


def map_units(fn: Callable[..., T], items: Sequence, settings: RunSettings, label: str, unit: str,
              bar: Progress | None = None, weight: Callable[[object], int] | None = None) -> list[T]:
    """fn(item) for every item, in order; `label` and `unit` name the work on the progress line
    (done/total, rate, time left; shown when `settings.progress`). A caller with its own line
    over a larger whole passes it as `bar`, advanced by `weight(item)` per unit (default 1).

    With workers chosen (`--workers N`, DDPBAYES_WORKERS, `--scheduler`), or the embedded cluster
    already running, the units go to Dask at once. Otherwise they start here, and the cluster is
    started only when the units left would take longer than `WORTH` seconds at the pace of those
    done: a short audit does not pay a cluster's start (seconds, and every worker's imports and
    compilation)."""
    items = list(items)
    size = weight or (lambda item: 1)
    if bar is None:
        bar = Progress(label, sum(size(item) for item in items), unit, enabled=settings.progress and len(items) > 0)
    out: list = []
    distributes = _distributes(items, settings)
    at_once = distributes and (settings.workers > 0 or workers_chosen(settings.scheduler) or running(settings))
    start = time.perf_counter()
    while len(out) < len(items) and not at_once:
        out.append(fn(items[len(out)]))
        bar.advance(size(items[len(out) - 1]))
        pace = (time.perf_counter() - start) / len(out)
        at_once = distributes and (len(items) - len(out)) * pace > WORTH
    if len(out) < len(items):
        out += _on_dask(fn, items[len(out):], settings, bar, size)
    return out


def _distributes(items: list, settings: RunSettings) -> bool:
    if _inside or len(items) < 2:
        return False
    if not scheduler_address(settings.scheduler) and worker_count(settings.workers) < 2:
        return False
    return portable(items) is None


def _on_dask(fn: Callable[..., T], items: list, settings: RunSettings, bar: Progress,
             size: Callable[[object], int]) -> list[T]:
    from distributed import as_completed

    client = client_for(settings.workers, settings.scheduler)
    if bar.enabled:
        where = scheduler_address(settings.scheduler) or "the embedded cluster"
        print(f"ddpbayes: {bar.label}: {sum(size(item) for item in items):,} {bar.unit} on "
              f"{len(client.scheduler_info()['workers'])} Dask workers ({where})", file=sys.stderr, flush=True)
    futures = client.map(_run_unit, [fn] * len(items), items, pure=False)
    index = {f.key: k for k, f in enumerate(futures)}
    out: list = [None] * len(items)
    try:
        with client.as_current():
            for future in as_completed(futures):
                k = index[future.key]
                out[k] = future.result()  # a unit's error is raised here
                bar.advance(size(items[k]))
    finally:
        client.cancel(futures)
    return out


def _run_unit(fn: Callable[..., T], item) -> T:
    """One unit on a worker: nested maps inside it run in the worker, serially."""
    global _inside
    _inside = True
    return fn(item)
