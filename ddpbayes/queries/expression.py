"""A safe evaluator for `expr:` queries (issue #15; DESIGN §1.1).

An expression is Python syntax restricted to a whitelist: numbers, the model's variable names,
+ - * / // (floor(a / b)) % ** and unary minus, comparisons and `and`/`or`/`not` (giving 0/1), `a if c else b`,
indexing a vector variable with integers or constant slices (`x[0]`, `x[1:3]`), and calls to
the functions in `FUNCTIONS`. Nothing else parses, so nothing else runs.

Values are float arrays of shape (S, w): w = 1 for a scalar variable, w = k for a vector one of
k tuples (numpy broadcasting mixes the two). Reductions (`sum`, `mean`, `max`, `min`, `prod`,
`any`, `all`, `count`) act across a vector's tuples, giving one value per state; `max(a, b, ...)`
and `min(a, b, ...)` with several arguments are elementwise, as Python's are on numbers.
"""

from __future__ import annotations

import ast
import operator
import sys
from collections.abc import Callable, Mapping

import numpy as np

from ddpbayes.errors import InputError

MAX_LENGTH = 2000  # characters: a longer expression is refused before it is parsed
MAX_DEPTH = 100  # nesting levels: evaluation recurses once per level


def _reduce(fn: Callable) -> Callable:
    return lambda a: np.asarray(fn(a, axis=-1, keepdims=True) if np.ndim(a) == 2 else fn(a), dtype=float)


def _count(a: np.ndarray) -> np.ndarray:
    return _reduce(np.sum)(np.asarray(a) != 0)


REDUCTIONS: dict[str, Callable] = {
    "sum": _reduce(np.sum), "mean": _reduce(np.mean), "prod": _reduce(np.prod), "count": _count,
    "any": _reduce(lambda a, **kw: np.any(a != 0, **kw)), "all": _reduce(lambda a, **kw: np.all(a != 0, **kw)),
    "max": _reduce(np.max), "min": _reduce(np.min),
}
ELEMENTWISE: dict[str, Callable] = {
    "abs": np.abs, "exp": np.exp, "log": np.log, "log2": np.log2, "log10": np.log10, "sqrt": np.sqrt,
    "floor": np.floor, "ceil": np.ceil, "sign": np.sign, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
    "minimum": np.minimum, "maximum": np.maximum, "where": lambda c, a, b: np.where(np.asarray(c) != 0, a, b),
    "clip": np.clip,
}
ARITY: dict[str, tuple[int, int]] = {
    **{f: (1, 1) for f in REDUCTIONS}, **{f: (1, 1) for f in ELEMENTWISE},
    "max": (1, 64), "min": (1, 64), "minimum": (2, 2), "maximum": (2, 2), "where": (3, 3), "clip": (3, 3),
}
FUNCTIONS = sorted(ARITY)

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: lambda a, b: np.floor(a / b), ast.Mod: operator.mod, ast.Pow: operator.pow}
_COMPARE = {ast.Lt: np.less, ast.LtE: np.less_equal, ast.Gt: np.greater, ast.GtE: np.greater_equal,
            ast.Eq: np.equal, ast.NotEq: np.not_equal}


def parse_expression(text: str) -> ast.expr:
    """The checked syntax tree of `text`, or a one-line InputError naming what is not allowed."""
    text = text.strip()
    if not text:
        raise InputError("expr: needs an expression, e.g. expr:d_i*d_j")
    if len(text) > MAX_LENGTH:
        raise InputError(f"expression '{text[:40]}...' has {len(text)} characters, over the limit of {MAX_LENGTH}")
    try:
        tree = ast.parse(text, mode="eval").body
        if _depth(tree) > MAX_DEPTH:
            raise RecursionError
        _check(tree, text)
    except SyntaxError as exc:
        shown = text if len(text) <= 80 else text[:77] + "..."
        raise InputError(f"expression '{shown}' is not valid syntax: {exc.msg} at column {exc.offset}") from None
    except RecursionError:
        raise InputError(f"expression '{text[:40]}...' is nested more than {MAX_DEPTH} levels deep") from None
    return tree


