"""Write ``tests/models/<family>.onnx`` for every family of ``families.py``:
``python tests/models/export_families.py [FAMILY ...]``.

The files are committed so that the test suite needs no export. Exporter: torch's TorchScript
exporter (``dynamo=False``): the default dynamo exporter needs onnxscript, which this
environment does not have. Opset 17 (LayerNormalization is native; GELU is written with Erf
or Tanh as most exported models have it). Every input and output has a dynamic batch axis
("batch"), as users' models do; the shape the tests use (``families.FAMILIES``, batch 2) and,
for ids, their exclusive upper bound are recorded in the model's metadata
(``ansor_test_shape``: "2,3,32,32"; ``ansor_test_high``). Each export is checked against
PyTorch with onnxruntime before it is written.
"""
from __future__ import annotations

import collections
import io
import sys
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from families import FAMILIES, build, example_input  # noqa: E402 - run as a script

OPSET = 17
HERE = Path(__file__).resolve().parent


def export(name: str) -> onnx.ModelProto:
    """The family exported to ONNX (in memory), with the test shape in its metadata."""
    fam = FAMILIES[name]
    model, x = build(name), example_input(name)
    buf = io.BytesIO()
    with warnings.catch_warnings():  # the TorchScript exporter's deprecation and tracer warnings
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), buf, dynamo=False, opset_version=OPSET,
                          input_names=[fam.input_name], output_names=["output"],
                          dynamic_axes={fam.input_name: {0: "batch"}, "output": {0: "batch"}})
    proto = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(proto, full_check=True)
    meta = {"ansor_test_shape": ",".join(map(str, fam.shape))}
    if fam.high is not None:
        meta["ansor_test_high"] = str(fam.high)
    for k, v in meta.items():
        proto.metadata_props.add(key=k, value=v)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {fam.input_name: x.numpy()})[0]
    with torch.no_grad():
        want = model(x).numpy()
    err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    if not err < 1e-4:
        raise SystemExit(f"{name}: onnxruntime differs from PyTorch by {err:.2e} (relative)")
    return proto


def main(argv: list[str]) -> int:
    names = argv or list(FAMILIES)
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        print(f"unknown famil{'ies' if len(unknown) > 1 else 'y'}: {', '.join(unknown)} "
              f"(known: {', '.join(FAMILIES)})", file=sys.stderr)
        return 2
    for name in names:
        proto = export(name)
        path = HERE / f"{name}.onnx"
        path.write_bytes(proto.SerializeToString())
        ops = collections.Counter(n.op_type for n in proto.graph.node)
        print(f"{path.name}: {path.stat().st_size} bytes; " + ", ".join(f"{k} {v}" for k, v in sorted(ops.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
