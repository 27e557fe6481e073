"""The built-in templates: the classic hand-designed schedule spaces for CPU kernels.

Each template is the hand schedule of ``ansor/hand_schedules.py`` with its constants turned into
knobs, the way AutoTVM's x86 templates are written:

* GEMM family (``matmul``, ``dense``, ``batch_matmul``): the output is tiled in three levels per
  spatial axis (``tile_y``, ``tile_x``: parallel tile, cache tile, register tile); a local
  accumulator (cache_write, or the GEMM itself when an elementwise epilogue follows) is computed
  per parallel tile, its reduction blocked (``tile_k``), the order of the blocked loops a knob
  (``order``), the register tile unrolled / vectorized (``ann_reg``) and an unroll pragma
  (``auto_unroll``).
* Convolutions in NHWC (``conv2d_nhwc``, ``conv2d_bias_relu``, ``depthwise_conv2d_nhwc``): output
  tiles of ``tile_oh`` rows x ``tile_ow`` columns x ``tile_oc`` channels, row blocks in
  parallel, the accumulator per tile with the reduction outside the register tile (input
  channels blocked by ``tile_ic``, the order of the outer reduction loops a knob), rows and
  columns unrolled and channels vectorized, optionally the kernel-width loop unrolled
  (``unroll_kw``). The padding stage is computed at root, rows in parallel and channels
  vectorized.

Elementwise stages between the reduction and the output (a bias add) are inlined; the output
stage (relu, gelu, or a copy of a cache_write) is where the tiles live, so the epilogue is fused
into the tile loop and the reduction's result never goes to memory in full.

Register tiles are bounded by filters (at most 16 rows and 64 columns for GEMM; 4 output rows,
16 columns and 64 channels for convolutions): larger ones are fully unrolled into code that takes long to
compile and spills registers anyway.
"""
from __future__ import annotations

from dataclasses import dataclass

from compute.compute_dag import ComputeDAG
from compute.tensor import ComputeOp
from sketch.loop_state import State

from .task import register_template

__all__ = ["batch_gemm_template", "conv2d_bias_relu_template", "conv2d_nhwc_template",
           "dense_template", "depthwise_conv2d_nhwc_template", "gemm_template"]

# Register-tile bounds (see the module docstring).
GEMM_MAX_ROWS = 16
GEMM_MAX_COLS = 64
CONV_MAX_ROWS = 4
CONV_MAX_COLS = 16
CONV_MAX_CHANNELS = 64
AUTO_UNROLL_STEPS = [0, 32, 128]


@dataclass
class _Parts:
    """The stages a template works on: the reduction (accumulator), the output (where tiles
    live), the padding stage if any and the elementwise stages in between (inlined)."""

    reduction: str
    output: str
    pad: str | None
    inline: list[str]


def _parts(state: State) -> _Parts:
    computes = [st for st in state.stages if isinstance(st.op, ComputeOp)]
    reductions = [st for st in computes if st.op.reduce_axes]
    if len(reductions) != 1:
        raise ValueError(f"the template needs exactly one reduction stage, this DAG has "
                         f"{len(reductions)} ({', '.join(st.name for st in reductions)})")
    red, out = reductions[0], computes[-1]
    pads = [st.name for st in computes if st.op.tag == "pad"]
    inline = [st.name for st in computes
              if st is not red and st is not out and st.op.tag != "pad"]
    return _Parts(red.name, out.name, pads[0] if pads else None, inline)


def _prepare(dag: ComputeDAG) -> tuple[State, str, str, _Parts]:
    """Inline the epilogue's middle stages; add a cache stage when the reduction is the output.
    Returns (state, accumulator stage, output stage, parts)."""
    s = dag.init_state()
    parts = _parts(s)
    for name in parts.inline:
        s = s.compute_inline(name)
    if parts.output == parts.reduction:
        s = s.cache_write(parts.reduction)
        acc = s.stages[s.stage_index(parts.reduction) - 1].name  # the new "<name>.local"
        return s, acc, parts.output, parts
    return s, parts.reduction, parts.output, parts


# ---- GEMM family -------------------------------------------------------------------------------

def split_policy(extent: int) -> str:
    """The split knobs' policy: exact factorisations for an extent that is a multiple of 8 (the
    space is what it always was), else also tiles that need not divide it (a prime has only 1
    and itself; knob_spaces.SplitSpace "imperfect")."""
    return "factors" if extent % 8 == 0 else "imperfect"


