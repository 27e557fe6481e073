"""The readable loop structure of a State (what ``str(state)`` prints), TVM style.

One line per loop, the computation at the innermost level, with the extents bound inference gives
when the state lowers (the iterators' own extents otherwise). Apart from lowering, which it only
asks for those extents.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .lower import inferred_extents
from .stage import InvalidStepError

if TYPE_CHECKING:
    from .loop_state import State  # annotations only: loop_state imports this module


def state_str(state: State) -> str:
    """The loop structure, TVM style: one line per loop, the computation at the innermost level."""
    stages = state.stages
    attached: dict[tuple[int, int], list[int]] = {}
    for k, s in enumerate(stages):
        if s.compute_at == "iter" and s.attach is not None:
            attached.setdefault(tuple(s.attach), []).append(k)  # type: ignore[arg-type]
    # Extents after bound inference (what the loops really run), when the state lowers at all.
    try:
        extents = inferred_extents(state)
    except InvalidStepError:
        extents = {}
    lines = []
    ph = [s.name for s in stages if s.is_placeholder]
    if ph:
        lines.append("Placeholder: " + ", ".join(ph))

    def emit(k: int, depth: int) -> None:
        s = stages[k]
        for lid in s.leaves:
            it = s.iters[lid]
            kw = {"none": "for", "parallel": "parallel", "vectorize": "vectorize", "unroll": "unroll"}[it.annotation]
            ext = extents[k][lid] if k in extents else it.extent
            lines.append("  " * depth + f"{kw} {it.name} (0,{ext})")
            depth += 1
            if s.auto_unroll_max_step and lid == s.leaves[0]:
                lines.append("  " * depth + f"pragma auto_unroll_max_step={s.auto_unroll_max_step}")
            for a in attached.get((k, lid), []):
                emit(a, depth)
        lines.append("  " * depth + f"{s.name} = ...")

    for k, s in enumerate(stages):
        if s.is_placeholder or s.compute_at != "root":
            continue
        emit(k, 0)
    inl = [s.name for s in stages if s.compute_at == "inline"]
    if inl:
        lines.append("Inlined: " + ", ".join(inl))
    return "\n".join(lines)
