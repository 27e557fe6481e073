"""The emitters of one LLVM function wired together, and ``codegen``: loop IR -> the module text
of one kernel.

Each concept is its own object, handed the ones it uses; this is the one place that knows them
all. Where two of them call each other (expressions and the loads or selects inside them, a
vector body and its statements, a parallel loop and the function it is outlined into) the caller
hands over the callable or factory it needs, so no object is built half-wired."""
from __future__ import annotations

from compute import loop_ir as L

from .affine import IndexAnalysis
from .arith import Arithmetic
from .emitter import Emitter
from .expr import Expressions
from .guarded_select import GuardedSelect
from .loops import CountedLoops
from .memory import MemoryAccess
from .module import _Module
from .names import kernel_symbol
from .parallel import ParallelOutliner
from .stmt import Statements
from .unroll import limit_unrolling
from .vectorize import Vectorizer


def statements(fn: Emitter) -> Statements:
    """The statement emitter of ``fn`` with its collaborators (also the factory the parallel
    outliner builds an outlined function's emitters with)."""
    index = IndexAnalysis(fn)
    memory = MemoryAccess(fn, index)
    exprs = Expressions(fn, index, Arithmetic(fn), memory, GuardedSelect(fn, index))
    loops = CountedLoops(fn, exprs)
    return Statements(fn, exprs, memory, loops, Vectorizer(fn, index, exprs, loops),
                      ParallelOutliner(fn, statements))


def codegen(func: L.PrimFunc) -> str:
    """LLVM IR text of a module defining ``void @<kernel_symbol(name)>(ptr, ...)`` for ``func``."""
    name = kernel_symbol(func.name)
    mod = _Module(name)
    fn = Emitter(mod, in_parallel=False)
    params = []
    for i, b in enumerate(func.params):
        ref = f"%arg{i}"
        params.append(f"ptr noalias nocapture {ref}")
        if b.uid in fn.buffers:
            raise ValueError(f"buffer {b.name} is passed twice to {func.name}")
        fn.buffers[b.uid] = (b, ref)
    statements(fn).stmt(limit_unrolling(func.body))
    mod.functions.insert(0, fn.finish(f"define void @{name}({', '.join(params)}) {mod.attr_group} {{"))
    return mod.text()
