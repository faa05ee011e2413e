"""Read matrices and vectors of numbers and symbols from text, without `eval`.

Entries are Python-syntax arithmetic: numbers (decimals become exact rationals), names (real
symbols), + - * / ** (also ^), and sqrt, exp, log, abs. Anything else is an InputError, and so is
an entry that is not a finite real number or that could make sympy hang (any text within these
limits is read in about a second at most, a typical entry in milliseconds):

- the text has at most MAX_CHARS characters and MAX_NODES syntax nodes, nested at most MAX_DEPTH
  deep (a long sum or product counts as one level: it is combined pairwise, not term by term);
- every constant part of an entry, and every number in a symbolic one, is 0 or between 1e-308
  and 1e308 in magnitude (a double's range) with at most MAX_DIGITS digits above and below the line;
- a power with a numeric exponent is sized before it is computed: a rational base must give at
  most MAX_DIGITS digits; any other power x**(n*y), and exp(n*y + ...), has |n| <= MAX_EXPONENT
  (sympy's factor and cancel take exp(700) for E**700 and expand such powers).

Every part is checked as soon as it is built, so nothing that could blow up is ever computed, and
the message names the entry and the part.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable

import sympy
from sympy.core.evalf import PrecisionExhausted

from ddpbayes.errors import InputError

MAX_CHARS = 10_000
MAX_NODES = 5_000
MAX_DEPTH = 100
MAX_DIGITS = 1_000
MAX_EXPONENT = 100  # sympy's polynomial algebra (factor, cancel) slows down fast with the degree
_LOW, _HIGH = sympy.Rational(1, 10**308), sympy.Integer(10) ** 308

_SUM, _PRODUCT = (ast.Add, ast.Sub), (ast.Mult, ast.Div)
_FUNCTIONS: dict[str, Callable] = {"sqrt": sympy.sqrt, "exp": sympy.exp, "log": sympy.log, "abs": sympy.Abs}
_NOT_FINITE_NAMES = {"inf", "infinity", "nan", "oo", "zoo"}
_NOT_FINITE = {sympy.zoo: "complex infinity", sympy.nan: "undefined", sympy.oo: "infinite", -sympy.oo: "infinite"}


def parse_matrix(text: str, what: str) -> sympy.Matrix:
    """'[[1,rho],[rho,1]]' -> a sympy Matrix."""
    node, source = _tree(text, what)
    rows = node.elts if isinstance(node, (ast.List, ast.Tuple)) else None
    if not rows or not all(isinstance(r, (ast.List, ast.Tuple)) and r.elts for r in rows):
        raise InputError(f"{what} must be a nested list such as [[1,rho],[rho,1]], got '{_short(text)}'")
    if len({len(r.elts) for r in rows}) != 1:
        raise InputError(f"the rows of {what} have different lengths")
    return sympy.Matrix(
        [[_Entry(source, e, f"{what} entry [{i},{j}]").read(e) for j, e in enumerate(r.elts)]
         for i, r in enumerate(rows)]
    )


def parse_vector(text: str, what: str) -> list[sympy.Expr]:
    """'1,2,a' or '[1,2,a]' -> a list of sympy expressions."""
    node, source = _tree(text, what, brackets=not text.strip().startswith("["))
    if not isinstance(node, (ast.List, ast.Tuple)) or not node.elts:
        raise InputError(f"{what} must be comma-separated entries such as 1,2,3, got '{_short(text)}'")
    return [_Entry(source, e, f"{what} entry {k}").read(e) for k, e in enumerate(node.elts)]


def parse_scalar(text: str, what: str) -> sympy.Expr:
    node, source = _tree(text, what)
    return _Entry(source, node, what).read(node)


def _tree(text: str, what: str, brackets: bool = False) -> tuple[ast.expr, str]:
    """The syntax tree of `text` (stripped, in [] if `brackets`) and that source, within the size limits."""
    source = text.strip()
    if len(source) > MAX_CHARS:
        raise InputError(f"{what} is too long: {len(source):,} characters (at most {MAX_CHARS:,})")
    source = f"[{source}]" if brackets else source
    try:
        node = ast.parse(source, mode="eval").body
    except SyntaxError:
        raise InputError(f"{what} is not a valid expression: '{_short(text)}'") from None
    except (RecursionError, MemoryError):
        raise _too_deep(what) from None
    count, stack = 0, [(node, 1)]
    while stack:
        item, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise InputError(f"{what} is too large: more than {MAX_NODES:,} numbers, names and operations")
        if depth > MAX_DEPTH:
            raise _too_deep(what)
        for child in ast.iter_child_nodes(item):
            if isinstance(child, ast.expr):
                stack.append((child, depth if child is _chain_left(item) else depth + 1))
    return node, source


def _chain_left(node: ast.AST) -> ast.expr | None:
    """The left operand of a sum (product) that is itself a sum (product): one chain, one level."""
    if isinstance(node, ast.BinOp) and isinstance(node.left, ast.BinOp):
        for family in (_SUM, _PRODUCT):
            if isinstance(node.op, family) and isinstance(node.left.op, family):
                return node.left
    return None


def _too_deep(what: str) -> InputError:
    return InputError(f"{what} is nested too deeply (at most {MAX_DEPTH} levels of brackets, powers and functions)")


class _Entry:
    """One entry, read bottom-up: every part is checked before it takes part in the next step."""

    def __init__(self, source: str, root: ast.expr, where: str):
        self.source, self.root, self.where = source, root, where

    def read(self, node: ast.expr) -> sympy.Expr:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            if isinstance(node.value, float) and not math.isfinite(node.value):
                raise self.fail(node, "is not a finite number (it overflows to inf)")
            number = sympy.Integer(node.value) if isinstance(node.value, int) else sympy.Rational(repr(node.value))
            return self.check(node, number)
        if isinstance(node, ast.Constant) and isinstance(node.value, complex):
            raise self.fail(node, "is not a real number")
        if isinstance(node, ast.Name) and node.id.lower() in _NOT_FINITE_NAMES:
            raise self.fail(node, "is not a finite number")
        if isinstance(node, ast.Name) and not node.id.startswith("_"):
            return sympy.Symbol(node.id, real=True)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = self.read(node.operand)
            return -inner if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.BinOp) and isinstance(node.op, _SUM + _PRODUCT):
            return self.read_chain(node)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Pow, ast.BitXor)):
            base, exponent = self.read(node.left), self.read(node.right)
            self.check_power(node, base, exponent)
            return self.check(node, base**exponent)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCTIONS
            and len(node.args) == 1
            and not node.keywords
        ):
            return self.check(node, _FUNCTIONS[node.func.id](self.read(node.args[0])))
        raise InputError(
            f"{self.where}: cannot read '{_short(self.text(node))}' "
            "(use numbers, names, + - * / **, sqrt, exp, log, abs)"
        )

    def read_chain(self, node: ast.BinOp) -> sympy.Expr:
        """a - b + c (or a / b * c) as the terms a, -b, c (a, 1/b, c), combined pairwise and checked
        at every step: a long sum costs sympy about n log n instead of n^2, and no recursion."""
        family = _SUM if isinstance(node.op, _SUM) else _PRODUCT
        terms, link = [], node
        while isinstance(link, ast.BinOp) and isinstance(link.op, family):
            term = self.read(link.right)
            if isinstance(link.op, ast.Div) and _is_zero(term):
                raise self.fail(link, "divides by zero")
            if isinstance(link.op, (ast.Sub, ast.Div)):
                term = -term if isinstance(link.op, ast.Sub) else 1 / term
            terms.append(term)
            link = link.left
        terms.append(self.read(link))
        terms.reverse()
        combine = operator.add if family is _SUM else operator.mul
        while len(terms) > 1:
            odd = terms[-1:] if len(terms) % 2 else []
            terms = [self.check(node, combine(a, b), evaluate=False) for a, b in zip(terms[::2], terms[1::2])] + odd
        return self.check(node, terms[0])

    def check_power(self, node: ast.expr, base: sympy.Expr, exponent: sympy.Expr) -> None:
        """Refuse base**exponent before it is computed if it would be too large."""
        if exponent.free_symbols:
            return
        if _is_zero(base) and exponent.is_negative:
            raise self.fail(node, "divides by zero (0 to a negative power)")
        size = abs(float(exponent.evalf(20)))
        if base.is_Rational:
            digits = size * max(math.log10(abs(base.p) or 1), math.log10(base.q))
            if digits > MAX_DIGITS:
                problem = f"is too large to compute: about {_count(digits)} digits (at most {MAX_DIGITS:,})"
                raise self.fail(node, problem)
        elif size > MAX_EXPONENT:
            problem = f"has an exponent too large for sympy's algebra: {_short(sympy.sstr(exponent))}"
            raise self.fail(node, f"{problem} (at most {MAX_EXPONENT})")

    def check(self, node: ast.expr, value: sympy.Expr, evaluate: bool = True) -> sympy.Expr:
        """`value` (the part `node` of the entry) if finite, real and of a size sympy handles fast.
        Without `evaluate` (a partial sum or product of checked terms: real, and it cannot grow
        but through its exact numbers and powers) a numeric value is not evaluated."""
        if value.is_Rational:
            self.check_digits(node, value)
            self.check_range(node, value, "is too")
            return value
        if value.has(*_NOT_FINITE):
            name = next(name for bad, name in _NOT_FINITE.items() if value.has(bad))
            raise self.fail(node, f"is not a finite number (it is {name})")
        numbers = value.atoms(sympy.Rational)
        for number in numbers:
            self.check_digits(node, number)
        if value.free_symbols:
            for number in numbers:
                self.check_range(node, number, "holds a number too")
        elif evaluate:
            real, imag = _real_imag(value)
            if imag != 0:
                raise self.fail(node, f"is not a real number (it is {_short(sympy.sstr(value))})")
            self.check_range(node, real, "is too")
        for power in value.atoms(sympy.Pow, sympy.exp):
            if _degree(power) > MAX_EXPONENT:
                power_text = _short(sympy.sstr(power))
                raise self.fail(
                    node, f"has a power too large for sympy's algebra: {power_text} (exponents at most {MAX_EXPONENT})"
                )
        if node is self.root and value.is_extended_real is False:
            raise self.fail(node, f"is not a real number (it is {_short(sympy.sstr(value))})")
        return value

    def check_digits(self, node: ast.expr, number: sympy.Rational) -> None:
        """`number` has at most MAX_DIGITS digits above and below the line."""
        digits = max(abs(number.p).bit_length(), number.q.bit_length()) * math.log10(2)
        if digits > MAX_DIGITS:
            raise self.fail(node, f"has a number of about {digits:,.0f} digits (at most {MAX_DIGITS:,})")

    def check_range(self, node: ast.expr, number: sympy.Number, subject: str) -> None:
        """`number` is 0 or within a double's range."""
        if number != 0 and not _LOW <= abs(number) <= _HIGH:
            size = "large" if abs(number) > _HIGH else "small"
            about = _short(str(sympy.Float(number, 3)))
            bounds = "numbers must be 0 or within 1e-308 to 1e308 in magnitude"
            raise self.fail(node, f"{subject} {size}: about {about} ({bounds})")

    def fail(self, node: ast.expr, problem: str) -> InputError:
        """'<where> '<entry>' <problem>', or '<where> '<entry>': '<part>' <problem>' for a part of it."""
        entry = _short(self.text(self.root))
        if node is self.root:
            return InputError(f"{self.where} '{entry}' {problem}")
        return InputError(f"{self.where} '{entry}': '{_short(self.text(node))}' {problem}")

    def text(self, node: ast.expr) -> str:
        return ast.get_source_segment(self.source, node) or ""


