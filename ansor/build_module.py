"""``ansor.build``: from tensors, a DAG or a tuned schedule to a callable native kernel.

A kernel built before - same computation, schedule, name, pre-packed arguments and code (this
file, ``compute``, ``sketch``, ``measure``) on the same toolchain - is read back from the
persistent compile cache (``measure.compile_cache``) instead of being lowered, generated and
compiled again: a network compiled twice costs its kernels once.
"""
from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Sequence, Union

from compute.compute_dag import ComputeDAG
from compute.tensor import Tensor
from sketch.loop_state import State
from sketch.layout_rewrite import check_positions, lower_pre_packed
from sketch.lower import lower
from sketch.transform_steps import steps_to_json

if TYPE_CHECKING:
    from measure.kernel import Kernel

Buildable = Union[Sequence[Tensor], ComputeDAG, State]


def _func_name(dag: ComputeDAG) -> str:
    outs = "_".join(op.name for op in dag.output_ops)
    return re.sub(r"\W", "_", outs)[:48] or "kernel"


@lru_cache(maxsize=1)
def _own_code() -> str:
    """A SHA-256 of this file: how ``build`` lowers is part of a cached kernel's key too."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def build(target: Buildable, name: str | None = None,
          layout_rewrite_inputs: Sequence[int] = (), cpu: "str | None" = None) -> "Kernel":
    """Compile ``target`` for this CPU (or for ``cpu``, a target name such as ``"x86-64-v3"``:
    ``measure.targets``; its kernel loads only where the CPU has the target's features) and
    return a callable ``Kernel``.

    ``target`` is a list of tensors (inputs and outputs in call order: built with the default
    schedule), a ComputeDAG (default schedule) or a State (a schedule, e.g. from
    ``task.apply_best``). The kernel takes one C-contiguous numpy array per argument and writes
    the outputs in place. A computation that reads a tensor out of range raises
    ``compute.access_bounds.OutOfBoundsError`` (see ``ComputeDAG.check_bounds``); indices read
    from tensors (a gather ``A[B[i]]``) are the caller's to keep in range.

    ``layout_rewrite_inputs``: argument positions of inputs the caller will pass pre-packed
    (constants, e.g. weights). A pack stage of the schedule copying one of them is left out of
    the kernel, which then takes the packed array at that position; ``kernel.packed_args`` lists
    them (``sketch.layout_rewrite.PackedArg``) and ``pack_array(original, spec)`` computes each.
    """
    if isinstance(target, State):
        state = target
    elif isinstance(target, ComputeDAG):
        state = State.initial(target)
    elif isinstance(target, (list, tuple)):
        state = State.initial(ComputeDAG(list(target)))
    else:
        raise TypeError(f"ansor.build takes a list of tensors, a ComputeDAG or a State, got "
                        f"{type(target).__name__}")
    # The kernel does not check its indices: a computation reading out of range must fail here,
    # not corrupt or crash the caller's process. Indices read from tensors depend on the arrays
    # of each call, so only the caller can keep those in range.
    state.dag.check_bounds(data_dependent=False)
    # LLVM starts only when something is built:
    from measure.targets import use_target  # noqa: PLC0415 - as said below

    with use_target(cpu):
        return _build(state, name, layout_rewrite_inputs)


def _build(state: State, name: str | None, layout_rewrite_inputs: Sequence[int]) -> "Kernel":
    from measure.compile_cache import cached, code_identity  # noqa: PLC0415 - LLVM starts only when something is built
    from measure.kernel import compile_object, compiled_from_bytes, compiled_to_bytes, load  # noqa: PLC0415 - LLVM, as above

    name = name or _func_name(state.dag)
    positions = (check_positions(layout_rewrite_inputs, len(state.dag.tensors), "layout_rewrite_inputs")
                 if layout_rewrite_inputs else ())
    made: list = []

    def make() -> bytes:
        if positions:
            func, packed = lower_pre_packed(state, positions, name)
        else:
            func, packed = lower(state, name), ()
        made.append(compile_object(func))
        made[-1].packed_args = packed
        return compiled_to_bytes(made[-1])

    # A kernel built before from the same computation, schedule and code is read back whole,
    # skipping lowering and code generation as well as LLVM (measure.compile_cache).
    try:
        text = json.dumps({"dag": state.dag.to_json(), "steps": steps_to_json(state.steps), "name": name,
                           "rewrite": list(positions), "code": code_identity(), "build": _own_code()},
                          sort_keys=True)
    except (TypeError, ValueError):  # a computation without a JSON form: built every time
        make()
        return load(made[-1])
    compiled, hit = cached("kernel", text, make, compiled_from_bytes)
    return load(compiled if hit else made[-1])  # a fresh build keeps its compile timings
