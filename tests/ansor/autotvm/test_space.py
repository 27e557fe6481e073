"""Configuration spaces: the knob policies, mixed-radix indexing, fallback, features, applying
chosen values to a state, and the errors bad input gets."""
from __future__ import annotations

import itertools
import math

import pytest

import ansor
from ansor.autotvm.space import (AnnotateEntity, ConfigEntity, ConfigSpace, ReorderEntity,
                                 SplitEntity, UnknownKnobError)


def _space() -> ConfigSpace:
    cfg = ConfigSpace()
    cfg.define_split("tile", 12, num_outputs=3)
    cfg.define_knob("unroll", [0, 16, 64])
    cfg.define_reorder("order", ["a", "b", "c"], policy="all")
    cfg.define_annotate("ann", ["x", "y"], policy="try_unroll_vec")
    return cfg


# ---- splits -------------------------------------------------------------------------------------

def test_factors_policy_lists_every_ordered_factorisation():
    cfg = ConfigSpace()
    cfg.define_split("t", 12, num_outputs=3)
    sizes = [cfg.space_map["t"][k].size for k in range(len(cfg.space_map["t"]))]
    expected = {(a, b, c) for a, b, c in itertools.product(range(1, 13), repeat=3) if a * b * c == 12}
    assert set(sizes) == expected and len(sizes) == len(expected) == 18


def test_power2_policy_derives_the_outer_part():
    cfg = ConfigSpace()
    cfg.define_split("t", 10, num_outputs=2, policy="power2")
    sizes = [e.size for e in cfg.space_map["t"].entities]
    assert sizes == [(10, 1), (5, 2), (3, 4), (2, 8)]


def test_candidate_policy_takes_exactly_the_given_lists():
    cfg = ConfigSpace()
    cfg.define_split("t", 64, num_outputs=3, policy="candidate",
                     candidate=[[-1, 4, 8], [None, 2, 2], [4, 2, 8]])
    assert [e.size for e in cfg.space_map["t"].entities] == [(2, 4, 8), (16, 2, 2), (4, 2, 8)]


@pytest.mark.parametrize("cand, words", [
    ([[-1, 4]], "3 sizes"),
    ([[-1, 16, 8]], "more than the extent"),
    ([[-1, 0, 2]], "positive"),
    ([[5, 4, 4]], "outermost"),
])
def test_bad_candidates_are_rejected_naming_the_knob(cand, words):
    with pytest.raises(ValueError, match=words) as e:
        ConfigSpace().define_split("tile_q", 64, num_outputs=3, policy="candidate", candidate=cand)
    assert "tile_q" in str(e.value)


def test_bad_policy_names_the_policy_and_the_valid_ones():
    with pytest.raises(ValueError, match="unknown policy 'verbose'.*factors, power2, imperfect, candidate"):
        ConfigSpace().define_split("t", 8, policy="verbose")
    with pytest.raises(ValueError, match="needs candidate"):
        ConfigSpace().define_split("t", 8, policy="candidate")
    with pytest.raises(ValueError, match="unknown policy 'random'"):
        ConfigSpace().define_reorder("r", [1, 2], policy="random")
    with pytest.raises(ValueError, match="unknown policy 'x'"):
        ConfigSpace().define_annotate("a", [1, 2], policy="x")
    with pytest.raises(ValueError, match="num_outputs"):
        ConfigSpace().define_split("t", 8, num_outputs=0)


def test_max_factor_and_filter_prune_the_split():
    cfg = ConfigSpace()
    cfg.define_split("t", 64, num_outputs=2, max_factor=8)
    assert all(e.size[1] <= 8 for e in cfg.space_map["t"].entities)
    cfg.define_split("u", 64, num_outputs=2, filter=lambda e: e.size[0] == 2)
    assert [e.size for e in cfg.space_map["u"].entities] == [(2, 32)]
    with pytest.raises(ValueError, match="no choice left"):
        cfg.define_split("v", 64, num_outputs=2, filter=lambda e: False)


def test_split_takes_its_extent_from_an_iterator():
    dag = ansor.ComputeDAG(ansor.make_workload("matmul", (24, 8, 8)))
    cfg = ConfigSpace()
    cfg.define_split("t", dag.init_state()["matmul"].leaf_iters[0], num_outputs=2)
    assert {e.size[0] * e.size[1] for e in cfg.space_map["t"].entities} == {24}
    with pytest.raises(TypeError, match="Iterator or a positive int"):
        cfg.define_split("u", "i", num_outputs=2)


