"""``memory_plan.plan_buffers``: which buffer each intermediate of a compiled network takes.

Two values alive at once never share a buffer (a kernel would overwrite what a later one reads);
outputs never share; a buffer is as large as the largest value it holds; and a value takes the
buffer freed last (still in cache), of any size, rather than a new one.
"""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ansor.graph.ir import TensorType
from ansor.graph.memory_plan import buffer_sizes, plan_buffers


def _types(sizes: dict[str, int], dtype: str = "float32") -> dict[str, TensorType]:
    return {v: TensorType((n,), dtype) for v, n in sizes.items()}


def test_takes_the_buffer_freed_last_and_grows_it():
    # a -> b -> c -> d, a chain: two buffers alternate, each grown to its largest value.
    order = [("a", ["x"]), ("b", ["a"]), ("c", ["b"]), ("d", ["c"])]
    types = _types({"x": 4, "a": 10, "b": 30, "c": 20, "d": 5})
    planned = plan_buffers(order, types, keep={"x", "d"})
    assert planned["a"] != planned["b"]
    assert planned["c"] == planned["a"]  # a is dead once b is written; c is larger than a
    assert planned["d"] not in (planned["a"], planned["b"])  # an output has a buffer of its own
    sizes = buffer_sizes(planned, types)
    assert sizes[planned["a"]] == (20, "float32")
    assert sizes[planned["b"]] == (30, "float32")


def test_prefers_a_free_buffer_large_enough_then_the_latest():
    # After e, both a's (100) and b's (10) buffers are free, b's freed last; f needs 50.
    order = [("a", ["x"]), ("b", ["x"]), ("e", ["a", "b"]), ("f", ["e"]), ("g", ["f"])]
    types = _types({"x": 1, "a": 100, "b": 10, "e": 5, "f": 50, "g": 1})
    planned = plan_buffers(order, types, keep={"x", "g"})
    assert planned["f"] == planned["a"]  # large enough, though freed before b's
    assert buffer_sizes(planned, types)[planned["a"]][0] == 100


def test_dtypes_never_share():
    order = [("a", ["x"]), ("b", ["a"]), ("c", ["b"])]
    types = {"x": TensorType((4,), "float32"), "a": TensorType((8,), "float32"),
             "b": TensorType((8,), "int64"), "c": TensorType((8,), "int64")}
    planned = plan_buffers(order, types, keep={"x", "c"})
    assert len({planned["a"], planned["b"], planned["c"]}) == 3


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_live_values_never_share(data):
    n = data.draw(st.integers(1, 14))
    order, sizes = [], {"in": 3}
    for i in range(n):
        earlier = ["in"] + [f"v{j}" for j in range(i)]
        reads = data.draw(st.lists(st.sampled_from(earlier), min_size=1, max_size=3))
        order.append((f"v{i}", reads))
        sizes[f"v{i}"] = data.draw(st.integers(1, 64))
    outputs = {f"v{n - 1}"} | set(data.draw(st.lists(st.sampled_from([v for v, _ in order]), max_size=2)))
    types = _types(sizes)
    planned = plan_buffers(order, types, keep=outputs | {"in"})
    last = {v: i for i, (_, reads) in enumerate(order) for v in reads}
    born = {v: i for i, (v, _) in enumerate(order)}
    for v in planned:
        for w in planned:
            if v < w and planned[v] == planned[w] and v in born and w in born:
                assert v not in outputs and w not in outputs
                first, second = sorted((v, w), key=born.get)
                # the earlier value's last reader ran before the later one is written
                assert last.get(first, born[first]) < born[second]
    sizes_of = buffer_sizes(planned, types)
    for v, b in planned.items():
        assert sizes_of[b][0] >= types[v].size
