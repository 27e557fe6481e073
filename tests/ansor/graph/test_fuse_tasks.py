"""Fusion into subgraphs and task extraction (issue 16 item 3): which ops fuse, task identity
(name-independent workload keys) and weights on the zoo networks."""
import numpy as np
import pytest

import ansor
from ansor.graph import GraphBuilder, GraphError
from ansor.graph.fuse import fuse
from ansor.graph.plan import extract_tasks


def _conv_block(names=("c", "b", "r")):
    b = GraphBuilder("blk")
    x = b.input("x", (1, 8, 8, 4))
    w = b.constant(np.ones((3, 3, 4, 4), np.float32), "w")
    y = b.conv2d(x, w, b.constant(np.zeros(4, np.float32), "bias"), padding=1, name=names[0])
    y = b.relu(y, name=names[2])
    y = b.conv2d(y, w, padding=1, name="second")
    return b.build(b.relu(y, name="out"))


def test_conv_absorbs_elementwise_but_not_another_conv():
    groups = fuse(_conv_block())
    assert [[n.op for n in g.nodes] for g in groups] == [["conv2d", "add", "relu"], ["conv2d", "relu"]]
    assert groups[1].inputs[0] == groups[0].output


def test_depth_cap_one_disables_fusion():
    g = _conv_block()
    assert len(fuse(g, max_depth=1)) == len(g.nodes)
    with pytest.raises(GraphError, match="max_depth"):
        fuse(g, max_depth=0)


def test_value_with_two_readers_ends_its_group_and_opaque_fuses_nothing():
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    r = b.relu(x, name="r")
    s = b.softmax(b.add(r, r, name="a"), name="s")
    g = b.build(b.exp(s, name="e"))
    assert [[n.op for n in grp.nodes] for grp in fuse(g)] == [["relu", "add"], ["softmax"], ["exp"]]


def test_injective_chain_fuses():
    b = GraphBuilder()
    x = b.input("x", (2, 3, 4))
    y = b.reshape(b.transpose(b.relu(x), (0, 2, 1)), (8, 3))
    assert [[n.op for n in grp.nodes] for grp in fuse(b.build(y))] == [["relu", "transpose", "reshape"]]


def test_identical_subgraphs_share_one_task_whatever_their_names():
    b = GraphBuilder()
    x = b.input("x", (1, 8, 8, 4))
    w = [b.constant(np.random.default_rng(i).random((3, 3, 4, 4)).astype(np.float32), f"w{i}") for i in range(3)]
    y = b.relu(b.conv2d(x, w[0], padding=1, name="first"), name="weird\nname")
    y = b.relu(b.conv2d(y, w[1], padding=1, name="other"), name="r2")
    y = b.relu(b.conv2d(y, w[2], padding=1, strides=2, name="strided"), name="r3")
    tasks, weights = extract_tasks(b.build(y))
    assert weights == [2, 1]
    assert tasks[0].weight == 2 and len(tasks[0].group_names) == 2
    text = str(tasks[0])
    assert "weight 2" in text and "conv2d" in text and "\nname" not in text  # names escaped


def test_only_reductions_are_tasks_unless_asked():
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    g = b.build(b.reduce_mean(b.transpose(b.relu(x), (1, 0)), axes=(1,)))
    assert len(extract_tasks(g)[0]) == 1
    b2 = GraphBuilder()
    g2 = b2.build(b2.relu(b2.input("x", (4, 8))))
    assert extract_tasks(g2)[0] == []
    assert len(extract_tasks(g2, include_simple=True)[0]) == 1


@pytest.mark.parametrize("name, kwargs, n_tasks, total", [
    ("resnet-18", {"image_size": 64}, 18, 23),
    ("resnet-50", {"image_size": 64}, 27, 56),
    ("mobilenet-v2", {"image_size": 64}, 32, 54),
    ("bert-base-layer", {"seq_len": 16}, 8, 11),
    # Default sizes (224x224, sequence 128). Post-dominator fusion gives the same counts as
    # single-reader fusion here: these networks have no diamond whose every path is fusable.
    ("resnet-18", {}, 18, 23),
    ("resnet-50", {}, 27, 56),
    ("mobilenet-v2", {}, 32, 54),
    ("bert-base-layer", {}, 8, 11),
    ("efficientnet-b0", {}, 58, 99),  # the SE's pool and two 1x1 convs: tasks of their own
])
def test_zoo_task_counts(name, kwargs, n_tasks, total):
    tasks, weights = extract_tasks(ansor.networks.get(name, **kwargs))
    assert (len(tasks), sum(weights)) == (n_tasks, total)
    assert len({t.workload_key for t in tasks}) == len(tasks)
