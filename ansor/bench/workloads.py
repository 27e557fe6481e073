"""The suite's workloads and systems: which computations ``ansor bench`` measures, with which
arguments, and which systems it compares (ours and the peers).

``parse_workloads`` turns ``--workloads`` into rows: suite names or any registered workload with
its arguments (``WORKLOAD:ARGS``).
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Sequence

from ansor import argtypes
from compute.ops import WORKLOADS


@dataclass(frozen=True)
class BenchWorkload:
    """One row of the suite: a registered workload (``compute.ops``) with its arguments."""

    name: str            # the suite's key, e.g. "gemm_1024"; names logs and result entries
    workload: str        # registered workload name
    args: tuple
    label: str           # how the table names it
    memory_bound: bool = False  # reported in milliseconds: its FLOP count says little


SUITE: tuple[BenchWorkload, ...] = (
    BenchWorkload("gemm_1024", "matmul", (1024, 1024, 1024), "GEMM 1024^3"),
    BenchWorkload("gemm_512", "matmul", (512, 512, 512), "GEMM 512^3"),
    BenchWorkload("batch_matmul", "batch_matmul", (16, 128, 128, 128), "batch matmul 16x128^3"),
    BenchWorkload("conv2d", "conv2d_nhwc", (1, 56, 56, 64, 64, 3, 3, 1, 1),
                  "conv2d NHWC 56x56x64->64 3x3"),
    BenchWorkload("conv2d_bias_relu", "conv2d_bias_relu", (1, 56, 56, 64, 64, 3, 3, 1, 1),
                  "conv2d 3x3 + bias + relu"),
    BenchWorkload("conv2d_1x1", "conv2d_nhwc", (1, 56, 56, 64, 256, 1, 1, 1, 0),
                  "conv2d 1x1 56x56x64->256"),
    BenchWorkload("depthwise_conv2d", "depthwise_conv2d_nhwc", (1, 112, 112, 32, 3, 3, 1, 1),
                  "depthwise conv2d 112x112x32 3x3"),
    BenchWorkload("dense_bias_relu", "dense_bias_relu", (128, 1024, 1024),
                  "dense 128x1024x1024 + bias + relu"),
    BenchWorkload("softmax", "softmax", (1024, 1024), "softmax 1024x1024", memory_bound=True),
    BenchWorkload("layer_norm", "layer_norm", (1024, 1024), "layer_norm 1024x1024",
                  memory_bound=True),
)

# Odd and prime sizes from real models (issue 18): ``ansor bench --set odd``. Tiles that divide
# such extents are poor (a prime has only 1 and itself), so these rows measure the imperfect
# tiles and their tail strategies.
ODD_SHAPES: tuple[BenchWorkload, ...] = (
    BenchWorkload("gemm_541_773_1009", "matmul", (541, 773, 1009), "GEMM 541x773x1009 (primes)"),
    BenchWorkload("gemm_613_887_1031", "matmul", (613, 887, 1031), "GEMM 613x887x1031 (primes)"),
    BenchWorkload("gemm_1021_557_811", "matmul", (1021, 557, 811), "GEMM 1021x557x811 (primes)"),
    BenchWorkload("dense_1001", "dense", (1, 1001, 1280),
                  "dense 1x1280->1001 (MobileNet classifier)"),
    BenchWorkload("dense_197", "dense", (197, 3072, 768), "dense 197x768->3072 (ViT-B/16 MLP)"),
    BenchWorkload("batch_matmul_197", "batch_matmul", (12, 197, 197, 64),
                  "batch matmul 12x197x64 @ 64x197 (ViT attention scores)"),
    BenchWorkload("batch_matmul_77", "batch_matmul", (8, 77, 64, 77),
                  "batch matmul 8x77x77 @ 77x64 (CLIP text attention x values)"),
    BenchWorkload("conv2d_stem_7x7", "conv2d_nhwc", (1, 224, 224, 3, 64, 7, 7, 2, 3),
                  "conv2d 224x224x3->64 7x7 s2 (ResNet stem, 3 channels)"),
    BenchWorkload("conv2d_149", "conv2d_nhwc", (1, 149, 149, 32, 32, 3, 3, 1, 0),
                  "conv2d 149x149x32->32 3x3 (Inception-v3 stem)"),
    BenchWorkload("conv2d_35_1x1", "conv2d_nhwc", (1, 35, 35, 288, 64, 1, 1, 1, 0),
                  "conv2d 35x35x288->64 1x1 (Inception-v3)"),
    BenchWorkload("conv2d_17_1x1", "conv2d_nhwc", (1, 17, 17, 768, 192, 1, 1, 1, 0),
                  "conv2d 17x17x768->192 1x1 (Inception-v3)"),
    BenchWorkload("conv2d_7x7_512", "conv2d_nhwc", (1, 7, 7, 512, 512, 3, 3, 1, 1),
                  "conv2d 7x7x512->512 3x3 (ResNet last stage)"),
)
# Reduction-heavy operators of real models that are not suite rows (issue 19): ``ansor bench
# --set reductions``. Each label names the layer it is taken from.
REDUCTIONS: tuple[BenchWorkload, ...] = (
    BenchWorkload("conv1d_whisper", "conv1d", (1, 3000, 80, 384, 3, 1, 1),
                  "conv1d 3000x80->384 k3 (Whisper-tiny encoder conv1)"),
    BenchWorkload("conv3d_r3d", "conv3d_ndhwc", (1, 2, 7, 7, 512, 512, 3, 3, 3, 1, 1),
                  "conv3d 2x7x7x512->512 3x3x3 (R3D-18 layer 4)"),
    BenchWorkload("group_conv_resnext", "group_conv2d_nhwc", (1, 28, 28, 256, 256, 3, 3, 1, 1, 1, 32),
                  "grouped conv2d 28x28x256 3x3, 32 groups (ResNeXt-50 32x4d stage 2)"),
    BenchWorkload("deconv_dcgan", "conv2d_transpose_nhwc", (1, 8, 8, 256, 128, 4, 4, 2, 1),
                  "transposed conv2d 8x8x256->16x16x128 4x4 s2 (DCGAN generator)"),
    BenchWorkload("dilated_enet", "dilated_conv2d_nhwc", (1, 64, 128, 32, 32, 3, 3, 1, 2, 2),
                  "dilated conv2d 64x128x32 3x3 d2 (ENet stage 2, 512x1024 input)"),
    BenchWorkload("conv2d_nchw_alexnet", "conv2d_nchw", (1, 27, 27, 64, 192, 5, 5, 1, 2),
                  "conv2d NCHW 64x27x27->192 5x5 (AlexNet conv2)"),
    BenchWorkload("dense_gelu_bert", "dense_bias_gelu", (128, 3072, 768),
                  "dense 128x768->3072 + bias + GELU (BERT-base FFN)"),
    BenchWorkload("attention_softmax_bert", "batch_matmul_softmax", (12, 128, 128, 64),
                  "batch matmul 12x128x64 @ 64x128 + softmax (BERT-base attention)"),
    BenchWorkload("global_avgpool_resnet50", "avg_pool2d", (1, 7, 7, 2048, 7, 7, 1, 0),
                  "global average pool 7x7x2048 (ResNet-50 head)", memory_bound=True),
)
SETS: dict[str, tuple[BenchWorkload, ...]] = {"suite": SUITE, "odd": ODD_SHAPES,
                                              "reductions": REDUCTIONS}

PEERS = ("numpy", "torch", "torch_compile", "tvm")
SYSTEMS = ("ours",) + PEERS
SYSTEM_LABELS = {"ours": "ours", "numpy": "numpy", "torch": "PyTorch",
                 "torch_compile": "torch.compile", "tvm": "TVM"}
MEMORY_BOUND_WORKLOADS = {"softmax", "layer_norm", "relu", "gelu", "bias_add", "add", "multiply",
                          "transpose", "reshape", "pad", "max_pool2d", "avg_pool2d", "norm"}


def parse_workloads(text: str | None, base: Sequence[BenchWorkload] = SUITE) -> list[BenchWorkload]:
    """``None`` -> every row of ``base`` (the suite, or another of ``SETS``); else comma-separated
    row names of any set or ``WORKLOAD:ARGS`` items (``matmul:64,64,64``; separate several such
    items with ``;``)."""
    if not text:
        return list(base)
    by_name = {w.name: w for rows in SETS.values() for w in rows}
    items = [t.strip() for t in (text.split(";") if ":" in text else text.split(",")) if t.strip()]
    out = []
    for item in items:
        if item in by_name:
            out.append(by_name[item])
            continue
        if ":" not in item:
            raise SystemExit(f"ansor bench: unknown workload {item!r}; suite workloads: "
                             f"{', '.join(by_name)} (or WORKLOAD:ARGS, e.g. matmul:64,64,64)")
        wl, _, arg_text = item.partition(":")
        if wl not in WORKLOADS:
            raise SystemExit(f"ansor bench: unknown registered workload {wl!r} (see `ansor "
                             "workloads`)")
        try:  # parsed and bounded as --args is (ansor.argtypes)
            args = argtypes.shape_args(arg_text) if arg_text.strip() else \
                WORKLOADS[wl].default_args
        except argparse.ArgumentTypeError as err:
            raise SystemExit(f"ansor bench: bad arguments {arg_text!r} in {item!r}: {err}") from None
        flat = "x".join(str(a) for a in args if not isinstance(a, (tuple, list)))
        out.append(BenchWorkload(f"{wl}_{flat}" if flat else wl, wl, args, f"{wl}{args}",
                                 memory_bound=wl in MEMORY_BOUND_WORKLOADS))
    names = [w.name for w in out]
    if len(set(names)) != len(names):
        raise SystemExit(f"ansor bench: a workload is selected twice: {', '.join(names)}")
    return out
