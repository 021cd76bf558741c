"""The op registry is complete: every term the bridge reads and writes has one home with all its parts."""

from __future__ import annotations

import pytest
import torch
from egglog import EGraph

from eqsat import bridge_fx, ops, terms
from eqsat.extract.vela_cost import OpConfig, op_config
from eqsat.ir import TensorType, Term
from eqsat.ops import REGISTRY
from eqsat.ops.nodes import TOSA
from eqsat.ops.reference import SEMANTICS, evaluate
from tests.graphs import GraphBuilder, tosa_lowering

HANDLES = {"Node", "Element"}
"""Constructors that name tensors of the loaded graph and of rules, never read from or written to FX."""

SAMPLE_TERMS = {
    "Transpose": Term("Transpose", (0,), ((1, 0),)),
    "Concat": Term("Concat", (0, 1, 2), (1,)),
    "Slice": Term("Slice", (0,), ((0, 1), (2, 3))),
    "Reshape": Term("Reshape", (0,), ((6, 2, 1),)),
    "Pad": Term("Pad", (0,), ((0, 1, 2, 0), -3)),
    "Rescale": Term("Rescale", (0,), ("torch.int8", (1 << 30, 1 << 29), (31, 31), 0, 3, 7)),
    "Table": Term("Table", (0, 1), ("tosa.TABLE.default#4",)),
    "Reduce": Term("Reduce", (0,), ("tosa.REDUCE_SUM.default#2", 1)),
    "Elementwise": Term("Elementwise", (0, 1), ("tosa.ADD.default#1",)),
    "Opaque": Term("Opaque", (0,), ("tosa.CONV2D.default#0",)),
}


def constructor_names() -> set[str]:
    egraph = EGraph()
    terms.declare(egraph)
    return {name for name, table in egraph._egraph.freeze().functions.items() if table.output_sort == "Tensor"}


def test_every_term_constructor_the_bridge_reads_and_writes_has_a_registry_entry():
    assert constructor_names() - HANDLES == set(REGISTRY) == set(SAMPLE_TERMS)


def test_every_op_has_a_reader_an_emitter_fact_rows_and_a_load_rule_that_agree():
    for name, op in REGISTRY.items():
        assert op.name == name and callable(op.read) and callable(op.emit)
        term = SAMPLE_TERMS[name]
        table, row = op.fact_row(5, term)
        arity = int(table.rsplit("_", 1)[1])
        columns, body = op.load_rule(arity)
        assert table.rsplit("_", 1)[0] == name and row[0] == 5
        assert len(row) == 1 + len(columns), name  # the node index, then one value per column
        assert body.startswith(f"({name} "), body


def test_every_modelled_op_has_exact_semantics_for_each_of_its_tosa_targets():
    for name, op in REGISTRY.items():
        tosa_targets = {t for t in op.targets if t.startswith("tosa.")}
        assert name == "Opaque" or tosa_targets == set(op.reference), name
    assert set(REGISTRY["Opaque"].targets) == set()  # opaque ops are every other op: they run as themselves
    assert not set(REGISTRY["Opaque"].reference) & {t for op in REGISTRY.values() for t in op.targets}  # ...or as the fuzzer's reference


def test_data_movement_is_read_in_both_dialects():
    for op in REGISTRY.values():
        if op.moves_data:
            assert any(t.startswith("tosa.") for t in op.targets) and any(t.startswith("aten.") for t in op.targets), op.name


def test_each_fx_target_is_read_by_one_op():
    assert sum(len(op.targets) for op in REGISTRY.values()) == len(ops.BY_TARGET)


def test_the_cost_model_prices_every_registry_op():
    t = TensorType((2, 3), "torch.int8")
    for name, term in SAMPLE_TERMS.items():
        assert isinstance(op_config(term, t, [t] * len(term.args), "ethos-u55-128"), OpConfig), name


def test_a_tosa_op_without_reference_semantics_is_refused():
    g = GraphBuilder()
    x = g.input("x", (2, 3))
    with tosa_lowering():
        graph_module = g.output(g.call(TOSA.NEGATE.default, x))
    assert "tosa.NEGATE.default" not in SEMANTICS
    with pytest.raises(NotImplementedError, match="tosa.NEGATE"):
        evaluate(graph_module, [torch.zeros(2, 3, dtype=torch.int8)])


def one_node_of_each_op():
    """A TOSA-dialect graph with a node of every registry op (and the term each is read as)."""
    g = GraphBuilder()
    x = g.input("x", (2, 3, 4))
    wide = g.input("wide", (2, 1, 4), torch.int32)
    with tosa_lowering():
        nodes = [
            g.call(TOSA.TRANSPOSE.default, x, [2, 0, 1]),
            g.call(TOSA.CONCAT.default, [x, x], axis=1),
            g.call(TOSA.SLICE.default, x, g.const_shape((1, 0, 1)), g.const_shape((1, 2, 3))),
            g.call(TOSA.RESHAPE.default, x, g.const_shape((6, 4))),
            g.call(TOSA.PAD.default, x, g.const_shape((0, 1, 2, 0, 1, 1)), value=-3),
            g.call(TOSA.RESCALE.default, x, torch.int8, [0.5], 1, 2),
            g.call(TOSA.TABLE.default, x, g.constant("table", torch.zeros(256, dtype=torch.int8))),
            g.call(TOSA.REDUCE_SUM.default, g.call(TOSA.RESCALE.default, x, torch.int32, [1.0], 0, 0), axis=1),
            g.call(TOSA.ADD.default, g.call(TOSA.RESCALE.default, x, torch.int32, [1.0], 0, 0), wide),
            g.call(TOSA.MAX_POOL2D.default, g.call(TOSA.RESHAPE.default, x, g.const_shape((1, 2, 3, 4))), [1, 1], [1, 1], [0, 0, 0, 0]),
        ]
        graph_module = g.output(*nodes)
    read = bridge_fx.read_graph(graph_module)
    return [(node, read.terms[read.nodes.index(node)], read) for node in graph_module.graph.nodes if node.name in {n.name for n in nodes}]


def test_each_op_is_read_as_its_term_and_knows_its_output_shape():
    seen = set()
    for node, term, read in one_node_of_each_op():
        seen.add(term.op)
        inputs = [read.type_of(a).shape for a in term.args]
        expected = tuple(node.meta["val"].shape)
        assert REGISTRY[term.op].output_shape(term, inputs) in (expected, None if term.op == "Opaque" else expected), term
    assert seen == set(REGISTRY)


def test_a_pooling_is_read_with_its_window_in_its_key():
    """A pooling's price depends on its window, which is not among its tensor operands: its key carries it."""
    from eqsat.ir import window_of

    pools = [term for node, term, _ in one_node_of_each_op() if "MAX_POOL2D" in str(node.target)]
    assert [window_of(term.attrs[0]) for term in pools] == [(1, 1)]
    others = [term for node, term, _ in one_node_of_each_op() if term.op == "Opaque" and "POOL2D" not in str(node.target)]
    assert all(window_of(term.attrs[0]) is None for term in others)
