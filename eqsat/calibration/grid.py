"""The calibration grids: which samples `eqsat calibrate` measures for a target.

Motivation
----------
A fitted model is only as good as the shapes it was fitted on. Its score is
honest only on shapes it was not fitted on. The grid spreads each kind of
sample (eqsat/calibration/graphs.py) over the ranks, dtypes, sizes
and contexts that the zoo models use, and it keeps a held-out split apart
from the fit.

Overview
--------
`grid(target, split, scale)` lists the `Sample`s of one split:
- "fit" samples are fitted. The split holds single ops (transposes of rank
  1-6 in int8/int16/int32 with random and common permutations, concats of
  arity 2-6 along every axis, ...), hand-built contexts, and `module`
  bundles of torch blocks for the Arm backend (4 blocks per bundle, lowered
  once per bundle).
- "heldout" samples only score the fit (`eqsat calibrate --report`). They
  come from another seed of the same grid, at a quarter of its size, and
  they never repeat a fit shape.
- "probe" samples are large transposes near Ethos-U55's limits. They show
  which transposes Vela rejects.

`scale` multiplies the number of samples of every kind. The seeds depend
only on the target generation (`target_seed`), so every U55 configuration
measures the same shapes, and so does every U85 configuration. The sample
cache is keyed by `Sample.key`, so changing a grid means measuring new
samples, and it also changes the grid digest in the calibration file.
"""

from __future__ import annotations

import math
import random

from eqsat.configuration import Generation
from eqsat.extract import vela_cost
from eqsat.calibration.graphs import Sample

def _shape(rng: random.Random, rank: int, low: int = 16, high: int = 32768, dims=(1, 2, 3, 4, 5, 7, 8, 12, 16, 24, 32, 48, 64)) -> list[int]:
    while True:
        shape = [rng.choice(dims) for _ in range(rank)]
        if low <= math.prod(shape) <= high:
            return shape


def _perm(rng: random.Random, rank: int) -> list[int]:
    while True:
        perm = list(range(rank))
        rng.shuffle(perm)
        if perm != sorted(perm) or rank == 1:
            return perm


def _dtype(rng: random.Random, allowed=("int8", "int8", "int8", "int16", "int32")) -> str:
    return rng.choice(allowed)


def _nhwc(rng: random.Random, high: int = 32768) -> list[int]:
    while True:
        shape = [1, rng.choice((1, 2, 4, 7, 8, 12, 16, 24, 32)), rng.choice((1, 2, 4, 7, 8, 12, 16, 24, 32)), rng.choice((3, 8, 16, 24, 32, 48, 64, 96))]
        if 16 <= math.prod(shape) <= high:
            return shape


