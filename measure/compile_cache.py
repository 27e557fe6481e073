"""A persistent cache of compiled kernels, shared by processes: LLVM IR text -> host object code.

LLVM's O3 pipeline and object emission (``target.compile_ir``) are most of the time of building
a network, and resume, re-measurement, ``compile_network`` and ``ansor network run`` compile the
same modules again and again. ``object_code(ir)`` returns the object code of a module compiled
before, by this process or another one, from disk. ``cached(kind, text, make, decode)`` is the
same store for other bytes (``ansor.build`` keeps a whole compiled kernel by its schedule there,
skipping lowering and code generation too; its text includes ``code_identity()``).

Key: the SHA-256 of ``FORMAT``, the entry's kind, the toolchain identity (llvmlite and LLVM
versions, triple, CPU name and features: ``target.toolchain_identity``), the optimisation
pipeline and target machine options (``target.PIPELINE``, ``target.MACHINE_OPTIONS``) and the
text (the IR): whatever can change the machine code changes the key.

Storage is joblib's ``Memory``: a directory per entry (named by joblib's hash of the key),
writes through a temporary file and a rename so concurrent processes (the builder's workers)
can share the cache, the memoised function's code recorded (a change of ``_make`` drops the
old entries) and ``reduce_size``, which keeps the size bound by dropping the least recently used
entries. joblib pickles results, and unpickling runs code: an entry on disk is input, so the
store backend is ours (``ObjectCodeStore``) and holds raw bytes only - a magic line, the SHA-256
of the payload, the payload. Anything else (truncated, corrupted, another format) is a miss,
made and written again.

Configuration: ``$ANSOR_CACHE_DIR`` (default ``$XDG_CACHE_HOME/ansor-py/compile``, else
``~/.cache/ansor-py/compile``), ``ANSOR_CACHE_DIR=off`` to disable it, ``$ANSOR_CACHE_MAX_MB``
for its size bound (default 512). A directory owned by another user, or that other users can
write, is not used (its entries would be code they chose), with one warning.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, TypeVar

import numpy as np
from joblib import Memory, register_store_backend
from joblib._store_backends import FileSystemStoreBackend

import compute
import sketch

from . import target

T = TypeVar("T")

ENV_DIR = "ANSOR_CACHE_DIR"
ENV_MAX_MB = "ANSOR_CACHE_MAX_MB"
DEFAULT_MAX_MB = 512.0
OFF_VALUES = frozenset({"off", "none", "0", "false", "no"})

# Bump when the key's inputs or the entry layout change: old entries then simply miss.
FORMAT = 1
MAGIC = b"ansor-py cache entry 1\n"
_DIGEST = 32  # bytes of a SHA-256
_ITEM = "output.pkl"  # the name joblib's store looks for; the content is raw bytes, not a pickle

# The size bound is enforced at the first entry a process writes and every _EVICT_EVERY after
# (reduce_size walks the whole cache: not on every write of a tuning run).
_EVICT_EVERY = 64
BACKEND = "ansor-object-code"


@dataclass
class Stats:
    """What ``cached`` (and so ``object_code``) did in this process (``stats()``)."""

    hits: int = 0  # entries read from the cache
    compiled: int = 0  # entries made (a miss, or the cache disabled or unusable)
    stored: int = 0  # entries written


_LOCK = threading.Lock()
_STATS = Stats()
_MEMORIES: dict[str, tuple[Memory, Any]] = {}  # cache directory -> (Memory, memoised _make)
_UNUSABLE: set[str] = set()  # directories warned about once and not used
_THREAD = threading.local()  # per cached() call: did _make run
_next_trim = 1  # the count of entries written at which to trim the cache next


def encode_entry(obj: bytes) -> bytes:
    """An entry's bytes on disk: magic, SHA-256 of ``obj`` (the payload), ``obj``."""
    return MAGIC + hashlib.sha256(obj).digest() + obj


def decode_entry(data: bytes) -> bytes | None:
    """The payload of an entry, or None if it is not a whole, intact entry."""
    head = len(MAGIC) + _DIGEST
    if len(data) <= head or not data.startswith(MAGIC):
        return None
    obj = data[head:]
    if hashlib.sha256(obj).digest() != data[len(MAGIC):head]:
        return None
    return obj


def _write_bytes(data: bytes, path: str) -> None:
    with open(path, "wb") as f:
        f.write(data)


