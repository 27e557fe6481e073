"""The generated C entry points of an exported network library (``export_library``), as LLVM IR text.

The network's run is generated code, not an interpreter: ``ansor_run`` copies the inputs into
the context's arena, calls every kernel in order with constant offsets into the arena (planned
intermediate buffers) and into the mapped weights file (constants, packed ones already packed),
and copies the outputs out. The rest of the C ABI (``ansor_net.h``, shipped in
``ansor/runtime``): ``ansor_create`` (maps the weights file, checks its size and identity,
allocates the arena; first refuses a CPU without the features the code needs: ``cpu_check``),
``ansor_destroy``, ``ansor_last_error`` (a per-thread message), the
tensor query functions, ``ansor_metadata_json`` and ``ansor_required_features``.

A context owns its arena and its thread count, so contexts are independent: each thread may run
its own. The kernels read their thread count (what they ask of the library's thread pool,
``measure.thread_pool``, linked in) from ``__ansor_num_threads``, which the library defines
thread-local and ``ansor_run`` sets from the context before the first kernel; a context created
with no count takes the CPUs of the process's affinity mask.
Every string that comes from the model (tensor names, the metadata JSON) is emitted as escaped
bytes of a constant (``_cstr``), never as an identifier; every symbol here is generated.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .cpu_check import cpu_check_ir

ERR_BYTES = 512
# open(2) flags and mmap(2) constants of Linux x86-64.
_O_RDONLY_CLOEXEC = 0o2000000
_SC_NPROCESSORS_ONLN = 84  # glibc's sysconf name
_CPU_SET_WORDS = 16  # glibc's cpu_set_t: 1024 CPUs
_PROT_READ, _MAP_PRIVATE, _SEEK_END = 1, 2, 2
WEIGHTS_MAGIC = int.from_bytes(b"ANSORWT1", "little")
WEIGHTS_HEADER = 64  # bytes: magic, total size, identity, zeros


@dataclass
class Tensor:
    """An input or output of the library: where it lives in the arena and what it is."""
    name: str
    shape: tuple[int, ...]
    dtype: str
    offset: int  # in the arena
    nbytes: int


@dataclass
class Call:
    symbol: str  # a generated kernel symbol
    args: list[tuple[str, int]]  # ("arena" | "weights", byte offset)
    one_thread: bool = False  # run on one thread whatever the context's count


@dataclass
class EntryPoint:
    """Everything the generated entry points need; all of it numbers and generated symbols
    except ``inputs``/``outputs`` names and ``metadata_json`` (emitted as escaped data)."""
    triple: str
    datalayout: str
    arena_bytes: int
    weights_bytes: int
    weights_id: int  # u64
    inputs: list[Tensor]
    outputs: list[Tensor]
    calls: list[Call]
    kernels: dict[str, int]  # symbol -> number of pointer arguments
    metadata_json: str
    features: str
    _strings: list[str] = field(default_factory=list)

    def _cstr(self, text: str | bytes) -> str:
        """A private constant holding ``text`` NUL-terminated; returns its symbol. Bytes other
        than letters, digits and a few punctuation marks are hex-escaped."""
        data = text.encode() if isinstance(text, str) else text
        esc = "".join(chr(b) if (chr(b).isalnum() and b < 128) or chr(b) in " _.,:-+=()[]{}/'"
                      else f"\\{b:02X}" for b in data)
        sym = f"@.str{len(self._strings)}"
        self._strings.append(f'{sym} = private unnamed_addr constant [{len(data) + 1} x i8] c"{esc}\\00", align 1')
        return sym


def _i64(v: int) -> int:
    """``v`` (an unsigned 64-bit number) as the signed constant LLVM IR spells."""
    return v - (1 << 64) if v >= 1 << 63 else v


def _table(e: EntryPoint, fn: str, ty: str, values: Sequence[str], default: str) -> list[str]:
    """``ty fn(int i)``: ``values[i]`` (IR constants) or ``default`` out of range."""
    n = len(values)
    tab = f"@.tab.{fn}"
    init = "zeroinitializer" if n == 0 else "[" + ", ".join(f"{ty} {v}" for v in values) + "]"
    return [f"{tab} = private unnamed_addr constant [{n} x {ty}] {init}, align 8",
            f"define {ty} @{fn}(i32 %i) #0 {{",
            "entry:",
            f"  %ok = icmp ult i32 %i, {n}",
            "  br i1 %ok, label %yes, label %no",
            "yes:",
            "  %z = zext i32 %i to i64",
            f"  %p = getelementptr inbounds [{n} x {ty}], ptr {tab}, i64 0, i64 %z",
            f"  %v = load {ty}, ptr %p, align 8",
            f"  ret {ty} %v",
            "no:",
            f"  ret {ty} {default}",
            "}", ""]


def _tensor_tables(e: EntryPoint, kind: str, tensors: list[Tensor]) -> list[str]:
    out: list[str] = []
    shapes = []
    for k, t in enumerate(tensors):
        sym = f"@.shape.{kind}{k}"
        dims = ", ".join(f"i64 {d}" for d in t.shape) if t.shape else ""
        out.append(f"{sym} = private unnamed_addr constant [{len(t.shape)} x i64] [{dims}], align 8")
        shapes.append(sym)
    out += _table(e, f"ansor_{kind}_name", "ptr", [e._cstr(t.name) for t in tensors], "null")
    out += _table(e, f"ansor_{kind}_dtype", "ptr", [e._cstr(t.dtype) for t in tensors], "null")
    out += _table(e, f"ansor_{kind}_ndim", "i32", [str(len(t.shape)) for t in tensors], "-1")
    out += _table(e, f"ansor_{kind}_shape", "ptr", shapes, "null")
    out += _table(e, f"ansor_{kind}_nbytes", "i64", [str(t.nbytes) for t in tensors], "-1")
    return out


_DECLS = """
%Ctx = type {{ ptr, ptr, i32 }}
@__ansor_num_threads = hidden thread_local global i32 1, align 4
@.err = internal thread_local global [{err} x i8] zeroinitializer, align 16
declare i32 @open(ptr, i32, ...)
declare i64 @lseek(i32, i64, i32)
declare i32 @close(i32)
declare ptr @mmap(ptr, i64, i32, i32, i32, i64)
declare i32 @munmap(ptr, i64)
declare ptr @aligned_alloc(i64, i64)
declare ptr @malloc(i64)
declare void @free(ptr)
declare ptr @strerror(i32)
declare ptr @__errno_location()
declare i32 @snprintf(ptr, i64, ptr, ...)
declare i32 @sched_getaffinity(i32, i64, ptr)
declare i64 @sysconf(i32)
declare i64 @llvm.ctpop.i64(i64)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
declare ptr @llvm.threadlocal.address.p0(ptr)