def _gemm(cfg, dag: ComputeDAG, n_batch: int) -> State:
    s0 = dag.init_state()
    parts = _parts(s0)
    red = s0[parts.reduction]
    if len(red.op.axes) != n_batch + 2 or len(red.op.reduce_axes) != 1:
        raise ValueError(f"GEMM template: {parts.reduction} must have {n_batch + 2} spatial axes "
                         f"and one reduction axis")
    M, N, K = (red.iters[n_batch].extent, red.iters[n_batch + 1].extent,
               red.iters[n_batch + 2].extent)

    # The knobs (all defined before any step, so collection never depends on a choice).
    cfg.define_split("tile_y", M, policy=split_policy(M), num_outputs=3,
                     filter=lambda e: e.size[-1] <= GEMM_MAX_ROWS,
                     fallback=[-1, 16, 8])
    cfg.define_split("tile_x", N, policy=split_policy(N), num_outputs=3,
                     filter=lambda e: e.size[-1] <= GEMM_MAX_COLS,
                     fallback=[-1, 4, 32])
    cfg.define_split("tile_k", K, policy=split_policy(K), num_outputs=2, fallback=[-1, 128])
    cfg.define_reorder("order", ["k.outer", "i.cache", "j.cache"], policy="all",
                       fallback=[0, 1, 2])
    cfg.define_annotate("ann_reg", ["i.reg", "j.reg"], policy="try_unroll_vec",
                        fallback=["unroll", "vectorize"])
    cfg.define_knob("auto_unroll", AUTO_UNROLL_STEPS, fallback=0)

    s, acc, out, _ = _prepare(dag)
    yi = cfg["tile_y"].size[-1]
    xi = cfg["tile_x"].size[-1]

    # Output: [batch] yo xo | ym xm yi xi; the parallel loop fuses batch and the outer tiles.
    st = s[out]
    s, ys = cfg["tile_y"].apply(s, out, st.leaf_iters[n_batch])
    s, xs = cfg["tile_x"].apply(s, out, s[out].leaf_iters[n_batch + 3])
    batch = s[out].leaf_iters[:n_batch]
    s = s.reorder(out, [*batch, ys[0], xs[0], ys[1], xs[1], ys[2], xs[2]])
    s = s.fuse(out, list(range(n_batch + 2))).parallel(out, 0)
    s = s.compute_at(acc, out, 0)
    s = s.vectorize(out, 4)

    # Accumulator: [batch] | k.outer i.cache j.cache (ordered by a knob) | k.inner i.reg j.reg.
    it = s[acc].leaf_iters
    i, j, k = it[n_batch], it[n_batch + 1], it[n_batch + 2]
    s = s.split(acc, i, [yi], tail="peel")
    s = s.split(acc, j, [xi], tail="peel")
    it = s[acc].leaf_iters
    i_c, i_r, j_c, j_r, k = it[n_batch:n_batch + 5]
    s, (k_o, k_i) = cfg["tile_k"].apply(s, acc, k)
    s = s.reorder(acc, [*s[acc].leaf_iters[:n_batch], k_o, i_c, j_c, k_i, i_r, j_r])
    s, _ = cfg["order"].apply(s, acc, [k_o, i_c, j_c])
    s = cfg["ann_reg"].apply(s, acc, [i_r, j_r])
    if cfg["auto_unroll"].val:
        s = s.pragma(acc, 0, f"auto_unroll_max_step${cfg['auto_unroll'].val}")
    return s


@register_template("matmul", workloads=("matmul", "matmul_relu"))
def gemm_template(cfg, dag: ComputeDAG) -> State:
    """GEMM C = A @ B (and with an elementwise epilogue): 3-level output tiles, local accumulator,
    blocked reduction, unrolled/vectorized register tile."""
    return _gemm(cfg, dag, 0)


@register_template("dense", workloads=("dense", "dense_bias_gelu", "dense_bias_relu"))
def dense_template(cfg, dag: ComputeDAG) -> State:
    """Fully connected layer (data @ weight^T + bias [+ gelu]): the GEMM template, bias fused."""
    return _gemm(cfg, dag, 0)


@register_template("batch_matmul")
def batch_gemm_template(cfg, dag: ComputeDAG) -> State:
    """Batched GEMM: the GEMM template with the batch fused into the parallel loop."""
    return _gemm(cfg, dag, 1)


# ---- convolutions (NHWC) -----------------------------------------------------------------------

