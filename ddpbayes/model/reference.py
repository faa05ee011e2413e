"""Models by reference: a unit sent to a worker carries its model file's text and parameters, and
the worker rebuilds the model once and keeps it (with the MCMC steps compiled on it, and its runs)
for every later unit: compile once per worker, not once per task.

A model built in Python rather than loaded from a file has no reference; its units run in this
process (`portable` says so before anything is sent).
"""

from __future__ import annotations

import hashlib
import pickle
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

KEPT = 8  # models a worker keeps (least recently used dropped)

_models: OrderedDict[tuple, object] = OrderedDict()


@dataclass(frozen=True)
class ModelRef:
    """Where a model comes from: the model file's path and text, and the function that builds it
    from them (`loading.load_source(path, source, params, max_states)`, pickled by name). The text
    travels with the reference, so a worker builds the model the audit started with even when the
    file is edited while it runs (issue #25)."""

    path: str
    params: bytes  # the parameters, pickled in key order
    max_states: int | None
    digest: str  # sha256 of the text: two references to the same text are the same model
    source: bytes = field(compare=False, repr=False)
    build: Callable[[str, bytes, dict, int | None], object] = field(compare=False, repr=False)

    @classmethod
    def of(cls, path: str | Path, source: bytes, params: dict, max_states: int | None,
           build: Callable[[str, bytes, dict, int | None], object]) -> ModelRef:
        return cls(str(Path(path).resolve()), pickle.dumps(sorted(params.items())), max_states,
                   hashlib.sha256(source).hexdigest(), source, build)

    def load(self):
        """The model this process built from the reference (built now on first use)."""
        if self in _models:
            _models.move_to_end(self)
            return _models[self]
        model = self.build(self.path, self.source, dict(pickle.loads(self.params)), self.max_states)
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
