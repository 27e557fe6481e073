"""Graph-level layout selection (issue 20): pick one data layout per operator of a network.

Each operator has a few candidate layouts (NHWC, NCHW[x]c blocked, ...), each with a measured
kernel time (already multiplied by the operator's weight/count), and every edge whose two ends
chose different layouts pays a measured layout transform. The best schedule per operator is not
the best network: a locally fastest layout can cost more in transforms than it saves. This
module minimises ``sum(node cost) + sum(edge transform cost)`` over all assignments:

* ``solve_dp``: exact variable elimination along the node order (a chain keeps one live node, a
  residual block two or three). The table holds one entry per combination of live nodes' layouts;
  when it would exceed ``max_states`` it raises ``StateCapExceeded`` instead of exploding.
* ``solve_pbqp``: the PBQP reduction solver for any graph. Reductions of nodes of degree 0, 1
  and 2 (R0, RI, RII) are exact; a node of degree > 2 is fixed to its locally best layout (RN, a
  heuristic). The solution says which reductions ran and whether it is provably ``optimal``.
* ``solve``: DP when its table fits the cap, PBQP otherwise; ``brute_force`` for tests.

Costs may be ``inf`` (an impossible transform, an unsupported kernel). Edges are undirected for
the optimisation; u->v and v->u (or repeated) edges are merged by summing their matrices.
Nothing here measures anything: the caller supplies the cost tables.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Sequence

import numpy as np

DEFAULT_MAX_STATES = 1_000_000
BRUTE_FORCE_LIMIT = 1_000_000
REDUCTIONS = ("R0", "RI", "RII", "RN")


class LayoutSolverError(ValueError):
    """Bad input (names the node or edge at fault) or no feasible assignment."""


class StateCapExceeded(LayoutSolverError):
    """``solve_dp`` would need more table entries than its cap (use PBQP)."""


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _check_values(a: np.ndarray, what: str) -> None:
    # +inf is a legal cost ("impossible"); NaN and -inf would make every comparison meaningless.
    if np.isnan(a).any():
        raise LayoutSolverError(f"{what}: contains NaN")
    if np.isneginf(a).any():
        raise LayoutSolverError(f"{what}: contains -inf (only +inf marks an impossible choice)")


@dataclass(frozen=True, eq=False)
class LayoutProblem:
    """``node_costs[n][i]``: cost of node ``n`` in its candidate layout ``i``.
    ``edges[(u, v)]``: matrix of shape ``[len(node_costs[u]), len(node_costs[v])]``, the transform
    cost when ``u`` takes layout ``i`` and ``v`` layout ``j`` (usually 0 on matching layouts).

    After construction the arrays are read-only float64 copies, and ``pairs`` holds one merged
    matrix per unordered node pair, oriented along ``nodes`` order (what the solvers read)."""

    nodes: tuple[str, ...]
    node_costs: Mapping[str, Sequence[float]]
    edges: Mapping[tuple[str, str], np.ndarray] = field(default_factory=dict)
    pairs: Mapping[tuple[str, str], np.ndarray] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        nodes = tuple(self.nodes)
        if len(set(nodes)) != len(nodes):
            dup = sorted({n for n in nodes if nodes.count(n) > 1})
            raise LayoutSolverError(f"duplicate node names: {dup}")
        missing = [n for n in nodes if n not in self.node_costs]
        extra = [n for n in self.node_costs if n not in set(nodes)]
        if missing or extra:
            raise LayoutSolverError(f"node_costs must have one entry per node: missing {missing}, "
                                    f"unknown {extra}")
        costs: dict[str, np.ndarray] = {}
        for n in nodes:
            try:
                c = np.array(self.node_costs[n], dtype=np.float64)
            except (TypeError, ValueError) as e:
                raise LayoutSolverError(f"node {n!r}: costs are not numbers ({e})") from None
            if c.ndim != 1 or c.size == 0:
                raise LayoutSolverError(f"node {n!r}: costs must be a non-empty 1-D sequence, "
                                        f"got shape {c.shape}")
            _check_values(c, f"node {n!r}")
            if np.isinf(c).all():
                raise LayoutSolverError(f"node {n!r}: every candidate layout has infinite cost "
                                        f"(no feasible layout)")
            costs[n] = _readonly(c)
        index = {n: k for k, n in enumerate(nodes)}
        edges: dict[tuple[str, str], np.ndarray] = {}
        pairs: dict[tuple[str, str], np.ndarray] = {}
        for key, m in self.edges.items():
            if not (isinstance(key, tuple) and len(key) == 2):
                raise LayoutSolverError(f"edge key {key!r} is not a (producer, consumer) pair")
            u, v = key
            for end in (u, v):
                if end not in index:
                    raise LayoutSolverError(f"edge {u!r}->{v!r}: unknown node {end!r}")
            if u == v:
                raise LayoutSolverError(f"edge {u!r}->{v!r}: a node cannot feed itself")
            try:
                a = np.array(m, dtype=np.float64)
            except (TypeError, ValueError) as e:
                raise LayoutSolverError(f"edge {u!r}->{v!r}: matrix is not numbers ({e})") from None
            want = (costs[u].size, costs[v].size)
            if a.shape != want:
                raise LayoutSolverError(f"edge {u!r}->{v!r}: matrix shape {a.shape} != {want} "
                                        f"(candidates of {u!r} x candidates of {v!r})")
            _check_values(a, f"edge {u!r}->{v!r}")
            edges[(u, v)] = _readonly(a)
            if index[u] > index[v]:
                u, v, a = v, u, a.T
            pairs[(u, v)] = pairs[(u, v)] + a if (u, v) in pairs else a.copy()
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "node_costs", MappingProxyType(costs))
        object.__setattr__(self, "edges", MappingProxyType(edges))
        pairs = {k: _readonly(a) for k, a in pairs.items()}
        object.__setattr__(self, "pairs", MappingProxyType(pairs))

    def num_candidates(self, node: str) -> int:
        return int(self.node_costs[node].size)

    def cost(self, choice: Mapping[str, int]) -> float:
        """Total cost of an assignment (a candidate index per node), recomputed from the tables."""
        missing = [n for n in self.nodes if n not in choice]
        if missing:
            raise LayoutSolverError(f"assignment has no layout for nodes {missing}")
        for n in self.nodes:
            i, k = choice[n], self.num_candidates(n)
            if not isinstance(i, (int, np.integer)) or not 0 <= i < k:
                raise LayoutSolverError(f"node {n!r}: layout {i!r} is not an index in [0, {k})")
        terms = [float(self.node_costs[n][choice[n]]) for n in self.nodes]
        terms += [float(m[choice[u], choice[v]]) for (u, v), m in self.pairs.items()]
        return math.fsum(terms)


@dataclass(frozen=True)
class LayoutSolution:
    """``choice[n]``: the chosen candidate index of node ``n``; ``cost``: its total, recomputed
    from the problem; ``method``: "dp", "pbqp" or "brute_force"; ``optimal``: proven optimal (DP
    and brute force always, PBQP when no RN reduction ran); ``reductions``: PBQP's count of each
    reduction kind (empty for the others); ``note``: why ``solve`` chose the method."""

    choice: dict[str, int]
    cost: float
    method: str
    optimal: bool
    reductions: dict[str, int] = field(default_factory=dict)
    note: str = ""


def _infeasible(detail: str) -> LayoutSolverError:
    return LayoutSolverError(f"no feasible layout assignment: {detail}")


# ---------------------------------------------------------------- exact DP (variable elimination)

def _neighbours(problem: LayoutProblem) -> dict[str, set[str]]:
    nb: dict[str, set[str]] = {n: set() for n in problem.nodes}
    for u, v in problem.pairs:
        nb[u].add(v)
        nb[v].add(u)
    return nb


def dp_peak_states(problem: LayoutProblem) -> int:
    """The largest table ``solve_dp`` would build: the product of the candidate counts of the
    nodes live at once (added, with a neighbour not yet added) plus the one being added."""
    nb, added, live, peak = _neighbours(problem), set(), [], 1
    for v in problem.nodes:
        peak = max(peak, math.prod(problem.num_candidates(n) for n in live + [v]))
        added.add(v)
        live = [n for n in live + [v] if nb[n] - added]
    return peak


def solve_dp(problem: LayoutProblem, max_states: int = DEFAULT_MAX_STATES) -> LayoutSolution:
    """Exact minimum by dynamic programming over ``problem.nodes`` in order (any graph; give a
    topological order so the live set stays small: 1 node on a chain). Raises ``StateCapExceeded``
    before doing any work when a table would exceed ``max_states`` entries, and
    ``LayoutSolverError`` when no assignment has finite cost."""
    peak = dp_peak_states(problem)
    if peak > max_states:
        raise StateCapExceeded(f"DP needs {peak} states (cap {max_states}): too many layouts live "
                               f"at once along the node order; use solve_pbqp")
    nb, added = _neighbours(problem), set()
    # table[i0, i1, ...]: least cost of the added nodes given the layouts of the live nodes `axes`.
    table, axes = np.zeros(()), []
    # (node, axes left after it was minimised out, argmin over it): replayed backwards at the end.
    trail: list[tuple[str, list[str], np.ndarray]] = []
    for v in problem.nodes:
        table = table[..., None] + problem.node_costs[v]
        axes = axes + [v]
        for a, u in enumerate(axes[:-1]):
            m = problem.pairs.get((u, v))  # pairs follow node order: u was added before v
            if m is not None:
                shape = [1] * len(axes)
                shape[a], shape[-1] = m.shape
                table = table + m.reshape(shape)
        if np.isinf(table).all():
            raise _infeasible(f"node {v!r} has no layout of finite cost given the nodes before it")
        added.add(v)
        for u in [n for n in axes if not nb[n] - added]:  # no neighbour left to add: minimise out
            a = axes.index(u)
            arg = table.argmin(axis=a).astype(np.min_scalar_type(problem.num_candidates(u)))
            table = table.min(axis=a)
            axes = axes[:a] + axes[a + 1:]
            trail.append((u, list(axes), arg))
    choice: dict[str, int] = {}
    for u, rest, arg in reversed(trail):
        choice[u] = int(arg[tuple(choice[n] for n in rest)])
    return LayoutSolution(choice, problem.cost(choice), "dp", True)


# ---------------------------------------------------------------- PBQP

def solve_pbqp(problem: LayoutProblem) -> LayoutSolution:
    """Reduce the graph node by node (degree 0/1/2 exactly, else RN), then assign the nodes in
    reverse reduction order. ``optimal`` is True iff no RN ran (always so on trees and forests,
    and on series-parallel graphs such as chains of diamonds)."""
    cost = {n: problem.node_costs[n].copy() for n in problem.nodes}
    adj: dict[str, dict[str, np.ndarray]] = {n: {} for n in problem.nodes}  # adj[u][v]: [|u|, |v|]

    def link(u: str, v: str, m: np.ndarray) -> None:
        if v in adj[u]:
            m = adj[u][v] + m
        adj[u][v], adj[v][u] = m, m.T

    for (u, v), m in problem.pairs.items():
        if m.any():  # an all-zero matrix couples nothing; dropping it lowers degrees
            link(u, v, m)
    order = {n: k for k, n in enumerate(problem.nodes)}
    counts = dict.fromkeys(REDUCTIONS, 0)
    stack: list[tuple] = []
    heuristic = False

    def check(n: str, why: str) -> None:
        if np.isinf(cost[n]).all():
            if heuristic:
                raise _infeasible(f"after a heuristic (RN) choice node {n!r} has none left ({why});"
                                  f" the problem may still be feasible: try solve_dp")
            raise _infeasible(f"node {n!r} has no layout of finite cost ({why})")

    def remove(x: str) -> None:
        for y in adj.pop(x):
            del adj[y][x]

    while adj:
        # Lowest degree first (ties in node order), so an exact reduction runs whenever one can.
        x = min(adj, key=lambda n: (len(adj[n]), order[n]))
        if len(adj[x]) > 2:
            # RN (heuristic) on the busiest node, whose removal lowers the most degrees: fix it
            # to the layout best on its own, each neighbour replying at its best.
            x = max(adj, key=lambda n: (len(adj[n]), -order[n]))
        nbrs = sorted(adj[x], key=order.__getitem__)
        cx = cost[x]
        if len(nbrs) == 0:
            check(x, "R0")
            stack.append(("R0", x, cx))
        elif len(nbrs) == 1:
            (y,) = nbrs
            mxy = adj[x][y]
            cost[y] = cost[y] + (cx[:, None] + mxy).min(axis=0)
            check(y, f"folding in {x!r}")
            stack.append(("RI", x, cx, y, mxy))
        elif len(nbrs) == 2:
            y, z = nbrs
            mxy, mxz = adj[x][y], adj[x][z]
            d = (cx[:, None, None] + mxy[:, :, None] + mxz[:, None, :]).min(axis=0)
            if np.isinf(d).all() and not heuristic:
                raise _infeasible(f"no layouts of {y!r} and {z!r} fit any layout of {x!r}")
            link(y, z, d)
            stack.append(("RII", x, cx, y, mxy, z, mxz))
        else:
            heuristic = True
            local = cx + sum((adj[x][y] + cost[y][None, :]).min(axis=1) for y in nbrs)
            i = int(local.argmin())
            for y in nbrs:
                cost[y] = cost[y] + adj[x][y][i]
                check(y, f"{x!r} fixed to layout {i}")
            stack.append(("RN", x, i))
        counts[stack[-1][0]] += 1
        remove(x)
    choice: dict[str, int] = {}
    for step in reversed(stack):
        kind, x = step[0], step[1]
        if kind == "R0":
            choice[x] = int(step[2].argmin())
        elif kind == "RI":
            _, _, cx, y, mxy = step
            choice[x] = int((cx + mxy[:, choice[y]]).argmin())
        elif kind == "RII":
            _, _, cx, y, mxy, z, mxz = step
            choice[x] = int((cx + mxy[:, choice[y]] + mxz[:, choice[z]]).argmin())
        else:
            choice[x] = step[2]
    total = problem.cost(choice)
    if math.isinf(total):  # only reachable after RN: exact reductions raise above
        raise _infeasible("the heuristic (RN) choices led to an impossible combination; "
                          "the problem may still be feasible: try solve_dp")
    return LayoutSolution(choice, total, "pbqp", counts["RN"] == 0, counts)


# ---------------------------------------------------------------- front door and oracle

def solve(problem: LayoutProblem, max_states: int = DEFAULT_MAX_STATES) -> LayoutSolution:
    """Exact DP when its largest table fits ``max_states`` (on a chain: the largest product of two
    neighbours' candidate counts), else PBQP; ``method`` and ``note`` say which and why."""
    peak = dp_peak_states(problem)
    if peak <= max_states:
        sol = solve_dp(problem, max_states)
        note = f"DP: at most {peak} states (cap {max_states})"
    else:
        sol = solve_pbqp(problem)
        note = f"PBQP: DP would need {peak} states (cap {max_states})"
    return LayoutSolution(sol.choice, sol.cost, sol.method, sol.optimal, sol.reductions, note)


def brute_force(problem: LayoutProblem, limit: int = BRUTE_FORCE_LIMIT) -> LayoutSolution:
    """Every assignment scored at once (one numpy array axis per node): the tests' oracle.
    Refuses problems with more than ``limit`` assignments."""
    shape = tuple(problem.num_candidates(n) for n in problem.nodes)
    if math.prod(shape) > limit:
        raise LayoutSolverError(f"brute force over {math.prod(shape)} assignments (limit {limit})")
    axis = {n: k for k, n in enumerate(problem.nodes)}
    total = np.zeros(shape)
    for n in problem.nodes:
        s = [1] * len(shape)
        s[axis[n]] = shape[axis[n]]
        total = total + problem.node_costs[n].reshape(s)
    for (u, v), m in problem.pairs.items():
        s = [1] * len(shape)
        s[axis[u]], s[axis[v]] = m.shape
        total = total + m.reshape(s)
    flat = int(total.argmin())
    if math.isinf(total.flat[flat]):
        raise _infeasible("every assignment has infinite cost")
    idx = np.unravel_index(flat, shape)
    choice = {n: int(i) for n, i in zip(problem.nodes, idx)}
    return LayoutSolution(choice, problem.cost(choice), "brute_force", True)
