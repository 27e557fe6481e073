"""SearchTask: one computation to tune, identified so that its records can find it again.

A task is made from a registered workload function and its shape arguments
(``SearchTask(func=matmul, args=(1024, 1024, 1024))``, or the function's registered name), or from
argument tensors directly (``SearchTask(tensors=[A, B, C])``). Its ``to_json()`` is what a record
stores to recreate it: a registered workload as name + arguments (a short line; the process
loading the record must have the function registered), any other computation as its serialised
DAG (self-contained, larger). ``from_json`` rebuilds a task from either without executing code.

A task also carries the machine it is tuned for (``hardware_params``, as TVM's does): this host's,
read when first needed, unless stated (``SearchTask(..., hardware_params=HardwareParams(...))``);
the search reads the core count and vector width from it. It is not part of the record. The CPU
candidates are built for is ``target`` (``SearchTask(..., target="x86-64-v3")``, default
``native``: ``measure.targets``); the record's toolchain identity names it.

Weight layout rewrite (``layout_rewrite_inputs``, TVM's ``LayoutRewriteOption``): the argument
positions of inputs that are constants where the kernel will run (a network's weights). A
candidate that packs such an input (``PackStep``) is then built and measured with the pack left
out of the timed kernel and the input given packed, as ``compile_network`` runs it
(``sketch.layout_rewrite``). The record's task says so (``"layout_rewrite": [positions]``); the
workload key does not change, so records measured either way belong to the same task. Default:
none (every input may change between calls, the pack runs inside the kernel).
"""
from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any, Callable, Sequence

from compute.compute_dag import ComputeDAG
from compute.names import check_desc, check_name
from compute.tensor import ComputeOp, Tensor
from compute.workload_registry import (args_to_json, canonical_args, get_workload_func,
                                       make_workload, registered_name, workload_desc)
from cost_model.lgbm_model import LGBModel
from measure.target import host_hardware_params
from measure.targets import Target, current_target, get_target
from sketch.hardware import HardwareParams
from sketch.layout_rewrite import check_positions
from sketch.search_params import SearchParams

from .task_records import NoRecordError, best_of_task, describe_missing
from .tuning import TuneResult, TuningOptions, tune_task

# The zero-trial pick's search: twice the generations of a tuning round. A pick has no
# measurement to correct it, so it should be the model's maximum, not a local one: on layer_norm
# 1024x1024 (seeds 1-6) four generations stopped at model scores 0.775-0.831 and eight reached
# 0.803-0.839; the 0.775 pick ran 2.5x slower than the tuned best.
GUESS_SEARCH = SearchParams(num_generations=8)
# The zero-trial pick of a whole network's untuned tasks (``compile_network(untuned="guess")``
# passes it to ``best_guess``): a smaller population and two generations, because compile time
# grows with every untuned task and the model's pick changes little beyond it. The one other
# setting of the guess; a single task's ``best_guess`` uses ``GUESS_SEARCH``.
NETWORK_GUESS_SEARCH = SearchParams(population_size=512, num_generations=2)

if TYPE_CHECKING:
    from cost_model.cost_model import CostModel
    from sketch.loop_state import State