def _degree(power: sympy.Expr) -> sympy.Number:
    """The power sympy's polynomial algebra expands: n for x**n or x**(n*y), n for exp(n*y + ...)."""
    return max(abs(term.as_coeff_Mul()[0]) for term in sympy.Add.make_args(power.exp))


def _is_zero(value: sympy.Expr) -> bool:
    """True when `value` is 0, or a number that cannot be told from 0 (log(4) - 2*log(2))."""
    return bool(value.is_zero) or (not value.free_symbols and _evaluate(value) == 0)


def _real_imag(value: sympy.Expr) -> tuple[sympy.Number, sympy.Number]:
    """The real and imaginary parts of a numeric expression to 20 digits (0 for a part that cannot
    be told from 0): evaluated whole, and part by part only when that runs out of precision."""
    try:
        return value.evalf(20, strict=True).as_real_imag()
    except PrecisionExhausted:
        return _evaluate(sympy.re(value)), _evaluate(sympy.im(value))


def _evaluate(part: sympy.Expr) -> sympy.Number:
    """A real numeric expression to 20 digits; 0 when it cannot be told from 0."""
    try:
        return part.evalf(20, strict=True)
    except PrecisionExhausted:
        return sympy.Integer(0)


def _count(x: float) -> str:
    """1234567 -> '1,234,567'; astronomically large counts in e-notation."""
    return f"{x:,.0f}" if x < 1e12 else f"{x:.2e}"


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
