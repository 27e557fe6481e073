"""How template tuners measure: the same builder and runner as the auto-scheduler.

``measure_option(builder=..., runner=...)`` names them as AutoTVM's function does. "local" means a
``LocalBuilder`` / ``LocalRunner`` with default settings, created for one ``tune`` call and closed
after it (``measure.measurers``); a given ``Builder`` / ``Runner`` (local or Dask) is used as is
and left open (share one across tuners so that they all measure with the same settings and the
workers start once).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Iterator

from measure.measurers import Measurers, check_measurers
from measure.protocols import Builder, Runner

__all__ = ["MeasureOption", "measure_option"]


@dataclass(frozen=True)
class MeasureOption:
    builder: str | Builder = "local"
    runner: str | Runner = "local"

    def __post_init__(self) -> None:
        check_measurers("measure option ", self.builder, self.runner)

    @contextlib.contextmanager
    def open(self) -> Iterator[tuple[Builder, Runner]]:
        """The builder and runner for one tuning call; closes those it created."""
        with Measurers(self.builder, self.runner) as m:
            yield m.builder, m.runner


def measure_option(builder: str | Builder = "local",
                   runner: str | Runner = "local") -> MeasureOption:
    """The measurement set-up for ``Tuner.tune`` (AutoTVM's ``autotvm.measure_option``)."""
    return MeasureOption(builder, runner)
