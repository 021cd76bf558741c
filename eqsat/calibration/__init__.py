"""The tooling that fits the cost model to the pinned Vela: `eqsat calibrate`.

It writes eqsat/extract/calibration/<target>.json, the only thing the
optimizer reads of it; nothing in the optimizer imports this package.

- `grid`: which samples to measure (single ops, contexts, lowered blocks);
- `graphs`: the TOSA graphs (and torch blocks) each sample stands for;
- `calibrate`: measure the samples with Vela (cached, resumable, parallel), fit, write the file;
- `fit`: the per-family NPU and memory-access models;
- `report`: the model against Vela on held-out shapes and on benchmarked models.
"""
