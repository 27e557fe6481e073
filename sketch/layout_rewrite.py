"""Weight layout rewrite: a packed input computed once, outside the kernel that reads it.

A schedule that packs an input (``PackStep``, a stage ``<name>.pack`` with
``pack[d // v, (other dims), d % v] = src[..., d, ...]``, zero where ``d >= n``) copies it on
every call. When that input is a constant of the network (a conv's or a dense layer's weight),
the copy is the same on every call: the network compiler transforms the constant once, at
compile time, and the kernel takes the packed array as its argument in place of the original
(TVM's auto-scheduler calls this layout rewrite; its ``LayoutRewriteOption`` chooses between
inserting the transform stage and expecting pre-transformed inputs). The tuner measures such
candidates the same way, with the pack outside the timed kernel, so the search ranks them as
they will run.

``rewritable_packs(state, positions)`` says which pack stages of a state qualify: a computed
(not inlined) pack stage that reads a placeholder directly, that placeholder being one of the
allowed argument ``positions`` and read by nothing else, and no stage computed at one of the
pack's loops. ``lower_pre_packed`` lowers the kernel without those stages; ``pack_array`` is the
exact transform in numpy index math (zero padding included), checked against the pack stage's
own definition by the tests.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from compute import expr as E
from compute import loop_ir as L
from compute.tensor import ComputeOp, PlaceholderOp

from .lower import lower

if TYPE_CHECKING:
    from .loop_state import State

__all__ = ["PackedArg", "check_positions", "lower_pre_packed", "pack_array", "pack_arguments",
           "rewritable_packs"]


@dataclass(frozen=True)
class PackedArg:
    """One kernel argument given pre-packed: argument ``position`` (in the DAG's tensor order)
    takes ``pack_array(original, self)`` of shape ``packed_shape`` instead of the original of
    shape ``src_shape``. Plain data: it travels with a compiled kernel to a measuring worker."""

    position: int
    name: str  # the original input's name
    src_shape: tuple[int, ...]
    dim: int  # the blocked dimension of the original
    block: int  # v, the block length
    dtype: str

    @property
    def packed_shape(self) -> tuple[int, ...]:
        n = self.src_shape[self.dim]
        rest = tuple(s for d, s in enumerate(self.src_shape) if d != self.dim)
        return (-(-n // self.block),) + rest + (self.block,)

    def to_json(self) -> list:
        return [self.position, self.name, list(self.src_shape), self.dim, self.block, self.dtype]


def check_positions(positions: Iterable[int], n_args: int, what: str = "layout_rewrite") -> tuple[int, ...]:
    """``positions`` as a sorted tuple of distinct argument indices in ``0..n_args-1``; a
    ValueError/TypeError saying what is wrong otherwise (they may come from a record file)."""
    if isinstance(positions, (str, bytes)) or not isinstance(positions, Iterable):
        raise TypeError(f"{what} must be a list of argument positions, got {type(positions).__name__}")
    out = []
    for p in positions:
        if isinstance(p, bool) or not isinstance(p, (int, np.integer)):
            raise TypeError(f"{what}: argument positions are ints, got {p!r}")
        if not 0 <= int(p) < n_args:
            raise ValueError(f"{what}: argument position {int(p)} outside 0..{n_args - 1}")
        out.append(int(p))
    if len(set(out)) != len(out):
        raise ValueError(f"{what}: argument positions repeat: {out}")
    return tuple(sorted(out))


def _pack_layout(op: ComputeOp) -> tuple[PlaceholderOp | None, int, int] | None:
    """(source op, blocked dimension, block length) of a pack stage's op, read off its body
    (``PackStep``'s form: a load, or a select of it and 0 when the last block is padded); None
    if the op is not of that form."""
    if op.tag != "pack" or len(op.axes) < 2 or op.reduce_axes:
        return None
    body = op.body
    if isinstance(body, E.Select):
        if not (isinstance(body.false_value, E.Const) and body.false_value.value == 0):
            return None
        body = body.true_value
    if not isinstance(body, E.TensorLoad):
        return None
    src = body.tensor
    if len(body.indices) != len(op.axes) - 1 or len(src.shape) != len(body.indices):
        return None
    outer, inner = op.axes[0], op.axes[-1]
    rest = list(op.axes[1:-1])
    dim = None
    for d, ix in enumerate(body.indices):
        if rest and ix is rest[0]:
            rest.pop(0)
        elif dim is None:
            dim = d
        else:
            return None
    if dim is None or rest:
        return None
    used = {id(x) for x in E.post_order(body.indices[dim]) if isinstance(x, E.Var)}
    if used != {id(outer), id(inner)}:
        return None
    v = inner.extent
    n = src.shape[dim]
    if outer.extent != -(-n // v):
        return None
    return src.op, dim, v  # type: ignore[return-value]


def rewritable_packs(state: "State", positions: Iterable[int]) -> dict[int, PackedArg]:
    """The pack stages of ``state`` that can be given pre-packed, by stage id: each copies, into
    ``PackStep``'s blocked layout, a placeholder at one of the argument ``positions`` that
    nothing else reads; the stage is computed (not inlined) and nothing is computed at its loops."""
    allowed = set(positions)
    if not allowed:
        return {}
    tensors = state.dag.tensors
    position_of = {id(t.op): k for k, t in enumerate(tensors)}
    producer_of = state.producer_map()
    attached_to = {s.attach[0] for s in state.stages if s.compute_at == "iter" and s.attach is not None}
    out: dict[int, PackedArg] = {}
    for sid, st in enumerate(state.stages):
        op = st.op
        if not isinstance(op, ComputeOp) or op.tag != "pack" or st.compute_at == "inline":
            continue
        if sid in attached_to:
            continue
        layout = _pack_layout(op)
        if layout is None:
            continue
        src_op, dim, v = layout
        p = producer_of.get(id(src_op.output))
        if p is None or not isinstance(state.stages[p].op, PlaceholderOp):
            continue
        pos = position_of.get(id(state.stages[p].op))
        if pos is None or pos not in allowed:
            continue
        if state.consumers(p) != [sid]:
            continue  # read elsewhere too: the original stays an argument
        src = state.stages[p].op.output
        out[sid] = PackedArg(pos, src.name, tuple(src.shape), dim, int(v), str(src.dtype))
    return out


def lower_pre_packed(state: "State", positions: Iterable[int], name: str = "default_function"
                     ) -> tuple[L.PrimFunc, tuple[PackedArg, ...]]:
    """The kernel of ``state`` with every ``rewritable_packs`` stage left out and its packed
    array taken as the argument in place of the original, and what each such argument holds
    (empty: the plain kernel, nothing to rewrite)."""
    packs = rewritable_packs(state, positions)
    func = lower(state, name, {sid: p.position for sid, p in packs.items()})
    return func, tuple(sorted(packs.values(), key=lambda p: p.position))


def pack_array(arr: np.ndarray, spec: PackedArg) -> np.ndarray:
    """``arr`` (of ``spec.src_shape``) in the packed layout: a new C-contiguous array with
    ``out[d // v, (other dims), d % v] = arr[..., d, ...]`` and zeros where ``d`` passes the
    extent."""
    a = np.asarray(arr)
    if tuple(a.shape) != spec.src_shape:
        raise ValueError(f"pack of {spec.name}: expected shape {list(spec.src_shape)}, got {list(a.shape)}")
    dim, v = spec.dim, spec.block
    n = a.shape[dim]
    nb = -(-n // v)
    if nb * v != n:
        pad = [(0, 0)] * a.ndim
        pad[dim] = (0, nb * v - n)
        a = np.pad(a, pad)  # zeros
    a = a.reshape(a.shape[:dim] + (nb, v) + a.shape[dim + 1:])
    a = np.moveaxis(np.moveaxis(a, dim + 1, -1), dim, 0)
    return np.ascontiguousarray(a)


def pack_arguments(args: Sequence[np.ndarray], specs: Sequence[PackedArg]) -> list[np.ndarray]:
    """``args`` (the original kernel arguments, in the DAG's order) with each packed one replaced."""
    out = list(args)
    for spec in specs:
        out[spec.position] = pack_array(out[spec.position], spec)
    return out
