"""A mechanism given as a program (issue #28 item 2; DESIGN §5.1): the user's Python function
`mechanism(answers, rng) -> output`, answers the 1-d float array of the K query answers, rng a
numpy Generator, output a scalar, vector, integer, boolean vector or a tuple of these. With the
attribute `vectorized = True` it is called once with answers (S, K) and returns the S outputs
stacked, (S, ...) or a tuple of such arrays. With `aligned = True` it declares its randomness drawn
by shape, not by value: row i of a call reads the same positions of rng's stream whatever the
answers, so that two inputs run from equal generators give outputs coupled row by row (common random
numbers: classic dp's check may count its event on such pairs, `engines/program/paired`; runs that
consume different amounts of the stream are refused).

Nothing about its law is known: `black_box`. What the audit can do is `sample` it and certify a
lower bound on its leakage (`engines/program`; classic dp: `engines/program/classic`); it has no
kernel, no output space and no classic epsilon in closed form. `from_spec("program:FILE:NAME")`
loads FILE (a Python file, relative to the working directory) and its function NAME; `program:NAME`
reads NAME from the model file (its module passed in). The function runs as the user's code
(`model.usercode`): an error in it is one line of bad input."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.mechanisms.base import Mechanism, source_entry
from ddpbayes.limits import check_memory
from ddpbayes.model.usercode import Watch, is_interrupt, leave_if_forked, user_code, watched


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class Program(Mechanism):
    """The user's function as a mechanism: sampled, never evaluated (`black_box`)."""

    kind = "program"
    black_box = True

    def __init__(self, function: Callable, name: str | None = None, file: str | None = None,
                 vectorized: bool | None = None, source: str | None = None, why: str | None = None,
                 aligned: bool | None = None):
        if not callable(function):
            raise InputError(f"program {name or function!r} is not a function")
        self.function = function
        self.name = name or getattr(function, "__name__", "mechanism")
        self.file = file
        self.vectorized = bool(getattr(function, "vectorized", False) if vectorized is None else vectorized)
        self.aligned = bool(getattr(function, "aligned", False) if aligned is None else aligned)
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
        order, booleans as 0/1. The calls run as the user's code (`model.usercode`), one call
        running past NOTICE_AFTER seconds says so on stderr."""
        answers = np.asarray(answers, dtype=float)
        if answers.ndim == 1:
            answers = answers[None, :]
        if answers.ndim != 2:
            raise InputError(f"program {self.name} takes answers (S, K), got shape {answers.shape}")
        s = len(answers)
        with user_code(), watched(f"program {self.name} (one call)") as watch:
            if self.vectorized:
                out = self._stacked(self._call(answers.copy(), rng, watch), s)
            else:
                out = self._rows(answers, rng, watch)
        return out

    def _rows(self, answers: np.ndarray, rng: np.random.Generator, watch: Watch) -> np.ndarray:
        """A call per row; the output's size, known after the first call, bounds the memory of the rest."""
        s = len(answers)
        if s == 0:
            return np.zeros((0, 0))
        first = self._row(self._call(answers[0].copy(), rng, watch))
        check_memory(8 * s * first.size, f"{s:,} outputs of program {self.name}", f"{first.size:,} numbers each",
                     advice="return fewer numbers per run")
        out = np.empty((s, first.size))
        out[0] = first
        for i in range(1, s):
            row = self._row(self._call(answers[i].copy(), rng, watch))
            if row.size != first.size:
                raise InputError(f"program {self.name} returned outputs of different sizes ({first.size} and "
                                 f"{row.size} numbers): every output must have the same shape")
            out[i] = row
        return out

    def _call(self, answers: np.ndarray, rng: np.random.Generator, watch: Watch):
        """One call of the function (inside `user_code`): whatever it raises but Ctrl-C is bad input."""
        pid = os.getpid()
        watch.restart()
        try:
            return self.function(answers, rng)
        except InputError:
            raise
        except SystemExit as exc:
            raise InputError(f"program {self.name} called exit({exc.code!r}): a mechanism must return its "
                             "output") from exc
        except BaseException as exc:  # the user's code: any error (GeneratorExit, its own classes) is bad input
            if is_interrupt(exc):
                raise
            raise InputError(_one_line(f"program {self.name} raised {type(exc).__name__}: {exc}")) from exc
        finally:
            leave_if_forked(pid)  # a process the program forked stops here: only this one audits

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
        if np.issubdtype(arr.dtype, np.floating) and np.isnan(arr).any():  # integers and booleans never are
            raise InputError(f"program {self.name} returned nan")
        return arr.astype(float)

    def _row(self, raw) -> np.ndarray:
        parts = raw if isinstance(raw, tuple) else (raw,)
        return self._nonempty(np.concatenate([np.zeros(0), *(self._numeric(p).reshape(-1) for p in parts)]))

    def _stacked(self, raw, s: int) -> np.ndarray:
        parts = raw if isinstance(raw, tuple) else (raw,)
        cols = [np.zeros((s, 0))]
        for p in parts:
            arr = self._numeric(p)
            if arr.ndim == 0 or arr.shape[0] != s:
                raise InputError(f"vectorized program {self.name} returned shape {arr.shape} for {s} answer rows: "
                                 f"return ({s}, ...) arrays (or a tuple of them)")
            cols.append(arr.reshape(s, -1))
        # one part: already a copy of the output (`_numeric`), not copied again, in its own layout (a
        # program working query-major returns a transposed view: its columns stay contiguous)
        out = cols[1] if len(cols) == 2 else np.concatenate(cols, axis=1)
        return self._nonempty(out)

    def _nonempty(self, out: np.ndarray) -> np.ndarray:
        """One rule for every form of output: at least one number per run (an empty array, tuple or
        tuple of empty arrays has nothing an event could be about)."""
        if out.shape[-1] == 0:
            raise InputError(f"program {self.name} returned an empty output (no numbers): return at least one "
                             "number per run")
        return out

    # ------------------------------------------------------------------ what it is not

    def log_kernel(self, q: np.ndarray):
        raise InputError(f"program {self.name} is a black box: it has no kernel (audit it by sampling)")

    def grid_size(self, levels: int) -> int:
        raise InputError(f"program {self.name} is a black box: it has no output grid")

    def dp_leakage(self, sensitivity: float) -> float:
        raise InputError("a program's classic epsilon is not computed in closed form: --notion dp certifies a "
                         "lower bound on it by running the program (so do idp/pdp/ddp under dependence)")

    def tuple_dp_leakage(self, query, k, domains):
        return self.dp_leakage(0.0), None

    def describe(self) -> dict:
        return {"kind": self.kind, "file": self.file, "name": self.name, "vectorized": self.vectorized,
                "aligned": self.aligned,
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
        with watched(f"the import of program file '{file}'"), user_code():
            sys.modules[name] = module  # dataclasses and pickling look the module up
            spec.loader.exec_module(module)
    except SystemExit as exc:
        sys.modules.pop(name, None)
        raise InputError(f"program file '{file}' called exit({exc.code!r}) while loading") from exc
    except BaseException as exc:  # the user's file: any error (GeneratorExit, its own classes) is bad input
        sys.modules.pop(name, None)
        if is_interrupt(exc):
            raise
        raise InputError(_one_line(f"program file '{file}' raised {type(exc).__name__} while loading: {exc}")) \
            from exc
    return module