class ObjectCodeStore(FileSystemStoreBackend):
    """joblib's file-system store with entries as checksummed raw bytes instead of pickles."""

    def load_item(self, call_id: list, verbose: int = 1, timestamp: float | None = None,
                  metadata: dict | None = None) -> bytes | None:
        """The payload of ``call_id``, or None (``cached`` then makes it again)."""
        path = os.path.join(self.location, *call_id, _ITEM)
        try:
            with open(path, "rb") as f:
                obj = decode_entry(f.read())
            if obj is not None:
                os.utime(path)  # reduce_size drops the least recently *accessed* entries first
        except OSError:  # removed by another process's eviction meanwhile: a miss
            return None
        return obj

    def dump_item(self, call_id: list, item: Any, verbose: int = 1) -> None:
        if not isinstance(item, bytes):
            return
        item_path = os.path.join(self.location, *call_id)
        try:
            os.makedirs(item_path, exist_ok=True)
            self._concurrency_safe_write(encode_entry(item), os.path.join(item_path, _ITEM), _write_bytes)
        except OSError:
            return  # a full disk, or evicted meanwhile: the next process compiles it again
        with _LOCK:
            _STATS.stored += 1


register_store_backend(BACKEND, ObjectCodeStore)


class _MakeError(Exception):
    """Carries an exception of the producer (the compiler) through joblib, to tell it from the
    cache's own."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


def _make(key: str, make: Callable[[], bytes]) -> bytes:
    """The memoised function: joblib hashes ``key`` only (``make``, which produces the bytes -
    compiles - on a miss, is ignored: the key covers what it makes)."""
    _THREAD.made = True
    try:
        return make()
    except Exception as e:  # noqa: BLE001 - re-raised unchanged by cached()
        raise _MakeError(e) from e


def cache_dir() -> Path | None:
    """The cache directory from the environment, or None when the cache is off."""
    raw = os.environ.get(ENV_DIR, "").strip()
    if raw.lower() in OFF_VALUES:
        return None
    if raw:
        return Path(raw).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    if xdg and os.path.isabs(xdg):  # the XDG spec: a relative value is to be ignored
        return Path(xdg) / "ansor-py" / "compile"
    try:
        return Path.home() / ".cache" / "ansor-py" / "compile"
    except RuntimeError:  # no home directory to put it in
        return None


def max_bytes() -> int:
    """The size bound, ``$ANSOR_CACHE_MAX_MB`` megabytes (a bad value warns and is ignored)."""
    raw = os.environ.get(ENV_MAX_MB, "").strip()
    if raw:
        try:
            mb = float(raw)
            if mb > 0 and mb < float("inf"):
                return int(mb * (1 << 20))
        except ValueError:
            pass
        _warn_once(f"{ENV_MAX_MB}", f"{ENV_MAX_MB}={raw!r} is not a positive number of megabytes; "
                   f"the compile cache keeps at most {DEFAULT_MAX_MB:g} MB")
    return int(DEFAULT_MAX_MB * (1 << 20))


def _warn_once(what: str, message: str) -> None:
    with _LOCK:
        if what in _UNUSABLE:
            return
        _UNUSABLE.add(what)
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def cache_key(kind: str, text: str) -> str:
    """The hex SHA-256 that names the entry of ``text`` (an LLVM module for "object", or what a
    caller builds from) on this toolchain, pipeline and cache format."""
    head = json.dumps({"format": FORMAT, "kind": kind, "toolchain": target.toolchain_identity(),
                       "pipeline": target.PIPELINE, "machine": target.MACHINE_OPTIONS},
                      sort_keys=True)
    h = hashlib.sha256(head.encode())
    h.update(b"\0")
    h.update(text.encode())
    return h.hexdigest()


@lru_cache(maxsize=1)
def code_identity() -> str:
    """A SHA-256 of the code that turns a schedule into machine code (every source file of
    ``compute``, ``sketch`` and ``measure``) and of the Python and numpy versions: a key made
    from a schedule rather than from IR text must change whenever that code does."""
    h = hashlib.sha256(f"{sys.version}\0{np.__version__}".encode())
    for name, base in (("compute", Path(compute.__file__).parent), ("sketch", Path(sketch.__file__).parent),
                       ("measure", Path(__file__).parent)):
        for path in sorted(base.rglob("*.py")):
            h.update(f"\0{name}/{path.relative_to(base).as_posix()}\0".encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def _private(root: Path) -> bool:
    """Whether ``root`` is ours and only ours to write (no other user can plant entries)."""
    if not hasattr(os, "geteuid"):
        return True
    st = root.stat()
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022


def _memoised(root: Path) -> tuple[Memory, Any] | None:
    key = str(root)
    with _LOCK:
        if key in _MEMORIES:
            return _MEMORIES[key]
        if key in _UNUSABLE:
            return None
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        usable = _private(root)
    except OSError as e:
        _warn_once(key, f"compile cache {root}: {e.strerror or e}; compiling without it")
        return None
    if not usable:
        _warn_once(key, f"compile cache {root} belongs to another user or others can write to it; "
                   f"compiling without it (set {ENV_DIR} to a private directory, or to 'off')")
        return None
    memory = Memory(str(root), backend=BACKEND, verbose=0)
    entry = (memory, memory.cache(_make, ignore=["make"]))
    with _LOCK:
        return _MEMORIES.setdefault(key, entry)


def _decoded(decode: Callable[[bytes], T | None], data: Any) -> T | None:
    if not isinstance(data, bytes):
        return None
    try:
        return decode(data)
    except Exception:  # noqa: BLE001 - an entry that does not decode is a miss
        return None


def cached(kind: str, text: str, make: Callable[[], bytes],
           decode: Callable[[bytes], T | None]) -> tuple[T, bool]:
    """``(decode(entry), hit)`` for the entry of ``(kind, text)``: read from the cache, else
    made by ``make()`` and stored. An entry that ``decode`` refuses (None or an exception) is
    made and written again. Errors of ``make`` propagate unchanged; a cache that cannot be used
    (unwritable, broken) only costs the ``make``."""
    root = cache_dir()
    found = _memoised(root) if root is not None else None
    if found is None:
        value = decode(make())
        with _LOCK:
            _STATS.compiled += 1
        return value, False
    memory, memo = found
    key = cache_key(kind, text)
    outer = getattr(_THREAD, "made", False)  # cached() calls nest: a kernel's make compiles IR
    _THREAD.made = False
    try:
        value = _decoded(decode, memo(key, make))
        if value is None:  # not there intact: make it and write it again
            data, _ = memo.call(key, make)
            value = decode(data)
        made = _THREAD.made
    except _MakeError as e:
        raise e.error from None
    except Exception as e:  # noqa: BLE001 - the cache's own failure must not fail the compile
        _warn_once(f"{root}:broken", f"compile cache {root} failed ({type(e).__name__}: {e}); "
                   "compiling without it")
        with _LOCK:
            _UNUSABLE.add(str(root))
            _MEMORIES.pop(str(root), None)
        return cached(kind, text, make, decode)
    finally:
        _THREAD.made = outer
    global _next_trim
    with _LOCK:
        if made:
            _STATS.compiled += 1
        else:
            _STATS.hits += 1
        evict = _STATS.stored >= _next_trim
        if evict:
            _next_trim = _STATS.stored + _EVICT_EVERY
    if evict:
        _trim(memory)
    return value, not made


def object_code(ir: str, timings: dict | None = None) -> bytes:
    """The host object code of LLVM module ``ir``: from the cache, else compiled
    (``target.compile_ir``) and stored. ``timings`` receives "cache" (seconds of the lookup) on
    a hit, the compile stages otherwise. Errors of the compiler propagate unchanged."""
    t0 = time.perf_counter()
    obj, hit = cached("object", ir, lambda: target.compile_ir(ir, timings), bytes)
    if hit and timings is not None:
        timings["cache"] = time.perf_counter() - t0
    return obj


def _trim(memory: Memory) -> None:
    try:
        memory.reduce_size(bytes_limit=max_bytes())
    except OSError:
        pass  # another process evicting the same entries


def trim() -> None:
    """Bring the cache within ``$ANSOR_CACHE_MAX_MB`` now, dropping the entries used least
    recently first (``cached`` does it after a process's first write and every 64th)."""
    root = cache_dir()
    found = _memoised(root) if root is not None else None
    if found is not None:
        _trim(found[0])


def stats() -> Stats:
    """A copy of this process's counts (hits, compiles, entries written)."""
    with _LOCK:
        return Stats(_STATS.hits, _STATS.compiled, _STATS.stored)
