"""The emitter of one LLVM function, made of the concept classes, and ``codegen``: loop IR ->
the module text of one kernel."""
from __future__ import annotations

from compute import loop_ir as L

from .affine import IndexAnalysis
from .arith import Arithmetic
from .expr import Expressions
from .memory import MemoryAccess
from .module import _Module
from .names import kernel_symbol
from .parallel import ParallelOutliner
from .stmt import Statements, limit_unrolling
from .vectorize import Vectorizer


class _Function(Statements, Vectorizer, ParallelOutliner, MemoryAccess, Expressions, Arithmetic,
                IndexAnalysis):
    """Emits one LLVM function: the kernel itself or an outlined parallel body."""


def codegen(func: L.PrimFunc) -> str:
    """LLVM IR text of a module defining ``void @<kernel_symbol(name)>(ptr, ...)`` for ``func``."""
    name = kernel_symbol(func.name)
    mod = _Module(name)
    fn = _Function(mod, in_parallel=False)
    params = []
    for i, b in enumerate(func.params):
        ref = f"%arg{i}"
        params.append(f"ptr noalias nocapture {ref}")
        if b.uid in fn.buffers:
            raise ValueError(f"buffer {b.name} is passed twice to {func.name}")
        fn.buffers[b.uid] = (b, ref)
    fn.stmt(limit_unrolling(func.body))
    mod.functions.insert(0, fn.finish(f"define void @{name}({', '.join(params)}) {mod.attr_group} {{"))
    return mod.text()
