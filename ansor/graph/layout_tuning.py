"""Graph-level layout tuning (issue 20 items 2-3): variants, transform costs, the chosen layouts.

A network's conv groups may each run in NHWC or a blocked NCHW[x]c layout (``layouts``). Here:

* ``layout_variants(graph)``: every fused group with its candidate layouts, each lowered;
  ``extract_layout_tasks(graph)`` (``variant_tasks`` of given variants): one ``GraphTask`` per
  distinct (subgraph, layout) - the variants are tasks like any other (own DAG, own workload
  key), tuned by the task scheduler;
* ``needed_transforms``: the layout transforms any assignment may need (one activation shape
  from one layout to another); ``measure_transforms`` builds each as a small kernel (compute
  DSL, rule-based schedule) and times it with the ordinary builder and runner;
* ``solve_layouts(graph, log_file)``: each variant's best measured time from the log (per group
  occurrence) and the transform times make a ``LayoutProblem`` - nodes are the graph's inputs,
  the fused groups and the graph's outputs (those two pinned to NHWC), edges carry the transform
  costs - solved by ``layout_solver.solve``; the choice is appended to the sidecar file;
* ``chosen_layouts(graph, log_file)``: the last choice recorded for this network, which
  ``compile_network`` uses.

A variant may also be an algorithm (``winograd4``: ``winograd_variant``); it is tuned and chosen
the same way, and costs no transform beside NHWC neighbours. A variant without a record in the
log costs ``inf``: an untuned Winograd variant is never chosen over a measured direct one.

Each function that needs the network's fused groups takes them (``occurrences``/``variants``,
from ``plan.NetworkPlan.groups``) and lowers them itself only when called without.

The sidecar ``LOG.layouts.jsonl`` beside the tuning log (``layout_sidecar``: validated on load,
untrusted input like a record file) holds the measured transform costs and the choices.
Transforms are timed in the mode the variants are (network mode unless a given runner says
otherwise, as the task scheduler times them); costs of another mode are ignored.

A value read by several consumers in one other layout is transformed once at run time but
counted per consumer edge by the solver (as TVM's graph tuner does).
"""
from __future__ import annotations

import hashlib
import math
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from compute.compute_dag import ComputeDAG
from measure.local import measure_batch
from measure.measure import NETWORK, WARM
from measure.measure import MeasureInput
from measure.measurers import LOCAL, Measurers
from measure.protocols import Builder, Runner
from measure.target import host_hardware_params
from sketch.hardware import HardwareParams

from ..records import best_records
from ..search_task import SearchTask
from .ir import Graph, GraphError, display_name
from .layout_sidecar import TransformKey, append_entries, read_sidecar, sidecar_path, write_transform_costs
from .layout_solver import LayoutProblem, LayoutSolution, solve
from .layouts import (NHWC, LayoutCandidates, LayoutError, LayoutLowered, activation_layout, candidate_layouts,
                      lower_group_in_layout, transform_tensors, why_not)
from ..untuned import untuned_schedule
from .tasks import GraphTask, Occurrence, has_reduction, is_view_group, lower_groups, tasks_from_groups


@dataclass(frozen=True)
class GroupVariants:
    """One fused group occurrence and its candidate layouts (``lowered[k]`` in ``layouts[k]``)."""

    occurrence: Occurrence
    candidates: LayoutCandidates
    lowered: tuple[LayoutLowered, ...]

    @property
    def layouts(self) -> tuple[str, ...]:
        return self.candidates.layouts


@dataclass(frozen=True)
class LayoutChoice:
    """The solver's result for one network: ``layouts[i]`` for fused group ``i`` (execution
    order), the ``solution`` (cost, method, optimality) and the transform costs it used."""

    network: str
    layouts: tuple[str, ...]
    solution: LayoutSolution
    transforms: dict[TransformKey, float]
    group_costs: tuple[tuple[float, ...], ...]


def network_key(occurrences: Sequence[Occurrence], legacy: bool = False) -> str:
    """Identity of a network for its chosen layouts and pairs: a hash of its fused groups' NHWC
    workload keys in execution order (names play no part). A group of view ops only (a reshape)
    counts by its output type: it runs no kernel, and how the op is written (its workload key)
    must not lose the choices recorded for a network (a change to the reshape op once made
    ResNet-50 compile direct-only from a log whose choice was Winograd). ``legacy``: the key as
    written before (every group by its workload key), still read (``find_choice``)."""
    h = hashlib.sha256()
    for o in occurrences:
        if is_view_group(o) and not legacy:
            t = o.group.nodes[-1].type
            h.update(f"view{tuple(t.shape)}{t.dtype}".encode())
        else:
            h.update(o.dag.workload_key.encode())
        h.update(b";")
    return h.hexdigest()[:32]


