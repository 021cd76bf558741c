"""Vela's block configuration of a convolution, and what Vela's estimator computes over it.

Motivation
----------
Vela does not price a convolution by its MACs. regor's estimator
(architecture/ethosu55/ethos_u55_performance.cpp and
architecture/ethosu85/ethos_u85_performance.cpp, `EstimateMacOpCycles`) walks
the output in *OFM blocks* of the block configuration the architecture's
`FindBlockConfig` chose, each block a whole number of *microblocks* (the
output positions and channels the MAC array computes in one step). Per
block, the MAC array spends a few cycles per microblock per kernel step per
slice of input depth (`EstimateMacCyclesPerBlock`), and the output unit
spends a fixed fraction of a cycle per output element
(`EstimateAOCyclesPerElement`); the block costs the larger of the two, and
the op the sum over its blocks, plus its first IFM block's read and its last
OFM block's write. So a convolution whose output depth is just over a
microblock's, or whose input depth is just over the depth the MAC array reads
at once, costs nearly as much as one twice its size: a linear model in MACs
cannot see it, and mispriced small (Ethos-U55-32/64) and large
(Ethos-U85-512 and up) targets most.

Overview
--------
- `U55_ARCHITECTURES` and `U85_ARCHITECTURES` hold regor's per-target tables
  (`s_EthosU55Configs`, `s_EthosU65Configs`, `s_EthosU85Configs`, their
  `PerfInfo`); `sram_of` reads the SRAM's bandwidth, latencies and burst
  length from the vela.ini of the target's default system config.
- `block_config` finds the block configuration regor's search picks for a
  CONV2D or DEPTHWISE_CONV2D with int8 input and a fused int8 output
  (`ArchEthosU55::FindBlockConfig`; `ArchEthosU85::FindBlockConfig`,
  `FindUBlock`, `FindDepthwiseConfig`, `AreaFit`).
- `mac_op_cycles` follows `EstimateMacOpCycles` over that configuration:
  on every calibration sample of Ethos-U85 (Sram_Only) it equals Vela's NPU
  cycles exactly, and on Ethos-U55 where the weights do not bind.
- `element_access` follows `MeasureElementAccess` and `ElementTransferToBytes`:
  the feature-map bytes, in brick format (NHCWB16) or NHWC, and the weight
  re-reads the block configuration implies; `u85_access_cycles` follows
  Ethos-U85's `MeasureAccessCycles` over them, channel by channel
  (`channel_bandwidth`).

Not followed here: the weights Vela copies in from flash
(`NetworkPerformance::EstimateFullOpPerformance`, weight buffering: eqsat.extract.weights)
and their encoded size (estimated, `weights.ENCODED_WEIGHT_BYTES`). Not followed (the fitted
coefficients that use these numbers absorb it, eqsat/calibration/fit.py): sparse weights; 16-bit inputs;
dilation; an activation fused into the convolution (a CLAMP changes the
output unit's rate on Ethos-U55, `EstimateAOCyclesPerElement`); a
non-default system config's SRAM. Each op is searched alone, as Vela searches
a layer that no cascade shares.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from eqsat.configuration import Configuration

Shape3 = tuple[int, int, int]
"""(height, width, depth)."""

CACHED_SHAPES = 1 << 14
"""How many op shapes each search below keeps the answer for (least recently used out): a long-lived process that
lowers many models holds a bounded table."""

SUBKERNEL_MAX = (8, 8)
"""The largest kernel (height, width) the MAC unit runs in one pass; larger kernels are split into sub-kernels
(`ArchEthosU55::_subkernelMax`, `ArchEthosU85::_subkernelMax`, `s_SubkernelLimits`)."""
OFM_SPLIT_DEPTH = 16
"""`FindBlockConfig`'s OFMSplitDepth: a block shallower than the output is a multiple of it."""


