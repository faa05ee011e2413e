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

from ddpbayes.encoding import number
from ddpbayes.shipped import MODELS, ROOT

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

    def to_dict(self) -> dict:
        """Where the model comes from, as a result's JSON records it (docs/reference/json.md): the
        file (`models/NAME.py` for a shipped model, else its absolute path), the parameters its
        `build` was given, and the sha256 of the file's text.

        Returns
        -------
        dict
            ``file``, ``params`` and ``sha256``.
        """
        return {"file": _shown(self.path), "params": {k: _plain(v) for k, v in pickle.loads(self.params)},
                "sha256": self.digest}

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


def provenance(model) -> dict | None:
    """`model`'s file, parameters and text digest (`ModelRef.to_dict`); None for a model built in Python."""
    return None if model.origin is None else model.origin.to_dict()


def _shown(path: str) -> str:
    """A shipped model as the documentation names it (`models/household.py`), any other file as its path."""
    shipped = (ROOT / MODELS[0]).resolve()
    where = Path(path)
    return f"{MODELS[0]}/{where.name}" if where.parent == shipped else path


def _plain(value: object) -> object:
    """A parameter as JSON holds it: numbers through `encoding.number`, containers item by item,
    an array as its list, anything else as its repr (`build` may take any Python object)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist") and hasattr(value, "shape"):  # a numpy array or scalar
        return _plain(value.tolist())
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, (int, float)):
        return number(value)
    return repr(value)


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
