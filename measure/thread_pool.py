"""The persistent thread pool that runs the parallel loops of compiled kernels, as LLVM IR text.

One module, written as IR so that it runs both in the JIT (compiled once per process by MCJIT,
no C compiler needed at run time) and inside an exported library (compiled PIC, its symbol
hidden). Linux x86-64 (``futex`` is system call 202, ``pause`` the spin hint). It defines

    void ansor_parallel_for(ptr body, ptr closure, i64 extent, i32 nthreads)

which runs ``body(closure, begin, end)`` over ``[0, extent)`` in pieces, on the calling thread
and on up to ``nthreads - 1`` worker threads.

Why not libgomp: its idle threads spin for milliseconds after every parallel region
(GOMP_SPINCOUNT), taking the cores from whatever runs next in the process (a numpy or PyTorch
matmul ran several times slower interleaved with our kernels), and its static split makes a
region wait for a preempted thread.

How it works:

* Workers are created lazily with ``pthread_create`` (detached), grown when a call asks for more,
  never beyond ``nthreads - 1``, ``extent - 1`` or ``MAX_WORKERS``; a failed create just leaves
  fewer workers. Worker ``i`` owns a cache line (``slot``) holding its generation counter (the
  futex word it waits on) and its ``sleeping`` flag.
* The caller returns once every chunk is done; it waits for workers only while they run a chunk
  (see below), never for one that has not started.
* Work is dynamic: the caller and the workers take chunks of ``ceil(extent / (threads *
  CHUNKS_PER_THREAD))`` iterations from the atomic counter ``next`` (``atomicrmw add``), so a
  late (preempted) thread delays the others by at most one chunk. With ``CHUNKS_PER_THREAD = 1``
  the chunks are the static split libgomp's schedule used.
* Waiting (a worker for a job, the caller for the workers): spin, then sleep on a futex
  (``measure.pool_wait``), so idle workers never take a core from other threads for long.
* One caller at a time owns the pool: ``lock`` (0 free, 1 owned) is taken with a ``cmpxchg``. A
  caller that finds the pool busy (another Python thread's kernel, or a nested call: a body
  calling back in from the caller or a worker, which codegen never emits) runs the whole loop
  inline on its own thread: it never blocks and cannot deadlock.
* ``fork()``: a child has none of its parent's threads. All the pool's state (lock, worker
  count, job, slots) lives in one block mapped ``MADV_WIPEONFORK``: a child sees it zeroed, a
  free pool with no workers, even if a parent's thread owned it at the fork, and no call pays a
  system call to check. Where the kernel lacks it (Linux < 4.14) the block is a static one and
  its owner compares ``getpid()`` with the pid that made the workers (a child of a fork taken
  mid-job then finds the pool locked and runs inline: slower, still right).
* ``nthreads <= 1`` or ``extent <= 1``: ``body`` is called directly, no atomics.

Memory ordering, and why consecutive jobs never mix:

* A job is joined, never assigned: ``active`` holds an ``OPEN`` bit and the number of workers
  inside the job. The owner writes the job (``body``, ``closure``, ``extent``, ``chunk``; plain
  stores) and resets ``next``, then opens it (``active = OPEN``, a release) and bumps the
  generation of each worker it wants (a seq_cst ``atomicrmw add`` on the slot, waking it if it
  sleeps). A worker whose generation moved joins with a ``cmpxchg`` of ``active`` from an open
  value to that value + 1 (an acquire: it then reads the job's fields), or, finding it closed,
  goes back to waiting without touching the job.
* The owner runs chunks too; when ``next`` is exhausted it closes the job (``atomicrmw and``
  clearing ``OPEN``, seq_cst) and waits only for the workers inside to leave (each leaves with a
  seq_cst ``atomicrmw sub``, a release carrying its writes through ``body``), reading the count 0
  with acquire semantics. A worker that has not joined yet (asleep, preempted) is never waited
  for: it can no longer join. No worker is inside a closed job with count 0, so the owner of the
  next job rewrites the fields, ``next`` and ``active`` with no reader left: no stale field is
  ever read, and any worker may help any job it manages to join.
"""
from __future__ import annotations

from .checks import MAX_THREADS
from .pool_wait import ENV_SPIN_US, MAX_SPIN_US, SPIN_US, wait_functions

__all__ = ["ENTRY", "CHUNKS_PER_THREAD", "ENV_SPIN_US", "MAX_SPIN_US", "SPIN_US", "pool_ir"]

ENTRY = "ansor_parallel_for"