def _depth(tree: ast.AST) -> int:
    """Nesting depth, found without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((child, d + 1) for child in ast.iter_child_nodes(node))
    return deepest


def names_in(tree: ast.expr) -> list[str]:
    """The variable names `tree` reads (function names excluded), in order of first use."""
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    seen = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in called]
    return list(dict.fromkeys(seen))


def evaluate(tree: ast.expr, env: Mapping[str, np.ndarray]) -> np.ndarray:
    """The value of `tree` with each name bound to an (S, w) array in `env` (floating point
    errors give inf/nan, which the caller refuses)."""
    with np.errstate(all="ignore"):
        return np.asarray(_eval(tree, env), dtype=float)


def _check(node: ast.AST, text: str) -> None:
    def bad(what: str) -> InputError:
        return InputError(f"expression '{text}': {what} is not allowed (use numbers, the model's variable names, "
                          "+ - * / // % **, comparisons, and/or/not, a if c else b, x[i] and the functions "
                          f"{', '.join(FUNCTIONS)})")

    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise bad(f"the constant {node.value!r}")
        if not abs(node.value) <= sys.float_info.max:  # a 400-digit integer; 1e400 reads as inf
            shown = ast.get_source_segment(text, node) or "a constant"
            raise InputError(f"expression '{_short(text)}': the constant {_short(shown)} is beyond double precision "
                             f"(|c| <= {sys.float_info.max:.4g})")
    elif isinstance(node, ast.Name):
        pass
    elif isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name not in ARITY:
            raise bad(f"calling '{ast.unparse(node.func)}'")
        if node.keywords:
            raise bad(f"a keyword argument to {name}()")
        lo, hi = ARITY[name]
        if not lo <= len(node.args) <= hi:
            raise InputError(f"expression '{text}': {name}() takes {lo if lo == hi else f'{lo} to {hi}'} "
                             f"argument{'s' if hi > 1 else ''}, got {len(node.args)}")
        for a in node.args:
            _check(a, text)
    elif isinstance(node, ast.Subscript):
        if not _constant_index(node.slice):
            raise bad(f"the index [{ast.unparse(node.slice)}] (use an integer or a constant slice)")
        if isinstance(node.slice, ast.Slice) and node.slice.step is not None and ast.literal_eval(node.slice.step) == 0:
            raise InputError(f"expression '{_short(text)}': the slice [{ast.unparse(node.slice)}] has step 0 "
                             "(a slice's step is a nonzero integer)")
        _check(node.value, text)
    elif isinstance(node, ast.BinOp | ast.UnaryOp | ast.BoolOp | ast.Compare | ast.IfExp):
        if isinstance(node, ast.BinOp) and type(node.op) not in _BINARY:
            raise bad(f"the operator in '{ast.unparse(node)}'")
        if isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.USub | ast.UAdd | ast.Not):
            raise bad(f"the operator in '{ast.unparse(node)}'")
        if isinstance(node, ast.Compare) and not all(type(op) in _COMPARE for op in node.ops):
            raise bad(f"the comparison in '{ast.unparse(node)}'")
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.operator | ast.unaryop | ast.boolop | ast.cmpop):
                _check(child, text)
    else:
        raise bad(f"'{ast.unparse(node)}'")


def _short(text: str, width: int = 80) -> str:
    """`text`, cut to `width` characters for a one-line message."""
    return text if len(text) <= width else text[:width - 3] + "..."


def _constant_index(node: ast.AST) -> bool:
    def integer(n: ast.AST | None) -> bool:
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            n = n.operand
        return n is None or (isinstance(n, ast.Constant) and type(n.value) is int)

    if isinstance(node, ast.Slice):
        return integer(node.lower) and integer(node.upper) and integer(node.step)
    return node is not None and integer(node)


def _index(node: ast.AST) -> int | slice:
    if isinstance(node, ast.Slice):
        return slice(*(None if p is None else ast.literal_eval(p) for p in (node.lower, node.upper, node.step)))
    i = ast.literal_eval(node)
    return slice(i, i + 1 if i != -1 else None)


def _truth(a) -> np.ndarray:
    return np.asarray(a) != 0


def _eval(node: ast.AST, env: Mapping[str, np.ndarray]):
    if isinstance(node, ast.Constant):
        return np.float64(node.value)
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](_eval(node.left, env), _eval(node.right, env))
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env)
        return (~_truth(v)).astype(float) if isinstance(node.op, ast.Not) else (-v if isinstance(node.op, ast.USub) else +v)
    if isinstance(node, ast.BoolOp):
        values = [_truth(_eval(v, env)) for v in node.values]
        combine = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
        return combine.reduce(np.broadcast_arrays(*values)).astype(float)
    if isinstance(node, ast.Compare):
        left, out = _eval(node.left, env), True
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node, env)
            out = np.logical_and(out, _COMPARE[type(op)](left, right))
            left = right
        return np.asarray(out, dtype=float)
    if isinstance(node, ast.IfExp):
        return np.where(_truth(_eval(node.test, env)), _eval(node.body, env), _eval(node.orelse, env))
    if isinstance(node, ast.Subscript):
        return _subscript(node, _eval(node.value, env))
    return _call(node, [_eval(a, env) for a in node.args])


def _subscript(node: ast.Subscript, value) -> np.ndarray:
    value = np.asarray(value)
    width = value.shape[-1] if value.ndim == 2 else 0
    index = _index(node.slice)
    picked = value[:, index] if value.ndim == 2 else value[:0]
    if value.ndim != 2 or picked.shape[1] == 0:
        raise InputError(f"index [{ast.unparse(node.slice)}] in '{ast.unparse(node)}' selects nothing "
                         f"('{ast.unparse(node.value)}' has {width} tuple{'s' if width != 1 else ''})")
    return picked


def _call(node: ast.Call, args: list):
    name = node.func.id
    if name in ("max", "min") and len(args) > 1:
        return (np.maximum if name == "max" else np.minimum).reduce(np.broadcast_arrays(*args))
    if name in REDUCTIONS:
        return REDUCTIONS[name](np.asarray(args[0], dtype=float))
    return ELEMENTWISE[name](*args)
