"""Models by reference: a unit sent to a worker names its model file and parameters, and the
worker rebuilds the model once and keeps it (with the MCMC steps compiled on it, and its runs)
for every later unit: compile once per worker, not once per task.

A model built in Python rather than loaded from a file has no reference; its units run in this
process (`portable` says so before anything is sent).
"""

from __future__ import annotations

import pickle
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

KEPT = 8  # models a worker keeps (least recently used dropped)

_models: OrderedDict[tuple, object] = OrderedDict()


@dataclass(frozen=True)
class ModelRef:
    """Where a model comes from: `load_model(path, params, max_states)`."""

    path: str
    params: bytes  # the parameters, pickled in key order
    max_states: int | None
    stamp: tuple[int, int]  # the file's modification time and size: an edited file is rebuilt

    @classmethod
    def of(cls, path: str | Path, params: dict, max_states: int | None) -> ModelRef:
        path = Path(path).resolve()
        stat = path.stat()
        return cls(str(path), pickle.dumps(sorted(params.items())), max_states, (stat.st_mtime_ns, stat.st_size))

    def load(self):
        """The model this process built from the reference (built now on first use)."""
        if self in _models:
            _models.move_to_end(self)
            return _models[self]
        from ddpbayes.model.loading import load_model

        model = load_model(self.path, dict(pickle.loads(self.params)), self.max_states)
        _models[self] = model
        while len(_models) > KEPT:
            _models.popitem(last=False)
        return model


def rebuild(ref: ModelRef):
    """Unpickling a model on a worker (`DependenceModel.__reduce__`)."""
    return ref.load()


def portable(items: list) -> str | None:
    """None when every item can be sent to a worker; else why not (one line)."""
    import cloudpickle

    try:
        for item in items[:1]:
            cloudpickle.dumps(item)
    except Exception as exc:  # whatever the pickler refuses: the units run here
        return f"{type(exc).__name__}: {exc}"
    return None
