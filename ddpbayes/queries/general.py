"""Queries beyond linear (issue #15; DESIGN §1.1): `expr:EXPR` and `fn:NAME`.

Both name the tuples by the model's variable names — a scalar tuple `d_i` is one column, a
vector variable `x` whose elements are the tuples is k columns — so a parsed query is bound to
a model (`bind`) before it is evaluated. Several outputs: `;` separates expressions (each gives
one output, or k for a vector), and a function may return an (S, C) array or a list of arrays.

Global sensitivity (seed 000 §III; Query.sensitivity): sup over x_{-k}, t, t' of
||q(t, x_{-k}) - q(t', x_{-k})||_1, exact when every domain is finite (by enumerating their
product); on a continuous domain it is not computed: the user states it (`--sensitivity S`,
recorded as given), and whatever needs it fails with one line until they do.

This module holds what both kinds share (`NamedQuery`, `Variables`, `exact_sensitivities`,
`with_sensitivity`); `expr` and `fn` hold each kind and its parser.
"""


from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.limits import check_positive_finite, check_states
from ddpbayes.model.domains import Domain, Finite
from ddpbayes.queries.base import Query


@dataclass(frozen=True)
class Variables:
    """The model's variables in tuple order: each name and the tuple columns it holds."""

    names: tuple[str, ...]
    columns: tuple[tuple[int, ...], ...]
    vector: tuple[bool, ...]
    labels: tuple[str, ...]  # one per tuple, as the model names them (`x[2]`)

    @classmethod
    def of(cls, model) -> Variables:
        groups: dict[str, list[int]] = {}
        vector: dict[str, bool] = {}
        for k, slot in enumerate(model.slots):
            groups.setdefault(slot.rv.name, []).append(k)
            vector[slot.rv.name] = slot.index is not None
        return cls(tuple(groups), tuple(tuple(c) for c in groups.values()), tuple(vector.values()), tuple(model.names))

    @property
    def n(self) -> int:
        return len(self.labels)

    def arrays(self, x: np.ndarray, flat: bool) -> dict[str, np.ndarray]:
        """Name -> its columns of `x`: (S, k) for a vector, (S,) for a scalar if `flat` else (S, 1)."""
        return {name: x[:, cols[0]] if flat and not vec else x[:, list(cols)]
                for name, cols, vec in zip(self.names, self.columns, self.vector)}