# Chunks of dynamic work per participating thread: enough for a late thread to be covered by the
# others, few enough that the atomic counter is not contended. 4 took 3-12% less time than 1 (the
# static split) on untuned matmul, dense and conv kernels, 2 threads on a loaded 2-core machine
# (``benchmarks/thread_pool.py split``).
CHUNKS_PER_THREAD = 4
MAX_WORKERS = MAX_THREADS - 1  # the caller is the last of at most MAX_THREADS threads

# The pool's state, one block: a field per cache line where threads contend, then the slots.
# Fields: 0 lock, 1 nworkers, 2 pid, 3 checkpid | 5 active | 7 waiting | 9 next | 11 body,
# 12 closure, 13 extent, 14 chunk | 16 slots.
_STATE = (f"%State = type {{ i32, i32, i32, i32, [12 x i32], i32, [15 x i32], i32, [15 x i32], i64, [7 x i64], "
          f"ptr, ptr, i64, i64, [4 x i64], [{MAX_WORKERS} x [16 x i32]] }}")
_STATE_BYTES = 5 * 64 + 64 * MAX_WORKERS
_MMAP_RW, _MMAP_PRIVATE_ANON, _MADV_WIPEONFORK = 3, 0x22, 18
_OPEN, _COUNT = -(1 << 31), (1 << 31) - 1  # ``active``: the job open to join, and the workers in it


def _f(st: str, field: int, *slot: str) -> str:
    """A field of the state block ``st`` (``slot``: worker index and word of field 16)."""
    return f"getelementptr inbounds %State, ptr {st}, i32 0, i32 {field}" + "".join(f", i64 {x}" for x in slot)