define internal void @.set_err(ptr %msg) #0 {{
entry:
  %e = call ptr @llvm.threadlocal.address.p0(ptr @.err)
  %r = call i32 (ptr, i64, ptr, ...) @snprintf(ptr %e, i64 {err}, ptr @.fmt.s, ptr %msg)
  ret void
}}

define ptr @ansor_last_error() #0 {{
entry:
  %e = call ptr @llvm.threadlocal.address.p0(ptr @.err)
  ret ptr %e
}}

define void @ansor_destroy(ptr %ctx) #0 {{
entry:
  %null = icmp eq ptr %ctx, null
  br i1 %null, label %out, label %free
free:
  %ar = load ptr, ptr %ctx, align 8
  %mp = getelementptr inbounds %Ctx, ptr %ctx, i32 0, i32 1
  %m = load ptr, ptr %mp, align 8
  %u = call i32 @munmap(ptr %m, i64 {wbytes})
  call void @free(ptr %ar)
  call void @free(ptr %ctx)
  br label %out
out:
  ret void
}}

define i32 @ansor_get_num_threads(ptr %ctx) #0 {{
entry:
  %null = icmp eq ptr %ctx, null
  br i1 %null, label %no, label %yes
yes:
  %np = getelementptr inbounds %Ctx, ptr %ctx, i32 0, i32 2
  %n = load i32, ptr %np, align 4
  ret i32 %n