# ---- other knobs -------------------------------------------------------------------------------

def test_knob_reorder_annotate_sizes():
    cfg = _space()
    assert len(cfg.space_map["unroll"]) == 3
    assert len(cfg.space_map["order"]) == 6
    assert [e.anns for e in cfg.space_map["ann"].entities] == [
        ("none", "none"), ("none", "unroll"), ("none", "vectorize"),
        ("unroll", "none"), ("unroll", "unroll"), ("unroll", "vectorize")]
    c = ConfigSpace()
    c.define_annotate("a", [1, 2, 3], policy="try_vec")
    assert [e.anns for e in c.space_map["a"].entities] == [("none",) * 3, ("none", "none", "vectorize")]
    c.define_annotate("b", [1], policy="candidate", candidate=[["vec"], ["parallel"]])
    assert [e.anns for e in c.space_map["b"].entities] == [("vectorize",), ("parallel",)]
    c.define_reorder("r", [1, 2, 3], policy="candidate", candidate=[[2, 1, 0]])
    assert len(c.space_map["r"]) == 1


@pytest.mark.parametrize("define, words", [
    (lambda c: c.define_knob("k", []), "must not be empty"),
    (lambda c: c.define_knob("k", [1, 1]), "duplicates"),
    (lambda c: c.define_knob("k", [object()]), "JSON"),
    (lambda c: c.define_knob("k", "abc"), "must be a list"),
    (lambda c: c.define_knob("k", [1, 2], fallback=3), "fallback 3"),
    (lambda c: c.define_reorder("k", [1, 2], policy="candidate", candidate=[[0, 0]]), "permutation"),
    (lambda c: c.define_annotate("k", [1], policy="candidate", candidate=[["fast"]]), "'fast'"),
    (lambda c: c.define_reorder("k", list(range(9))), "candidate"),
])
def test_bad_knob_definitions_raise_clear_errors(define, words):
    with pytest.raises((ValueError, TypeError), match=words):
        define(ConfigSpace())


def test_a_knob_cannot_be_defined_twice():
    cfg = _space()
    with pytest.raises(ValueError, match="'unroll' is defined twice"):
        cfg.define_knob("unroll", [1])


# ---- indexing ----------------------------------------------------------------------------------

def test_mixed_radix_indexing_first_knob_fastest():
    cfg = _space()
    assert len(cfg) == 18 * 3 * 6 * 6 == math.prod(cfg.radix)
    seen = set()
    for i in range(len(cfg)):
        d = cfg.digits(i)
        assert cfg.index_of_digits(d) == i
        e = cfg[i]
        assert isinstance(e, ConfigEntity) and e.index == i
        assert [e[n] for n in cfg.knob_names] == [cfg.space_map[n][k] for n, k in zip(cfg.knob_names, d)]
        seen.add(tuple(repr(e[n]) for n in cfg.knob_names))
    assert len(seen) == len(cfg)
    assert cfg.digits(1) == [1, 0, 0, 0] and cfg.digits(18) == [0, 1, 0, 0]


@pytest.mark.parametrize("bad", [-1, 18 * 3 * 6 * 6, 10 ** 9])
def test_index_out_of_range_names_the_range(bad):
    cfg = _space()
    with pytest.raises(IndexError, match=rf"index {bad} out of range.*1944 configurations \(0\.\.1943\)"):
        cfg[bad]


def test_non_integer_index_is_a_type_error():
    with pytest.raises(TypeError, match="must be an int"):
        _space()[1.5]
    with pytest.raises(TypeError, match="must be an int"):
        _space().get(True)
    with pytest.raises(IndexError, match="choice 99 out of range"):
        _space().index_of_digits([99, 0, 0, 0])


def test_unknown_knob_names_the_knob_and_lists_the_known_ones():
    cfg = _space()
    with pytest.raises(UnknownKnobError, match="unknown knob 'tile_z'; this space defines: tile, unroll"):
        cfg["tile_z"]
    with pytest.raises(KeyError, match="unknown knob 'nope'.*tile, unroll, order, ann"):
        cfg[5]["nope"]
    with pytest.raises(UnknownKnobError, match="'extra'.*not in this configuration's space"):
        cfg[5].define_knob("extra", [1, 2])
    cfg[5].define_knob("unroll", [0, 16, 64])  # known: applying a config re-runs the template


