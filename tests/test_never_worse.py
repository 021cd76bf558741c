"""Models on which eqsat once raised Vela's inference cycles (`cycles_total`), or left a measured win on the
table: the real pipeline must now leave them no worse (and take the win)."""

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
    assert comparison.optimized.cycles_total <= comparison.stock.cycles_total


def test_no_reshape_is_left_with_fan_out_on_tds_conv1d_u55(tmp_path):
    """Rank-lowered transposes and merged reshapes once gave two reshapes a second reader: Vela kept them
    as MemoryCopy and NPU cycles rose from 102464 to 112368."""
    from benchmarks.zoo import get

    module, inputs = get("tds-conv1d").build()
    comparison = compare("tds-conv1d", module, inputs, "ethos-u55-128", workdir=tmp_path)
    assert comparison.bit_exact, comparison.mismatch
    assert comparison.optimized.cycles_total <= comparison.stock.cycles_total


def test_an_image_input_transpose_is_not_rank_lowered_into_a_memory_bound_one_on_u85(tmp_path):
    """A 3-channel image's NCHW -> NHWC transpose, rank-lowered to (3, H*W) -> (H*W, 3), lost NPU cycles
    but became memory-bound: vww on U85 went from 23011 to 52929 cycles_total with a 32x32 input."""
    from benchmarks.zoo import get

    module, inputs = get("mobilenet-v1-025-vww-96").build()
    comparison = compare("mobilenet-v1-025-vww-96", module, inputs, "ethos-u85-256", workdir=tmp_path)
    assert comparison.bit_exact, comparison.mismatch
    assert comparison.optimized.cycles_total <= comparison.stock.cycles_total


class ConvReturnedTwice(nn.Module):
    """A conv whose output is returned as it is and transposed: on U85 Vela folds the output transpose
    into the conv's write (0 cycles); two stand-alone rank-lowered transposes cost +75%."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(8, 16, 3, padding=1)

    def forward(self, x: torch.Tensor):
        y = self.conv(x)
        return y, y.permute(0, 2, 3, 1)


def test_a_transpose_folded_into_its_producer_stays_there_on_u85(tmp_path):
    comparison = compare("conv-returned-twice", ConvReturnedTwice().eval(), (torch.randn(1, 8, 16, 16),), "ethos-u85-256", workdir=tmp_path)
    assert comparison.bit_exact, comparison.mismatch
    assert comparison.optimized.cycles_total <= comparison.stock.cycles_total


def test_dense_conv1d_concats_extend_the_previous_one_on_u55(tmp_path):
    """The dense block's concats in 4-D and each as the previous one plus the new layer (concat-extends-concat):
    Vela copies 4 concat inputs instead of 14. Measured 44,520 -> 30,548 cycles_total (0.686); without the law
    eqsat left it at 44,520."""
    from benchmarks.zoo import get

    module, inputs = get("dense-conv1d").build()
    comparison = compare("dense-conv1d", module, inputs, "ethos-u55-128", workdir=tmp_path)
    assert comparison.bit_exact, comparison.mismatch
    assert comparison.optimized.cycles_total <= 0.75 * comparison.stock.cycles_total
    assert comparison.reports[0]["rules_fired"].get("concat-extends-concat", 0) > 0
