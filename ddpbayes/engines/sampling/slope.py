"""How fast the law of the other variables can move with a continuous target (DESIGN §2.3, issue #42.2).

Given X_i = t and x_K, the free variables z have density e^{ℓ(t, z)} / ∫ e^{ℓ(t, z)} dz, ℓ the
joint log-density (the conditioned model's Potential: the target's value transform removed, so
no Jacobian in t). If the score g(t, z) = ∂ℓ/∂t lies in [g_lo, g_hi] for every t in a cell C and
every z, then for t, a in C, ℓ(t, z) − ℓ(a, z) ∈ (t − a)[g_lo, g_hi] and, with a query whose
log-kernel moves at most κ |t − a| (Laplace noise, linear query: κ = Σ_c |A_ci| / b_c),

    |log L(y | t) − log L(y | a)| ≤ |t − a| (g_hi − g_lo + κ)   for every y

(numerator and normaliser of L move by the score's range; what every z shares cancels). The
interval [g_lo, g_hi] is computed by interval arithmetic over PyTensor's symbolic gradient of
ℓ, with every free value over its whole (unconstrained) line and t over C. That is the
assumption, checked rather than assumed: the score is bounded on the cell over the support of
everything else (records sharing a bounded latent such as a Beta mean; not a Normal child,
whose score is affine in an unbounded value), and ℓ is continuous in t there (no support boundary that
moves with t inside C). Where it fails, `Uncertified` says why in one line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pytensor
import scipy.special
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.traversal import toposort
from pytensor.scalar import basic as ps
from pytensor.scalar import math as psm
from pytensor.tensor.basic import Alloc, ExtractDiag, Join, MakeVector, ScalarFromTensor, Split, TensorFromScalar
from pytensor.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from pytensor.tensor.shape import Reshape, SpecifyShape
from pytensor.tensor.subtensor import (AdvancedIncSubtensor, AdvancedIncSubtensor1, AdvancedSubtensor,
                                      AdvancedSubtensor1, IncSubtensor, Subtensor)

from ddpbayes.model import DependenceModel, Finite
from ddpbayes.model.condition import Conditioned, condition


class Uncertified(Exception):
    """The score of the target cannot be bounded on a cell (the reason in one line)."""


Box = tuple[np.ndarray, np.ndarray]

_MONOTONE = (DimShuffle, Subtensor, AdvancedSubtensor1, AdvancedSubtensor, IncSubtensor, AdvancedIncSubtensor1,
             AdvancedIncSubtensor, Alloc, Join, MakeVector, Reshape, SpecifyShape, Split, ExtractDiag, ScalarFromTensor,
             TensorFromScalar)  # order-preserving in every value input, given exact indices
_REDUCTIONS = (ps.Add, ps.Maximum, ps.Minimum, ps.AND, ps.OR)  # monotone reductions


class Slope:
    """The score ∂ℓ/∂t of target `target` given the other fixed tuples, bounded on cells of t."""

    def __init__(self, model: DependenceModel, target: int, known: Mapping[int, float]):
        if isinstance(model.domains[target], Finite):
            raise ValueError("a finite target has no cells")
        self.cond: Conditioned = condition(model, {**known, target: float(model.domains[target].lo)})
        if self.cond.summed:
            raise Uncertified("discrete variables are summed out of the model")
        pin = next(p for p in self.cond.pins if p.slot == target)
        self.pin = pin
        joint = self.cond.model.replace_rvs_by_values(self.cond.model.potentials)[0]
        grad = pytensor.grad(joint, pin.var)
        self.joint, self.score = joint, grad if pin.element is None else grad[pin.element]
        self._curvature: Variable | None = None  # ∂²ℓ/∂t², built when first asked for
        point = self.cond.model.initial_point()
        self.shapes = {v: np.shape(point[v.name]) for v in self.cond.model.value_vars}

    def bounds(self, lo: float, hi: float) -> tuple[float, float]:
        """[g_lo, g_hi] ⊇ {∂ℓ/∂t (t, z) : t in [lo, hi], z anything}; raises Uncertified."""
        boxes = self._leaves(lo, hi)
        _Evaluator(boxes, self.pin.var, continuity=True).box(self.joint)
        score = _Evaluator(boxes, self.pin.var, continuity=False)
        g_lo, g_hi = (float(f(g)) for f, g in zip((np.min, np.max), score.box(self.score)))
        if not (math.isfinite(g_lo) and math.isfinite(g_hi)):
            raise Uncertified(f"the score ∂log p/∂t is unbounded over the other variables on [{lo:g}, {hi:g}] (or "
                              "beyond the interval rules: an operation without one counts as anything)")
        return g_lo, g_hi

    def curvature(self, lo: float, hi: float) -> tuple[float, float]:
        """[H_lo, H_hi] ⊇ {∂²ℓ/∂t² (t, z) : t in [lo, hi], z anything}, the score checked continuous in t
        on the cell (no switch of its graph decided by t inside it); raises Uncertified."""
        if self._curvature is None:
            grad = pytensor.grad(self.score, self.pin.var, disconnected_inputs="ignore")
            self._curvature = grad if self.pin.element is None else grad[self.pin.element]
        boxes = self._leaves(lo, hi)
        _Evaluator(boxes, self.pin.var, continuity=True, smooth=True).box(self.score)
        h_lo, h_hi = (float(f(h)) for f, h in zip((np.min, np.max),
                                                  _Evaluator(boxes, self.pin.var, continuity=False).box(self._curvature)))
        if not (math.isfinite(h_lo) and math.isfinite(h_hi)):
            raise Uncertified(f"the curvature ∂²log p/∂t² is unbounded on [{lo:g}, {hi:g}]")
        return h_lo, h_hi

    def _leaves(self, lo: float, hi: float) -> dict[Variable, Box]:
        """The boxes of the graph's inputs: the target over [lo, hi], every free value over its whole
        line (a discrete stand-in over its levels' indices), the other pinned values exact."""
        boxes: dict[Variable, Box] = {}
        for v, shape in self.shapes.items():
            levels = next((f.levels for f in self.cond.free if f.name == v.name and f.levels is not None), None)
            lo_v, hi_v = (-math.inf, math.inf) if levels is None else (0.0, float(len(levels) - 1))
            boxes[v] = (np.full(shape, lo_v), np.full(shape, hi_v))
        value = np.asarray(self.pin.var.get_value(), dtype=float)
        low, high = value.copy(), value.copy()
        low[() if self.pin.element is None else self.pin.element] = lo
        high[() if self.pin.element is None else self.pin.element] = hi
        boxes[self.pin.var] = (low, high)
        return boxes


class _Evaluator:
    """Interval arithmetic over a PyTensor graph: every variable an elementwise box (lo, hi), and,
    checking continuity, a mask of the elements that depend on the target."""

    def __init__(self, leaves: dict[Variable, Box], target: Variable, continuity: bool, smooth: bool = False):
        self.memo: dict[Variable, Box] = dict(leaves)
        self.depends: dict[Variable, np.ndarray] = {v: np.zeros(np.shape(b[0])) for v, b in leaves.items()}
        self.depends[target] = np.ones(np.shape(leaves[target][0]))
        self.continuity = continuity
        self.smooth = smooth  # also refuse a comparison, maximum or minimum that t decides inside the cell

    def box(self, v: Variable) -> Box:
        for node in toposort([v]):
            if node.outputs[0] not in self.memo:
                self._apply(node)
        return self.memo[v]

    def _input(self, v: Variable) -> Box:
        if v in self.memo:
            return self.memo[v]
        if isinstance(v, Constant):
            a = np.asarray(v.data)
        elif isinstance(v, pytensor.compile.SharedVariable):
            a = np.asarray(v.get_value())
        else:
            raise Uncertified(f"the slope bound cannot read the model variable {v}")
        self.depends[v] = np.zeros(a.shape)
        return a, a

    def _apply(self, node) -> None:
        op, ins = node.op, [self._input(i) for i in node.inputs]
        masks = [self.depends[i] for i in node.inputs]
        if isinstance(op, Elemwise) and type(op.scalar_op) in _RULES:
            out = _elementwise(op.scalar_op, ins)
            mask = np.maximum.reduce(np.broadcast_arrays(*masks)) if masks else np.zeros(())
            if self.continuity and isinstance(op.scalar_op, ps.Switch):
                self._check(ins[0], masks[0], "a support boundary")
            if self.smooth and isinstance(op.scalar_op, _KINKS):
                self._check(_decided(op.scalar_op, ins, out), mask, "a kink (comparison, maximum or minimum)",
                            "the score is not continuous in t there (first order only)")
        elif _monotone(node) and all(np.array_equal(*b) for b, i in zip(ins, node.inputs) if not _real(i)):
            out = (_perform(node, [b[0] for b in ins]), _perform(node, [b[1] for b in ins]))
            mask = self._structural_mask(node, masks, ins)
        elif op.__class__.__name__ == "CheckParameterValue":
            if self.continuity:
                for cond, m in zip(ins[1:], masks[1:]):
                    self._check(cond, m, "a parameter check")
            out, mask = ins[0], masks[0]
        else:  # an operation without an interval rule: anything
            shape = tuple(1 if d is None else d for d in node.outputs[0].type.shape)
            out = (np.full(shape, -np.inf), np.full(shape, np.inf))
            mask = np.full(shape, float(any(np.any(m) for m in masks)))
        self.memo[node.outputs[0]] = (np.asarray(out[0], dtype=float), np.asarray(out[1], dtype=float))
        self.depends[node.outputs[0]] = np.asarray(mask, dtype=float)

    def _structural_mask(self, node, masks: list[np.ndarray], ins: list[Box]) -> np.ndarray:
        """Where the target reaches an output of an op that moves elements (indices read as they are)."""
        if isinstance(node.op, CAReduce):
            return np.max(masks[0], axis=node.op.axis) if masks[0].size else np.zeros(())
        values = [m if _real(i) else b[0] for m, b, i in zip(masks, ins, node.inputs)]
        return _perform(node, values) > 0

    def _check(self, cond: Box, mask: np.ndarray, what: str,
               consequence: str = "the density is not continuous in t there") -> None:
        undecided = np.broadcast_to(cond[0] != cond[1], np.broadcast_shapes(np.shape(cond[0]), np.shape(mask)))
        if np.any(undecided & (np.broadcast_to(mask, undecided.shape) > 0)):
            raise Uncertified(f"{what} of the log-density moves with the target inside the cell: {consequence}")


_KINKS = (ps.GT, ps.GE, ps.LT, ps.LE, ps.EQ, ps.NEQ, ps.Maximum, ps.Minimum)  # a gradient's masks: not smooth


def _decided(op, ins: list[Box], out: Box) -> Box:
    """A box that is a point where the op's branch is the same over the whole box (for `_check`)."""
    if isinstance(op, (ps.Maximum, ps.Minimum)):
        (a_lo, a_hi), (b_lo, b_hi) = ins
        apart = (a_lo >= b_hi) | (b_lo >= a_hi)
        return np.zeros(np.shape(apart)), np.where(apart, 0.0, 1.0)
    return out


def _monotone(node) -> bool:
    """An op whose output is order-preserving in its real inputs (given exact indices)."""
    op = node.op
    return isinstance(op, _MONOTONE) or (isinstance(op, CAReduce) and isinstance(op.scalar_op, _REDUCTIONS))


def _real(v: Variable) -> bool:
    return getattr(v.type, "dtype", "").startswith("float")


def _perform(node, inputs: list[np.ndarray]) -> np.ndarray:
    with np.errstate(all="ignore"):
        typed = [np.asarray(x, dtype=i.type.dtype) if hasattr(i.type, "dtype") else x
                 for x, i in zip(inputs, node.inputs)]
    storage = [[None] for _ in node.outputs]
    with np.errstate(all="ignore"):
        node.op.perform(node, typed, storage)
    return np.asarray(storage[0][0])


def _elementwise(op, ins: list[Box]) -> Box:
    with np.errstate(all="ignore"):
        lo, hi = _RULES[type(op)](*ins)
    return np.where(np.isnan(lo), -np.inf, lo), np.where(np.isnan(hi), np.inf, hi)


def _hull(*values: np.ndarray) -> Box:
    stack = np.broadcast_arrays(*values)
    return np.minimum.reduce(stack), np.maximum.reduce(stack)


def _times(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.where((x == 0) | (y == 0), 0.0, x * y)  # 0 * inf = 0 for a box endpoint


def _mul(*boxes: Box) -> Box:
    out = boxes[0]
    for b in boxes[1:]:
        out = _hull(*[_times(x, y) for x in out for y in b])
    return out


def _div(a: Box, b: Box) -> Box:
    """a / b, elementwise; anything where b's box holds 0."""
    lo, hi = b
    straddle = (lo <= 0) & (hi >= 0)
    q_lo, q_hi = _mul(a, (1 / np.where(straddle, 1.0, hi), 1 / np.where(straddle, 1.0, lo)))
    return np.where(straddle, -np.inf, q_lo), np.where(straddle, np.inf, q_hi)


def _even(lo: np.ndarray, hi: np.ndarray, f) -> Box:
    """f even and increasing on [0, inf) (x², |x|)."""
    straddle = (lo <= 0) & (hi >= 0)
    return np.where(straddle, 0.0, np.minimum(f(lo), f(hi))), np.maximum(f(lo), f(hi))


def _switch(cond: Box, then: Box, other: Box) -> Box:
    sure, never = cond[0] > 0, cond[1] <= 0
    lo = np.where(sure, then[0], np.where(never, other[0], np.minimum(then[0], other[0])))
    hi = np.where(sure, then[1], np.where(never, other[1], np.maximum(then[1], other[1])))
    return lo, hi


def _compare(a: Box, b: Box, strict: bool) -> Box:
    """Whether a > b (strict) or a >= b: 1 surely, 0 never, [0, 1] undecided."""
    sure = a[0] > b[1] if strict else a[0] >= b[1]
    never = a[1] <= b[0] if strict else a[1] < b[0]
    return np.where(sure, 1.0, 0.0), np.where(never, 0.0, 1.0)


def _equal(a: Box, b: Box) -> Box:
    same = (a[0] == a[1]) & (b[0] == b[1]) & (a[0] == b[0])
    apart = (a[1] < b[0]) | (b[1] < a[0])
    return np.where(same, 1.0, 0.0), np.where(apart, 0.0, 1.0)


def _power(a: Box, e: Box) -> Box:
    lo, hi = a
    if np.any(e[0] != e[1]) or np.any(np.mod(e[0], 1) != 0):
        if np.all(lo >= 0) and np.all(e[0] == e[1]):
            return _hull(lo ** e[0], hi ** e[0])
        return np.full(np.shape(lo), -np.inf), np.full(np.shape(lo), np.inf)
    k = e[0]
    if np.all(np.mod(k, 2) == 0):
        return _even(lo, hi, lambda x: np.abs(x) ** k)
    return _hull(lo ** k, hi ** k)  # odd integer powers increase


def _digamma(a: Box) -> Box:
    lo, hi = a
    return np.where(lo > 0, scipy.special.digamma(lo), -np.inf), np.where(lo > 0, scipy.special.digamma(hi), np.inf)


def _increasing(f):
    return lambda a: (f(a[0]), f(a[1]))


_RULES = {
    ps.Add: lambda *bs: (sum(b[0] for b in bs), sum(b[1] for b in bs)),
    ps.Sub: lambda a, b: (a[0] - b[1], a[1] - b[0]),
    ps.Neg: lambda a: (-a[1], -a[0]),
    ps.Mul: _mul,
    ps.TrueDiv: _div,
    ps.Reciprocal: lambda a: _div((np.ones(()), np.ones(())), a),
    ps.Sqr: lambda a: _even(*a, np.square),
    ps.Abs: lambda a: _even(*a, np.abs),
    ps.Pow: _power,
    ps.Switch: _switch,
    ps.Maximum: lambda a, b: (np.maximum(a[0], b[0]), np.maximum(a[1], b[1])),
    ps.Minimum: lambda a, b: (np.minimum(a[0], b[0]), np.minimum(a[1], b[1])),
    ps.GE: lambda a, b: _compare(a, b, strict=False),
    ps.GT: lambda a, b: _compare(a, b, strict=True),
    ps.LE: lambda a, b: _compare(b, a, strict=False),
    ps.LT: lambda a, b: _compare(b, a, strict=True),
    ps.EQ: _equal,
    ps.NEQ: lambda a, b: (1 - _equal(a, b)[1], 1 - _equal(a, b)[0]),
    ps.AND: lambda a, b: (np.minimum(a[0], b[0]), np.minimum(a[1], b[1])),
    ps.OR: lambda a, b: (np.maximum(a[0], b[0]), np.maximum(a[1], b[1])),
    ps.Invert: lambda a: (1 - a[1], 1 - a[0]),
    ps.Second: lambda a, b: tuple(np.broadcast_to(x, np.broadcast_shapes(np.shape(a[0]), np.shape(x))) for x in b),
    ps.Identity: lambda a: a,
    ps.Cast: lambda a: a,
    ps.Exp: _increasing(np.exp),
    ps.Log: _increasing(np.log),
    ps.Log1p: _increasing(np.log1p),
    ps.Expm1: _increasing(np.expm1),
    ps.Sqrt: _increasing(np.sqrt),
    psm.Sigmoid: _increasing(scipy.special.expit),
    psm.Softplus: _increasing(lambda x: np.logaddexp(0.0, x)),
    psm.Psi: _digamma,
}
