"""``ansor costmodel eval|train``: evaluate or train the learned cost model on record logs."""
from __future__ import annotations

import argparse
import os
import sys
import warnings

from ansor import argtypes
from cost_model import LGBModel
from cost_model.evaluate import evaluate_task, format_table
from cost_model.lgbm_model import samples_from_file

from .common import import_user_modules


def _costmodel_eval(ns: argparse.Namespace) -> int:
    per_task: dict[str, list] = {}
    desc: dict[str, str] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for log in ns.logs:
            for line_key, state, cost in samples_from_file(log, None):
                per_task.setdefault(line_key, []).append((state, cost))
                desc.setdefault(line_key, state.dag.tensors[-1].op.name)
    for w in caught[:3]:
        print(f"warning: {w.message}", file=sys.stderr)
    rows, skipped = [], []
    for key, samples in per_task.items():
        if len(samples) <= ns.train:
            skipped.append(f"{desc[key]} ({len(samples)} records)")
            continue
        rows.append(evaluate_task(samples, lambda: LGBModel(seed=ns.seed), key, desc[key],
                                  train_size=ns.train, split=ns.split, seed=ns.seed, top=ns.top))
    if not rows:
        print(f"ansor costmodel eval: no task has more than --train {ns.train} records "
              f"({', '.join(skipped) or 'no records'})", file=sys.stderr)
        return 1
    print(f"cost model: LightGBM pack-sum, trained on the first {ns.train} records of each task "
          f"({ns.split} split), scored on the rest")
    print(format_table(rows, ns.top))
    if skipped:
        print(f"skipped (too few records): {', '.join(skipped)}")
    return 0


def _costmodel_train(ns: argparse.Namespace) -> int:
    # lightgbm takes a second to import; cost_model loads it only to train, and so does this.
    from lightgbm.basic import LightGBMError

    model = LGBModel(seed=ns.seed)
    logs = ", ".join(ns.logs)
    try:
        added = sum(model.update_from_file(log) for log in ns.logs)
        if not model.num_samples():
            print(f"ansor costmodel train: no usable records in {logs}", file=sys.stderr)
            return 1
        need = model.params.min_train_samples
        if model.num_samples() < need:
            # LightGBM fails on a handful of rows (every feature filtered out): say so instead.
            print(f"ansor costmodel train: {model.num_samples()} usable record(s) in {logs}; "
                  f"training needs at least {need} distinct schedules", file=sys.stderr)
            return 1
        model.train()
    except LightGBMError as err:
        why = str(err).strip().splitlines()[0] if str(err).strip() else "no reason given"
        print(f"ansor costmodel train: the {model.num_samples()} record(s) in {logs} give "
              f"LightGBM nothing to learn from ({why}); tune longer or add logs", file=sys.stderr)
        return 1
    model.save(ns.output)
    print(f"trained on {added} records of {len(model.data)} task(s) in {model.train_seconds:.1f} s "
          f"-> {ns.output} (use: ansor tune WORKLOAD --cost-model {ns.output})")
    return 0


def cmd_costmodel(ns: argparse.Namespace) -> int:
    handler = {"eval": _costmodel_eval, "train": _costmodel_train}.get(ns.costmodel_command)
    if handler is None:
        print("ansor costmodel: give a command: eval or train (see --help)", file=sys.stderr)
        return 2
    missing = [p for p in ns.logs if not os.path.isfile(p)]
    if missing:
        print(f"ansor: no record file {missing[0]!r}", file=sys.stderr)
        return 2
    if not import_user_modules(ns.imports):
        return 2
    return handler(ns)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """``ansor costmodel``'s commands and options."""
    p = sub.add_parser("costmodel", help="evaluate or train the learned cost model on record logs")
    cs = p.add_subparsers(dest="costmodel_command")
    q = cs.add_parser("eval", help="train on each task's first records, print pairwise ranking "
                      "accuracy and top-k recall on the rest")
    q.add_argument("logs", nargs="+", metavar="LOG")
    q.add_argument("--train", type=argtypes.count(1), default=512,
                   help="records per task to train on (default 512)")
    q.add_argument("--split", choices=("chrono", "random"), default="chrono",
                   help="held-out records: the later ones (default) or a random part")
    q.add_argument("--top", type=argtypes.fraction(), default=0.05,
                   help="top share for recall (default 0.05)")
    q.add_argument("--seed", type=argtypes.seed, default=0)
    q = cs.add_parser("train", help="train on every record of the logs and save the model")
    q.add_argument("logs", nargs="+", metavar="LOG")
    q.add_argument("-o", "--output", required=True, help="model file to write")
    q.add_argument("--seed", type=argtypes.seed, default=0)
    for q in cs.choices.values():
        q.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                       help="import MODULE first (to register its workloads); repeatable")
