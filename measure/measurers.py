"""Who owns the builder and runner of a tuning call: ``Measurers``, the one place that decides.

Every tuner takes ``builder`` and ``runner`` options that are either ``"local"`` - a
``LocalBuilder`` / ``LocalRunner`` with default settings, created for the call and closed after
it - or an object meeting the contract (``measure.protocols.Builder`` / ``Runner``: a local or a
Dask one), used as given and left open so that it can serve several calls (its workers start
once). ``check_measurers`` validates the options where they are given; ``Measurers`` opens the
pair and closes only what it created.
"""
from __future__ import annotations

from .builder import LocalBuilder
from .protocols import Builder, Runner
from .measure import WARM
from .runner import LocalRunner

LOCAL = "local"


def check_measurers(owner: str, builder: object, runner: object) -> None:
    """Raise ValueError unless ``builder`` is ``"local"`` or a ``Builder`` and ``runner`` is
    ``"local"`` or a ``Runner``; ``owner`` names the option in the message
    (e.g. ``"TuningOptions."``)."""
    for name, value, contract in (("builder", builder, Builder), ("runner", runner, Runner)):
        if not (isinstance(value, str) and value == LOCAL) and not isinstance(value, contract):
            raise ValueError(f"{owner}{name} must be '{LOCAL}' or a {contract.__name__} (e.g. "
                             f"Local{contract.__name__}, Dask{contract.__name__}), got {value!r}")


class Measurers:
    """The builder and runner of one tuning call. ``"local"`` ones are created here (their
    workers start on first use) and closed by ``close()``; given ones are left open. A context
    manager; ``close()`` may be called more than once. ``cache``: the timing mode of a local
    runner made here (``measure.runner``: warm for one kernel, network for a network's tasks)."""

    def __init__(self, builder: Builder | str = LOCAL, runner: Runner | str = LOCAL,
                 cache: str = WARM):
        check_measurers("", builder, runner)
        self.owns_builder = isinstance(builder, str)
        self.owns_runner = isinstance(runner, str)
        self.builder: Builder = LocalBuilder() if isinstance(builder, str) else builder
        self.runner: Runner = LocalRunner(cache=cache) if isinstance(runner, str) else runner
        self._closed = False

    def close(self) -> None:
        """Close the builder and runner this object created (the runner even if closing the
        builder failed); the given ones stay open."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.owns_builder:
                self.builder.close()
        finally:
            if self.owns_runner:
                self.runner.close()

    def __enter__(self) -> "Measurers":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