class NamedQuery(Query):
    """Shared by `ExpressionQuery` and `FunctionQuery`: binding, checked values, sensitivity."""

    variables: Variables | None
    _memo: dict

    def _outputs(self, x: np.ndarray) -> np.ndarray:
        """The raw outputs for states `x` (S, n), as an (S, C) array."""
        raise NotImplementedError

    def _resolve(self, model) -> NamedQuery:
        return self

    def bind(self, model) -> Query:
        return replace(self, variables=Variables.of(model))._resolve(model)

    def with_sensitivity(self, value: float) -> Query:
        """This query with its global sensitivity stated by the user (`--sensitivity`)."""
        return replace(self, given=float(check_positive_finite(value, "--sensitivity")))

    def values(self, x: np.ndarray) -> np.ndarray:
        if self.variables is None:
            raise InputError(f"query '{self.spec}' names the model's variables: bind it to the model first "
                             "(query.bind(model); audit and calibrate do this)")
        x = np.asarray(x, dtype=float)
        if x.ndim != 2 or x.shape[1] != self.variables.n:
            raise InputError(f"query '{self.spec}' expects states of {self.variables.n} tuples, got shape {x.shape}")
        out = self._outputs(x)
        bad = ~np.isfinite(out)
        if bad.any():
            s, c = map(int, np.argwhere(bad)[0])
            state = ", ".join(f"{name}={v:g}" for name, v in zip(self.variables.labels, x[s]))
            raise InputError(f"query '{self.spec}' gives {out[s, c]} (output {c}) at {state}: it must be finite")
        return out

    def check(self, domains: Sequence[Domain]) -> None:
        if self.variables is None:
            return
        if len(domains) != self.variables.n:
            raise InputError(f"query '{self.spec}' was bound to {self.variables.n} tuples but the model has {len(domains)}")
        if self.given is not None and all(isinstance(d, Finite) for d in domains):
            raise InputError(f"every domain is finite, so the sensitivity of '{self.spec}' is computed exactly: "
                             "drop --sensitivity")
        probe = np.array([[d.lo if np.isfinite(d.lo) else (d.hi if np.isfinite(d.hi) else 0.0) for d in domains]])
        try:
            self.values(probe)
        except InputError as exc:
            if "must be finite" not in str(exc):
                raise

    def sensitivity(self, k: int, domains: Sequence[Domain]) -> float:
        """Exact on finite domains, else the user's value, else a sound upper bound (`_bounds`)."""
        if self.given is not None:
            return self.given
        if all(isinstance(d, Finite) for d in domains):
            return self._exact(domains)[k][0]
        upper = self._bounds(domains)[1][k]
        if not np.isfinite(upper):
            raise InputError(f"the sensitivity of '{self.spec}' to {self._label(k)} has no finite bound over the "
                             "domains (interval arithmetic): give --sensitivity S (an audit may instead set the "
                             "noise by --scale)")
        return float(upper)

    def sensitivity_range(self, k: int, domains: Sequence[Domain]) -> tuple[float, float] | None:
        """(lower, upper) when tuple k's sensitivity is only bounded, else None (exact or given)."""
        if self.given is not None or all(isinstance(d, Finite) for d in domains):
            return None
        upper = self.sensitivity(k, domains)
        return float(self._bounds(domains)[0][k]), upper

    def sensitivity_pair(self, k: int, domains: Sequence[Domain]) -> tuple[float, float] | None:
        """Values (t, t') of tuple k attaining its exact sensitivity (dp's witness); None otherwise."""
        if self.given is not None or not all(isinstance(d, Finite) for d in domains):
            return None
        return self._exact(domains)[k][1]

    def sensitivity_notes(self, domains: Sequence[Domain]) -> list[str]:
        """How the sensitivity was obtained, once it was (for the audit's notes)."""
        if self.given is not None:
            return [f"the sensitivity {self.given:g} of '{self.spec}' is the user's (--sensitivity)"]
        entry = self._memo.get(("bounds", tuple(domains)))
        if entry is None:
            return []
        lower, upper, m = entry
        span = ", ".join(f"{self._label(k)} [{lo:.6g}, {hi:.6g}]" for k, (lo, hi) in enumerate(zip(lower, upper)))
        return [(f"the sensitivity of '{self.spec}' is bounded, not computed: {span} (lower: exact over a grid of "
                 f"points; upper: interval arithmetic over {m} cells per bounded domain); give --sensitivity to state it")]

    def _label(self, k: int) -> str:
        return self.variables.labels[k] if self.variables else f"tuple {k}"

    def _bounds(self, domains: Sequence[Domain]) -> tuple[np.ndarray, np.ndarray, int]:
        """(lower, upper, cells per bounded domain) on every tuple's sensitivity; here: none."""
        cont = next(i for i, d in enumerate(domains) if not isinstance(d, Finite))
        raise InputError(f"the sensitivity of '{self.spec}' is computed only over finite domains ({self._label(cont)} "
                         f"has {domains[cont]}): give --sensitivity S (an audit may instead set the noise by --scale)")

    def _exact(self, domains: Sequence[Domain]) -> list[tuple[float, tuple[float, float]]]:
        key = tuple(domains)
        if key not in self._memo:
            self._memo[key] = exact_sensitivities(self.values, key)
        return self._memo[key]



def exact_sensitivities(values: Callable[[np.ndarray], np.ndarray],
                        domains: Sequence[Finite]) -> list[tuple[float, tuple[float, float]]]:
    """For every tuple k, max over the product of the domains of ||q(t, x_{-k}) - q(t', x_{-k})||_1
    (seed 000 §III's global sensitivity, by enumeration) and a pair (t, t') attaining it."""
    sizes = [len(d.values) for d in domains]
    total = int(np.prod(sizes, dtype=object))
    check_states(total, "enumerating the domains for the query's sensitivity")
    grid = np.stack(np.meshgrid(*[np.asarray(d.values) for d in domains], indexing="ij"), axis=-1).reshape(-1, len(sizes))
    v = values(grid)
    v = v.reshape(*sizes, v.shape[1])
    out = []
    for k, dom in enumerate(domains):
        vk = np.moveaxis(v, k, 0)
        if vk.shape[-1] == 1:  # one output: the widest range over tuple k's values, at the worst x_{-k}
            spread = (vk.max(axis=0) - vk.min(axis=0)).ravel()
            r = int(np.argmax(spread))
            column = vk.reshape(sizes[k], -1)[:, r]
            out.append((float(spread[r]), (dom.values[int(np.argmax(column))], dom.values[int(np.argmin(column))])))
            continue
        best, pair = 0.0, (dom.values[-1], dom.values[0])
        for a in range(sizes[k] - 1):  # every pair (a, b > a) of tuple k's values, at every x_{-k}
            diff = np.abs(vk[a + 1:] - vk[a]).sum(axis=-1)
            top = np.unravel_index(int(np.argmax(diff)), diff.shape)
            if diff[top] > best:
                best, pair = float(diff[top]), (dom.values[a + 1 + int(top[0])], dom.values[a])
        out.append((best, pair))
    return out



def with_sensitivity(query: Query, value: float | None) -> Query:
    """`query` with the user's `--sensitivity` (None: unchanged); only expr:/fn: queries take one."""
    if value is None:
        return query
    if not isinstance(query, NamedQuery):
        raise InputError(f"--sensitivity applies to expr: and fn: queries; the sensitivity of '{query.spec}' is "
                         "computed from the domains")
    return query.with_sensitivity(value)
