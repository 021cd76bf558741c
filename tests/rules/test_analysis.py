"""eqsat.rules.analysis: shapes and dtypes of terms the rewrites create match the tensors they stand for."""

from __future__ import annotations

import torch
from egglog import bindings

from eqsat.ir import Term
from eqsat.rules import StopReason, analysis
from eqsat.rules.transpose import transpose
from tests.graphs import GraphBuilder, tosa_lowering
from tests.rules.harness import Saturated

aten = torch.ops.aten


def test_new_transposes_and_concats_get_the_shape_and_dtype_of_their_tensors():
    g = GraphBuilder()
    x, y = g.input("x", (1, 2, 3, 4)), g.input("y", (1, 5, 3, 4))
    joined = g.call(aten.cat.default, [x, y], 1)
    moved = g.call(aten.permute_copy.default, joined, [0, 2, 3, 1])
    s = Saturated(g.output(moved), transpose)
    new_concat = next(t for t in s.terms_of(moved) if t.op == "Concat")
    part_classes = new_concat.args
    assert [s.view.types[c].shape for c in part_classes] == [(1, 3, 4, 2), (1, 3, 4, 5)]
    assert all(s.view.types[c].dtype == "torch.int8" for c in part_classes)
    assert s.view.types[s.class_of(moved)].shape == (1, 3, 4, 7)


def test_concat_offsets_are_the_running_sum_of_extents():
    g = GraphBuilder()
    parts = [g.input(f"p{i}", (2, extent)) for i, extent in enumerate((3, 1, 4))]
    joined = g.call(aten.cat.default, parts, 1)
    s = Saturated(g.output(joined))
    egraph = s.loaded.egraph
    assert s.result.iterations == 0
    egraph.run(analysis.analysis.saturate())
    assert Term("Concat", tuple(s.class_of(p) for p in parts), (1,)) in s.terms_of(joined)
    node_vec = "(vec-of (Node 0) (Node 1) (Node 2))"
    for index, offset in enumerate((0, 3, 4, 8)):  # (check ...) raises when the fact does not hold
        egraph._run_program(*egraph._egraph.parse_program(f"(check (= (concat_offset {node_vec} 1 {index}) {offset}))"))


def test_new_reduces_and_rescales_get_the_shape_and_dtype_of_their_tensors():
    from executorch.exir.dialects._ops import ops as exir_ops

    from eqsat.rules.rescale import rescale

    tosa = exir_ops.backend.tosa
    with tosa_lowering():
        g = GraphBuilder()
        x = g.input("x", (2, 3, 4), torch.int32)
        summed = g.call(tosa.TRANSPOSE.default, g.call(tosa.REDUCE_SUM.default, x, axis=0), [1, 2, 0])
        scaled = g.call(tosa.TRANSPOSE.default, g.call(tosa.RESCALE.default, x, torch.int8, [0.5], 0, 0), [2, 0, 1])
        s = Saturated(g.output(summed, scaled), transpose, rescale)
    new_reduce = next(t for t in s.terms_of(summed) if t.op == "Reduce")
    assert s.view.types[new_reduce.args[0]] == ((3, 4, 2), "torch.int32")
    new_rescale = next(t for t in s.terms_of(scaled) if t.op == "Rescale")
    assert s.view.types[new_rescale.args[0]] == ((4, 2, 3), "torch.int32")
    assert s.view.types[s.class_of(scaled)] == ((4, 2, 3), "torch.int8")


def test_hundreds_of_same_key_tables_are_typed_through_their_key():
    """300 TABLEs with one key, each under a transpose that moves through it: saturation ends in a few
    iterations, every new term typed. Table dtypes go through keyed_dtype (two atoms keyed on one table),
    not a join of every pair of same-key tables (300^2 candidates)."""
    from executorch.exir.dialects._ops import ops as exir_ops

    tosa = exir_ops.backend.tosa
    with tosa_lowering():
        g = GraphBuilder()
        lut = g.constant("lut", torch.arange(-128, 128, dtype=torch.int8).flip(0).contiguous())
        tables = [g.call(tosa.TABLE.default, g.input(f"x{i}", (1, 2, 3)), lut) for i in range(300)]
        moved = [g.call(tosa.TRANSPOSE.default, table, [0, 2, 1]) for table in tables]
        s = Saturated(g.output(*moved), transpose)
    assert s.result.stop_reason == StopReason.SATURATED
    assert s.result.iterations <= 3
    assert s.fired("transpose-through-table") == 300
    assert all(s.view.types[s.class_of(m)] == ((1, 3, 2), "torch.int8") for m in moved)
    new_inputs = [next(t for t in s.terms_of(m) if t.op == "Table").args[0] for m in moved]
    assert all(s.view.types[c] == ((1, 3, 2), "torch.int8") for c in new_inputs)


def test_permutation_lookups_are_the_inverse_and_the_pad_pairs():
    g = GraphBuilder()
    moved = g.call(aten.permute_copy.default, g.input("x", (2, 3, 4)), [2, 0, 1])
    cut = g.call(aten.slice_copy.Tensor, moved, 0, 1, 3)
    padded = g.call(aten.permute_copy.default, g.call(aten.constant_pad_nd.default, g.input("y", (2, 3, 4)), [1, 0]), [2, 0, 1])
    s = Saturated(g.output(cut, padded))
    egraph = s.loaded.egraph
    egraph.run(analysis.analysis.saturate())
    perm = "(vec-of 2 0 1)"
    facts = [
        f"(= (inverse_perm {perm} 3) (vec-of 1 2 0))",  # output dim inverse[d] is input dim d
        f"(= (paired_perm {perm} 3) (vec-of 4 5 0 1 2 3))",
        "(index_below 6 5)",
        "(index_below 1 0)",
    ]
    for fact in facts:  # (check ...) raises when the fact does not hold
        egraph._run_program(*egraph._egraph.parse_program(f"(check {fact})"))
    (sizes,) = egraph._egraph.run_program(bindings.PrintSize(bindings.RustSpan("", 0, 0), None))
    assert dict(sizes.sizes)["index_below"] == 21


def test_transposed_inputs_are_built_only_for_a_transposed_concat():
    g = GraphBuilder()
    parts = [g.input(f"p{i}", (2, 3)) for i in range(2)]
    joined = g.call(aten.cat.default, parts, 1)
    plain = g.call(aten.cat.default, parts, 0)
    s = Saturated(g.output(g.call(aten.permute_copy.default, joined, [1, 0]), plain))
    egraph = s.loaded.egraph
    egraph.run(analysis.analysis.saturate())
    node_vec = "(vec-of (Node 0) (Node 1))"
    egraph._run_program(
        *egraph._egraph.parse_program(
            f"(check (= (transposed_inputs {node_vec} (vec-of 1 0) 2) (vec-of (Transpose (Node 0) (vec-of 1 0)) (Transpose (Node 1) (vec-of 1 0)))))"
        )
    )
    (sizes,) = egraph._egraph.run_program(bindings.PrintSize(bindings.RustSpan("", 0, 0), None))
    assert dict(sizes.sizes)["transposed_inputs"] == 3  # [], [t0], [t0, t1]: none for the concat along axis 0
