"""Loop IR -> textual LLVM IR for the host CPU.

``codegen(func)`` returns a module with one external function
``void @<name>(ptr noalias nocapture %arg0, ...)`` taking the parameter buffers in order. Text is
emitted directly (no llvmlite.ir objects): it is fast and gives full control over vector types,
fast-math flags and loop metadata.

Design, in short:

- Addresses are computed in i64. Integer index expressions built only from loop variables,
  constants and + - * // % min max (and int32/int64 casts) are evaluated in i64 with ``nsw``
  wherever they feed an address or a comparison: the lowering guarantees every access is in
  bounds, so no intermediate overflows, and i64 arithmetic lets SCEV and the vectoriser reason
  about strides. Stored integer values keep their exact (wrapping) dtype semantics.
- ``vectorized`` loops become straight-line SIMD over ``<lanes x T>`` vectors of the loop's
  exact extent (chunks of 64 lanes above 64; the backend legalises odd widths). Per access the
  coefficient of the lane variable in the flattened offset picks the instruction: 1 -> vector
  load/store, 0 -> scalar load + splat, other constants or non-affine offsets -> gather
  (scatter for stores). A lane-dependent ``select`` whose branches load runs those loads under a
  mask (masked load / gather), which makes the padding pattern ``select(i >= 1, A[i-1], 0)``
  safe; a lane-dependent ``if`` (the tail guard of a non-divisible split) runs both sides with
  masked loads and stores. Bodies that cannot be vectorised this way without changing the
  sequential semantics (nested loops, allocations, a store not injective in the lane, or a
  buffer both written and accessed at a different element) become a plain scalar loop:
  correctness first; LLVM's O3 loop vectoriser still gets its chance.
- ``unrolled`` loops carry ``llvm.loop.unroll.full``; ``serial`` ones are plain counted loops.
- ``parallel`` loops are outlined into an internal function taking every live buffer pointer
  (``noalias``) and loop-variable value plus ``[begin, end)``; a trampoline ``(closure, begin,
  end)`` unpacks a closure and calls it; the caller runs ``ansor_parallel_for(tramp, closure,
  extent, @__ansor_num_threads)``, the persistent thread pool of ``measure.thread_pool``, which
  hands chunks of the range to its threads dynamically.
- ``Allocate``: buffers up to 64 KiB become entry-block allocas of the enclosing function (so
  SROA/mem2reg can keep small accumulators in registers, and each parallel worker gets its own);
  larger ones are heap workspaces taken at function entry and given back at the exit (a padded
  conv input of ~1 MB would overflow a worker thread's stack), cached per site across calls
  (``workspace``): allocating and freeing them per call cost page faults on every call.
- Float ``fadd``/``fsub``/``fmul`` carry ``contract`` so multiply-add becomes FMA. The one other
  fast-math flag is ``reassoc`` on the combining operation of a reduction update
  (``acc[i] = acc[i] + x``): the order of a sum is unspecified (numpy itself sums pairwise), and
  without it LLVM must keep a reduction over the innermost loop as one scalar chain, bound by
  the add latency (layer_norm's row sums ran 9x slower than PyTorch's). Everything else is exact.

Where each part lives: ``names`` (sanitised names, the kernel symbol), ``module`` (the module
text: header, declarations, globals, metadata), ``values`` (SSA values, LLVM types), ``emitter``
(one function's state, single instructions), ``affine`` (index analysis: lane dependence, affine
coefficients), ``expr`` (expressions), ``arith`` (floor division/modulo), ``cast`` (dtype
conversions), ``memory`` (loads, stores, masks, gathers), ``guarded_select`` (selects whose arms
load), ``loops`` (counted loops), ``stmt`` (statements), ``vectorize``, ``parallel`` (outlining,
trampolines, the pool's call), ``unroll`` (the unrolling limit), ``function`` (the wiring and
``codegen``). Each concept is an object handed the emitter and the collaborators it uses, never
a base class: ``function.statements`` builds them for one function.
"""
from __future__ import annotations

from .expr import reduction_update
from .function import codegen
from .names import MAX_HINT_LEN, MAX_SYMBOL_LEN, NUM_THREADS_GLOBAL, kernel_symbol, sanitize
from .stmt import ALLOCA_LIMIT_BYTES, FALLBACK_MARK, written_buffers
from .unroll import MAX_UNROLLED_COPIES, SERIAL_LOOP_COPIES, limit_unrolling
from .vectorize import MAX_VECTOR_LANES

__all__ = ["ALLOCA_LIMIT_BYTES", "FALLBACK_MARK", "MAX_HINT_LEN", "MAX_SYMBOL_LEN",
           "MAX_UNROLLED_COPIES", "MAX_VECTOR_LANES", "NUM_THREADS_GLOBAL", "SERIAL_LOOP_COPIES",
           "codegen", "kernel_symbol", "limit_unrolling", "reduction_update", "sanitize",
           "written_buffers"]
