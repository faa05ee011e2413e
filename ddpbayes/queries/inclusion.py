"""Interval arithmetic on `expr:` trees (DESIGN §1.1): inclusion functions for every operation the
whitelist of `expression` allows — the box an operation returns contains every value it takes on
its argument boxes; `interval` turns them into a bound on a query's sensitivity.

Arithmetic results are widened outward by a few ulps (rounding); anything the rules do not
bound gives the unknown box (nan, nan), never an optimistic one. That box also stands for a
possible nan (sqrt or log of a negative, 0 * inf, inf - inf): it propagates through arithmetic and
functions as numpy's nan does, and comparisons and truth tests, which turn a nan into 0 or 1,
answer "either" on it.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable

import numpy as np

from ddpbayes.queries.expression import _index

_ULPS = 2.0**-50

Box = tuple[np.ndarray, np.ndarray]  # (lo, hi), broadcastable float arrays

FULL: Box = (np.array(np.nan), np.array(np.nan))  # unknown: any value, or a nan


def _unbounded_where(a: Box) -> Box:
    """The unknown box in every cell (a shape like `a`'s)."""
    shape = np.broadcast(np.asarray(a[0]), np.asarray(a[1])).shape
    return np.full(shape, np.nan), np.full(shape, np.nan)


def _unknown(a: Box) -> np.ndarray:
    return np.isnan(a[0]) | np.isnan(a[1])


def _widen(lo, hi) -> Box:
    """Outward by a few ulps: numpy's exp, log, sin, ** are not correctly rounded, so not monotone
    to the last bit (+ - * / are: round-to-nearest of a monotone operation is monotone)."""
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    return lo - np.abs(lo) * _ULPS, hi + np.abs(hi) * _ULPS


def _exact(lo, hi) -> Box:
    """A correctly rounded operation's corners (a nan among them: unknown)."""
    return np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)


def _truth(a: Box) -> tuple[np.ndarray, np.ndarray]:
    """(surely nonzero, possibly nonzero)."""
    lo, hi = a
    return (lo > 0) | (hi < 0), ~((lo == 0) & (hi == 0))


def _bool(sure, possible) -> Box:
    return np.asarray(sure, dtype=float), np.asarray(possible, dtype=float)


def _mul(a: Box, b: Box) -> Box:
    """The corners' products (0 * inf, which a value may really be after an overflow: every value)."""
    with np.errstate(invalid="ignore"):
        p = np.broadcast_arrays(*[x * y for x in a for y in b])
        return _exact(np.minimum.reduce(p), np.maximum.reduce(p))  # nan propagates through min/max


def _div(a: Box, b: Box) -> Box:
    """The corners' quotients (inf / inf: every value) unless the divisor's interval holds 0."""
    zero = (b[0] <= 0) & (b[1] >= 0)
    with np.errstate(all="ignore"):
        q = np.broadcast_arrays(*[x / y for x in a for y in b])
        lo, hi = _exact(np.minimum.reduce(q), np.maximum.reduce(q))  # nan propagates through min/max
    return np.where(zero, np.nan, lo), np.where(zero, np.nan, hi)


def _pow(a: Box, b: Box) -> Box:
    if not _constant(b):
        return FULL
    p, (lo, hi) = float(b[0]), a
    if p == 0:
        return np.array(1.0), np.array(1.0)
    if p < 0:
        return _div((np.array(1.0), np.array(1.0)), _pow(a, (np.array(-p), np.array(-p))))
    with np.errstate(all="ignore"):
        if p.is_integer() and int(p) % 2 == 0:
            top = np.maximum(np.abs(lo), np.abs(hi)) ** p
            return _widen(np.where((lo <= 0) & (hi >= 0), 0.0, np.minimum(np.abs(lo), np.abs(hi)) ** p), top)
        if p.is_integer():
            return _widen(lo**p, hi**p)
        return _widen(np.where(lo < 0, np.nan, lo**p), np.where(lo < 0, np.nan, hi**p))


def _monotone(f: Callable) -> Callable:
    def g(a: Box) -> Box:
        with np.errstate(all="ignore"):
            return _widen(f(a[0]), f(a[1]))
    return g


def _abs(a: Box) -> Box:
    lo, hi = a
    low = np.where(lo >= 0, lo, np.where(hi <= 0, -hi, 0.0))
    return np.where(_unknown(a), np.nan, low), np.maximum(np.abs(lo), np.abs(hi))


