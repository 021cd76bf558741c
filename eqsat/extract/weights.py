"""A convolution's encoded constants: their size, and where Ethos-U55 and -U65 read them from when they are off the
SRAM.

Vela's weight encoder compresses a convolution's int8 weights (regor's mlw_codec), so their size depends on their
values, which pricing does not see: it is estimated (`encoded_weight_bytes`); the biases and scales take a fixed size
per output channel (`encoded_scale_bytes`).

A memory mode such as `Shared_Sram` keeps the constants in flash (1 byte per cycle against the SRAM's 8 on
`Ethos_U55_High_End_Embedded`) or DRAM (3.75 bytes per cycle and 500 cycles of latency on `Ethos_U65_High_End`). regor's scheduler (`Scheduler::ProposeSlicedWeightBuffering`, compiler/scheduler.cpp)
then decides per convolution whether to leave its encoded weights and scales there, read once per OFM block position
at flash speed, or to copy them into the SRAM by DMA first ("weight buffering"). A buffered convolution reads its
weights from the SRAM, and the part of the copy that the layer in front of it does not hide adds to its NPU cycles
(`NetworkPerformance::EstimateFullOpPerformance`, compiler/network_performance.cpp). The decision compares the two
with the estimator's own numbers, so neither is always right: emg-conv1d-stem's first convolution (784 bytes of
weights) is buffered on Ethos-U55-64, where its 1216 NPU cycles cover the 1008-cycle copy, and 2064 cycles in all,
and read from flash on Ethos-U55-128, where its 960 do not (tests/extract/test_weights.py).

`WeightReads` holds what the decision reads for one convolution; its `cycles` follow the decision for the slack the
layer in front leaves (that layer's cycles, `eqsat.extract.cost.graph_cost`). Not followed: cascades (a cascaded
convolution is not sliced), the IFM staging and future-op checks, and the per-slice overheads of a sliced estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from eqsat.configuration import Generation
from eqsat.extract.blocks import OFM_SPLIT_DEPTH, Memory, _round_away

ENCODED_WEIGHT_BYTES = {Generation.U55: (1.04, 84.0), Generation.U85: (1.06, 462.0)}
"""The bytes Vela's weight encoder writes for a convolution's int8 weights, per weight and per convolution, by least
squares against Vela's debug database (`weight_total_bytes`): on Ethos-U85 over the 36 CONV2Ds of resnet8,
tds-conv1d and emg-conv1d-stem on Ethos-U85-256 and -2048, mean error 263 bytes, at most 1317 (at 32 bytes per
cycle, 8 and 41 access cycles per read); on Ethos-U55 over the 143 convolutions of 15 zoo models on Ethos-U55-128
(the same within 64 bytes on -32, -64 and -256), mean error 116 bytes, at most 801 (a 10x4 kernel over one input
channel), 116 cycles per read from flash at 1 byte per cycle. Padding the weights as regor's `EthosUWeightOrdering`
does (input depth to 32 or 8, kernel positions to 4) and pricing the padding apart lowers the mean error only to 80."""

SCALE_BYTES_PER_CHANNEL = 10
"""The bytes an encoded bias and scale take per output channel (a 40-bit bias, a 32-bit scale and an 8-bit shift),
as Vela's debug database counts them (`SramScales_read`)."""


def encoded_weight_bytes(generation: Generation, weights: int) -> int:
    """The estimated size of a convolution's encoded int8 weights on generation (`ENCODED_WEIGHT_BYTES`)."""
    per_weight, fixed = ENCODED_WEIGHT_BYTES[generation]
    return int(per_weight * weights + fixed)


def encoded_scale_bytes(generation: Generation, depth: int, block_padded_depth: int) -> int:
    """The size of a convolution's encoded biases and scales for an output of depth channels: on Ethos-U85 for each
    channel of its OFM blocks (block_padded_depth: the weight encoder pads each block's), on Ethos-U55 for each
    channel, in 16-byte units (Vela's debug database: 96 bytes for 9 channels, 112 for 10)."""
    if generation is Generation.U85:
        return block_padded_depth * SCALE_BYTES_PER_CHANNEL
    return _round_away(depth * SCALE_BYTES_PER_CHANNEL, 16)


STARTUP_DELAY_CYCLES = 1000
"""regor's `STARTUP_DELAY_CYCLES`: a copy that leaves fewer cycles visible than this counts as hidden."""


