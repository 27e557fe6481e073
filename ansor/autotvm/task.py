"""Templates and template tasks: a schedule template bound to one workload's shapes.

A *template* is a function ``template(cfg, dag) -> State`` written with the ordinary schedule
steps, with its tunable choices taken from ``cfg`` (see ``space.py``). Templates are registered by
name together with the workload names they serve, so a task finds its template from the workload
alone (``create_task("matmul", (1024, 1024, 1024))``).

A ``TemplateTask`` pairs a ``SearchTask`` (the workload, which is what records name and what the
builder and runner measure) with a template and the template's ``ConfigSpace`` for that workload,
collected once when the task is made. ``instantiate(config)`` turns a configuration into the
``State`` that gets measured and recorded; a configuration whose steps do not apply raises
``InstantiationError``, which the tuners book as a failed measurement.
"""
from __future__ import annotations

import os
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from compute.compute_dag import ComputeDAG
from sketch.loop_state import State

from ..search_task import SearchTask
from .records import best_config_record
from .space import ConfigEntity, ConfigSpace

__all__ = ["InstantiationError", "Template", "TemplateTask", "create_task", "get_template",
           "list_templates", "register_template", "template_for_workload"]

TemplateFunc = Callable[[Any, ComputeDAG], State]


class InstantiationError(Exception):
    """A configuration does not produce a valid state (a step does not apply, or the template
    failed on it). Tuners record it as an INSTANTIATION_ERROR measurement."""


@dataclass(frozen=True)
class Template:
    """A registered template: ``func(cfg, dag) -> State`` and the workloads it serves."""

    name: str
    func: TemplateFunc
    workloads: tuple[str, ...]

    @property
    def doc(self) -> str:
        return (self.func.__doc__ or "").strip().split("\n")[0]


_TEMPLATES: dict[str, Template] = {}
_BY_WORKLOAD: dict[str, str] = {}


