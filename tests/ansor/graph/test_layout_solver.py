"""The graph-level layout solver (issue 20) against brute force: DP is exact on every graph it
accepts, PBQP is exact (and says so) on chains and trees, and where it needed the RN heuristic it
still returns a valid assignment whose cost is its recomputed cost, marked not optimal."""
import math
import time

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from ansor.graph.layout_solver import (LayoutProblem, LayoutSolverError, StateCapExceeded,
                                       brute_force, dp_peak_states, solve, solve_dp, solve_pbqp)

INF = math.inf
# Integer-valued costs keep sums exact, so solver and oracle totals compare with ==; inf is an
# impossible transform or kernel, drawn about one time in twenty.
COST = st.sampled_from([float(c) for c in range(20)] + [INF])


@st.composite
def problems(draw, kind):
    n = draw(st.integers(1, 7) if kind != "dag" else st.integers(3, 8))
    k = [draw(st.integers(1, 4)) for _ in range(n)]
    names = tuple(f"op{i}" for i in range(n))
    costs = {}
    for i, name in enumerate(names):
        c = draw(st.lists(COST, min_size=k[i], max_size=k[i]))
        if all(math.isinf(x) for x in c):  # an all-infeasible node is an input error, tested apart
            c[0] = 0.0
        costs[name] = c
    if kind == "chain":
        links = [(i - 1, i) for i in range(1, n)]
    elif kind == "tree":  # a forest: each node has at most one producer
        links = [(p, i) for i in range(1, n) if (p := draw(st.integers(-1, i - 1))) >= 0]
    else:  # DAG: one to three producers each, so diamonds, residual adds and concats
        links = [(p, i) for i in range(1, n)
                 for p in draw(st.sets(st.integers(0, i - 1), min_size=1, max_size=min(3, i)))]
    edges = {}
    for p, c in links:
        m = np.array(draw(st.lists(COST, min_size=k[p] * k[c], max_size=k[p] * k[c])))
        edges[(names[p], names[c])] = m.reshape(k[p], k[c])
        if draw(st.integers(0, 5)) == 0:  # a parallel edge the other way round, to be merged
            edges[(names[c], names[p])] = m.reshape(k[p], k[c]).T.copy()
    return LayoutProblem(names, costs, edges)


def _oracle(p):
    """The brute-force optimum, or None when every assignment is impossible."""
    try:
        return brute_force(p).cost
    except LayoutSolverError as e:
        assert "no feasible" in str(e)
        return None


def _check_exact(sol, p, best):
    assert set(sol.choice) == set(p.nodes)
    assert sol.cost == p.cost(sol.choice) == best
    assert sol.optimal


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["chain", "tree"]).flatmap(problems))
def test_chains_and_trees_are_solved_exactly_by_dp_and_pbqp(p):
    best = _oracle(p)
    if best is None:
        for solver in (solve_dp, solve_pbqp, solve):
            with pytest.raises(LayoutSolverError, match="no feasible"):
                solver(p)
        return
    _check_exact(solve_dp(p), p, best)
    sol = solve_pbqp(p)
    _check_exact(sol, p, best)
    assert sol.reductions["RN"] == 0  # a forest always has a node of degree <= 1
    assert sum(sol.reductions.values()) <= len(p.nodes)  # nodes after an RII may count as R0
    assert solve(p).method == "dp"


@settings(max_examples=60, deadline=None)
@given(problems("dag"))
def test_dags_dp_exact_pbqp_exact_or_says_heuristic(p):
    best = _oracle(p)
    event("infeasible" if best is None else "feasible")
    if best is None:
        for solver in (solve_dp, solve_pbqp):
            with pytest.raises(LayoutSolverError, match="no feasible"):
                solver(p)
        return
    _check_exact(solve_dp(p), p, best)
    # Any node order is exact for DP (a non-topological one only makes the tables larger).
    backwards = LayoutProblem(p.nodes[::-1], p.node_costs, p.edges)
    assert solve_dp(backwards).cost == best
    try:
        sol = solve_pbqp(p)
    except LayoutSolverError as e:  # only a heuristic choice may paint PBQP into a corner
        assert "heuristic" in str(e)
        event("PBQP: heuristic found no feasible assignment")
        return
    event("PBQP: optimal" if sol.optimal else "PBQP: needed RN")
    assert sum(sol.reductions.values()) == len(p.nodes)
    assert sol.optimal == (sol.reductions["RN"] == 0)
    assert sol.cost == p.cost(sol.choice)
    if sol.optimal:
        assert sol.cost == best
    else:
        assert sol.cost >= best