def _grid(target: str, split: str, scale: float) -> list[Sample]:
    rng = random.Random(f"{split}-{target_seed(target)}")
    n = lambda count: max(1, round(count * scale))  # noqa: E731
    samples: list[Sample] = []
    add = lambda kind, **params: samples.append(Sample(kind, params, split))  # noqa: E731

    common_4d = ([0, 3, 1, 2], [0, 2, 3, 1], [0, 2, 1, 3], [0, 1, 3, 2], [0, 3, 2, 1], [3, 1, 2, 0])
    for i in range(n(240)):
        rank = rng.choice((1, 2, 3, 3, 4, 4, 4, 5, 6))
        shape = _shape(rng, rank)
        perm = list(rng.choice(common_4d)) if rank == 4 and i % 3 == 0 else _perm(rng, rank)
        add("transpose", shape=shape, perm=perm, dtype=_dtype(rng))
    for _ in range(n(60)):
        rank, arity = rng.choice((1, 2, 3, 4, 4, 5, 6)), rng.choice((2, 2, 3, 4, 5, 6))
        axis = rng.randrange(rank)
        base = _shape(rng, rank, high=8192)
        shapes = [base[:axis] + [rng.choice((1, 2, 3, 8, 16, 24))] + base[axis + 1 :] for _ in range(arity)]
        add("concat", shapes=shapes, axis=axis, dtype=_dtype(rng))
    for _ in range(n(40)):
        rank = rng.choice((1, 2, 3, 4, 4, 5, 6))
        shape = _shape(rng, rank, low=32)
        size = [rng.randint(1, d) for d in shape]
        start = [rng.randint(0, d - s) for d, s in zip(shape, size)]
        add("slice", shape=shape, start=start, size=size, dtype=_dtype(rng))
    for _ in range(n(30)):
        source, dest = rng.choice((("int8", "int32"), ("int32", "int8"), ("int8", "int8"), ("int32", "int8"), ("int16", "int32"), ("int32", "int16")))
        per_channel = source == "int32" and rng.random() < 0.5
        scaling = "unit" if source != "int32" and rng.random() < 0.5 else ("add" if source != "int32" else "mul_out")
        add("rescale", shape=_nhwc(rng), source=source, dest=dest, per_channel=per_channel, scale=scaling)
    for _ in range(n(16)):
        add("clamp", shape=_shape(rng, rng.choice((2, 3, 4))), dtype=rng.choice(("int8", "int16")))
    for _ in range(n(16)):
        add("table", shape=_shape(rng, rng.choice((2, 3, 4))), dtype=rng.choice(("int8", "int8", "int16")))
    for _ in range(n(9)):
        add("binary", op=rng.choice(("ADD", "SUB", "MUL")), shape=_shape(rng, rng.choice((2, 3, 4))))
    for i in range(n(72)):
        rank = rng.choice((2, 3, 3, 4, 4, 4))
        shape = _shape(rng, rank, low=64)
        if rank == 4 and i % 4 == 0:  # a batch of heads, as in attention
            shape[0] = rng.choice((2, 4))
        ops = [rng.choice(("ADD", "SUB", "MUL", "MUL")) for _ in range(rng.choice((1, 2, 3)))]
        others = [[d if rng.random() < 0.7 else 1 for d in shape] if rng.random() < 0.4 else list(shape) for _ in ops]
        add("ctx_chain", shape=shape, ops=ops, others=others, zp=rng.choice((0, -26, -128, 3)), clamp=rng.random() < 0.3)
    for i in range(n(20)):
        shape = _nhwc(rng)
        axis = rng.choice((1, 2, 3, 3))
        size = list(shape)
        size[axis] = max(1, shape[axis] // 2)
        start = [0, 0, 0, 0]
        start[axis] = rng.choice((0, shape[axis] - size[axis]))
        add("ctx_slice", shape=shape, start=start, size=size, consumer=("conv2d", "add", "clamp", "transpose", "concat")[i % 5])
    for _ in range(n(6)):
        shape = _nhwc(rng)
        add("ctx_reshape", shape=shape, new_shape=[1, shape[1] * shape[2], shape[3]])
    for i in range(n(8)):
        add("ctx_transpose_conv", h=rng.choice((4, 8, 16)), w=rng.choice((4, 8, 16)), c=rng.choice((8, 16, 32)), order=("before", "after")[i % 2])
    for _ in range(n(40)):
        k = rng.choice((1, 1, 3, 3, 5))
        add("conv2d", h=rng.choice((4, 8, 16, 32)), w=rng.choice((4, 8, 16, 32)), cin=rng.choice((3, 8, 16, 32, 64)), cout=rng.choice((8, 16, 32, 64)), k=k, stride=rng.choice((1, 1, 2)))
    for _ in range(n(12)):  # fully connected layers: a 1x1 conv over few positions, weight-bound
        add("conv2d", h=1, w=rng.choice((1, 1, 2, 4)), cin=rng.choice((8, 64, 128, 160, 256)), cout=rng.choice((8, 64, 128, 160, 256)), k=1, stride=1)
    for _ in range(n(16)):  # the layers of recurrent cells and MLP heads: few positions, many weights (flash streaming on Ethos-U55)
        add("conv2d", h=1, w=rng.choice((1, 2, 4, 8, 16)), cin=rng.choice((16, 32, 96, 192, 384)), cout=rng.choice((8, 16, 48, 96, 192, 384)), k=1, stride=1)
    for i in range(n(24)):
        axis, arity = rng.choice((1, 2, 3, 3)), rng.choice((2, 2, 3, 4))
        base = _nhwc(rng, high=16384)
        parts = [[base[j] if j != axis else rng.choice((1, 4, 8, 16, 32)) for j in range(4)] for _ in range(arity)]
        add("ctx_concat", shapes=parts, axis=axis)
    for _ in range(n(20)):
        add("depthwise_conv2d", h=rng.choice((4, 8, 16, 32)), w=rng.choice((4, 8, 16, 32)), c=rng.choice((8, 16, 32, 64)), k=rng.choice((3, 3, 5)), stride=rng.choice((1, 2)))
    for _ in range(n(16)):
        add("matmul", n=rng.choice((1, 2, 4)), h=rng.choice((8, 16, 32, 64)), c=rng.choice((8, 16, 32, 64)), w=rng.choice((8, 16, 32, 64)))
    for kind in ("avg_pool2d", "max_pool2d"):
        for _ in range(n(8)):
            k, shape = rng.choice((2, 3)), [1, 1, 1, 1]
            while min(shape[1:3]) < k:  # Vela 5.1 crashes on a window larger than its input
                shape = _nhwc(rng, high=65536)
            add(kind, shape=shape, k=k, stride=rng.choice((1, 2)))
    for kind in ("reduce_sum", "reduce_max"):
        for i in range(n(16)):
            shape = _nhwc(rng, high=65536)
            if i % 3 == 0:  # softmax over the last axis of a batch of attention heads
                shape = [rng.choice((2, 4)), rng.choice((1, 4)), rng.choice((16, 32, 64)), rng.choice((16, 32, 64))]
            axis = rng.choice((1, 2, 3, 3))
            if kind == "reduce_sum" and vela_cost.target_family(target) == Generation.U85:
                # Ethos-U85 reads the int8 tensor a sum's input RESCALE widens (the rescale becomes a SUB of the
                # zero point after it): a (1, 1, 64, 32) last-axis sum costs 252 cycles so, 652 over an int32 input
                add(kind, shape=shape, axis=axis, source="int8")
            else:
                add(kind, shape=shape, axis=axis)
    for _ in range(n(6)):
        add("resize", shape=_nhwc(rng, high=8192))
    for _ in range(n(48)):  # transposes that write a small innermost dimension (1-8): memory-bound on both generations
        rank = rng.choice((2, 3, 3, 4, 4, 5, 6))
        shape = _shape(rng, rank, low=256, high=49152, dims=(1, 2, 3, 4, 5, 8, 12, 16, 24, 32, 48, 64, 96, 128))
        small = [a for a in range(rank) if shape[a] <= 8]
        if not small:
            small = [rng.randrange(rank)]
            shape[small[0]] = rng.choice((2, 3, 4, 8))
        last = rng.choice(small)
        rest = [a for a in range(rank) if a != last]
        rng.shuffle(rest)
        if rest + [last] == list(range(rank)) and rank > 1:
            rest = rest[1:] + rest[:1]
        add("transpose", shape=shape, perm=rest + [last], dtype=_dtype(rng, ("int8", "int8", "int16")))
    for _ in range(n(8)):  # an image at the graph input (NCHW -> NHWC) or output (NHWC -> NCHW), and its rank-lowered forms
        h, w, c = rng.choice((32, 48, 64, 96, 112)), rng.choice((32, 48, 64, 96, 112)), rng.choice((1, 2, 3, 4))
        for shape, perm in (([1, c, h, w], [0, 2, 3, 1]), ([c, h * w], [1, 0]), ([c, h, w], [1, 2, 0]), ([1, h, w, c], [0, 3, 1, 2]), ([h * w, c], [1, 0]), ([h, w, c], [2, 0, 1])):
            add("transpose", shape=shape, perm=perm, dtype="int8")
    for _ in range(n(12)):  # convolutions over the feature maps of 96x96 images (the grid above stops at 32x32)
        add("conv2d", h=rng.choice((48, 64, 96)), w=rng.choice((48, 64, 96)), cin=rng.choice((3, 8, 16, 32)), cout=rng.choice((8, 16, 32, 64)), k=rng.choice((1, 3)), stride=rng.choice((1, 2)))
    for _ in range(n(8)):
        add("depthwise_conv2d", h=rng.choice((48, 64, 96)), w=rng.choice((48, 64, 96)), c=rng.choice((8, 16, 32)), k=3, stride=rng.choice((1, 2)))
    for kind in ("avg_pool2d", "max_pool2d"):  # more pools, over maps up to 64x64 (8 of each above)
        for _ in range(n(12)):
            add(kind, shape=[1, rng.choice((8, 16, 32, 64)), rng.choice((8, 16, 32, 64)), rng.choice((8, 16, 32, 64))], k=rng.choice((2, 3)), stride=rng.choice((1, 2)))
    for _ in range(n(8)):  # a global average pool, the head of a classifier: the window is the whole map
        size = rng.choice((4, 5, 6, 7, 8, 12))
        add("avg_pool2d", shape=[1, size, size, rng.choice((16, 32, 64, 96))], k=size, stride=1)
    if vela_cost.target_family(target) == Generation.U85:
        for _ in range(n(48)):  # a slice read only by a one-pass transpose: Ethos-U85 writes it transposed in the slice's copy
            size, perm = _one_pass_transpose(rng)
            shape = list(size)
            axis = rng.randrange(1 if len(size) == 4 else 0, len(size))
            shape[axis] += rng.choice((1, size[axis]))
            add("ctx_slice_transpose", shape=shape, size=size, perm=perm)
        for _ in range(n(24)):  # feature maps split along an axis and transposed, as in a channel shuffle
            size = [1, rng.choice((8, 16, 24, 29, 32, 58, 64, 116)), rng.choice((2, 4, 8, 16)), rng.choice((4, 8, 16, 32))]
            rng.shuffle(size)
            size.remove(1)
            size = [1, *size]
            perm = [0, *rng.choice(([2, 3, 1], [3, 1, 2], [2, 1, 3], [1, 3, 2], [3, 2, 1]))]
            shape = list(size)
            shape[rng.randrange(1, 4)] *= 2
            add("ctx_slice_transpose", shape=shape, size=size, perm=perm)
    for _ in range(n(24)):  # concats of 5-D tensors: one MemoryCopy of each input's HWC block per leading index
        batch, axis = rng.choice((2, 4, 8, 16, 48)), rng.choice((2, 3, 4))
        base = [1, batch, rng.choice((1, 2, 4)), rng.choice((1, 2, 4, 8)), rng.choice((4, 8, 16, 24, 32))]
        shapes = [base[:axis] + [rng.choice((1, 2, 3, 5, 7, 8))] + base[axis + 1 :] for _ in range(rng.choice((2, 2, 3)))]
        add("batched_concat", shapes=shapes, axis=axis)
    if vela_cost.target_family(target) == Generation.U85:
        for _ in range(n(40)):  # few positions, input depths across Ethos-U85's IFM block depths and kernel-first steps (eqsat.extract.blocks)
            k = rng.choice((1, 1, 1, 3))
            h, w = rng.choice(((1, 1), (1, 2), (1, 4), (1, 8), (1, 16), (2, 2), (4, 4), (4, 8), (8, 8)))
            cin, cout = rng.choice((3, 8, 12, 16, 20, 24, 32, 40, 48, 64, 96, 128, 192)), rng.choice((8, 10, 16, 24, 32, 48, 64, 96))
            add("conv2d", h=max(h, k), w=max(w, k), cin=cin, cout=cout, k=k, stride=1)
        for _ in range(n(12)):  # channel counts between Ethos-U85's 16-channel microblock depths (eqsat.extract.blocks)
            add("depthwise_conv2d", h=rng.choice((8, 16, 32, 48)), w=rng.choice((8, 16, 32, 48)), c=rng.choice((4, 12, 20, 24, 40, 48, 96)), k=rng.choice((3, 3, 5)), stride=rng.choice((1, 2)))
        # two graph inputs concatenated: one whole-tensor MemoryCopy each, as Ethos-U85 copies a reshape, a slice or a
        # concat input (on Ethos-U55 such copies fit concat inputs worse than the isolated slice: dense-conv1d -11% -> -22%)
        for _ in range(n(40)):
            rank = rng.choice((2, 3, 4, 4))
            shape = _shape(rng, rank, high=16384, dims=(1, 2, 3, 4, 7, 8, 12, 16, 24, 32, 48, 64))
            if rank == 4:
                shape[0] = 1
            add("concat_copy", shape=shape, axis=rng.randrange(rank), dtype=_dtype(rng, ("int8", "int8", "int16", "int32")))
    if vela_cost.target_family(target) == Generation.U55:
        for _ in range(n(12)):  # depthwise convolutions over small maps
            add("depthwise_conv2d", h=rng.choice((4, 8, 12, 16, 25)), w=rng.choice((4, 5, 8, 16)), c=rng.choice((8, 16, 24, 32, 64)), k=3, stride=rng.choice((1, 2)))
        for _ in range(n(16)):  # attention-sized matmuls, many heads: Vela charges less per output than on the small maps above
            add("matmul", n=rng.choice((2, 4, 8, 16)), h=rng.choice((32, 64)), c=rng.choice((8, 16, 32, 64)), w=rng.choice((8, 32, 64)))
    for _ in range(n(16)):  # sums over the innermost axis: what the family prices (a sum over another axis runs behind a transpose)
        shape = _nhwc(rng, high=65536)
        if vela_cost.target_family(target) == Generation.U85:
            add("reduce_sum", shape=shape, axis=3, source="int8")
        else:
            add("reduce_sum", shape=shape, axis=3)
    return samples


def _one_pass_transpose(rng: random.Random) -> tuple[list[int], list[int]]:
    """A shape and a permutation that Ethos-U85 runs in one pass (rank 2 or 3, or rank 4 with a leading 1 kept in place)."""
    rank = rng.choice((2, 3, 4, 4, 4))
    dims = (1, 2, 3, 4, 8, 12, 16, 24, 32, 48, 64, 116)
    while True:
        shape = _shape(rng, rank, low=64, high=16384, dims=dims)
        if rank == 4:
            shape[0] = 1
            perm = [0] + [p + 1 for p in _perm(rng, 3)]
        else:
            perm = _perm(rng, rank)
        if len(vela_cost.transpose_passes(tuple(shape), tuple(perm), Generation.U85)) == 1:
            return shape, perm


def _probe_grid(target: str, scale: float) -> list[Sample]:
    """Large transposes near Ethos-U55's limits: which ones does Vela reject?"""
    rng = random.Random(f"probe-{target_seed(target)}")
    samples = []
    for _ in range(max(1, round(24 * scale))):
        rank = rng.choice((3, 4, 4, 5))
        shape = _shape(rng, rank, low=70000, high=1_500_000, dims=(1, 2, 3, 8, 64, 200, 300, 600, 1000))
        samples.append(Sample("transpose", {"shape": shape, "perm": _perm(rng, rank), "dtype": rng.choice(("int8", "int32"))}, "probe"))
    return samples


def _module_grid(target: str, scale: float) -> list[Sample]:
    """Bundles of context blocks, 4 blocks per bundle (one Arm lowering each)."""
    rng = random.Random(f"module-{target_seed(target)}")
    blocks = []
    for i in range(max(4, round(48 * scale))):
        block = ("layer_norm", "softmax", "layer_norm", "mlp", "gate", "residual", "softmax", "layer_norm")[i % 8]
        params = {"block": block, "n": rng.choice((16, 32, 64, 128)), "d": rng.choice((16, 32, 64)), "seed": i}
        if block == "softmax":
            params.update(heads=rng.choice((1, 2, 4)), n=rng.choice((16, 32, 64)))
            if i >= 24:  # a batch of attention maps (Vela splits per leading index)
                params["batch"] = 2
        if block == "residual":
            params.update(n=rng.choice((8, 16)), d=rng.choice((16, 32)))
        blocks.append(params)
    return [Sample("module", {"blocks": blocks[i : i + 4]}, "fit") for i in range(0, len(blocks), 4)]


def target_seed(target: str) -> Generation:
    """Grids depend on the target generation only, so all U55 (all U85) configurations measure the same shapes."""
    return vela_cost.target_family(target)


def grid(target: str, split: str = "fit", scale: float = 1.0) -> list[Sample]:
    """The samples of one split ("fit", "heldout" or "probe"); held-out shapes never repeat fit shapes."""
    if split == "probe":
        return _probe_grid(target, scale)
    if split == "fit":
        return _grid(target, "fit", scale) + _module_grid(target, scale)
    fit_keys = {s.key for s in _grid(target, "fit", scale)}
    return [s for s in _grid(target, "heldout", 0.25 * scale) if s.key not in fit_keys]