def _conv_nhwc(cfg, dag: ComputeDAG) -> State:
    s0 = dag.init_state()
    parts = _parts(s0)
    red = s0[parts.reduction]
    if len(red.op.axes) != 4:
        raise ValueError(f"NHWC convolution template: {parts.reduction} must have 4 spatial axes "
                         "(n, h, w, c)")
    OH, OW, CO = red.iters[1].extent, red.iters[2].extent, red.iters[3].extent
    n_red = len(red.op.reduce_axes)  # rh, rw (depthwise) or rh, rw, rc
    RC = red.iters[4 + 2].extent if n_red == 3 else None

    cfg.define_split("tile_oh", OH, policy=split_policy(OH), num_outputs=2,
                     filter=lambda e: e.size[-1] <= CONV_MAX_ROWS,
                     fallback=[-1, 1])
    cfg.define_split("tile_ow", OW, policy=split_policy(OW), num_outputs=2,
                     filter=lambda e: e.size[-1] <= CONV_MAX_COLS,
                     fallback=[-1, 8])
    cfg.define_split("tile_oc", CO, policy=split_policy(CO), num_outputs=2,
                     filter=lambda e: e.size[-1] <= CONV_MAX_CHANNELS, fallback=[-1, 32])
    if RC is not None:
        cfg.define_split("tile_ic", RC, policy=split_policy(RC), num_outputs=2, fallback=[-1, RC])
        outer_red = ["rc.outer", "rh", "rw"]
    else:
        outer_red = ["rh", "rw"]
    cfg.define_reorder("reduce_order", outer_red, policy="all",
                       fallback=list(range(len(outer_red))))
    cfg.define_knob("unroll_kw", [False, True], fallback=False)

    s, acc, out, parts = _prepare(dag)
    hi = cfg["tile_oh"].size[-1]
    wi = cfg["tile_ow"].size[-1]
    ci = cfg["tile_oc"].size[-1]

    # Output tiles: (n h.outer) in parallel, then w.outer c.outer, the accumulator per tile,
    # then the tile's rows, columns and (vectorized) channels.
    n, h, w, c = s[out].leaf_iters
    s, (h_o, h_i) = cfg["tile_oh"].apply(s, out, h)
    s, (w_o, w_i) = cfg["tile_ow"].apply(s, out, w)
    s, (c_o, c_i) = cfg["tile_oc"].apply(s, out, c)
    s = s.reorder(out, [n, h_o, w_o, c_o, h_i, w_i, c_i])
    s = s.fuse(out, [0, 1]).parallel(out, 0)
    s = s.compute_at(acc, out, 2)
    s = s.vectorize(out, 5)

    # Accumulator: n h.outer w.outer c.outer | outer reduction loops (ordered by a knob) |
    # rc.inner h.reg w.reg (unrolled) c.reg (vectorized).
    s = s.split(acc, 1, [hi], tail="peel")
    s = s.split(acc, 3, [wi], tail="peel")
    s = s.split(acc, 5, [ci], tail="peel")
    it = s[acc].leaf_iters  # n h.0 h.1 w.0 w.1 c.0 c.1 rh rw [rc]
    n, h_o, h_r, w_o, w_r, c_o, c_r = it[:7]
    rh, rw = it[7], it[8]
    if RC is not None:
        s, (rc_o, rc_i) = cfg["tile_ic"].apply(s, acc, it[9])
        outer, inner = [rc_o, rh, rw], [rc_i]
    else:
        outer, inner = [rh, rw], []
    s = s.reorder(acc, [n, h_o, w_o, c_o, *outer, *inner, h_r, w_r, c_r])
    s, _ = cfg["reduce_order"].apply(s, acc, outer)
    s = s.unroll(acc, h_r).unroll(acc, w_r).vectorize(acc, c_r)
    if cfg["unroll_kw"].val:
        s = s.unroll(acc, rw)

    if parts.pad is not None:
        s = s.fuse(parts.pad, [0, 1]).parallel(parts.pad, 0).vectorize(parts.pad, 2)
    return s


@register_template("conv2d_nhwc", workloads=("conv2d_nhwc", "group_conv2d_nhwc",
                                             "dilated_conv2d_nhwc"))
def conv2d_nhwc_template(cfg, dag: ComputeDAG) -> State:
    """conv2d NHWC: row-parallel output tiles, per-tile accumulator, blocked input channels."""
    return _conv_nhwc(cfg, dag)


@register_template("conv2d_bias_relu")
def conv2d_bias_relu_template(cfg, dag: ComputeDAG) -> State:
    """relu(conv2d NHWC + bias): the conv2d template with bias and relu fused into the tile."""
    return _conv_nhwc(cfg, dag)


@register_template("depthwise_conv2d_nhwc")
def depthwise_conv2d_nhwc_template(cfg, dag: ComputeDAG) -> State:
    """Depthwise conv2d NHWC: the conv2d template without an input-channel reduction."""
    return _conv_nhwc(cfg, dag)
