"""Heap workspaces that outlive a call: the buffers too large for the stack, cached per
allocation site in the module instead of ``aligned_alloc``'d and freed on every call.

Why: glibc serves a large request with ``mmap`` (or grows the heap and trims it back on
``free``), so a kernel that freed its ~1 MB intermediates at every exit paid page faults on
every entry: an attention-softmax kernel of 0.18 ms ran 0.65-0.8 ms, depending on the process's
allocation history (the tuner and the timing process disagreed by 4x). TVM's runtime keeps a
workspace pool for the same reason.

Each site owns ``SLOTS`` pointer slots (a module global). Entry takes a cached buffer from a
slot with an atomic exchange, or allocates one; exit gives it back with a compare-exchange into
an empty slot, or frees it when all are taken (more concurrent calls than slots). So concurrent
calls of one kernel, and per-thread allocations inside parallel workers, never share a buffer.
``WORKSPACE_RELEASE`` frees every cached buffer; the loaded kernel calls it before its machine
code is dropped.
"""
from __future__ import annotations

WORKSPACE_RELEASE = "__ansor_workspace_release"
SLOTS = 16

_TAKE = "__ansor_ws_take"
_GIVE = "__ansor_ws_give"
_DRAIN = "__ansor_ws_drain"


def helpers(attr_group: str) -> str:
    """Definitions of take / give / drain (internal; take is noinline so its result keeps the
    ``noalias`` an allocation has: a buffer taken from a slot is reachable from nowhere else)."""
    return f"""
define internal noalias ptr @{_TAKE}(ptr %slots, i64 %size) noinline {attr_group} {{
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %next ]
  %more = icmp ult i64 %i, {SLOTS}
  br i1 %more, label %try, label %alloc
try:
  %p = getelementptr inbounds ptr, ptr %slots, i64 %i
  %v = atomicrmw xchg ptr %p, ptr null acquire, align 8
  %got = icmp ne ptr %v, null
  br i1 %got, label %done, label %next
next:
  %i1 = add nuw nsw i64 %i, 1
  br label %loop
done:
  ret ptr %v
alloc:
  %a = call noalias ptr @aligned_alloc(i64 64, i64 %size)
  ret ptr %a
}}

define internal void @{_GIVE}(ptr %slots, ptr %buf) noinline {attr_group} {{
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %next ]
  %more = icmp ult i64 %i, {SLOTS}
  br i1 %more, label %try, label %free
try:
  %p = getelementptr inbounds ptr, ptr %slots, i64 %i
  %r = cmpxchg ptr %p, ptr null, ptr %buf release monotonic, align 8
  %ok = extractvalue {{ ptr, i1 }} %r, 1
  br i1 %ok, label %done, label %next
next:
  %i1 = add nuw nsw i64 %i, 1
  br label %loop
done:
  ret void
free:
  call void @free(ptr %buf)
  ret void
}}

define internal void @{_DRAIN}(ptr %slots) {attr_group} {{
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %loop ]
  %p = getelementptr inbounds ptr, ptr %slots, i64 %i
  %v = atomicrmw xchg ptr %p, ptr null acquire, align 8
  call void @free(ptr %v)
  %i1 = add nuw nsw i64 %i, 1
  %more = icmp ult i64 %i1, {SLOTS}
  br i1 %more, label %loop, label %out
out:
  ret void
}}
"""


class Workspaces:
    """The module's allocation sites: one slot array each, and the code that uses them."""

    def __init__(self) -> None:
        self.sites: list[str] = []

    def site(self) -> str:
        """A new site's slot-array global (``@...``)."""
        g = f"@__ansor_ws{len(self.sites)}"
        self.sites.append(g)
        return g

    @staticmethod
    def take(result: str, slots: str, nbytes: int) -> str:
        return f"  {result} = call noalias ptr @{_TAKE}(ptr {slots}, i64 {nbytes})"

    @staticmethod
    def give(slots: str, buf: str) -> str:
        return f"  call void @{_GIVE}(ptr {slots}, ptr {buf})"

    def definitions(self, attr_group: str) -> list[str]:
        """Globals, helpers and the exported release function (nothing if no site)."""
        if not self.sites:
            return []
        out = [f"{g} = internal global [{SLOTS} x ptr] zeroinitializer, align 64" for g in self.sites]
        out.append(helpers(attr_group))
        body = "\n".join(f"  call void @{_DRAIN}(ptr {g})" for g in self.sites)
        out.append(f"define void @{WORKSPACE_RELEASE}() {attr_group} {{\nentry:\n{body}\n  ret void\n}}\n")
        return out
