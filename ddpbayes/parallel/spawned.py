"""The first thing a Dask worker process of ddpbayes's embedded cluster runs (DESIGN §8).

`cluster._local` hands this file to `multiprocessing` as the parent's main script while the
workers start, so each spawned worker runs it (as `__mp_main__`) before anything else: in place
of the user's script, which the workers must not run again, and to leave Ctrl-C to the parent.
A terminal sends SIGINT to its whole foreground process group, workers included; the parent
stops its workers itself (`cluster.close_clusters`), so a worker takes no notice of SIGINT and
prints no KeyboardInterrupt traceback. A Python handler, not SIG_IGN: the programs a worker
runs (a C compiler) get the default action back on exec.
"""

import signal


def _ignore(signum: int, frame: object) -> None:
    """SIGINT in a worker: the parent decides."""


signal.signal(signal.SIGINT, _ignore)
