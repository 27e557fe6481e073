"""How the kernels' thread pool (``measure.thread_pool``) waits: spin briefly, then sleep on a
futex, without losing a wake-up. LLVM IR text, part of the pool's module.

* Waiting (a worker for a job, the caller for the workers): spin on the word with ``pause`` for
  ``SPIN_US`` microseconds (``ANSOR_SPIN_US`` overrides it, read once when the first worker is
  made), enough to cover the gap between consecutive kernels of a network, then sleep on the
  futex, so idle workers never take a core from other threads of the process for long.
* Sleeping without a lost wake-up (Dekker's pattern, all four accesses seq_cst): a waiter stores
  its flag = 1, re-reads the word, and ``FUTEX_WAIT``s only on the value it read (the kernel
  returns at once if the word changed since); a waker changes the word, then reads the flag and
  ``FUTEX_WAKE``s if it is set. At least one of the two sees the other's write. Spurious or stale
  wake-ups only make a waiter re-check its word.

``wait_functions()`` gives the IR: ``@pool.wait_while(word, value, flag, deadline)`` (wait until
``*word != value``), ``@pool.signal(word, flag)`` (wake the waiter of ``*word`` if asleep),
``@pool.deadline()`` (now + the spin length), ``@pool.read_spin()`` (the spin length, from
``ANSOR_SPIN_US`` once) and their helpers, with the declarations they need.
"""
from __future__ import annotations

# Microseconds a waiting thread spins before it sleeps on the futex: covers the gap between two
# kernels of a network run from Python (a few microseconds), far below libgomp's milliseconds.
SPIN_US = 50
ENV_SPIN_US = "ANSOR_SPIN_US"
MAX_SPIN_US = 1_000_000
SPIN_CHECK = 64  # pauses between two clock reads while spinning

_SYS_FUTEX = 202  # Linux x86-64
_FUTEX_WAIT_PRIVATE = 0 | 128
_FUTEX_WAKE_PRIVATE = 1 | 128
_CLOCK_MONOTONIC = 1


def wait_functions() -> str:
    """The waiting primitives' IR (a fragment of the pool's module, which declares ``@pool.*``
    nowhere else and defines ``#0``)."""
    return f"""
@pool.spin_ns = internal global i64 -1, align 8
@pool.env = private unnamed_addr constant [{len(ENV_SPIN_US) + 1} x i8] c"{ENV_SPIN_US}\\00", align 1

declare i64 @syscall(i64, ...)
declare i32 @clock_gettime(i32, ptr)
declare ptr @getenv(ptr)
declare i64 @strtol(ptr, ptr, i32)
declare void @llvm.x86.sse2.pause()
declare i64 @llvm.smin.i64(i64, i64)

define internal i64 @pool.now_ns() #0 {{
entry:
  %ts = alloca [2 x i64], align 8
  %r = call i32 @clock_gettime(i32 {_CLOCK_MONOTONIC}, ptr %ts)
  %s = load i64, ptr %ts, align 8
  %np = getelementptr inbounds [2 x i64], ptr %ts, i64 0, i64 1
  %n = load i64, ptr %np, align 8
  %sn = mul i64 %s, 1000000000
  %t = add i64 %sn, %n
  ret i64 %t
}}

define internal void @pool.futex(ptr %word, i64 %op, i32 %value) #0 {{
entry:
  %v = zext i32 %value to i64
  %r = call i64 (i64, ...) @syscall(i64 {_SYS_FUTEX}, ptr %word, i64 %op, i64 %v, ptr null, ptr null, i64 0)
  ret void
}}

; Waits until *word != value (spinning until the clock passes deadline, then asleep on the futex
; with *flag = 1 announcing it); returns the new value, read with acquire semantics.
define internal i32 @pool.wait_while(ptr %word, i32 %value, ptr %flag, i64 %deadline) #0 {{
entry:
  br label %spin
spin:
  %k = phi i32 [ 0, %entry ], [ %k1, %pause ], [ %k1, %clock ]
  %v = load atomic i32, ptr %word acquire, align 4
  %changed = icmp ne i32 %v, %value
  br i1 %changed, label %out, label %pause
pause:
  call void @llvm.x86.sse2.pause()
  %k1 = add i32 %k, 1
  %m = and i32 %k1, {SPIN_CHECK - 1}
  %tick = icmp eq i32 %m, 0
  br i1 %tick, label %clock, label %spin
clock:
  %t = call i64 @pool.now_ns()
  %late = icmp sge i64 %t, %deadline
  br i1 %late, label %sleep, label %spin
sleep:
  store atomic i32 1, ptr %flag seq_cst, align 4
  %v2 = load atomic i32, ptr %word seq_cst, align 4
  %changed2 = icmp ne i32 %v2, %value
  br i1 %changed2, label %woke, label %wait
wait:
  call void @pool.futex(ptr %word, i64 {_FUTEX_WAIT_PRIVATE}, i32 %value)
  br label %sleep
woke:
  store atomic i32 0, ptr %flag monotonic, align 4
  br label %out
out:
  %r = phi i32 [ %v, %spin ], [ %v2, %woke ]
  ret i32 %r
}}

; After a seq_cst change of *word: wakes its waiter if it announced itself asleep.
define internal void @pool.signal(ptr %word, ptr %flag) #0 {{
entry:
  %s = load atomic i32, ptr %flag seq_cst, align 4
  %asleep = icmp ne i32 %s, 0
  br i1 %asleep, label %wake, label %out
wake:
  call void @pool.futex(ptr %word, i64 {_FUTEX_WAKE_PRIVATE}, i32 1)
  br label %out
out:
  ret void
}}

define internal i64 @pool.deadline() #0 {{
entry:
  %t = call i64 @pool.now_ns()
  %s = load i64, ptr @pool.spin_ns, align 8
  %d = add i64 %t, %s
  ret i64 %d
}}

; The spin length, read once (under the lock, before the first worker exists).
define internal void @pool.read_spin() #0 {{
entry:
  %end = alloca ptr, align 8
  %cur = load i64, ptr @pool.spin_ns, align 8
  %unset = icmp slt i64 %cur, 0
  br i1 %unset, label %read, label %out
read:
  %s = call ptr @getenv(ptr @pool.env)
  %none = icmp eq ptr %s, null
  br i1 %none, label %set, label %parse
parse:
  %v = call i64 @strtol(ptr %s, ptr %end, i32 10)
  %e = load ptr, ptr %end, align 8
  %empty = icmp eq ptr %e, %s
  %neg = icmp slt i64 %v, 0
  %bad = or i1 %empty, %neg
  %v1 = call i64 @llvm.smin.i64(i64 %v, i64 {MAX_SPIN_US})
  %us = select i1 %bad, i64 {SPIN_US}, i64 %v1
  br label %set
set:
  %u = phi i64 [ %us, %parse ], [ {SPIN_US}, %read ]
  %ns = mul i64 %u, 1000
  store i64 %ns, ptr @pool.spin_ns, align 8
  br label %out
out:
  ret void
}}
"""
