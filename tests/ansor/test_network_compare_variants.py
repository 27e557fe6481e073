"""``compare_network(variants=...)``: two compilations of our own (the benchmarks' fused against
separate, per-layer choice against direct) timed in the same alternation of fresh processes."""
from ansor.bench.network_compare import compare_network


def test_variants_are_timed_like_systems():
    seen = []
    out = compare_network("resnet-18", {"image_size": 32}, threads=1, rounds=2, say=seen.append,
                          variants={"choice": {"fuse_pairs": "auto"}, "direct": {"layouts": "nhwc"}})
    assert set(out) == {"choice", "direct"}
    for v in out.values():
        assert "error" not in v and len(v["rounds"]) == 2 and v["seconds"] > 0
    assert [m.split(":")[1].split()[0] for m in seen] == ["choice", "direct", "direct", "choice"]


def test_variants_with_a_peer_in_the_same_alternation():
    import pytest

    seen = []
    out = compare_network("resnet-18", {"image_size": 32}, threads=1, rounds=2, say=seen.append,
                          variants={"choice": {"fuse_pairs": "auto"}}, peers=("onnxruntime",))
    assert set(out) == {"choice", "onnxruntime"}
    assert all("error" not in v and len(v["rounds"]) == 2 for v in out.values())
    assert [m.split(":")[1].split()[0] for m in seen] == ["choice", "onnxruntime", "onnxruntime", "choice"]
    with pytest.raises(ValueError, match="peers must be peers"):
        compare_network("resnet-18", variants={"choice": {}}, peers=("ansor",))
