"""Compile a whole network into native kernels and run it: ``compile_network``, ``load_module``.

``compile_network(graph or plan, log_file)`` takes the network's plan (``plan.plan_network``:
fused and lowered once, or given by the caller who already made it), gives every fused subgraph
a schedule (``schedules.choose_schedules``: the best record of its task in ``log_file``, else
the untuned schedule, named loudly) and links them (``link``): one kernel per distinct schedule,
buffers, packed constants.

The result, a ``NetworkModule``, runs in a context (``module_contexts``) owning one buffer per
graph input and output and a planned pool of intermediate buffers: a buffer whose last reader has
run is reused for a later value of the same dtype and size. Each step's argument pointers are
computed once per context, so a run is a loop of native calls (``benchmark`` reports the dispatch
overhead beside the kernels' time). Concurrent runs take different contexts (thread-safe).

Weight layout rewrite (``layout_rewrite=True``, the default): a kernel whose schedule packs a
constant input (``PackStep``) is built without the pack and reads a copy of the constant packed
here, once (``sketch.layout_rewrite``); occurrences that pack one constant the same way share the
copy, different packings get their own.

``export(path)`` writes a directory: ``module.json`` (the plan, input/output types and boundary
dtypes, kernel argument specs), ``weights.npz`` (constants as the kernels read them - packed ones already packed -
loaded with ``allow_pickle=False``) and per kernel its LLVM IR and object code. ``load_module(path)``
rebuilds the module in a new process without records, graph or tuning: it parses JSON and arrays
only; the object code is loaded when it was compiled by this toolchain, else the IR is compiled
again. A module directory is code, like a shared library: load only modules you trust.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from compute import dtype as dt
from sketch.layout_rewrite import pack_array

from ..build_module import build
from .ir import Graph, GraphError, TensorType, display_name
from .ir_types import BOUNDARY_DTYPES, numpy_dtype
from .layout_tuning import TransformKey, chosen_layouts, transform_state
from .layouts import NHWC
from .memory_plan import check_graph_memory, plan_buffers
from .module_target import check_module_cpu, target_entry
from .module_benchmark import benchmark_calls
from .module_contexts import Context, ContextPool, default_limit, materialise, own_nbytes
from .plan import NetworkPlan, plan_network
from .schedules import UNTUNED_MODES, choose_schedules
from .tasks import constant_positions

FORMAT = "ansor-network-module"
VERSION = 1


@dataclass
class _Step:
    kernel: Any  # measure.kernel.Kernel
    args: list[int]  # buffer ids
    name: str  # subgraph name, for profiles
    transform: bool = False  # a layout transform between two groups (``layouts``)


class NetworkModule:
    """A compiled network. ``run(inputs)`` -> ``{output name: array}``. ``io_dtypes``: the
    graph's boundary dtypes (``Graph.io_dtypes``: float16/bfloat16 inputs and outputs computed
    as float32 inside), kept by ``export``/``load_module``.

    Threads: ``run`` may be called from many threads at once (a loaded module too). Each run
    takes a context from a pool: its own inputs, intermediates and outputs (``context_nbytes``
    each), constants shared read-only. At most ``max_concurrent_runs`` (settable) runs execute
    at once, others wait for a context: by default ``max(1, usable CPUs // kernel threads)``, as
    every kernel runs an OpenMP team of ``ANSOR_NUM_THREADS`` (default: every CPU) threads (the
    count it passes to ``GOMP_parallel``, fixed when it loads), so runs never oversubscribe the
    cores: by default one run at a time on all cores, with ``ANSOR_NUM_THREADS=1`` one per core.
    The pool grows lazily to that bound, so contexts take at most ``max_concurrent_runs *
    context_nbytes``; one thread reuses one context, taken for ~0.2 us a call. Measured on 2
    cores shared with other jobs (load 7-9), 8 threads x 5 calls of resnet-18 at 32x32, 2-thread
    kernels: CPU time per call the same at limits 1, 2 and 8 (17-20 ms, two runs), so the bound
    loses no work; wall-clock calls/s there followed the share of the machine won, not the
    limit. ``benchmark`` times one context."""

    def __init__(self, inputs: Mapping[str, TensorType], outputs: list[tuple[str, int]],
                 specs: list[tuple], consts: Mapping[str, np.ndarray], input_buffers: dict[str, int],
                 steps: list[_Step], io_dtypes: Mapping[str, str] | None = None):
        self.input_types = dict(inputs)
        self.io_dtypes = dict(io_dtypes or {})
        # The numpy dtypes a caller may give per input (its own; for a half-precision boundary
        # also that one) and the one each output is returned in.
        self._accepts = {n: {dt.to_numpy(t.dtype)} | ({numpy_dtype(self.io_dtypes[n])} if n in self.io_dtypes else set())
                         for n, t in self.input_types.items()}
        self._out_dtypes = {n: numpy_dtype(d) for n, d in self.io_dtypes.items()}
        self.output_names = [o for o, _ in outputs]
        self._outputs, self._specs = outputs, specs
        self._consts = dict(consts)
        self._input_buffers = input_buffers
        self._steps = steps
        first = Context(materialise(specs, consts), steps)
        self._buffers = first.buffers  # the first context's, for inspection
        for s in steps:  # check every call once, as a Kernel call would, then call raw
            s.kernel.arg_pointers(*[first.buffers[b] for b in s.args])
        self._contexts = ContextPool(self._new_context, default_limit(s.kernel for s in steps), first)

    @property
    def num_kernels(self) -> int:
        return len(self._steps)

    @property
    def target_name(self) -> str:  # the CPU the kernels were built for (``measure.targets``)
        return self._steps[0].kernel.compiled.target if self._steps else "native"

    @property
    def num_layout_transforms(self) -> int:
        """Kernel calls that only change an activation's layout (see ``compile_network``)."""
        return sum(1 for s in self._steps if s.transform)

    @property
    def max_concurrent_runs(self) -> int:
        """How many runs may execute at once (each in its own context); more wait for a context."""
        return self._contexts.limit

    @max_concurrent_runs.setter
    def max_concurrent_runs(self, n: int) -> None:
        self._contexts.limit = n

    @property
    def num_contexts(self) -> int:
        """Contexts made so far (at most ``max_concurrent_runs``)."""
        return self._contexts.made

    @property
    def context_nbytes(self) -> int:
        """Bytes of one context's own buffers (inputs, intermediates, outputs)."""
        return own_nbytes(self._specs)

    def _new_context(self) -> Context:
        # Constants (and views of them) are the first context's arrays, shared read-only.
        return Context(materialise(self._specs, self._consts, self._buffers), self._steps)

    def _set_inputs(self, buffers: list[np.ndarray], inputs: Mapping[str, Any]) -> None:
        if not isinstance(inputs, Mapping):
            raise TypeError(f"run takes a dict of input name -> array, got {type(inputs).__name__}")
        unknown = [n for n in inputs if n not in self.input_types]
        if unknown:
            raise GraphError("unknown input name(s): " + ", ".join(display_name(str(n)) for n in unknown)
                             + "; the network's inputs: " + ", ".join(display_name(n) for n in self.input_types))
        missing = [n for n in self.input_types if n not in inputs]
        if missing:
            raise GraphError("missing input(s): " + ", ".join(display_name(n) for n in missing))
        for name, t in self.input_types.items():
            arr = inputs[name]
            if not isinstance(arr, np.ndarray):
                arr = np.asarray(arr)
            if tuple(arr.shape) != t.shape:
                raise GraphError(f"input {display_name(name)}: expected shape {list(t.shape)}, got {list(arr.shape)}")
            if arr.dtype not in self._accepts[name]:
                want = " or ".join(sorted(str(d) for d in self._accepts[name]))
                raise GraphError(f"input {display_name(name)}: expected dtype {want}, got {arr.dtype}")
            buffers[self._input_buffers[name]][...] = arr  # a half-precision array: widened here

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Run on named numpy inputs (exact shape and dtype; an input with a float16/bfloat16
        boundary takes that dtype or float32); returns fresh output arrays (a half-precision
        output rounded to its boundary dtype)."""
        pool = self._contexts
        ctx = pool.take()
        try:
            buffers = ctx.buffers
            self._set_inputs(buffers, inputs)
            ctx.execute()
            return {name: buffers[b].astype(self._out_dtypes[name]) if name in self._out_dtypes
                    else buffers[b].copy() for name, b in self._outputs}
        finally:
            pool.give(ctx)

    def benchmark(self, repeat: int = 5, min_repeat_ms: float = 100, warmup_ms: float = 200) -> dict[str, float]:
        """Median seconds per inference (``mean``), the executor's own dispatch cost per inference
        (``overhead``: the same loop of calls with a native no-op in place of each kernel) and its
        share of ``mean`` (``overhead_share``); ``kernels`` is the number of kernel calls."""
        ctx = self._contexts.take()  # one context, as one thread's runs use
        try:
            return benchmark_calls(ctx.calls, repeat, min_repeat_ms, warmup_ms)
        finally:
            self._contexts.give(ctx)

    # ---- export / load --------------------------------------------------------------------
    def export(self, path: str | os.PathLike) -> Path:
        """Write the module to directory ``path`` (created); returns it."""
        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        kernels: dict[int, int] = {}
        kernel_list = []
        plan = []
        for s in self._steps:
            if id(s.kernel) not in kernels:
                kernels[id(s.kernel)] = len(kernel_list)
                kernel_list.append(s.kernel)
            plan.append({"kernel": kernels[id(s.kernel)], "args": s.args, "name": s.name,
                         "transform": s.transform})
        for i, k in enumerate(kernel_list):
            c = k.compiled
            (out / f"kernel{i}.ll").write_text(c.llvm_ir)
            (out / f"kernel{i}.o").write_bytes(c.object_code)
        meta = {
            "format": FORMAT, "version": VERSION,
            "inputs": [{"name": n, "shape": list(t.shape), "dtype": t.dtype, "buffer": self._input_buffers[n]}
                       for n, t in self.input_types.items()],
            "outputs": [{"name": n, "buffer": b} for n, b in self._outputs],
            "io_dtypes": self.io_dtypes,
            "buffers": [list(sp) for sp in self._specs],
            "kernels": [{"symbol": k.compiled.name, "toolchain": k.compiled.toolchain_key,
                         "args": [{"name": a.name, "shape": list(a.shape), "dtype": a.dtype, "written": a.written}
                                  for a in k.compiled.args]} for k in kernel_list],
            "steps": plan,
            "target": target_entry(self.target_name),
        }
        np.savez(out / "weights.npz", **self._consts)
        (out / "module.json").write_text(json.dumps(meta))
        return out

    def export_library(self, path: str | os.PathLike) -> Path:
        """Write the network as one shared library ``path`` (``DIR/net.so``) with a C ABI, its
        weights, ``net.json``, the standalone loader ``ansor_runtime.py``, ``ansor_net.h`` and
        ``example.c`` beside it (``ansor.graph.export_library``); returns the library's path."""
        from .export_library import export_library  # noqa: PLC0415 - LLVM and a linker, on demand

        return export_library(self, path).library


def compile_network(network: Graph | NetworkPlan, log_file: str | os.PathLike | None = None,
                    strict: bool = False, verbose: bool = True, file: TextIO | None = None,
                    layout_rewrite: bool | None = None,
                    layouts: str | Sequence[str] | None = "auto", untuned: str = "rules",
                    target: str | None = None) -> NetworkModule:
    """Build ``network`` (a ``Graph``, or the ``NetworkPlan`` of one, so that nothing is fused or
    lowered again) into a ``NetworkModule``: ``choose_schedules`` (each task's best record in
    ``log_file``, else an untuned schedule, named in a table on ``file`` (stderr) unless
    ``verbose=False``; ``strict=True`` raises ``UntunedTaskError`` listing them instead), then
    ``link``.

    ``layout_rewrite`` (default on; for a plan, the plan's): a schedule that packs a constant
    input (a weight) gets it packed once, here, and its kernel reads the packed array instead of
    copying on every run (``sketch.layout_rewrite``); the module holds the packed copy (one per
    distinct packing of a constant) in place of the original where no kernel reads the original.
    ``False``: every kernel packs inside, as tuned without rewrite.

    ``layouts``: the activation layout of each fused group (``graph.layouts``), for a plan as for
    a graph (the plan's NHWC groups are laid out again, not lowered again). ``"auto"``
    (default): the layouts chosen for this network by layout tuning, recorded beside
    ``log_file`` (``LOG.layouts.jsonl``), else NHWC everywhere; ``None``: NHWC everywhere; or one
    layout name per fused group in execution order. A group in a blocked layout reads its conv
    weight blocked at compile time; where a value's producer and consumer disagree a transform
    kernel runs between them (one per value and layout), and blocked outputs go back to NHWC.

    ``untuned``: how a task without a record is scheduled: ``"rules"`` (the rule-based
    register-tiled schedule, ``ansor.untuned.untuned_schedule``) or ``"guess"`` (the pre-trained
    cost model's pick after one search round, ``SearchTask.best_guess`` with
    ``NETWORK_GUESS_SEARCH``; a second or so per task, and ValueError if no pre-trained model is
    available).

    ``target``: the CPU to build for (``"x86-64-v3"``...: ``measure.targets``; default ``native``);
    only its records count (others are ignored with a warning); ``load_module`` checks the CPU."""
    from measure.targets import get_target, use_target  # noqa: PLC0415 - LLVM starts only when built

    built_for = get_target(target)  # an unknown name: one line, before any work
    if untuned not in UNTUNED_MODES:
        raise ValueError(f"compile_network untuned must be one of {', '.join(UNTUNED_MODES)}, got {untuned!r}")
    if not isinstance(network, (Graph, NetworkPlan)):
        raise TypeError(f"compile_network takes an ansor.graph.Graph or its NetworkPlan, got {type(network).__name__}")
    graph = network if isinstance(network, Graph) else network.graph
    check_graph_memory(graph)  # a hostile shape: one error naming the tensor, before any work
    if log_file is not None and not Path(log_file).exists():
        raise FileNotFoundError(f"log file {os.fspath(log_file)!r} does not exist")
    if isinstance(network, Graph):
        plan = plan_network(graph, layout_rewrite=True if layout_rewrite is None else layout_rewrite)
    else:
        plan = network
        if layout_rewrite is not None and layout_rewrite != plan.layout_rewrite:
            raise ValueError(f"compile_network: layout_rewrite={layout_rewrite} but the plan was made "
                             f"with layout_rewrite={plan.layout_rewrite}")
        if plan.include_simple:
            raise ValueError("compile_network: a plan made with include_simple=True has tasks the "
                             "compiled network does not schedule as tasks; plan it without")
    with use_target(built_for):  # the layouts, records, schedules and kernels of that CPU
        if isinstance(layouts, str) and layouts == "auto":
            layouts = chosen_layouts(graph, log_file, plan.groups) if log_file is not None else None
        wanted = (NHWC,) * len(plan.groups) if layouts is None else layouts
        if isinstance(wanted, str) or tuple(wanted) != plan.layouts:
            plan = plan.with_layouts(layouts)  # checked there; the NHWC groups are not lowered again
        return link(plan, choose_schedules(plan, log_file, strict, verbose, file, untuned))


def _run_order(plan: NetworkPlan) -> tuple[list[tuple], dict[str, Any]]:
    """The run order: each occurrence, preceded by the layout transforms of its inputs (a value
    in another layout is the key ``(value, layout)``), then the transforms of blocked outputs.
    Items are ``("group", i, input keys)`` or ``("transform", TransformKey, src, dst key)``;
    ``out_keys``: per graph output, the key of its NHWC value."""
    graph, occ, chosen, needs = plan.graph, plan.occurrences, plan.layouts, plan.input_layouts
    layout_of: dict[Any, str] = {n: NHWC for n in graph.inputs}
    for i, o in enumerate(occ):
        layout_of[o.group.output] = chosen[i]
    items: list[tuple] = []
    made: set[Any] = set()

    def key_in(value: Any, layout: str | None) -> Any:
        if layout is None or not isinstance(value, str) or value in graph.constants:
            return value
        if layout_of[value] == layout:
            return value
        k = (value, layout)
        if k not in made:
            t = graph.type_of(value)
            items.append(("transform", TransformKey(tuple(t.shape), str(t.dtype), layout_of[value], layout),
                          value, k))
            made.add(k)
        return k

    for i, o in enumerate(occ):
        items.append(("group", i, [key_in(v, lay) for v, lay in zip(o.lowered.inputs, needs[i])]))
    return items, {o: key_in(o, NHWC) for o in graph.outputs}


def link(plan: NetworkPlan, schedules: Sequence[Any]) -> NetworkModule:
    """The module running ``plan`` with ``schedules[i]`` for occurrence ``i`` (``choose_schedules``):
    one kernel per distinct (schedule, packed constant positions), layout transforms where a
    producer and a consumer disagree, planned buffers, packed constants and argument views."""
    graph, occ = plan.graph, plan.occurrences
    if len(schedules) != len(occ):
        raise ValueError(f"link: {len(schedules)} schedule(s) for {len(occ)} fused group(s)")
    items, out_keys = _run_order(plan)
    # Buffers (``_materialise`` specs): graph inputs, planned intermediates/outputs (flat),
    # constants and derived arrays, then views of flat buffers in each kernel argument's shape.
    types: dict[Any, TensorType] = {**{n: graph.type_of(n) for n in graph.inputs},
                                    **{n.name: n.type for n in graph.nodes}}
    for it in items:
        if it[0] == "transform":
            types[it[3]] = types[it[2]]
    specs: list[tuple] = []
    consts: dict[str, np.ndarray] = {}
    ids: dict[str, int] = {}
    for name, t in graph.inputs.items():
        ids[name] = len(specs)
        specs.append(("input", t.shape, t.dtype))
    order = []
    for it in items:
        if it[0] == "group":
            order.append((occ[it[1]].group.output, [k for k in it[2] if not isinstance(k, np.ndarray)
                                                    and (not isinstance(k, str) or k not in graph.constants)]))
        else:
            order.append((it[3], [it[2]]))
    planned = plan_buffers(order, types, set(out_keys.values()) | set(graph.inputs))
    base = len(specs)
    sizes: dict[int, tuple[int, str]] = {}
    for value, bid in planned.items():
        sizes.setdefault(bid, (types[value].size, types[value].dtype))
    for bid in range(len(sizes)):
        specs.append(("alloc", *sizes[bid]))

    def buffer_of(k: Any) -> int:
        return ids[k] if isinstance(k, str) and k in ids else base + planned[k]

    steps: list[_Step] = []
    kernels: dict[tuple, Any] = {}
    packed_ids: dict[tuple, int] = {}  # (constant, PackedArg) -> buffer id of the packed copy
    for it in items:
        if it[0] == "transform":
            tkey = it[1]
            if tkey not in kernels:
                kernels[tkey] = build(transform_state(tkey))
            steps.append(_Step(kernels[tkey], [buffer_of(it[2]), buffer_of(it[3])], tkey.desc(), True))
            continue
        i, in_keys = it[1], it[2]
        o = occ[i]
        rewrite = tuple(sorted(constant_positions(o, graph.constants))) if plan.layout_rewrite else ()
        # choose_schedules shares one state object between the occurrences that share a schedule
        kkey = (id(schedules[i]), rewrite)
        if kkey not in kernels:
            kernels[kkey] = build(schedules[i], layout_rewrite_inputs=rewrite)
        kernel = kernels[kkey]
        packed = {p.position: p for p in kernel.packed_args}
        args = []
        for k, (v, vk) in enumerate(zip(o.lowered.inputs, in_keys)):
            if k in packed:
                # The kernel reads this constant in its tuned layout: packed once, here, and
                # shared by the occurrences that pack the same constant the same way.
                pk = packed[k]
                pkey = (v if isinstance(v, str) else id(v), pk.src_shape, pk.dim, pk.block)
                if pkey not in packed_ids:
                    src = graph.constants[v] if isinstance(v, str) else v
                    src = np.asarray(src).reshape(o.lowered.placeholders[k].shape)  # e.g. depthwise
                    packed_ids[pkey] = len(specs)
                    consts[f"c{len(specs)}"] = pack_array(src, packed[k])
                    specs.append(("const", f"c{len(specs)}"))
                args.append(packed_ids[pkey])
            elif isinstance(v, str) and v in graph.constants:
                if v not in ids:
                    ids[v] = len(specs)
                    consts[f"c{len(specs)}"] = np.require(graph.constants[v], requirements="C")
                    specs.append(("const", f"c{len(specs)}"))
                args.append(ids[v])
            elif isinstance(v, str):
                args.append(buffer_of(vk))
            else:  # a derived array (an average pool's divisors, a blocked weight)
                consts[f"c{len(specs)}"] = v
                args.append(len(specs))
                specs.append(("const", f"c{len(specs)}"))
        args.append(base + planned[o.group.output])
        steps.append(_Step(kernel, args, o.group.name))
    views: dict[tuple[int, tuple[int, ...]], int] = {}

    def view(bid: int, shape: tuple[int, ...]) -> int:
        kind = specs[bid][0]
        if kind == "input" and tuple(specs[bid][1]) == shape:
            return bid
        if kind == "const" and consts[specs[bid][1]].shape == shape:
            return bid
        # A flat buffer, or a kernel reading an input/constant in another shape of the same
        # size (a depthwise weight): a row-major view.
        if (bid, shape) not in views:
            views[(bid, shape)] = len(specs)
            specs.append(("view", bid, shape))
        return views[(bid, shape)]

    for st in steps:
        st.args = [view(b, tuple(a.shape)) for b, a in zip(st.args, st.kernel.args)]
    outputs = [(o, view(buffer_of(out_keys[o]), types[o].shape)) for o in graph.outputs]
    return NetworkModule(dict(graph.inputs), outputs, specs, consts, {n: ids[n] for n in graph.inputs}, steps,
                         graph.io_dtypes)


def _module_error(path: Path, msg: str) -> GraphError:
    return GraphError(f"{path}: not a compiled network module: {msg}")


def load_module(path: str | os.PathLike) -> NetworkModule:
    """Load a module written by ``NetworkModule.export`` (JSON, npz without pickle, and the
    module's own kernels: object code if this toolchain compiled it, else its LLVM IR again)."""
    # LLVM (and the compile cache) start only when a module is loaded:
    from measure import target  # noqa: PLC0415 - lazy, as said above
    from measure.compile_cache import object_code  # noqa: PLC0415 - LLVM, as above
    from measure.kernel import ArgSpec, CompiledObject, Kernel  # noqa: PLC0415 - LLVM, as above

    root = Path(path)
    meta_file = root / "module.json"
    if not meta_file.is_file():
        raise FileNotFoundError(f"{root}: no module.json (export a module with lib.export(path))")
    try:
        meta = json.loads(meta_file.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _module_error(meta_file, f"invalid JSON ({e})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise _module_error(meta_file, f"expected format {FORMAT!r} version {VERSION}")
    built_for = target.get_target(check_module_cpu(root, meta.get("target")))
    try:
        with np.load(root / "weights.npz", allow_pickle=False) as z:
            consts = {k: z[k] for k in z.files}
        inputs = {i["name"]: TensorType(tuple(i["shape"]), i["dtype"]) for i in meta["inputs"]}
        input_buffers = {i["name"]: int(i["buffer"]) for i in meta["inputs"]}
        outputs = [(o["name"], int(o["buffer"])) for o in meta["outputs"]]
        given = meta.get("io_dtypes", {})  # older modules: none
        if not isinstance(given, dict):
            raise _module_error(meta_file, f"io_dtypes must be an object, got {type(given).__name__}")
        io_dtypes = {str(k): str(v) for k, v in given.items()}
        known = set(inputs) | {n for n, _ in outputs}
        for k, v in io_dtypes.items():
            if k not in known or v not in BOUNDARY_DTYPES:
                raise _module_error(meta_file, f"bad io_dtypes entry {k!r}: {v!r}")
        specs = []
        for sp in meta["buffers"]:
            kind = sp[0]
            if kind in ("input",):
                specs.append((kind, tuple(int(d) for d in sp[1]), str(sp[2])))
            elif kind == "alloc":
                specs.append((kind, int(sp[1]), str(sp[2])))
            elif kind == "const":
                if sp[1] not in consts:
                    raise _module_error(root, f"weights.npz has no array {sp[1]!r}")
                specs.append((kind, str(sp[1])))
            elif kind == "view" and 0 <= int(sp[1]) < len(specs):
                specs.append((kind, int(sp[1]), tuple(int(d) for d in sp[2])))
            else:
                raise _module_error(meta_file, f"bad buffer entry {sp!r}")
        kernels = []
        for i, k in enumerate(meta["kernels"]):
            args = tuple(ArgSpec(str(a["name"]), tuple(int(d) for d in a["shape"]), str(a["dtype"]),
                                 bool(a["written"])) for a in k["args"])
            ir = (root / f"kernel{i}.ll").read_text()
            if k["toolchain"] == target.toolchain_key(built_for):
                obj = (root / f"kernel{i}.o").read_bytes()
            else:  # another LLVM/CPU: compile the module's own IR for this one
                with target.use_target(built_for):
                    obj = object_code(ir)
            kernels.append(Kernel(CompiledObject(str(k["symbol"]), obj, ir, args,
                                                 target.toolchain_key(built_for), 0.0,
                                                 target=built_for.name)))
        steps = [_Step(kernels[int(s["kernel"])], [int(b) for b in s["args"]], str(s["name"]),
                       s.get("transform", False) is True)
                 for s in meta["steps"]]
        for s in steps:
            if any(not 0 <= b < len(specs) for b in s.args):
                raise _module_error(meta_file, f"step {s.name!r} names a buffer out of range")
    except (KeyError, TypeError, ValueError, IndexError) as e:
        if isinstance(e, GraphError):
            raise
        raise _module_error(root, f"{type(e).__name__}: {e}") from None
    return NetworkModule(inputs, outputs, specs, consts, input_buffers, steps, io_dtypes)
