"""The pack step's operation cache (sketch.pack_ops): a hit gives the operations a fresh build
would (the same schedule and bodies, and it lowers), other inputs miss, and it is bounded."""
from __future__ import annotations

from sketch import pack_ops
from sketch.lower import lower
from sketch.transform_steps import PackStep

from .test_pack import packed_gemm


def test_a_hit_reuses_the_operations_and_lowers_the_same():
    pack_ops.clear_cache()
    dag, s1 = packed_gemm(5, 37, 3, (4, 32), (2, 16, 2))
    pk = s1.steps[-1]
    assert isinstance(pk, PackStep)
    # The search replays a pack on states that share the prefix before it (a mutation replays
    # from its parent's trace): the same input operations, so a hit.
    prefix = dag.replay(s1.steps[:-1])
    s2, s3 = pk.apply(prefix), pk.apply(prefix)
    assert s3["B.pack"].op is s2["B.pack"].op
    assert s3["matmul.local"].op is s2["matmul.local"].op
    # (the loop IR is not compared as text: lowering orders a guard's conjuncts by object
    # identities, so even one state lowered twice can print them in another order)
    lower(s2), lower(s3)
    pack_ops.clear_cache()  # built afresh: new objects, the same program
    s4 = pk.apply(prefix)
    assert s4["B.pack"].op is not s2["B.pack"].op
    assert str(s4) == str(s2) == str(s1)
    assert str(s4["matmul.local"].op.body) == str(s2["matmul.local"].op.body)
    assert str(s4["B.pack"].op.body) == str(s2["B.pack"].op.body)
    # a replay from scratch makes a new accumulator operation (cache_write): a miss, same program
    s5 = dag.replay(s1.steps)
    assert s5["matmul.local"].op is not s2["matmul.local"].op
    assert str(s5) == str(s2) and str(s5["B.pack"].op.body) == str(s2["B.pack"].op.body)


def test_another_block_length_or_reader_misses():
    pack_ops.clear_cache()
    dag, s16 = packed_gemm(5, 37, 3, (4, 32), (2, 16, 2))
    _, s8 = packed_gemm(5, 37, 3, (4, 32), (4, 8, 2))
    assert s8["B.pack"].op.output.shape == (5, 3, 8)  # ceil(37 / 8) blocks: not the 16-wide copy
    assert s16["B.pack"].op.output.shape == (3, 3, 16)
    st, reader = s16["B"], s16.stages[2]
    a = pack_ops.pack_ops(dag, st.op, st.produced_ops, reader.op, 1, 16, "B.pack")
    b = pack_ops.pack_ops(dag, st.op, st.produced_ops, reader.op, 1, 8, "B.pack")
    assert a[0] is not b[0] and a[0].output.shape != b[0].output.shape


def test_bounded(monkeypatch):
    pack_ops.clear_cache()
    monkeypatch.setattr(pack_ops, "MAX_ENTRIES", 2)
    dag, s = packed_gemm(5, 37, 3, (4, 32), (2, 16, 2))
    st, reader = s["B"], s.stages[2]
    for v in (1, 2, 4, 8, 16):
        pack_ops.pack_ops(dag, st.op, st.produced_ops, reader.op, 1, v, "B.pack")
        assert len(pack_ops._CACHE[dag]) <= 2
