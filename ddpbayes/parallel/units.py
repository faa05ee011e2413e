"""`map_units`: [fn(item) for item in items], here or on Dask workers, with one progress bar
(redrawn every `progress.HEARTBEAT` seconds even while a unit runs long; DESIGN §8).

Dask runs the units when there are at least two, more than one worker, every item can be sent
(`portable`), and this is not itself a unit on a worker (units do not nest). A worker that dies
in the middle of a unit has it rerun elsewhere (the scheduler's retries); the results are the
same because a unit's randomness is its own. A unit's error is raised here as it was raised
there (an InputError stays one line).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

from ddpbayes.parallel.cluster import client_for, running, scheduler_address, worker_count, workers_chosen
from ddpbayes.progress import Progress
from ddpbayes.settings import RunSettings

T = TypeVar("T")
WORTH = 20.0  # seconds of units left that start the embedded cluster when no workers were chosen

_inside = False  # True in a process while it runs a unit for Dask: units do not nest


def map_units(fn: Callable[..., T], items: Sequence, settings: RunSettings, label: str, unit: str,
              bar: Progress | None = None, weight: Callable[[object], int] | None = None,
              group: Callable[[object], Hashable] | None = None) -> list[T]:
    """fn(item) for every item, in order; `label` and `unit` name the work on the progress line
    (done/total, rate, time left; shown when `settings.progress`). A caller with its own line
    over a larger whole passes it as `bar`, advanced by `weight(item)` per unit (default 1).
    Units of one `group` share what a worker builds for them (compiled MCMC steps): each group
    is placed on one worker, the groups balanced by weight, and an idle worker may still take
    a unit of another's (Dask's work stealing), so the groups are compiled about once in all.

    With workers chosen (`--workers N`, DDPBAYES_WORKERS, `--scheduler`), or the embedded cluster
    already running, the units go to Dask at once. Otherwise they start here, and the cluster is
    started only when the units left would take longer than `WORTH` seconds at the pace of those
    done: a short audit does not pay a cluster's start (seconds, and every worker's imports and
    compilation).

    Parameters
    ----------
    fn : Callable
        Runs one unit; sent to the workers with the items.
    items : sequence
        The units' arguments, one each.
    settings : RunSettings
        Where to run (workers, scheduler) and whether to show progress.
    label : str
        Names the work on the progress line.
    unit : str
        Names a unit of work on the progress line.
    bar : Progress or None, default None
        The caller's own progress line; None: a new one.
    weight : Callable or None, default None
        An item's weight on the bar (and in placing groups); None: 1.
    group : Callable or None, default None
        An item's group key; None: no placement.

    Returns
    -------
    list
        ``fn(item)`` for every item, in the items' order.

    Raises
    ------
    Exception
        A unit's own error, raised here as it was raised on its worker.
    """
    items = list(items)
    size = weight or (lambda item: 1)
    if bar is None:
        bar = Progress(label, sum(size(item) for item in items), unit, enabled=settings.progress and len(items) > 0)
    out: list = []
    try:
        distributes = _distributes(items, settings)
        at_once = distributes and (settings.workers > 0 or workers_chosen(settings.scheduler) or running(settings))
        start = time.perf_counter()
        while len(out) < len(items) and not at_once:
            out.append(fn(items[len(out)]))
            bar.advance(size(items[len(out) - 1]))
            pace = (time.perf_counter() - start) / len(out)
            at_once = distributes and (len(items) - len(out)) * pace > WORTH
        if len(out) < len(items):
            out += _on_dask(fn, items[len(out):], settings, bar, size, group)
    except BaseException:  # an error or an interrupt ends the loop: its line stops (`Progress.close`)
        bar.close()
        raise
    return out


def _distributes(items: list, settings: RunSettings) -> bool:
    if _inside or len(items) < 2:
        return False
    if not scheduler_address(settings.scheduler) and worker_count(settings.workers) < 2:
        return False
    # imported on use: the model package loads PyMC, and the CLI's argument parsing imports this package
    from ddpbayes.model.reference import portable

    return portable(items) is None


def _on_dask(fn: Callable[..., T], items: list, settings: RunSettings, bar: Progress,
             size: Callable[[object], int], group: Callable[[object], Hashable] | None) -> list[T]:
    from distributed import as_completed

    client = client_for(settings.workers, settings.scheduler)
    workers = sorted(client.scheduler_info()["workers"])
    if bar.enabled:
        where = scheduler_address(settings.scheduler) or "the embedded cluster"
        print(f"ddpbayes: {bar.label}: {sum(size(item) for item in items):,} {bar.unit} on {len(workers)} Dask "
              f"workers ({where})", file=sys.stderr, flush=True)
    futures: list = [None] * len(items)
    for worker, which in _placed(items, size, group, workers).items():
        where = {} if worker is None else {"workers": [worker], "allow_other_workers": True}
        for k, future in zip(which, client.map(_run_unit, [fn] * len(which), [items[k] for k in which], pure=False,
                                               **where)):
            futures[k] = future
    index = {f.key: k for k, f in enumerate(futures)}
    out: list = [None] * len(items)
    try:
        with client.as_current():
            for future in as_completed(futures):
                k = index[future.key]
                out[k] = future.result()  # a unit's error is raised here
                bar.advance(size(items[k]))
    finally:
        try:
            client.cancel(futures)
        except Exception:  # the cluster is going away (interrupted): its units go with it
            pass
    return out


def _placed(items: list, size: Callable[[object], int], group: Callable[[object], Hashable] | None,
            workers: list[str]) -> dict[str | None, list[int]]:
    """Item indices per worker: whole groups, the heaviest first, each to the least loaded
    worker (longest processing time first); without groups, no placement (key None)."""
    if group is None or not workers:
        return {None: list(range(len(items)))}
    groups: dict[Hashable, list[int]] = {}
    for k, item in enumerate(items):
        groups.setdefault(group(item), []).append(k)
    load = dict.fromkeys(workers, 0)
    placed: dict[str | None, list[int]] = {w: [] for w in workers}
    for members in sorted(groups.values(), key=lambda m: -sum(size(items[k]) for k in m)):
        worker = min(workers, key=lambda w: load[w])
        placed[worker] += members
        load[worker] += sum(size(items[k]) for k in members)
    return {w: sorted(ks) for w, ks in placed.items() if ks}


def _run_unit(fn: Callable[..., T], item) -> T:
    """One unit on a worker: nested maps inside it run in the worker, serially."""
    global _inside
    _inside = True
    return fn(item)
