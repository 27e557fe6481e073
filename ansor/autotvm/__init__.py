"""AutoTVM-style template tuning: the baseline the auto-scheduler is compared with.

A *template* is a schedule written by hand with the ordinary transform steps, its tunable choices
(tile sizes, loop orders, annotations, unroll depths) declared as knobs of a ``ConfigSpace``; a
*tuner* searches that space by measuring configurations on this machine, with the same builder,
runner and record format as the auto-scheduler::

    from ansor import autotvm
    task = autotvm.create_task("matmul", (1024, 1024, 1024))   # the template registered for it
    tuner = autotvm.LGBMTuner(task, seed=0)                      # or GridSearch/Random/GA
    tuner.tune(n_trial=200, log_file="matmul_autotvm.json")      # resumes if the log exists
    state = task.search_task.apply_best("matmul_autotvm.json")   # ready for ansor.build

Modules: ``space`` (knobs, spaces, configurations), ``task`` (template registry, TemplateTask),
``templates`` (the built-in templates), ``records`` (the configuration stored with each record),
``measure`` (measurement options), ``tuner`` (the tuning loop), ``tuners`` (grid, random, GA),
``model_tuner`` (LightGBM model with simulated annealing, transfer from earlier logs).
"""
from .measure import MeasureOption, measure_option
from .model_tuner import LGBMTuner, ModelBasedTuner
from .records import ConfigRecord, ConfigRecordToFile, iter_config_records
from .space import (AnnotateEntity, ConfigEntity, ConfigSpace, KnobEntity, ReorderEntity,
                    SplitEntity, UnknownKnobError)
from .task import (InstantiationError, Template, TemplateTask, create_task, get_template,
                   list_templates, register_template, template_for_workload)
from .tuner import TuneSummary, Tuner
from .tuners import GATuner, GridSearchTuner, RandomTuner
from . import templates  # noqa: F401, E402 - registers the built-in templates

TUNERS = {"grid": GridSearchTuner, "random": RandomTuner, "ga": GATuner, "lgbm": LGBMTuner}

__all__ = [
    "AnnotateEntity", "ConfigEntity", "ConfigRecord", "ConfigRecordToFile", "ConfigSpace",
    "GATuner", "GridSearchTuner", "InstantiationError", "KnobEntity", "LGBMTuner",
    "MeasureOption", "ModelBasedTuner", "RandomTuner", "ReorderEntity", "SplitEntity", "TUNERS",
    "Template", "TemplateTask", "TuneSummary", "Tuner", "UnknownKnobError", "create_task",
    "get_template", "iter_config_records", "list_templates", "measure_option",
    "register_template", "template_for_workload",
]
