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

from ddpbayes.parallel.cluster import client_for, scheduler_address, worker_count, workers_chosen
from ddpbayes.parallel.modelref import portable
from ddpbayes.progress import Progress
from ddpbayes.settings import RunSettings

T = TypeVar("T")
WORTH = 20.0  # seconds of units left that start the embedded cluster when no workers were chosen

_inside = False  # True in a process while it runs a unit for Dask: units do not nest


def inside_unit() -> bool:
    return _inside


def map_units(fn: Callable[..., T], items: Sequence, settings: RunSettings, label: str, unit: str) -> list[T]:
    """fn(item) for every item, in order; `label` and `unit` name the work on the progress line
    (done/total, rate, time left; shown when `settings.progress`).

    With workers chosen (`--workers N`, DDPBAYES_WORKERS, `--scheduler`) the units go to Dask at
    once. By default they start here, and the embedded cluster is started only when the units
    left would take longer than `WORTH` seconds at the pace of those done: a short audit does
    not pay a cluster's start (about 5 s, and every worker's imports and compilation)."""
    items = list(items)
    shown = settings.progress and len(items) > 0
    bar = Progress(label, len(items), unit, enabled=shown)
    if shown:
        print(f"ddpbayes: {label}: {len(items):,} {unit}", file=sys.stderr, flush=True)
    out: list = []
    if _distributes(items, settings):
        explicit = settings.workers > 0 or workers_chosen(settings.scheduler)
        start = time.perf_counter()
        while not explicit and len(out) < len(items):
            out.append(fn(items[len(out)]))
            bar.advance(1)
            pace = (time.perf_counter() - start) / len(out)
            if (len(items) - len(out)) * pace > WORTH:
                break
        if len(out) < len(items):
            return out + _on_dask(fn, items[len(out):], settings, bar, shown)
        return out
    for item in items:
        out.append(fn(item))
        bar.advance(1)
    return out


def _distributes(items: list, settings: RunSettings) -> bool:
    if _inside or len(items) < 2:
        return False
    if not scheduler_address(settings.scheduler) and worker_count(settings.workers) < 2:
        return False
    return portable(items) is None


def _on_dask(fn: Callable[..., T], items: list, settings: RunSettings, bar: Progress, shown: bool) -> list[T]:
    from distributed import as_completed

    client = client_for(settings.workers, settings.scheduler)
    if shown:
        where = scheduler_address(settings.scheduler) or "the embedded cluster"
        print(f"ddpbayes: {bar.label}: {len(items):,} {bar.unit} on {len(client.scheduler_info()['workers'])} Dask "
              f"workers ({where})", file=sys.stderr, flush=True)
    futures = client.map(_run_unit, [fn] * len(items), items, pure=False)
    index = {f.key: k for k, f in enumerate(futures)}
    out: list = [None] * len(items)
    try:
        with client.as_current():
            for future in as_completed(futures):
                out[index[future.key]] = future.result()  # a unit's error is raised here
                bar.advance(1)
    finally:
        client.cancel(futures)
    return out


def _run_unit(fn: Callable[..., T], item) -> T:
    """One unit on a worker: nested maps inside it run in the worker, serially."""
    global _inside
    _inside = True
    return fn(item)
