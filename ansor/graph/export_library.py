"""Export a compiled network as one shared library with a C ABI: ``export_library(module, "DIR/net.so")``.

Writes into DIR: ``net.so`` (every kernel's machine code plus the generated entry points of
``entry_point``: create a context, run, destroy, query), ``net.weights`` (one raw little-endian
blob: a 64-byte header - magic, size, identity - then every constant the kernels read, packed ones
already packed, each on a 64-byte boundary; the library maps it), ``net.json`` (inputs, outputs,
dtypes and boundary dtypes, buffers, weight offsets, the target and its required CPU features),
and, copied from ``ansor/runtime``, ``ansor_runtime.py`` (the loader: ctypes and numpy only),
``ansor_net.h`` (the C ABI) and ``example.c``.

Each kernel's IR is compiled again as position-independent code (the JIT's object code is not
linkable into a shared object), with its symbols renamed to generated ones (``__ansor_k<i>``,
hidden) so no name from the model reaches the library's symbol table, and its thread-count
global turned into a reference to the library's one thread-local copy. The kernels' parallel
loops run on the thread pool of ``measure.thread_pool``, compiled into the library the same way
(its symbols hidden: each library has its own pool), so the library needs no OpenMP runtime.
Linking: the system ``cc``/``gcc``/``clang`` when found, else the ``ziglang`` wheel's
``python -m ziglang cc``.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from compute import dtype as dt

from .entry_point import WEIGHTS_HEADER, WEIGHTS_MAGIC, Call, EntryPoint, Tensor, entry_point_ir
from .ir import GraphError

FORMAT = "ansor-network-library"
VERSION = 1
RUNTIME_FILES = ("ansor_runtime.py", "ansor_net.h", "example.c")
# The host features that can change generated code (LLVM names); net.json lists those the
# build machine has as required, and the loader checks them against /proc/cpuinfo.
ISA_FEATURES = frozenset({
    "sse", "sse2", "sse3", "ssse3", "sse4.1", "sse4.2", "avx", "avx2", "fma", "f16c", "popcnt",
    "bmi", "bmi2", "lzcnt", "movbe", "cx16", "avx512f", "avx512cd", "avx512bw", "avx512dq",
    "avx512vl", "avx512ifma", "avx512vbmi", "avx512vbmi2", "avx512vnni", "avx512bitalg",
    "avx512vpopcntdq", "avx512bf16", "avx512fp16", "gfni", "vaes", "vpclmulqdq", "avxvnni",
})
_ALIGN = 64


@dataclass
class Exported:
    library: Path
    files: list[Path]
    linker: str  # which linker was used, for the user
    kernels: int


def _align(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def required_features() -> list[str]:
    """The build machine's code-changing CPU features (LLVM names, sorted)."""
    from measure import target  # noqa: PLC0415 - LLVM starts only when exporting

    return sorted(f[1:] for f in target.host_cpu_features().split(",") if f[:1] == "+" and f[1:] in ISA_FEATURES)


def _nbytes(shape: Any, dtype: str) -> int:
    return int(np.prod(shape, dtype=np.int64)) * dt.to_numpy(dtype).itemsize


def _layout(module: Any) -> tuple[dict[int, tuple[str, int]], list[dict], int, bytes]:
    """Where each buffer spec lives: ``{buffer id: ("arena" | "weights", byte offset)}`` (a
    view at its base), the buffers' JSON rows, the arena's size and the weights file's bytes."""
    place: dict[int, tuple[str, int]] = {}
    rows: list[dict] = []
    arena = 0
    blob = bytearray(WEIGHTS_HEADER)
    for bid, spec in enumerate(module._specs):
        kind = spec[0]
        if kind in ("input", "alloc"):
            n = _nbytes(spec[1], spec[2])
            place[bid] = ("arena", arena)
            rows.append({"kind": kind, "shape": list(spec[1]) if kind == "input" else [spec[1]],
                         "dtype": spec[2], "where": "arena", "offset": arena, "nbytes": n})
            arena = _align(arena + n)
        elif kind == "const":
            c = np.asarray(module._consts[spec[1]])
            data = np.ascontiguousarray(c, dtype=c.dtype.newbyteorder("<")).tobytes()
            blob += bytes(_align(len(blob)) - len(blob))
            place[bid] = ("weights", len(blob))
            rows.append({"kind": kind, "shape": list(c.shape), "dtype": str(c.dtype), "where": "weights",
                         "offset": len(blob), "nbytes": len(data)})
            blob += data
        else:  # a view: the first elements of its base, row-major
            place[bid] = place[spec[1]]
            rows.append({"kind": kind, "shape": list(spec[2]), "base": spec[1], "where": place[bid][0],
                         "offset": place[bid][1]})
    blob += bytes(_align(len(blob)) - len(blob))
    digest = hashlib.sha256(bytes(blob[WEIGHTS_HEADER:])).digest()
    blob[0:8] = WEIGHTS_MAGIC.to_bytes(8, "little")
    blob[8:16] = len(blob).to_bytes(8, "little")
    blob[16:24] = digest[:8]
    return place, rows, max(_align(arena), _ALIGN), bytes(blob)


