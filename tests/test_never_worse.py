"""Models on which eqsat once raised Vela's cycles: the real pipeline must now leave them no worse."""

import torch
from torch import nn

from eqsat.compare import compare


class TransposedLinears(nn.Module):
    """Two Linear layers whose outputs are transposed and added: the transpose may move in front of the
    output RESCALE of the FC, onto int32 data, where it breaks Vela's fusion (+182% cycles on U55)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.a(x).transpose(1, 2) + self.b(x).transpose(1, 2)


def test_a_transpose_is_not_moved_onto_an_accumulator_on_u55(tmp_path):
    comparison = compare("transposed-linears", TransposedLinears().eval(), (torch.randn(1, 16, 8),), "ethos-u55-128", workdir=tmp_path)
    assert comparison.bit_exact, comparison.mismatch
    assert comparison.optimized.cycles_npu <= comparison.stock.cycles_npu


def test_no_reshape_is_left_with_fan_out_on_tds_conv1d_u55(tmp_path):
    """Rank-lowered transposes and merged reshapes once gave two reshapes a second reader: Vela kept them
    as MemoryCopy and cycles_npu rose from 102464 to 112368."""
    from benchmarks.zoo import get

    module, inputs = get("tds-conv1d").build()
    comparison = compare("tds-conv1d", module, inputs, "ethos-u55-128", workdir=tmp_path)
    assert comparison.bit_exact, comparison.mismatch
    assert comparison.optimized.cycles_npu <= comparison.stock.cycles_npu
