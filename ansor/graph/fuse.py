"""Partition a ``Graph`` into fused subgraphs, the way relay's FuseOps does.

Each node carries a fusion pattern (``OpDef.pattern``), ordered as relay's ``OpPattern``:
elemwise < broadcast < injective < reduce < out_elemwise_fusable < opaque. A producer is merged
into the group of the node that consumes it when that consumer post-dominates it (here: it is the
producer's only consumer and the producer is not a graph output) and the patterns allow it:

* a group holding a conv/dense/matmul/pool (out_elemwise_fusable) absorbs the elementwise and
  broadcast ops after it (bias add, residual add, relu), never a second anchor or anything
  injective or heavier: a conv never chains another conv;
* elementwise/broadcast ops fuse forward into an injective op or a reduction (relay's phase 0);
* chains of injective ops fuse (phase 1);
* a reduction never starts a fusion and opaque ops (softmax, layer norm, LRN) fuse nothing;
* a group never grows beyond ``max_depth`` nodes (1 disables fusion).

A broadcast whose non-constant argument already has the output's shape counts as elementwise, as
in relay. Only single-consumer edges are merged: a value read by two nodes ends its group (relay
would still fuse through a diamond whose every path is fusable; that case is left unfused here,
which is correct, just a kernel more).

Every group has exactly one output value: its last node. Nothing here builds code.
"""
from __future__ import annotations

from dataclasses import dataclass

from .ir import OPS, Graph, GraphError, Node, display_name

PATTERN_LEVEL = {"elemwise": 0, "broadcast": 1, "injective": 2, "reduce": 3,
                 "out_elemwise_fusable": 4, "opaque": 8}
DEFAULT_MAX_DEPTH = 256


@dataclass(frozen=True)
class FusedGroup:
    """One fused subgraph: ``nodes`` in topological order, the last one producing ``output``;
    ``inputs`` are the values read from outside the group (graph inputs, constants, other groups'
    outputs) in first-use order; ``pattern`` is the group's dominant pattern."""

    nodes: tuple[Node, ...]
    inputs: tuple[str, ...]
    pattern: str

    @property
    def output(self) -> str:
        return self.nodes[-1].name

    @property
    def name(self) -> str:
        """``conv1+bias1+relu1``: the node names joined (display-escaped), for tables."""
        return "+".join(display_name(n.name) for n in self.nodes)

    @property
    def anchor(self) -> Node:
        """The heaviest node (the conv of conv+bias+relu): what the group is named after."""
        return max(self.nodes, key=lambda n: PATTERN_LEVEL[node_pattern_of(n, None)])


def node_pattern_of(node: Node, graph: Graph | None) -> str:
    """The node's fusion pattern; a broadcast op whose arguments all have the output's shape is
    elementwise (relay's rule)."""
    pattern = OPS[node.op].pattern
    if pattern == "broadcast" and graph is not None:
        if all(graph.type_of(i).shape == node.type.shape for i in node.inputs):
            return "elemwise"
    return pattern


def _can_fuse(producer_pattern: str, consumer_pattern: str) -> bool:
    """May a group of ``producer_pattern`` merge into a consumer of ``consumer_pattern``?"""
    p, c = PATTERN_LEVEL[producer_pattern], PATTERN_LEVEL[consumer_pattern]
    if producer_pattern == "out_elemwise_fusable":
        return c <= PATTERN_LEVEL["broadcast"]
    if p <= PATTERN_LEVEL["broadcast"]:
        return c <= PATTERN_LEVEL["reduce"]
    if producer_pattern == "injective":
        return c <= PATTERN_LEVEL["injective"]
    return False  # reduce never starts a fusion; opaque fuses nothing


def fuse(graph: Graph, max_depth: int = DEFAULT_MAX_DEPTH) -> list[FusedGroup]:
    """The fused groups of ``graph`` in an order where every group comes after the groups whose
    outputs it reads. ``max_depth`` caps the nodes per group (1: every node alone)."""
    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 1:
        raise GraphError(f"fuse: max_depth must be a positive integer, got {max_depth!r}")
    consumers = graph.consumers()
    outputs = set(graph.outputs)
    patterns = {n.name: node_pattern_of(n, graph) for n in graph.nodes}
    # group id of each node; a group is a list of node names and its dominant pattern.
    group_of: dict[str, int] = {}
    members: dict[int, list[str]] = {}
    gpattern: dict[int, str] = {}
    by_name = {n.name: n for n in graph.nodes}
    for idx, node in enumerate(graph.nodes):
        gid = idx
        group_of[node.name] = gid
        members[gid] = [node.name]
        gpattern[gid] = patterns[node.name]
        for value in dict.fromkeys(node.inputs):  # each distinct input once, in order
            if value not in by_name or value in outputs or len(set(map(id, consumers[value]))) != 1:
                continue
            src = group_of[value]
            if src == gid or members[src][-1] != value:
                continue
            if not _can_fuse(gpattern[src], patterns[node.name]):
                continue
            # One anchor per group: a consumer already holding a conv takes no second one.
            if (gpattern[src] == "out_elemwise_fusable"
                    and gpattern[gid] == "out_elemwise_fusable"):
                continue
            if len(members[src]) + len(members[gid]) > max_depth:
                continue
            for name in members[src]:
                group_of[name] = gid
            members[gid] = members.pop(src) + members[gid]
            gpattern[gid] = max(gpattern.pop(src), gpattern[gid], key=PATTERN_LEVEL.__getitem__)
    order = {n.name: i for i, n in enumerate(graph.nodes)}
    groups = []
    for gid in sorted(members, key=lambda g: order[members[g][-1]]):
        names = sorted(members[gid], key=order.__getitem__)
        nodes = tuple(by_name[n] for n in names)
        inside = set(names)
        inputs = tuple(dict.fromkeys(i for n in nodes for i in n.inputs if i not in inside))
        groups.append(FusedGroup(nodes, inputs, gpattern[gid]))
    return groups