def _chain(costs, transform):
    names = tuple(f"op{i}" for i in range(len(costs)))
    edges = {(a, b): np.asarray(transform, dtype=float) for a, b in zip(names, names[1:])}
    return LayoutProblem(names, dict(zip(names, costs)), edges)


def test_chain_where_the_locally_best_layouts_are_globally_wrong():
    # op1 is faster blocked (layout 1) but its neighbours are faster plain (layout 0): taking each
    # kernel's best costs 1 + 4 + 1 plus two transforms of 20; staying plain costs 12.
    p = _chain([[1, 5], [10, 4], [1, 5]], [[0, 20], [20, 0]])
    greedy = {n: int(np.argmin(p.node_costs[n])) for n in p.nodes}
    assert p.cost(greedy) == 46
    for solver in (solve_dp, solve_pbqp, solve, brute_force):
        sol = solver(p)
        assert sol.choice == {"op0": 0, "op1": 0, "op2": 0} and sol.cost == 12 and sol.optimal


def test_diamond_is_exact_by_the_degree_two_reduction():
    # a -> (b, c) -> d, as a residual block: b and c are much faster blocked (layout 1), d only
    # runs well plain; a would rather be plain but follows b and c, as two transforms after it
    # cost more than its slower kernel.
    t = [[0, 3], [3, 0]]
    edges = {e: np.array(t, float) for e in [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")]}
    costs = {"a": [0, 2], "b": [9, 1], "c": [9, 0], "d": [0, 20]}
    p = LayoutProblem(("a", "b", "c", "d"), costs, edges)
    sol = solve_pbqp(p)
    assert sol.optimal and sol.reductions["RII"] >= 1 and sol.reductions["RN"] == 0
    assert sol.cost == brute_force(p).cost == solve_dp(p).cost == 9
    assert sol.choice == {"a": 1, "b": 1, "c": 1, "d": 0}


def test_an_impossible_transform_is_avoided():
    # op0 layout 0 -> op1 layout 1 would be free but cannot be done (inf).
    p = _chain([[0, 9], [10, 0]], [[0, INF], [3, 0]])
    for solver in (solve_dp, solve_pbqp, brute_force):
        sol = solver(p)
        assert sol.choice == {"op0": 1, "op1": 1} and sol.cost == 9


def test_no_feasible_assignment_is_a_clear_error():
    with pytest.raises(LayoutSolverError, match="node 'b': every candidate layout has infinite"):
        LayoutProblem(("a", "b"), {"a": [1, 2], "b": [INF, INF]})
    p = _chain([[1, 2], [1, 2]], [[INF, INF], [INF, INF]])
    for solver in (solve_dp, solve_pbqp, solve, brute_force):
        with pytest.raises(LayoutSolverError, match="no feasible layout assignment"):
            solver(p)


@pytest.mark.parametrize("costs,edges,message", [
    ({"a": [1, 2]}, {}, r"missing \['b'\]"),
    ({"a": [1, 2], "b": [1], "z": [0]}, {}, r"unknown \['z'\]"),
    ({"a": [1, 2], "b": []}, {}, "node 'b': costs must be a non-empty 1-D"),
    ({"a": [1, 2], "b": [[1]]}, {}, "node 'b': costs must be a non-empty 1-D"),
    ({"a": [1, float("nan")], "b": [1]}, {}, "node 'a': contains NaN"),
    ({"a": [1, -INF], "b": [1]}, {}, "node 'a': contains -inf"),
    ({"a": [1, 2], "b": [1]}, {("a", "b"): np.zeros((1, 2))},
     r"edge 'a'->'b': matrix shape \(1, 2\) != \(2, 1\)"),
    ({"a": [1, 2], "b": [1]}, {("a", "c"): np.zeros((2, 1))}, "edge 'a'->'c': unknown node 'c'"),
    ({"a": [1, 2], "b": [1]}, {("a", "a"): np.zeros((2, 2))}, "a node cannot feed itself"),
    ({"a": [1, 2], "b": [1]}, {"ab": np.zeros((2, 1))}, "not a .producer, consumer. pair"),
    ({"a": [1, 2], "b": [1]}, {("b", "a"): [[0, "x"]]}, "edge 'b'->'a': matrix is not numbers"),
])
def test_bad_input_names_the_node_or_edge(costs, edges, message):
    with pytest.raises(LayoutSolverError, match=message):
        LayoutProblem(("a", "b"), costs, edges)


def test_duplicate_node_names_and_bad_assignments_are_rejected():
    with pytest.raises(LayoutSolverError, match="duplicate node names"):
        LayoutProblem(("a", "a"), {"a": [1]})
    p = _chain([[1, 2], [1, 2]], [[0, 1], [1, 0]])
    with pytest.raises(LayoutSolverError, match="no layout for nodes"):
        p.cost({"op0": 0})
    with pytest.raises(LayoutSolverError, match=r"node 'op1': layout 2 is not an index in \[0, 2\)"):
        p.cost({"op0": 0, "op1": 2})


def test_parallel_edges_are_merged_as_one_undirected_pair():
    m, back = np.array([[0, 1, 2], [3, 4, 5]], float), np.array([[1, 0], [0, 1], [7, 0]], float)
    p = LayoutProblem(("a", "b"), {"a": [0, 0], "b": [0, 0, 0]}, {("a", "b"): m, ("b", "a"): back})
    assert list(p.pairs) == [("a", "b")]
    np.testing.assert_array_equal(p.pairs[("a", "b")], m + back.T)
    assert p.cost({"a": 1, "b": 0}) == 3 + 0
    assert solve_pbqp(p).cost == solve_dp(p).cost == brute_force(p).cost == 1


def _complete(n, k, seed):
    rng = np.random.default_rng(seed)
    names = tuple(f"v{i}" for i in range(n))
    edges = {(names[i], names[j]): rng.integers(0, 10, (k, k)).astype(float)
             for i in range(n) for j in range(i + 1, n)}
    return LayoutProblem(names, {v: rng.integers(0, 10, k).astype(float) for v in names}, edges)


def test_dense_graph_needs_the_heuristic_and_says_so():
    for seed in range(5):
        p = _complete(5, 3, seed)
        sol = solve_pbqp(p)
        assert sol.reductions["RN"] >= 1 and not sol.optimal
        assert sol.cost == p.cost(sol.choice) >= brute_force(p).cost == solve_dp(p).cost


def test_dp_state_cap_raises_and_solve_falls_back_to_pbqp():
    p = _complete(6, 4, 0)
    assert dp_peak_states(p) == 4 ** 6
    with pytest.raises(StateCapExceeded, match=r"DP needs 4096 states \(cap 100\)"):
        solve_dp(p, max_states=100)
    sol = solve(p, max_states=100)
    assert sol.method == "pbqp" and "DP would need 4096 states" in sol.note
    assert solve(p).method == "dp" and solve(p).cost == brute_force(p).cost


def test_brute_force_refuses_huge_problems():
    p = LayoutProblem(tuple(f"n{i}" for i in range(21)), {f"n{i}": [0, 1] for i in range(21)})
    with pytest.raises(LayoutSolverError, match="brute force over 2097152 assignments"):
        brute_force(p)


def test_empty_problem_costs_nothing():
    p = LayoutProblem((), {})
    for solver in (solve_dp, solve_pbqp, solve, brute_force):
        sol = solver(p)
        assert sol.choice == {} and sol.cost == 0 and sol.optimal


def test_long_chain_solves_exactly_and_quickly():
    # 60 operators with 8 layouts each: 8**60 assignments, DP is 60 tables of 64 entries.
    rng = np.random.default_rng(0)
    names = tuple(f"conv{i}" for i in range(60))
    costs = {n: rng.uniform(1, 10, 8) for n in names}
    edges = {}
    for a, b in zip(names, names[1:]):
        m = rng.uniform(0, 5, (8, 8))
        np.fill_diagonal(m, 0.0)
        edges[(a, b)] = m
    p = LayoutProblem(names, costs, edges)
    t0 = time.perf_counter()
    dp = solve_dp(p)
    assert time.perf_counter() - t0 < 0.5
    pb = solve_pbqp(p)
    assert dp.optimal and pb.optimal and pb.reductions == {"R0": 1, "RI": 59, "RII": 0, "RN": 0}
    assert pb.cost == pytest.approx(dp.cost, rel=1e-12)
    assert solve(p).method == "dp"
