"""How template tuners measure: the same builder and runner as the auto-scheduler.

``measure_option(builder=..., runner=...)`` names them as AutoTVM's function does. "local" means a
``LocalBuilder`` / ``LocalRunner`` with default settings, created for one ``tune`` call and closed
after it; a given instance is used as is and left open (share one across tuners so that they all
measure with the same settings and the workers start once).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Iterator

from measure.builder import LocalBuilder
from measure.runner import LocalRunner

__all__ = ["MeasureOption", "measure_option"]


@dataclass(frozen=True)
class MeasureOption:
    builder: str | LocalBuilder = "local"
    runner: str | LocalRunner = "local"

    def __post_init__(self) -> None:
        if not (self.builder == "local" or isinstance(self.builder, LocalBuilder)):
            raise ValueError(f"measure option builder must be 'local' or a LocalBuilder, got "
                             f"{self.builder!r}")
        if not (self.runner == "local" or isinstance(self.runner, LocalRunner)):
            raise ValueError(f"measure option runner must be 'local' or a LocalRunner, got "
                             f"{self.runner!r}")

    @contextlib.contextmanager
    def open(self) -> Iterator[tuple[LocalBuilder, LocalRunner]]:
        """The builder and runner for one tuning call; closes those it created."""
        own_b, own_r = self.builder == "local", self.runner == "local"
        builder = LocalBuilder() if own_b else self.builder
        runner = LocalRunner() if own_r else self.runner
        assert isinstance(builder, LocalBuilder) and isinstance(runner, LocalRunner)
        try:
            yield builder, runner
        finally:
            if own_b:
                builder.close()
            if own_r:
                runner.close()


def measure_option(builder: str | LocalBuilder = "local",
                   runner: str | LocalRunner = "local") -> MeasureOption:
    """The measurement set-up for ``Tuner.tune`` (AutoTVM's ``autotvm.measure_option``)."""
    return MeasureOption(builder, runner)
