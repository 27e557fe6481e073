"""``ansor costmodel eval|train|pretrain|info``: evaluate or train the learned cost model on record
logs, pre-train one over many tasks (judged on tasks held out), show a model file's provenance."""
from __future__ import annotations

import argparse
import os
import sys
import warnings

from ansor import argtypes
from cost_model import LGBModel
from cost_model.evaluate import evaluate_task, format_table
from cost_model.lgbm_model import samples_from_file
from cost_model.pretrained import SHIPPED, pretrained_path
from cost_model.provenance import describe
from measure.target import host_cpu_name, host_hardware_params

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


def _costmodel_pretrain(ns: argparse.Namespace) -> int:
    from cost_model.pretrain import pretrain, split_patterns  # noqa: PLC0415 - start-up time of the other commands

    from ansor.bench.timing import cpu_name  # noqa: PLC0415

    holdout = split_patterns(ns.holdout or "")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = pretrain(ns.logs, holdout, seed=ns.seed, top=ns.top)
    except ValueError as err:
        print(f"ansor costmodel pretrain: {err}", file=sys.stderr)
        return 1
    for w in caught[:3]:
        print(f"warning: {w.message}", file=sys.stderr)
    if len(caught) > 3:
        print(f"warning: {len(caught) - 3} more record(s) skipped", file=sys.stderr)
    host = {}
    if host_cpu_name() == res.llvm_cpu:  # the records were measured here: name the machine
        hw = host_hardware_params()
        host = {"cpu": cpu_name(), "num_cores": hw.num_cores, "vector_lanes": hw.vector_lanes}
    from ansor import __version__  # noqa: PLC0415

    prov = res.provenance(dataset_seconds=ns.dataset_seconds, ansor_py=__version__, **host)
    print(f"trained on {res.programs} programs of {len(res.trained_tasks)} task(s) measured on "
          f"{res.llvm_cpu} in {res.train_seconds:.1f} s")
    if res.heldout_rows:
        print(f"held out (never trained on): {len(res.heldout_rows)} task(s)")
        print(format_table(res.heldout_rows, ns.top))
        if "heldout_pairwise" in prov:
            print(f"mean over held-out tasks: pairwise accuracy {prov['heldout_pairwise']:.3f}, "
                  f"top-{ns.top:.0%} recall {prov['heldout_topk']:.2f}")
    elif holdout:
        print(f"warning: no task matched --holdout {ns.holdout!r}: nothing evaluated", file=sys.stderr)
    res.model.save(ns.output, provenance=prov)
    size = os.path.getsize(ns.output)
    print(f"-> {ns.output} ({size / 1e6:.1f} MB); tuning starts from it with "
          f"ANSOR_PRETRAINED_MODEL={ns.output} or --cost-model {ns.output}")
    return 0


def _costmodel_info(ns: argparse.Namespace) -> int:
    path = ns.model or pretrained_path()
    if path is None:
        print("ansor costmodel info: no pre-trained model (ANSOR_PRETRAINED_MODEL=none, or the "
              f"package has no {SHIPPED.name}); give a model file", file=sys.stderr)
        return 1
    if not os.path.isfile(path):
        print(f"ansor costmodel info: no model file {os.fspath(path)!r}", file=sys.stderr)
        return 2
    try:
        model = LGBModel.load(path)
    except ValueError as err:  # CostModelFileError: the file is bad input, as a missing one is
        print(f"ansor costmodel info: {err}", file=sys.stderr)
        return 2
    shipped = " (shipped with ansor-py)" if os.path.abspath(path) == os.fspath(SHIPPED) else ""
    print(f"{os.fspath(path)}{shipped}: LightGBM pack-sum model, {os.path.getsize(path) / 1e6:.1f} MB")
    lines = describe(model.provenance)
    print("\n".join(lines) if lines else "no provenance recorded (trained by `ansor costmodel train`)")
    trained_on = model.provenance.get("llvm_cpu")
    if trained_on and trained_on != host_cpu_name():
        print(f"note: trained on {trained_on}, this host is {host_cpu_name()}: it is still used "
              "(features are machine-independent; tuning adapts it to this host's measurements)")
    return 0


def cmd_costmodel(ns: argparse.Namespace) -> int:
    handler = {"eval": _costmodel_eval, "train": _costmodel_train, "pretrain": _costmodel_pretrain,
               "info": _costmodel_info}.get(ns.costmodel_command)
    if handler is None:
        print("ansor costmodel: give a command: eval, train, pretrain or info (see --help)", file=sys.stderr)
        return 2
    if ns.costmodel_command == "info":
        return handler(ns)
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
    q = cs.add_parser("pretrain", help="train one model on many tasks' records (the shipped "
                      "model's recipe), scored on whole tasks held out of training")
    q.add_argument("logs", nargs="+", metavar="LOG")
    q.add_argument("-o", "--output", required=True, help="model file to write")
    q.add_argument("--holdout", default="", metavar="PATTERNS",
                   help="comma-separated workload names or fnmatch patterns over task names "
                   "(matmul(100, *)) held out of training and evaluated on")
    q.add_argument("--top", type=argtypes.fraction(), default=0.05,
                   help="top share for recall (default 0.05)")
    q.add_argument("--dataset-seconds", dest="dataset_seconds", type=argtypes.nonnegative(1e9),
                   metavar="S", help="how long measuring the records took (kept in the provenance)")
    q.add_argument("--seed", type=argtypes.seed, default=0)
    q = cs.add_parser("info", help="a model file's provenance (default: the pre-trained model "
                      "tuning starts from)")
    q.add_argument("model", nargs="?", metavar="MODEL")
    q.set_defaults(logs=[])
    for q in cs.choices.values():
        q.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                       help="import MODULE first (to register its workloads); repeatable")
