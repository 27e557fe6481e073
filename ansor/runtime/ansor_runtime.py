"""Run a network library exported by ansor-py, with ctypes and numpy only.

    import ansor_runtime
    m = ansor_runtime.load("net.so")          # reads net.json beside it, checks the CPU
    outputs = m.run({"data": x})              # {output name: array}

This one file is what ``export_library`` writes beside ``net.so``; it imports neither ansor-py
nor llvmlite. It reads JSON and hands the raw weights file to the library (which maps it): it
never unpickles or evaluates anything. The library itself is code: load only what you trust.

Before the library is loaded, the CPU features its code needs (``net.json``'s
``required_features`` and the library's own list) are checked against /proc/cpuinfo: a missing
one is refused with one line instead of an illegal instruction. ``run`` is safe from many
threads: each call takes a context (the library's buffers) from a pool and returns it, so
concurrent calls never share buffers; a parallel kernel runs on ``num_threads`` threads of the
library's one thread pool, and a kernel that finds the pool busy with another call's kernel runs
on its calling thread alone, so concurrent calls never oversubscribe the cores.
"""
from __future__ import annotations

import ctypes
import json
import os
import threading
import weakref

import numpy as np

FORMAT = "ansor-network-library"
VERSION = 1
ENV_NUM_THREADS = "ANSOR_NUM_THREADS"
# LLVM feature name -> /proc/cpuinfo flag, where they differ.
_CPUINFO_FLAG = {
    "sse3": "pni", "sse4.1": "sse4_1", "sse4.2": "sse4_2", "bmi": "bmi1", "lzcnt": "abm",
    "sahf": "lahf_lm", "prfchw": "3dnowprefetch", "64bit": "lm", "pclmul": "pclmulqdq",
    "rdrnd": "rdrand", "sha": "sha_ni", "avxvnni": "avx_vnni", "avx512vnni": "avx512_vnni",
    "avx512bf16": "avx512_bf16", "avx512fp16": "avx512_fp16", "avx512vbmi2": "avx512_vbmi2",
    "avx512bitalg": "avx512_bitalg", "avx512vpopcntdq": "avx512_vpopcntdq",
    "avx512vp2intersect": "avx512_vp2intersect", "amx-tile": "amx_tile", "amx-int8": "amx_int8",
    "amx-bf16": "amx_bf16",
}


class NetworkError(ValueError):
    """A one-line error: a bad library, a CPU that lacks features, a bad input."""


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> set[str]:
    """The CPU's feature flags (the first processor's ``flags`` line)."""
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError as e:
        raise NetworkError(f"cannot read {cpuinfo} to check the CPU's features: {e.strerror}") from None
    raise NetworkError(f"{cpuinfo} has no flags line: cannot check the CPU's features")


def missing_features(required: list[str], flags: set[str]) -> list[str]:
    return [f for f in required if _CPUINFO_FLAG.get(f, f.replace(".", "_")) not in flags]


