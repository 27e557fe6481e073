"""The reduction-heavy rows of the benchmark (``ansor bench --set reductions``,
``benchmarks/reduction_ops.py``): registered, apart from the suite, and peers whose formulations
(grouped, dilated, strided, transposed, 1-D, 3-D and NCHW convolutions, GELU, attention softmax,
average pooling) match the reference on small instances of every kind."""
from __future__ import annotations

import pytest

from ansor.bench import suite as S
from ansor.bench.workloads import ODD_SHAPES, REDUCTIONS, SETS, SUITE
from ansor.cli import main as ansor_main
from tests.util import assert_peers_match_reference


def test_the_set_is_registered_apart_from_the_others_and_reduces() -> None:
    names = [w.name for w in REDUCTIONS]
    assert len(names) >= 8 and len(set(names)) == len(names)
    assert not set(names) & {w.name for w in SUITE + ODD_SHAPES}
    assert SETS["reductions"] is REDUCTIONS
    suite_kinds = {w.workload for w in SUITE}
    for w in REDUCTIONS:
        dag = S.make_dag(w.workload, w.args)
        assert dag.flop_count > 0
        assert any(getattr(op, "reduce_axes", ()) for op in dag.ops), w.name
        assert w.workload not in suite_kinds, w.name


# Small instances of every row's kind, with the options the rows do not use (stride, dilation,
# padding, output padding) as well.
SMALL = [("conv1d", (1, 23, 5, 7, 3, 1, 1)), ("conv1d", (1, 23, 6, 4, 3, 2, 1, 2, 2)),
         ("conv3d_ndhwc", (1, 3, 5, 5, 4, 6, 3, 3, 3, 1, 1)),
         ("conv3d_ndhwc", (1, 4, 6, 5, 4, 4, 3, 1, 3, 2, 0, 1, 2)),
         ("group_conv2d_nhwc", (1, 9, 9, 8, 12, 3, 3, 1, 1, 1, 4)),
         ("conv2d_transpose_nhwc", (1, 4, 5, 6, 3, 4, 4, 2, 1)),
         ("conv2d_transpose_nhwc", (1, 3, 3, 2, 3, 3, 3, 2, 0, 1)),
         ("dilated_conv2d_nhwc", (1, 11, 13, 4, 5, 3, 3, 1, 2, 2)),
         ("conv2d_nchw", (1, 9, 9, 4, 6, 5, 5, 1, 2)), ("conv2d_nchw", (1, 9, 9, 4, 6, 3, 3, 2, 0)),
         ("dense_bias_gelu", (5, 7, 9)), ("batch_matmul_softmax", (2, 5, 7, 3)),
         ("avg_pool2d", (1, 7, 7, 5, 7, 7, 1, 0)), ("avg_pool2d", (1, 9, 9, 5, 3, 3, 2, 1))]


@pytest.mark.parametrize("name,args", SMALL)
def test_peer_formulations_match_the_reference(name, args) -> None:
    assert_peers_match_reference(name, args)


def test_ansor_bench_lists_the_set(capsys) -> None:
    assert ansor_main(["bench", "--set", "reductions", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(w.name in out for w in REDUCTIONS) and "gemm_512" not in out
