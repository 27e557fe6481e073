"""HardwareParams: the facts about the target machine that the search and the cost model use.

Defined here, in the lowest layer that reads them (the sketch rules and the random annotation need
the core count and the vector width), and passed down as data: the search never asks the machine.
The layer that knows the host fills them once (``measure.target.host_hardware_params()``, which
respects ``ANSOR_NUM_THREADS``); a ``SearchTask`` carries them, so a task can also be searched for
a stated machine (say 16 cores) on this one.
"""
from __future__ import annotations

from dataclasses import dataclass

# The cache-line size assumed where the machine does not report its own (``measure.target`` reads
# the real one): 64 bytes on every x86-64 CPU. Also the one fixed line size of what must not vary
# from one machine to the next: the alignment of buffers we allocate (``measure.buffers``) and the
# cost model's features (``cost_model.feature_schema``), which a pretrained model was fitted on.
CACHE_LINE_BYTES = 64


@dataclass(frozen=True)
class HardwareParams:
    """One target machine, as TVM's ``HardwareParams``. Frozen: derive with ``dataclasses.replace``.

    ``num_cores``: threads parallel loops are written for. ``vector_bits``: SIMD register width
    (512 with AVX-512F, 256 with AVX2, 128 otherwise). ``cache_line_bytes``: the line size.
    ``num_vector_registers`` and the cache sizes are None where not known. ``target``: the
    identity of the machine (CPU name and toolchain key), for logs and comparisons only.
    """

    num_cores: int
    vector_bits: int = 128
    cache_line_bytes: int = CACHE_LINE_BYTES
    num_vector_registers: int | None = None
    l1d_cache_bytes: int | None = None
    l2_cache_bytes: int | None = None
    l3_cache_bytes: int | None = None
    target: str = ""

    def __post_init__(self) -> None:
        for name in ("num_cores", "vector_bits", "cache_line_bytes"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"HardwareParams.{name} must be a positive integer, got {v!r}")
        if self.vector_bits % 32:
            raise ValueError(f"HardwareParams.vector_bits must be a multiple of 32, got {self.vector_bits}")
        for name in ("num_vector_registers", "l1d_cache_bytes", "l2_cache_bytes", "l3_cache_bytes"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValueError(f"HardwareParams.{name} must be a positive integer or None, got {v!r}")
        if not isinstance(self.target, str):
            raise TypeError(f"HardwareParams.target must be a string, got {type(self.target).__name__}")

    @property
    def vector_lanes(self) -> int:
        """float32 lanes of one SIMD register."""
        return self.vector_bits // 32
