"""Workload registry: workload functions by name, so a record can name its computation.

A tuning record must recreate its computation in another process without storing code. For a
workload function (shape parameters in, argument tensors out) the record stores the function's
registered *name* and its arguments as JSON; ``make_workload(name, args)`` rebuilds the tensors.
Every workload of the operator library (``compute.ops.WORKLOADS``) is registered under its library
name; users register their own with ``@register_workload``.

Arguments are restricted to what JSON round-trips exactly: ints, finite floats, strings, bools,
None and nested lists/tuples. Sequences are canonicalised to tuples (JSON has a single array
type), so arguments read back from a record compare equal to the ones given.
"""
from __future__ import annotations

import inspect
import math
import numbers
import threading
from typing import Any, Callable, Sequence, overload

from .names import check_name
from .tensor import Tensor

WorkloadFunc = Callable[..., Sequence[Tensor]]

_LOCK = threading.Lock()
# Insertion-ordered: a function registered under several names (the library registers
# conv2d_nhwc as "conv2d_nhwc", "group_conv2d_nhwc" and "dilated_conv2d_nhwc") goes by its first.
_BY_NAME: dict[str, WorkloadFunc] = {}


def _register(func: WorkloadFunc, name: str, override: bool) -> None:
    if not isinstance(name, str) or not name:
        raise TypeError(f"workload name must be a non-empty string, got {name!r}")
    check_name(name, "workload name")  # it is written into every record of the workload
    if not callable(func):
        raise TypeError(f"register_workload: {func!r} is not callable")
    with _LOCK:
        old = _BY_NAME.get(name)
        if old is not None and old is not func and not override:
            raise ValueError(
                f"workload name {name!r} is already registered to {_describe(old)}; cannot "
                f"register {_describe(func)} under it (pass name=... to choose another name, or "
                "override=True to replace it)")
        _BY_NAME[name] = func


def _describe(func: Callable) -> str:
    return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"


@overload
def register_workload(func: WorkloadFunc, name: str | None = None, *,
                      override: bool = False) -> WorkloadFunc: ...
@overload
def register_workload(func: None = None, name: str | None = None, *,
                      override: bool = False) -> Callable[[WorkloadFunc], WorkloadFunc]: ...


def register_workload(func: WorkloadFunc | None = None, name: str | None = None, *,
                      override: bool = False) -> WorkloadFunc | Callable[[WorkloadFunc], WorkloadFunc]:
    """Register a workload function (shape parameters -> ``[inputs..., outputs...]``).

    Usable bare (``@register_workload``: the name is the function's ``__name__``), with a name
    (``@register_workload(name="my_gemm")``) or as a call (``register_workload(f, "my_gemm")``).
    Registering a different function under a taken name is an error unless ``override``;
    registering the same function again is a no-op. Returns the function unchanged.
    """
    if isinstance(func, str) and name is None:  # @register_workload("my_gemm")
        func, name = None, func

    def deco(f: WorkloadFunc) -> WorkloadFunc:
        _register(f, name if name is not None else getattr(f, "__name__", ""), override)
        return f

    return deco if func is None else deco(func)


def registered_name(func: Callable) -> str | None:
    """The name ``func`` is registered under (its first, if several), or None."""
    with _LOCK:
        return next((n for n, f in _BY_NAME.items() if f is func), None)


def get_workload_func(name: str) -> WorkloadFunc:
    """The function registered as ``name``; a KeyError lists the registered names otherwise."""
    with _LOCK:
        func = _BY_NAME.get(name)
        known = sorted(_BY_NAME) if func is None else []
    if func is None:
        raise KeyError(f"no workload is registered as {name!r} in this process (was the module "
                       f"that registers it imported?); registered: {', '.join(known)}")
    return func


def registered_workloads() -> list[str]:
    with _LOCK:
        return sorted(_BY_NAME)


def canonical_args(args: Any, what: str = "workload arguments") -> tuple:
    """``args`` as a tuple of JSON-exact values (sequences become tuples), or a TypeError /
    ValueError naming the offending value."""
    if isinstance(args, (str, bytes)) or not isinstance(args, (list, tuple)):
        raise TypeError(f"{what} must be a list or tuple, got {type(args).__name__} {args!r}")
    return tuple(_canon(a, f"{what}[{k}]") for k, a in enumerate(args))


def _canon(v: Any, where: str) -> Any:
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, numbers.Integral):  # numpy integers too: shapes often come from arrays
        return int(v)
    if isinstance(v, numbers.Real):
        f = float(v)
        if not math.isfinite(f):
            raise ValueError(f"{where} = {v!r}: workload arguments must be finite (JSON has no "
                             "inf/nan)")
        return f
    if isinstance(v, (list, tuple)):
        return tuple(_canon(x, f"{where}[{k}]") for k, x in enumerate(v))
    raise TypeError(f"{where} = {v!r} (type {type(v).__name__}): workload arguments must be ints, "
                    "floats, strings, bools, None or nested lists/tuples of them, so that a record "
                    "can store them as JSON")


def args_to_json(args: tuple) -> list:
    """Tuples -> lists, for ``json.dumps`` (which would do the same, made explicit here)."""
    return [args_to_json(a) if isinstance(a, tuple) else a for a in args]


def make_workload(name: str, args: Sequence[Any] = ()) -> list[Tensor]:
    """The argument tensors of workload ``name`` for ``args``.

    KeyError: ``name`` is not registered. TypeError: ``args`` are not JSON-serialisable, do not fit
    the function's signature, or the function does not return a list of tensors.
    """
    func = get_workload_func(name)
    cargs = canonical_args(args, f"{name} arguments")
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):  # builtins without a signature: let the call decide
        sig = None
    if sig is not None:
        try:
            sig.bind(*cargs)
        except TypeError as err:
            raise TypeError(f"workload {name}{_fmt_args(cargs)}: {err} "
                            f"(signature {name}{sig})") from None
    out = func(*cargs)
    if isinstance(out, Tensor):
        out = [out]
    if not isinstance(out, (list, tuple)) or not out or not all(isinstance(t, Tensor) for t in out):
        raise TypeError(f"workload {name} must return a list of tensors (inputs then outputs), got "
                        f"{type(out).__name__}")
    return list(out)


def _fmt_args(args: tuple) -> str:
    return "(" + ", ".join(repr(a) for a in args) + ")"


def workload_desc(name: str, args: tuple) -> str:
    """``matmul(1024, 1024, 1024)``: how a registered workload reads in logs and tables."""
    return name + _fmt_args(args)


def _register_library() -> None:
    from .ops import WORKLOADS

    for spec in WORKLOADS.values():
        _register(spec.func, spec.name, override=False)


_register_library()
