"""Compile a whole network into native kernels and run it: ``compile_network``, ``load_module``.

``compile_network(graph or plan, log_file)`` takes the network's plan (``plan.plan_network``:
fused and lowered once, or given by the caller who already made it), gives every fused subgraph
a schedule (``schedules.choose_schedules``: the best record of its task in ``log_file``, else
the untuned schedule, named loudly) and links them (``link``): one kernel per distinct schedule,
buffers, packed constants.

The result, a ``NetworkModule`` (``network_module.py``), runs in a context (``module_contexts``) owning one buffer per
graph input and output and a planned pool of intermediate buffers: a buffer whose last reader has
run is reused for a later value of the same dtype and size. Each step's argument pointers are
computed once per context, so a run is one native call of the module's call chain
(``measure.call_chain``; ``benchmark`` reports the dispatch overhead beside the kernels' time). Concurrent runs take different contexts (thread-safe).

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
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from sketch.layout_rewrite import pack_array

from ..build_module import build
from .ir import Graph, GraphError, TensorType
from .ir_types import BOUNDARY_DTYPES
from .layout_tuning import TransformKey, chosen_layouts, transform_state
from .layouts import NHWC, activation_layout
from .memory_plan import buffer_sizes, check_graph_memory, plan_buffers
from .module_target import check_module_cpu
from .plan import NetworkPlan, is_view, plan_network
from .schedules import UNTUNED_MODES, choose_schedules
from .tasks import constant_positions
from .two_anchor import resolve_pairs

from .network_module import FORMAT, VERSION, NetworkModule, _Step  # noqa: F401 - NetworkModule re-exported


def compile_network(network: Graph | NetworkPlan, log_file: str | os.PathLike | None = None,
                    strict: bool = False, verbose: bool = True, file: TextIO | None = None,
                    layout_rewrite: bool | None = None,
                    layouts: str | Sequence[str] | None = "auto", untuned: str = "rules",
                    target: str | None = None, fuse_pairs: object = "auto",
                    fold_scales: bool = True) -> NetworkModule:
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
    layout name per fused group in execution order (or a Winograd variant, ``"winograd4"``: the
    conv as F(4, 3) with NHWC activations and its weight transformed here, at compile time;
    ``ansor.graph.winograd_variant``). A group in a blocked layout reads its conv weight blocked
    at compile time; where a value's producer and consumer disagree a transform
    kernel runs between them (one per value and layout), and blocked outputs go back to NHWC.

    ``untuned``: how a task without a record is scheduled: ``"rules"`` (the rule-based
    register-tiled schedule, ``ansor.untuned.untuned_schedule``) or ``"guess"`` (the pre-trained
    cost model's pick after one search round, ``SearchTask.best_guess`` with
    ``NETWORK_GUESS_SEARCH``; a second or so per task, and ValueError if no pre-trained model is
    available).

    ``fuse_pairs``: which pairs of groups run as one two-anchor kernel (``two_anchor``; a 1x1
    conv and the depthwise conv it feeds...): ``"auto"`` (default) those whose fused task has a
    record in ``log_file`` faster than the two separate ones' records; ``"all"``; None; or
    ``(producer, consumer)`` group indices. Applied before ``layouts`` (a network whose pairs
    are fused is another partition: its layout choice is its own).

    ``fold_scales`` (a ``Graph`` only; a plan was made with its own): per-channel scales read by a
    conv (a squeeze-excite's gate) moved onto its weight (``scale_fold``).

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
        plan = plan_network(graph, layout_rewrite=True if layout_rewrite is None else layout_rewrite,
                            fold_scales=fold_scales)
    else:
        plan = network
        if layout_rewrite is not None and layout_rewrite != plan.layout_rewrite:
            raise ValueError(f"compile_network: layout_rewrite={layout_rewrite} but the plan was made "
                             f"with layout_rewrite={plan.layout_rewrite}")
        if plan.include_simple:
            raise ValueError("compile_network: a plan made with include_simple=True has tasks the "
                             "compiled network does not schedule as tasks; plan it without")
    with use_target(built_for):  # the layouts, records, schedules and kernels of that CPU
        plan = plan_as_compiled(plan, log_file, fuse_pairs, layouts, verbose, file)
        return link(plan, choose_schedules(plan, log_file, strict, verbose, file, untuned))


def plan_as_compiled(plan: NetworkPlan, log_file: str | os.PathLike | None, fuse_pairs: object = "auto",
                     layouts: str | Sequence[str] | None = "auto", verbose: bool = False,
                     file: TextIO | None = None) -> NetworkPlan:
    """The plan ``compile_network`` builds (its ``fuse_pairs`` and ``layouts`` arguments, read
    from ``log_file`` when ``"auto"``): the fused pairs merged (told on ``file``, stderr, when
    ``verbose``), then the layouts applied. Under the target the caller uses."""
    graph = plan.graph
    pairs = resolve_pairs(graph, plan.groups, fuse_pairs, log_file)
    if pairs:
        plan = plan.with_pairs(pairs)
        if verbose:
            print(f"ansor: {len(pairs)} pair(s) of groups run as one kernel: "
                  + ", ".join(f"{'+'.join(c.kinds)} ({c.producer}, {c.consumer})" for c in pairs),
                  file=file or sys.stderr)
    if isinstance(layouts, str) and layouts == "auto":
        layouts = chosen_layouts(graph, log_file, plan.groups) if log_file is not None else None
    wanted = (NHWC,) * len(plan.groups) if layouts is None else layouts
    if isinstance(wanted, str) or tuple(wanted) != plan.layouts:
        plan = plan.with_layouts(layouts)  # checked there; the NHWC groups are not lowered again
    return plan


def _run_order(plan: NetworkPlan) -> tuple[list[tuple], dict[str, Any]]:
    """The run order: each occurrence, preceded by the layout transforms of its inputs (a value
    in another layout is the key ``(value, layout)``), then the transforms of blocked outputs.
    Items are ``("group", i, input keys)`` or ``("transform", TransformKey, src, dst key)``;
    ``out_keys``: per graph output, the key of its NHWC value. A reshape group (``plan.is_view``)
    makes no item: its output's key is its input's, which its readers view in their shape
    (BERT's token and head reshapes were copies of 0.1-0.2 ms each); a graph output keeps its
    own buffer unless the reshaped value is an intermediate."""
    graph, occ, chosen, needs = plan.graph, plan.occurrences, plan.layouts, plan.input_layouts
    layout_of: dict[Any, str] = {n: NHWC for n in graph.inputs}
    for i, o in enumerate(occ):
        layout_of[o.group.output] = activation_layout(chosen[i])  # a Winograd group's is NHWC
    items: list[tuple] = []
    made: set[Any] = set()
    same: dict[str, Any] = {}  # a reshape group's output -> the key of the buffer holding it
    outputs = set(graph.outputs)

    def key_in(value: Any, layout: str | None) -> Any:
        if layout is None or not isinstance(value, str) or value in graph.constants:
            return value
        if layout_of[value] == layout:
            return same.get(value, value)
        k = (value, layout)
        if k not in made:
            t = graph.type_of(value)
            items.append(("transform", TransformKey(tuple(t.shape), str(t.dtype), layout_of[value], layout),
                          same.get(value, value), k))
            made.add(k)
        return k

    for i, o in enumerate(occ):
        keys = [key_in(v, lay) for v, lay in zip(o.lowered.inputs, needs[i])]
        if is_view(plan, i) and not (o.group.output in outputs and keys[0] in graph.inputs):
            same[o.group.output] = keys[0]
            continue
        items.append(("group", i, keys))
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
        if it[0] == "transform":  # its source may be a reshape's input: the type is the key's
            types[it[3]] = TensorType(it[1].shape, it[1].dtype)
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
    sizes = buffer_sizes(planned, types)
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
        ti = plan.task_of.get(i)
        steps.append(_Step(kernel, args, o.group.name,
                           task="" if ti is None else plan.tasks[ti].workload_key))
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
                       s.get("transform", False) is True,
                       meta["kernels"][int(s["kernel"])].get("one_thread", False) is True,
                       str(s.get("task", "")))
                 for s in meta["steps"]]
        for s in steps:
            if any(not 0 <= b < len(specs) for b in s.args):
                raise _module_error(meta_file, f"step {s.name!r} names a buffer out of range")
    except (KeyError, TypeError, ValueError, IndexError) as e:
        if isinstance(e, GraphError):
            raise
        raise _module_error(root, f"{type(e).__name__}: {e}") from None
    return NetworkModule(inputs, outputs, specs, consts, input_buffers, steps, io_dtypes)
