"""Workloads: functions of shape parameters only that return a kernel's full argument list.

Each returns ``[inputs..., output]``, ready for ``ComputeDAG(...)``: this is what the tuner, the
benchmarks and the tests name and build (TVM's ``@auto_scheduler.register_workload`` functions).
Inputs are placeholders with short conventional names (A, B, data, kernel, bias, ...). All
convolution workloads take their shape in the same order, (N, spatial..., CI, CO, kernel...),
whatever the tensor layout, so layouts can be compared with one argument list.
"""
from __future__ import annotations

from typing import Sequence

from .. import te
from ..tensor import Tensor
from . import elemwise as _ew
from . import linalg as _la
from . import nn as _nn

__all__ = [
    "add", "avg_pool2d", "batch_matmul", "batch_matmul_softmax", "bias_add", "conv1d",
    "conv2d_bias_relu", "conv2d_nchw", "conv2d_nhwc", "conv2d_transpose_nhwc", "conv3d_ndhwc",
    "dense", "dense_bias_gelu", "dense_bias_relu", "depthwise_conv2d_nhwc", "gelu", "layer_norm", "matmul",
    "matmul_relu", "max_pool2d", "multiply", "norm", "pad", "relu", "reshape", "softmax", "transpose",
]


# ---- linear algebra ----------------------------------------------------------------------------

def matmul(M: int, N: int, K: int, dtype: str = "float32", transpose_a: bool = False,
           transpose_b: bool = False) -> list[Tensor]:
    """GEMM C[M, N] = A @ B (A is [K, M] if transpose_a, B is [N, K] if transpose_b)."""
    a = te.placeholder((K, M) if transpose_a else (M, K), dtype, "A")
    b = te.placeholder((N, K) if transpose_b else (K, N), dtype, "B")
    return [a, b, _la.matmul(a, b, transpose_a, transpose_b)]


def batch_matmul(B: int, M: int, N: int, K: int, dtype: str = "float32", transpose_a: bool = False,
                 transpose_b: bool = False) -> list[Tensor]:
    """Batched GEMM C[B, M, N] = A[b] @ B[b]."""
    a = te.placeholder((B, K, M) if transpose_a else (B, M, K), dtype, "A")
    b = te.placeholder((B, N, K) if transpose_b else (B, K, N), dtype, "B")
    return [a, b, _la.batch_matmul(a, b, transpose_a, transpose_b)]


def dense(M: int, N: int, K: int, bias: bool = True, dtype: str = "float32") -> list[Tensor]:
    """Fully connected layer: data [M, K] x weight [N, K]^T (+ bias [N])."""
    data = te.placeholder((M, K), dtype, "data")
    weight = te.placeholder((N, K), dtype, "weight")
    if not bias:
        return [data, weight, _nn.dense(data, weight)]
    b = te.placeholder((N,), dtype, "bias")
    return [data, weight, b, _nn.dense(data, weight, b)]


def norm(M: int, N: int, dtype: str = "float32") -> list[Tensor]:
    """Matrix 2-norm ("NRM"): sqrt of the sum of squares of A [M, N], shape (1,)."""
    a = te.placeholder((M, N), dtype, "A")
    return [a, _la.norm(a)]


# ---- convolutions ------------------------------------------------------------------------------

