"""The operator library, in two layers as TVM's topi and its registered workloads.

* Tensor-level ops (``ops.matmul(A, B)``, ``ops.conv2d_nhwc(data, kernel, ...)``, ``ops.relu(x)``,
  ...) take Tensors and return a Tensor; they compose into fused graphs. Modules: ``nn``
  (convolutions, pooling, softmax, layer norm, activations, dense, pad), ``linalg`` (matmul, batch
  matmul, norm) and ``elemwise`` (broadcast add/multiply, transpose, reshape); ``winograd`` (the
  3x3 stride-1 convolution as Winograd F(m, 3), its transform matrices and weight transform).
* Workloads (``ops.workloads.matmul(M, N, K)``, ...) take only shape parameters and return the full
  argument list ``[inputs..., output]`` of a kernel. They are registered by name in ``WORKLOADS``
  with a typical real shape and a tiny shape for tests; ``get_workload(name)`` looks one up.

Where a workload and a tensor-level op share a name (``matmul``), the package attribute is the
tensor-level op; the fused workloads, which have no tensor-level twin, are exported here too.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..tensor import Tensor
from . import elemwise, linalg, nn, winograd, workloads
from .elemwise import add, broadcast_shape, multiply, reshape, transpose
from .linalg import batch_matmul, matmul, norm
from .nn import (avg_pool2d, bias_add, conv1d, conv2d_nchw, conv2d_nhwc, conv2d_transpose_nhwc,
                 conv3d_ndhwc, dense, depthwise_conv2d_nhwc, gelu, layer_norm, max_pool2d, pad, relu,
                 softmax)
from .workloads import (batch_matmul_softmax, conv2d_bias_relu, dense_bias_gelu, dense_bias_relu,
                        matmul_relu)

__all__ = [
    "WORKLOADS", "WorkloadSpec", "add", "avg_pool2d", "batch_matmul", "batch_matmul_softmax",
    "bias_add", "broadcast_shape", "conv1d", "conv2d_bias_relu", "conv2d_nchw", "conv2d_nhwc",
    "conv2d_transpose_nhwc", "conv3d_ndhwc", "dense", "dense_bias_gelu", "dense_bias_relu",
    "depthwise_conv2d_nhwc", "elemwise", "gelu", "get_workload", "layer_norm", "linalg", "matmul",
    "matmul_relu", "max_pool2d", "multiply", "nn", "norm", "pad", "relu", "reshape", "softmax",
    "transpose", "winograd", "workloads",
]


@dataclass(frozen=True)
class WorkloadSpec:
    """A named workload: ``func(*default_args)`` is a typical real shape, ``func(*small_args)`` a
    tiny one that builds and evaluates in milliseconds (for tests)."""

    name: str
    func: Callable[..., list[Tensor]]
    default_args: tuple[Any, ...]
    small_args: tuple[Any, ...]
    description: str

    def make(self, small: bool = False) -> list[Tensor]:
        """The argument list for the default (or the small) shape."""
        return self.func(*(self.small_args if small else self.default_args))


_W = workloads
_SPECS = [
    # name, func, default (typical real shape), small, description
    ("matmul", _W.matmul, (1024, 1024, 1024), (17, 7, 9), "GEMM C = A @ B (M, N, K)"),
    ("batch_matmul", _W.batch_matmul, (16, 128, 128, 64), (2, 7, 5, 3),
     "batched GEMM C[b] = A[b] @ B[b] (B, M, N, K)"),
    ("dense", _W.dense, (128, 3072, 768), (7, 5, 9), "fully connected data @ weight^T + bias (M, N, K)"),
    ("norm", _W.norm, (1024, 1024), (7, 17), "matrix 2-norm sqrt(sum(A**2)), 'NRM' (M, N)"),
    ("conv1d", _W.conv1d, (1, 256, 64, 128, 3, 2, 1), (1, 17, 3, 4, 3, 2, 1),
     "1-D convolution NWC (N, L, CI, CO, K, stride, padding)"),
    ("conv2d_nhwc", _W.conv2d_nhwc, (1, 56, 56, 64, 64, 3, 3, 1, 1), (1, 7, 7, 3, 4, 3, 3, 1, 1),
     "2-D convolution NHWC (N, H, W, CI, CO, KH, KW, stride, padding)"),
    ("conv2d_nchw", _W.conv2d_nchw, (1, 56, 56, 64, 64, 3, 3, 1, 1), (1, 7, 7, 3, 4, 3, 3, 1, 1),
     "2-D convolution NCHW (N, H, W, CI, CO, KH, KW, stride, padding)"),
    ("group_conv2d_nhwc", _W.conv2d_nhwc, (1, 56, 56, 64, 64, 3, 3, 1, 1, 1, 4),
     (1, 7, 7, 4, 4, 3, 3, 1, 1, 1, 2), "grouped 2-D convolution NHWC, 'GRP' (..., dilation, groups)"),
    ("dilated_conv2d_nhwc", _W.conv2d_nhwc, (1, 56, 56, 64, 64, 3, 3, 1, 2, 2),
     (1, 9, 9, 3, 4, 3, 3, 1, 2, 2), "dilated 2-D convolution NHWC, 'DIL' (..., padding, dilation)"),
    ("depthwise_conv2d_nhwc", _W.depthwise_conv2d_nhwc, (1, 112, 112, 32, 3, 3, 1, 1),
     (1, 7, 7, 3, 3, 3, 1, 1), "depthwise 2-D convolution NHWC (N, H, W, C, KH, KW, stride, padding)"),
    ("conv3d_ndhwc", _W.conv3d_ndhwc, (1, 16, 56, 56, 64, 64, 3, 3, 3, 1, 1),
     (1, 4, 5, 5, 2, 3, 3, 3, 3, 1, 1),
     "3-D convolution NDHWC (N, D, H, W, CI, CO, KD, KH, KW, stride, padding)"),
    ("conv2d_transpose_nhwc", _W.conv2d_transpose_nhwc, (1, 4, 4, 512, 256, 4, 4, 2, 1),
     (1, 3, 3, 2, 3, 4, 4, 2, 1),
     "transposed 2-D convolution NHWC, 'T2D' (N, H, W, CI, CO, KH, KW, stride, padding)"),
    ("max_pool2d", _W.max_pool2d, (1, 112, 112, 64, 3, 3, 2, 1), (1, 7, 7, 3, 3, 3, 2, 1),
     "max pooling NHWC (N, H, W, C, KH, KW, stride, padding)"),
    ("avg_pool2d", _W.avg_pool2d, (1, 56, 56, 64, 3, 3, 2, 1), (1, 7, 7, 3, 3, 3, 2, 1),
     "average pooling NHWC, count_include_pad (N, H, W, C, KH, KW, stride, padding)"),
    ("softmax", _W.softmax, (1024, 1024), (7, 17), "row softmax (M, N)"),
    ("layer_norm", _W.layer_norm, (512, 768), (7, 17), "layer norm over rows with gamma, beta (M, N)"),
    ("relu", _W.relu, (1024, 1024), (7, 17), "ReLU (*shape)"),
    ("gelu", _W.gelu, (1024, 1024), (7, 17), "GELU, erf form (*shape)"),
    ("bias_add", _W.bias_add, (1024, 1024), (7, 17), "add a bias along the last axis (*shape)"),
    ("add", _W.add, ((1024, 1024), (1024,)), ((7, 17), (17,)), "broadcast A + B (shape_a, shape_b)"),
    ("multiply", _W.multiply, ((1024, 1024), (1024, 1024)), ((7, 1), (1, 17)),
     "broadcast A * B (shape_a, shape_b)"),
    ("transpose", _W.transpose, ((1, 64, 56, 56), (0, 2, 3, 1)), ((2, 3, 5, 7), (0, 2, 3, 1)),
     "permute dimensions (shape, axes)"),
    ("reshape", _W.reshape, ((128, 768), (128, 12, 64)), ((6, 10), (3, 4, 5)),
     "row-major reshape (shape, newshape)"),
    ("pad", _W.pad, ((1, 56, 56, 64), (0, 1, 1, 0)), ((1, 5, 7, 3), (0, 1, 2, 0), (0, 2, 1, 0)),
     "constant padding (shape, pad_before, pad_after)"),
    ("conv2d_bias_relu", _W.conv2d_bias_relu, (1, 56, 56, 64, 64, 3, 3, 1, 1),
     (1, 7, 7, 3, 4, 3, 3, 1, 1), "relu(conv2d_nhwc + bias) (N, H, W, CI, CO, KH, KW, stride, padding)"),
    ("dense_bias_gelu", _W.dense_bias_gelu, (128, 3072, 768), (7, 17, 9),
     "gelu(data @ weight^T + bias) (M, N, K)"),
    ("dense_bias_relu", _W.dense_bias_relu, (128, 1024, 1024), (7, 17, 9),
     "relu(data @ weight^T + bias) (M, N, K)"),
    ("batch_matmul_softmax", _W.batch_matmul_softmax, (12, 128, 128, 64), (2, 7, 17, 5),
     "softmax(A[b] @ B[b]) over the last axis (B, M, N, K)"),
    ("matmul_relu", _W.matmul_relu, (1024, 1024, 1024), (17, 7, 9), "relu(A @ B) (M, N, K)"),
]

WORKLOADS: dict[str, WorkloadSpec] = {
    name: WorkloadSpec(name, func, default, small, desc) for name, func, default, small, desc in _SPECS
}


def get_workload(name: str) -> WorkloadSpec:
    """The registered workload ``name``; a KeyError lists the known names otherwise."""
    try:
        return WORKLOADS[name]
    except KeyError:
        raise KeyError(f"unknown workload {name!r}; known workloads: {', '.join(sorted(WORKLOADS))}") from None
