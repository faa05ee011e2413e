"""`expr:EXPR[;EXPR...]`: expressions over the model's variable names (DESIGN §1.1), parsed by
`expression` and bounded on continuous domains by `interval`."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.model.domains import Domain, Finite
from ddpbayes.queries.base import Query
from ddpbayes.queries.expression import evaluate, names_in, parse_expression
from ddpbayes.queries.general import NamedQuery, Variables, exact_sensitivities
from ddpbayes.queries.interval import interval_sensitivities

LOWER_GRID = 32  # intervals per bounded domain in the grid of points giving the lower bound


@dataclass(frozen=True)
class ExpressionQuery(NamedQuery):
    """`expr:EXPR[;EXPR...]`: expressions over the model's variable names (`ddpbayes.queries.expression`).

    Parameters
    ----------
    text : str
        The expressions, separated by ``;``; parsed at construction.
    variables : Variables or None, default None
        The model's variables, set by `bind`.
    given : float or None, default None
        The global sensitivity the user stated (``--sensitivity``), else None.
    name : str, default "expr"
        The kind.

    Raises
    ------
    InputError
        When an expression is not valid (parsed when the query is made).
    """

    text: str
    variables: Variables | None = None
    given: float | None = None
    name: str = "expr"
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    def __post_init__(self):
        self.trees  # noqa: B018 — parse now: bad syntax is reported when the query is read

    @property
    def spec(self) -> str:
        """The text `parse_query` reads this query back from (`expr:` and the expressions)."""
        return f"expr:{self.text}"

    @property
    def trees(self) -> list[ast.expr]:
        if "trees" not in self._memo:
            self._memo["trees"] = [parse_expression(part) for part in self.text.split(";")]
        return self._memo["trees"]

    def _bounds(self, domains: Sequence[Domain]) -> tuple[np.ndarray, np.ndarray, int]:
        """Interval arithmetic's upper bounds (`queries.interval`), and lower bounds: the exact
        sensitivity over a grid of points of the domains (finite ones whole)."""
        key = ("bounds", tuple(domains))
        if key not in self._memo:
            columns = dict(zip(self.variables.names, map(list, self.variables.columns)))
            upper, m = interval_sensitivities(self.trees, columns, domains)
            cut = min(m, LOWER_GRID)
            points = [d if isinstance(d, Finite) else Finite(np.linspace(d.lo, d.hi, cut + 1) if np.isfinite(d.width)
                                                              else [d.lo if np.isfinite(d.lo) else min(d.hi, 0.0)])
                      for d in domains]
            try:
                lower = np.minimum([s for s, _ in exact_sensitivities(self.values, points)], upper)
            except InputError:  # not finite at some grid point: no lower bound
                lower = np.zeros(len(domains))
            self._memo[key] = (lower, upper, m)
        return self._memo[key]

    def _resolve(self, model) -> ExpressionQuery:
        known = set(self.variables.names)
        for tree in self.trees:
            unknown = [n for n in names_in(tree) if n not in known]
            if unknown:
                raise InputError(f"expression '{ast.unparse(tree)}' names '{unknown[0]}', which is not a tuple "
                                 f"variable of the model (it has: {', '.join(self.variables.names)})")
        return self

    def _outputs(self, x: np.ndarray) -> np.ndarray:
        env = self.variables.arrays(x, flat=False)
        parts = []
        for tree in self.trees:
            v = evaluate(tree, env)
            width = v.shape[-1] if v.ndim == 2 else 1
            if v.ndim > 2 or (v.ndim >= 1 and v.shape[0] not in (1, len(x))):
                raise InputError(f"expression '{ast.unparse(tree)}' gives values of shape {v.shape}")
            parts.append(np.broadcast_to(v.reshape(-1, width) if v.ndim else v, (len(x), width)))
        return np.concatenate(parts, axis=1).astype(float)



def parse_expr(kind: str, arg: str, spec: str) -> Query:
    """`expr:EXPR[;EXPR...]`, parsed now: bad syntax is reported when the query is read."""
    return ExpressionQuery(arg.strip())
