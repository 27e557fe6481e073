"""Two tuners on one log: an advisory claim on it, and the records others append to it.

Several processes may append to one log (``append_durably`` keeps their lines whole), but two
tuning runs on one log each measured the schedules the other had already logged, without a word.
A tuning run now claims its log (``LogClaim``): an exclusive ``flock`` on ``LOG.lock`` beside
it, holding the claimant's pid. A run that finds the claim taken warns once, naming the other
pid, and carries on; both then read what the other appends (``LogClaim.new_lines``, from the
offset where they last stopped) so that a schedule in the log is not measured again.

The claim is advisory and best effort: where the lock file cannot be created (a read-only
directory, a file system without locks) a run goes on unclaimed. It is removed on release, under
the lock; a claimant that finds its lock file unlinked meanwhile takes a new one.
"""
from __future__ import annotations

import errno
import fcntl
import os
import socket
import warnings
from typing import IO, Iterator

from .record import RecordFormatError, RecordLine, decode_line

LOCK_SUFFIX = ".lock"
# A tail read takes at most this much of what others appended per call (a log that grows by
# gigabytes between two rounds is read over several rounds).
MAX_TAIL_BYTES = 64 << 20


class LogSharedWarning(UserWarning):
    """Another tuning run is writing the same log."""


class LogClaim:
    """This process's claim on a log for one tuning run, and its reading position in the log.

    ``holder`` is the other claimant's ``pid N on HOST`` when the claim was taken already (and
    the warning given), else None. ``new_lines()`` yields the complete record lines appended
    since the claim was made (or since the last call).
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self.lock_path = self.path + LOCK_SUFFIX
        self.holder: str | None = None
        self._lock: IO[bytes] | None = None
        try:
            self.offset = os.path.getsize(self.path)  # the run's resume reads what is there
        except OSError:
            self.offset = 0
        self._acquire()

    # ---- the claim ---------------------------------------------------------------------------
    def _acquire(self) -> None:
        for _ in range(8):  # a lock file unlinked under us by its releasing holder: take a new one
            try:
                f = open(self.lock_path, "a+b")
            except OSError:
                return  # no lock file here: unclaimed, as on a file system without locks
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    f.seek(0)
                    self.holder = f.read(200).decode("ascii", "replace").strip() or "unknown pid"
                    warnings.warn(
                        f"another tuner ({self.holder}) is writing {self.path}: this run skips "
                        "the schedules it logs, but on one machine each times its candidates "
                        "while the other loads the CPU", LogSharedWarning, stacklevel=4)
                f.close()
                return
            try:
                same = os.fstat(f.fileno()).st_ino == os.stat(self.lock_path).st_ino
            except OSError:
                same = False
            if not same:
                f.close()
                continue
            f.seek(0)
            f.truncate()
            f.write(f"pid {os.getpid()} on {socket.gethostname()}".encode())
            f.flush()
            self._lock = f
            return

    def release(self) -> None:
        """Give the claim up (idempotent): the lock file is removed while still locked."""
        f, self._lock = self._lock, None
        if f is None:
            return
        try:
            os.unlink(self.lock_path)
        except OSError:
            pass
        f.close()

    @property
    def held(self) -> bool:
        return self._lock is not None

    # ---- what others append ------------------------------------------------------------------
    def new_lines(self) -> Iterator[RecordLine]:
        """The valid record lines appended since the last call (this process's own included).
        A line not yet complete is left for the next call; one that does not parse is skipped
        (the readers of the whole log warn about it)."""
        try:
            with open(self.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < self.offset:  # replaced or cut (distill --in-place): read it anew
                    self.offset = 0
                f.seek(self.offset)
                data = f.read(min(size - self.offset, MAX_TAIL_BYTES))
        except OSError:
            return
        end = data.rfind(b"\n") + 1
        if end == 0 and len(data) == MAX_TAIL_BYTES:
            self.offset += len(data)  # no record is this long: skip it rather than stall on it
        self.offset += end
        for raw in data[:end].splitlines():
            if raw.strip():
                try:
                    yield decode_line(raw)
                except RecordFormatError:
                    continue