no:
  ret i32 -1
}}
"""


def _default_threads() -> list[str]:
    """``i32 @.default_threads()``: the CPUs of the process's affinity mask (``CPU_COUNT`` of
    ``sched_getaffinity``), else the online CPUs; what a context created with no count uses."""
    words = _CPU_SET_WORDS
    count = ["  %c0 = add i64 0, 0"]
    for k in range(words):
        count += [f"  %wp{k} = getelementptr inbounds [{words} x i64], ptr %set, i64 0, i64 {k}",
                  f"  %w{k} = load i64, ptr %wp{k}, align 8",
                  f"  %p{k} = call i64 @llvm.ctpop.i64(i64 %w{k})",
                  f"  %c{k + 1} = add i64 %c{k}, %p{k}"]
    return f"""define internal i32 @.default_threads() #0 {{
entry:
  %set = alloca [{words} x i64], align 8
  call void @llvm.memset.p0.i64(ptr %set, i8 0, i64 {8 * words}, i1 false)
  %r = call i32 @sched_getaffinity(i32 0, i64 {8 * words}, ptr %set)
  %ok = icmp eq i32 %r, 0
  br i1 %ok, label %count, label %online
count:
{chr(10).join(count)}
  %some = icmp sgt i64 %c{words}, 0
  br i1 %some, label %clamp, label %online
online:
  %o = call i64 @sysconf(i32 {_SC_NPROCESSORS_ONLN})
  br label %clamp
clamp:
  %v = phi i64 [ %c{words}, %count ], [ %o, %online ]
  %one = icmp slt i64 %v, 1
  %v1 = select i1 %one, i64 1, i64 %v
  %n = trunc i64 %v1 to i32
  ret i32 %n
}}
""".splitlines()


def _create(e: EntryPoint) -> list[str]:
    fmt_open = e._cstr("ansor_create: cannot open the weights file %s: %s")
    fmt_size = e._cstr("ansor_create: the weights file %s has %lld bytes, this library expects %lld "
                       "(the weights of another export?)")
    fmt_map = e._cstr("ansor_create: cannot map the weights file %s: %s")
    fmt_head = e._cstr("ansor_create: %s is not the weights file of this library (another export's?)")
    fmt_mem = e._cstr("ansor_create: out of memory allocating %lld bytes of buffers")
    msg_null = e._cstr("ansor_create: weights_path is NULL")
    fmt_cpu = e._cstr("ansor_create: this CPU lacks feature(s) the library was built for:%s "
                      "(export it for this machine's target)")
    w, ar = e.weights_bytes, e.arena_bytes
    return cpu_check_ir(e.features.split(",") if e.features else [], e._cstr) + f"""
define ptr @ansor_create(ptr %path, i32 %nthreads) #0 {{
entry:
  %err = call ptr @llvm.threadlocal.address.p0(ptr @.err)
  %missing = alloca [1024 x i8], align 16
  %cpubad = call i1 @.cpu_missing(ptr %missing, i64 1024)
  br i1 %cpubad, label %e_cpu, label %args
e_cpu:
  %r0 = call i32 (ptr, i64, ptr, ...) @snprintf(ptr %err, i64 {ERR_BYTES}, ptr {fmt_cpu}, ptr %missing)
  ret ptr null
args:
  %pnull = icmp eq ptr %path, null
  br i1 %pnull, label %e_null, label %open
e_null:
  call void @.set_err(ptr {msg_null})
  ret ptr null
open:
  %fd = call i32 (ptr, i32, ...) @open(ptr %path, i32 {_O_RDONLY_CLOEXEC})
  %fdbad = icmp slt i32 %fd, 0
  br i1 %fdbad, label %e_open, label %seek
e_open:
  %en = call ptr @__errno_location()
  %ev = load i32, ptr %en, align 4
  %es = call ptr @strerror(i32 %ev)
  %r1 = call i32 (ptr, i64, ptr, ...) @snprintf(ptr %err, i64 {ERR_BYTES}, ptr {fmt_open}, ptr %path, ptr %es)
  ret ptr null
