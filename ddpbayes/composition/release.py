"""The releases of a composition: parsing `QUERY:MECHANISM:PARAM`, the stacked query and the
per-coordinate noise (DESIGN §3.1b)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ddpbayes.errors import InputError
from ddpbayes.mechanisms import Mechanism, lookup, make_mechanism
from ddpbayes.mechanisms.composed import ComposedMechanism
from ddpbayes.model import DependenceModel
from ddpbayes.queries import Query, output_count, parse_query
from ddpbayes.queries.composed import ComposedQuery


@dataclass(frozen=True)
class Release:
    """One release: a query, its noise, and the text it was read from.

    Parameters
    ----------
    query : Query
        The release's query, bound to the model.
    mechanism : Mechanism
        The release's noise.
    spec : str
        The ``QUERY:MECHANISM:PARAM`` text it was read from.
    """

    query: Query
    mechanism: Mechanism
    spec: str


def parse_release(spec: str, model: DependenceModel) -> Release:
    """`QUERY:MECHANISM:PARAM`, the query possibly containing ':' (split from the right). PARAM
    is the noise scale b for laplace/geometric and ε for randomized_response; `eps=E` sets a
    Laplace/geometric scale as classic DP would (the release's global sensitivity / E).

    Parameters
    ----------
    spec : str
        The release's text (``--release``), e.g. ``sum:laplace:1``.
    model : DependenceModel
        The model whose tuples the releases read.

    Returns
    -------
    Release
        The release, its query bound to `model` and checked against its domains.

    Raises
    ------
    InputError
        When `spec` is not three parts, its query, mechanism or PARAM is invalid, or the mechanism is Gaussian
        (Gaussian releases are not composed).
    """
    parts = spec.rsplit(":", 2)
    if len(parts) != 3 or not all(p.strip() for p in parts):
        raise InputError(f"--release '{spec}' must be QUERY:MECHANISM:PARAM, e.g. sum:laplace:1 or "
                         "identity:randomized_response:0.5")
    try:
        return Release(*_release(*(p.strip() for p in parts), model), spec)
    except InputError as e:
        raise InputError(f"--release '{spec}': {e}") from None


def _release(query_text: str, kind: str, param: str, model: DependenceModel) -> tuple[Query, Mechanism]:
    domains = model.domains
    query = parse_query(query_text).bind(model)
    query.check(domains)
    by_epsilon = param.lower().startswith("eps=")
    value = _number(param[4:] if by_epsilon else param)
    kind = kind.lower()
    cls = lookup(kind)  # None: make_mechanism names the kinds
    if cls is not None and cls.gaussian:
        raise InputError("Gaussian releases are not composed: their leakage is a privacy profile, computed for one "
                         "release at a time (--query/--mechanism gaussian)")
    if cls is not None and cls.flips_bits:
        if by_epsilon:
            raise InputError("randomized response's PARAM is already its epsilon (drop 'eps=')")
        mechanism = make_mechanism(kind, query, domains, epsilon=value)
    else:
        mechanism = make_mechanism(kind, query, domains, **({"epsilon": value} if by_epsilon else {"scale": value}))
    return query, mechanism


def compose(specs: Sequence[str], model: DependenceModel) -> tuple[ComposedQuery, ComposedMechanism]:
    """The joint query and mechanism of the releases `specs` (at least two) on `model`'s tuples.

    Parameters
    ----------
    specs : sequence of str
        The releases' texts, ``QUERY:MECHANISM:PARAM`` each (`parse_release`).
    model : DependenceModel
        The model whose tuples the releases read.

    Returns
    -------
    tuple of (ComposedQuery, ComposedMechanism)
        The releases' queries stacked, and their noises, one per release's output coordinates.

    Raises
    ------
    InputError
        When fewer than two releases are given or a release is invalid.
    """
    if len(specs) < 2:
        raise InputError(f"a composition needs at least two --release, got {len(specs)} (audit one release with "
                         "--query/--mechanism/--scale)")
    releases = [parse_release(s, model) for s in specs]
    query = ComposedQuery(tuple(r.query for r in releases))
    widths = tuple(output_count(r.query, model.domains) for r in releases)
    return query, ComposedMechanism(tuple(r.mechanism for r in releases), widths, tuple(specs))


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(f"PARAM '{text}' is not a number") from None
