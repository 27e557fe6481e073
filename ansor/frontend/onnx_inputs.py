"""The input shapes of an imported ONNX model: declared, or given by ``shape=`` / ``batch=``.

A graph is compiled for static shapes, so every dimension the model leaves dynamic (a
``dim_param`` such as ``'batch'``, an unset or non-positive ``dim_value``, or no shape at all)
must be given by the caller: ``shape={input: dims}`` (or one shape for a one-input model) or
``batch=N``, which fills the first dimension of every input whose first dimension is dynamic
(a static first dimension is the model's own: exporters bake it into Reshape targets, so it is
not changed). An explicit ``shape=`` for an input wins over ``batch=``.

Errors are ``ShapeArgumentError``: the message names the input, the dimension and what to pass,
in the Python API's words (``shape=``, ``batch=``); ``cli_message`` says the same in the command
line's words (``--shape NAME=1x3x224x224``, ``--batch N``), so ``ansor network ...`` prints one
line a user can act on without knowing the Python call.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

from ..graph.ir import display_name
from .onnx_fold import OnnxImportError


class ShapeArgumentError(OnnxImportError):
    """A missing or bad input shape; ``str()`` in the API's words, ``cli_message`` in the
    command line's (``where: ...``, one line each)."""

    def __init__(self, api_message: str, cli_message: str) -> None:
        super().__init__(api_message)
        self.cli_message = cli_message


def _dims_text(dims: Any, cli: bool) -> str:
    return "x".join(str(d) for d in dims) if cli else "(" + ", ".join(str(d) for d in dims) + \
        ("," if len(dims) == 1 else "") + ")"


def _shape_hint(name: str, dims: Any, cli: bool) -> str:
    """How to give ``name`` the shape ``dims`` ('...' where the rank is unknown)."""
    if cli:
        return f"--shape {display_name(name)}={_dims_text(dims, True) if dims is not None else 'DxD...'}"
    return f"shape={{{name!r}: {_dims_text(dims, False) if dims is not None else '(...)'}}}"


def _positive_int(value: Any) -> bool:
    return not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, np.integer)) and value >= 1


