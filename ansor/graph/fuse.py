"""Partition a ``Graph`` into fused subgraphs, the way relay's FuseOps does.

Each node carries a fusion pattern (``OpDef.pattern``), ordered as relay's ``OpPattern``:
elemwise < broadcast < injective < reduce < out_elemwise_fusable < opaque. A broadcast whose
argument already has the output's shape counts as elementwise, as in relay (per edge).

A node may only fuse into its immediate **post-dominator**: the nearest node every path from it
to the graph's outputs passes through (a graph output, or a node nobody reads, has none: its value
must be materialised). Fusing merges every node on every path between the two into the
post-dominator's group, so no value inside a group is read from outside it and each group has
exactly one output value, its last node. Nodes are visited in topological order, in two phases:

* phase 0: a conv/dense/matmul/pool (out_elemwise_fusable) fuses into its post-dominator when
  every op on every path, the post-dominator's group included, is at most broadcast (so a conv
  never chains another conv and a residual add after a conv absorbs the conv);
  elementwise/broadcast ops fuse into a post-dominator reached through at most injective or
  reduction edges, the ops on parallel branches being at most injective;
* phase 1: injective ops fuse when every path to the post-dominator is injective (after phase 0,
  so a conv finishes fusing first);
* a reduction never starts a fusion and opaque ops (softmax, layer norm, LRN) fuse nothing;
* a group never grows beyond ``max_depth`` nodes (1 disables fusion).

Nothing here builds code.
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


def _combine(a: str, b: str) -> str:
    return a if PATTERN_LEVEL[a] >= PATTERN_LEVEL[b] else b


class _PostDom:
    """The post-dominator tree: per node its immediate post-dominator (``parent``, None for a
    graph output or an unread node), its depth, and the heaviest edge pattern on the way there
    (relay's ``DominatorTree``)."""

    def __init__(self, graph: Graph, outputs: dict[str, list[tuple[str, str]]]):
        self.parent: dict[str, str | None] = {}
        self.depth: dict[str, int] = {}
        self.pattern: dict[str, str] = {}
        extern = set(graph.outputs)
        for node in reversed(graph.nodes):
            name = node.name
            parent: str | None = None
            pattern = "elemwise"
            if name in extern or not outputs[name]:
                pattern = "opaque"
            else:
                for k, (consumer, edge) in enumerate(outputs[name]):
                    if k == 0:
                        parent = consumer
                    elif parent is not None:
                        parent, pattern = self._lca(parent, consumer, pattern)
                    pattern = _combine(pattern, edge)
            self.parent[name] = parent
            self.depth[name] = 1 if parent is None else self.depth[parent] + 1
            self.pattern[name] = pattern

    def _lca(self, a: str | None, b: str | None, pattern: str) -> tuple[str | None, str]:
        """The least common ancestor of ``a`` and ``b``, with ``pattern`` widened by every node
        climbed on the way."""
        while a != b:
            if a is None or b is None:
                return None, pattern
            if self.depth[a] < self.depth[b]:
                pattern = _combine(pattern, self.pattern[b])
                b = self.parent[b]
            elif self.depth[a] > self.depth[b]:
                pattern = _combine(pattern, self.pattern[a])
                a = self.parent[a]
            else:
                pattern = _combine(_combine(pattern, self.pattern[a]), self.pattern[b])
                a, b = self.parent[a], self.parent[b]
        return a, pattern


class _Groups:
    """Union-find over node names; each root knows its members and dominant pattern."""

    def __init__(self, patterns: dict[str, str]):
        self.up: dict[str, str] = {n: n for n in patterns}
        self.members: dict[str, list[str]] = {n: [n] for n in patterns}
        self.pattern: dict[str, str] = dict(patterns)

    def root(self, n: str) -> str:
        while self.up[n] != n:
            self.up[n] = self.up[self.up[n]]
            n = self.up[n]
        return n

    def merge(self, child: str, parent: str) -> None:
        c, p = self.root(child), self.root(parent)
        if c == p:
            return
        self.up[c] = p
        self.members[p] += self.members.pop(c)
        self.pattern[p] = _combine(self.pattern.pop(c), self.pattern[p])


def fuse(graph: Graph, max_depth: int = DEFAULT_MAX_DEPTH) -> list[FusedGroup]:
    """The fused groups of ``graph`` in an order where every group comes after the groups whose
    outputs it reads. ``max_depth`` caps the nodes per group (1: every node alone)."""
    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 1:
        raise GraphError(f"fuse: max_depth must be a positive integer, got {max_depth!r}")
    by_name = {n.name: n for n in graph.nodes}
    patterns = {n.name: node_pattern_of(n, graph) for n in graph.nodes}
    # Forward edges node -> distinct consumer nodes, each with the consumer's pattern as seen
    # from this argument (broadcast of a same-shaped argument is elementwise).
    outputs: dict[str, list[tuple[str, str]]] = {n.name: [] for n in graph.nodes}
    for node in graph.nodes:
        for value in dict.fromkeys(node.inputs):
            if value in by_name:
                edge = OPS[node.op].pattern
                if edge == "broadcast" and graph.type_of(value).shape == node.type.shape:
                    edge = "elemwise"
                outputs[value].append((node.name, edge))
    pdom = _PostDom(graph, outputs)
    groups = _Groups(patterns)

    def path_nodes(src: str, sink: str) -> list[str] | None:
        """Every node strictly between ``src`` and ``sink`` on a path, or None when a path leaves
        the graph without reaching ``sink`` (cannot happen for a post-dominator; checked)."""
        seen: dict[str, None] = {}
        stack = [c for c, _ in outputs[src]]
        while stack:
            n = stack.pop()
            if n == sink or n in seen:
                continue
            if not outputs[n]:
                return None
            seen[n] = None
            stack.extend(c for c, _ in outputs[n])
        return list(seen)

    def check(between: list[str], sink: str, ok_inner, ok_sink) -> bool:
        return (all(ok_inner(groups.pattern[groups.root(n)]) for n in between)
                and ok_sink(groups.pattern[groups.root(sink)]))

    def lvl(p: str) -> int:
        return PATTERN_LEVEL[p]

    for phase in (0, 1):
        for node in graph.nodes:
            name = node.name
            root = groups.root(name)
            gp = groups.pattern[root]
            sink = pdom.parent[name]
            if gp == "opaque" or sink is None or groups.root(sink) == root:
                continue
            edge = pdom.pattern[name]
            if gp == "out_elemwise_fusable":
                if phase != 0 or lvl(edge) > lvl("elemwise"):
                    continue
                inner = outer = lambda p: lvl(p) <= lvl("broadcast")
            elif lvl(gp) <= lvl("broadcast"):
                if phase != 0 or not (lvl(edge) <= lvl("injective") or edge == "reduce"):
                    continue
                inner = lambda p: lvl(p) <= lvl("injective")
                outer = lambda p: p != "opaque"
            elif gp == "injective":
                if phase != 1:
                    continue
                inner = outer = lambda p: lvl(p) <= lvl("injective")
            else:
                continue  # a reduction never starts a fusion
            between = path_nodes(name, sink)
            if between is None or not check(between, sink, inner, outer):
                continue
            roots = dict.fromkeys(groups.root(n) for n in [name, *between, sink])
            if sum(len(groups.members[r]) for r in roots) > max_depth:
                continue
            for n in [name, *between]:
                groups.merge(n, sink)
    order = {n.name: i for i, n in enumerate(graph.nodes)}
    result = []
    for members in sorted(groups.members.values(), key=lambda m: max(map(order.__getitem__, m))):
        names = sorted(members, key=order.__getitem__)
        nodes = tuple(by_name[n] for n in names)
        inside = set(names)
        inputs = tuple(dict.fromkeys(i for n in nodes for i in n.inputs if i not in inside))
        result.append(FusedGroup(nodes, inputs, max((patterns[n] for n in names), key=PATTERN_LEVEL.__getitem__)))
    return result
