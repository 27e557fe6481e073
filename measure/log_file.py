"""Appending to a log file durably: ``append_durably`` (whole lines, one write, fsync, all or
nothing, writers taking turns) and ``check_log_file`` (an unusable path found before any work is
done); ``RecordFileError`` names the file and the reason. The record format (``record``) writes
its batches through it, and the template tuner's log (``ansor.autotvm.records``) too.
"""
from __future__ import annotations

import errno
import fcntl
import os

from .file_kind import kernel_filesystem


class RecordFileError(OSError):
    """A record file cannot be written; the message names the file and the reason."""


def _reason(err: OSError) -> str:
    return err.strerror or str(err)


def check_log_file(path: str | os.PathLike) -> str:
    """Check that records can be appended to ``path`` before any work is done, and return it.

    Creates the file (empty), as the first append would, but not a missing directory (a typo
    there would scatter logs); an existing file is left as it is. ``RecordFileError`` names the
    path and what is wrong: empty, a directory, in a missing directory or under a non-directory,
    not a regular file, on a kernel interface (``/proc``: writes fail), or not openable for
    appending (permissions, read-only file system, ...). A full disk shows only when writing.
    """
    path = os.fspath(path)
    if not path:
        raise RecordFileError("the log file path is empty")
    if os.path.isdir(path):
        raise RecordFileError(f"log file {path!r} is a directory")
    parent = os.path.dirname(os.path.abspath(path))
    # The nearest existing ancestor must be a directory ("/etc/passwd/x.json" is not a path).
    up = parent
    while not os.path.exists(up) and os.path.dirname(up) != up:
        up = os.path.dirname(up)
    if not os.path.isdir(up):
        raise RecordFileError(f"log file {path!r}: its directory {up!r} is not a directory")
    if up != parent:
        raise RecordFileError(f"log file {path!r}: its directory {parent!r} does not exist")
    if os.path.exists(path) and not os.path.isfile(path):
        raise RecordFileError(f"log file {path!r} is not a regular file (records are appended and "
                              "synced to disk; use no log file to keep no records)")
    kernel = kernel_filesystem(path if os.path.exists(path) else parent)
    if kernel is not None:
        raise RecordFileError(f"log file {path!r} is on {kernel}, a kernel interface, not storage")
    try:
        # O_NONBLOCK: a FIFO that slipped in between the checks fails here instead of hanging.
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o644)
    except OSError as err:
        raise RecordFileError(f"cannot open the log file {path!r} for appending: "
                              f"{_reason(err)}") from None
    os.close(fd)
    return path


def append_durably(path: str, data: bytes) -> None:
    """Append ``data`` (whole lines) to ``path`` and fsync; all or nothing.

    The file is opened per call: a batch takes seconds to measure, an open takes microseconds,
    and a log moved or rotated between batches is then followed rather than written into a
    deleted inode. Writers take turns through an advisory lock, so that when a write fails (a
    full disk, an I/O error) the file can be cut back to where this batch began without cutting
    another writer's lines: it then ends with whole lines only, and ``RecordFileError`` says so.
    """
    parent = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(parent, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as err:
        raise RecordFileError(f"cannot open the log file {path!r} for appending: "
                              f"{_reason(err)}") from None
    start = None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass  # a file system without locks: concurrent writers then only risk a rollback
        start = os.fstat(fd).st_size
        if start > 0 and not _ends_with_newline(path):
            # A writer killed mid-line left a partial line: end it, or our first line would be
            # glued onto it and lost with it.
            data = b"\n" + data
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            if n <= 0:
                raise OSError(errno.EIO, "the write stored nothing")
            view = view[n:]
        os.fsync(fd)
    except OSError as err:
        kept = "the file is as it was"
        if start is not None:
            try:
                os.ftruncate(fd, start)
                os.fsync(fd)
            except OSError:
                kept = "it may end with a partial line, which readers skip with a warning"
        raise RecordFileError(f"writing to the log file {path!r} failed: {_reason(err)}; the batch "
                              f"({len(data)} bytes) was not recorded and {kept}") from None
    finally:
        os.close(fd)


def _ends_with_newline(path: str) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"