def test_iterating_a_space_is_refused():
    with pytest.raises(TypeError, match="range\\(len\\(space\\)\\)"):
        list(_space())


# ---- fallback, JSON, features ------------------------------------------------------------------

def test_fallback_takes_the_nearest_choice_of_each_knob():
    cfg = ConfigSpace()
    cfg.define_split("t", 96, num_outputs=3, fallback=[-1, 4, 30])  # 30 is no divisor: 24 nearest
    cfg.define_split("u", 64, num_outputs=2)  # no fallback: inner part near 8
    cfg.define_knob("k", ["a", "b", "c"], fallback="b")
    cfg.define_reorder("r", [1, 2], fallback=[1, 0])
    cfg.define_annotate("a", [1, 2], policy="try_unroll_vec", fallback=["unroll", "vec"])
    fb = cfg.fallback()
    assert fb.is_fallback and not cfg[fb.index].is_fallback
    assert fb["t"].size == (1, 4, 24) and fb["u"].size == (8, 8) and fb["k"].val == "b"
    assert fb["r"].perm == (1, 0) and fb["a"].anns == ("unroll", "vectorize")
    with pytest.raises(ValueError, match="fallback"):
        ConfigSpace().define_split("t", 8, num_outputs=2, fallback=[1, 2, 4])


def test_json_round_trip_and_signature():
    cfg = _space()
    for i in (0, 7, 1000, len(cfg) - 1):
        d = cfg[i].to_json()
        assert d["index"] == i and cfg.from_json(d["knobs"]).index == i
    with pytest.raises(UnknownKnobError):
        cfg.from_json({**cfg[0].to_json()["knobs"], "zzz": 1})
    with pytest.raises(ValueError, match="no choice"):
        cfg.from_json({**cfg[0].to_json()["knobs"], "unroll": 3})
    assert _space().signature == cfg.signature
    other = ConfigSpace()
    other.define_split("tile", 12, num_outputs=2)
    assert other.signature != cfg.signature


def test_features_have_one_length_and_match_the_json_form():
    cfg = _space()
    lengths = {len(cfg.features(i)) for i in range(0, len(cfg), 37)}
    assert lengths == {3 + 1 + 3 + 2}
    e = cfg[123]
    assert cfg.features_json(e.to_json()["knobs"]) == e.features()
    assert e.features()[:3] == [math.log2(s) for s in e["tile"].size]
    # Knob values of another space of the same template (other shapes) still have features.
    assert len(cfg.features_json({"tile": [1, 2, 32], "unroll": 16, "order": [2, 0, 1],
                                  "ann": ["unroll", "vectorize"]})) == 9
    with pytest.raises(ValueError, match="tile"):
        cfg.features_json({"tile": [1, 2], "unroll": 16, "order": [2, 0, 1], "ann": ["none", "none"]})


# ---- applying chosen values ---------------------------------------------------------------------

def test_entities_apply_steps_to_a_state():
    dag = ansor.ComputeDAG(ansor.make_workload("matmul", (24, 16, 8)))
    s = dag.init_state()
    s, (i0, i1, i2) = SplitEntity((2, 3, 4)).apply(s, "matmul", "i")
    assert [i0.extent, i1.extent, i2.extent] == [2, 3, 4]
    s, (j0, j1) = SplitEntity((2, 8)).apply(s, "matmul", "j")
    s, order = ReorderEntity((2, 0, 1)).apply(s, "matmul", [i0, j0, i1])
    # The three loops keep the slots they occupied (0, 1, 3), filled in the chosen order:
    # the loop given third first, then the first, then the second.
    assert [it.name for it in s["matmul"].leaf_iters] == ["i.1", "i.0", "i.2", "j.0", "j.1", "k"]
    assert [it.name for it in order] == ["i.1", "i.0", "j.0"]
    s = AnnotateEntity(("unroll", "vectorize")).apply(s, "matmul", ["i.1", "j.1"])
    assert [it.annotation for it in s["matmul"].leaf_iters] == [
        "unroll", "none", "none", "none", "vectorize", "none"]
    # A split of size 1 adds no step; an order that changes nothing adds none either.
    n = len(s.steps)
    s2, (k,) = SplitEntity((8,)).apply(s, "matmul", "k")
    s2, _ = ReorderEntity((0, 1)).apply(s2, "matmul", ["i.1", "i.2"])
    assert len(s2.steps) == n and k.name == "k"
    assert ansor.build(s) is not None