def find_choice(choices: dict, occurrences: Sequence[Occurrence]) -> Any:
    """``choices[network key]`` for this network, under its key or its legacy key; None if absent."""
    for legacy in (False, True):
        found = choices.get(network_key(occurrences, legacy))
        if found is not None:
            return found
    return None


# ---------------------------------------------------------------- variants and tasks

def layout_variants(graph: Graph, hw: HardwareParams | None = None,
                    occurrences: Sequence[Occurrence] | None = None, blocked: bool = True,
                    winograd: bool = False) -> list[GroupVariants]:
    """Every fused group of ``graph`` (execution order) with its candidate variants on ``hw``
    (default: this host), each lowered: the blocked layouts (``blocked``), the Winograd tile sizes
    of eligible convs (``winograd``)."""
    hw = hw if hw is not None else host_hardware_params()
    occ = list(occurrences) if occurrences is not None else lower_groups(graph)
    out = []
    for o in occ:
        cands = candidate_layouts(o.group, graph, hw, blocked, winograd)
        lowered = tuple(lower_group_in_layout(o.group, graph, lay) for lay in cands.layouts)
        out.append(GroupVariants(o, cands, lowered))
    return out


def variant_occurrence(v: GroupVariants, k: int) -> Occurrence:
    """The occurrence of ``v`` lowered in its ``k``-th layout (the NHWC one is the original)."""
    if v.layouts[k] == NHWC:
        return v.occurrence
    low = v.lowered[k].lowered
    return Occurrence(v.occurrence.group, low, ComputeDAG(low.tensors))


def extract_layout_tasks(graph: Graph, hw: HardwareParams | None = None, layout_rewrite: bool = True,
                         winograd: bool = False) -> tuple[list[GraphTask], list[int]]:
    """The tasks of every layout variant: the NHWC tasks of ``extract_tasks`` and one task per
    distinct blocked variant (desc ending in ``[NCHW16c]``) and, with ``winograd``, per Winograd
    variant (``conv2d_winograd... [winograd4]``); weight = occurrences."""
    return variant_tasks(graph, layout_variants(graph, hw, winograd=winograd), layout_rewrite)


def variant_tasks(graph: Graph, variants: Sequence[GroupVariants], layout_rewrite: bool = True
                  ) -> tuple[list[GraphTask], list[int]]:
    """``extract_layout_tasks`` of ``variants`` already made (``layout_variants`` of a plan's
    groups: nothing fused or lowered again)."""
    occ, tags = [], []
    for v in variants:
        for k, lay in enumerate(v.layouts):
            occ.append(variant_occurrence(v, k))
            tags.append(lay)
    tasks, weights, _ = tasks_from_groups(occ, constants=graph.constants, layout_rewrite=layout_rewrite,
                                          variants=tags)
    return tasks, weights


# ---------------------------------------------------------------- transforms

def _needs(v: GroupVariants, k: int, graph: Graph) -> dict[str, str]:
    """Activation value -> the layout the group's ``k``-th variant reads it in."""
    low = v.lowered[k]
    return {val: lay for val, lay in zip(low.lowered.inputs, low.input_layouts)
            if isinstance(val, str) and lay is not None}


