"""Reading a saved cost-model file, which is untrusted input: every field is checked here before
LightGBM sees any of it, and LightGBM parses a model text rebuilt from the checked fields.

Why: LightGBM trusts its model text. A feature, child or leaf index out of range is a read
outside an array (a segfault), a child pointing back up the tree loops forever in ``predict``, an
array shorter than ``num_leaves`` or a wrong ``tree_sizes`` throws inside an OpenMP region (an
abort), ``num_tree_per_iteration=0`` divides by zero. So the text is parsed here as LightGBM
would (a ``key=value`` header, ``Tree=i`` blocks of ``key=value`` lines, ``end of trees``) and
checked against what LightGBM assumes: arrays of the right length, children forming one tree
over all nodes and leaves, feature indices inside this version's feature schema, finite numbers,
numerical splits only. The text LightGBM then parses is written here from the checked tokens,
with ``tree_sizes`` recomputed, so no line it would read differently from us ever reaches it.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any

from compute.errors import InputError
from compute.memory import check_bytes

from .feature import FEATURE_NAMES, FEATURE_VERSION, NUM_FEATURES
from .provenance import check_provenance

MODEL_FORMAT = "ansor-py-lgbm-1"

MAX_FILE_BYTES = 64 << 20  # ~90x the shipped model (0.7 MB for 200 trees of 31 leaves)
MAX_BOOSTERS = 8  # a saved model holds 1 (trained once) or 2 (loaded, then trained on) texts
MAX_TREES = 10_000  # per booster: 50x the default num_boost_round
MAX_LEAVES = 131_072  # per tree: LightGBM's own bound on num_leaves
# The trees' depths added up: the nodes one prediction may walk. The shipped model's are at most
# 6,000; this allows 10,000 trees 50 deep, and refuses chains of 131,072 leaves that would make
# every prediction of a search round take minutes.
MAX_DEPTH_SUM = 500_000
PARSE_BYTES_PER_BYTE = 10  # peak memory of reading a file, per byte of it (JSON, tokens, trees)

_INT = r"-?[0-9]{1,10}"
_FLOAT = r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]{1,3})?"
_INTS = re.compile(rf"(?:{_INT}(?: {_INT})*)?")
_FLOATS = re.compile(rf"(?:{_FLOAT}(?: {_FLOAT})*)?")
_INFO = re.compile(rf"none|\[(?:{_FLOAT}|-?inf):(?:{_FLOAT}|-?inf)\]")
_INT32 = 2 ** 31

# Tree fields, in the order LightGBM writes them: (per leaf? else per internal node, int?).
_ARRAYS = {
    "split_feature": (False, True), "split_gain": (False, False), "threshold": (False, False),
    "decision_type": (False, True), "left_child": (False, True), "right_child": (False, True),
    "leaf_value": (True, False), "leaf_weight": (True, False), "leaf_count": (True, True),
    "internal_value": (False, False), "internal_weight": (False, False),
    "internal_count": (False, True),
}
_NEEDED_SPLITS = ("split_feature", "threshold", "left_child", "right_child")
_SCALARS = ("num_leaves", "num_cat", "is_linear", "shrinkage")
# decision_type bits: 1 categorical (refused: our features are numbers), 2 default-left,
# 4-12 the missing-value type (0 none, 1 zero, 2 NaN; 3 does not exist).
_DECISION_TYPES = frozenset({0, 2, 4, 6, 8, 10})
_HEADER = ("version", "num_class", "num_tree_per_iteration", "label_index", "max_feature_idx",
           "feature_names", "feature_infos", "tree_sizes")


class CostModelFileError(InputError):
    """A cost-model file that is not one ``LGBModel.save`` could have written: the message names
    the file, the booster and tree, and the field."""


@dataclass(frozen=True)
class ModelFile:
    """A checked model file: ``params`` as stored (``LGBModel.load`` checks their types),
    ``boosters`` the rebuilt LightGBM texts, ``provenance`` checked field by field."""

    path: str
    params: dict
    boosters: list[str]
    provenance: dict


def lgb_feature_names() -> list[str]:
    """The feature names as LightGBM stores them (it forbids some characters, such as '.')."""
    return [n.replace(".", "_") for n in FEATURE_NAMES]


def read_model_file(path: str | os.PathLike) -> ModelFile:
    """The file at ``path`` checked completely (see the module docstring); CostModelFileError
    naming the file and the field otherwise. OSError if it cannot be read."""
    path = os.fspath(path)
    size = os.stat(path).st_size
    if size > MAX_FILE_BYTES:
        raise CostModelFileError(f"{path}: {size / 2 ** 20:.0f} MiB; a cost-model file may be at "
                                 f"most {MAX_FILE_BYTES >> 20} MiB")
    check_bytes(size * PARSE_BYTES_PER_BYTE, f"reading the cost-model file {path}")
    with open(path, "rb") as f:
        raw = f.read(MAX_FILE_BYTES + 1)
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        raise CostModelFileError(f"{path}: not a saved cost model (not JSON: {str(e)[:120]})") from None
    if not isinstance(doc, dict) or doc.get("format") != MODEL_FORMAT:
        got = doc.get("format") if isinstance(doc, dict) else None
        raise CostModelFileError(f"{path}: not a saved ansor-py cost model (format "
                                 f"{_shown(got)}, expected {MODEL_FORMAT!r})")
    if doc.get("feature_version") != FEATURE_VERSION:
        raise CostModelFileError(f"{path}: saved with features {_shown(doc.get('feature_version'))}, "
                                 f"this version computes {FEATURE_VERSION!r}; retrain it "
                                 "(update_from_file on the logs)")
    if "feature_names" in doc and doc["feature_names"] != FEATURE_NAMES:
        raise CostModelFileError(f"{path}: 'feature_names' are not the {NUM_FEATURES} features of "
                                 f"{FEATURE_VERSION}")
    params = doc.get("params", {})
    if not isinstance(params, dict):
        raise CostModelFileError(f"{path}: 'params' must be an object")
    parts = doc.get("boosters")
    if (not isinstance(parts, list) or not 1 <= len(parts) <= MAX_BOOSTERS
            or not all(isinstance(p, str) for p in parts)):
        raise CostModelFileError(f"{path}: 'boosters' must be a non-empty list of at most "
                                 f"{MAX_BOOSTERS} LightGBM model texts")
    boosters = [rebuild_model_text(p, f"{path}: boosters[{i}]") for i, p in enumerate(parts)]
    try:
        provenance = check_provenance(doc.get("provenance", {}), path)
    except ValueError as e:  # its message names the file and the field
        raise CostModelFileError(str(e)) from None
    return ModelFile(path, params, boosters, provenance)


def rebuild_model_text(text: str, where: str) -> str:
    """The LightGBM model text ``text`` checked against everything LightGBM trusts, written
    again from the checked tokens (``tree_sizes`` recomputed; feature importances, parameters
    and anything after ``end of trees`` dropped: predicting never reads them). ``where`` starts
    every error message."""
    if not text.isascii() or any(c in text for c in "\r\0"):
        raise CostModelFileError(f"{where}: not a LightGBM model text (non-ASCII, CR or NUL characters)")
    lines = text.split("\n")
    if lines[0] != "tree":
        raise CostModelFileError(f"{where}: not a LightGBM model text (first line {_shown(lines[0][:40])}, "
                                 "expected 'tree')")
    header, i = _fields(lines, 1, where, "the header", in_tree=False)
    _check_header(header, where)
    trees: list[str] = []
    depths = 0
    while i < len(lines) and lines[i].startswith("Tree="):
        if lines[i] != f"Tree={len(trees)}":
            raise CostModelFileError(f"{where}: {_shown(lines[i][:40])} where 'Tree={len(trees)}' belongs")
        if len(trees) == MAX_TREES:
            raise CostModelFileError(f"{where}: more than {MAX_TREES} trees")
        name = lines[i]
        fields, i = _fields(lines, i + 1, where, name, in_tree=True)
        tree, depth = _check_tree(fields, f"{where}, {name}")
        trees.append(f"{name}\n{tree}\n")
        depths += depth
        if depths > MAX_DEPTH_SUM:
            raise CostModelFileError(f"{where}: the depths of the trees up to {name} add up to "
                                     f"{depths}, more than {MAX_DEPTH_SUM} (the nodes one prediction "
                                     "walks)")
        while i < len(lines) and lines[i] == "":
            i += 1
    if i >= len(lines) or lines[i] != "end of trees":
        got = "the end of the text" if i >= len(lines) else _shown(lines[i][:40])
        raise CostModelFileError(f"{where}: truncated or damaged: {got} after {len(trees)} tree(s), "
                                 "expected 'Tree=N' or 'end of trees'")
    if not trees:
        raise CostModelFileError(f"{where}: no trees")
    head = ["tree", "version=v4", "num_class=1", "num_tree_per_iteration=1", "label_index=0",
            f"max_feature_idx={NUM_FEATURES - 1}", "feature_names=" + header["feature_names"],
            "feature_infos=" + header["feature_infos"],
            "tree_sizes=" + " ".join(str(len(t)) for t in trees), "", ""]
    return "\n".join(head) + "".join(trees) + "end of trees\n\npandas_categorical:null\n"


def _fields(lines: list[str], i: int, where: str, what: str, in_tree: bool
            ) -> tuple[dict[str, str], int]:
    """The ``key=value`` lines from ``lines[i]`` on, up to a blank line in a tree, or up to the
    first tree (blank lines skipped) in the header; refuses duplicates and lines without '='."""
    out: dict[str, str] = {}
    while i < len(lines):
        line = lines[i]
        if (line == "") if in_tree else (line.startswith("Tree=") or line == "end of trees"):
            break
        if line == "":
            i += 1
            continue
        key, eq, value = line.partition("=")
        if not eq or not key:
            raise CostModelFileError(f"{where}, {what}: line {_shown(line[:40])} is not key=value")
        if key in out:
            raise CostModelFileError(f"{where}, {what}: {_shown(key[:40])} given twice")
        out[key] = value
        i += 1
    return out, i


def _check_header(h: dict[str, str], where: str) -> None:
    unknown = [k for k in h if k not in _HEADER]
    if unknown:  # objective, average_output, monotone_constraints: not what LGBModel trains
        raise CostModelFileError(f"{where}: header field {_shown(unknown[0][:40])} is not one an "
                                 "ansor-py model has")
    for key, want in (("num_class", 1), ("num_tree_per_iteration", 1),
                      ("max_feature_idx", NUM_FEATURES - 1)):
        if h.get(key) != str(want):
            raise CostModelFileError(f"{where}: header {key}={_shown(h.get(key, '(missing)')[:20])}, "
                                     f"expected {want} ({NUM_FEATURES} features, one output)")
    names = h.get("feature_names", "").split(" ")
    if names != lgb_feature_names():
        raise CostModelFileError(f"{where}: header feature_names are not the {NUM_FEATURES} "
                                 f"features of {FEATURE_VERSION}")
    infos = h.get("feature_infos", "").split(" ")
    if len(infos) != NUM_FEATURES or not all(_INFO.fullmatch(t) for t in infos):
        raise CostModelFileError(f"{where}: header feature_infos must be {NUM_FEATURES} "
                                 "'[min:max]' or 'none' entries")


def _check_tree(f: dict[str, str], where: str) -> tuple[str, int]:
    """The checked tree's lines (without its ``Tree=`` line), as LightGBM writes them, and its
    depth."""
    unknown = [k for k in f if k not in _ARRAYS and k not in _SCALARS]
    if unknown:  # cat_boundaries, leaf_coeff, ...: categorical splits and linear trees
        raise CostModelFileError(f"{where}: field {_shown(unknown[0][:40])} is not one an ansor-py "
                                 "model has (categorical splits and linear trees are refused)")
    for key in ("num_leaves", "num_cat", "leaf_value"):
        if key not in f:
            raise CostModelFileError(f"{where}: no {key}")
    n = _int(f["num_leaves"], where, "num_leaves")
    if not 1 <= n <= MAX_LEAVES:
        raise CostModelFileError(f"{where}: num_leaves={n}, expected 1 to {MAX_LEAVES}")
    if f["num_cat"] != "0":
        raise CostModelFileError(f"{where}: num_cat={_shown(f['num_cat'][:20])}: categorical "
                                 "splits are refused (ansor-py's features are all numerical)")
    if f.get("is_linear", "0") != "0":
        raise CostModelFileError(f"{where}: is_linear={_shown(f['is_linear'][:20])}: linear trees "
                                 "are refused")
    if "shrinkage" in f:
        _float(f["shrinkage"], where, "shrinkage")
    if n > 1:
        missing = [k for k in _NEEDED_SPLITS if k not in f]
        if missing:
            raise CostModelFileError(f"{where}: no {missing[0]} (the tree has {n} leaves)")
    arrays: dict[str, list] = {}
    for key, (per_leaf, is_int) in _ARRAYS.items():
        if key not in f:
            continue
        want = n if per_leaf else n - 1
        if n == 1 and key in ("leaf_weight", "leaf_count") and f[key] == "":
            want = 0  # LightGBM writes a one-leaf tree's leaf_weight empty; an empty leaf_count reads as 0
        arrays[key] = _array(f[key], is_int, want, where, f"{key} (num_leaves={n})")
    depth = _check_splits(arrays, n, where) if n > 1 else 0
    out = [f"num_leaves={n}", "num_cat=0"]
    out += [f"{k}={f[k]}" for k in _ARRAYS if k in f]
    out += ["is_linear=0"] + ([f"shrinkage={f['shrinkage']}"] if "shrinkage" in f else [])
    return "\n".join(out) + "\n\n", depth


def _check_splits(a: dict[str, list], n: int, where: str) -> int:
    """Feature indices in the schema, accepted decision types, and children forming one tree:
    from the root every internal node (0 .. n-2) and every leaf (~0 .. ~(n-1)) is reached exactly
    once, so there is no cycle, no shared subtree and no index out of range. Returns the depth
    (internal nodes on the longest path)."""
    for j, feat in enumerate(a["split_feature"]):
        if not 0 <= feat < NUM_FEATURES:
            raise CostModelFileError(f"{where}: split_feature[{j}] = {feat} is not a feature "
                                     f"(the schema has {NUM_FEATURES}: 0 to {NUM_FEATURES - 1})")
    for j, dt in enumerate(a.get("decision_type", ())):
        if dt not in _DECISION_TYPES:
            why = "a categorical split" if dt % 2 else "not a numerical decision type"
            raise CostModelFileError(f"{where}: decision_type[{j}] = {dt} is {why} "
                                     f"(accepted: {sorted(_DECISION_TYPES)})")
    seen_node = [False] * (n - 1)
    seen_leaf = [False] * n
    seen_node[0] = True
    stack = [(0, 1)]
    deepest = 1
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        for side in ("left_child", "right_child"):
            c = a[side][node]
            if c >= 0:
                if c >= n - 1:
                    raise CostModelFileError(f"{where}: {side}[{node}] = {c} is not a node (the tree "
                                             f"has {n - 1} internal nodes: 0 to {n - 2})")
                if seen_node[c]:
                    raise CostModelFileError(f"{where}: {side}[{node}] = {c} reaches node {c} a second "
                                             "time (a cycle or a shared subtree)")
                seen_node[c] = True
                stack.append((c, depth + 1))
            else:
                leaf = ~c
                if leaf >= n:
                    raise CostModelFileError(f"{where}: {side}[{node}] = {c} is leaf {leaf}, not one of "
                                             f"the tree's {n} leaves (-1 to {-n})")
                if seen_leaf[leaf]:
                    raise CostModelFileError(f"{where}: {side}[{node}] = {c} reaches leaf {leaf} a "
                                             "second time")
                seen_leaf[leaf] = True
    if not all(seen_node):  # the leaves follow: n-1 nodes have 2(n-1) children, n-2 nodes + n leaves
        raise CostModelFileError(f"{where}: node {seen_node.index(False)} is not reached from the root")
    return deepest


def _array(value: str, is_int: bool, want: int, where: str, key: str) -> list:
    if not (_INTS if is_int else _FLOATS).fullmatch(value):
        kind = "integers" if is_int else "decimal numbers (no nan or inf)"
        raise CostModelFileError(f"{where}: {key} must be {want} space-separated {kind}")
    toks = value.split(" ") if value else []
    if len(toks) != want:
        raise CostModelFileError(f"{where}: {key} has {len(toks)} entries, expected {want}")
    if is_int:
        vals = [int(t) for t in toks]
        if not all(-_INT32 <= v < _INT32 for v in vals):
            raise CostModelFileError(f"{where}: {key} holds an integer beyond 32 bits")
        return vals
    vals = [float(t) for t in toks]
    if not all(abs(v) < float("inf") for v in vals):  # 1e999 matches the pattern but overflows
        raise CostModelFileError(f"{where}: {key} holds a number too large for a double")
    return vals


def _int(value: str, where: str, key: str) -> int:
    if not re.fullmatch(_INT, value):
        raise CostModelFileError(f"{where}: {key}={_shown(value[:20])} is not an integer")
    return int(value)


def _float(value: str, where: str, key: str) -> float:
    if not re.fullmatch(_FLOAT, value) or not abs(float(value)) < float("inf"):
        raise CostModelFileError(f"{where}: {key}={_shown(value[:20])} is not a finite number")
    return float(value)


def _shown(v: Any) -> str:
    """A value from the file, quoted and printable, for a message."""
    return repr(v) if isinstance(v, (str, int, float, type(None))) and not isinstance(v, bool) \
        and len(repr(v)) <= 60 else f"a {type(v).__name__}"