def _round_away(value: int, align: int) -> int:
    return -(-value // align) * align


def _div_round_up(value: int, divisor: int) -> int:
    return -(-value // divisor)


def _shape_div(shape: Shape3, block: Shape3) -> Shape3:
    return tuple(_div_round_up(s, b) for s, b in zip(shape, block))  # type: ignore[return-value]


def _shape_min(a: Shape3, b: Shape3) -> Shape3:
    return tuple(min(x, y) for x, y in zip(a, b))  # type: ignore[return-value]


def _elements(shape: Shape3) -> int:
    return shape[0] * shape[1] * shape[2]


@dataclass(frozen=True)
class Kernel:
    """A convolution kernel: its size and stride (dilation 1)."""

    height: int
    width: int
    stride_y: int = 1
    stride_x: int = 1

    @property
    def elements(self) -> int:
        return self.height * self.width


@dataclass(frozen=True)
class BlockConfig:
    """A block configuration: the OFM block, the IFM block that feeds it, the microblock, the traversal
    ("depth_first", "part_kernel" or "depthwise"), and whether the weights are 2:4 sparse (Ethos-U85 only)."""

    ofm_block: Shape3
    ifm_block: Shape3
    microblock: Shape3
    traversal: str
    sparse: bool = False


@dataclass(frozen=True)
class U55Architecture:
    """One row of regor's `s_EthosU55Configs` (architecture/ethosu55/ethos_u55.cpp) or `s_EthosU65Configs`
    (architecture/ethosu65/ethos_u65.cpp: Ethos-U65 runs Ethos-U55's block search and estimator), with its PerfInfo."""

    macs: int
    cores: int
    microblock: Shape3
    ifm_microblock: Shape3
    shram_banks: int
    shram_granules: tuple[int, ...]
    """Per SHRAM element kind: IFM8, IFM16, IFM8_Elementwise, IFM16_Elementwise, IFM32, Acc16, Acc32, Acc40."""
    output_cycles: tuple[float, ...]
    activation_cycles: tuple[float, ...]


_U55_256_GRANULES = (8, 8, 8, 8, 16, 8, 16, 20)
U55_ARCHITECTURES = {
    "ethos-u55-32": U55Architecture(32, 1, (1, 1, 4), (1, 1, 8), 16, (2, 2, 2, 2, 4, 4, 4, 4), (2.0, 3.0, 3.0, 3.0, 4.0, 6.0, 1.0, 2.0), (1.0, 1.0, 0.0)),
    "ethos-u55-64": U55Architecture(64, 1, (1, 1, 8), (1, 1, 8), 16, (2, 2, 2, 2, 4, 4, 4, 8), (1.0, 1.5, 1.5, 1.5, 2.0, 3.0, 0.5, 1.0), (1.0, 1.0, 0.0)),
    "ethos-u55-128": U55Architecture(
        128, 1, (1, 2, 8), (1, 2, 8), 24, (4, 4, 4, 4, 8, 4, 8, 12), (0.75, 1.25, 0.75, 0.75, 1.0, 1.5, 0.25, 0.5), (1.0, 0.5, 0.0)
    ),
    "ethos-u55-256": U55Architecture(256, 1, (2, 2, 8), (2, 2, 8), 48, _U55_256_GRANULES, (0.625, 1.125, 0.5, 0.375, 0.5, 0.75, 0.125, 0.25), (1.0, 0.25, 0.0)),
    "ethos-u65-256": U55Architecture(256, 1, (2, 2, 8), (2, 2, 8), 48, _U55_256_GRANULES, (0.625, 1.125, 0.5, 0.375, 0.5, 0.75, 0.125, 0.25), (1.0, 0.25, 0.0)),
    "ethos-u65-512": U55Architecture(
        256, 2, (2, 2, 8), (2, 2, 8), 48, _U55_256_GRANULES, (0.3125, 0.5625, 0.25, 0.1875, 0.25, 0.375, 0.0625, 0.125), (0.5, 0.125, 0.0)
    ),
}
"""By target; Ethos-U65-512 is two 256-MAC cores."""

U55_OFM_BLOCK_MAX = (32, 64, 128)
"""`ArchEthosU55::_ofmBlockMax` (height, width, depth)."""
U55_SHRAM_BANK_BYTES = 1024
U55_SHRAM_RESERVED_OUTPUT_BANKS = 2
U55_IFM8, U55_ACC32 = 0, 6
"""Indices into `U55Architecture.shram_granules` (regor's `EthosU55SHRamElements`)."""
U55_ACC32_BITS = 32


@dataclass(frozen=True)
class U85Architecture:
    """One row of regor's `s_EthosU85Configs` (architecture/ethosu85/ethos_u85.cpp) and its `s_EthosU85PerfInfo`."""

    macs: int
    cores: int
    microblocks: tuple[Shape3, ...]
    ifm_ram_bytes: int
    acc_ram_bytes: int
    output_cycles: tuple[float, ...]
    ifm_alloc_units: dict[Shape3, tuple[Shape3, Shape3, Shape3]]
    """Per microblock, the IFM allocation unit for an IFM block depth of at most 128, 256 and more bits
    (`SetupOfmUBlockToIfmAuTable`), its depth in units of 128 bits."""
    conv_int8: tuple[Shape3, ...]
    """The microblocks on which a convolution with int8 input runs (`SetupOfmUBlockToOpTable`, 8-bit column)."""
    depthwise_int8: tuple[Shape3, ...]
    """The microblocks on which a depthwise convolution with int8 input runs."""
    pool_int16: tuple[Shape3, ...]
    """The microblocks on which a pooling with 16-bit input runs (`SetupOfmUBlockToOpTable`, 16-bit column)."""
    activation_cycles: tuple[float, float]
    """The output unit's cycles per element for an activation or transpose at full and at half throughput
    (`s_EthosU85PerfInfo`, `GetActivationCyclesPerElement`)."""
    channel_read_buffers: tuple[int, ...]
    """`channelRBs`: the read buffers of each DMA read channel (Mem2Mem, IFMStream, Weight, FastWeight, IFM, Scale),
    which bound a channel's bandwidth (`EthosU85Performance::ChannelBW`)."""


def _u85_architectures() -> dict[int, U85Architecture]:
    au = {
        "2x2": ((2, 2, 1), (1, 2, 2), (1, 1, 4)),
        "1x4": ((1, 4, 1), (1, 2, 2), (1, 1, 4)),
        "1024": ((2, 4, 1), (2, 2, 2), (1, 2, 4)),
        "1024-1x4": ((2, 4, 1), (1, 4, 2), (1, 2, 4)),
        "2048": ((4, 4, 1), (2, 4, 2), (2, 2, 4)),
        "2048-1x4": ((4, 4, 1), (2, 4, 2), (1, 4, 4)),
    }
    return {
        128: U85Architecture(
            128, 1, ((1, 2, 8), (1, 1, 16)), 8192, 8192, (0.5, 0.5, 0.5, 1.0, 1.0, 1.0),
            {(1, 2, 8): ((1, 2, 1), (1, 1, 2), (1, 1, 2)), (1, 1, 16): ((1, 2, 1), (1, 1, 2), (1, 1, 2))},
            conv_int8=((1, 2, 8),), depthwise_int8=((1, 1, 16),),
            pool_int16=((1, 2, 8),),
            activation_cycles=(0.5, 1.0), channel_read_buffers=(64, 64, 128, 128, 104, 16),
        ),
        256: U85Architecture(
            256, 1, ((1, 2, 16), (1, 4, 8), (2, 2, 8)), 16384, 16384, (0.25, 0.25, 0.25, 0.5, 0.5, 0.5),
            {(2, 2, 8): au["2x2"], (1, 2, 16): au["2x2"], (1, 4, 8): au["1x4"]},
            conv_int8=((1, 4, 8), (2, 2, 8)), depthwise_int8=((1, 2, 16),),
            pool_int16=((2, 2, 8), (1, 4, 8)),
            activation_cycles=(0.25, 0.5), channel_read_buffers=(104, 104, 128, 128, 128, 16),
        ),
        512: U85Architecture(
            512, 2, ((2, 2, 16), (1, 4, 16)), 16384, 32768, (0.125, 0.125, 0.25, 0.5, 0.25, 0.25),
            {(2, 2, 16): au["2x2"], (1, 4, 16): au["1x4"]},
            conv_int8=((2, 2, 16), (1, 4, 16)), depthwise_int8=((2, 2, 16), (1, 4, 16)),
            pool_int16=((2, 2, 16), (1, 4, 16)),
            activation_cycles=(0.125, 0.25), channel_read_buffers=(128, 128, 256, 256, 128, 16),
        ),
        1024: U85Architecture(
            1024, 4, ((2, 2, 32), (1, 4, 32), (2, 4, 16)), 16384, 65536, (0.0625, 0.125, 0.25, 0.5, 0.125, 0.25),
            {(2, 2, 32): au["1024"], (2, 4, 16): au["1024"], (1, 4, 32): au["1024-1x4"]},
            conv_int8=((2, 2, 32), (1, 4, 32), (2, 4, 16)), depthwise_int8=((2, 4, 16),),
            pool_int16=((2, 4, 16),),
            activation_cycles=(0.0625, 0.125), channel_read_buffers=(256, 256, 416, 208, 256, 16),
        ),
        2048: U85Architecture(
            2048, 4, ((2, 2, 64), (1, 4, 64), (4, 4, 16)), 32768, 131072, (0.03125, 0.0625, 0.125, 0.25, 0.0625, 0.125),
            {(2, 2, 64): au["2048"], (4, 4, 16): au["2048"], (1, 4, 64): au["2048-1x4"]},
            conv_int8=((2, 2, 64), (1, 4, 64), (4, 4, 16)), depthwise_int8=((4, 4, 16),),
            pool_int16=((4, 4, 16),),
            activation_cycles=(0.03125, 0.0625), channel_read_buffers=(256, 256, 512, 256, 256, 16),
        ),
    }


U85_ARCHITECTURES = _u85_architectures()
U85_OFM_BLOCK_MAX = (128, 128, 1024)
"""`ArchEthosU85::_ofmBlockMax` (height, width, depth)."""
U85_ACC_DEPTH_GRANULE = 16
"""`ACC_DEPTH_GRANULE`: the accumulator's depth granule, the depth step of every U85 OFM block."""
U85_ACC32_BITS = 32
UNPERMUTED: Shape3 = (0, 1, 2)
"""The permutation of an OFM written as it is computed (regor `TransposeType::None`)."""


def permuted(shape: Shape3, perm: Shape3) -> Shape3:
    """shape with its axes in perm's order: what an OFM written transposed by perm (regor `Shape::Permute`) looks like."""
    return (shape[perm[0]], shape[perm[1]], shape[perm[2]])


def _unpermuted(shape: Shape3, perm: Shape3) -> Shape3:
    """The shape that perm turns into shape (regor `Shape::Unpermute`)."""
    out = [0, 0, 0]
    for axis, size in zip(perm, shape):
        out[axis] = size
    return (out[0], out[1], out[2])


def _u85_granule(ublock: Shape3, transpose: Shape3, brick: bool) -> Shape3:
    """`ArchEthosU85::FindBlockConfig`'s `ofmBlockGranule`: the microblock, 16 channels deep; in brick format, a block
    whose width (height) is written as the output's depth is 16 wide (high), a brick's depth."""
    height, width = ublock[0], ublock[1]
    if brick and transpose[2] == 1:
        width = 16
    if brick and transpose[2] == 0:
        height = 16
    return (height, width, U85_ACC_DEPTH_GRANULE)


def architecture_of(target: str) -> U55Architecture | U85Architecture:
    """regor's architecture table row for a target name ("ethos-u55-64", "ethos-u65-256", "ethos-u85-1024")."""
    if target.startswith("ethos-u85"):
        return U85_ARCHITECTURES[int(target.rsplit("-", 1)[1])]
    return U55_ARCHITECTURES[target]


# ---------------------------------------------------------------- Ethos-U55


def _u55_part_kernel(in_depth: int, kernel: Kernel) -> bool:
    """`ChooseKernelMethod` (ethos_u55.cpp), int8: part-kernel-first when its MAC utilisation (input depth in 8s,
    kernel positions in 4s) is at least depth-first's (input depth in 32s)."""
    if in_depth <= 8:
        return True
    depth_utilisation = in_depth / _round_away(in_depth, 32)
    part_utilisation = in_depth / _round_away(in_depth, 8) * (kernel.elements / _round_away(kernel.elements, 4))
    return part_utilisation >= depth_utilisation


def _ifm_block_size(ofm_block: Shape3, kernel: Kernel, granule: Shape3) -> tuple[int, int]:
    """The IFM block (height, width) that feeds an OFM block, rounded to the granule (`GetArchIFMBlockSize`)."""
    height = (ofm_block[0] - 1) * kernel.stride_y + min(kernel.height, SUBKERNEL_MAX[0])
    width = (ofm_block[1] - 1) * kernel.stride_x + min(kernel.width, SUBKERNEL_MAX[1])
    return _round_away(height, granule[0]), _round_away(width, granule[1])


def _u55_fits(arch: U55Architecture, ofm_block: Shape3, ifm_block: Shape3) -> bool:
    """`ArchEthosU55::TryBlockConfig` for int8 input and 32-bit accumulators, no LUT: the IFM banks (double
    buffered, in granules) and the accumulator banks fit in SHRAM."""
    end_banks = 2 if arch.shram_banks > 16 else 0
    ifm_bytes = ifm_block[0] * ifm_block[1] * _round_away(ifm_block[2], 8)
    ifm_banks = _round_away(_div_round_up(ifm_bytes, U55_SHRAM_BANK_BYTES) * 2, arch.shram_granules[U55_IFM8])
    acc_bytes = ofm_block[0] * ofm_block[1] * _round_away(ofm_block[2], 8) * U55_ACC32_BITS // 8
    acc_banks = _round_away(_div_round_up(acc_bytes, U55_SHRAM_BANK_BYTES) * 2, arch.shram_granules[U55_ACC32])
    return U55_SHRAM_RESERVED_OUTPUT_BANKS + ifm_banks <= arch.shram_banks - end_banks - acc_banks


class _BlockChoice:
    """The running choice of `FindBlockConfig`'s search: the lowest relative cost, ties going to a small block
    that covers more of the IFM (regor's float arithmetic, in float32)."""

    def __init__(self) -> None:
        self.cost = np.float32(np.inf)
        self.coverage = np.float32(np.inf)
        self.found: tuple | None = None

    def offer(self, cost: np.float32, ifm_hw: tuple[int, int], ifm_shape: Shape3, small: bool, found: tuple) -> None:
        if cost > self.cost:
            return
        if cost == self.cost:
            covered = max(min(ifm_shape[0], ifm_hw[0]) * min(ifm_shape[1], ifm_hw[1]), 1)
            coverage = np.float32(ifm_shape[0] * ifm_shape[1]) / np.float32(covered)
            if not (coverage <= self.coverage and small):
                return
            self.coverage = coverage
        else:
            self.coverage = np.float32(np.inf)
        self.cost = cost
        self.found = found


def _relative_cost(
    ofm_shape: Shape3,
    ofm_block: Shape3,
    ifm_hw: tuple[int, int],
    ifm_shape: Shape3,
    kernel: Kernel,
    depthwise: bool,
    ifm_block_elements: int,
    weights: bool = True,
) -> np.float32:
    """The block search's cost: IFM and weight fetches per output element, halved when the whole IFM fits in two
    IFM blocks (`FindBlockConfig`, both architectures; float32 as in regor). depthwise: an op of equal IFM and OFM
    depth; weights: whether it fetches any (a pooling op does not)."""
    f = np.float32
    full = _shape_div(ofm_shape, ofm_block)
    repeats = _div_round_up(kernel.width, SUBKERNEL_MAX[1]) * _div_round_up(kernel.height, SUBKERNEL_MAX[0])
    weight_fetch = f(kernel.elements * ifm_shape[2] * full[0] * full[1] if weights else 0)
    if not depthwise:
        weight_fetch *= f(ofm_shape[2]) / f(ofm_block[2]) * f(ofm_block[2])
    ifm_fetch = f(ifm_hw[0] * ifm_hw[1] * ifm_shape[2] * repeats) * (f(ofm_shape[1]) / f(ofm_block[1])) * (f(ofm_shape[0]) / f(ofm_block[0]))
    if not depthwise:
        ifm_fetch *= f(full[2])
    cost = (ifm_fetch + weight_fetch) / f(_elements(ofm_shape))
    if _elements(ifm_shape) < ifm_block_elements * 2:
        cost /= f(2)
    return f(cost)


def _u55_block_config(arch: U55Architecture, ifm_shape: Shape3, ofm_shape: Shape3, kernel: Kernel, depthwise: bool, pooling: bool = False) -> BlockConfig:
    """`ArchEthosU55::FindBlockConfig` for a CONV2D or DEPTHWISE_CONV2D (or, pooling, a pooling op: of equal depths,
    without weights) with int8 input: over OFM blocks of whole microblocks up to `U55_OFM_BLOCK_MAX` that fit in
    SHRAM, the one with the least IFM and weight fetching per output element."""
    ublock = arch.microblock
    depthwise = depthwise or pooling
    part_kernel = not depthwise and _u55_part_kernel(ifm_shape[2], kernel)
    ifm_block_depth = _round_away(min(ifm_shape[2], 16 if part_kernel else 32), arch.ifm_microblock[2])
    space = tuple(_round_away(min(o, m), u) for o, m, u in zip(ofm_shape, U55_OFM_BLOCK_MAX, ublock))
    choice, wont_fit = _BlockChoice(), set()
    depth = max(ublock[2], min(space[2], OFM_SPLIT_DEPTH))
    if depth < ofm_shape[2]:
        depth = _round_away(depth, OFM_SPLIT_DEPTH)
    while depth <= space[2]:
        for height in range(ublock[0], space[0] + 1, ublock[0]):
            for width in range(ublock[1], space[1] + 1, ublock[1]):
                if (height, width) in wont_fit:
                    continue
                ifm_hw = _ifm_block_size((height, width, depth), kernel, ublock)
                ifm_block = (*ifm_hw, depth if depthwise else ifm_block_depth)
                fitted = (height, width, depth)
                if ofm_shape[0] == 1 and kernel.height == 1 and ublock[0] == 2:  # FitBlockForOFM: the Conv1D optimisation
                    fitted = (1, width, depth)
                if not _u55_fits(arch, fitted, ifm_block):
                    wont_fit.add((height, width))
                    continue
                cost = _relative_cost(ofm_shape, fitted, ifm_hw, ifm_shape, kernel, depthwise, _elements(ifm_block), not pooling)
                choice.offer(cost, ifm_hw, ifm_shape, height <= 4 and width <= 4, ((height, width, depth), ifm_block))
        depth += ublock[2]
        if depth < ofm_shape[2]:
            depth = _round_away(depth, OFM_SPLIT_DEPTH)
    if choice.found is None:
        raise ValueError(f"no Ethos-U55-{arch.macs} block configuration for {ofm_shape}")
    ofm_block, ifm_block = choice.found
    traversal = "pooling" if pooling else "depthwise" if depthwise else "part_kernel" if part_kernel else "depth_first"
    return BlockConfig(ofm_block, ifm_block, ublock, traversal)


def _u55_microblock(arch: U55Architecture, ofm_shape: Shape3, kernel: Kernel, depthwise: bool) -> Shape3:
    """`GetOfmMicroBlock` (ethos_u55_performance.cpp): a convolution with a one-row kernel over a one-row output of
    even width runs 1x4 microblocks on a 2x2 microblock array."""
    ublock = arch.microblock
    if ublock[0] == 2 and not depthwise and ofm_shape[0] == 1 and ofm_shape[1] % 2 == 0 and kernel.height == 1:
        return (1, 4, ublock[2])
    return ublock


def _u55_mac_cycles_per_block(arch: U55Architecture, config: BlockConfig, ifm_shape: Shape3, ofm_shape: Shape3, kernel: Kernel, ublock: Shape3) -> int:
    """`EthosU55Performance::EstimateMacCyclesPerBlock`, int8 input and 32-bit accumulators: per sub-kernel, 4 cycles per
    microblock (at least one weight-buffer refill's, `cyclesWb`) per kernel step, plus the pipeline delay of a block
    of one microblock; times the slices of input depth of a depth-first convolution. A pooling op takes one kernel
    step of at least 4 cycles per microblock, times 4 (half the input's bits) on every size but Ethos-U55-32."""
    ifm_block = _shape_min(ifm_shape, config.ifm_block)
    units = _shape_div(_shape_min(ofm_shape, config.ofm_block), ublock)
    units_hw = units[0] * units[1]
    refill = 32 * ublock[2] // 8
    delay = 3 if arch.macs == 32 and arch.cores == 1 else 2  # IsU55_32
    total = 0
    for x in range(0, kernel.width, SUBKERNEL_MAX[1]):
        for y in range(0, kernel.height, SUBKERNEL_MAX[0]):
            sub = min(kernel.height - y, SUBKERNEL_MAX[0]) * min(kernel.width - x, SUBKERNEL_MAX[1])
            depth_slices = _div_round_up(ifm_block[2], 8) if config.traversal == "part_kernel" else 1
            if config.traversal == "pooling":
                steps, cycles = 1, max(4, sub) * units_hw * units[2] * (1 if arch.macs == 32 else 8 // 2)
            else:
                steps = sub if config.traversal == "depth_first" else _div_round_up(sub, 4)
                cycles = max(refill, 4 * units_hw) * steps * units[2] * depth_slices
            delays = 0
            if units_hw == 1:
                if units[2] == 1:
                    delays = delay * steps
                elif steps > 1:
                    delays = delay * (steps - 1) * units[2]
            total += cycles + delays * depth_slices
    if config.traversal not in ("depthwise", "pooling"):
        total *= _div_round_up(ifm_shape[2], ifm_block[2])
    return total // arch.cores


U55_OUTPUT_RATE = {"int32 operands": 1, "MUL": 3, "ADD": 5, "SUB": 5}
"""Indices into `U55Architecture.output_cycles` (regor `EstimateAOCyclesPerElement`): an elementwise op reading 32-bit
operands, a MUL, and an ADD or SUB, which regor always prices as "advanced" (it never picks the simple add's index 4)."""
U55_ACTIVATION_RATE = {"clamp": 2, None: 0}
"""Indices into `U55Architecture.activation_cycles`: a fused CLAMP (regor `OpType::Clamp`, "other"), and no fused
activation, whose index stays 0, the rate of a table lookup."""


def u55_elementwise_cycles(target: str, op: str, elements: int, reads_int32: bool, clamped: bool) -> int:
    """NPU cycles of an ADD, SUB or MUL run as an Ethos-U55 (or U65) elementwise pass writing `elements` values.

    regor `EthosU55Performance::EstimateElementwiseCycles`: the output unit's ceil(rate * elements), where
    `EstimateAOCyclesPerElement`'s rate is the larger of the op's output rate (`U55_OUTPUT_RATE`: 32-bit operands
    first, so an op whose input RESCALEs run alone reads int32) and its fused activation's (`U55_ACTIVATION_RATE`:
    with none, a table lookup's rate, 1 cycle per element on every size but Ethos-U65-512). So an ADD whose input
    rescales are fused costs 6 cycles per element on Ethos-U55-32 and 1.5 on U55-128, one reading int32 3 and 1.25.
    Measured exact against Vela 5.1 on ADD and MUL, with and without a CLAMP, reading int8 or int32, on five shapes of
    depth 3 to 24 and every Ethos-U55 size (tests/extract/test_blocks.py checks two shapes); Vela counts no padding to
    a 16-deep brick here.

    Not followed: the command-issue bound ((a block's memory-transfer cycles / its elements + rate) / 4 per element),
    which exceeds the rate only when a block's transfer takes over 3 * rate cycles per element, and a MUL writing
    int32 (index 2, which differs from a MUL's only on Ethos-U55-256 and U65, and is hidden there by the activation
    rate unless a CLAMP is fused)."""
    arch = U55_ARCHITECTURES[target]
    output = arch.output_cycles[U55_OUTPUT_RATE["int32 operands" if reads_int32 else op]]
    activation = arch.activation_cycles[U55_ACTIVATION_RATE["clamp" if clamped else None]]
    return math.ceil(max(output, activation) * elements)


@functools.lru_cache(maxsize=CACHED_SHAPES)
def u55_memory_copy_cycles(target: str, shape3: Shape3) -> int:
    """NPU cycles of an Ethos-U55 (or U65) MemoryCopy of an int8 (height, width, depth) block, NHWC on both sides:
    the copy of a concat input, of a slice, of a reshape that is not removed.

    regor runs a MemoryCopy as a 1x1 pooling op (`ArchEthosU55::GetHWOp`: `UseAvgPoolNop`), so it is
    `EstimateMacOpCycles` over the block `FindBlockConfig` picks for a pooling op (equal depths, no weights): per
    OFM block, 16 cycles per microblock (4 on Ethos-U55-32) against the output unit's rate of a convolution
    (`EstimateAOCyclesPerElement` index 7), whichever is slower; plus the first IFM block's read and the last OFM
    block's write. Measured exact against Vela 5.1 on every Ethos-U55 size: 15 copies each (concat inputs from a
    graph input, a returned and a shared convolution output; five shapes), and access cycles below the NPU
    cycles on all of them. A copy reading or writing brick format (NHCWB16) is a few percent cheaper where the depth
    is not a multiple of 16 (a (1, 32, 24) copy 2150 cycles against 2200 on Ethos-U55-64), which is not followed.
    """
    arch, sram = architecture_of(target), sram_of(target)
    assert isinstance(arch, U55Architecture)
    kernel = Kernel(1, 1)
    config = _u55_block_config(arch, shape3, shape3, kernel, False, pooling=True)
    mac = _u55_mac_cycles_per_block(arch, config, shape3, shape3, kernel, arch.microblock)
    ofm_block = _shape_min(shape3, config.ofm_block)
    blocks = _elements(_shape_div(shape3, arch.microblock)) / _elements(_shape_div(ofm_block, arch.microblock))
    output = math.ceil(ao_cycles_per_element(target) * _elements(ofm_block))
    ifm_read = sram.read_latency + int(_memory_transfer(True, config.ifm_block, shape3, arch.cores, sram, False) / sram.bandwidth)
    ofm_write = sram.write_latency + int(_memory_transfer(False, config.ofm_block, shape3, arch.cores, sram, False) / sram.bandwidth)
    return _block_op_cycles(mac, output, blocks, ifm_read, ofm_write)


# ---------------------------------------------------------------- Ethos-U85


def _u85_sparse(in_depth: int) -> bool:
    """Whether Vela runs an Ethos-U85 CONV2D with 2:4 sparse weights: it does when its weights are (two zeros in
    every four input channels, `EthosU85WeightEncoder`) and that takes fewer cycles, which halving the MAC cycles
    always does (`Scheduler::EncodeBestWeightFormat`). Certain over one or two input channels, padded to four with
    zeros (a 10x4 convolution of 1 to 32 channels on Ethos-U85-1024: 1141 cycles, as sparse); over more, the
    weights' values decide, which a term does not carry: dense is assumed."""
    return in_depth <= 2


def _u85_part_kernel(in_depth: int, kernel: Kernel, sparse: bool) -> bool:
    """`ChooseKernelFirst` (ethos_u85.cpp): kernel-first when its utilisation (input depth in 16s, kernel positions
    in 5s with at least 2 left over; sparse: in 10s with 4) is at least depth-first's (input depth in 64s; 128)."""
    k = kernel.elements
    group, least = (10, 4) if sparse else (5, 2)
    k_rounded = (k // group) * group + max(k % group, least)
    kernel_first = in_depth / _round_away(in_depth, 16) * (k / k_rounded)
    return kernel_first >= in_depth / _round_away(in_depth, 128 if sparse else 64)


def _u85_microblock(arch: U85Architecture, ofm_shape: Shape3, depthwise: bool, pool_int16: bool = False) -> Shape3:
    """`ArchEthosU85::FindUBlock`: of the microblocks the op runs on with int8 input (`IsUBlockValid`; the 1x1-kernel
    exception of 128 and 256 MACs is for 16-bit input), or a pooling with 16-bit input, the one that rounds the output
    up least (the first of equals)."""
    runs_on = arch.pool_int16 if pool_int16 else arch.depthwise_int8 if depthwise else arch.conv_int8
    valid = [u for u in arch.microblocks if u in runs_on]
    return min(valid, key=lambda u: _elements(tuple(_round_away(s, b) for s, b in zip(ofm_shape, u))) - _elements(ofm_shape))


def _u85_alloc_unit(arch: U85Architecture, ifm_block_depth: int, ublock: Shape3) -> Shape3:
    """`ArchEthosU85::CalcIfmAUSize`, int8: the IFM allocation unit for an IFM block depth."""
    bits = ifm_block_depth * 8
    unit = arch.ifm_alloc_units[ublock][2 if bits > 256 else 1 if bits > 128 else 0]
    return (unit[0], unit[1], unit[2] * 16)


def _u85_ifm_block(ofm_block: Shape3, kernel: Kernel, unit: Shape3, ifm_block_depth: int) -> Shape3:
    """`GetArchIFMBlockSize` (ethos_u85.cpp): the IFM block for an OFM block, in allocation units."""
    height, width = _ifm_block_size(ofm_block, kernel, unit)
    return (height, width, _round_away(ifm_block_depth or ofm_block[2], unit[2]))


def _u85_fits(arch: U85Architecture, ofm_block: Shape3, ifm_block: Shape3, ifm_shape: Shape3, unit_depth: int, blocks_in_ram: int, equal_depth: bool) -> bool:
    """`ArchEthosU85::TryBlockConfig`, int8 input and 32-bit accumulators: `blocks_in_ram` IFM and accumulator blocks
    fit in their RAMs."""
    depth = ofm_block[2] if equal_depth else min(ifm_block[2], ifm_shape[2])
    ifm_bytes = ifm_block[0] * ifm_block[1] * _round_away(depth, unit_depth) * blocks_in_ram
    acc_bytes = ofm_block[0] * ofm_block[1] * _round_away(ofm_block[2], U85_ACC_DEPTH_GRANULE) * U85_ACC32_BITS // 8 * blocks_in_ram
    return ifm_bytes <= arch.ifm_ram_bytes and acc_bytes <= arch.acc_ram_bytes


def _u85_conv_block_config(arch: U85Architecture, ifm_shape: Shape3, ofm_shape: Shape3, kernel: Kernel, transpose: Shape3, brick: bool) -> BlockConfig:
    """`ArchEthosU85::FindBlockConfig` for a CONV2D with int8 input: the IFM block depth is fixed (64 channels, 16
    kernel-first, 128 depth-first with sparse weights, `_u85_sparse`), and the OFM block is searched as on
    Ethos-U55, in RAMs that hold two blocks (one if nothing fits). An OFM written transposed is searched in the
    convolution's orientation, under the block maximum unpermuted and in its granule (`_u85_granule`)."""
    sparse = _u85_sparse(ifm_shape[2])
    part_kernel = _u85_part_kernel(ifm_shape[2], kernel, sparse)
    ublock = _u85_microblock(arch, ofm_shape, False)
    ifm_block_depth = 16 if part_kernel else 128 if sparse else 64
    step = tuple(max(u, g) for u, g in zip(ublock, _u85_granule(ublock, transpose, brick)))
    block_max = _unpermuted(U85_OFM_BLOCK_MAX, transpose)
    end = tuple(_round_away(max(min(o, m), s), u) for o, m, s, u in zip(ofm_shape, block_max, step, ublock))
    unit = _u85_alloc_unit(arch, ifm_block_depth, ublock)
    restart = depth = max(ublock[2], min(end[2], OFM_SPLIT_DEPTH))
    if depth < ofm_shape[2]:
        depth = _round_away(depth, OFM_SPLIT_DEPTH)
    choice, wont_fit, blocks_in_ram = _BlockChoice(), set(), 2
    while depth <= end[2]:
        for height in range(step[0], end[0] + 1, step[0]):
            for width in range(step[1], end[1] + 1, step[1]):
                if (height, width) in wont_fit:
                    continue
                ofm_block = (height, width, depth)
                ifm_block = _u85_ifm_block(ofm_block, kernel, unit, ifm_block_depth)
                if not _u85_fits(arch, ofm_block, ifm_block, ifm_shape, unit[2], blocks_in_ram, False):
                    wont_fit.add((height, width))
                    continue
                cost = _relative_cost(ofm_shape, ofm_block, ifm_block[:2], ifm_shape, kernel, False, _elements(ifm_block))
                choice.offer(cost, ifm_block[:2], ifm_shape, height <= 4 and width <= 4, (ofm_block, (*ifm_block[:2], ifm_block_depth)))
        depth += ublock[2]
        if depth < ofm_shape[2]:
            depth = _round_away(depth, OFM_SPLIT_DEPTH)
        if depth > end[2] and choice.found is None and blocks_in_ram == 2:
            blocks_in_ram, depth = 1, restart
            wont_fit.clear()
    if choice.found is None:
        raise ValueError(f"no Ethos-U85-{arch.macs} block configuration for {ofm_shape}")
    ofm_block, ifm_block = choice.found
    return BlockConfig(ofm_block, ifm_block, ublock, "part_kernel" if part_kernel else "depth_first", sparse)


def _best_tile(size: int, granule: int, tile: int) -> int:
    """`BestTile` (ethos_u85.cpp): a tile near `tile` whose last, partial tile is fullest."""
    if size % tile == 0:
        return tile
    tiles = size // tile
    second = max(_round_away(size // (tiles + 1), granule), granule)
    best, best_rest = tile, size % tile
    for t in range(tile, max(max(second - granule * 2, (second + 1) // 2), granule) - 1, -granule):
        rest = size % t or t
        if rest > best_rest:
            best, best_rest = t, rest
    return best


def _fit_area_by_aspect(aspect: float, area: int, granule: tuple[int, int]) -> tuple[int, int]:
    """`FitAreaByAspect`: the (width, height) of about `area` positions in the output's aspect, on the granule."""
    w = math.sqrt(area / aspect)
    h = w * aspect
    if h < 1.0:
        w, h = w * h, 1.0
    elif w < 1.0:
        w, h = 1.0, h * w
    width = max(int(w), granule[0])
    height = max(int(h), granule[1])
    return width - width % granule[0], height - height % granule[1]


def _u85_area_fit(arch: U85Architecture, ofm_shape: Shape3, limit: Shape3, ifm_shape: Shape3, kernel: Kernel, ublock: Shape3, granule: Shape3) -> Shape3:
    """`ArchEthosU85::AreaFit`, int8 depthwise (no fixed IFM block depth): per block depth, the largest block of the
    output's aspect whose accumulators and IFM fit, scored by how well it covers the output."""
    acc_elements = arch.acc_ram_bytes * 8 // U85_ACC32_BITS
    ib_elements = arch.ifm_ram_bytes
    ub_acc = ublock[0] * ublock[1] * U85_ACC_DEPTH_GRANULE
    aspect = ofm_shape[0] / ofm_shape[1]
    depth_first = kernel.height == 1 and kernel.width == 1
    area = ofm_shape[1] * ofm_shape[2] if depth_first else ofm_shape[0] * ofm_shape[1]
    best, best_metric = None, math.inf
    max_depth = min(max(arch.macs, acc_elements // ub_acc), limit[2])
    for depth in range(U85_ACC_DEPTH_GRANULE, max_depth + 1, U85_ACC_DEPTH_GRANULE):
        fit_acc = acc_elements
        unit = _u85_alloc_unit(arch, depth, ublock)
        ifm_volume = _elements(tuple(_round_away(s, u) for s, u in zip(ifm_shape, unit)))
        fitted, previous, retry = False, -1, 25
        while True:
            width, height = _fit_area_by_aspect(aspect, fit_acc // depth, (granule[1], granule[0]))
            width, height = min(width, limit[1]), min(height, limit[0])
            positions = width * height
            if width < ofm_shape[1]:
                width = _best_tile(ofm_shape[1], granule[1], width)
            height = max((positions // width) - (positions // width) % granule[0], granule[0])
            acc_required = width * height * depth
            ab_ratio = acc_elements / acc_required
            ib_required = min(_elements(_u85_ifm_block((height, width, depth), kernel, unit, 0)), ifm_volume)
            ib_ratio = ib_elements / ib_required
            if ab_ratio >= 1.0 and ib_ratio >= 1.0:
                used = depth % unit[2] or unit[2]
                waste = 1.0 + ((unit[2] - used) / unit[2]) / 10
                fit = 1.0 + abs(1.0 - limit[2] / depth) / 10
                coverage = 1.0 + abs(1.0 - area / (width * (depth if depth_first else height)))
                metric = coverage * fit * waste
                if metric < best_metric:
                    best, best_metric = (height, width, depth), metric
                    if depth >= ofm_shape[2] and width >= ofm_shape[1] and height >= ofm_shape[0]:
                        return tuple(_round_away(s, g) for s, g in zip(ofm_shape, granule))  # type: ignore[return-value]
                fitted = True
                break
            if acc_required == previous:
                retry -= 1
                if retry <= 0:
                    ib_ratio = 0.9
            previous = acc_required
            if ib_ratio < 1.0 and ab_ratio > 1.0:
                fit_acc = min(fit_acc, acc_required)
            granules = fit_acc // ub_acc
            new_acc = max(int(granules * min(ib_ratio, ab_ratio)), 0) * ub_acc
            if new_acc == fit_acc:
                new_acc = fit_acc - ub_acc
            if new_acc < ub_acc:
                break
            fit_acc = new_acc
        if not fitted:
            break
    if best is None:
        raise ValueError(f"no Ethos-U85-{arch.macs} depthwise block for {ofm_shape}")
    return best


def _u85_depthwise_block_config(
    arch: U85Architecture, ifm_shape: Shape3, ofm_shape: Shape3, kernel: Kernel, transpose: Shape3, brick: bool, pool_int16: bool = False
) -> BlockConfig:
    """`ArchEthosU85::FindDepthwiseConfig`, int8 (or, for a pooling with 16-bit input, on its microblocks only):
    `AreaFit`'s block, shrunk (height, then depth, then width) until the IFM RAM also holds a further row of IFM
    when the block does not cover the output. An OFM written transposed is searched as `_u85_conv_block_config`
    searches it."""
    ublock = _u85_microblock(arch, ofm_shape, True, pool_int16)
    granule = _u85_granule(ublock, transpose, brick)
    padded = tuple(_round_away(s, g) for s, g in zip(ofm_shape, granule))
    limit = _shape_min(padded, _unpermuted(U85_OFM_BLOCK_MAX, transpose))
    height, width, depth = _u85_area_fit(arch, padded, limit, ifm_shape, kernel, ublock, granule)
    ib_elements = arch.ifm_ram_bytes
    force = 0
    while True:
        unit = _u85_alloc_unit(arch, depth, ublock)
        ifm_block = _u85_ifm_block((height, width, depth), kernel, unit, 0)
        if width < padded[1] or height < padded[0] or depth < padded[2]:
            row = _u85_ifm_block((granule[0], width, depth), kernel, unit, 0)
            if ib_elements - _elements(ifm_block) < _elements(row):
                if (height != padded[0] or force & 2) and height > granule[0]:
                    height -= granule[0]
                elif (depth > width or force & 1) and depth > unit[2]:
                    depth -= unit[2]
                elif (width != padded[1] or force & 4) and width > granule[1]:
                    width -= granule[1]
                elif force != 7:
                    force = (force << 1) | 1
                elif depth > granule[2]:
                    depth = max(depth // 2, granule[2])
                else:
                    break
                continue
        break
    return BlockConfig((height, width, depth), ifm_block, ublock, "depthwise")


def _u85_mac_cycles_per_block(arch: U85Architecture, config: BlockConfig, ifm_shape: Shape3, ofm_shape: Shape3, kernel: Kernel) -> int:
    """`EthosU85Performance::EstimateMacCyclesPerBlock`, int8 input and 32-bit accumulators: per sub-kernel, per
    microblock and kernel step, a depth-first convolution takes a cycle per 8 channels of its (clipped) IFM block
    depth, a kernel-first one 4 cycles per 8 channels per 4 kernel positions, a depthwise one 4 cycles per 4 kernel
    positions; each at least the weight decoder's `cyclesWb`; plus the pipeline delay of a one-microblock block;
    a convolution times its slices of input depth."""
    ublock = config.microblock
    ifm_block = _shape_min(ifm_shape, config.ifm_block)
    units = _shape_div(_shape_min(ofm_shape, config.ofm_block), ublock)
    units_hw = units[0] * units[1]
    refill = 32 * ublock[2] // (8 * arch.cores)
    total = 0
    for x in range(0, kernel.width, SUBKERNEL_MAX[1]):
        for y in range(0, kernel.height, SUBKERNEL_MAX[0]):
            sub = min(kernel.height - y, SUBKERNEL_MAX[0]) * min(kernel.width - x, SUBKERNEL_MAX[1])
            depth_slices = 1
            if config.traversal == "depthwise":
                steps = _div_round_up(sub, 4)
                cycles = max(refill, 4 * units_hw) * steps * units[2]
            elif config.traversal == "depth_first":
                steps = sub
                cycles = max(refill, ifm_block[2] // 8 * units_hw) * steps * units[2]
            else:
                steps = _div_round_up(sub, 4)
                depth_slices = _div_round_up(ifm_block[2], 8)
                cycles = max(refill, 4 * units_hw) * steps * units[2] * depth_slices
            if config.sparse:
                cycles //= 2
            delays = 0
            if units_hw == 1:
                if units[2] == 1:
                    delays = 2 * steps
                elif steps > 1:
                    delays = 2 * (steps - 1) * units[2]
            total += cycles + delays * depth_slices
    if config.traversal != "depthwise":
        total *= _div_round_up(ifm_shape[2], ifm_block[2])
    return total


# ---------------------------------------------------------------- both


@functools.lru_cache(maxsize=CACHED_SHAPES)
def block_config(target: str, ifm_shape: Shape3, ofm_shape: Shape3, kernel: Kernel, depthwise: bool, transpose: Shape3 = UNPERMUTED, brick: bool = True) -> BlockConfig:
    """The block configuration Vela's `FindBlockConfig` picks on target for a CONV2D (or a DEPTHWISE_CONV2D) from
    an int8 (height, width, depth) IFM to an (height, width, depth) OFM, written transposed by transpose (Ethos-U85;
    in brick format unless brick is False)."""
    arch = architecture_of(target)
    if isinstance(arch, U55Architecture):
        assert transpose == UNPERMUTED, "Ethos-U55 writes no OFM transposed"
        return _u55_block_config(arch, ifm_shape, ofm_shape, kernel, depthwise)
    if depthwise:
        return _u85_depthwise_block_config(arch, ifm_shape, ofm_shape, kernel, transpose, brick)
    return _u85_conv_block_config(arch, ifm_shape, ofm_shape, kernel, transpose, brick)


AXI_PORT_BYTES_PER_CYCLE = {"ethos-u55": 8, "ethos-u65": 16, "ethos-u85": 16}
"""The bytes an AXI port moves per cycle, per product (Vela's `ArchitectureFeatures.__init__`,
ethosu/vela/architecture_features.py `axi_port_bytes_per_cycle`)."""


@dataclass(frozen=True)
class Memory:
    """One memory of a system config: its bandwidth in bytes per cycle (AXI port width times `<memory>_ports_used`
    times `<memory>_clock_scale`, as Vela's `memory_bandwidths_per_cycle`), its latencies, its maximum burst length,
    the transactions it keeps in flight and its ports (vela.ini `Sram_*`, `Dram_*`, `OffChipFlash_*`)."""

    bandwidth: float
    read_latency: int
    write_latency: int
    burst_bytes: int
    max_reads: int = 1
    max_writes: int = 1
    ports: int = 1
    name: str = "Sram"


@functools.cache
def memory_of(configuration: Configuration, name: str) -> Memory:
    """The memory name ("Sram", "Dram", "OffChipFlash") of configuration's system config, from the vela.ini it names
    (Vela's defaults, 1 and 0, for keys it leaves out)."""
    from eqsat.configuration import product, system_config_of

    values = system_config_of(configuration)
    key = name.lower()
    ports = max(1, int(values.get(f"{key}_ports_used", 1)))
    return Memory(
        AXI_PORT_BYTES_PER_CYCLE[product(configuration.target)] * ports * float(values.get(f"{key}_clock_scale", 1.0)),
        int(values.get(f"{key}_read_latency", 0)),
        int(values.get(f"{key}_write_latency", 0)),
        int(values.get(f"{key}_burst_length", 1)),
        int(values.get(f"{key}_max_reads", 1)),
        int(values.get(f"{key}_max_writes", 1)),
        ports,
        name,
    )


@functools.cache
def sram_of(target: str) -> Memory:
    """The SRAM of target's default system config, where every memory mode eqsat prices keeps the feature maps."""
    from eqsat.configuration import Configuration

    return memory_of(Configuration.of(target), "Sram")


@functools.cache
def constants_memory_of(configuration: Configuration) -> Memory:
    """The memory configuration's memory mode keeps the constants (weights, biases, scales) in: the one on the AXI
    port its `const_mem_area` names (vela.ini `axi0_port`, `axi1_port`)."""
    from eqsat.configuration import memory_mode_of, system_config_of

    area = memory_mode_of(configuration).get("const_mem_area", "Axi0").lower()
    return memory_of(configuration, system_config_of(configuration).get(f"{area}_port", "Sram"))


def _burst(read: bool, block: Shape3, shape: Shape3, cores: int, brick: bool, element_bytes: int = 1) -> int:
    """`EstimateMemoryTransfer`'s burst, in bytes, for a block of a tensor. In NHWC: a whole block row when the
    block spans the tensor's depth (for a write, only up to 16 channels), else one position's channels (a write
    at most 16 elements per core, 64 bytes in all). In brick format (NHCWB16): 16 channels of a block row (of
    each core's, for a write). regor compares a row's bytes with the block's depth in elements, as here."""
    if brick:
        if shape[1] * 16 * element_bytes == block[2]:
            return block[1] * block[2] * element_bytes
        return 16 * element_bytes * block[1] * (1 if read else cores)
    if read:
        return (block[1] if shape[2] * element_bytes == block[2] else 1) * block[2] * element_bytes
    if block[2] <= 16 and shape[2] * element_bytes == block[2]:
        return block[1] * block[2] * element_bytes
    return min(64, 16 * element_bytes * cores, block[2] * element_bytes)


def _memory_transfer(
    read: bool, block: Shape3, shape: Shape3, cores: int, sram: Memory, brick: bool, size: int | None = None, element_bytes: int = 1
) -> int:
    """`EstimateMemoryTransfer` (both architectures) of `size` bytes (default: the block clipped to its tensor) of a
    tensor moved in blocks: scaled up where a burst (`_burst`) is shorter than the SRAM's longest."""
    size = _elements(_shape_min(shape, block)) * element_bytes if size is None else size
    return size * sram.burst_bytes // min(sram.burst_bytes, _burst(read, block, shape, cores, brick, element_bytes))


def _block_op_cycles(mac: float, output: float, blocks: float, ifm_read: int, ofm_write: int) -> int:
    """`EstimateMacOpCycles`' sum over an op's OFM blocks (`OpScheduling::Single`), given per block the MAC array's
    cycles and the output unit's: the command stream takes a quarter of both and of the difference between an IFM
    block's read and an OFM block's write; the op costs the slowest of the three per block, once the other, and
    the first IFM block's read and the last OFM block's write."""
    command = ((abs(ofm_write - ifm_read) if blocks > 1 else 0) + mac + output) / 4
    mac_balanced, output_balanced = max(mac, command), max(output, command)
    if mac_balanced > output_balanced:
        cycles = int(int(mac_balanced * blocks) + output_balanced)
    else:
        cycles = int(output_balanced * blocks + mac_balanced)
    return cycles + ifm_read + ofm_write


def ao_cycles_per_element(target: str) -> float:
    """`EstimateAOCyclesPerElement` for a convolution writing int8 with no fused activation: on Ethos-U55 its
    `outputCycles[7]`, at least its `activationCycles[0]` (the activation index stays 0 without an activation);
    on Ethos-U85 its `outputCycles[0]` (an 8-bit output)."""
    arch = architecture_of(target)
    if isinstance(arch, U55Architecture):
        return max(arch.output_cycles[7], arch.activation_cycles[0])
    return arch.output_cycles[0]


@functools.lru_cache(maxsize=CACHED_SHAPES)
def mac_op_cycles(
    target: str,
    ifm_shape: Shape3,
    ofm_shape: Shape3,
    kernel: Kernel,
    depthwise: bool,
    brick_in: bool,
    brick_out: bool | None = None,
    chained_output: float = 0.0,
    transpose: Shape3 = UNPERMUTED,
    bias_latency: int | None = None,
) -> int:
    """`EstimateMacOpCycles` (ethos_u55_performance.cpp, ethos_u85_performance.cpp) of a CONV2D or DEPTHWISE_CONV2D
    (`OpScheduling::Single`, as `NetworkPerformance::EstimateFullOpPerformance` asks), over its block configuration
    (`block_config`), with its feature maps in the target's SRAM (`sram_of`), its IFM in brick format (NHCWB16) or
    NHWC as brick_in says, its OFM as brick_out says (default: as its IFM).

    The output is covered by fractional OFM blocks of whole microblocks. Per block the MAC array takes its MAC
    cycles, the output unit its output cycles (or the reads of the block's biases and scales, if slower), and the
    command stream a quarter of both and of the difference between an IFM block's read and an OFM block's write:
    the op costs the slowest of the three per block, once the other, and the first IFM block's read and the
    last OFM block's write.

    chained_output: the output cycles per element of the ops chained into the op's group (Ethos-U85), which
    `EthosU85Performance::EstimateAOCyclesPerElement` adds to the op's own (`u85_chained_output_cycles`).

    transpose: the permutation of (height, width, depth) the op's OFM is written in, a TRANSPOSE fused into its
    group (Ethos-U85, `layers.folded_transposes`). regor searches the block in the convolution's orientation
    (`block_config`) and estimates over the written OFM (`Scheduler::InitPerfQuery` takes the OFM connection's
    shape, the transpose's): blocks are counted, clipped and written over the permuted shape, and the output
    unit runs at the slower of its output rate and the transpose's (`GetActivationCyclesPerElement`: an H <-> W
    swap at half throughput).

    bias_latency: the read latency of the memory the op reads its biases and scales from (default: the SRAM's), 10
    bytes per output channel of each OFM block over 256 (`biasCyclesPerBlock`): where they stay in DRAM (500 cycles on
    Ethos_U65_High_End) they can bind each block.
    """
    arch = architecture_of(target)
    sram = sram_of(target)
    bias_latency = sram.read_latency if bias_latency is None else bias_latency
    brick_out = brick_in if brick_out is None else brick_out
    config = block_config(target, ifm_shape, ofm_shape, kernel, depthwise, transpose, brick_out)
    written = permuted(ofm_shape, transpose)
    if isinstance(arch, U55Architecture):
        ublock = _u55_microblock(arch, ofm_shape, kernel, depthwise)
        mac = _u55_mac_cycles_per_block(arch, config, ifm_shape, ofm_shape, kernel, ublock)
    else:
        ublock = config.microblock
        mac = _u85_mac_cycles_per_block(arch, config, ifm_shape, written, kernel)
    ofm_block = _shape_min(written, config.ofm_block)
    blocks = _elements(_shape_div(written, ublock)) / _elements(_shape_div(ofm_block, ublock))
    per_element = ao_cycles_per_element(target)
    if transpose != UNPERMUTED:
        per_element = max(per_element, arch.activation_cycles[transpose in U85_HALF_THROUGHPUT])
    output = max(math.ceil((per_element + chained_output) * _elements(ofm_block)), 10 * ofm_block[2] * bias_latency / 256)
    ifm_read = sram.read_latency + int(_memory_transfer(True, config.ifm_block, ifm_shape, arch.cores, sram, brick_in) / sram.bandwidth)
    ofm_write = sram.write_latency + int(_memory_transfer(False, config.ofm_block, written, arch.cores, sram, brick_out) / sram.bandwidth)
    return _block_op_cycles(mac, output, blocks, ifm_read, ofm_write)


def u85_chained_output_cycles(target: str, element_bytes: int) -> float:
    """The output cycles per element that an ADD, SUB or MUL chained into an Ethos-U85 op group adds to the group's
    output unit: `GetOutputCyclesPerElement` of an elementwise op reading its int8 or int16 operands (its input
    RESCALEs fused) and writing element_bytes-wide values, not into a chaining buffer (index 0 for 8-bit, 1 for
    16-bit outputs)."""
    arch = architecture_of(target)
    assert isinstance(arch, U85Architecture)
    return arch.output_cycles[0 if element_bytes == 1 else 1]


@dataclass(frozen=True)
class ElementAccess:
    """What regor's `MeasureElementAccess` and `ElementTransferToBytes` say a MAC operation moves over its block
    configuration: `ifm_bytes` the IFM it reads (again for every OFM block and sub-kernel) and `ofm_bytes` the OFM
    it writes, in full SRAM bursts; `refetches` how often it reads its weights, biases and scales (once per OFM
    block position); `scales` the biases and scales it reads each time, in elements (its output depth in whole
    OFM blocks: the weight encoder pads each block's)."""

    ifm_bytes: int
    ofm_bytes: int
    refetches: int
    scales: int

    @property
    def feature_maps(self) -> int:
        return self.ifm_bytes + self.ofm_bytes


def _stored_depth(depth: int, brick: bool) -> int:
    """The depth a feature map of depth is stored with: in 16s in brick format (NHCWB16), as it is in NHWC."""
    return _round_away(depth, 16) if brick else depth


@functools.lru_cache(maxsize=CACHED_SHAPES)
def element_access(
    target: str, ifm_shape: Shape3, ofm_shape: Shape3, kernel: Kernel, depthwise: bool, brick_in: bool, brick_out: bool | None = None, transpose: Shape3 = UNPERMUTED
) -> ElementAccess:
    """`MeasureElementAccess` (ethos_u55_performance.cpp, ethos_u85_performance.cpp) of a CONV2D or DEPTHWISE_CONV2D
    with int8 feature maps, its IFM in brick format (NHCWB16: depths stored in 16s) or NHWC as brick_in says, its OFM
    as brick_out says (default: as its IFM), and `ElementTransferToBytes`'s burst scaling of them (`_memory_transfer`);
    its OFM written transposed as `mac_op_cycles` takes it."""
    brick_out = brick_in if brick_out is None else brick_out
    arch = architecture_of(target)
    sram = sram_of(target)
    config = block_config(target, ifm_shape, ofm_shape, kernel, depthwise, transpose, brick_out)
    ofm_shape = permuted(ofm_shape, transpose)
    ofm_block = _shape_min(ofm_shape, config.ofm_block)
    ofm_blocks = _shape_div(ofm_shape, ofm_block)
    if depthwise:
        ofm_blocks = (ofm_blocks[0], ofm_blocks[1], 1)
    ifm_block = _shape_min(ifm_shape, config.ifm_block)
    subkernels = _div_round_up(kernel.width, SUBKERNEL_MAX[1]) * _div_round_up(kernel.height, SUBKERNEL_MAX[0])
    ifm_read = ifm_block[0] * ifm_block[1] * _stored_depth(ifm_shape[2], brick_in) * subkernels * _elements(ofm_blocks)
    ofm_write = ofm_shape[0] * ofm_shape[1] * _stored_depth(ofm_shape[2], brick_out)
    return ElementAccess(
        _memory_transfer(True, config.ifm_block, ifm_shape, arch.cores, sram, brick_in, ifm_read),
        _memory_transfer(False, config.ofm_block, ofm_shape, arch.cores, sram, brick_out, ofm_write),
        ofm_blocks[0] * ofm_blocks[1],
        _round_away(ofm_shape[2], config.ofm_block[2]),
    )


def chained_operand_bytes(target: str, ifm_shape: Shape3, ofm_shape: Shape3, kernel: Kernel, depthwise: bool, brick_out: bool, operand: Shape3, brick: bool) -> int:
    """The bytes an elementwise op chained into the op group of a CONV2D or DEPTHWISE_CONV2D reads of its other
    int8 operand (an external feature map of the group, `MeasureElementAccess`): the whole operand once, in the
    bursts of the convolution's IFM block (`ElementTransferToBytes`)."""
    config = block_config(target, ifm_shape, ofm_shape, kernel, depthwise, UNPERMUTED, brick_out)
    elements = operand[0] * operand[1] * _stored_depth(operand[2], brick)
    return _memory_transfer(True, config.ifm_block, operand, architecture_of(target).cores, sram_of(target), brick, elements)


# ---------------------------------------------------------------- Ethos-U85 memory access


class MemChannel(IntEnum):
    """regor's `MemChannel` (ethos_u85_performance.hpp): the DMA channel a transfer takes, each with its own bandwidth
    (`channel_bandwidth`)."""

    MEM2MEM = 1
    IFM_STREAM = 2
    WEIGHT = 3
    FAST_WEIGHT = 4
    IFM = 5
    SCALE = 6
    WRITE = 7


def channel_bandwidth(target: str, channel: MemChannel, memory: Memory | None = None) -> float:
    """`EthosU85Performance::ChannelBW` of a memory (default: target's SRAM), in bytes per cycle, for a channel: the
    memory's bandwidth, or less where its latency over the transactions in flight (80% of its maximum, for a read
    channel at most its read buffers in bursts, `U85Architecture.channel_read_buffers`) limits it: for the SRAM of
    Vela's Ethos-U85 system configs 20.48 bytes per cycle for the IFM, weight and write channels and 6.4 for the scale
    channel, against 32 for the memory; for the DRAM of Ethos_U85_SYS_DRAM_Mid, 0.41 for the scales."""
    arch, memory = architecture_of(target), memory or sram_of(target)
    f32 = np.float32  # regor computes it in single precision, which its callers' truncations see
    if channel is MemChannel.WRITE:
        outstanding, latency, read_buffers = memory.max_writes, memory.write_latency, f32(np.inf)
    else:
        outstanding, latency = memory.max_reads, memory.read_latency
        read_buffers = f32(arch.channel_read_buffers[channel - 1]) / f32(max(memory.burst_bytes // 16, 1))
    transactions = min(read_buffers, f32(outstanding * memory.ports * 0.8))
    return float(min(f32(memory.bandwidth), f32(float(f32(memory.burst_bytes) * transactions / f32(latency)) * 0.8)))


def u85_access_cycles(target: str, transfers: dict[MemChannel, int], memory: Memory | None = None) -> int:
    """`EthosU85Performance::MeasureAccessCycles` of the transfers (bytes per channel) an op group makes to one memory
    (default: target's SRAM): the larger of all its bytes over the memory's bandwidth and each channel's bytes over
    the channel's (`channel_bandwidth`), in regor's single precision."""
    f32 = np.float32
    memory = memory or sram_of(target)
    total = sum(transfers.values())
    slowest = max((int(f32(n) / f32(channel_bandwidth(target, c, memory))) for c, n in transfers.items()), default=0)
    return max(int(f32(total) / f32(memory.bandwidth)), slowest)


# ---------------------------------------------------------------- Ethos-U85 transposes

U85_HALF_THROUGHPUT = frozenset({(1, 0, 2), (1, 2, 0), (2, 1, 0)})
"""The 3D permutations that move H to W or W to H (regor's NWHC, NWCH, NCWH): Ethos-U85's output unit runs them at
half its throughput (`GetActivationCyclesPerElement`)."""


@functools.lru_cache(maxsize=CACHED_SHAPES)
def u85_transpose_cycles(target: str, shape3: Shape3, perm3: Shape3, element_bytes: int, brick_in: bool = False, brick_out: bool = False) -> tuple[int, int]:
    """(NPU cycles, SRAM access cycles) of one Ethos-U85 transpose pass of 3D input shape3, as Vela's estimator
    computes them.

    regor runs the pass as a 1x1 average pool (`ArchEthosU85::UseAvgPoolNop`) that writes its output permuted. Its
    block is the one `FindDepthwiseConfig` picks for the unpermuted map under the block maximum unpermuted
    (`Scheduler::GetOpConfig` unpermutes the OFM shape, `FindBlockConfig` the maximum; `_u85_depthwise_block_config`),
    clipped to the permuted OFM; `EstimateMacOpCycles` counts the OFM blocks of the permuted map, each a pooling step
    of 4 cycles per microblock per byte pair of input (`EstimateMacCyclesPerBlock`, `Pooling`) and an output-unit
    pass at the slower of the output rate and the transpose's (`EstimateAOCyclesPerElement`: an H <-> W swap at half
    throughput). `MeasureElementAccess` counts the same blocks, each reading its IFM block (in the input's
    orientation) at the input's whole depth, so a pass that swaps a long axis with a short one re-reads its input
    once per block (a (64, 2, 8) -> (2, 64, 8) swap on Ethos-U85-256: 6400 access cycles against 1629 NPU);
    `EstimateMemoryTransfer` scales both by their bursts, and `MeasureAccessCycles` takes the larger of all bytes
    over the memory's bandwidth and each channel's over its own (`channel_bandwidth`). The formats matter: a
    (1, 3, 1024) -> (1, 1024, 3) pass costs 51300 access cycles on Ethos-U85-128 written in NHWC, 9600 in brick
    format (`layers.stored_in_nhwc` says which).

    The access cycles equal Vela's on all 130 int8 one-pass calibration samples of each Ethos-U85 size, and the NPU
    cycles on 120 of 120 random one-pass transposes between a graph input and output on Ethos-U85-128, -512 and
    -2048 (tests/extract/test_blocks.py; rank-2-like maps of thousands of positions, (2, 1000, 8) -> (8, 2, 1000) on
    Ethos-U85-512, 33335 NPU cycles, come out at half that searched under the plain maximum).
    int16 and int32 passes
    (op cycles within 0.4% and 4% of Vela on Ethos-U85-128/256) are searched with int8's IFM allocation units; an
    int16 pass on its own microblocks.
    """
    arch, sram = architecture_of(target), sram_of(target)
    assert isinstance(arch, U85Architecture)
    config = _u85_depthwise_block_config(arch, shape3, shape3, Kernel(1, 1), perm3, brick_out, pool_int16=element_bytes == 2)
    out = (shape3[perm3[0]], shape3[perm3[1]], shape3[perm3[2]])
    ofm_block = _shape_min(out, config.ofm_block)
    microblocks = _shape_div(ofm_block, config.microblock)
    mac = 4 * _elements(microblocks) * 4 * element_bytes + (2 if microblocks == (1, 1, 1) else 0)
    blocks = _elements(_shape_div(out, config.microblock)) / _elements(microblocks)
    output_rate = arch.output_cycles[{1: 0, 2: 1}.get(element_bytes, 2)]
    per_element = max(output_rate, arch.activation_cycles[perm3 in U85_HALF_THROUGHPUT])
    output = math.ceil(per_element * _elements(ofm_block))
    ifm_read = sram.read_latency + int(_memory_transfer(True, config.ifm_block, shape3, arch.cores, sram, brick_in, None, element_bytes) / sram.bandwidth)
    ofm_write = sram.write_latency + int(_memory_transfer(False, config.ofm_block, out, arch.cores, sram, brick_out, None, element_bytes) / sram.bandwidth)
    npu = _block_op_cycles(mac, output, blocks, ifm_read, ofm_write)

    ofm_blocks = math.ceil(out[0] / ofm_block[0]) * math.ceil(out[1] / ofm_block[1])
    ifm_block = config.ifm_block
    fetched = min(shape3[0], ifm_block[0]) * min(shape3[1], ifm_block[1]) * _stored_depth(shape3[2], brick_in) * ofm_blocks  # elements: regor scales them, not bytes
    reads = _memory_transfer(True, ifm_block, shape3, arch.cores, sram, brick_in, fetched, element_bytes)
    writes = _memory_transfer(False, config.ofm_block, out, arch.cores, sram, brick_out, out[0] * out[1] * _stored_depth(out[2], brick_out), element_bytes)
    return npu, u85_access_cycles(target, {MemChannel.IFM: reads, MemChannel.WRITE: writes})
