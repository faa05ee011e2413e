"""Independent units of work, run in this process or on Dask (DESIGN §8).

One way to run work in parallel: `map_units(fn, items, settings, label, unit)` returns
`[fn(item) for item in items]` in the items' order, run here (`--workers 1`: no Dask at all)
or on `dask.distributed` workers: an embedded `LocalCluster` sized to the machine (started on
the first map that can use it, stopped when ddpbayes exits), or an existing cluster
(`--scheduler tcp://HOST:PORT` or `DDPBAYES_SCHEDULER`). A unit's randomness is derived from
the run seed and the unit's identity, never from where or when it ran, so the same seed gives
the same numbers whatever the worker count. Models travel by reference (`model.reference.portable`): a worker
rebuilds a model file once and keeps it, with everything compiled on it, for later units.
"""

from ddpbayes.parallel.cluster import client_for, close_clusters, worker_count
from ddpbayes.parallel.units import map_units

__all__ = ["client_for", "close_clusters", "map_units", "worker_count"]
