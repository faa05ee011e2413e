"""Read matrices and vectors of numbers and symbols from text, without `eval`.

Entries are Python-syntax arithmetic: numbers (decimals become exact rationals), names (real
symbols), + - * / ** (also ^), and sqrt, exp, log, abs. Anything else is an InputError.
"""

from __future__ import annotations

import ast
import operator

import sympy

from ddpbayes.errors import InputError

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.BitXor: operator.pow,
}
_FUNCTIONS = {"sqrt": sympy.sqrt, "exp": sympy.exp, "log": sympy.log, "abs": sympy.Abs}


def parse_matrix(text: str, what: str) -> sympy.Matrix:
    """'[[1,rho],[rho,1]]' -> a sympy Matrix."""
    node = _tree(text, what)
    rows = node.elts if isinstance(node, (ast.List, ast.Tuple)) else None
    if not rows or not all(isinstance(r, (ast.List, ast.Tuple)) and r.elts for r in rows):
        raise InputError(f"{what} must be a nested list such as [[1,rho],[rho,1]], got '{text}'")
    if len({len(r.elts) for r in rows}) != 1:
        raise InputError(f"the rows of {what} have different lengths")
    return sympy.Matrix([[_expr(e, what) for e in r.elts] for r in rows])


def parse_vector(text: str, what: str) -> list[sympy.Expr]:
    """'1,2,a' or '[1,2,a]' -> a list of sympy expressions."""
    node = _tree(text if text.strip().startswith("[") else f"[{text}]", what)
    if not isinstance(node, (ast.List, ast.Tuple)) or not node.elts:
        raise InputError(f"{what} must be comma-separated entries such as 1,2,3, got '{text}'")
    return [_expr(e, what) for e in node.elts]


def parse_scalar(text: str, what: str) -> sympy.Expr:
    return _expr(_tree(text, what), what)


def _tree(text: str, what: str) -> ast.expr:
    try:
        return ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        raise InputError(f"{what} is not a valid expression: '{text}'") from None


def _expr(node: ast.expr, what: str) -> sympy.Expr:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return sympy.Rational(repr(node.value)) if isinstance(node.value, float) else sympy.Integer(node.value)
    if isinstance(node, ast.Name) and not node.id.startswith("_"):
        return sympy.Symbol(node.id, real=True)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _expr(node.operand, what)
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_expr(node.left, what), _expr(node.right, what))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and len(node.args) == 1
        and not node.keywords
    ):
        return _FUNCTIONS[node.func.id](_expr(node.args[0], what))
    raise InputError(
        f"{what}: cannot read '{ast.unparse(node)}' (use numbers, names, + - * / **, sqrt, exp, log, abs)"
    )