def register_template(name: str, workloads: Sequence[str] | None = None,
                      override: bool = False) -> Callable[[TemplateFunc], TemplateFunc]:
    """Decorator: register ``func(cfg, dag) -> State`` as template ``name``, the template of the
    workloads named in ``workloads`` (default: the workload of the same name)."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"a template name must be a non-empty string, got {name!r}")
    served = tuple(workloads) if workloads is not None else (name,)

    def deco(func: TemplateFunc) -> TemplateFunc:
        if not callable(func):
            raise TypeError(f"template {name!r} must be a function (cfg, dag) -> State")
        if not override:
            if name in _TEMPLATES:
                raise ValueError(f"template {name!r} is already registered (override=True to "
                                 "replace it)")
            taken = [w for w in served if w in _BY_WORKLOAD]
            if taken:
                raise ValueError(f"workload(s) {taken} already have a template "
                                 f"({', '.join(sorted({_BY_WORKLOAD[w] for w in taken}))}); "
                                 "override=True to replace it")
        _TEMPLATES[name] = Template(name, func, served)
        for w in served:
            _BY_WORKLOAD[w] = name
        return func

    return deco


def get_template(name: str) -> Template:
    """The template registered as ``name`` (KeyError listing the registered ones)."""
    try:
        return _TEMPLATES[name]
    except KeyError:
        raise KeyError(f"no template named {name!r}; registered templates: "
                       f"{', '.join(sorted(_TEMPLATES)) or 'none'}") from None


def template_for_workload(workload: str) -> Template:
    """The template serving workload ``workload`` (KeyError listing the workloads that have
    one)."""
    try:
        return _TEMPLATES[_BY_WORKLOAD[workload]]
    except KeyError:
        raise KeyError(f"no template for workload {workload!r}; workloads with a template: "
                       f"{', '.join(sorted(_BY_WORKLOAD)) or 'none'}") from None


def list_templates() -> list[Template]:
    return [_TEMPLATES[n] for n in sorted(_TEMPLATES)]


class TemplateTask:
    """A template bound to a workload: ``space`` (its ``ConfigSpace``), ``search_task`` (what
    records and measurements name), ``instantiate(config) -> State``.

    ``workload`` is a registered workload name (with ``args``) or a ``SearchTask`` made from one;
    ``template`` defaults to the template registered for the workload. ``name`` labels progress
    lines (default: the template's name).
    """

    def __init__(self, workload: str | SearchTask, args: Sequence[Any] = (),
                 template: str | Template | None = None, name: str | None = None):
        if isinstance(workload, SearchTask):
            if args:
                raise ValueError("TemplateTask: args go with a workload name, not a SearchTask")
            self.search_task = workload
        elif isinstance(workload, str):
            self.search_task = SearchTask(func=workload, args=args)
        else:
            raise TypeError(f"TemplateTask: workload must be a registered workload name or a "
                            f"SearchTask, got {type(workload).__name__}")
        # Fail the task now, not after measuring configurations that read out of range.
        self.search_task.compute_dag.check_bounds()
        if template is None:
            wname = self.search_task.workload_name
            if wname is None:
                raise ValueError("TemplateTask: a task made from tensors names no workload; pass "
                                 "template=")
            self.template = template_for_workload(wname)
        elif isinstance(template, Template):
            self.template = template
        else:
            self.template = get_template(template)
        self.name = name if name is not None else self.template.name
        self.space = self._collect()

    # ---- identity ----
    @property
    def dag(self) -> ComputeDAG:
        return self.search_task.compute_dag

    @property
    def workload_key(self) -> str:
        return self.search_task.workload_key

    @property
    def flop(self) -> float:
        return float(self.search_task.flop_count or 0.0)

    @property
    def desc(self) -> str:
        return self.search_task.desc

    def __repr__(self) -> str:
        return (f"TemplateTask({self.desc}, template {self.template.name}, "
                f"{len(self.space)} configs)")

    # ---- configurations ----
    def _collect(self) -> ConfigSpace:
        space = ConfigSpace()
        try:
            state = self.template.func(space, self.dag)
        except Exception as err:
            raise ValueError(f"template {self.template.name!r} failed on {self.desc} while its "
                             f"space was collected: {type(err).__name__}: {err}") from err
        if not isinstance(state, State):
            raise TypeError(f"template {self.template.name!r} must return a State, got "
                            f"{type(state).__name__}")
        return space

    def config(self, index: int) -> ConfigEntity:
        """``space[index]``."""
        return self.space.get(index)

    def instantiate(self, config: ConfigEntity | int) -> State:
        """The state configuration ``config`` (an entity of this task's space, or its index)
        produces; InstantiationError when its steps do not apply."""
        if not isinstance(config, ConfigEntity):
            config = self.space.get(config)
        elif config.space is not self.space and config.space.signature != self.space.signature:
            raise ValueError(f"configuration {config.index} belongs to another space (template "
                             "or workload differs)")
        try:
            state = self.template.func(config, self.dag)
        except Exception as err:  # noqa: BLE001 - any failure of one config is that config's
            tb = traceback.format_exception(type(err), err, err.__traceback__)
            raise InstantiationError(f"{type(err).__name__}: {err}\n{''.join(tb[-3:])}") from err
        if not isinstance(state, State):
            raise InstantiationError(f"template {self.template.name!r} returned "
                                     f"{type(state).__name__}, not a State")
        return state

    def fallback_state(self) -> State:
        """The state of the fallback configuration (what to use untuned)."""
        return self.instantiate(self.space.fallback())

    def best_config(self, log_file: str | os.PathLike) -> tuple[ConfigEntity | None, State]:
        """The best valid record of this task in ``log_file``: its configuration (None when the
        record does not carry one of this space) and its state. ``ansor.records.NoRecordError``
        when there is none."""
        return best_config_record(log_file, self)


def create_task(workload: str | SearchTask, args: Sequence[Any] = (),
                template: str | Template | None = None, name: str | None = None) -> TemplateTask:
    """A ``TemplateTask`` (like AutoTVM's ``task.create``)."""
    return TemplateTask(workload, args, template, name)
