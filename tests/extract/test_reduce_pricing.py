"""The cost model ranks an innermost REDUCE_MAX against its transposed form as Vela does, on both targets.

The law reduce-innermost-through-transpose (eqsat/rules/reduce.py) leaves the choice to the cost model, so
the model must see what Vela sees: an innermost reduction runs as a pool over one channel and costs several
times the transpose that moves the axis out of the way.
"""

import pytest
import torch

import eqsat
from eqsat import lowering, pipeline
from eqsat.extract.cost import cost_model_for
from eqsat.vela import estimate


class InnermostMax(torch.nn.Module):
    """x - amax(x, last dim): the softmax's max subtraction."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x - x.amax(dim=-1, keepdim=True)


class TransposedMax(torch.nn.Module):
    """The same value, the max taken over the last-but-one dim of the transposed tensor."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x - x.transpose(1, 2).amax(dim=1, keepdim=True).transpose(1, 2)


def vela_and_model_cycles(module: torch.nn.Module, target: str, workdir) -> tuple[int, float]:
    """Vela's cycles_total of module's stock lowering, and what the cost model charges for the graph eqsat is given."""
    torch.manual_seed(0)
    inputs = (torch.randn(1, 64, 32),)
    eqsat_pass = eqsat.install(target, keep_inputs=True, rules=())
    try:
        lowered = lowering.lower(lowering.quantize(module.eval(), inputs, target), target, workdir=workdir)
    finally:
        eqsat.uninstall()
    (graph,) = eqsat_pass.input_graphs
    return estimate(lowered.tosa_flatbuffers[0], target).cycles_total, pipeline.fx_graph_cost(graph, cost_model_for(target))


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u85-256"])
def test_the_transposed_reduce_max_is_cheaper_for_vela_and_for_the_model(target, tmp_path):
    vela_inner, model_inner = vela_and_model_cycles(InnermostMax(), target, tmp_path / "inner")
    vela_moved, model_moved = vela_and_model_cycles(TransposedMax(), target, tmp_path / "moved")
    assert vela_moved < vela_inner
    assert model_moved < model_inner