def _periodic(shift: float) -> Callable:
    """sin (shift 0) or cos (shift pi/2): ±1 wherever a peak or trough lies inside the interval."""
    def g(a: Box) -> Box:
        if not (np.all(np.isfinite(a[0])) and np.all(np.isfinite(a[1]))):  # sin(±inf) is nan
            return _unbounded_where(a)
        lo, hi = a[0] + shift, a[1] + shift
        with np.errstate(all="ignore"):
            ends = np.sin(lo), np.sin(hi)
            peak = np.ceil((lo - np.pi / 2) / (2 * np.pi)) <= np.floor((hi - np.pi / 2) / (2 * np.pi))
            trough = np.ceil((lo + np.pi / 2) / (2 * np.pi)) <= np.floor((hi + np.pi / 2) / (2 * np.pi))
            wide = ~np.isfinite(hi - lo) | (hi - lo >= 2 * np.pi)
        lo_out, hi_out = _widen(np.minimum(*ends), np.maximum(*ends))
        return np.where(trough | wide, -1.0, np.maximum(lo_out, -1)), np.where(peak | wide, 1.0, np.minimum(hi_out, 1))
    return g


def _log(f: Callable) -> Callable:
    def g(a: Box) -> Box:
        with np.errstate(all="ignore"):
            return _widen(np.where(a[0] <= 0, -np.inf, f(a[0])), np.where(a[1] <= 0, -np.inf, f(a[1])))
    return _nonnegative(g)


def _nonnegative(g: Callable) -> Callable:
    """g where the argument cannot be negative; (-inf, inf) where it may be (a nan)."""
    def h(a: Box) -> Box:
        lo, hi = g(a)
        neg = np.asarray(a[0]) < 0
        return np.where(neg, np.nan, lo), np.where(neg, np.nan, hi)
    return h


def _reduce_last(a: Box, kind: str) -> Box:
    lo, hi = (np.asarray(v, dtype=float) for v in a)
    if lo.ndim < 2 and hi.ndim < 2:
        return _elementwise_reduction(a, kind)
    lo, hi = np.broadcast_arrays(lo, hi)
    if kind == "sum":  # widened: numpy may sum the values in another order
        return _widen(lo.sum(-1, keepdims=True), hi.sum(-1, keepdims=True))
    if kind == "mean":
        return _widen(lo.mean(-1, keepdims=True), hi.mean(-1, keepdims=True))
    if kind in ("max", "min"):
        f = np.max if kind == "max" else np.min
        return f(lo, -1, keepdims=True), f(hi, -1, keepdims=True)
    if kind == "prod":
        out = (lo[:, :1], hi[:, :1])
        for j in range(1, lo.shape[1]):
            out = _mul(out, (lo[:, j:j + 1], hi[:, j:j + 1]))
        return out
    sure, possible = _truth((lo, hi))
    if kind == "count":
        return sure.sum(-1, keepdims=True).astype(float), possible.sum(-1, keepdims=True).astype(float)
    f = np.any if kind == "any" else np.all
    return _bool(f(sure, -1, keepdims=True), f(possible, -1, keepdims=True))


def _elementwise_reduction(a: Box, kind: str) -> Box:
    """A reduction of a scalar: itself (`count`, `any`, `all`: its truth)."""
    if kind in ("count", "any", "all"):
        return _bool(*_truth(a))
    return a


def _where(c: Box, a: Box, b: Box) -> Box:
    sure, possible = _truth(c)
    lo = np.where(sure, a[0], np.where(possible, np.minimum(a[0], b[0]), b[0]))
    hi = np.where(sure, a[1], np.where(possible, np.maximum(a[1], b[1]), b[1]))
    return lo, hi


_FUNCTIONS = {
    "exp": _monotone(np.exp), "sqrt": _nonnegative(_monotone(np.sqrt)), "tanh": _monotone(np.tanh),
    "floor": lambda a: (np.floor(a[0]), np.floor(a[1])), "ceil": lambda a: (np.ceil(a[0]), np.ceil(a[1])),
    "sign": lambda a: (np.sign(a[0]), np.sign(a[1])), "abs": _abs, "log": _log(np.log), "log2": _log(np.log2),
    "log10": _log(np.log10), "sin": _periodic(0.0), "cos": _periodic(np.pi / 2),
    "minimum": lambda a, b: (np.minimum(a[0], b[0]), np.minimum(a[1], b[1])),
    "maximum": lambda a, b: (np.maximum(a[0], b[0]), np.maximum(a[1], b[1])),
    "clip": lambda a, lo, hi: (np.minimum(np.maximum(a[0], lo[0]), hi[0]), np.minimum(np.maximum(a[1], lo[1]), hi[1])),
    "where": _where,
}