def _np_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        try:
            import ml_dtypes  # only for a bfloat16 boundary
        except ImportError:
            raise NetworkError("this network has bfloat16 inputs or outputs: they need the ml_dtypes "
                               "package (pip install ml_dtypes)") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _default_threads() -> int:
    raw = os.environ.get(ENV_NUM_THREADS, "").strip()
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise NetworkError(f"{ENV_NUM_THREADS}={raw!r} must be a positive thread count")
        return int(raw)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _address(a: np.ndarray) -> int:
    """The data address of a C-contiguous array (``a.ctypes.data`` costs microseconds per call:
    the buffer protocol first, that for a read-only or empty array)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    except (TypeError, ValueError, BufferError):
        return a.ctypes.data


def _destroy_all(lib: ctypes.CDLL, contexts: list, free: list) -> None:
    free.clear()
    for c in contexts:
        lib.ansor_destroy(c)
    contexts.clear()


class Network:
    """A loaded library: ``run(inputs)``, ``input_names``/``output_names``, ``inputs``/``outputs``
    (name -> (shape, dtype) as a caller gives and gets them), ``num_threads``."""

    def __init__(self, path: str, num_threads: int | None = None):
        so = os.path.abspath(path)
        meta_file = os.path.splitext(so)[0] + ".json"
        try:
            with open(meta_file, encoding="utf-8") as f:
                meta = json.load(f)
        except OSError as e:
            raise NetworkError(f"{meta_file}: cannot read the library's metadata ({e.strerror})") from None
        except ValueError as e:
            raise NetworkError(f"{meta_file}: invalid JSON ({e})") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("version") != VERSION:
            raise NetworkError(f"{meta_file}: not the metadata of an ansor-py network library "
                               f"(format {FORMAT!r} version {VERSION})")
        required = [str(f) for f in meta.get("required_features", [])]
        self._check_cpu(so, required)
        if not os.path.isfile(so):
            raise NetworkError(f"{so}: no such library")
        lib = ctypes.CDLL(so)
        self._bind(lib)
        # The library's own record of itself must agree with net.json (a stale or foreign file).
        own = json.loads(lib.ansor_metadata_json().decode())
        self._check_cpu(so, own.get("required_features", []))
        for key in ("inputs", "outputs"):
            if own.get(key) != meta.get(key):
                raise NetworkError(f"{meta_file} does not match {os.path.basename(so)}: its {key} differ "
                                   "(copy the library's own .json beside it)")
        self._lib = lib
        self._weights = os.path.join(os.path.dirname(so), str(meta.get("weights", "")))
        self._in = [(t["name"], tuple(t["shape"]), np.dtype(t["dtype"]), t.get("boundary_dtype"))
                    for t in own["inputs"]]
        self._out = [(t["name"], tuple(t["shape"]), np.dtype(t["dtype"]), t.get("boundary_dtype"))
                     for t in own["outputs"]]
        self.input_names = [t[0] for t in self._in]
        self.output_names = [t[0] for t in self._out]
        self.inputs = {n: (s, _np_dtype(b) if b else d) for n, s, d, b in self._in}
        self.outputs = {n: (s, _np_dtype(b) if b else d) for n, s, d, b in self._out}
        # Per input the dtypes a caller may give; per output the one it is returned in (None: as is).
        self._accepts = [{d} | ({_np_dtype(b)} if b else set()) for _, _, d, b in self._in]
        self._give = [_np_dtype(b) if b else None for _, _, _, b in self._out]
        self._in_arr = ctypes.c_void_p * max(1, len(self._in))
        self._out_arr = ctypes.c_void_p * max(1, len(self._out))
        n = _default_threads() if num_threads is None else num_threads
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise NetworkError(f"num_threads must be a positive int, got {num_threads!r}")
        self.num_threads = n
        self._lock = threading.Lock()
        self._free: list = []
        self._all: list = []
        self._free.append(self._new_context())  # a bad weights file fails here, at load
        self._finalizer = weakref.finalize(self, _destroy_all, lib, self._all, self._free)

    @staticmethod
    def _check_cpu(so: str, required: list[str]) -> None:
        missing = missing_features(required, cpu_flags())
        if missing:
            raise NetworkError(f"{os.path.basename(so)} needs CPU feature(s) this CPU lacks: "
                               f"{', '.join(missing)} (export it for this machine's target)")

    @staticmethod
    def _bind(lib: ctypes.CDLL) -> None:
        p, i32 = ctypes.c_void_p, ctypes.c_int
        for name, res, args in (("ansor_create", p, [ctypes.c_char_p, i32]),
                                ("ansor_run", i32, [p, p, p]), ("ansor_destroy", None, [p]),
                                ("ansor_last_error", ctypes.c_char_p, []),
                                ("ansor_metadata_json", ctypes.c_char_p, [])):
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args

    def _new_context(self) -> int:
        ctx = self._lib.ansor_create(os.fsencode(self._weights), self.num_threads)
        if not ctx:
            raise NetworkError(self._lib.ansor_last_error().decode(errors="replace"))
        with self._lock:
            self._all.append(ctx)
        return ctx

    def _arrays(self, inputs: dict) -> list[np.ndarray]:
        if not isinstance(inputs, dict):
            raise TypeError(f"run takes a dict of input name -> array, got {type(inputs).__name__}")
        unknown = [repr(n) for n in inputs if n not in self.inputs]
        if unknown:
            raise NetworkError(f"unknown input name(s): {', '.join(unknown)}; the network's inputs: "
                               + ", ".join(repr(n) for n in self.input_names))
        missing = [repr(n) for n in self.input_names if n not in inputs]
        if missing:
            raise NetworkError(f"missing input(s): {', '.join(missing)}")
        out = []
        for (name, shape, dtype, _), ok in zip(self._in, self._accepts):
            a = inputs[name]
            if not isinstance(a, np.ndarray):
                a = np.asarray(a)
            if tuple(a.shape) != shape:
                raise NetworkError(f"input {name!r}: expected shape {list(shape)}, got {list(a.shape)}")
            if a.dtype not in ok:
                want = " or ".join(sorted(str(d) for d in ok))
                raise NetworkError(f"input {name!r}: expected dtype {want}, got {a.dtype}")
            # A half-precision boundary is widened here; a float32 C-contiguous array goes as is.
            out.append(a if a.dtype == dtype and a.flags.c_contiguous else np.ascontiguousarray(a, dtype=dtype))
        return out

    def run(self, inputs: dict) -> dict[str, np.ndarray]:
        """Run on named numpy inputs (exact shapes and dtypes; a float16/bfloat16 boundary takes
        that dtype or float32); returns fresh output arrays. Safe from many threads."""
        if not self._finalizer.alive:
            raise NetworkError("run after close()")
        xs = self._arrays(inputs)
        ys = [np.empty(shape, dtype) for _, shape, dtype, _ in self._out]
        in_ptrs = self._in_arr(*[_address(x) for x in xs])
        out_ptrs = self._out_arr(*[_address(y) for y in ys])
        with self._lock:
            ctx = self._free.pop() if self._free else None
        if ctx is None:
            ctx = self._new_context()
        try:  # ctypes releases the GIL for the call: other threads run their own contexts
            rc = self._lib.ansor_run(ctx, in_ptrs, out_ptrs)
        finally:
            with self._lock:
                self._free.append(ctx)
        if rc != 0:
            raise NetworkError(self._lib.ansor_last_error().decode(errors="replace"))
        return {t[0]: y if g is None else y.astype(g) for t, y, g in zip(self._out, ys, self._give)}

    def close(self) -> None:
        """Free every context (also done when the object is collected)."""
        self._finalizer()


def load(path: str, num_threads: int | None = None) -> Network:
    """Load the library ``path`` (``net.so``, with ``net.json`` and its weights beside it).
    ``num_threads``: threads per parallel kernel (default ``$ANSOR_NUM_THREADS``, else the usable CPUs)."""
    return Network(path, num_threads)
