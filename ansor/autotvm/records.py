"""Template-tuning records: ordinary measurement records plus the configuration that made them.

Each measurement is written as a normal record line (``measure.record``: workload, toolchain, the
state's transform steps, result), so ``ansor records show``, ``distill``, ``verify`` and
``SearchTask.apply_best`` work on template-tuning logs as on the auto-scheduler's. One extra
top-level field, ignored by every other reader, names the configuration::

    {"v":1,"input":{...},"result":{...},
     "autotvm":{"template":"matmul","space":"3f2a...","index":4711,
                "knobs":{"tile_y":[8,8,16],"tile_x":[2,8,64],"order":[0,2,1],...}}}

``index`` lets a resumed run skip what is measured without re-deriving configurations from steps;
``space`` (the space's signature) says whether the index still means the same configuration;
``knobs`` keep the record readable and let a model learn from other workloads' records of the same
template (transfer), whose indices mean other configurations.
"""
from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Iterator, Sequence

from measure.measure import MAX_FLOAT, MeasureInput, MeasureResult
from measure.log_file import append_durably
from measure.record import LineWarner, RecordLine, RecordToFile, iter_lines

from ..task_records import NoRecordError, describe_missing, record_to_input
from .space import ConfigEntity

if TYPE_CHECKING:
    from sketch.loop_state import State

    from .task import TemplateTask

__all__ = ["ConfigRecord", "ConfigRecordToFile", "best_config_record", "config_record",
           "iter_config_records"]

FIELD = "autotvm"


class ConfigRecordToFile(RecordToFile):
    """``RecordToFile`` that adds each measurement's configuration (``write(inputs, results,
    configs)``); a plain call ``(inputs, results)`` writes plain records. Durable and atomic per
    batch like its base class."""

    def __init__(self, path: str | os.PathLike, template: str, space_signature: str):
        super().__init__(path)
        self.template = template
        self.space_signature = space_signature
        self._write_lock = threading.Lock()

    def config_json(self, config: ConfigEntity) -> dict:
        d = config.to_json()
        return {"template": self.template, "space": self.space_signature, "index": d["index"],
                "knobs": d["knobs"]}

    def write(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult],
              configs: Sequence[ConfigEntity | None]) -> None:
        if len(configs) != len(inputs):
            raise ValueError(f"{len(inputs)} inputs but {len(configs)} configurations")
        lines = self.encode(inputs, results).decode().splitlines()
        out = []
        for line, cfg in zip(lines, configs):
            if cfg is not None:
                # The base line is one JSON object: add our field before its closing brace.
                extra = json.dumps(self.config_json(cfg), separators=(",", ":"), allow_nan=False)
                line = f'{line[:-1]},"{FIELD}":{extra}}}'
            out.append(line + "\n")
        if not out:
            return
        with self._write_lock:
            append_durably(self.path, "".join(out).encode())
            self.n_written += len(out)


@dataclass(frozen=True)
class ConfigRecord:
    """A record line and the configuration it carries (None for plain records)."""

    line: RecordLine
    template: str | None
    space: str | None
    index: int | None
    knobs: dict | None

    @property
    def gflops(self) -> float:
        """GFLOPS of the measurement, 0 for a failed one or an unknown flop count."""
        res = self.line.result
        if not self.line.is_valid or not self.line.flop:
            return 0.0
        return self.line.flop / res.mean_cost / 1e9


def _config_part(line: RecordLine) -> dict | None:
    if f'"{FIELD}"'.encode() not in line.raw:
        return None
    try:
        part = json.loads(line.raw).get(FIELD)
    except ValueError:
        return None
    return part if isinstance(part, dict) else None


def iter_config_records(paths: str | os.PathLike | Iterable[str | os.PathLike]
                        ) -> Iterator[ConfigRecord]:
    """Every record line of one or several logs with its configuration part, if any (bad lines
    are skipped with a ``RecordWarning``, as everywhere)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    for path in paths:
        path = os.fspath(path)
        warner = LineWarner(path)
        for line in iter_lines(path, warner):
            yield config_record(line)
        warner.finish()


def config_record(line: RecordLine) -> ConfigRecord:
    """A record line with its configuration part, if any (a part of the wrong shape, from a
    hand-edited or hostile log, reads as none)."""
    part = _config_part(line)
    if part is None:
        return ConfigRecord(line, None, None, None, None)
    index = part.get("index")
    knobs = part.get("knobs")
    return ConfigRecord(
        line, part.get("template") if isinstance(part.get("template"), str) else None,
        part.get("space") if isinstance(part.get("space"), str) else None,
        index if isinstance(index, int) and not isinstance(index, bool) else None,
        knobs if isinstance(knobs, dict) else None)


def config_of(rec: ConfigRecord, task: "TemplateTask") -> ConfigEntity | None:
    """The configuration of ``task``'s space a record names, or None (another template, another
    space, or no configuration part)."""
    if rec.template != task.template.name or rec.index is None:
        return None
    if rec.space == task.space.signature and 0 <= rec.index < len(task.space):
        return task.space.get(rec.index)
    if rec.knobs is not None:  # same template, other space definition: try by knob values
        try:
            return task.space.from_json(rec.knobs)
        except (KeyError, ValueError, TypeError):
            return None
    return None


def best_config_record(log_file: str | os.PathLike, task: "TemplateTask"
                       ) -> tuple[ConfigEntity | None, "State"]:
    """The best valid record of ``task`` in ``log_file``: (its configuration or None, its state
    replayed on the task's DAG). ``ansor.records.NoRecordError`` when there is none. Streams,
    and replays only records that beat the best so far; one whose steps do not replay is
    skipped with a ``RecordWarning`` naming its line."""
    best: tuple[ConfigRecord, "State"] | None = None
    cost = MAX_FLOAT
    warner = LineWarner(os.fspath(log_file))
    for rec in iter_config_records(log_file):
        if rec.line.workload_key == task.workload_key and rec.line.is_valid \
                and rec.line.result.mean_cost < cost:
            inp = record_to_input(rec.line, task.search_task, warner)
            if inp is not None:
                best, cost = (rec, inp.state), rec.line.result.mean_cost
    warner.finish()
    if best is None:
        raise NoRecordError(describe_missing(log_file, task.search_task))
    return config_of(best[0], task), best[1]
