"""The workload registry: library workloads by name, user registration rules, argument checks.

Records name their computation by registered name + JSON arguments, so the rules tested here are
what makes a record rebuildable: one function per name, arguments that survive JSON exactly, and
errors that say what is wrong rather than failing later in a loader.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from compute import ComputeDAG, te
from compute import ops
from compute.ops import workloads as W
from compute.workload_registry import (args_to_json, canonical_args, get_workload_func,
                                       make_workload, register_workload, registered_name,
                                       registered_workloads, workload_desc)


def _key(tensors) -> str:
    return ComputeDAG(tensors).workload_key


@pytest.mark.parametrize("name", sorted(ops.WORKLOADS))
def test_every_library_workload_is_registered_by_its_name(name):
    spec = ops.WORKLOADS[name]
    assert get_workload_func(name) is spec.func
    assert _key(make_workload(name, spec.small_args)) == _key(spec.make(small=True))


def test_registered_name_of_library_functions():
    assert registered_name(W.matmul) == "matmul"
    # conv2d_nhwc is also registered as the grouped and dilated variants: its own name wins.
    assert registered_name(W.conv2d_nhwc) == "conv2d_nhwc"
    assert get_workload_func("group_conv2d_nhwc") is W.conv2d_nhwc
    assert registered_name(lambda: None) is None
    assert set(ops.WORKLOADS) <= set(registered_workloads())


def _vec_add(n: int) -> list:
    a = te.placeholder((n,), "float32", "A")
    b = te.placeholder((n,), "float32", "B")
    return [a, b, te.compute((n,), lambda i: a[i] + b[i], "C")]


def test_register_bare_named_and_as_call():
    @register_workload
    def reg_test_bare(n: int):
        return _vec_add(n)

    @register_workload(name="reg_test_named")
    def some_function(n: int):
        return _vec_add(n)

    def reg_plain(n: int):
        return _vec_add(n)

    assert register_workload(reg_plain, "reg_test_call") is reg_plain
    assert registered_name(reg_test_bare) == "reg_test_bare"
    assert registered_name(some_function) == "reg_test_named"
    assert registered_name(reg_plain) == "reg_test_call"
    assert _key(make_workload("reg_test_named", [5])) == _key(_vec_add(5))
    # The decorator returns the function itself.
    assert len(reg_test_bare(3)) == 3


def test_reregistering_the_same_function_is_fine_another_one_is_an_error():
    def reg_dup(n: int):
        return _vec_add(n)

    register_workload(reg_dup, "reg_test_dup")
    register_workload(reg_dup, "reg_test_dup")  # idempotent

    def other(n: int):
        return _vec_add(n + 1)

    with pytest.raises(ValueError, match="already registered"):
        register_workload(other, "reg_test_dup")
    assert get_workload_func("reg_test_dup") is reg_dup
    with pytest.raises(ValueError, match="'matmul' is already registered"):
        register_workload(other, "matmul")
    register_workload(other, "reg_test_dup", override=True)
    assert get_workload_func("reg_test_dup") is other
    assert registered_name(reg_dup) is None


def test_bad_registrations():
    with pytest.raises(TypeError, match="non-empty string"):
        register_workload(lambda n: _vec_add(n), "")
    with pytest.raises(TypeError, match="not callable"):
        register_workload(42, "reg_test_not_callable")  # type: ignore[arg-type]


def test_unknown_name_is_a_key_error_listing_names():
    with pytest.raises(KeyError, match="no workload is registered as 'nope'.*matmul"):
        make_workload("nope", [1])


def test_wrong_arity_is_a_type_error_with_the_signature():
    with pytest.raises(TypeError, match=r"matmul\(17, 7\).*signature"):
        make_workload("matmul", [17, 7])
    with pytest.raises(TypeError, match="must be a list or tuple"):
        make_workload("matmul", 17)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a list or tuple"):
        make_workload("matmul", "17,7,9")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [object(), {"M": 1}, {1, 2}, b"x", [1, [2, object()]], 1j])
def test_non_json_arguments_are_rejected(bad):
    with pytest.raises(TypeError, match="JSON|ints, floats"):
        canonical_args((1, bad))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), np.float32("inf")])
def test_non_finite_floats_are_rejected(bad):
    with pytest.raises(ValueError, match="finite"):
        canonical_args((bad,))


def test_arguments_round_trip_through_json_as_tuples():
    args = (1, 2.5, "float32", True, None, [3, (4, [5])], (6,), np.int64(7), np.float32(0.5))
    c = canonical_args(args)
    assert c == (1, 2.5, "float32", True, None, (3, (4, (5,))), (6,), 7, 0.5)
    assert type(c[7]) is int and type(c[8]) is float
    assert canonical_args(json.loads(json.dumps(args_to_json(c)))) == c
    # ... and bools stay bools (JSON true is not 1).
    assert canonical_args(json.loads(json.dumps(args_to_json((True, 1)))))[0] is True


def test_tuple_arguments_reach_the_workload_function():
    tensors = make_workload("transpose", [[2, 3, 5], [2, 0, 1]])
    assert tuple(tensors[-1].shape) == (5, 2, 3)
    assert workload_desc("add", canonical_args([[7, 17], [17]])) == "add((7, 17), (17,))"


def test_workload_returning_no_tensors_is_a_type_error():
    @register_workload(name="reg_test_returns_int")
    def broken(n: int):
        return n

    with pytest.raises(TypeError, match="must return a list of tensors"):
        make_workload("reg_test_returns_int", [3])
