"""The layouts sidecar file ``LOG.layouts.jsonl`` beside a tuning log: measured layout-transform
costs (so a later run measures only what is missing), the layouts chosen per network and the
pairs of groups chosen to run as one kernel per network (``two_anchor``), one JSON object a line,
appended as they are made (``layout_tuning`` and ``network_choice`` write it and read it).

It is untrusted input like a record file: every line is validated on load (kind, shapes, layout
names, finite non-negative seconds) and a bad one is refused with an error naming the file and
line; nothing in it is executed. Transform costs measured on another toolchain, or timed in
another cache mode than the run's (``measure.runner``; an entry without ``cache`` was warm), are
ignored.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compute.errors import InputError
from measure.measure import WARM, check_cache_mode
from measure.target import toolchain_key

from .ir import DTYPES
from .layouts import LayoutError, activation_layout, physical_shape

SIDECAR_SUFFIX = ".layouts.jsonl"
MAX_LINE_CHARS = 1 << 20
MAX_DIM = 1 << 24
FORMAT_VERSION = 1


class LayoutFileError(InputError):
    """A line of a layouts sidecar file that is not a valid entry (names file and line)."""


@dataclass(frozen=True)
class TransformKey:
    """One layout transform: an activation of NHWC ``shape`` and ``dtype`` from ``src`` to ``dst``."""

    shape: tuple[int, ...]
    dtype: str
    src: str
    dst: str

    def desc(self) -> str:
        return f"layout_transform {self.src}->{self.dst} {'x'.join(map(str, self.shape))}"


def sidecar_path(log_file: str | os.PathLike) -> Path:
    """``LOG.layouts.jsonl``: where transform costs and chosen layouts of ``log_file`` live."""
    return Path(os.fspath(log_file) + SIDECAR_SUFFIX)


def _bad(path: Path, lineno: int, msg: str) -> LayoutFileError:
    return LayoutFileError(f"{path}:{lineno}: {msg}")


def _layout_name(v: Any, what: str, path: Path, lineno: int) -> str:
    """``v`` if it names a layout; LayoutFileError naming ``what``, the file and line otherwise."""
    if not isinstance(v, str):
        raise _bad(path, lineno, f"{what} must be a layout name string, got {v!r:.60}")
    try:
        activation_layout(v)  # a layout or a variant (winograd4); a transform's is checked further
    except LayoutError as e:
        raise _bad(path, lineno, f"{what}: {e}") from None
    return v


def _layout_field(entry: dict, name: str, path: Path, lineno: int) -> str:
    return _layout_name(entry.get(name), repr(name), path, lineno)


def _parse_transform(entry: dict, path: Path, lineno: int) -> tuple[TransformKey, float, str] | None:
    shape = entry.get("shape")
    if (not isinstance(shape, list) or len(shape) != 4
            or not all(type(d) is int and 1 <= d <= MAX_DIM for d in shape)):
        raise _bad(path, lineno, f"'shape' must be 4 integers in [1, {MAX_DIM}], got {shape!r:.80}")
    dtype = entry.get("dtype")
    if dtype not in DTYPES:
        raise _bad(path, lineno, f"'dtype' must be one of {', '.join(DTYPES)}, got {dtype!r:.40}")
    src, dst = (_layout_field(entry, f, path, lineno) for f in ("src", "dst"))
    if src == dst:
        raise _bad(path, lineno, f"a transform from {src} to itself")
    for lay in (src, dst):
        try:
            physical_shape(shape, lay)
        except LayoutError as e:
            raise _bad(path, lineno, str(e)) from None
    sec = entry.get("seconds")
    if type(sec) not in (int, float) or not math.isfinite(sec) or sec < 0:
        raise _bad(path, lineno, f"'seconds' must be a finite number >= 0, got {sec!r:.40}")
    target = entry.get("target")
    if not isinstance(target, str):
        raise _bad(path, lineno, f"'target' must be a toolchain key string, got {target!r:.40}")
    if target != toolchain_key():
        return None  # measured on another machine: not a cost here
    try:
        mode = check_cache_mode("'cache'", entry.get("cache", WARM))
    except ValueError as e:
        raise _bad(path, lineno, str(e)) from None
    return TransformKey(tuple(shape), dtype, src, dst), float(sec), mode


def _parse_choice(entry: dict, path: Path, lineno: int) -> tuple[str, tuple[str, ...]]:
    net = entry.get("network")
    if not isinstance(net, str) or not (1 <= len(net) <= 64) or not net.isalnum():
        raise _bad(path, lineno, f"'network' must be a network key (hex digits), got {net!r:.70}")
    lays = entry.get("layouts")
    if not isinstance(lays, list) or not lays:
        raise _bad(path, lineno, "'layouts' must be a non-empty list of layout names")
    return net, tuple(_layout_name(lay, f"layouts[{k}]", path, lineno) for k, lay in enumerate(lays))


MAX_PAIRS = 1 << 16


def _parse_pairs(entry: dict, path: Path, lineno: int) -> tuple[str, tuple[tuple[int, int], ...]]:
    net = entry.get("network")
    if not isinstance(net, str) or not (1 <= len(net) <= 64) or not net.isalnum():
        raise _bad(path, lineno, f"'network' must be a network key (hex digits), got {net!r:.70}")
    pairs = entry.get("pairs")
    if not isinstance(pairs, list) or len(pairs) > MAX_PAIRS or not all(
            isinstance(q, list) and len(q) == 2 and all(type(i) is int and 0 <= i < MAX_DIM for i in q)
            for q in pairs):
        raise _bad(path, lineno, "'pairs' must be a list of [producer, consumer] group indices")
    return net, tuple((q[0], q[1]) for q in pairs)


def read_pair_choices(path: str | os.PathLike) -> dict[str, tuple[tuple[tuple[int, int], ...], int]]:
    """Per network key, the pairs of groups (producer, consumer indices) last chosen to run as
    one kernel, with the line they are on (later lines win); empty for a missing file."""
    return _read(Path(path), None)[2]


def read_sidecar(path: str | os.PathLike, cache: str | None = None
                 ) -> tuple[dict[TransformKey, float], dict[str, tuple[tuple[str, ...], int]]]:
    """Transform costs measured with this toolchain (timed in mode ``cache`` if given), and per
    network key the chosen layouts with the line they are on (later lines win).
    ``LayoutFileError`` names the file and line of the first bad entry."""
    costs, choices, _ = _read(Path(path), cache)
    return costs, choices


def _read(p: Path, cache: str | None) -> tuple[dict, dict, dict]:
    costs: dict[TransformKey, float] = {}
    choices: dict[str, tuple[tuple[str, ...], int]] = {}
    pairs: dict[str, tuple[tuple[tuple[int, int], ...], int]] = {}
    try:
        f = p.open("r", encoding="utf-8", errors="strict")
    except FileNotFoundError:
        return costs, choices, pairs
    with f:
        lineno = 0
        while True:
            try:
                line = f.readline(MAX_LINE_CHARS + 1)
            except UnicodeDecodeError as e:
                raise _bad(p, lineno + 1, f"not UTF-8 text ({e.reason})") from None
            if not line:
                break
            lineno += 1
            if len(line) > MAX_LINE_CHARS:
                raise _bad(p, lineno, f"line longer than {MAX_LINE_CHARS} characters")
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except (json.JSONDecodeError, RecursionError) as e:
                raise _bad(p, lineno, f"not JSON ({e})") from None
            if not isinstance(entry, dict):
                raise _bad(p, lineno, "an entry must be a JSON object")
            if type(entry.get("version")) is not int or entry["version"] != FORMAT_VERSION:
                raise _bad(p, lineno, f"'version' must be {FORMAT_VERSION}, got {entry.get('version')!r:.20}")
            kind = entry.get("kind")
            if kind == "transform":
                parsed = _parse_transform(entry, p, lineno)
                if parsed is not None and cache in (None, parsed[2]):
                    costs[parsed[0]] = parsed[1]
            elif kind == "choice":
                net, lays = _parse_choice(entry, p, lineno)
                choices[net] = (lays, lineno)
            elif kind == "pairs":
                net, chosen = _parse_pairs(entry, p, lineno)
                pairs[net] = (chosen, lineno)
            else:
                raise _bad(p, lineno, f"unknown 'kind' {kind!r:.40} (expected 'transform', 'choice' or 'pairs')")
    return costs, choices, pairs


def append_entries(path: Path, entries: Sequence[dict]) -> None:
    with path.open("a", encoding="utf-8") as f:
        for e in entries:
            f.write(json.dumps({"version": FORMAT_VERSION, **e}, allow_nan=False) + "\n")


def write_transform_costs(path: str | os.PathLike, costs: dict[TransformKey, float],
                          cache: str = WARM) -> None:
    """Append transform costs timed ``cache`` (finite ones; a failed build is not cached)."""
    mode = {} if check_cache_mode("cache", cache) == WARM else {"cache": cache}
    append_entries(Path(path), [{"kind": "transform", "shape": list(k.shape), "dtype": k.dtype, "src": k.src,
                          "dst": k.dst, "seconds": c, "target": toolchain_key(), **mode}
                         for k, c in costs.items() if math.isfinite(c)])
