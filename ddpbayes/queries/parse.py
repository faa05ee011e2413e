"""Reading a query from its text (DESIGN §1, §1.1): the one registry of query kinds, the name
before the first ':' -> the parser of its family. A new kind is a class with its parser in a
module of `queries/` and one line here."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ddpbayes.errors import InputError
from ddpbayes.queries.base import Query
from ddpbayes.queries.centroids import parse_centroids
from ddpbayes.queries.expr import parse_expr
from ddpbayes.queries.fn import parse_fn
from ddpbayes.queries.histogram import parse_histogram
from ddpbayes.queries.level import parse_level
from ddpbayes.queries.linear import parse_identity, parse_linear


class QueryKind(NamedTuple):
    """A query kind: how it is written (for the message listing them) and its parser, called
    with the kind, the text after ':' and the whole text."""

    usage: str
    parse: Callable[[str, str, str], Query]


KINDS: dict[str, QueryKind] = {
    "sum": QueryKind("sum", parse_linear),
    "count": QueryKind("count", parse_linear),
    "mean": QueryKind("mean", parse_linear),
    "linear": QueryKind("linear:w0,w1,...[;...]", parse_linear),
    "centroids": QueryKind("centroids:FILE", parse_centroids),
    "histogram": QueryKind("histogram:e0,e1,...", parse_histogram),
    "level": QueryKind("level:L[:w0,w1,...]", parse_level),
    "identity": QueryKind("identity", parse_identity),
    "expr": QueryKind("expr:EXPR", parse_expr),
    "fn": QueryKind("fn:NAME", parse_fn),
}


def parse_query(spec: str) -> Query:
    """`sum`, `count`, `mean`, `linear:w0,w1,...` (rows separated by `;` for several outputs),
    `centroids:FILE`, `histogram:e0,e1,...`, `level:L[:w0,w1,...]`, `identity`, `expr:EXPR[;EXPR...]` or `fn:NAME`.

    Parameters
    ----------
    spec : str
        The query's text: a kind, then ``:`` and its argument when it takes one (kind case-insensitive).

    Returns
    -------
    Query
        The query; `expr:` and `fn:` queries still to be bound to a model (`Query.bind`).

    Raises
    ------
    InputError
        When the kind is unknown or its argument is invalid.

    Examples
    --------
    >>> parse_query("linear:1,2,3").spec
    'linear:1,2,3'
    """
    kind, _, arg = spec.partition(":")
    kind = kind.strip().lower()
    if kind not in KINDS:
        usages = [k.usage for k in KINDS.values()]
        raise InputError(f"unknown query '{spec}' (use {', '.join(usages[:-1])} or {usages[-1]})")
    return KINDS[kind].parse(kind, arg, spec)
