"""SearchParams: every knob of the sketch search (sampling, evolution, annotation, mutation).

Its own module because the random annotation, the mutation and the search policy all read it, and
the policy imports the other two. Machine facts are not knobs: ``num_cores`` and
``max_vector_lanes`` (and ``cache_line_bytes``) default to the task's ``HardwareParams`` (``with_hardware``), and the search
never asks the machine for them.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .hardware import HardwareParams

# The largest ``population_size`` (8x Ansor's 2048). Every generation samples, scores and keeps
# this many states; ``--population 1000000000000`` was accepted and grew memory by ~18 MB/s for
# minutes without measuring anything (issue 40). ``ansor.argtypes`` reads it for --population.
MAX_POPULATION = 16384


@dataclass(frozen=True)
class SearchParams:
    """Every parameter of the sketch search, with Ansor's published CPU defaults.

    One deliberate departure: a vectorized loop may span ``max_vector_registers`` = 2 registers
    (32 float32 lanes with AVX-512) where Ansor caps the fused vector loop at one register's
    16 lanes. An 8 x 32 register tile with 2 zmm per row is what the fastest hand schedules use
    here, and in a short random-model GEMM 512 search the 32-lane cap gave better candidates
    (90th percentile 137 vs 96 GFLOPS); set it to 1 for Ansor's behaviour.

    Frozen: derive variants with ``dataclasses.replace``.
    """

    # -- evolutionary search --
    # States per generation. None (the default) scales it to the round: ``population_per_candidate``
    # per state measured, between ``min_population`` and ``max_population`` (2048, Ansor's, at
    # Ansor's 64 measurements per round). A given number is used as it is.
    population_size: int | None = None
    population_per_candidate: int = 32
    min_population: int = 512  # MetaSchedule's population, and every few-trial figure we publish
    max_population: int = 2048
    num_generations: int = 4  # rounds of selection + mutation after the initial population
    mutation_prob: float = 0.85  # chance a selected parent is mutated (else copied unchanged)
    eps_greedy: float = 0.05  # share of each batch of candidates drawn at random, not by the model
    use_measured_ratio: float = 0.2  # share of the initial population taken from the best measured
    family_quota: int = 8  # per round: measure the model's best of up to this many sketch families
    lead_family_share: float = 0.5  # of the model's picks: from the family of the best measured state
    candidate_pool_factor: int = 2  # the evolution keeps num * this best states to choose from
    evolution_max_attempts_factor: int = 3  # per generation: at most population * this selections
    # -- initial population --
    init_min_population: int = 50  # keep sampling (longer) until at least this many valid states
    init_max_attempts_factor: int = 4  # sampling gives up after population * this attempts
    # -- random annotation --
    max_innermost_split_factor: int = 64  # largest innermost tile factor
    # Tiles that need not divide the extent (issue 18): the chance a split draws them, for extents
    # that are a multiple of the vector lanes and for the others (primes, 1000, 197, ...).
    imperfect_split_prob: float = 0.1
    awkward_imperfect_split_prob: float = 0.75
    # An imperfect split's rounded-up grid may exceed the extent by at most this share (points
    # recomputed by a shift, run through tests by a peel) when a few draws find such lengths.
    max_tail_waste: float = 0.05
    shift_tail_prob: float = 0.5  # a stage without reduction: shift its partial tile (else peel)
    # A spatial split of a stage with a reduction (a cache_write accumulator): pad its partial
    # tile (computed whole into the local buffer, reads clamped; only the copy-out tests), else peel.
    pad_tail_prob: float = 0.5
    # Sketches that also copy a tiled stage's reused input (a GEMM's B, a weight) into blocks of
    # the register tile's width, zero-padded (PackStep); False derives only the unpacked ones.
    pack_inputs: bool = True
    # A pack that transposes (a dense weight packed along its rows) copies a cache line of each
    # source row at a time, the lanes x line block unrolled (``pack_block``); False: lane by lane.
    block_transposing_packs: bool = True
    cache_line_bytes: int | None = None  # None = the machine's (HardwareParams; 64 if unknown)
    max_vector_lanes: int | None = None  # SIMD lanes of one register; None = the machine's
    num_vector_registers: int | None = None  # SIMD registers; None = the machine's (16 if unknown)
    # The share of samples whose tiled stages draw their register tile first (rows x vectors that
    # fill the registers, ``split_sampling.register_tile``), the other levels around it.
    register_tile_prob: float = 0.5
    max_vector_registers: int = 2  # a vectorized loop may span this many registers (8x32 tiles: 2 zmm)
    auto_unroll_steps: tuple[int, ...] = (0, 16, 64, 512)  # auto_unroll_max_step choices
    parallel_extent_per_core: int = 16  # fuse parallel loops until cores * this iterations
    num_cores: int | None = None  # cores to feed; None = the machine's (HardwareParams)
    # -- mutation weights (relative; a kind with nothing to act on is skipped) --
    mutate_tile_size_weight: float = 0.90  # move a factor between two levels of a split
    mutate_compute_location_weight: float = 0.05  # move an untiled stage's compute_at
    mutate_auto_unroll_weight: float = 0.04  # change an auto_unroll_max_step value
    mutate_parallel_weight: float = 0.01  # fuse more / fewer outer loops for parallel

    def __post_init__(self) -> None:
        if self.num_generations < 0:
            raise ValueError("num_generations must be >= 0")
        for name in ("population_size", "min_population", "max_population"):
            v = getattr(self, name)
            if v is not None and not 1 <= v <= MAX_POPULATION:
                raise ValueError(f"SearchParams.{name} must be in [1, {MAX_POPULATION}], got {v}")
        if self.min_population > self.max_population or self.population_per_candidate < 1:
            raise ValueError("SearchParams.min_population must be <= max_population and "
                             "population_per_candidate >= 1")
        for name in ("mutation_prob", "eps_greedy", "use_measured_ratio", "imperfect_split_prob",
                     "awkward_imperfect_split_prob", "shift_tail_prob", "pad_tail_prob",
                     "register_tile_prob", "lead_family_share"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"SearchParams.{name} must be in [0, 1], got {v}")
        if self.family_quota < 0:
            raise ValueError(f"SearchParams.family_quota must be >= 0, got {self.family_quota}")
        if not 0.0 <= self.max_tail_waste:
            raise ValueError(f"SearchParams.max_tail_waste must be >= 0, got {self.max_tail_waste}")
        if self.max_innermost_split_factor < 1 or not self.auto_unroll_steps:
            raise ValueError("max_innermost_split_factor must be >= 1 and auto_unroll_steps non-empty")
        if min(self.candidate_pool_factor, self.evolution_max_attempts_factor,
               self.init_max_attempts_factor, self.max_vector_registers) < 1:
            raise ValueError("SearchParams factors and max_vector_registers must be >= 1")

    def population(self, num_candidates: int) -> int:
        """States per generation in a round that measures ``num_candidates``: ``population_size``
        if given, else scaled to the round. A round of 5 needs no 2048 states evolved under the
        model to pick them: the search was 96% of a few-trial run's time, and every few-trial
        figure we published used 512."""
        if self.population_size is not None:
            return self.population_size
        return min(self.max_population,
                   max(self.min_population, self.population_per_candidate * max(1, num_candidates)))

    def vector_width(self) -> int:
        """Widest vectorized loop (float32 lanes): lanes per register x registers."""
        lanes = self.max_vector_lanes
        if lanes is None:
            raise ValueError("SearchParams.max_vector_lanes is not set: give it, or fill it from the "
                             "task's machine with SearchParams.with_hardware(hardware_params)")
        return max(1, lanes * self.max_vector_registers)

    def cores(self) -> int:
        """Cores the parallel annotation feeds."""
        if self.num_cores is None:
            raise ValueError("SearchParams.num_cores is not set: give it, or fill it from the "
                             "task's machine with SearchParams.with_hardware(hardware_params)")
        return max(1, self.num_cores)

    def with_hardware(self, hardware: HardwareParams) -> "SearchParams":
        """These parameters for ``hardware``: ``num_cores`` and ``max_vector_lanes`` taken from
        it where not set explicitly (an explicit value wins)."""
        regs = self.num_vector_registers
        if regs is None:
            regs = hardware.num_vector_registers or 16
        return replace(self,
                       num_cores=hardware.num_cores if self.num_cores is None else self.num_cores,
                       num_vector_registers=regs,
                       cache_line_bytes=(hardware.cache_line_bytes if self.cache_line_bytes is None
                                         else self.cache_line_bytes),
                       max_vector_lanes=(hardware.vector_lanes if self.max_vector_lanes is None
                                         else self.max_vector_lanes))
