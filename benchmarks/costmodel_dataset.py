"""Generate a cost-model training set (TenSet-style): many tasks, a few hundred measured programs
each, written as ordinary tuning records.

Why: a model trained on other tasks' programs ranks a new task's candidates from its first round,
where an untrained model scores at random (issue 19). The tasks are the operator library's
workloads over shapes taken from real networks (ResNet-18/50, MobileNet-V2, BERT, ViT and odd
sizes), deliberately *not* the benchmark suite's rows, so the suite stays a held-out test. Each
task is tuned with the ordinary search (a random first round, then the online model), so the set
holds random, mediocre and good programs alike - a model must order all of them.

    python benchmarks/costmodel_dataset.py --trials 96 --out benchmarks/results/costmodel
    ansor costmodel pretrain benchmarks/results/costmodel/records.json -o pretrained.json \\
        --holdout conv2d_transpose_nhwc,group_conv2d_nhwc

Resumable: a task that already has ``--trials`` records in the log is skipped; one that has fewer
is tuned for the rest. ``--list`` prints the tasks. The log's toolchain field says which machine
measured it.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import ansor  # noqa: E402
from cost_model import LGBModel  # noqa: E402
from ansor.bench.sessions import count_records  # noqa: E402
from measure.runner import LocalRunner  # noqa: E402
from sketch.search_params import SearchParams  # noqa: E402

# (workload, args, where the shape comes from). No row equals a suite or odd-shape benchmark row.
TASKS: tuple[tuple[str, tuple, str], ...] = (
    ("conv2d_nhwc", (1, 56, 56, 64, 64, 1, 1, 1, 0), "ResNet-50 stage 1 1x1"),
    ("conv2d_nhwc", (1, 28, 28, 128, 128, 3, 3, 1, 1), "ResNet-18 stage 2 3x3"),
    ("conv2d_nhwc", (1, 14, 14, 256, 256, 3, 3, 1, 1), "ResNet-18 stage 3 3x3"),
    ("conv2d_nhwc", (1, 28, 28, 256, 128, 1, 1, 1, 0), "ResNet-50 stage 2 1x1 reduce"),
    ("conv2d_nhwc", (1, 56, 56, 64, 128, 3, 3, 2, 1), "ResNet-18 downsampling 3x3 s2"),
    ("conv2d_bias_relu", (1, 28, 28, 96, 96, 3, 3, 1, 1), "conv 3x3 + bias + relu, 96 channels"),
    ("conv2d_bias_relu", (1, 14, 14, 160, 320, 1, 1, 1, 0), "MobileNet-V2 1x1 expand"),
    ("depthwise_conv2d_nhwc", (1, 56, 56, 144, 3, 3, 1, 1), "MobileNet-V2 depthwise"),
    ("depthwise_conv2d_nhwc", (1, 28, 28, 192, 3, 3, 2, 1), "MobileNet-V2 depthwise s2"),
    ("depthwise_conv2d_nhwc", (1, 14, 14, 576, 3, 3, 1, 1), "MobileNet-V2 depthwise 576"),
    ("matmul", (256, 256, 256), "GEMM 256^3"),
    ("matmul", (384, 768, 384), "GEMM 384x768x384"),
    ("matmul", (100, 300, 200), "GEMM odd 100x300x200"),
    ("matmul", (257, 129, 65), "GEMM odd 257x129x65"),
    ("dense", (128, 768, 768), "BERT attention projection"),
    ("dense", (1, 1000, 2048), "ResNet-50 classifier"),
    ("dense_bias_gelu", (128, 3072, 768), "BERT MLP up + GELU"),
    ("dense_bias_relu", (64, 512, 512), "MLP 64x512x512 + relu"),
    ("batch_matmul", (12, 128, 128, 64), "BERT attention scores"),
    ("batch_matmul", (12, 128, 64, 128), "BERT attention x values"),
    ("batch_matmul_softmax", (12, 64, 64, 64), "attention scores + softmax"),
    ("conv1d", (1, 256, 64, 128, 3, 2, 1), "1-D conv"),
    ("dilated_conv2d_nhwc", (1, 28, 28, 64, 64, 3, 3, 1, 2, 2), "dilated 3x3"),
    ("softmax", (128, 1000), "softmax over classes"),
    ("layer_norm", (128, 768), "BERT layer norm"),
    ("max_pool2d", (1, 112, 112, 64, 3, 3, 2, 1), "ResNet max pool"),
    ("conv2d_nhwc", (1, 112, 112, 32, 64, 1, 1, 1, 0), "MobileNet-V1 pointwise"),
    ("conv2d_nhwc", (1, 7, 7, 512, 2048, 1, 1, 1, 0), "ResNet-50 stage 4 1x1 expand"),
    ("conv2d_nhwc", (1, 224, 224, 3, 32, 3, 3, 2, 1), "MobileNet stem, 3 channels"),
    ("conv2d_nhwc", (1, 13, 13, 384, 384, 3, 3, 1, 1), "AlexNet-like 13x13"),
    ("dense", (77, 512, 512), "CLIP text projection, 77 tokens"),
    ("matmul", (333, 555, 777), "GEMM odd 333x555x777"),
    ("batch_matmul", (12, 197, 64, 197), "ViT attention x values, 197 tokens"),
    ("depthwise_conv2d_nhwc", (1, 7, 7, 960, 3, 3, 1, 1), "MobileNet-V2 last depthwise"),
    # Ops the tuner trains on least: good held-out tasks for `ansor costmodel pretrain --holdout`.
    ("group_conv2d_nhwc", (1, 28, 28, 128, 128, 3, 3, 1, 1, 1, 4), "grouped 3x3, 4 groups"),
    ("conv2d_transpose_nhwc", (1, 8, 8, 256, 128, 4, 4, 2, 1), "transposed conv (decoder)"),
    # Dense layers whose weight rows are a power of two of floats long: a pack that transposes a
    # weight tile reads each lane from another row, all in one L1 set (appended last so the tasks
    # above keep their seeds).
    ("dense", (256, 1024, 4096), "BERT-large FFN down, 4096 -> 1024"),
    ("dense_bias_gelu", (128, 4096, 1024), "BERT-large FFN up + GELU"),
    ("dense", (64, 2048, 2048), "GPT-2 XL-sized projection, 2048 -> 2048"),
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=96, help="measured programs per task (default 96)")
    ap.add_argument("--per-round", type=int, default=32, help="programs per search round (default 32)")
    ap.add_argument("--population", type=int, default=512, help="search population (default 512)")
    ap.add_argument("--min-repeat-ms", type=float, default=30.0,
                    help="each timing repeats the kernel this long (default 30: labels need order, "
                    "not the last percent)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "costmodel"))
    ap.add_argument("--tasks", default="", help="comma-separated indices into the task list (default all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--list", action="store_true", help="print the tasks and exit")
    ns = ap.parse_args(argv)
    chosen = list(enumerate(TASKS))
    if ns.tasks:
        want = {int(x) for x in ns.tasks.split(",")}
        chosen = [(i, t) for i, t in chosen if i in want]
    if ns.list:
        for i, (wl, args, src) in chosen:
            print(f"{i:3d}  {wl}{args}  ({src})")
        return 0
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "records.json"
    runner = LocalRunner(min_repeat_ms=ns.min_repeat_ms)
    t0 = time.monotonic()
    per_task = []
    try:
        for i, (wl, args, src) in chosen:
            task = ansor.SearchTask(func=wl, args=args)
            have = count_records(log, task) if log.exists() else 0
            todo = max(0, ns.trials - have)
            t1 = time.monotonic()
            if todo:
                print(f"[{i + 1}/{len(TASKS)}] {wl}{args} ({src}): {have} records, tuning {todo} more",
                      flush=True)
                opts = ansor.TuningOptions(
                    num_measure_trials=todo, num_measures_per_round=ns.per_round, log_file=str(log),
                    verbose=0, runner=runner, seed=ns.seed + i,
                    search_params=SearchParams(population_size=ns.population))
                # An untrained model: the set must not depend on an earlier pre-trained one.
                task.tune(opts, cost_model=LGBModel(seed=ns.seed + i))
            per_task.append({"workload": wl, "args": list(args), "source": src,
                             "records": count_records(log, task), "seconds": round(time.monotonic() - t1, 1)})
    finally:
        runner.close()
    wall = time.monotonic() - t0
    (out / "dataset.json").write_text(json.dumps({"tasks": per_task, "wall_seconds": round(wall, 1),
                                                  "trials_per_task": ns.trials}, indent=1))
    print(f"{sum(t['records'] for t in per_task)} records of {len(per_task)} tasks in {log} "
          f"({wall / 60:.1f} min this run)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
