"""The operator registry (ansor/graph/ops/): every operator has all its parts, a part left out
or an ONNX op type claimed twice fails at import, and the ONNX importer finds the import rules."""
from __future__ import annotations

import dataclasses

import pytest

import ansor.frontend.onnx as onnx_frontend
from ansor.graph import OPS
from ansor.graph.ops import check_registry
from ansor.graph.op_rules import PARTS


def test_every_declared_operator_is_complete_and_imported():
    assert OPS, "no operator is declared in ansor/graph/ops/"
    for d in OPS.values():
        assert d.missing_parts() == [], d.name
        for op_type, rule in d.onnx.items():
            assert onnx_frontend._HANDLERS[op_type] is rule


@pytest.mark.parametrize("part", PARTS)
def test_an_operator_missing_a_part_fails_the_registry_check(part):
    d = OPS["softsign"]
    own = {"OtherSoftsign": d.onnx["Softsign"]}  # an ONNX op type of its own, so only `part` is wrong
    broken = dataclasses.replace(d, name="broken", **{"onnx": own, part: {} if part == "onnx" else None})
    with pytest.raises(ImportError, match=f"broken has no {part}"):
        check_registry({**OPS, "broken": broken})


def test_an_onnx_op_type_claimed_twice_fails_the_registry_check():
    twin = dataclasses.replace(OPS["softsign"], name="twin")
    with pytest.raises(ImportError, match="ONNX Softsign is imported by both softsign and twin"):
        check_registry({**OPS, "twin": twin})