def _functions(vis: str) -> str:
    return f"""
{_STATE}
@pool.state = internal global ptr null, align 8
@pool.static = internal global %State zeroinitializer, align 64
{wait_functions()}
declare i32 @getpid()
declare ptr @mmap(ptr, i64, i32, i32, i32, i64)
declare i32 @madvise(ptr, i64, i32)
declare i32 @munmap(ptr, i64)
declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i32 @pthread_detach(i64)

; The state block, made by the first caller: a private mapping wiped in a fork's child, else
; (Linux < 4.14) the static block, checked against getpid() by every owner.
define internal ptr @pool.get_state() #0 {{
entry:
  %p = load atomic ptr, ptr @pool.state acquire, align 8
  %have = icmp ne ptr %p, null
  br i1 %have, label %known, label %make
known:
  ret ptr %p
make:
  %m = call ptr @mmap(ptr null, i64 {_STATE_BYTES}, i32 {_MMAP_RW}, i32 {_MMAP_PRIVATE_ANON}, i32 -1, i64 0)
  %failed = icmp eq ptr %m, inttoptr (i64 -1 to ptr)
  br i1 %failed, label %static, label %advise
advise:
  %r = call i32 @madvise(ptr %m, i64 {_STATE_BYTES}, i32 {_MADV_WIPEONFORK})
  %wiped = icmp eq i32 %r, 0
  br i1 %wiped, label %publish, label %unmap
unmap:
  %u = call i32 @munmap(ptr %m, i64 {_STATE_BYTES})
  br label %static
static:
  %cpp = {_f("@pool.static", 3)}
  store atomic i32 1, ptr %cpp monotonic, align 4
  br label %publish
publish:
  %new = phi ptr [ %m, %advise ], [ @pool.static, %static ]
  %cx = cmpxchg ptr @pool.state, ptr null, ptr %new acq_rel acquire, align 8
  %won = extractvalue {{ ptr, i1 }} %cx, 1
  br i1 %won, label %mine, label %lost
mine:
  ret ptr %new
lost:
  %other = extractvalue {{ ptr, i1 }} %cx, 0
  %mapped = icmp ne ptr %new, @pool.static
  br i1 %mapped, label %unmap2, label %theirs
unmap2:
  %u2 = call i32 @munmap(ptr %new, i64 {_STATE_BYTES})
  br label %theirs
theirs:
  ret ptr %other
}}

; Chunks of the current job from the shared counter until none is left.
define internal void @pool.run_chunks(ptr %next, ptr %body, ptr %clo, i64 %extent, i64 %chunk) #0 {{
entry:
  br label %take
take:
  %b = atomicrmw add ptr %next, i64 %chunk monotonic, align 8
  %more = icmp slt i64 %b, %extent
  br i1 %more, label %run, label %done
run:
  %e0 = add i64 %b, %chunk
  %e = call i64 @llvm.smin.i64(i64 %e0, i64 %extent)
  call void %body(ptr %clo, i64 %b, i64 %e)
  br label %take
done:
  ret void
}}

; A worker: its index in the low 32 bits of arg, its slot's generation when made in the high ones.
define internal ptr @pool.worker(ptr %arg) #0 {{
entry:
  %st = load atomic ptr, ptr @pool.state acquire, align 8
  %packed = ptrtoint ptr %arg to i64
  %idx = and i64 %packed, 4294967295
  %hi = lshr i64 %packed, 32
  %seen0 = trunc i64 %hi to i32
  %gen = {_f("%st", 16, "%idx", "0")}
  %flag = {_f("%st", 16, "%idx", "1")}
  %next = {_f("%st", 9)}
  %active = {_f("%st", 5)}
  %waiting = {_f("%st", 7)}
  %bodyp = {_f("%st", 11)}
  %clop = {_f("%st", 12)}
  %extp = {_f("%st", 13)}
  %chp = {_f("%st", 14)}
  br label %idle
idle:
  %seen = phi i32 [ %seen0, %entry ], [ %g, %done ]
  %dl = call i64 @pool.deadline()
  %g = call i32 @pool.wait_while(ptr %gen, i32 %seen, ptr %flag, i64 %dl)
  %a0 = load atomic i32, ptr %active monotonic, align 4
  br label %join
join:
  %a = phi i32 [ %a0, %idle ], [ %a2, %join2 ]
  %open = icmp slt i32 %a, 0
  br i1 %open, label %join2, label %done
join2:
  %a1 = add i32 %a, 1
  %cx = cmpxchg ptr %active, i32 %a, i32 %a1 acquire monotonic, align 4
  %a2 = extractvalue {{ i32, i1 }} %cx, 0
  %joined = extractvalue {{ i32, i1 }} %cx, 1
  br i1 %joined, label %work, label %join
work:
  %body = load ptr, ptr %bodyp, align 8
  %clo = load ptr, ptr %clop, align 8
  %extent = load i64, ptr %extp, align 8
  %chunk = load i64, ptr %chp, align 8
  call void @pool.run_chunks(ptr %next, ptr %body, ptr %clo, i64 %extent, i64 %chunk)
  %old = atomicrmw sub ptr %active, i32 1 seq_cst, align 4
  %last = icmp eq i32 %old, 1
  br i1 %last, label %tell, label %done
tell:
  call void @pool.signal(ptr %active, ptr %waiting)
  br label %done
done:
  br label %idle
}}

define {vis}void @{ENTRY}(ptr %body, ptr %clo, i64 %extent, i32 %nthreads) #0 {{
entry:
  %tid = alloca i64, align 8
  %few = icmp sle i32 %nthreads, 1
  %short = icmp sle i64 %extent, 1
  %alone = or i1 %few, %short
  br i1 %alone, label %serial, label %lock
serial:
  %any = icmp sgt i64 %extent, 0
  br i1 %any, label %inline, label %ret
inline:
  call void %body(ptr %clo, i64 0, i64 %extent)
  br label %ret
ret:
  ret void
lock:
  %st = call ptr @pool.get_state()
  %lockp = {_f("%st", 0)}
  %cx = cmpxchg ptr %lockp, i32 0, i32 1 acquire monotonic, align 4
  %got = extractvalue {{ i32, i1 }} %cx, 1
  br i1 %got, label %owned, label %inline
owned:
  %nwp = {_f("%st", 1)}
  %pidp = {_f("%st", 2)}
  %cpp = {_f("%st", 3)}
  %active = {_f("%st", 5)}
  %waiting = {_f("%st", 7)}
  %cp = load atomic i32, ptr %cpp monotonic, align 4
  %check = icmp ne i32 %cp, 0
  br i1 %check, label %pidcheck, label %sized
pidcheck:
  %pid = call i32 @getpid()
  %ppid = load i32, ptr %pidp, align 4
  %same = icmp eq i32 %ppid, %pid
  br i1 %same, label %sized, label %reset
reset:
  store i32 0, ptr %nwp, align 4
  store atomic i32 0, ptr %active monotonic, align 4
  store atomic i32 0, ptr %waiting monotonic, align 4
  store i32 %pid, ptr %pidp, align 4
  br label %sized
sized:
  %nt64 = sext i32 %nthreads to i64
  %w0 = add i64 %nt64, -1
  %w1 = add i64 %extent, -1
  %w2 = call i64 @llvm.smin.i64(i64 %w0, i64 %w1)
  %w3 = call i64 @llvm.smin.i64(i64 %w2, i64 {MAX_WORKERS})
  %want = trunc i64 %w3 to i32
  %have = load i32, ptr %nwp, align 4
  %grow = icmp slt i32 %have, %want
  br i1 %grow, label %spawn0, label %go
spawn0:
  call void @pool.read_spin()
  br label %spawn
spawn:
  %i = phi i32 [ %have, %spawn0 ], [ %i1, %made ]
  %ix = zext i32 %i to i64
  %sg = {_f("%st", 16, "%ix", "0")}
  %sf = {_f("%st", 16, "%ix", "1")}
  store atomic i32 0, ptr %sf monotonic, align 4
  %g0 = load atomic i32, ptr %sg monotonic, align 4
  %g64 = zext i32 %g0 to i64
  %ghi = shl i64 %g64, 32
  %packed = or i64 %ghi, %ix
  %argp = inttoptr i64 %packed to ptr
  %rc = call i32 @pthread_create(ptr %tid, ptr null, ptr @pool.worker, ptr %argp)
  %ok = icmp eq i32 %rc, 0
  br i1 %ok, label %made, label %spawned
made:
  %t = load i64, ptr %tid, align 8
  %d = call i32 @pthread_detach(i64 %t)
  %i1 = add i32 %i, 1
  %again = icmp slt i32 %i1, %want
  br i1 %again, label %spawn, label %spawned
spawned:
  %count = phi i32 [ %i, %spawn ], [ %i1, %made ]
  store i32 %count, ptr %nwp, align 4
  br label %go
go:
  %nw = load i32, ptr %nwp, align 4
  %n0 = icmp slt i32 %nw, %want
  %n = select i1 %n0, i32 %nw, i32 %want
  %none = icmp sle i32 %n, 0
  br i1 %none, label %unlock_inline, label %job
unlock_inline:
  store atomic i32 0, ptr %lockp release, align 4
  br label %inline
job:
  %n64 = zext i32 %n to i64
  %parts0 = add i64 %n64, 1
  %parts = mul i64 %parts0, {CHUNKS_PER_THREAD}
  %up = add i64 %extent, %parts
  %up1 = add i64 %up, -1
  %chunk = sdiv i64 %up1, %parts
  %bodyp = {_f("%st", 11)}
  store ptr %body, ptr %bodyp, align 8
  %clop = {_f("%st", 12)}
  store ptr %clo, ptr %clop, align 8
  %extp = {_f("%st", 13)}
  store i64 %extent, ptr %extp, align 8
  %chp = {_f("%st", 14)}
  store i64 %chunk, ptr %chp, align 8
  %next = {_f("%st", 9)}
  store atomic i64 0, ptr %next monotonic, align 8
  store atomic i32 {_OPEN}, ptr %active release, align 4
  br label %publish
publish:
  %j = phi i64 [ 0, %job ], [ %j1, %publish ]
  %pg = {_f("%st", 16, "%j", "0")}
  %pf = {_f("%st", 16, "%j", "1")}
  %prev = atomicrmw add ptr %pg, i32 1 seq_cst, align 4
  call void @pool.signal(ptr %pg, ptr %pf)
  %j1 = add i64 %j, 1
  %pmore = icmp ult i64 %j1, %n64
  br i1 %pmore, label %publish, label %work
work:
  call void @pool.run_chunks(ptr %next, ptr %body, ptr %clo, i64 %extent, i64 %chunk)
  %closed = atomicrmw and ptr %active, i32 {_COUNT} seq_cst, align 4
  %inside = and i32 %closed, {_COUNT}
  %clear = icmp eq i32 %inside, 0
  br i1 %clear, label %release, label %wait0
wait0:
  %dl = call i64 @pool.deadline()
  br label %wait
wait:
  %left = phi i32 [ %inside, %wait0 ], [ %left1, %wait ]
  %left1 = call i32 @pool.wait_while(ptr %active, i32 %left, ptr %waiting, i64 %dl)
  %finished = icmp eq i32 %left1, 0
  br i1 %finished, label %release, label %wait
release:
  store atomic i32 0, ptr %lockp release, align 4
  ret void
}}

attributes #0 = {{ nounwind }}
"""


def pool_ir(triple: str, datalayout: str, hidden: bool) -> str:
    """The pool's module for ``triple``; ``hidden``: its entry hidden (inside a library)."""
    if not triple.startswith("x86_64") or "linux" not in triple:
        raise RuntimeError(f"the kernel thread pool is written for Linux x86-64, not {triple}")
    head = f'; ModuleID = \'ansor_thread_pool\'\ntarget datalayout = "{datalayout}"\ntarget triple = "{triple}"\n'
    return head + _functions("hidden " if hidden else "")