class InputShapes:
    """Resolves each graph input's shape from the model's declaration and ``shape``/``batch``."""

    def __init__(self, where: str, inputs: list[onnx.ValueInfoProto], shape: Any, batch: Any) -> None:
        self.where, self.inputs = where, inputs
        names = [i.name for i in inputs]
        if batch is not None and not _positive_int(batch):
            raise ShapeArgumentError(f"{where}: batch= must be a positive integer, got {batch!r}",
                                     f"{where}: --batch must be a positive integer, got {batch!r}")
        self.batch = None if batch is None else int(batch)
        if shape is not None and not isinstance(shape, Mapping):
            if len(inputs) != 1:
                listed = ", ".join(display_name(n) for n in names)
                raise ShapeArgumentError(
                    f"{where}: shape= as one shape needs a model with one input; this one has "
                    f"{len(inputs)} ({listed}): pass a dict {{input name: shape}}",
                    f"{where}: --shape without NAME= needs a model with one input; this one has "
                    f"{len(inputs)} ({listed}): give --shape NAME=DIMS for each")
            shape = {names[0]: shape}
        self.given = dict(shape or {})
        unknown = [k for k in self.given if k not in names]
        if unknown:
            bad = ", ".join(display_name(str(k)) for k in unknown)
            listed = ", ".join(display_name(n) for n in names) or "none"
            raise ShapeArgumentError(f"{where}: shape= names unknown input(s) {bad}; inputs: {listed}",
                                     f"{where}: --shape names unknown input(s) {bad}; inputs: {listed}")

    def resolve(self) -> dict[str, tuple[int, ...]]:
        """``{input name: static shape}``, or ``ShapeArgumentError`` naming what is missing."""
        out = {i.name: self._one(i) for i in self.inputs}
        self._check_batch_used()
        return out

    def _one(self, inp: onnx.ValueInfoProto) -> tuple[int, ...]:
        tt = inp.type.tensor_type
        has_shape = tt.HasField("shape")
        dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in tt.shape.dim]
        shown = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim]
        name = inp.name
        if name in self.given:
            shp = self._given_shape(name, self.given[name])
            if has_shape and (len(shp) != len(dims) or any(d is not None and d != s for d, s in zip(dims, shp))):
                why = (f"rank {len(shp)}, the model's is {len(dims)}" if len(shp) != len(dims)
                       else "a static dimension differs")
                raise ShapeArgumentError(
                    f"{self.where}: shape= gives {list(shp)} for input {display_name(name)}, which the "
                    f"model declares as {shown} ({why})",
                    f"{self.where}: --shape gives {'x'.join(map(str, shp))} for input {display_name(name)}, "
                    f"which the model declares as {shown} ({why})")
            return shp
        if not has_shape:
            raise ShapeArgumentError(
                f"{self.where}: input {display_name(name)} has a dynamic or missing shape (no shape); give it "
                f"with {_shape_hint(name, None, False)}",
                f"{self.where}: input {display_name(name)} has no declared shape; give it with "
                f"{_shape_hint(name, None, True)}")
        zero = [k for k, d in enumerate(tt.shape.dim) if d.HasField("dim_value") and d.dim_value == 0]
        if zero:  # not dynamic: declared empty, which nothing here computes
            msg = (f"{self.where}: input {display_name(name)} declares a zero-size dimension {zero[0]} "
                   f"({shown}); empty tensors are not supported")
            raise ShapeArgumentError(msg, msg)
        if self.batch is not None and dims and dims[0] is None:
            dims[0] = self.batch
        missing = [k for k, d in enumerate(dims) if d is None]
        if missing:
            example = [d if d is not None else 1 for d in dims]
            which = ", ".join(f"{k} ({shown[k]!r})" if isinstance(shown[k], str) and shown[k] != "?"
                              else f"{k} (no value)" for k in missing)
            plural = "a dynamic dimension" if len(missing) == 1 else "dynamic dimensions"
            batch_only = missing == [0]
            head = f"{self.where}: input {name!r} has {plural} {which}"  # repr: escaped, and reads as a name
            raise ShapeArgumentError(
                f"{head} (declared {shown}); give it with {_shape_hint(name, example, False)}"
                + (" or batch=1" if batch_only else ""),
                f"{head}; give it with {_shape_hint(name, example, True)}" + (" or --batch 1" if batch_only else ""))
        return tuple(int(d) for d in dims)

    def _check_batch_used(self) -> None:
        """``batch=`` that fills no input is refused when it contradicts a static batch (the
        model's batch is fixed) rather than silently ignored."""
        if self.batch is None:
            return
        firsts = {}
        for i in self.inputs:
            dims = i.type.tensor_type.shape.dim
            if i.name in self.given or not dims:
                continue
            d = dims[0]
            if not (d.HasField("dim_value") and d.dim_value > 0):
                return  # some input took it
            firsts[i.name] = d.dim_value
        fixed = {n: v for n, v in firsts.items() if v != self.batch}
        if fixed:
            name, value = next(iter(fixed.items()))
            msg = (f"no input has a dynamic first dimension, and input {display_name(name)}'s is "
                   f"{value}: the model's batch is fixed")
            raise ShapeArgumentError(f"{self.where}: batch={self.batch}: {msg}",
                                     f"{self.where}: --batch {self.batch}: {msg}")

    def _given_shape(self, name: str, value: Any) -> tuple[int, ...]:
        """``shape=`` for input ``name``: positive integers (1.5 used to be truncated to 1)."""
        bad = f"shape= for input {display_name(name)} must be a sequence of positive integers"
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise ShapeArgumentError(f"{self.where}: {bad}, got {value!r}", f"{self.where}: --{bad}, got {value!r}")
        dims = list(value)
        for d in dims:
            if not _positive_int(d):
                raise ShapeArgumentError(f"{self.where}: {bad}, got {d!r} in {tuple(dims)!r}",
                                         f"{self.where}: --{bad}, got {d!r}")
        return tuple(int(d) for d in dims)
