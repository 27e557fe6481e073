"""Schedules written by hand with transform steps: what a performance engineer would write.

They show the schedule API at work, prove that the code generator reaches the speed the search
aims for (see benchmarks/hand_schedules.py for the figures against numpy and PyTorch), and give the
default job something fast to show before tuning. Each function returns ``(dag, state)``.
"""
from __future__ import annotations

import ansor
from compute.ops import workloads as W


def gemm_schedule(M: int = 1024, N: int = 1024, K: int = 1024):
    """Register tile 8 x 32 (16 zmm accumulators), K blocked by 128, 128 x 128 parallel tiles."""
    dag = ansor.ComputeDAG(W.matmul(M, N, K))
    s = dag.init_state().cache_write("matmul")
    CL, C = "matmul.local", "matmul"
    s = s.split(C, "i", [128]).split(C, "j", [128]).reorder(C, ["i.0", "j.0", "i.1", "j.1"])
    s = s.fuse(C, ["i.0", "j.0"]).parallel(C, 0)
    s = s.compute_at(CL, C, 0)
    s = s.split(C, "j.1", [32]).vectorize(C, "j.1.1")
    s = s.split(CL, "i", [8]).split(CL, "j", [32]).split(CL, "k", [128])
    s = s.reorder(CL, ["k.0", "i.0", "j.0", "k.1", "i.1", "j.1"])
    s = s.unroll(CL, "i.1").vectorize(CL, "j.1")
    return dag, s


def _conv_microkernel(s, acc: str):
    """The conv accumulator's loops: reduction outside, 8 output columns (unrolled) x 32 channels
    (one zmm pair) inside: 16 vector accumulators that LLVM keeps in registers."""
    s = s.split(acc, "w", [8]).split(acc, "co", [32])
    s = s.reorder(acc, ["n", "h", "w.0", "co.0", "rh", "rw", "rc", "w.1", "co.1"])
    return s.unroll(acc, "w.1").vectorize(acc, "co.1")


def _parallel_pad(s, pad: str = "conv2d_nhwc_pad"):
    return s.fuse(pad, [0, 1]).parallel(pad, 0).vectorize(pad, 2)


def _conv_output_tiles(s, out: str, acc: str):
    """Output tiles of one row x 8 columns x all channels, rows in parallel; ``acc`` per tile."""
    s = s.split(out, 2, [8]).fuse(out, [0, 1]).parallel(out, 0)  # (n h) w.0 w.1 co
    return s.compute_at(acc, out, 1).vectorize(out, 3)


def conv2d_schedule(H: int = 56, W_: int = 56, CI: int = 64, CO: int = 64):
    """conv2d NHWC 3x3 pad 1: local accumulator per output tile (cache_write)."""
    dag = ansor.ComputeDAG(W.conv2d_nhwc(1, H, W_, CI, CO, 3, 3, 1, 1))
    s = dag.init_state().cache_write("conv2d_nhwc")
    s = _conv_output_tiles(s, "conv2d_nhwc", "conv2d_nhwc.local")
    return dag, _parallel_pad(_conv_microkernel(s, "conv2d_nhwc.local"))


def conv2d_bias_relu_schedule(H: int = 56, W_: int = 56, CI: int = 64, CO: int = 64):
    """conv2d + bias + relu: bias inlined, the conv itself is the accumulator, computed per tile
    of the relu output (fusion: the conv result never goes to memory)."""
    dag = ansor.ComputeDAG(W.conv2d_bias_relu(1, H, W_, CI, CO, 3, 3, 1, 1))
    s = dag.init_state().compute_inline("bias_add")
    s = _conv_output_tiles(s, "relu", "conv2d_nhwc")
    return dag, _parallel_pad(_conv_microkernel(s, "conv2d_nhwc"))
