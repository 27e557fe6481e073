"""The odd-shape rows of the benchmark (``ansor bench --set odd``, ``benchmarks/odd_shapes.py``):
registered, real-model sizes, prime GEMMs, and peers whose formulations hold on such shapes."""
from __future__ import annotations

import numpy as np
import pytest

from ansor.bench import suite as S
from ansor.bench.workloads import ODD_SHAPES, SETS, SUITE
from ansor.cli import main as ansor_main
from tests.util import assert_peers_match_reference


def _is_prime(n: int) -> bool:
    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))


def test_the_odd_set_is_registered_and_apart_from_the_suite() -> None:
    names = [w.name for w in ODD_SHAPES]
    assert len(names) == len(set(names)) and not set(names) & {w.name for w in SUITE}
    assert SETS["odd"] is ODD_SHAPES and SETS["suite"] is SUITE
    for w in ODD_SHAPES:
        assert S.make_dag(w.workload, w.args).flop_count > 0
    kinds = {w.workload for w in ODD_SHAPES}
    assert {"matmul", "dense", "conv2d_nhwc", "batch_matmul"} <= kinds


def test_several_gemms_have_three_prime_sizes_between_500_and_1100() -> None:
    triples = [w.args for w in ODD_SHAPES if w.workload == "matmul"
               and all(_is_prime(n) and 500 <= n <= 1100 for n in w.args)]
    assert len(set(triples)) >= 3


def test_rows_are_selected_from_either_set() -> None:
    assert S.parse_workloads(None, ODD_SHAPES) == list(ODD_SHAPES)
    assert [w.name for w in S.parse_workloads("dense_1001,gemm_512")] == ["dense_1001", "gemm_512"]
    with pytest.raises(SystemExit):
        S.parse_workloads("dense_1002", ODD_SHAPES)


# Small instances of every odd row's kind: a 7x7 stride-2 stem on 3 channels, a 3x3 without
# padding on an odd map, 1x1 on 7x7, odd dense and odd batched products.
SMALL = [("conv2d_nhwc", (1, 19, 19, 3, 8, 7, 7, 2, 3)), ("conv2d_nhwc", (1, 13, 13, 5, 6, 3, 3, 1, 0)),
         ("conv2d_nhwc", (1, 7, 7, 9, 5, 1, 1, 1, 0)), ("dense", (1, 17, 13)), ("dense", (7, 11, 5)),
         ("batch_matmul", (3, 7, 7, 5)), ("matmul", (13, 17, 19))]


@pytest.mark.parametrize("name,args", SMALL)
def test_peer_formulations_hold_on_odd_shapes(name, args) -> None:
    ref = assert_peers_match_reference(name, args)  # torch is in the test extra: no skip
    assert not np.isnan(ref).any()


def test_ansor_bench_lists_the_odd_set(capsys) -> None:
    assert ansor_main(["bench", "--set", "odd", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(w.name in out for w in ODD_SHAPES) and "gemm_512" not in out
    with pytest.raises(SystemExit) as err:
        ansor_main(["bench", "--set", "nope", "--list"])
    assert err.value.code == 2