def evaluate_box(node: ast.AST, env: dict[str, Box]) -> Box:
    """An interval holding every value of the (checked, `expression._check`) expression `node`
    when each name ranges over its box in `env`."""
    if isinstance(node, ast.Constant):
        return np.array(float(node.value)), np.array(float(node.value))
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.UnaryOp):
        a = evaluate_box(node.operand, env)
        if isinstance(node.op, ast.Not):
            sure, possible = _truth(a)
            return _bool(~possible, ~sure)
        return (-a[1], -a[0]) if isinstance(node.op, ast.USub) else a
    if isinstance(node, ast.BinOp):
        return _binary(node.op, evaluate_box(node.left, env), evaluate_box(node.right, env))
    if isinstance(node, ast.BoolOp):
        parts = [_truth(evaluate_box(v, env)) for v in node.values]
        combine = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
        return _bool(combine.reduce(np.broadcast_arrays(*[s for s, _ in parts])),
                     combine.reduce(np.broadcast_arrays(*[p for _, p in parts])))
    if isinstance(node, ast.Compare):
        left, sure, possible = evaluate_box(node.left, env), True, True
        for op, right_node in zip(node.ops, node.comparators):
            right = evaluate_box(right_node, env)
            s, p = _compare(op, left, right)
            sure, possible, left = sure & s, possible & p, right
        return _bool(sure, possible)
    if isinstance(node, ast.IfExp):
        return _where(evaluate_box(node.test, env), evaluate_box(node.body, env), evaluate_box(node.orelse, env))
    if isinstance(node, ast.Subscript):
        index = _index(node.slice)
        return tuple(np.asarray(v)[:, index] for v in evaluate_box(node.value, env))
    return _call(node, [evaluate_box(a, env) for a in node.args])


def _binary(op: ast.operator, a: Box, b: Box) -> Box:
    if isinstance(op, ast.Add):
        return _exact(a[0] + b[0], a[1] + b[1])
    if isinstance(op, ast.Sub):
        return _exact(a[0] - b[1], a[1] - b[0])
    if isinstance(op, ast.Mult):
        return _mul(a, b)
    if isinstance(op, ast.Div):
        return _div(a, b)
    if isinstance(op, ast.FloorDiv):
        lo, hi = _div(a, b)
        return np.floor(lo), np.floor(hi)
    if isinstance(op, ast.Pow):
        return _pow(a, b)
    if not _constant(b) or float(b[0]) == 0:  # Mod: numpy's a % c lies in [0, c] for c > 0, [c, 0] for c < 0
        return FULL
    if not (np.all(np.isfinite(a[0])) and np.all(np.isfinite(a[1]))):  # inf % c is nan
        return FULL
    c = float(b[0])
    return (np.array(0.0), np.array(float(c))) if c > 0 else (np.array(float(c)), np.array(0.0))


def _constant(b: Box) -> bool:
    """A single finite number (a constant exponent or divisor)."""
    return np.ndim(b[0]) == 0 and np.ndim(b[1]) == 0 and float(b[0]) == float(b[1]) and math.isfinite(float(b[0]))


def _compare(op: ast.cmpop, a: Box, b: Box) -> tuple[np.ndarray, np.ndarray]:
    """(surely true, possibly true) for every cell; either, where a side is unknown."""
    unknown = _unknown(a) | _unknown(b)
    sure, possible = _ordered(op, a, b)
    return sure & ~unknown, possible | unknown


def _ordered(op: ast.cmpop, a: Box, b: Box) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(op, ast.Gt | ast.GtE):
        a, b, op = b, a, ast.Lt() if isinstance(op, ast.Gt) else ast.LtE()
    if isinstance(op, ast.Lt):
        return a[1] < b[0], a[0] < b[1]
    if isinstance(op, ast.LtE):
        return a[1] <= b[0], a[0] <= b[1]
    point = (a[0] == a[1]) & (b[0] == b[1]) & (a[0] == b[0])
    overlap = (a[0] <= b[1]) & (b[0] <= a[1])
    return (point, overlap) if isinstance(op, ast.Eq) else (~overlap, ~point)


def _call(node: ast.Call, args: list[Box]) -> Box:
    name = node.func.id
    if name in ("max", "min") and len(args) > 1:
        f = np.maximum if name == "max" else np.minimum
        return (f.reduce(np.broadcast_arrays(*[a[0] for a in args])),
                f.reduce(np.broadcast_arrays(*[a[1] for a in args])))
    if name in ("sum", "mean", "max", "min", "prod", "count", "any", "all"):
        return _reduce_last(args[0], name)
    return _FUNCTIONS[name](*args)
