"""Where units run: the worker count and the Dask client for it (embedded or existing).

`--workers N` (`RunSettings.workers`; 0, the default: `DDPBAYES_WORKERS` if set, else every
core) sizes the embedded `LocalCluster`: one single-threaded worker process per core, started
on first use and closed at exit. `--scheduler ADDRESS` (`RunSettings.scheduler`, else
`DDPBAYES_SCHEDULER`) connects to a running cluster instead; a scheduler that cannot be
reached within `CONNECT_TIMEOUT` seconds is an InputError (one line, exit 2).
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from ddpbayes.errors import InputError

CONNECT_TIMEOUT = 3  # seconds to reach an existing scheduler
SCHEDULER_ENV = "DDPBAYES_SCHEDULER"
WORKERS_ENV = "DDPBAYES_WORKERS"

_clients: dict[tuple[int, str | None], object] = {}


def scheduler_address(scheduler: str | None) -> str | None:
    """The existing cluster to use: the flag's address, else the environment's, else None."""
    return scheduler or os.environ.get(SCHEDULER_ENV) or None


def workers_chosen(scheduler: str | None) -> bool:
    """Whether the environment chose where units run (a scheduler, or DDPBAYES_WORKERS)."""
    return bool(scheduler_address(scheduler) or os.environ.get(WORKERS_ENV, "").strip())


def worker_count(workers: int, scheduler: str | None = None) -> int:
    """How many processes run units: the flag, else DDPBAYES_WORKERS, else the machine's cores
    (an existing cluster: its workers, asked when first needed)."""
    if scheduler_address(scheduler):
        return max(1, len(client_for(workers, scheduler).scheduler_info()["workers"]))
    if workers:
        return workers
    env = os.environ.get(WORKERS_ENV, "").strip()
    if env:
        try:
            count = int(env)
        except ValueError:
            raise InputError(f"{WORKERS_ENV} must be a positive integer, got '{env}'") from None
        if count < 1:
            raise InputError(f"{WORKERS_ENV} must be a positive integer, got '{env}'")
        return count
    return os.cpu_count() or 1


def running(settings) -> bool:
    """Whether the client for these settings is already made (its start is paid)."""
    address = scheduler_address(settings.scheduler)
    return (0 if address else worker_count(settings.workers), address) in _clients


def client_for(workers: int, scheduler: str | None = None):
    """The Dask client for these settings, made once per process: connected to the existing
    scheduler, or to an embedded LocalCluster of `worker_count` single-threaded processes."""
    address = scheduler_address(scheduler)
    count = 0 if address else worker_count(workers)
    key = (count, address)
    if key not in _clients:
        _clients[key] = _connect(address) if address else _local(count)
    return _clients[key]


def _connect(address: str):
    """A client of the scheduler at `address`: the port must answer within CONNECT_TIMEOUT
    seconds, then the Dask handshake too (anything else there is not a scheduler)."""
    _reachable(address)
    try:
        asyncio.run(asyncio.wait_for(_identity(address), CONNECT_TIMEOUT))
    except Exception as exc:  # timed out, or not a Dask scheduler: one line
        raise InputError(f"no Dask scheduler answers at {address} within {CONNECT_TIMEOUT} s "
                         f"({type(exc).__name__}); start it, or drop --scheduler / {SCHEDULER_ENV}") from None
    from distributed import Client

    return Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)


async def _identity(address: str) -> None:
    """Dask's handshake and identity call, to tell a scheduler from anything else on the port."""
    from distributed.comm import connect

    comm = await connect(address, timeout=CONNECT_TIMEOUT)
    try:
        await comm.write({"op": "identity", "reply": True})
        reply = await comm.read()
        if not isinstance(reply, dict) or reply.get("type") != "Scheduler":
            raise ConnectionError("not a Dask scheduler")
    finally:
        await comm.close()


def _reachable(address: str) -> None:
    """InputError unless a TCP connection to a tcp:// address opens within CONNECT_TIMEOUT."""
    scheme, _, rest = address.partition("://")
    if scheme not in ("tcp", "tls"):
        return
    host, _, port = rest.rstrip("/").rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT).close()
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot reach the Dask scheduler at {address} within {CONNECT_TIMEOUT} s "
                         f"({exc.__class__.__name__}: {exc}); start it, or drop --scheduler / {SCHEDULER_ENV}") from None


def _local(count: int):
    from distributed import Client, LocalCluster

    for name in ("distributed", "tornado"):
        logging.getLogger(name).setLevel(logging.ERROR)
    with _main_not_rerun():
        cluster = LocalCluster(n_workers=count, threads_per_worker=1, processes=True, dashboard_address=":0",
                               silence_logs=logging.ERROR)
    return Client(cluster, set_as_default=False)


@contextmanager
def _main_not_rerun() -> Iterator[None]:
    """Spawned worker processes re-run the parent's main script unless it is hidden from them:
    a user's script that calls `audit` without an `if __name__ == "__main__"` guard (or code
    piped to `python -`) would run again in every worker. The workers need nothing from it
    (units are pickled by value or import ddpbayes), so it is hidden while they start."""
    main = sys.modules.get("__main__")
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if main is not None and k in main.__dict__}
    for k in saved:
        setattr(main, k, None)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(main, k, v)


def close_clusters() -> None:
    """Close every client (and the embedded clusters ddpbayes started); an existing cluster
    keeps running."""
    while _clients:
        _, client = _clients.popitem()
        cluster = client.cluster
        try:
            client.close()
            if cluster is not None:
                cluster.close()
        except Exception:  # closing at exit: a cluster already gone is not an error
            pass


atexit.register(close_clusters)