def _producers(graph: Graph, variants: Sequence[GroupVariants]) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Value -> (solver node name, the layouts it may be produced in)."""
    prod = {name: (f"in:{k}", (NHWC,)) for k, name in enumerate(graph.inputs)}
    for i, v in enumerate(variants):
        prod[v.occurrence.group.output] = (f"g{i}", tuple(activation_layout(lay) for lay in v.layouts))
    return prod


def needed_transforms(graph: Graph, variants: Sequence[GroupVariants]) -> list[TransformKey]:
    """Every transform some assignment of the candidates needs (sorted, no duplicates)."""
    prod = _producers(graph, variants)
    keys: set[TransformKey] = set()

    def add(value: str, dst: str) -> None:
        t = graph.type_of(value)
        for src in prod[value][1]:
            if src != dst:
                keys.add(TransformKey(tuple(t.shape), str(t.dtype), src, dst))

    for v in variants:
        for k in range(len(v.layouts)):
            for value, lay in _needs(v, k, graph).items():
                add(value, lay)
    for o in graph.outputs:
        if o in prod:
            add(o, NHWC)
    return sorted(keys, key=lambda t: (t.shape, t.dtype, t.src, t.dst))


def transform_dag(key: TransformKey) -> ComputeDAG:
    return ComputeDAG(transform_tensors(key.shape, key.dtype, key.src, key.dst))


def transform_state(key: TransformKey) -> Any:
    """The rule-based schedule of a transform kernel (the one measured and compiled)."""
    return untuned_schedule(transform_dag(key))[0]


def measure_transforms(keys: Sequence[TransformKey], builder: Builder | None = None,
                       runner: Runner | None = None, repeats: int = 3,
                       cache: str = NETWORK) -> dict[TransformKey, float]:
    """Seconds per call of each transform kernel, built and timed like a tuning candidate
    (``LocalBuilder``/``LocalRunner(cache=cache)`` unless given), ``repeats`` times, the median
    kept (one measurement on a busy host can be far off, and the cost is cached); a failure costs
    ``inf`` (never chosen)."""
    if not keys:
        return {}
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"measure_transforms repeats must be a positive integer, got {repeats!r}")
    samples: dict[TransformKey, list[float]] = {k: [] for k in keys}
    with Measurers(builder if builder is not None else LOCAL,
                   runner if runner is not None else LOCAL, cache=cache) as m:
        inputs = [MeasureInput(SearchTask(tensors=transform_dag(k), desc=k.desc()), transform_state(k))
                  for k in keys]
        for _ in range(repeats):
            for k, r in zip(keys, measure_batch(inputs, m.builder, m.runner)):
                ok = r.ok and bool(r.costs) and math.isfinite(r.mean_cost)
                samples[k].append(float(r.mean_cost) if ok else math.inf)
    return {k: float(np.median(v)) for k, v in samples.items()}


# ---------------------------------------------------------------- the problem and its solution

def group_costs(variants: Sequence[GroupVariants], graph: Graph, log_file: str | os.PathLike | None,
                factors: Mapping[str, float] | None = None) -> list[list[float]]:
    """Per group, per candidate: the variant's best measured seconds in the log (inf without a
    valid record), times ``factors[its workload key]`` where given (its slowdown in the
    compiled network, ``network_calibration``). A group none of whose variants has a record
    keeps NHWC (cost 0, the rest inf); a group that is not a task (no reduction) costs 0."""
    keys: list[list[str | None]] = []  # per group, per candidate: its task's key (None: no task)
    tasks: dict[str, GraphTask] = {}
    for v in variants:
        keys.append([])
        for k in range(len(v.layouts)):
            o = variant_occurrence(v, k)
            if not has_reduction(o.dag) or log_file is None:
                keys[-1].append(None)
                continue
            key = o.dag.workload_key
            tasks.setdefault(key, GraphTask(o.dag, "variant", [o.group.name], 1))
            keys[-1].append(key)
    # the log read once for every variant (a ResNet-50's ~60 groups read it once each before:
    # minutes of parsing per choice on a 4500-record log)
    found = best_records(log_file, list(tasks.values())) if tasks and log_file is not None else []
    scale = factors or {}
    cache = {key: math.inf if best is None else float(best[1].mean_cost) * scale.get(key, 1.0)
             for key, best in zip(tasks, found)}
    out = []
    for ks in keys:
        costs = [(0.0 if k == 0 else math.inf) if key is None else cache[key] for k, key in enumerate(ks)]
        if all(math.isinf(c) for c in costs):
            costs = [0.0] + [math.inf] * (len(costs) - 1)
        out.append(costs)
    return out


def build_problem(graph: Graph, variants: Sequence[GroupVariants], group_costs: Sequence[Sequence[float]],
                  transforms: dict[TransformKey, float]) -> LayoutProblem:
    """Nodes ``in:k`` (graph inputs), ``g{i}`` (fused groups), ``out:k`` (graph outputs), in
    execution order; edges: the transform cost of every (producer layout, consumer layout) pair
    (0 when they agree, ``inf`` for a transform not in ``transforms``)."""
    prod = _producers(graph, variants)
    nodes = [f"in:{k}" for k in range(len(graph.inputs))]
    node_costs: dict[str, Sequence[float]] = {n: [0.0] for n in nodes}
    edges: dict[tuple[str, str], np.ndarray] = {}

    def cost(value: str, src: str, dst: str) -> float:
        if src == dst:
            return 0.0
        t = graph.type_of(value)
        return transforms.get(TransformKey(tuple(t.shape), str(t.dtype), src, dst), math.inf)

    def link(consumer: str, consumer_layouts: Sequence[dict[str, str]]) -> None:
        by_prod: dict[str, list[str]] = {}
        for needs in consumer_layouts:
            for value in needs:
                if value in prod and value not in by_prod.setdefault(prod[value][0], []):
                    by_prod[prod[value][0]].append(value)
        for pname, values in by_prod.items():
            src_layouts = next(p[1] for p in prod.values() if p[0] == pname)
            m = np.zeros((len(src_layouts), len(consumer_layouts)))
            for a, src in enumerate(src_layouts):
                for b, needs in enumerate(consumer_layouts):
                    m[a, b] = sum(cost(val, src, needs[val]) for val in values if val in needs)
            edges[(pname, consumer)] = m

    for i, v in enumerate(variants):
        name = f"g{i}"
        nodes.append(name)
        node_costs[name] = list(group_costs[i])
        link(name, [_needs(v, k, graph) for k in range(len(v.layouts))])
    for k, o in enumerate(graph.outputs):
        name = f"out:{k}"
        nodes.append(name)
        node_costs[name] = [0.0]
        link(name, [{o: NHWC}])
    return LayoutProblem(tuple(nodes), node_costs, edges)


def solve_layouts(graph: Graph, log_file: str | os.PathLike, builder: Builder | None = None,
                  runner: Runner | None = None,
                  hw: HardwareParams | None = None, record: bool = True,
                  variants: Sequence[GroupVariants] | None = None,
                  cache: str | None = None, factors: Mapping[str, float] | None = None) -> LayoutChoice:
    """Pick each group's layout from the variants' best times in ``log_file`` and the transform
    costs (cached in the sidecar; the missing ones measured now and appended), solve, and append
    the choice to the sidecar (``record``). ``variants``: ``layout_variants`` of the network when
    the caller has them (made from ``NetworkPlan.groups``: nothing fused or lowered again).
    ``factors``: per workload key, the variant's slowdown in the network (``group_costs``)."""
    variants = list(variants) if variants is not None else layout_variants(graph, hw)
    occ = [v.occurrence for v in variants]
    side = sidecar_path(log_file)
    # Transforms timed as the variants were: ``cache``, else the runner's, else network mode.
    mode = cache or (NETWORK if runner is None else getattr(runner, "cache", WARM))
    cached, _ = read_sidecar(side, mode)
    needed = needed_transforms(graph, variants)
    missing = [k for k in needed if k not in cached]
    fresh = measure_transforms(missing, builder, runner, cache=mode)
    if fresh:
        write_transform_costs(side, fresh, mode)
    costs = {**cached, **fresh}
    used = {k: costs[k] for k in needed}
    gcosts = group_costs(variants, graph, log_file, factors)
    sol = solve(build_problem(graph, variants, gcosts, used))
    layouts = tuple(v.layouts[sol.choice[f"g{i}"]] for i, v in enumerate(variants))
    net = network_key(occ)
    if record:
        append_entries(side, [{"kind": "choice", "network": net, "layouts": list(layouts), "cost": sol.cost,
                        "method": sol.method, "optimal": sol.optimal}])
    return LayoutChoice(net, layouts, sol, used, tuple(tuple(c) for c in gcosts))


