"""Where units run: the worker count and the Dask client for it (embedded or existing; DESIGN §8).

`--workers N` (`RunSettings.workers`; 0, the default: `DDPBAYES_WORKERS` if set, else every
core) sizes the embedded `LocalCluster`: one single-threaded worker process per core, started
on first use and closed at exit; N is refused above `MAX_PER_CORE` workers per core or above
what the memory holds at `WORKER_MEMORY` each (`check_where`, before anything starts). The
cluster keeps its scratch space (Dask's `dask-scratch-space`) in a temporary folder that
`close_clusters` removes. `--scheduler ADDRESS` (`RunSettings.scheduler`, else
`DDPBAYES_SCHEDULER`) connects to a running cluster instead; a scheduler that cannot be
reached within `CONNECT_TIMEOUT` seconds, or that has no worker within `WORKER_WAIT` seconds,
is an InputError (one line, exit 2).
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ddpbayes.errors import InputError
from ddpbayes.limits import available_memory

CONNECT_TIMEOUT = 3  # seconds to reach an existing scheduler
WORKER_WAIT = 30  # seconds an existing scheduler has to show a worker
MAX_PER_CORE = 4  # embedded workers per core at most (MCMC units are CPU-bound: more only queue)
WORKER_MEMORY = 2**30  # bytes per embedded worker: a PyMC worker holding two small models measured 0.42 GB
SCHEDULER_ENV = "DDPBAYES_SCHEDULER"
WORKERS_ENV = "DDPBAYES_WORKERS"
SPAWNED = str(Path(__file__).with_name("spawned.py"))  # what a worker process runs first
SCRATCH = "ddpbayes-dask-"  # scratch folders: ddpbayes-dask-<pid>-<random> in the system's temporary folder
_WORKER_LOGS = "DASK_LOGGING__DISTRIBUTED"  # Dask config from the environment, read by a worker as it imports

_clients: dict[tuple[int, str | None], object] = {}
_started: list = []  # embedded clusters ddpbayes started (or began to start)
_scratch: list[str] = []  # their scratch folders, removed by `close_clusters`


def scheduler_address(scheduler: str | None) -> str | None:
    """The existing cluster to use: the flag's address, else the environment's, else None."""
    return scheduler or os.environ.get(SCHEDULER_ENV) or None


def workers_chosen(scheduler: str | None) -> bool:
    """Whether the environment chose where units run (a scheduler, or DDPBAYES_WORKERS)."""
    return bool(scheduler_address(scheduler) or os.environ.get(WORKERS_ENV, "").strip())


def worker_count(workers: int, scheduler: str | None = None) -> int:
    """How many processes run units: the flag, else DDPBAYES_WORKERS, else the machine's cores
    (an existing cluster: its workers, asked when first needed).

    Parameters
    ----------
    workers : int
        ``--workers``; 0: not given.
    scheduler : str or None, default None
        ``--scheduler``; None: DDPBAYES_SCHEDULER, if set.

    Returns
    -------
    int
        The number of worker processes, at least 1.

    Raises
    ------
    InputError
        If DDPBAYES_WORKERS is not a positive integer, the machine cannot run that many workers, or
        the scheduler cannot be reached.
    """
    if scheduler_address(scheduler):
        return max(1, len(client_for(workers, scheduler).scheduler_info()["workers"]))
    if workers:
        return _bounded(workers, "--workers")
    env = os.environ.get(WORKERS_ENV, "").strip()
    if env:
        try:
            count = int(env)
        except ValueError:
            raise InputError(f"{WORKERS_ENV} must be a positive integer, got '{env}'") from None
        if count < 1:
            raise InputError(f"{WORKERS_ENV} must be a positive integer, got '{env}'")
        return _bounded(count, WORKERS_ENV)
    return cores()


def check_where(settings) -> None:
    """Refuse now, before a model is built or a process started, what `client_for` would refuse
    later: too many workers for this machine, a scheduler that is not there or has no worker."""
    if scheduler_address(settings.scheduler):
        client_for(settings.workers, settings.scheduler)
    else:
        worker_count(settings.workers)


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _bounded(count: int, flag: str) -> int:
    """`count` embedded workers, unless the machine cannot run them (issue #25: --workers 1000
    started processes until the task limit): at most MAX_PER_CORE per core and WORKER_MEMORY each."""
    if count < 2:
        return count
    free = available_memory()
    by_cores, by_memory = MAX_PER_CORE * cores(), free // WORKER_MEMORY
    if count > min(by_cores, by_memory):
        why = (f"{MAX_PER_CORE} per core on {cores()} cores" if by_cores <= by_memory else
               f"{WORKER_MEMORY / 2**30:g} GiB each in {free / 2**30:.1f} GiB of available memory")
        raise InputError(f"{flag} {count}: this machine runs at most {max(1, min(by_cores, by_memory))} Dask workers "
                         f"({why}); lower {flag}, or run a cluster and pass --scheduler")
    return count


def running(settings) -> bool:
    """Whether the client for these settings is already made (its start is paid)."""
    address = scheduler_address(settings.scheduler)
    return (0 if address else worker_count(settings.workers), address) in _clients


def client_for(workers: int, scheduler: str | None = None):
    """The Dask client for these settings, made once per process: connected to the existing
    scheduler, or to an embedded LocalCluster of `worker_count` single-threaded processes.

    Parameters
    ----------
    workers : int
        ``--workers``; 0: not given.
    scheduler : str or None, default None
        ``--scheduler``; None: DDPBAYES_SCHEDULER, if set.

    Returns
    -------
    distributed.Client
        The client, kept for the process's later calls.

    Raises
    ------
    InputError
        If the machine cannot run that many workers, or no scheduler with workers answers at the address.
    """
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

    client = Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)
    try:
        client.wait_for_workers(1, timeout=WORKER_WAIT)
    except Exception:  # dask's TimeoutError: no worker joined
        client.close()
        raise InputError(f"the Dask scheduler at {address} has no workers: none joined within {WORKER_WAIT} s "
                         f"(WORKER_WAIT); start some (dask worker {address}), or drop --scheduler / "
                         f"{SCHEDULER_ENV}") from None
    return client


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
    """A client of a new LocalCluster of `count` single-threaded worker processes, its scratch
    space in a temporary folder of its own (not `dask-scratch-space` in the user's folder).
    Interrupted while it starts, the cluster is still known (`_started`), so that
    `close_clusters` stops it."""
    import dask
    from distributed import Client, LocalCluster
    from distributed.deploy.spec import SpecCluster

    _quiet_logs()
    # a worker process logs at INFO from its import of distributed until the nanny's silence_logs
    # reaches it: a run stopped while its cluster starts printed a worker's "closing" line
    os.environ.setdefault(_WORKER_LOGS, "critical")
    atexit.unregister(close_clusters)  # run before Dask's own exit handler (registered on import, later)
    atexit.register(close_clusters)
    _sweep()
    _scratch.append(scratch := tempfile.mkdtemp(prefix=f"{SCRATCH}{os.getpid()}-"))
    before = set(SpecCluster._instances)
    try:
        with _main_not_rerun(), dask.config.set({"temporary-directory": scratch}):
            cluster = LocalCluster(n_workers=count, threads_per_worker=1, processes=True, dashboard_address=":0",
                                   silence_logs=logging.CRITICAL, local_directory=scratch,
                                   scheduler_kwargs={"local_directory": scratch})
    finally:
        _started.extend(c for c in SpecCluster._instances if c not in before)
    return Client(cluster, set_as_default=False)


def _sweep() -> None:
    """Remove the scratch folders of runs that were killed (SIGKILL: no cleanup ran), told by
    their process id: a folder whose process still runs is kept."""
    for folder in Path(tempfile.gettempdir()).glob(f"{SCRATCH}*-*"):
        pid = folder.name[len(SCRATCH):].split("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def _quiet_logs() -> None:
    """Dask's own logging is noise on ddpbayes's stderr (a stopped worker, a closed comm): off; asyncio's
    too, which reports Dask's tasks cut short (a SIGTERM while the cluster starts: "Task exception was
    never retrieved ... Nanny failed to start", 21 lines before `terminated`, tests/test_signals.py)."""
    for name in ("distributed", "tornado", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


@contextmanager
def _main_not_rerun() -> Iterator[None]:
    """Spawned worker processes run the parent's main script first: a user's script that calls
    `audit` without an `if __name__ == "__main__"` guard (or code piped to `python -`) would run
    again in every worker. While the workers start, the main script they see is `spawned.py`
    (which also leaves Ctrl-C to the parent); the workers need nothing from the user's (units
    are pickled by value or import ddpbayes)."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if k in main.__dict__}
    main.__spec__, main.__file__ = None, SPAWNED
    try:
        yield
    finally:
        for k in ("__file__", "__spec__"):
            if k in saved:
                setattr(main, k, saved[k])
            else:
                delattr(main, k)


def close_clusters() -> None:
    """Close every client, stop the embedded clusters ddpbayes started (their worker processes
    killed first: a unit is rerun, never resumed, so nothing is lost, and a busy worker would
    hold the close for seconds) and remove their scratch folders; an existing cluster keeps
    running. Quick and quiet, also after Ctrl-C or SIGTERM (issue #25)."""
    _quiet_logs()
    for cluster in _started:
        for nanny in list(getattr(cluster, "workers", {}).values()):
            _stop_worker(nanny)
    while _clients:
        _, client = _clients.popitem()
        try:
            client.close(timeout=CONNECT_TIMEOUT)
        except Exception:  # closing at exit: a cluster already gone is not an error
            pass
    while _started:
        cluster = _started.pop()
        try:
            cluster.close(timeout=CONNECT_TIMEOUT)
        except Exception:  # interrupted while it started: half made, Dask's close may fail
            pass
        cluster.shutdown_on_close = False  # Dask's own exit handler leaves it alone
    while _scratch:
        shutil.rmtree(_scratch.pop(), ignore_errors=True)


def _stop_worker(nanny) -> None:
    """Kill a nanny's worker process, the nanny told first not to start another."""
    try:
        nanny.close_gracefully()
        if nanny.pid:
            os.kill(nanny.pid, signal.SIGKILL)
    except (AttributeError, ProcessLookupError):  # not started yet, or already gone
        pass


atexit.register(close_clusters)
