"""Einsum, ONNX ``Einsum``: any equation of one or more operands (``"bhid,bhjd->bhij"``,
``"ij,jk,kl->il"``, ``"bn,anm,bm->ba"``, ``"...ij,...jk->...ik"``, implicit output, repeated labels
for diagonals and traces, labels in both cases).

General semantics, one computation: the output is the sum, over every label not in the output,
of the product of the operands, each read at its labels' indices. That is one ``te.compute``
with one ``te.sum`` over the contracted labels (none for a transpose or an outer product), which
the tuner tiles like a matmul. Ellipsis dimensions are right-aligned across operands and
broadcast (size 1 against n); other labels must have one size. Labels from the model never reach
generated code: the reduce axes are named ``k0, k1, ...``.
"""
from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

import numpy as np

from compute import te
from compute.expr import const

from ..ir_types import GraphError, TensorType
from ..onnx_export import Exporter, plain_export
from ..op_rules import OpDef, register_op, same_dtype
from ..te_ops import LowerCtx
from ..torch_peer import plain_torch

_LETTERS = frozenset(string.ascii_letters)


class Equation:
    """A parsed equation for operands of known shapes: each operand's labels (ellipsis dims as
    labels ``...0``, ``...1``, ... counted over the broadcast ellipsis), the output's labels, the
    contracted labels and every label's size."""

    def __init__(self, equation: str, shapes: Sequence[Sequence[int]]):
        eq = equation.replace(" ", "")
        lhs, arrow, rhs = eq.partition("->")
        terms = lhs.split(",")
        if len(terms) != len(shapes):
            raise GraphError(f"einsum: equation {equation!r} has {len(terms)} operand(s), the node {len(shapes)}")
        parsed = [_split_term(t, equation) for t in terms]
        ranks = []
        for (before, ell, after), shape in zip(parsed, shapes):
            e = len(shape) - len(before) - len(after)
            if e < 0 or (not ell and e):
                raise GraphError(f"einsum: term {''.join(before) + ('...' if ell else '') + ''.join(after)!r} "
                                 f"of {equation!r} does not match an operand of rank {len(shape)}")
            ranks.append(e)
        n_ell = max(ranks, default=0)
        self.inputs = [tuple(before) + tuple(f"...{n_ell - e + j}" for j in range(e)) + tuple(after)
                       for (before, _, after), e in zip(parsed, ranks)]
        self.sizes: dict[str, int] = {}
        for labels, shape in zip(self.inputs, shapes):
            for label, n in zip(labels, shape):
                old = self.sizes.setdefault(label, n)
                if old == n:
                    continue
                if not label.startswith("...") or 1 not in (old, n):
                    raise GraphError(f"einsum: label {label!r} of {equation!r} has sizes {old} and {n}")
                self.sizes[label] = max(old, n)
        ells = tuple(f"...{j}" for j in range(n_ell))
        if arrow:
            before, ell, after = _split_term(rhs, equation)
            if n_ell and not ell:
                raise GraphError(f"einsum: the output of {equation!r} must keep the ellipsis ('...')")
            self.output = tuple(before) + ells + tuple(after)
            missing = [label for label in before + after if label not in self.sizes]
            if missing or len(set(self.output)) != len(self.output):
                raise GraphError(f"einsum: output labels of {equation!r} must be distinct and appear in an operand")
        else:
            counts: dict[str, int] = {}
            for labels in self.inputs:
                for label in labels:
                    counts[label] = counts.get(label, 0) + 1
            self.output = ells + tuple(sorted(lb for lb, c in counts.items() if c == 1 and lb in _LETTERS))
        self.reduced = tuple(lb for lb in self.sizes if lb not in self.output)
        self.shape = tuple(self.sizes[lb] for lb in self.output)
        self.equation = eq

    def letters(self) -> dict[str, str]:
        """Every label as one letter (for numpy's einsum): ellipsis dims take unused letters."""
        free = iter(sorted(_LETTERS - set(self.sizes)))
        try:
            return {lb: lb if lb in _LETTERS else next(free) for lb in self.sizes}
        except StopIteration:
            raise GraphError(f"einsum: {self.equation!r} uses more than {len(_LETTERS)} labels") from None


def _split_term(term: str, equation: str) -> tuple[list[str], bool, list[str]]:
    before, ell, after = term.partition("...")
    if not all(c in _LETTERS for c in before + after):
        raise GraphError(f"einsum: equation {equation!r}: labels must be letters, with at most one '...' per term")
    return list(before), bool(ell), list(after)


def _infer(ts: Sequence[TensorType], attrs: dict[str, Any]) -> tuple[TensorType, dict[str, Any]]:
    eq = attrs.get("equation")
    if not isinstance(eq, str):
        raise GraphError(f"einsum: equation must be a string, got {eq!r}")
    dtype = same_dtype(ts)
    if dtype == "bool":
        raise GraphError("einsum: operands must be numeric, got bool")
    parsed = Equation(eq, [t.shape for t in ts])
    return TensorType(parsed.shape, dtype), {"equation": parsed.equation}


def _reference(*xs: np.ndarray, equation: str) -> np.ndarray:
    p = Equation(equation, [x.shape for x in xs])
    name = p.letters()
    ops = []
    for x, labels in zip(xs, p.inputs):
        # a broadcast ellipsis dim of size 1 is stretched (numpy's einsum would refuse the letter)
        x = np.broadcast_to(x, tuple(p.sizes[lb] for lb in labels)) if labels else x
        ops.append(x.astype(np.float64) if x.dtype.kind == "f" else x)
    spec = ",".join("".join(name[lb] for lb in labels) for labels in p.inputs)
    out = np.einsum(f"{spec}->{''.join(name[lb] for lb in p.output)}", *ops, optimize=len(ops) > 2)
    return np.asarray(out).astype(xs[0].dtype)


def _lower(ctx: LowerCtx, node: Any, xs: list[Any]) -> Any:
    p = Equation(node.attrs["equation"], [x.shape for x in xs])
    ks = {lb: te.reduce_axis((0, p.sizes[lb]), f"k{j}") for j, lb in enumerate(p.reduced)}

    def body(*i: Any) -> Any:
        at = {**dict(zip(p.output, i)), **ks}
        prod = None
        for x, labels in zip(xs, p.inputs):
            v = x[tuple(const(0) if n == 1 and p.sizes[lb] != 1 else at[lb] for lb, n in zip(labels, x.shape))]
            prod = v if prod is None else prod * v
        return te.sum(prod, axis=list(ks.values())) if ks else prod

    return te.compute(p.shape, body, name=ctx.name("einsum"), tag="einsum")


def _export(e: Exporter, node: Any, xs: list[str]) -> str:
    return e.node("Einsum", xs, equation=node.attrs["equation"])


def _import(imp: Any, node: Any, attrs: dict[str, Any]) -> None:
    eq = attrs["equation"]
    eq = eq.decode("utf-8", "replace") if isinstance(eq, bytes) else str(eq)
    out = node.output[0]
    imp.set_plain(out, imp.b.add_node("einsum", [imp.plain(i) for i in node.input], {"equation": eq}, out))


EINSUM = register_op(OpDef(
    "einsum", (1, 1 << 10), "out_elemwise_fusable", _infer,
    "Einstein summation: sum over the labels not in the output of the operands' product",
    reference=_reference, lower=_lower, export=plain_export(_export),
    torch=plain_torch(lambda r, n, *xs: r.torch.einsum(n.attrs["equation"], *xs)), onnx={"Einsum": _import}))
