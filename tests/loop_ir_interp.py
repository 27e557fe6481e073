"""A slow, obviously-correct interpreter of the loop IR, for tests.

It runs every loop sequentially in Python whatever its kind, so comparing it with the reference
evaluator checks *lowering* alone, and comparing it with compiled code checks *codegen* alone.
Only for tiny shapes.
"""
from __future__ import annotations

import math

import numpy as np

from compute import expr as E
from compute import loop_ir as L
from compute.reference import erf as _erf


def _floordiv(a, b):
    return a // b


def run(func: L.PrimFunc, args: list[np.ndarray]) -> None:
    bufs: dict[int, np.ndarray] = {b.uid: a for b, a in zip(func.params, args)}
    env: dict[int, object] = {}

    def ev(e: E.Expr):
        if isinstance(e, E.Const):
            return np.dtype(e.dtype).type(e.value) if e.dtype != "bool" else bool(e.value)
        if isinstance(e, E.Var):
            return env[id(e)]
        if isinstance(e, L.BufferLoad):
            arr = bufs[e.buffer.uid]
            idx = tuple(int(ev(i)) for i in e.indices)
            for d, (i, n) in enumerate(zip(idx, arr.shape)):
                if not 0 <= i < n:
                    raise IndexError(f"load {e.buffer.name}{list(idx)} out of bounds")
            return arr[idx]
        if isinstance(e, E.Binary):
            if e.op == "and":
                return bool(ev(e.a)) and bool(ev(e.b))
            if e.op == "or":
                return bool(ev(e.a)) or bool(ev(e.b))
            a, b = ev(e.a), ev(e.b)
            dt = np.dtype(e.dtype)
            with np.errstate(all="ignore"):
                if e.op == "add": r = a + b
                elif e.op == "sub": r = a - b
                elif e.op == "mul": r = a * b
                elif e.op == "div": r = a / b
                elif e.op == "floordiv": r = np.floor_divide(a, b)
                elif e.op == "floormod": r = np.mod(a, b)
                elif e.op == "min": r = min(a, b)
                elif e.op == "max": r = max(a, b)
                else: raise NotImplementedError(e.op)
            return dt.type(r) if dt.kind != "i" else np.array(r).astype(dt)[()]
        if isinstance(e, E.Compare):
            a, b = ev(e.a), ev(e.b)
            return {"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b, "eq": a == b, "ne": a != b}[e.op]
        if isinstance(e, E.Unary):
            return (not ev(e.a)) if e.op == "not" else np.negative(ev(e.a))
        if isinstance(e, E.Select):
            return ev(e.true_value) if ev(e.cond) else ev(e.false_value)
        if isinstance(e, E.Cast):
            v = ev(e.value)
            if e.dtype == "bool":
                return bool(v != 0)
            dt = np.dtype(e.dtype)
            if dt.kind in "iu" and isinstance(v, (float, np.floating)):
                v = math.trunc(float(v))
                return np.array(v).astype(np.int64).astype(dt)[()]
            return np.array(v).astype(dt)[()]
        if isinstance(e, E.Call):
            xs = [float(ev(a)) for a in e.args]
            x = xs[0]
            fn = {
                "exp": lambda: math.exp(x) if x < 700 else math.inf,
                "log": lambda: (math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)),
                "sqrt": lambda: math.sqrt(x) if x >= 0 else math.nan,
                "rsqrt": lambda: 1 / math.sqrt(x) if x > 0 else math.inf,
                "tanh": lambda: math.tanh(x), "sigmoid": lambda: 1 / (1 + math.exp(-x)) if x > -700 else 0.0,
                "erf": lambda: float(_erf(np.array([x]))[0]), "pow": lambda: float(np.power(x, xs[1])),
                "abs": lambda: abs(x), "floor": lambda: math.floor(x), "ceil": lambda: math.ceil(x),
                "trunc": lambda: math.trunc(x),
                "round": lambda: math.floor(abs(x) + 0.5) * (1 if x >= 0 else -1),
            }[e.name]
            r = fn()
            return np.dtype(e.dtype).type(r) if e.dtype in ("float32", "float64") else np.dtype(e.dtype).type(int(r))
        raise NotImplementedError(type(e).__name__)

    def ex(s: L.Stmt):
        if isinstance(s, L.For):
            for i in range(s.extent):
                env[id(s.var)] = np.int32(i)
                ex(s.body)
        elif isinstance(s, L.Seq):
            for x in s.stmts:
                ex(x)
        elif isinstance(s, L.Store):
            arr = bufs[s.buffer.uid]
            idx = tuple(int(ev(i)) for i in s.indices)
            for i, n in zip(idx, arr.shape):
                if not 0 <= i < n:
                    raise IndexError(f"store {s.buffer.name}{list(idx)} out of bounds")
            arr[idx] = ev(s.value)
        elif isinstance(s, L.IfThenElse):
            if ev(s.cond):
                ex(s.then_case)
            elif s.else_case is not None:
                ex(s.else_case)
        elif isinstance(s, L.Allocate):
            b = s.buffer
            fill = np.nan if np.dtype(b.dtype).kind == "f" else 0
            bufs[b.uid] = np.full(b.shape, fill, dtype=b.dtype)
            ex(s.body)
            del bufs[b.uid]
        else:
            raise NotImplementedError(type(s).__name__)

    ex(func.body)