seek:
  %size = call i64 @lseek(i32 %fd, i64 0, i32 {_SEEK_END})
  %szok = icmp eq i64 %size, {w}
  br i1 %szok, label %map, label %e_size
e_size:
  %c1 = call i32 @close(i32 %fd)
  %r2 = call i32 (ptr, i64, ptr, ...) @snprintf(ptr %err, i64 {ERR_BYTES}, ptr {fmt_size}, ptr %path, i64 %size, i64 {w})
  ret ptr null
map:
  %m = call ptr @mmap(ptr null, i64 {w}, i32 {_PROT_READ}, i32 {_MAP_PRIVATE}, i32 %fd, i64 0)
  %en2 = call ptr @__errno_location()
  %ev2 = load i32, ptr %en2, align 4
  %c2 = call i32 @close(i32 %fd)
  %mbad = icmp eq ptr %m, inttoptr (i64 -1 to ptr)
  br i1 %mbad, label %e_map, label %head
e_map:
  %es2 = call ptr @strerror(i32 %ev2)
  %r3 = call i32 (ptr, i64, ptr, ...) @snprintf(ptr %err, i64 {ERR_BYTES}, ptr {fmt_map}, ptr %path, ptr %es2)
  ret ptr null
head:
  %magic = load i64, ptr %m, align 8
  %idp = getelementptr inbounds i8, ptr %m, i64 16
  %id = load i64, ptr %idp, align 8
  %mok = icmp eq i64 %magic, {_i64(WEIGHTS_MAGIC)}
  %iok = icmp eq i64 %id, {_i64(e.weights_id)}
  %hok = and i1 %mok, %iok
  br i1 %hok, label %alloc, label %e_head
e_head:
  %u1 = call i32 @munmap(ptr %m, i64 {w})
  %r4 = call i32 (ptr, i64, ptr, ...) @snprintf(ptr %err, i64 {ERR_BYTES}, ptr {fmt_head}, ptr %path)
  ret ptr null
alloc:
  %a = call ptr @aligned_alloc(i64 64, i64 {ar})
  %c = call ptr @malloc(i64 24)
  %anull = icmp eq ptr %a, null
  %cnull = icmp eq ptr %c, null
  %bad = or i1 %anull, %cnull
  br i1 %bad, label %e_mem, label %init
e_mem:
  call void @free(ptr %a)
  call void @free(ptr %c)
  %u2 = call i32 @munmap(ptr %m, i64 {w})
  %r5 = call i32 (ptr, i64, ptr, ...) @snprintf(ptr %err, i64 {ERR_BYTES}, ptr {fmt_mem}, i64 {ar})
  ret ptr null
