"""A mechanism given as a program (issue #28 item 2; DESIGN §5.1): the user's Python function
`mechanism(answers, rng) -> output`, answers the 1-d float array of the K query answers, rng a
numpy Generator, output a scalar, vector, integer, boolean vector or a tuple of these. With the
attribute `vectorized = True` it is called once with answers (S, K) and returns the S outputs
stacked, (S, ...) or a tuple of such arrays.

Nothing about its law is known: `black_box`. What the audit can do is `sample` it and certify a
lower bound on its leakage (`engines/program`); it has no kernel, no output space and no classic
epsilon we can compute. `from_spec("program:FILE:NAME")` loads FILE (a Python file, relative to the
working directory) and its function NAME; `program:NAME` reads NAME from the model file (its module
passed in). The function runs as the user's code (`model.usercode`): an error in it is one line of
bad input."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.mechanisms.base import Mechanism, source_entry
from ddpbayes.model.usercode import user_code


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class Program(Mechanism):
    """The user's function as a mechanism: sampled, never evaluated (`black_box`)."""

    kind = "program"
    black_box = True

    def __init__(self, function: Callable, name: str | None = None, file: str | None = None,
                 vectorized: bool | None = None, source: str | None = None, why: str | None = None):
        if not callable(function):
            raise InputError(f"program {name or function!r} is not a function")
        self.function = function
        self.name = name or getattr(function, "__name__", "mechanism")
        self.file = file
        self.vectorized = bool(getattr(function, "vectorized", False) if vectorized is None else vectorized)
        self.source = source  # the library object it runs (`mechanisms.interop`), if any
        self.why = why  # why that object is audited as a program, not as a law ddpbayes knows

    # ------------------------------------------------------------------ loading

    @classmethod
    def from_spec(cls, spec: str, module=None) -> Program:
        """`program:FILE:NAME` (FILE a Python file relative to the working directory) or
        `program:NAME` (a function of the model file, whose module is `module`)."""
        head, _, rest = spec.partition(":")
        if head != cls.kind or not rest:
            raise InputError(f"a program mechanism is written program:FILE:NAME or program:NAME, got '{spec}'")
        file, _, name = rest.rpartition(":")
        name = name.strip()
        if not name.isidentifier():
            raise InputError(f"'{spec}': '{name}' is not the name of a Python function")
        if file:
            module = _load_file(file)
        elif module is None:
            raise InputError(f"'{spec}' names a function of the model file, but no model file was loaded "
                             f"(write program:FILE:{name})")
        fn = getattr(module, name, None)
        where = f"'{file}'" if file else "the model file"
        if not callable(fn):
            defined = sorted(k for k, v in vars(module).items() if callable(v) and not k.startswith("_")
                             and getattr(v, "__module__", None) == module.__name__)
            raise InputError(f"{where} has no function '{name}' (it defines: {', '.join(defined) or 'none'})")
        return cls(fn, name, file or None)

    # ------------------------------------------------------------------ sampling

    def sample(self, answers: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One output per row of answers (S, K), flattened to (S, d) floats: a tuple's parts in
        order, booleans as 0/1."""
        answers = np.asarray(answers, dtype=float)
        if answers.ndim == 1:
            answers = answers[None, :]
        if answers.ndim != 2:
            raise InputError(f"program {self.name} takes answers (S, K), got shape {answers.shape}")
        s = len(answers)
        if self.vectorized:
            raw = self._call(answers.copy(), rng)
            out = self._stacked(raw, s)
        else:
            rows = [self._row(self._call(answers[i].copy(), rng)) for i in range(s)]
            sizes = {len(r) for r in rows}
            if len(sizes) > 1:
                raise InputError(f"program {self.name} returned outputs of different sizes ({sorted(sizes)}): "
                                 "every output must have the same shape")
            out = np.stack(rows) if rows else np.zeros((0, 0))
        if np.isnan(out).any():
            raise InputError(f"program {self.name} returned nan")
        return out

    def _call(self, answers: np.ndarray, rng: np.random.Generator):
        try:
            with user_code():
                return self.function(answers, rng)
        except InputError:
            raise
        except SystemExit as exc:
            raise InputError(f"program {self.name} called exit({exc.code!r}): a mechanism must return its "
                             "output") from exc
        except Exception as exc:  # the user's code: any error is bad input
            raise InputError(_one_line(f"program {self.name} raised {type(exc).__name__}: {exc}")) from exc

    def _numeric(self, value) -> np.ndarray:
        try:
            arr = np.asarray(value)
        except Exception as exc:  # ragged lists and the like
            raise InputError(_one_line(f"program {self.name} returned an output numpy cannot read: {exc}")) from exc
        if arr.dtype == bool:
            return arr.astype(float)
        if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
            raise InputError(f"program {self.name} returned a non-numeric output (dtype {arr.dtype}): return "
                             "numbers, booleans or a tuple of them")
        return arr.astype(float)

    def _row(self, raw) -> np.ndarray:
        parts = raw if isinstance(raw, tuple) else (raw,)
        if not parts:
            raise InputError(f"program {self.name} returned an empty tuple")
        return np.concatenate([self._numeric(p).reshape(-1) for p in parts])

    def _stacked(self, raw, s: int) -> np.ndarray:
        parts = raw if isinstance(raw, tuple) else (raw,)
        if not parts:
            raise InputError(f"program {self.name} returned an empty tuple")
        cols = []
        for p in parts:
            arr = self._numeric(p)
            if arr.ndim == 0 or arr.shape[0] != s:
                raise InputError(f"vectorized program {self.name} returned shape {arr.shape} for {s} answer rows: "
                                 f"return ({s}, ...) arrays (or a tuple of them)")
            cols.append(arr.reshape(s, -1))
        return np.concatenate(cols, axis=1)

    # ------------------------------------------------------------------ what it is not

    def log_kernel(self, q: np.ndarray):
        raise InputError(f"program {self.name} is a black box: it has no kernel (audit it by sampling)")

    def grid_size(self, levels: int) -> int:
        raise InputError(f"program {self.name} is a black box: it has no output grid")

    def dp_leakage(self, sensitivity: float) -> float:
        raise InputError("a program's classic epsilon is not computed; audit it under idp/pdp/ddp for a "
                         "certified lower bound")

    def tuple_dp_leakage(self, query, k, domains):
        return self.dp_leakage(0.0), None

    def describe(self) -> dict:
        return {"kind": self.kind, "file": self.file, "name": self.name, "vectorized": self.vectorized,
                **source_entry(self), **({"why": self.why} if self.why else {})}

    def notes(self) -> list[str]:
        return [self.why] if self.why else []


def _load_file(file: str):
    path = Path(file)
    if path.suffix != ".py":
        raise InputError(f"program file '{file}' must be a Python file (.py)")
    if not path.is_file():
        raise InputError(f"program file '{file}' not found (relative to {Path.cwd()})")
    name = f"ddpbayes_program_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        with user_code():
            sys.modules[name] = module  # dataclasses and pickling look the module up
            spec.loader.exec_module(module)
    except SystemExit as exc:
        sys.modules.pop(name, None)
        raise InputError(f"program file '{file}' called exit({exc.code!r}) while loading") from exc
    except Exception as exc:  # the user's file: any error is bad input
        sys.modules.pop(name, None)
        raise InputError(_one_line(f"program file '{file}' raised {type(exc).__name__} while loading: {exc}")) \
            from exc
    return module
