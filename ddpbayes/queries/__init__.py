"""Queries: what a mechanism releases, q(x) (DESIGN §1, §1.1). `base` holds `Query`; one module
per family of kinds: `linear` (sum, count, mean, linear:, identity), `centroids`, `histogram`,
`level` (the count of one value), and the kinds naming the model's variables, `expr` and `fn`
(their shared part in `general`, built on `expression`, the whitelisted parser, and `interval`,
sensitivity bounds); `parse` holds the registry of kinds `parse_query` reads; `composed` stacks
several releases' queries."""

from ddpbayes.queries.base import Query, output_count
from ddpbayes.queries.centroids import Centroids, read_assignment
from ddpbayes.queries.composed import ComposedQuery
from ddpbayes.queries.expr import ExpressionQuery
from ddpbayes.queries.fn import FunctionQuery
from ddpbayes.queries.histogram import Histogram
from ddpbayes.queries.level import LevelCount
from ddpbayes.queries.linear import Identity, Linear, LinearRows
from ddpbayes.queries.parse import parse_query

__all__ = ["Centroids", "ComposedQuery", "ExpressionQuery", "FunctionQuery", "Histogram", "Identity", "LevelCount",
           "Linear", "LinearRows", "Query", "output_count", "parse_query", "read_assignment"]