def conv1d(N: int, L: int, CI: int, CO: int, K: int, stride: int = 1, padding: int = 0,
           dilation: int = 1, groups: int = 1, dtype: str = "float32") -> list[Tensor]:
    """1-D convolution, NWC data [N, L, CI], kernel [K, CI/groups, CO]."""
    data = te.placeholder((N, L, CI), dtype, "data")
    kernel = te.placeholder((K, CI // groups, CO), dtype, "kernel")
    return [data, kernel, _nn.conv1d(data, kernel, stride, padding, dilation, groups)]


def conv2d_nhwc(N: int, H: int, W: int, CI: int, CO: int, KH: int, KW: int, stride: int = 1,
                padding: int = 0, dilation: int = 1, groups: int = 1,
                dtype: str = "float32") -> list[Tensor]:
    """2-D convolution, data [N, H, W, CI], kernel [KH, KW, CI/groups, CO]."""
    data = te.placeholder((N, H, W, CI), dtype, "data")
    kernel = te.placeholder((KH, KW, CI // groups, CO), dtype, "kernel")
    return [data, kernel, _nn.conv2d_nhwc(data, kernel, stride, padding, dilation, groups)]


def conv2d_nchw(N: int, H: int, W: int, CI: int, CO: int, KH: int, KW: int, stride: int = 1,
                padding: int = 0, dilation: int = 1, groups: int = 1,
                dtype: str = "float32") -> list[Tensor]:
    """2-D convolution, data [N, CI, H, W], kernel [CO, CI/groups, KH, KW]."""
    data = te.placeholder((N, CI, H, W), dtype, "data")
    kernel = te.placeholder((CO, CI // groups, KH, KW), dtype, "kernel")
    return [data, kernel, _nn.conv2d_nchw(data, kernel, stride, padding, dilation, groups)]


def conv3d_ndhwc(N: int, D: int, H: int, W: int, CI: int, CO: int, KD: int, KH: int, KW: int,
                 stride: int = 1, padding: int = 0, dilation: int = 1, groups: int = 1,
                 dtype: str = "float32") -> list[Tensor]:
    """3-D convolution, data [N, D, H, W, CI], kernel [KD, KH, KW, CI/groups, CO]."""
    data = te.placeholder((N, D, H, W, CI), dtype, "data")
    kernel = te.placeholder((KD, KH, KW, CI // groups, CO), dtype, "kernel")
    return [data, kernel, _nn.conv3d_ndhwc(data, kernel, stride, padding, dilation, groups)]


def depthwise_conv2d_nhwc(N: int, H: int, W: int, C: int, KH: int, KW: int, stride: int = 1,
                          padding: int = 0, dilation: int = 1, multiplier: int = 1,
                          dtype: str = "float32") -> list[Tensor]:
    """Depthwise 2-D convolution, data [N, H, W, C], kernel [KH, KW, C, multiplier]."""
    data = te.placeholder((N, H, W, C), dtype, "data")
    kernel = te.placeholder((KH, KW, C, multiplier), dtype, "kernel")
    return [data, kernel, _nn.depthwise_conv2d_nhwc(data, kernel, stride, padding, dilation)]


def conv2d_transpose_nhwc(N: int, H: int, W: int, CI: int, CO: int, KH: int, KW: int,
                          stride: int = 1, padding: int = 0, output_padding: int = 0,
                          dilation: int = 1, dtype: str = "float32") -> list[Tensor]:
    """Transposed 2-D convolution, data [N, H, W, CI], kernel [KH, KW, CI, CO]."""
    data = te.placeholder((N, H, W, CI), dtype, "data")
    kernel = te.placeholder((KH, KW, CI, CO), dtype, "kernel")
    return [data, kernel, _nn.conv2d_transpose_nhwc(data, kernel, stride, padding, output_padding,
                                                    dilation)]


# ---- pooling and normalisation -----------------------------------------------------------------

def max_pool2d(N: int, H: int, W: int, C: int, KH: int, KW: int, stride: int = 1, padding: int = 0,
               dtype: str = "float32") -> list[Tensor]:
    """Max pooling, NHWC."""
    data = te.placeholder((N, H, W, C), dtype, "data")
    return [data, _nn.max_pool2d(data, (KH, KW), stride, padding)]


def avg_pool2d(N: int, H: int, W: int, C: int, KH: int, KW: int, stride: int = 1, padding: int = 0,
               dtype: str = "float32") -> list[Tensor]:
    """Average pooling, NHWC, padding counted in the divisor (count_include_pad)."""
    data = te.placeholder((N, H, W, C), dtype, "data")
    return [data, _nn.avg_pool2d(data, (KH, KW), stride, padding)]


def softmax(M: int, N: int, dtype: str = "float32") -> list[Tensor]:
    """Row softmax of A [M, N]."""
    a = te.placeholder((M, N), dtype, "A")
    return [a, _nn.softmax(a)]


def layer_norm(M: int, N: int, eps: float = 1e-5, dtype: str = "float32") -> list[Tensor]:
    """Layer norm of the rows of A [M, N] with gamma, beta [N]."""
    a = te.placeholder((M, N), dtype, "A")
    gamma = te.placeholder((N,), dtype, "gamma")
    beta = te.placeholder((N,), dtype, "beta")
    return [a, gamma, beta, _nn.layer_norm(a, gamma, beta, eps)]


# ---- elementwise and layout --------------------------------------------------------------------

def relu(*shape: int, dtype: str = "float32") -> list[Tensor]:
    """ReLU of an input of the given shape, e.g. ``relu(1024, 1024)``."""
    a = te.placeholder(shape, dtype, "A")
    return [a, _nn.relu(a)]


def gelu(*shape: int, dtype: str = "float32") -> list[Tensor]:
    """GELU (erf form) of an input of the given shape."""
    a = te.placeholder(shape, dtype, "A")
    return [a, _nn.gelu(a)]


def bias_add(*shape: int, dtype: str = "float32") -> list[Tensor]:
    """An input of the given shape plus a bias along its last dimension."""
    a = te.placeholder(shape, dtype, "A")
    b = te.placeholder((shape[-1],), dtype, "bias")
    return [a, b, _nn.bias_add(a, b)]


def add(shape_a: Sequence[int], shape_b: Sequence[int], dtype: str = "float32") -> list[Tensor]:
    """A + B with numpy broadcasting of the two shapes."""
    a = te.placeholder(tuple(shape_a), dtype, "A")
    b = te.placeholder(tuple(shape_b), dtype, "B")
    return [a, b, _ew.add(a, b)]


def multiply(shape_a: Sequence[int], shape_b: Sequence[int], dtype: str = "float32") -> list[Tensor]:
    """A * B with numpy broadcasting of the two shapes."""
    a = te.placeholder(tuple(shape_a), dtype, "A")
    b = te.placeholder(tuple(shape_b), dtype, "B")
    return [a, b, _ew.multiply(a, b)]


def transpose(shape: Sequence[int], axes: Sequence[int] | None = None,
              dtype: str = "float32") -> list[Tensor]:
    """Permute the dimensions of A (numpy's ``axes`` convention)."""
    a = te.placeholder(tuple(shape), dtype, "A")
    return [a, _ew.transpose(a, axes)]


def reshape(shape: Sequence[int], newshape: Sequence[int], dtype: str = "float32") -> list[Tensor]:
    """Reshape A (row-major) to ``newshape``."""
    a = te.placeholder(tuple(shape), dtype, "A")
    return [a, _ew.reshape(a, newshape)]


def pad(shape: Sequence[int], pad_before: int | Sequence[int], pad_after: int | Sequence[int] | None = None,
        pad_value: float = 0.0, dtype: str = "float32") -> list[Tensor]:
    """Constant padding of A."""
    a = te.placeholder(tuple(shape), dtype, "A")
    return [a, _nn.pad(a, pad_before, pad_after, pad_value)]


# ---- fused subgraphs ---------------------------------------------------------------------------

def conv2d_bias_relu(N: int, H: int, W: int, CI: int, CO: int, KH: int, KW: int, stride: int = 1,
                     padding: int = 0, dtype: str = "float32") -> list[Tensor]:
    """relu(conv2d_nhwc(data, kernel) + bias): the ubiquitous CNN block."""
    data = te.placeholder((N, H, W, CI), dtype, "data")
    kernel = te.placeholder((KH, KW, CI, CO), dtype, "kernel")
    bias = te.placeholder((CO,), dtype, "bias")
    conv = _nn.conv2d_nhwc(data, kernel, stride, padding)
    return [data, kernel, bias, _nn.relu(_nn.bias_add(conv, bias))]


def dense_bias_gelu(M: int, N: int, K: int, dtype: str = "float32") -> list[Tensor]:
    """gelu(data @ weight^T + bias): a transformer FFN's first half."""
    data = te.placeholder((M, K), dtype, "data")
    weight = te.placeholder((N, K), dtype, "weight")
    bias = te.placeholder((N,), dtype, "bias")
    return [data, weight, bias, _nn.gelu(_nn.dense(data, weight, bias))]


def dense_bias_relu(M: int, N: int, K: int, dtype: str = "float32") -> list[Tensor]:
    """relu(data @ weight^T + bias): an MLP layer."""
    data = te.placeholder((M, K), dtype, "data")
    weight = te.placeholder((N, K), dtype, "weight")
    bias = te.placeholder((N,), dtype, "bias")
    return [data, weight, bias, _nn.relu(_nn.dense(data, weight, bias))]


def batch_matmul_softmax(B: int, M: int, N: int, K: int, dtype: str = "float32") -> list[Tensor]:
    """softmax(A[b] @ B[b]) over the last axis: attention scores to probabilities."""
    a = te.placeholder((B, M, K), dtype, "A")
    b = te.placeholder((B, K, N), dtype, "B")
    return [a, b, _nn.softmax(_la.batch_matmul(a, b))]


def matmul_relu(M: int, N: int, K: int, dtype: str = "float32") -> list[Tensor]:
    """relu(A @ B): a GEMM with an elementwise consumer, the basic fusion case."""
    a = te.placeholder((M, K), dtype, "A")
    b = te.placeholder((K, N), dtype, "B")
    return [a, b, _nn.relu(_la.matmul(a, b))]