init:
  call void @llvm.memset.p0.i64(ptr align 64 %a, i8 0, i64 {ar}, i1 false)
  %given = icmp sgt i32 %nthreads, 0
  %dflt = call i32 @.default_threads()
  %nt = select i1 %given, i32 %nthreads, i32 %dflt
  store ptr %a, ptr %c, align 8
  %f1 = getelementptr inbounds %Ctx, ptr %c, i32 0, i32 1
  store ptr %m, ptr %f1, align 8
  %f2 = getelementptr inbounds %Ctx, ptr %c, i32 0, i32 2
  store i32 %nt, ptr %f2, align 4
  ret ptr %c
}}
""".splitlines()


def _run(e: EntryPoint) -> list[str]:
    msg_ctx = e._cstr("ansor_run: ctx is NULL (ansor_create failed?)")
    msg_io = e._cstr("ansor_run: an input or output pointer is NULL")
    lines = ["define i32 @ansor_run(ptr %ctx, ptr %inputs, ptr %outputs) #0 {",
             "entry:",
             "  %cnull = icmp eq ptr %ctx, null",
             "  br i1 %cnull, label %e_ctx, label %check",
             "e_ctx:",
             f"  call void @.set_err(ptr {msg_ctx})",
             "  ret i32 -1",
             "e_io:",
             f"  call void @.set_err(ptr {msg_io})",
             "  ret i32 -1",
             "check:"]
    # Every input and output pointer, checked before anything is written.
    ptrs = []
    for kind, arr, tensors in (("i", "%inputs", e.inputs), ("o", "%outputs", e.outputs)):
        for k, _ in enumerate(tensors):
            lines += [f"  %{kind}{k}p = getelementptr inbounds ptr, ptr {arr}, i64 {k}",
                      f"  %{kind}{k} = load ptr, ptr %{kind}{k}p, align 8",
                      f"  %{kind}{k}n = icmp eq ptr %{kind}{k}, null"]
            ptrs.append(f"%{kind}{k}n")
    any_null = "false"
    for j, p in enumerate(ptrs):
        lines.append(f"  %any{j} = or i1 {any_null}, {p}")
        any_null = f"%any{j}"
    lines += [f"  br i1 {any_null}, label %e_io, label %go", "go:",
              "  %arena = load ptr, ptr %ctx, align 8",
              "  %wp = getelementptr inbounds %Ctx, ptr %ctx, i32 0, i32 1",
              "  %weights = load ptr, ptr %wp, align 8",
              "  %ntp = getelementptr inbounds %Ctx, ptr %ctx, i32 0, i32 2",
              "  %nt = load i32, ptr %ntp, align 4",
              "  %ntg = call ptr @llvm.threadlocal.address.p0(ptr @__ansor_num_threads)",
              "  store i32 %nt, ptr %ntg, align 4"]
    n = 0

    def at(base: str, off: int) -> str:
        nonlocal n
        n += 1
        lines.append(f"  %a{n} = getelementptr inbounds i8, ptr %{base}, i64 {off}")
        return f"%a{n}"

    for k, t in enumerate(e.inputs):
        lines.append(f"  call void @llvm.memcpy.p0.p0.i64(ptr align 64 {at('arena', t.offset)}, ptr %i{k}, "
                     f"i64 {t.nbytes}, i1 false)")
    for c in e.calls:
        args = ", ".join(f"ptr {at(base, off)}" for base, off in c.args)
        if c.one_thread:
            lines.append("  store i32 1, ptr %ntg, align 4")
        lines.append(f"  call void @{c.symbol}({args})")
        if c.one_thread:
            lines.append("  store i32 %nt, ptr %ntg, align 4")
    for k, t in enumerate(e.outputs):
        lines.append(f"  call void @llvm.memcpy.p0.p0.i64(ptr %o{k}, ptr align 64 {at('arena', t.offset)}, "
                     f"i64 {t.nbytes}, i1 false)")
    lines += ["  ret i32 0", "}", ""]
    return lines


def entry_point_ir(e: EntryPoint) -> str:
    """The entry points' module: LLVM IR text for ``e.triple``."""
    body = [f'target datalayout = "{e.datalayout}"', f'target triple = "{e.triple}"',
            '@.fmt.s = private unnamed_addr constant [3 x i8] c"%s\\00", align 1']
    body += _DECLS.format(err=ERR_BYTES, wbytes=e.weights_bytes).splitlines() + _default_threads()
    body += [f"declare hidden void @{sym}({', '.join(['ptr'] * nargs)})" for sym, nargs in e.kernels.items()]
    body += _create(e) + _run(e)
    body += _tensor_tables(e, "input", e.inputs) + _tensor_tables(e, "output", e.outputs)
    for fn, value in (("ansor_num_inputs", len(e.inputs)), ("ansor_num_outputs", len(e.outputs))):
        body += [f"define i32 @{fn}() #0 {{", f"  ret i32 {value}", "}"]
    for fn, text in (("ansor_metadata_json", e.metadata_json), ("ansor_required_features", e.features)):
        body += [f"define ptr @{fn}() #0 {{", f"  ret ptr {e._cstr(text)}", "}"]
    body += e._strings
    body.append("attributes #0 = { nounwind }")
    return "\n".join(body) + "\n"
