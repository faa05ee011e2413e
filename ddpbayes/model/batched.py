"""Indexing over a batch of configurations without PyTensor's Python loop (issue #42.3, DESIGN §2.3).

`vectorize_graph` turns an index into a batched array (a Categorical's `p[value]`, a chain's
`transition[previous]`) into a `Blockwise` of `Subtensor` / `AdvancedSubtensor`, which PyTensor
performs as a Python loop over the batch: a 3-state, 5-day chain summed over its 81
configurations spent most of its time there (and PyTensor's AdvancedSubtensor, with no C code,
still ~150 µs a call). `unblock_indexing` rewrites each such node as a one-hot product: x[i] =
Σ_l [i = l] x[l], a comparison, a switch and a sum over the indexed axes, every one an
elementwise or reduction op in C with its gradient; the configurations are then a batch
dimension of ordinary array operations. (A switch, not a product: a log-probability of -inf
times zero would be nan. An index out of range gives 0 where numpy raises: the configurations
enumerated lie in the variables' supports.)

`checks_per_point` turns PyMC's parameter checks into their -inf switches before a batch axis is
added: compiled after `vectorize_graph`, a check would become one `all` over the whole batch, and
one point's invalid parameters would set every point of the call to -inf.
"""

from __future__ import annotations

import pytensor.tensor as pt
from pymc.logprob.utils import local_check_parameter_to_ninf_switch
from pytensor.compile.ops import ViewOp
from pytensor.graph.replace import clone_replace
from pytensor.graph.rewriting.basic import in2out, node_rewriter
from pytensor.graph.rewriting.utils import rewrite_graph
from pytensor.scalar import ScalarType
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.subtensor import AdvancedSubtensor, Subtensor


def unblock_indexing(outputs: list) -> list:
    """`outputs` with every batched integer indexing done by a one-hot product (in place: the
    graph must be new, as `vectorize_graph`'s is)."""
    return list(rewrite_graph(outputs, include=(), custom_rewrite=in2out(_unblock), clone=False))


def checks_per_point(outputs: list) -> list:
    """`outputs` (a new graph) with each parameter check that PyMC replaces by -inf written as that
    switch (PyMC's own rewrite), so that vectorising it checks each point's parameters alone."""
    outputs = clone_replace(outputs)  # the model's own graph stays as it is
    return list(rewrite_graph(outputs, include=(), custom_rewrite=in2out(local_check_parameter_to_ninf_switch),
                              clone=False))


def simplified(outputs: list) -> list:
    """`outputs` (a new graph) after PyTensor's FAST_COMPILE rewrites, before a batch axis is added."""
    return list(rewrite_graph(outputs, include=("fast_compile",), clone=False))


@node_rewriter([Blockwise])
def _unblock(fgraph, node):
    """Blockwise(x[i_1, ..., i_m]) with integer indices of one core shape -> Σ over the indexed
    axes of x where every [i_j = l_j] holds; Blockwise(identity) -> x."""
    core = node.op.core_op
    x, *indices = node.inputs
    if isinstance(core, ViewOp):  # a Deterministic's identity: nothing to loop over
        return [x]
    if isinstance(core, Subtensor):
        if not indices or not all(isinstance(e, ScalarType) for e in core.idx_list):
            return None  # a slice: left as it is
        core_index = 0
    elif isinstance(core, AdvancedSubtensor):
        cores = {len(sig) for sig in node.op.inputs_sig[1:]}
        if not indices or len(cores) != 1:
            return None
        core_index = cores.pop()
    else:
        return None
    if not all(i.type.dtype.startswith(("int", "uint")) for i in indices):
        return None
    batch = node.op.batch_ndim(node)
    core_x = len(node.op.inputs_sig[0])
    if x.type.ndim == core_x:  # only the indices are batched: numpy's x[i_1, ..., i_m] is the loop
        return [_gather(x, [_pad(i, batch + core_index) for i in indices])]
    x = _pad(x, batch + core_x)
    sizes = [x.shape[batch + j] for j in range(len(indices))]
    for _ in range(core_index):  # x (B, 1.., n_1..n_m, rest): the index's own core axes first
        x = pt.shape_padaxis(x, batch)
    hit = None
    for j, (i, n) in enumerate(zip(indices, sizes)):
        i = _pad(i, batch + core_index)
        i = pt.switch(pt.lt(i, 0), i + n, i)  # numpy's negative indices
        level = pt.arange(n).reshape(tuple(-1 if d == j else 1 for d in range(core_x)))
        one = pt.eq(pt.shape_padright(i, core_x), level)
        hit = one if hit is None else pt.and_(hit, one)
    axes = tuple(range(batch + core_index, batch + core_index + len(indices)))
    return [pt.sum(pt.switch(hit, x, pt.zeros((), dtype=x.dtype)), axis=axes)]


def _gather(x, indices: list):
    """x[i_1, ..., i_m] for integer index arrays (broadcast together) into x's first m axes, as one
    AdvancedSubtensor1 (C code, and its gradient) over those axes flattened."""
    flat = None
    for j, i in enumerate(indices):
        i = pt.switch(pt.lt(i, 0), i + x.shape[j], i)  # numpy's negative indices
        flat = i if flat is None else flat * x.shape[j] + i
    rest = [x.shape[d] for d in range(len(indices), x.type.ndim)]
    rows = x.reshape((-1, *rest))[flat.ravel()]
    return rows.reshape((*[flat.shape[d] for d in range(flat.type.ndim)], *rest))


def _pad(v, ndim: int):
    """v with leading broadcastable axes up to `ndim` dimensions."""
    return pt.shape_padleft(v, ndim - v.type.ndim) if v.type.ndim < ndim else v