def _io(module: Any, place: dict, name: str, bid: int) -> Tensor:
    specs = module._specs
    spec = specs[bid]
    root = bid
    while specs[root][0] == "view":
        root = specs[root][1]
    if place[bid][0] != "arena":
        raise GraphError(f"output {name!r} is a constant: export_library runs computed outputs only")
    shape = tuple(spec[2] if spec[0] == "view" else spec[1] if spec[0] == "input" else (spec[1],))
    dtype = specs[root][2]
    return Tensor(name, tuple(int(d) for d in shape), str(dtype), place[bid][1], _nbytes(shape, dtype))


def _kernel_ir(ir: str) -> str:
    """``ir`` with the thread-count global made a reference to the library's thread-local one,
    and the thread pool's entry declared hidden (a direct call within the library)."""
    from measure.codegen import NUM_THREADS_GLOBAL  # noqa: PLC0415 - LLVM, as above
    from measure.thread_pool import ENTRY  # noqa: PLC0415 - as above

    pat = re.compile(rf"^@{re.escape(NUM_THREADS_GLOBAL)} = .*$", re.M)
    out, n = pat.subn(f"@{NUM_THREADS_GLOBAL} = external hidden thread_local global i32, align 4", ir, count=1)
    if n == 0 and f"@{NUM_THREADS_GLOBAL}" in ir:  # codegen changed: its threads would not follow the context
        raise GraphError(f"export_library: a kernel uses @{NUM_THREADS_GLOBAL} without defining it on a line of its own")
    return out.replace(f"declare void @{ENTRY}(", f"declare hidden void @{ENTRY}(", 1)


def _object(ir: str, rename: dict[str, str] | None, index: int) -> bytes:
    """Position-independent object code of ``ir`` for the current target (``measure.targets``:
    the CPU the module was built for); ``rename``: the kernel's
    entry symbol -> its generated one (every other defined symbol is renamed ``k<i>.<j>``)."""
    import llvmlite.binding as llvm  # noqa: PLC0415 - LLVM, as above

    from measure import target  # noqa: PLC0415 - LLVM, as above

    mod = target.parse(ir)
    mod.name = f"k{index}" if rename is not None else "entry"
    if rename is not None:
        j = 0
        for g in [*mod.functions, *mod.global_variables]:
            if g.is_declaration:
                continue
            if g.name in rename:
                g.name = rename[g.name]
                g.visibility = "hidden"
            else:  # internal helpers, the workspace release, slot globals: generated names
                g.name = f"k{index}.{j}"
                j += 1
                g.linkage = "internal"
        mod.verify()
        target.optimize(mod)
    llvm.initialize_native_asmparser()  # the entry point's cpuid/xgetbv are inline assembly
    from measure.targets import current_target  # noqa: PLC0415 - LLVM, as above

    t = current_target()  # the module's (export_library sets it): its CPU and features only
    tm = llvm.Target.from_triple(target.host_triple()).create_target_machine(
        cpu=t.cpu, features=t.features, opt=3, reloc="pic",
        codemodel="default")
    return bytes(tm.emit_object(mod))


def _kernel_object(ir: str, symbol: str, index: int) -> bytes:
    """``_object`` of a kernel, through the compile cache (keyed by the IR, the symbol and the
    index, which fix the renaming; ``measure.compile_cache`` adds the toolchain): exporting
    the same network again, or another one sharing kernels, skips LLVM. The kind's number is
    bumped whenever ``_kernel_ir`` or ``_object`` change what they make."""
    from measure import compile_cache  # noqa: PLC0415 - LLVM, as above

    data, _ = compile_cache.cached(
        "pic-kernel-object-2", f"{symbol} {index} reloc=pic codemodel=default\n{ir}",
        lambda: _object(_kernel_ir(ir), {symbol: f"__ansor_k{index}"}, index),
        lambda b: b if b[:4] == b"\x7fELF" else None)
    return data


def find_linker() -> tuple[list[str], str]:
    """The C compiler driver that links the library: the system's, else ziglang's."""
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return [path], f"{name} ({path})"
    if importlib.util.find_spec("ziglang") is None:  # an optional wheel
        raise GraphError("export_library needs a C linker: install a C compiler (e.g. `apt-get install gcc`) "
                         "or `pip install ziglang`")
    return [sys.executable, "-m", "ziglang", "cc"], "ziglang (python -m ziglang cc)"