class SearchTask:
    """A computation to tune: ``compute_dag``, ``workload_key``, a readable ``desc``."""

    def __init__(self, func: Callable[..., Sequence[Tensor]] | str | None = None,
                 args: Sequence[Any] = (), tensors: Sequence[Tensor] | ComputeDAG | None = None,
                 desc: str | None = None, hardware_params: HardwareParams | None = None,
                 layout_rewrite_inputs: Sequence[int] = (), target: "str | Target | None" = None):
        if hardware_params is not None and not isinstance(hardware_params, HardwareParams):
            raise TypeError("SearchTask hardware_params must be a sketch.hardware.HardwareParams, "
                            f"got {type(hardware_params).__name__}")
        if (func is None) == (tensors is None):
            both = ", not both" if func is not None else ""
            raise ValueError("SearchTask needs either func (a registered workload function or its "
                             f"name) with args, or tensors{both}")
        if desc is not None:
            check_desc(desc, "SearchTask desc")  # printed in logs and tables: no control characters
        self.workload_name: str | None = None
        self.args: tuple = ()
        if func is not None:
            if isinstance(func, str):
                get_workload_func(func)  # KeyError listing the registered names
                name = func
            elif callable(func):
                found = registered_name(func)
                if found is None:
                    raise ValueError(
                        f"workload function {getattr(func, '__qualname__', func)!r} is not "
                        "registered: decorate it with @register_workload (from "
                        "compute.workload_registry) so that records can name it, or pass "
                        "SearchTask(tensors=...) to store the whole computation in each record")
                name = found
            else:
                raise TypeError(f"SearchTask func must be a workload function or its registered "
                                f"name, got {type(func).__name__}")
            self.workload_name = name
            self.args = canonical_args(args, f"{name} arguments")
            tensors = make_workload(name, self.args)
        elif args:
            raise ValueError("SearchTask args go with func; a tensors-based task takes no args")
        assert tensors is not None
        self.compute_dag: ComputeDAG = (tensors if isinstance(tensors, ComputeDAG)
                                        else ComputeDAG(tensors))
        self._desc = desc
        self._hardware_params = hardware_params
        self._derived_hardware = False  # hardware_params read from the target, not given
        # The CPU candidates are built for (``measure.targets``), checked now; None: the current
        # one when asked (so a task made only to read records starts no LLVM).
        self._target: Target | None = None if target is None else get_target(target)
        self.layout_rewrite_inputs: tuple[int, ...] = _check_rewrite_inputs(
            self.compute_dag, layout_rewrite_inputs, "SearchTask layout_rewrite_inputs")

    @property
    def layout_rewrite(self) -> bool:
        """Whether candidates that pack a constant input are measured with the pack outside."""
        return bool(self.layout_rewrite_inputs)

    @property
    def target(self) -> Target:
        """The CPU this task's candidates are built for: the one given
        (``SearchTask(..., target="x86-64-v3")``), else the current one (``native``, the host,
        unless in a ``measure.targets.use_target`` block, as ``compile_network(target=...)``
        makes). Its records are this target's: a best record is chosen among them only
        (``ansor.task_records``)."""
        return self._target if self._target is not None else current_target()

    @target.setter
    def target(self, target: "str | Target") -> None:
        """Build this task's candidates for ``target`` (a network's tasks, made by the planner,
        are given the target of the run); hardware parameters derived before follow it."""
        self._target = get_target(target)
        if self._hardware_params is not None and self._derived_hardware:
            self._hardware_params = None

    @property
    def target_name(self) -> str:
        return self.target.name

    @property
    def hardware_params(self) -> HardwareParams:
        """The machine this task is searched for: the one given, else this host's for the task's
        target (read on first use, so a task made only to read records starts no LLVM and reads
        no environment)."""
        if self._hardware_params is None:
            self._hardware_params = host_hardware_params(self.target)
            self._derived_hardware = True
        return self._hardware_params

    # ---- identity ----------------------------------------------------------------------------
    @property
    def workload_key(self) -> str:
        return self.compute_dag.workload_key

    @property
    def desc(self) -> str:
        if self._desc is not None:
            return self._desc
        if self.workload_name is not None:
            return workload_desc(self.workload_name, self.args)
        return _dag_desc(self.compute_dag)

    @property
    def flop_count(self) -> float:
        return self.compute_dag.flop_count

    def __repr__(self) -> str:
        return f"SearchTask({self.desc}, key={self.workload_key[:8]})"

    # ---- serialisation -----------------------------------------------------------------------
    def to_json(self) -> dict:
        """``{"workload": name, "args": [...]}`` for a registered workload, else
        ``{"dag": <ComputeDAG.to_json()>, "desc": ...}``."""
        if self.workload_name is not None:
            out: dict = {"workload": self.workload_name, "args": args_to_json(self.args)}
            if self._desc is not None:
                out["desc"] = self._desc
        else:
            out = {"dag": self.compute_dag.to_json(), "desc": self.desc}
        if self.layout_rewrite_inputs:
            out["layout_rewrite"] = list(self.layout_rewrite_inputs)
        return out

    @classmethod
    def from_json(cls, data: dict) -> "SearchTask":
        """Rebuild a task from ``to_json()``'s output. KeyError if it names a workload not
        registered in this process; ValueError/TypeError if the description is malformed;
        ``OutOfBoundsError`` if its computation reads out of range: this is how every reader
        of records gets a task, and a compiled kernel does not check its indices."""
        if not isinstance(data, dict):
            raise TypeError(f"task description must be a dict, got {type(data).__name__}")
        desc = data.get("desc")
        if desc is not None:
            check_desc(desc, "task.desc")
        rewrite = data.get("layout_rewrite", [])
        if not isinstance(rewrite, list):
            # Checked against the DAG's arguments by the constructor.
            raise ValueError("task description: layout_rewrite must be a list of argument "
                             f"positions, got {type(rewrite).__name__}")
        if "workload" in data:
            name, args = data["workload"], data.get("args", [])
            if not isinstance(name, str) or not isinstance(args, list):
                raise ValueError("task description: workload must be a name and args a list")
            # Looked up in the registry only, never imported or evaluated; checked first so a
            # hostile name is reported as such rather than echoed in a list of registered ones.
            check_name(name, "task.workload")
            task = cls(func=name, args=args, desc=desc)
        elif "dag" in data:
            task = cls(tensors=ComputeDAG.from_json(data["dag"]), desc=desc)
        else:
            raise ValueError("task description has neither 'workload' nor 'dag'")
        task.layout_rewrite_inputs = _check_rewrite_inputs(task.compute_dag, rewrite, "task.layout_rewrite")
        task.compute_dag.check_bounds()  # once per computation and process (cached)
        return task

    # ---- using tuning results ----------------------------------------------------------------
    def apply_best(self, log_file: str | os.PathLike) -> "State":
        """The schedule of this task's best valid record in ``log_file``, replayed on this task's
        DAG (ready for ``ansor.build``).

        Raises ``NoRecordError`` (``ansor.records``, ``ansor.task_records``) (a LookupError) explaining what the log holds
        instead - e.g. records of the same workload with other arguments - when there is none.
        """
        best = best_of_task(log_file, self)
        if best is None:
            raise NoRecordError(describe_missing(log_file, self))
        return best[0].state

    # ---- tuning ------------------------------------------------------------------------------
    def tune(self, options: TuningOptions | None = None, cost_model: "CostModel | None" = None,
             search_policy: Any | None = None) -> TuneResult:
        """Search for a fast schedule of this task by measuring candidates on this machine.

        ``options`` (``ansor.TuningOptions``) sets the trial budget, the log file (appended after
        every round, resumed from if it exists), early stopping, verbosity, builder, runner and
        seed. ``cost_model`` defaults to ``ansor.tuning.default_cost_model(options.seed)``;
        ``search_policy`` (anything with ``generate_measure_candidates(num, measured_keys,
        best_states)``) defaults to ``sketch.search_policy.SketchPolicy`` over that model; with a
        given policy, measurements update ``cost_model`` if given, else the policy's own
        ``cost_model`` attribute. Ctrl-C ends the run cleanly with the log intact; the result then
        says so (``interrupted``).
        """
        return tune_task(self, options, cost_model, search_policy)

    def best_guess(self, cost_model: "CostModel | None" = None, search_params: Any | None = None,
                   seed: int = 0) -> "State":
        """A schedule without measuring anything: the state the cost model ranks first after one
        search (sampling and ``GUESS_SEARCH``'s generations of evolution), which lowers.

        ``cost_model`` defaults to the pre-trained model shipped in the package
        (``ansor costmodel info``); ValueError if there is none to guess with (an untrained
        model would pick at random). ``search_params``: the search's ``SearchParams`` (default
        ``GUESS_SEARCH``; e.g. a smaller ``population_size`` for a faster guess). Deterministic
        for a given seed.
        """
        from sketch.search_policy import SketchPolicy  # noqa: PLC0415 - looked up per call: tests substitute it

        from .tuning import default_cost_model  # noqa: PLC0415

        model = cost_model if cost_model is not None else default_cost_model(seed)
        if isinstance(model, LGBModel) and model.booster is None and model.base_booster is None:
            raise ValueError(f"best_guess of {self.desc}: the cost model is untrained (no pre-trained "
                             "model: ANSOR_PRETRAINED_MODEL=none or a package without one); give a "
                             "trained cost_model, or tune the task")
        params = search_params if search_params is not None else GUESS_SEARCH
        policy = SketchPolicy(self, model, params=params, seed=seed)
        policy.params = dataclasses.replace(policy.params, eps_greedy=0.0)  # the model's pick only
        found = policy.generate_measure_candidates(1, frozenset(), [])
        if not found:
            raise ValueError(f"best_guess of {self.desc}: the search found no schedule that lowers")
        return found[0]


def _check_rewrite_inputs(dag: ComputeDAG, positions: Sequence[int], what: str) -> tuple[int, ...]:
    """``positions`` as sorted distinct argument positions of ``dag``'s inputs (placeholders);
    TypeError/ValueError naming ``what`` otherwise (a record's field is untrusted)."""
    out = check_positions(positions, len(dag.tensors), what)
    for p in out:
        if isinstance(dag.tensors[p].op, ComputeOp):
            raise ValueError(f"{what}: argument {p} ({dag.tensors[p].name}) is an output, not an input")
    return out


def _dag_desc(dag: ComputeDAG) -> str:
    """``C(A[17x9], B[9x7])``: outputs named after the inputs they are computed from."""
    def shape(t: Tensor) -> str:
        return "x".join(str(n) for n in t.shape)

    outs = [t for t in dag.tensors if isinstance(t.op, ComputeOp)]
    ins = [t for t in dag.tensors if not isinstance(t.op, ComputeOp)]
    return (", ".join(f"{t.name}[{shape(t)}]" for t in outs) + "("
            + ", ".join(f"{t.name}[{shape(t)}]" for t in ins) + ")")
