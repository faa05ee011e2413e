"""Queries: what a mechanism releases, q(x) (DESIGN §1, §1.1). `kinds` holds the linear family,
histograms and the identity; `general` the queries named by the model's variables (`expr:`,
`fn:`), built on `expression` (the whitelisted parser) and `interval` (sensitivity bounds)."""

from ddpbayes.queries.kinds import (
    Centroids,
    Histogram,
    Identity,
    Linear,
    LinearRows,
    Query,
    output_count,
    parse_query,
    read_assignment,
)

__all__ = ["Centroids", "Histogram", "Identity", "Linear", "LinearRows", "Query", "output_count", "parse_query",
           "read_assignment"]
