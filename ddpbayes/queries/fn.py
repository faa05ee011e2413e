"""`fn:NAME`: a function of the model file over the model's variable names (DESIGN §1.1), run as
the user's code (§4)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.model.usercode import is_interrupt, user_code
from ddpbayes.queries.base import Query
from ddpbayes.queries.general import NamedQuery, Variables


@dataclass(frozen=True)
class FunctionQuery(NamedQuery):
    """`fn:NAME`: NAME(x) from the model file, x a dict from variable name to its values — an (S,)
    array for a scalar tuple, (S, k) for a vector variable — returning an (S,) or (S, C) array
    (or a list of (S,) arrays, one per output).

    Parameters
    ----------
    function_name : str
        NAME, the function's name in the model file.
    function : callable or None, default None
        The function itself; None until `bind` finds it in the model file.
    variables : Variables or None, default None
        The model's variables, set by `bind`.
    given : float or None, default None
        The global sensitivity the user stated (``--sensitivity``), else None.
    name : str, default "fn"
        The kind.
    """

    function_name: str
    function: Callable | None = field(default=None, compare=False)
    variables: Variables | None = None
    given: float | None = None
    name: str = "fn"
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    @property
    def spec(self) -> str:
        """The text `parse_query` reads this query back from (`fn:` and the function's name)."""
        return f"fn:{self.function_name}"

    def _resolve(self, model) -> FunctionQuery:
        if self.function is not None:
            return self
        module = getattr(model, "source", None)
        if module is None:
            raise InputError(f"query '{self.spec}' reads a function from the model file, but this model was not "
                             f"loaded from one (in Python, pass FunctionQuery('{self.function_name}', function))")
        fn = getattr(module, self.function_name, None)
        if not callable(fn):
            defined = sorted(k for k, v in vars(module).items() if callable(v) and getattr(v, "__module__", None)
                             == module.__name__ and k != "build")
            raise InputError(f"the model file has no function '{self.function_name}' "
                             f"(it defines: {', '.join(defined) or 'none besides build'})")
        return replace(self, function=fn)

    def _outputs(self, x: np.ndarray) -> np.ndarray:
        if self.function is None:
            raise InputError(f"query '{self.spec}' has no function: bind it to a model loaded from a file")
        try:
            with user_code():  # its prints to stderr, an exit raised (DESIGN §4)
                # copies: a function that updates its input in place must not write into the engine's states
                raw = self.function({k: v.copy() for k, v in self.variables.arrays(x, flat=True).items()})
                out = np.stack([np.broadcast_to(np.asarray(r, dtype=float), (len(x),)) for r in raw], axis=1) \
                    if isinstance(raw, (list, tuple)) else np.asarray(raw, dtype=float)
        except InputError:
            raise
        except SystemExit as exc:
            raise InputError(f"query '{self.spec}' called exit({exc.code!r}): a query function must return "
                             "its values, not exit") from exc
        except BaseException as exc:  # the user's function: any error (GeneratorExit too) is bad input
            if is_interrupt(exc):
                raise
            raise InputError(f"query '{self.spec}' raised {type(exc).__name__}: {exc}") from exc
        if out.ndim <= 1 and out.size in (1, len(x)):
            return np.broadcast_to(out.reshape(-1, 1), (len(x), 1)).astype(float)
        if out.ndim == 2 and out.shape[0] == len(x):
            return out
        raise InputError(f"query '{self.spec}' returned shape {out.shape} for {len(x)} states: "
                         f"return ({len(x)},) or ({len(x)}, C)")



def parse_fn(kind: str, arg: str, spec: str) -> Query:
    """`fn:NAME`, NAME an identifier (the function is found when the query is bound)."""
    name = arg.strip()
    if not name.isidentifier():
        raise InputError(f"fn: needs the name of a function in the model file, got '{arg}'")
    return FunctionQuery(name)
