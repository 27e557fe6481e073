"""One LLVM module as text: target header, the thread-count global, declarations, the functions
emitted into it, the math library's definitions, the attribute group and loop metadata."""
from __future__ import annotations

from .. import intrinsics as I
from .. import target
from .names import NUM_THREADS_GLOBAL
from .workspace import Workspaces


class _Module:
    def __init__(self, name: str):
        self.name = name
        self.triple = target.host_triple()
        self.datalayout = target.data_layout()
        self.attr_group = "#0"
        # The current target's CPU; a named CPU's own features come with its name, so only
        # ``native`` spells its (the host's) feature string out.
        t = target.current_target()
        self.attrs = f'nounwind "target-cpu"="{t.cpu}"' + (
            f' "target-features"="{t.features}"' if t.features else "")
        self.math = I.MathLibrary(self.attr_group)
        self.functions: list[str] = []
        self.decls: dict[str, str] = {}
        self.metadata: list[str] = []
        self._md = 0
        self._par = 0
        self.workspaces = Workspaces()

    def declare(self, sym: str, text: str) -> None:
        self.decls.setdefault(sym, text)

    def loop_md(self, *props: str) -> str:
        """A distinct loop-id node carrying ``props`` (e.g. '!"llvm.loop.unroll.full"')."""
        ids = []
        for p in props:
            self._md += 1
            self.metadata.append(f"!{self._md} = !{{{p}}}")
            ids.append(f"!{self._md}")
        self._md += 1
        me = f"!{self._md}"
        self.metadata.append(f"{me} = distinct !{{{me}{''.join(', ' + i for i in ids)}}}")
        return me

    def next_parallel_id(self) -> int:
        self._par += 1
        return self._par

    def text(self) -> str:
        out = [f"; ModuleID = '{self.name}'",
               f'target datalayout = "{self.datalayout}"',
               f'target triple = "{self.triple}"', "",
               f"@{NUM_THREADS_GLOBAL} = global i32 0, align 4", ""]
        out += list(self.decls.values())
        out.append("")
        out += self.functions
        out += self.workspaces.definitions(self.attr_group)
        out.append(self.math.definitions())
        out.append(f"attributes {self.attr_group} = {{ {self.attrs} }}")
        out += self.metadata
        return "\n".join(out) + "\n"
