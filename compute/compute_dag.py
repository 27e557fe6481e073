"""ComputeDAG: the computation as a DAG of operations, with the analyses the search needs.

A DAG is made from the list of tensors that form the kernel's arguments (inputs and outputs, in the
order the compiled kernel will take them). It orders the operations topologically, checks that every
input the computation reads is an argument, and computes per operation the facts the sketch rules
test (elementwise? reduction? strictly inlineable? needs multi-level tiling for data reuse?), the
FLOP count, a readable print and a stable workload key.

It is also where users start a schedule (``dag.init_state()``, ``dag.replay(steps)``,
``dag.lower(state)``), but schedules belong to the layer above (``sketch``), which this one must not
import. That layer registers itself as the DAG's *schedule backend* when it is imported
(``set_schedule_backend``, called by ``sketch/__init__.py``); the three methods delegate to it, so
there is one ``ComputeDAG`` class wherever a DAG is made, and without the schedule layer they say
what is missing.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Protocol, Sequence

from . import access_bounds
from . import expr as E
from . import expr_analysis as EA
from .dag_json import SCHEMA_VERSION, from_json, to_json  # noqa: F401 (SCHEMA_VERSION re-exported)
from .loop_ir import PrimFunc
from .tensor import ComputeOp, Operation, PlaceholderOp, Tensor

if TYPE_CHECKING:  # annotations only: the schedule types are the layer above's (see above)
    from sketch.loop_state import State
    from sketch.transform_steps import Step

# Computations (workload key, data_dependent) whose reads ``check_bounds`` found in range. The key
# hashes the whole computation without names, so its verdict holds for every DAG with that key;
# failures are not kept (their message names this DAG's tensors).
_BOUNDS_OK: set[tuple[str, bool]] = set()
_BOUNDS_OK_MAX = 4096

# Intrinsics that cost tens of cycles: inlining them into a tiled consumer would recompute them.
EXPENSIVE_FUNCS = frozenset({"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "pow"})


class ScheduleBackend(Protocol):
    """What the schedule layer provides to ``ComputeDAG``'s schedule entry points."""

    def init_state(self, dag: "ComputeDAG") -> "State": ...

    def replay(self, dag: "ComputeDAG", steps: Sequence["Step"]) -> "State": ...

    def lower(self, state: "State", name: str) -> PrimFunc: ...


_schedule_backend: ScheduleBackend | None = None


def set_schedule_backend(backend: ScheduleBackend) -> None:
    """Register the schedule layer (done once, by ``sketch`` when it is imported)."""
    global _schedule_backend
    _schedule_backend = backend


def _backend(method: str) -> ScheduleBackend:
    if _schedule_backend is None:
        raise RuntimeError(f"ComputeDAG.{method} needs the schedule layer, which registers itself "
                           "when imported: import sketch (or ansor) first")
    return _schedule_backend


@dataclass
class OpInfo:
    """Facts about one operation, computed once per DAG."""

    is_injective: bool = False        # a compute with no reduction
    has_reduce: bool = False
    has_branch: bool = False          # contains a select / if_then_else
    has_expensive_op: bool = False    # calls exp/log/tanh/... (not worth recomputing)
    is_simple_access: bool = False    # every read indexes with bare axes, no duplicates, in order
    is_elementwise: bool = False      # injective and every read is an exact axis-for-axis match
    is_strictly_inlineable: bool = False
    needs_multi_level_tiling: bool = False
    is_output: bool = False           # no consumer inside the DAG
    producers: list[Operation] = field(default_factory=list)
    consumers: list[Operation] = field(default_factory=list)
    # every access of each input tensor: tensor op -> list of index tuples
    reads: dict[Operation, list[tuple[E.Expr, ...]]] = field(default_factory=dict)


