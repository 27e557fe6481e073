"""How each timing mode sets up a candidate's calls (``LocalRunner(cache=...)``, ``measure.runner``):
which arguments rotate through copies (``mode_timer``) and what runs between two calls
(``handed_off``).

By default (``"warm"``) every call runs on the same buffers, so after the
first one a kernel finds its weights, inputs and output in the caches: its cost alone, in a loop
(``enable_cpu_cache_flush``, TVM's option, makes only the first call of each repeat cold). In a
network every kernel reads what the kernels before it evicted: measured on MobileNet-V2, its
kernels timed warm sum to 6.8 ms and run 10.0 ms in the network, a 1280x1000 classifier 0.07 ms
alone and 0.34 in the network. ``"cold"`` times that condition: the worker makes further copies of
the whole argument set (inputs with their values, outputs zeroed, each on 64 bytes, in one slab
whose pages are all written and then evicted) and the native harness passes call ``i`` the set
``i mod K``, the cycle carried on across warm-up and repeats. Sets are rotated rather than flushed
so that no flush (milliseconds for a big set) sits inside the timed region and ``number`` can stay
above 1 for a kernel of microseconds. ``K`` (``timer.rotation_sets``) makes the K sets at least
twice the last-level cache of the CPUs the worker may run on (``target.last_level_cache_bytes``),
so the K-1 calls between two uses of a set evict it: at least 2, at most 65536 sets, at most 1 GiB
of copies (a set beyond that rotates alone: it is many times the cache and evicts its own start).
The output rotates with the inputs: written to cold memory, as in the network. The correctness
check is the first call, on the first set (the arrays of step 1). An input a network's previous
kernel has just written may still be cached there, so cold is the pessimistic end of the range,
warm the optimistic one (measured on MobileNet-V2: 1.40x above and 1.37x below the network).

``"network"`` times the condition in between that a network runs a kernel in: activations warm,
constants rotated. The kernel's constant arguments (``constants`` of ``measure.network_conditions``:
weights, biases, packed weights) rotate through K copies while its other inputs and its output
stay one set: its input was just written by the kernel before it, still in the caches, as in a warm
loop, while its weights were last read one inference ago and are still cached only if the rest of
the network touches less than the cache holds. So the K-1 other copies cover the task's
``footprint`` (``GraphTask.network_footprint_bytes``: the argument bytes of every other kernel of
one inference), up to the cold rule's twice the last-level cache and within its caps; with no
footprint known, that cold rule's bytes. A task without constants is timed as warm. Network
tuning defaults to it: MobileNet-V2's estimate from network-mode costs came within 3% of the
network (``benchmarks/kernel_conditions.py``; a shared machine, indicative).

``"handoff"`` is network mode with the activations handed off (``handed_off``): before every call,
outside the timed region, the worker's thread writes each activation input again (same values),
as the kernel before it in the network wrote it. The call then finds its input dirty, partly in
another core's cache (its pool threads take chunks the writer's core did not), where a warm loop
finds it clean in the core that read it last. Each call is timed alone (the harness with
``number`` 1, the copies and the Python loop between calls outside the clock).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .measure import COLD, WARM


def mode_timer(address: int, ptrs: list[int], args: list[np.ndarray], cache: str,
           constants: Sequence[int] = (), footprint: int | None = None) -> tuple[Any, Any]:
    """The native timer of one candidate and what it keeps alive: the further argument sets it
    rotates through, evicted from the caches once made. Cold: every argument rotates
    (``timer.rotation_sets`` sets in all, sized by this machine's last-level cache); network:
    only the arguments at ``constants``, through enough sets to cover ``footprint`` bytes (None:
    the cold rule's caches); warm: none."""
    from . import buffers, target, timer  # noqa: PLC0415

    rotating = range(len(args)) if cache == COLD else constants if cache != WARM else ()  # handoff: network's
    if not rotating:
        return timer.Timer(address, ptrs), None
    llc = target.last_level_cache_bytes()
    cover = None if cache == COLD else (footprint if footprint is not None else timer.COLD_LLC_FACTOR * llc)
    n = timer.rotation_sets(sum(args[p].nbytes for p in rotating), llc, cover)
    slab, copies = buffers.argument_copies([args[p] for p in rotating], n - 1)
    if slab.size and timer.can_flush():
        timer.flush(slab.ctypes.data, slab.nbytes)  # filled just now: the last ones were cached
    sets = []
    for copy in copies:
        ptr_set = list(ptrs)
        for p, c in zip(rotating, copy):
            ptr_set[p] = c
        sets.append(ptr_set)
    return timer.Timer(address, ptrs, rotate=sets), slab


def handed_off(timed: Any, activations: Sequence[np.ndarray]) -> Any:
    """``run(n)`` of handoff mode: before each call (outside the timed region, which stays the
    native harness's) ``activations`` are written again with their values, by this thread, as
    the kernel before it in the network wrote them: the call finds them dirty in this core's
    caches and, for the chunks its other threads take, in another core's. Network mode's warm
    loop instead finds them clean in the cache of the core that read them last, which is what
    kept a depthwise conv's estimate at half its time inside MobileNet-V2."""
    if not activations:
        return timed
    pristine = [np.array(a, copy=True) for a in activations]

    def run(number: int) -> float:
        total = 0.0
        for _ in range(max(1, int(number))):
            for dst, src in zip(activations, pristine):
                np.copyto(dst, src)
            total += timed(1)
        return total
    return run
