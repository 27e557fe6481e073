"""The pre-trained cost model shipped in the package: where it is, loading it once per process,
and saying so when this host is not the CPU it was trained on.

Why: an untrained model scores the first round at random, so a task's first trials are luck. A
model trained on other tasks' programs (``benchmarks/costmodel_dataset.py`` +
``ansor costmodel pretrain``) ranks them from the start; tuning then adds trees fitted to the
task's own measurements on top (``LGBModel.load``), so what it learned online still wins.

Features are machine-independent and labels are normalised per task, so a model trained on one
x86 CPU still ranks programs on another; ``load_pretrained`` warns once when the CPUs differ and
uses it anyway. ``ANSOR_PRETRAINED_MODEL`` names another model file, or ``none`` to start
untrained (as before the shipped model existed).
"""
from __future__ import annotations

import logging
import os
import threading
import warnings
from pathlib import Path

from .lgbm_model import LGBModel
from .model_file import CostModelFileError

logger = logging.getLogger("ansor.cost_model")

SHIPPED = Path(__file__).resolve().parent / "data" / "pretrained.json"
ENV = "ANSOR_PRETRAINED_MODEL"

_lock = threading.Lock()
_cache: dict[tuple[str, int, int], LGBModel] = {}
_warned: set[tuple[str, str]] = set()


def pretrained_path() -> Path | None:
    """The model file tuning starts from: ``$ANSOR_PRETRAINED_MODEL`` if set (``none``: no
    file), else the shipped one if the package has it."""
    env = os.environ.get(ENV)
    if env is not None and env.strip():
        if env.strip().lower() in ("none", "0", "off"):
            return None
        return Path(env)
    return SHIPPED if SHIPPED.is_file() else None


def _loaded(path: Path) -> LGBModel:
    st = path.stat()
    key = (os.fspath(path), st.st_mtime_ns, st.st_size)
    with _lock:
        model = _cache.get(key)
        if model is None:
            model = _cache[key] = LGBModel.load(path)
    return model


def load_pretrained(seed: int | None = None, host_cpu: str | None = None,
                    path: str | os.PathLike | None = None) -> LGBModel | None:
    """A fresh model whose predictions start from the pre-trained trees (shared, never changed),
    or None when there is no pre-trained model (``ANSOR_PRETRAINED_MODEL=none``, or a package
    without the file). ``host_cpu``: this machine's LLVM CPU name, to warn once when the model
    was trained on another. A shipped file that does not load (e.g. saved with an older feature
    schema) warns and gives None; a file named by the caller or the environment raises
    CostModelFileError (an InputError) instead."""
    chosen = Path(path) if path is not None else pretrained_path()
    if chosen is None:
        return None
    explicit = path is not None or chosen != SHIPPED
    try:
        base = _loaded(chosen)
    except (OSError, ValueError) as e:
        if explicit:
            named = f" ({ENV})" if path is None else ""
            why = f"{chosen}: {e.strerror}" if isinstance(e, OSError) and e.strerror else str(e)
            raise CostModelFileError(f"pre-trained cost model{named}: {why}") from None
        warnings.warn(f"the shipped pre-trained cost model does not load ({e}); starting untrained",
                      stacklevel=2)
        return None
    trained_on = base.provenance.get("llvm_cpu")
    if host_cpu and trained_on and host_cpu != trained_on and (os.fspath(chosen), host_cpu) not in _warned:
        _warned.add((os.fspath(chosen), host_cpu))
        logger.warning("the pre-trained cost model was trained on %s; this host is %s: using it "
                       "anyway (features are machine-independent; tuning adapts it online)",
                       trained_on, host_cpu)
    model = LGBModel(base.params, seed)
    model.base_booster = base.base_booster
    model.provenance = dict(base.provenance)
    model.pretrained_from = os.fspath(chosen)
    return model
