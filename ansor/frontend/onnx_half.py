"""Half-precision ONNX models (float16, bfloat16), computed in float32 inside.

Our kernels compute in float32, so the importer widens at the boundaries: float16/bfloat16
initializers and constants become float32 constants (exactly: every half value is a float32
value); a float16/bfloat16 graph input is a float32 graph input and a float16/bfloat16 graph
output a float32 output, both remembered in ``Graph.io_dtypes`` so that the interpreter and the
compiled module take half arrays in and give half arrays out (``ml_dtypes`` gives numpy its
bfloat16; it is a dependency of onnx, so it is there whenever a model is imported).

A ``Cast`` to float16/bfloat16 inside the graph rounds to that precision and stays float32, so
results track onnxruntime's, which really computes in half there: a constant is rounded exactly
(numpy's conversion); a computed value by Veltkamp's splitting, ``t = x * (2**k + 1)``, ``hi = t
- (t - x)``, which rounds a float32 to its 24 - k leading bits with float32 operations (k = 13
for float16's 11 bits, 16 for bfloat16's 8), IEEE-exact in numpy and in our kernels (no fast-math).
Where it differs from a true conversion: values beyond the half type's range saturate at its
largest finite value instead of becoming inf (the value is clamped first, which also keeps ``t``
finite), and float16's subnormal range (|x| < 6.1e-5) keeps 11 bits instead of fewer. A Cast from
a half type is a cast from float32 (the existing Cast rule).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from ..graph.ir_types import numpy_dtype

# ONNX element types computed as float32 inside, with their boundary dtype names.
HALF_TYPES = {onnx.TensorProto.FLOAT16: "float16", onnx.TensorProto.BFLOAT16: "bfloat16"}
HALF_NUMPY = frozenset(numpy_dtype(d) for d in HALF_TYPES.values())

# Per half type: Veltkamp's splitter 2**k + 1 and the clamp (float16's largest finite value;
# for bfloat16 the largest |x| whose x * splitter stays a finite float32).
_SPLIT = {"float16": (float(2 ** 13 + 1), 65504.0),
          "bfloat16": (float(2 ** 16 + 1), float(np.finfo(np.float32).max) / (2 ** 16 + 1) * 0.999)}


def cast_to_half(imp: Any, node: onnx.NodeProto, dtype: str) -> None:
    """Import ``Cast(to=float16|bfloat16)``: the input rounded to ``dtype``'s precision, as a
    float32 value in the input's layout (see the module docstring)."""
    src, out = node.input[0], node.output[0]
    v = imp.val(src)
    if v.const is not None:
        imp.set_const(out, np.asarray(v.const).astype(numpy_dtype(dtype)))  # widened by set_const
        return
    nhwc = imp.is_nhwc(src)
    x = imp.nhwc(src) if nhwc else imp.plain(src)
    b = imp.b
    if x.dtype != "float32":
        x = b.add_node("cast", [x], {"dtype": "float32"}, f"{out}:float32")
    split, limit = _SPLIT[dtype]
    x = b.add_node("clip", [x], {"min": -limit, "max": limit}, f"{out}:clamp")
    t = b.add_node("mul", [x, np.float32(split)], {}, f"{out}:split")
    y = b.add_node("sub", [t, b.add_node("sub", [t, x], {}, f"{out}:low")], {}, imp.name_for(out, nhwc))
    (imp.set_nhwc if nhwc else imp.set_plain)(out, y)