def _link(objects: list[Path], out: Path) -> str:
    cc, desc = find_linker()
    cmd = [*cc, "-shared", "-o", str(out), *map(str, objects), f"-Wl,-soname,{out.name}",
           "-Wl,-z,noexecstack", "-Wl,-z,nodelete", "-lpthread", "-lm"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        msg = (r.stderr or r.stdout).strip().splitlines()
        raise GraphError(f"export_library: linking with {desc} failed: {msg[-1] if msg else r.returncode}")
    return desc


def export_library(module: Any, path: str | os.PathLike, features: list[str] | None = None) -> Exported:
    """Write ``module`` (a ``NetworkModule``) as the library ``path`` (``DIR/NAME.so``) and its
    files beside it (see the module docstring); returns what was written and the linker used.
    ``features``: the CPU features recorded as required and checked at load (default
    ``required_features()``, the build machine's: the code is built for it)."""
    from measure import target, thread_pool  # noqa: PLC0415 - LLVM, as above
    from measure.targets import get_target, use_target  # noqa: PLC0415 - LLVM, as above

    built_for = get_target(getattr(module, "target_name", None) or "native")
    lib = Path(path)
    if lib.suffix != ".so":
        raise GraphError(f"export_library: {os.fspath(path)!r} must name a .so file (DIR/net.so)")
    lib.parent.mkdir(parents=True, exist_ok=True)
    place, rows, arena, blob = _layout(module)
    kernels: dict[int, int] = {}
    objects_ir: list[tuple[str, str, int]] = []  # (symbol, IR, number of arguments)
    calls = []
    steps = []
    for s in module._steps:
        if id(s.kernel) not in kernels:
            kernels[id(s.kernel)] = len(objects_ir)
            c = s.kernel.compiled
            objects_ir.append((c.name, c.llvm_ir, len(c.args)))
        k = kernels[id(s.kernel)]
        calls.append(Call(f"__ansor_k{k}", [place[b] for b in s.args], s.one_thread))
        steps.append({"kernel": k, "args": list(s.args), "name": s.name})
    inputs = [_io(module, place, n, module._input_buffers[n]) for n in module.input_types]
    outputs = [_io(module, place, n, b) for n, b in module._outputs]
    if features is None:
        features = required_features() if built_for.is_native else built_for.required_features
    features = list(features)

    def tensor_json(t: Tensor) -> dict:
        d = {"name": t.name, "shape": list(t.shape), "dtype": t.dtype, "nbytes": t.nbytes}
        if t.name in module.io_dtypes:
            d["boundary_dtype"] = module.io_dtypes[t.name]
        return d

    ident = {"format": FORMAT, "version": VERSION, "inputs": [tensor_json(t) for t in inputs],
             "outputs": [tensor_json(t) for t in outputs], "required_features": features}
    entry = EntryPoint(target.host_triple(), target.data_layout(), arena, len(blob),
                       int.from_bytes(blob[16:24], "little"), inputs, outputs, calls,
                       {f"__ansor_k{i}": nargs for i, (_, _, nargs) in enumerate(objects_ir)},
                       json.dumps(ident, sort_keys=True), ",".join(features))
    with tempfile.TemporaryDirectory(prefix="ansor-export-") as tmp:
        objs = []
        with use_target(built_for):  # the kernels' objects (and their cache keys) for its CPU
            for i, (sym, ir, _) in enumerate(objects_ir):
                o = Path(tmp) / f"k{i}.o"
                o.write_bytes(_kernel_object(ir, sym, i))
                objs.append(o)
            o = Path(tmp) / "entry.o"
            o.write_bytes(_object(entry_point_ir(entry), None, len(objects_ir)))
            objs.append(o)
            o = Path(tmp) / "pool.o"
            o.write_bytes(_object(thread_pool.pool_ir(target.host_triple(), target.data_layout(), hidden=True),
                                  None, len(objects_ir) + 1))
            objs.append(o)
        built = Path(tmp) / lib.name
        linker = _link(objs, built)
        shutil.move(str(built), lib)
    stem = lib.with_suffix("")
    weights, meta_file = stem.with_suffix(".weights"), stem.with_suffix(".json")
    weights.write_bytes(blob)
    meta = {**ident, "library": lib.name, "weights": weights.name, "weights_bytes": len(blob),
            "weights_id": blob[16:24].hex(), "arena_bytes": arena, "io_dtypes": module.io_dtypes,
            "target": {"name": built_for.name, "triple": target.host_triple(), "cpu": built_for.cpu,
                       "features": features},
            "buffers": rows,
            "kernels": len(objects_ir), "steps": steps, "linker": linker}
    meta_file.write_text(json.dumps(meta, indent=1))
    files = [lib, weights, meta_file]
    src = Path(__file__).resolve().parent.parent / "runtime"
    for name in RUNTIME_FILES:
        shutil.copyfile(src / name, lib.parent / name)
        files.append(lib.parent / name)
    return Exported(lib, files, linker, len(objects_ir))

