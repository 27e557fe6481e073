"""The estimated latency of a network as it will be compiled: the sum, over the kernels the plan
runs, of each kernel's best recorded cost.

The task scheduler's own estimate (sum over its tasks of weight x best cost) is the network's
only when the tasks are exactly the network's kernels. With ``--fuse-pairs`` the scheduler also
tunes a fused task beside the two separate ones it replaces, and with ``--layout-tuning`` /
``--winograd`` several variants of each group, so its sum counts work the compiled network never
does. This reads the plan the compile runs (pairs fused, layouts chosen: ``NetworkPlan``), takes
each occurrence's task and its best record from the log (network mode first, as the compile
chooses: ``records.best_records``), and sums one cost per occurrence. Steps that are not tasks
(injective-only groups, layout transforms) have no record: they are counted, not costed, and the
caller says so beside the figure.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..records import best_records
from .plan import NetworkPlan, is_view


@dataclass(frozen=True)
class NetworkEstimate:
    """``seconds``: the sum of the costed kernels (None when a task has no record);
    ``kernels``: occurrences that are tasks; ``missing``: task descriptions without a record;
    ``uncosted``: occurrences that are not tasks and run a kernel (element-wise only, their time
    not counted; a reshape alone is a view and runs none);
    ``modes``: timing mode of the records used -> occurrences costed with it."""

    seconds: float | None
    kernels: int
    missing: tuple[str, ...]
    uncosted: int
    modes: dict[str, int]

    def describe(self) -> str:
        """One line for a report: the figure and what it covers."""
        if self.seconds is None:
            return (f"- ({len(self.missing)} of the network's tasks without a record: "
                    + ", ".join(self.missing[:3]) + (" ..." if len(self.missing) > 3 else "") + ")")
        modes = ", ".join(f"{n} {m}" for m, n in sorted(self.modes.items()))
        return (f"{self.seconds * 1e3:.3f} ms (the compiled network's {self.kernels} kernel(s), each its best "
                f"record: {modes}" + (f"; {self.uncosted} element-wise step(s) not costed" if self.uncosted else "")
                + ")")


def estimate_network(plan: NetworkPlan, log_file: str | os.PathLike) -> NetworkEstimate:
    """The estimate of ``plan`` (the groups, pairs and layouts the compile runs) from
    ``log_file``'s best records."""
    bests = best_records(log_file, list(plan.tasks)) if plan.tasks else []
    total = 0.0
    missing: list[str] = []
    modes: dict[str, int] = {}
    for i in range(len(plan.occurrences)):
        ti = plan.task_of.get(i)
        if ti is None:
            continue
        best = bests[ti]
        if best is None:
            if plan.tasks[ti].desc not in missing:
                missing.append(plan.tasks[ti].desc)
            continue
        total += float(best[1].mean_cost)
        mode = best[1].cache or "warm"
        modes[mode] = modes.get(mode, 0) + 1
    kernels = len(plan.task_of)
    views = sum(1 for i in range(len(plan.occurrences)) if i not in plan.task_of and is_view(plan, i))
    return NetworkEstimate(None if missing else total, kernels, tuple(missing),
                           len(plan.occurrences) - kernels - views, modes)