def check_layouts(graph: Graph, occurrences: Sequence[Occurrence], layouts: Sequence[str],
                  source: str = "layouts") -> tuple[str, ...]:
    """``layouts`` validated against the network: one per fused group, each one the group can
    take (``GraphError`` naming ``source`` and the group otherwise)."""
    if isinstance(layouts, str) or len(layouts) != len(occurrences):
        raise GraphError(f"{source}: expected one layout per fused group ({len(occurrences)}), "
                         f"got {len(layouts) if not isinstance(layouts, str) else repr(layouts)}")
    for o, lay in zip(occurrences, layouts):
        try:
            why = why_not(o.group, graph, lay)
        except LayoutError as e:
            raise GraphError(f"{source}: group {o.group.name}: {e}") from None
        if why is not None:
            raise GraphError(f"{source}: group {o.group.name} cannot run in {lay}: {why}")
    return tuple(layouts)


def chosen_layouts(graph: Graph, log_file: str | os.PathLike,
                   occurrences: Sequence[Occurrence] | None = None) -> tuple[str, ...] | None:
    """The layouts last chosen for this network in ``log_file``'s sidecar, validated, or None."""
    occ = list(occurrences) if occurrences is not None else lower_groups(graph)
    side = sidecar_path(log_file)
    _, choices = read_sidecar(side)
    found = find_choice(choices, occ)
    if found is None and choices:
        # Layouts (Winograd...) were chosen beside this log, but for another network: the groups
        # differ (another graph, or ops whose definition changed since). Running NHWC direct
        # convolutions silently would lose what the tuning found.
        warnings.warn(f"{side}: its {len(choices)} recorded layout choice(s) are for another network "
                      f"than {display_name(graph.name)} (its fused groups differ); compiling NHWC without "
                      "Winograd. Choose again from the same log: 'ansor network tune MODEL --log LOG "
                      "--trials 0' with the flags of the tuning run", RuntimeWarning, stacklevel=3)
    return None if found is None else check_layouts(graph, occ, found[0], f"{side}:{found[1]}")