@dataclass(frozen=True)
class WeightReads:
    """One convolution whose constants sit off the SRAM: its NPU cycles reading its biases and scales where they are
    (`npu`) and from the SRAM once copied there (`buffered_npu`; regor's estimator adds each OFM block's bias reads at
    the memory's latency, `biasCyclesPerBlock`), its feature maps' SRAM access cycles (`feature_map_access`), the
    bytes of its IFM reads (`ifm_bytes`), its encoded weights and scales (`weight_bytes`, `scale_bytes`, one copy
    each), how often it reads them (`refetches`, once per OFM block position), its output depth and OFM block
    depth, and the two memories."""

    npu: float
    buffered_npu: float
    feature_map_access: float
    ifm_bytes: int
    weight_bytes: int
    scale_bytes: int
    refetches: int
    depth: int
    block_depth: int
    constants: Memory
    sram: Memory

    @property
    def constant_bytes(self) -> int:
        """What one copy moves: the encoded weights and scales (regor's `npuWeightsTensor`)."""
        return self.weight_bytes + self.scale_bytes

    def transfer(self, size: float) -> float:
        """`EthosU55Performance::MemToMemCycles` of size bytes from the constants' memory into the SRAM."""
        return max(size / self.constants.bandwidth + self.constants.read_latency, size / self.sram.bandwidth + self.constants.write_latency)

    def _read(self, memory: Memory, size: float) -> float:
        """`MinReadCycles`: size bytes read from memory, with its latency."""
        return size / memory.bandwidth + memory.read_latency

    def unbuffered(self) -> float:
        """`Op Cycles` read from where the constants are: the NPU, the SRAM's feature maps or the constants' reads,
        whichever is slowest (`MeasureAccessCycles`: one access figure per memory)."""
        flash = self.refetches * self.constant_bytes / self.constants.bandwidth
        return max(self.npu, self.feature_map_access, flash)

    def buffered(self, slack: float) -> float:
        """`Op Cycles` buffered: the NPU cycles with the copy that slack does not hide (the first slice's copy, or the
        whole copy less slack plus the last slice, whichever is later), against the SRAM, now reading the weights
        too, and the constants' memory, still read for the scales."""
        first, last = self._slices(slack)
        whole = self.transfer(self.constant_bytes)
        run = self.buffered_npu
        npu = max(whole - slack + run * last / self.depth, run + max(self.transfer(self.constant_bytes * first / self.depth) - slack, 0.0))
        streamed = self.weight_bytes * (1 - first / self.depth)  # copied while it runs: read from both memories
        sram = self.feature_map_access + (self.refetches * self.weight_bytes + streamed) / self.sram.bandwidth
        constants = (self.refetches * self.scale_bytes + streamed) / self.constants.bandwidth
        return max(npu, sram, constants)

    def _slices(self, slack: float) -> tuple[int, int]:
        """The depths of the first (pre-buffered) and last slice regor cuts the weights into: all of it when slack
        hides the whole copy or the output is at most `OFM_SPLIT_DEPTH` deep; else the share slack hides, in
        `OFM_SPLIT_DEPTH`s (`prebufferRatio`), then slices as deep as the first one's NPU cycles copy, in OFM blocks
        (`bufferingDepth`)."""
        whole = self.transfer(self.constant_bytes)
        split = min(OFM_SPLIT_DEPTH / self.depth, 1.0)
        share = min(slack / whole, 1.0)
        ratio = 1.0 if (1.0 - math.floor(share / split) * split) < split / 2 else share
        if self.npu > self._unmoved() and 0.5 < ratio < 1.0:
            ratio = min(max(_round_away(math.floor(self.depth * 0.5), OFM_SPLIT_DEPTH) / self.depth, 0.5), 1.0)
        ratio = max(ratio, split)
        first = max(int(self.depth * ratio) // OFM_SPLIT_DEPTH * OFM_SPLIT_DEPTH, OFM_SPLIT_DEPTH)
        if ratio >= 1.0 or first >= self.depth:
            return self.depth, self.depth
        step = _round_away(max(int(self.buffered_npu * first / whole), OFM_SPLIT_DEPTH), self.block_depth)
        granule = self.block_depth if step > self.block_depth else OFM_SPLIT_DEPTH
        step = max(step // granule * granule, OFM_SPLIT_DEPTH)
        return first, (self.depth - first) % step or step

    def _unmoved(self) -> float:
        """The cycles to see every weight read from where it is (regor's `cyclesUnmoved`)."""
        return self._read(self.constants, self.constant_bytes) * self.refetches

    def buffers(self, slack: float, first_op: bool = False) -> bool:
        """Whether regor buffers the weights, given the slack of the op in front (first_op: there is none).

        `ProposeSlicedWeightBuffering`: it tries when reading from the SRAM is faster and either the buffered reads
        beat the unmoved ones or the weights come in more than two OFM blocks of depth; it keeps the buffering when
        the buffered estimate is not worse than the unbuffered one (a copy below `STARTUP_DELAY_CYCLES` per slice
        counts as hidden for an NPU-bound op) and, for weights read once, when copying and reading them takes no
        longer than the unbuffered layer."""
        unmoved = self._unmoved()
        from_buffer = self._read(self.sram, self.constant_bytes) * self.refetches
        if from_buffer >= unmoved:
            return False
        whole = self.transfer(self.constant_bytes)
        smallest = whole * min(self.depth, OFM_SPLIT_DEPTH) / self.depth
        force = first_op and self.refetches > 1 and (smallest < unmoved / 10 or smallest <= STARTUP_DELAY_CYCLES)
        tries = force or from_buffer + max(whole - slack, 0.0) < unmoved or self.depth // self.block_depth > 2
        if not tries:
            return False
        usable = (STARTUP_DELAY_CYCLES if force else 0.0) if first_op else slack
        first, _ = self._slices(usable)
        visible = max(self.transfer(self.constant_bytes * first / self.depth) - usable, 0.0)
        ifm_read = self._read(self.sram, self.ifm_bytes)
        original = max(self.npu, unmoved, ifm_read)
        new = max(self.buffered_npu + visible, from_buffer, ifm_read)
        if self.npu > unmoved and visible < STARTUP_DELAY_CYCLES:
            new -= visible
        return not (original < new or (self.refetches == 1 and whole + from_buffer > original))

    def cycles(self, slack: float, first_op: bool = False) -> float:
        """`Op Cycles` as regor schedules the convolution after an op of slack cycles (first_op: after none)."""
        return self.buffered(0.0 if first_op else slack) if self.buffers(slack, first_op) else self.unbuffered()
