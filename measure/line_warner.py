"""Warnings about the skipped lines of a record file: one per line up to a limit, then a count.

Every reader of records (``measure.record.iter_lines`` and the readers above it that skip a line
for their own reasons: a task that cannot be rebuilt, steps that do not replay) reports through
one ``LineWarner`` per file, so each skipped line is named with its file and line number and a
log of 100k bad lines prints 20 warnings and a count, not 100k. Split out of ``measure.record``,
which re-exports these names.
"""
from __future__ import annotations

import warnings

# Per-line warnings per file before the rest are only counted.
MAX_LINE_WARNINGS = 20


class RecordWarning(UserWarning):
    """A record line was skipped (corrupt, truncated, unknown step, does not replay, ...)."""


class LineWarner:
    """Warns about skipped lines of one file, up to a limit; ``finish`` reports the rest."""

    def __init__(self, path: str, limit: int = MAX_LINE_WARNINGS):
        self.path, self.limit = path, limit
        self.count = 0   # lines skipped
        self.warned = 0  # of which got their own warning

    def __call__(self, lineno: int, why: str) -> None:
        self.count += 1
        if self.warned < self.limit:
            self.warned += 1
            warnings.warn(f"{self.path}:{lineno}: skipped record: {why}", RecordWarning,
                          stacklevel=3)

    def silent(self) -> None:
        """Count a skipped line already explained by an earlier warning."""
        self.count += 1

    def finish(self) -> None:
        if self.count > self.warned:
            warnings.warn(f"{self.path}: {self.count - self.warned} more record line(s) skipped "
                          f"({self.count} in all)", RecordWarning, stacklevel=3)