class ComputeDAG:
    """A computation given by its argument tensors (inputs and outputs, in call order)."""

    def __init__(self, tensors: Sequence[Tensor] | "ComputeDAG"):
        if isinstance(tensors, ComputeDAG):
            tensors = tensors.tensors
        if isinstance(tensors, Tensor):
            tensors = [tensors]
        tensors = list(tensors)
        if not tensors:
            raise ValueError("ComputeDAG needs at least one tensor")
        for t in tensors:
            if not isinstance(t, Tensor):
                raise TypeError(f"ComputeDAG takes tensors, got {t!r} (type {type(t).__name__})")
        if len({id(t) for t in tensors}) != len(tensors):
            dup = [t.name for t in tensors if sum(x is t for x in tensors) > 1][0]
            raise ValueError(f"tensor {dup!r} appears twice in the argument list")
        self.tensors: list[Tensor] = tensors
        self.ops: list[Operation] = _topo_order([t.op for t in tensors])
        args = {id(t.op) for t in tensors}
        for op in self.ops:
            if isinstance(op, PlaceholderOp) and id(op) not in args:
                raise ValueError(
                    f"placeholder {op.name!r} is read by the computation but is not in the "
                    "argument list; pass it to ComputeDAG / build"
                )
        if not any(isinstance(op, ComputeOp) for op in self.ops):
            raise ValueError("the argument list contains no compute; nothing to build")
        self.op_index = {op: i for i, op in enumerate(self.ops)}
        self.info: dict[Operation, OpInfo] = _analyse(self.ops)
        # Provably out-of-range reads are rejected here; the rest wait for check_bounds().
        self.unproven_accesses: list[access_bounds.Access] = access_bounds.analyse(self.ops)
        self._bounds_checked = {True: not self.unproven_accesses, False: not self.unproven_accesses}
        self._key: str | None = None

    # ---- facts ---------------------------------------------------------------------------------
    @property
    def compute_ops(self) -> list[ComputeOp]:
        return [op for op in self.ops if isinstance(op, ComputeOp)]

    @property
    def placeholders(self) -> list[PlaceholderOp]:
        return [op for op in self.ops if isinstance(op, PlaceholderOp)]

    @property
    def output_ops(self) -> list[Operation]:
        return [t.op for t in self.tensors if isinstance(t.op, ComputeOp)]

    @property
    def flop_count(self) -> float:
        return float(sum(op_flops(op) for op in self.compute_ops))

    def check_bounds(self, data_dependent: bool = True) -> None:
        """Raise ``OutOfBoundsError`` if the computation reads any tensor out of range.

        Reads proven in range at construction cost nothing; the others are decided exactly once
        per computation (see ``compute.access_bounds``): a DAG rebuilt again (from each record
        of a log, by each reader) is not checked again. Indices computed from tensor values are checked
        on the tuner's random inputs, unless ``data_dependent`` is False (building: the caller's
        arrays decide them). Building and tuning call this first, because a compiled kernel does
        not check its indices.
        """
        if not self._bounds_checked[data_dependent]:
            key = self.workload_key
            if (key, data_dependent) not in _BOUNDS_OK and (key, True) not in _BOUNDS_OK:
                access_bounds.check_unproven(self, self.unproven_accesses, data_dependent)
                if len(_BOUNDS_OK) >= _BOUNDS_OK_MAX:
                    _BOUNDS_OK.clear()
                _BOUNDS_OK.add((key, data_dependent))
            self._bounds_checked[data_dependent] = True
            if data_dependent:
                self._bounds_checked[False] = True

    def elementwise_match(self, producer: Operation, consumer: Operation) -> bool:
        """True if ``consumer`` reads ``producer`` only at its own index, shapes equal.

        This is the condition for fusing an elementwise consumer into a tiled producer: the consumer
        can then follow the producer's tiling loop for loop.
        """
        if not isinstance(consumer, ComputeOp) or self.info[consumer].has_reduce:
            return False
        if tuple(producer.shape) != tuple(consumer.shape):
            return False
        accesses = self.info[consumer].reads.get(producer, [])
        return bool(accesses) and all(
            len(idx) == len(consumer.axes) and all(i is a for i, a in zip(idx, consumer.axes))
            for idx in accesses
        )

    @property
    def workload_key(self) -> str:
        """Same computation and shapes => same key, in any process. Names do not matter."""
        if self._key is None:
            canon = json.dumps(to_json(self, with_names=False), sort_keys=True, separators=(",", ":"))
            self._key = hashlib.sha256(canon.encode()).hexdigest()[:32]
        return self._key

    def __str__(self) -> str:
        lines = []
        for op in self.ops:
            if isinstance(op, PlaceholderOp):
                lines.append(f"{op.name} = PLACEHOLDER {list(op.shape)}"
                             + ("" if op.dtype == "float32" else f" {op.dtype}"))
                continue
            assert isinstance(op, ComputeOp)
            head = f"{op.name}({', '.join(a.name for a in op.axes)})"
            body = op.body
            if isinstance(body, E.Reduce):
                sym = {"sum": "+=", "max": "max=", "min": "min="}[body.combiner]
                w = "" if body.where is None else f"  where {body.where}"
                lines.append(f"{head} {sym} {body.source}{w}")
            else:
                lines.append(f"{head} = {body}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"ComputeDAG({', '.join(t.name for t in self.tensors)}; key={self.workload_key[:8]})"

    def to_json(self) -> dict:
        return to_json(self)

    # ---- schedules (delegated to the schedule layer, see the module docstring) ----------------
    def init_state(self) -> "State":
        """The default schedule: every operation computed at root, loops in declaration order."""
        return _backend("init_state").init_state(self)

    def replay(self, steps: Iterable["Step"]) -> "State":
        """Rebuild the state that ``steps`` produce from the initial state (deterministic)."""
        return _backend("replay").replay(self, list(steps))

    def lower(self, state: "State | None" = None, name: str = "default_function") -> PrimFunc:
        """The loop IR of ``state`` (default: the initial state)."""
        backend = _backend("lower")
        return backend.lower(state if state is not None else backend.init_state(self), name)

    @classmethod
    def from_json(cls, data: dict) -> "ComputeDAG":
        return cls(from_json(data))


def _topo_order(roots: Iterable[Operation]) -> list[Operation]:
    order: list[Operation] = []
    state: dict[int, int] = {}  # 1 = visiting, 2 = done
    for root in roots:
        stack: list[tuple[Operation, int]] = [(root, 0)]
        while stack:
            op, i = stack.pop()
            if state.get(id(op)) == 2:
                continue
            inputs = op.input_tensors
            if i == 0:
                state[id(op)] = 1
            if i < len(inputs):
                stack.append((op, i + 1))
                child = inputs[i].op
                if state.get(id(child)) is None:
                    stack.append((child, 0))
                continue
            state[id(op)] = 2
            order.append(op)
    return order


def _analyse(ops: list[Operation]) -> dict[Operation, OpInfo]:
    info = {op: OpInfo() for op in ops}
    for op in ops:
        for t in op.input_tensors:
            if op not in info[t.op].consumers:
                info[t.op].consumers.append(op)
            info[op].producers.append(t.op)
    for op in ops:
        inf = info[op]
        inf.is_output = not inf.consumers
        if isinstance(op, ComputeOp):
            _analyse_body(op, inf)
    return info


def analyse_op(op: ComputeOp) -> OpInfo:
    """The per-operation facts of ``op`` alone (no producer/consumer links): for stages that a
    schedule creates (cache_write, rfactor), which are not in any DAG."""
    inf = OpInfo()
    _analyse_body(op, inf)
    return inf


def _analyse_body(op: ComputeOp, inf: OpInfo) -> None:
    nodes = E.post_order(op.body)
    inf.has_reduce = isinstance(op.body, E.Reduce)
    inf.is_injective = not inf.has_reduce
    inf.has_branch = any(isinstance(n, E.Select) for n in nodes)
    inf.has_expensive_op = any(isinstance(n, E.Call) and n.name in EXPENSIVE_FUNCS for n in nodes)
    for n in nodes:
        if isinstance(n, E.TensorLoad):
            inf.reads.setdefault(n.tensor.op, []).append(n.indices)
    axis_pos = {id(a): k for k, a in enumerate(op.axes)}
    simple = True
    elementwise = True
    for accesses in inf.reads.values():
        for idx in accesses:
            pos = [axis_pos.get(id(i)) for i in idx]
            if any(p is None for p in pos) or len(set(pos)) != len(pos) or pos != sorted(pos):
                simple = False
            if len(idx) != len(op.axes) or any(i is not a for i, a in zip(idx, op.axes)):
                elementwise = False
    inf.is_simple_access = simple
    inf.is_elementwise = inf.is_injective and elementwise
    inf.is_strictly_inlineable = (inf.is_injective and not inf.has_branch
                                  and not inf.has_expensive_op and simple)
    inf.needs_multi_level_tiling = _needs_tiling(op, inf)


def _needs_tiling(op: ComputeOp, inf: OpInfo) -> bool:
    # Data reuse exists when an input is indexed without some output axis: the same input element
    # is then read for every value of that axis, and tiling keeps it in cache/registers.
    spatial = [a for a in op.axes if a.extent > 1]
    missing = 0
    for accesses in inf.reads.values():
        used: set[int] = set()
        for idx in accesses:
            for i in idx:
                used.update(id(v) for v in EA.free_vars(i))
        if any(id(a) not in used for a in spatial):
            missing += 1
    return missing >= 2 or (missing >= 1 and inf.has_reduce)


def op_flops(op: ComputeOp) -> int:
    """Floating-point (and integer value) operations of one compute, index arithmetic excluded:
    an operation counts only if a tensor value flows into it, so a select's test on loop
    variables (a pad's border, a transposed conv's tap past the kernel) costs nothing."""
    points = 1
    for a in op.axes:
        points *= a.extent
    body = op.body
    if isinstance(body, E.Reduce):
        for a in body.axes:
            points *= a.extent
        per = _count_ops(body.source) + 1  # + the combiner (the add of a sum)
    else:
        per = _count_ops(body)
    return points * per


def _count_ops(e: E.Expr) -> int:
    return E.fold(e, _ops_of_node)[0]  # type: ignore[index]


def _ops_of_node(e: E.Expr, kids: list) -> tuple[int, bool]:
    """(operations, whether a tensor value flows in) of one node, given its children's."""
    if isinstance(e, E.TensorLoad):
        return 0, True  # its indices are address arithmetic
    if isinstance(e, (E.Const, E.Var)):
        return 0, False
    data = any(k[1] for k in kids)
    if isinstance(e, E.Cast):
        return kids[0]
    if isinstance(e, E.Select):
        return kids[0][0] + max(kids[1][0], kids[2][0]), data
    return (1 if data else 0) + sum(k[0] for k in kids), data
