"""Rescale algebra: identity rescales, exact fusion, and data movement across a RESCALE.

A RESCALE term carries the exact integers the TOSA serializer emits (scale32,
SINGLE_ROUND, signed; the bridge reads nothing else as a Rescale):

    out[..., c] = clamp_out(((x[..., c] - in_zp) * m[c] + 2^(s[c] - 1)) >> s[c]) + out_zp)

with c = 0 for a per-tensor rescale (one m, s) and c the last dim for a
per-channel one. So legality is stated on integers, never on float scales.

Motivation: a RESCALE sits between most data-movement ops of a quantized TOSA
graph (InsertRescalePass); a transpose, slice or reshape that cannot cross it
cannot meet its inverse. Moving data movement across a rescale changes no
tensor's quantization: each element is rescaled with the same parameters.

Laws:
- identity: only when the rescale computes x exactly (is_identity_rescale),
  per tensor or on every channel;
- fusion: only an exact integer scaling of an int8/int16 tensor to int32
  followed by a rescale of that int32 tensor (fuses_exactly):
  the rounding of the second is then the rounding of the fused op. The
  second may be per-channel (each channel's shift must leave room: the
  analysis' prefix_min gives the smallest). Anything that would round twice
  (two rescales with fractional scales) is left out, and so is a per-channel
  first rescale (its exponent would differ per channel);
- sharing: an elementwise op that reads one RESCALE in both operand slots (a
  layer norm's x * x) reads it and a copy of it under another tag instead. Vela
  fuses a RESCALE into the op reading it only when that op is its one reader
  (regor `GraphIrOptimiser::FuseRescale`); shared, the rescale runs alone and
  so does the op's output rescale (a (1, 64, 32) x * x: 14,224 against 5,008
  cycles on Ethos-U55-128, 12,224 against 2,240 on Ethos-U85-256);
- transpose, slice and reshape move below a rescale (towards the inputs,
  so saturation terminates), a concat of equally rescaled inputs becomes a
  rescale of the concat. A per-channel rescale only moves where its channel
  axis stays the last axis (TOSA has no axis attribute); a slice that cuts the
  channels takes the window of multipliers and shifts of the channels it
  keeps (the analysis builds it: `window`).

Bounds: every rule joins a rescale with at most one operand or consumer, keyed on
the matched term. concat-of-rescales reads the inputs' sources from the analysis
(`rescaled_sources`, built one input at a time), so a round costs a constant per
concat input, never one join per same-parameter rescale per input (DESIGN §3).

Not covered: fusion after a per-channel rescale to int32 (an exponent per
channel: the fused shifts would be an elementwise difference of two Vecs,
which egglog's Vec cannot express); concats along the channel axis of
per-channel rescales; transposes that move the channel axis.
"""

from __future__ import annotations

from egglog import Fact, String, UnstableFn, Vec, eq, i64, ruleset, var

from eqsat.rules._law import law
from eqsat.rules.analysis import prefix_min, rescaled_sources, window
from eqsat.rules.guards import (
    INT32,
    concat_keeps_channels,
    NARROW_INPUTS,
    fuses_exactly,
    is_exact_one_per_channel,
    is_exact_power_of_two_scaling,
    is_identity_rescale,
    is_per_tensor,
    keeps_last_axis,
    same_last_dim,
    two_operands,
)
from eqsat.terms import Tensor, dtype, shape

x = var("x", Tensor)
out_dtype, mid_dtype = var("out_dtype", String), var("mid_dtype", String)
m, sh, m2, sh2 = (var(n, Vec[i64]) for n in ("m", "sh", "m2", "sh2"))
in_zp, out_zp, mid_in_zp, mid_out_zp, exponent = (var(n, i64) for n in ("in_zp", "out_zp", "mid_in_zp", "mid_out_zp", "exponent"))
tag, inner_tag = var("tag", i64), var("inner_tag", i64)
p, start, size, s, dims = (var(n, Vec[i64]) for n in ("p", "start", "size", "s", "dims"))
parts = var("parts", Vec[Tensor])
axis = var("axis", i64)

rescale = ruleset(name="rescale")


def shifted_down(shifts: Vec[i64], exponent: i64) -> Vec[i64]:
    """[s - exponent for s in shifts] (an expression for queries)."""
    return shifts.map(UnstableFn[i64, i64](i64.__add__, i64(0) - exponent))


def fuses_exactly_per_channel(exponent: i64, shifts: Vec[i64]) -> list[Fact]:
    """fuses_exactly on every channel: exponent <= 15 and min(shifts) - exponent >= 17 (prefix_min is the analysis' minimum)."""
    return [i64(1) < shifts.length(), *fuses_exactly(exponent, prefix_min(shifts, shifts.length()))]


@rescale.register
def _identity_and_fusion():
    # rescale(x, dtype(x), m, s, zp, zp) == x  when m * 2^-s == 1 exactly (per-tensor)
    yield law(
        "rescale-identity",
        x.rescale(out_dtype, m, sh, in_zp, out_zp, tag),
        x,
        *is_identity_rescale(dtype(x), out_dtype, m, sh, in_zp, out_zp),
    )
    # rescale_pc(x, dtype(x), m, s, zp, zp) == x  when m[c] * 2^-s[c] == 1 exactly on every channel c
    #   (same dtype, so the clamp never bites; ((x - zp) * 2^s + 2^(s-1)) >> s == x - zp on each channel)
    yield law(
        "per-channel-rescale-identity",
        x.rescale(out_dtype, m, sh, in_zp, out_zp, tag),
        x,
        eq(out_dtype).to(dtype(x)),
        eq(in_zp).to(out_zp),
        *is_exact_one_per_channel(m, sh),
    )
    for narrow in NARROW_INPUTS:
        # rescale(rescale(x, int32, m1, s1, zi, 0), d, [m2], [s2], 0, zo) == rescale(x, d, [m2], [s2 - k], zi, zo)
        #   when x is int8/int16 and m1 * 2^-s1 == 2^k exactly (the first rounds nothing), k <= 15 (|x - zi| * 2^k < 2^31:
        #   no saturation) and s2 - k >= 17; rounding: ((x-zi)*2^k*m2 + 2^(s2-1)) >> s2 == ((x-zi)*m2 + 2^(s2-k-1)) >> (s2-k).
        yield law(
            f"rescale-rescale-exact-{narrow.removeprefix('torch.')}",
            x.rescale(mid_dtype, m, sh, in_zp, mid_out_zp, inner_tag).rescale(out_dtype, m2, sh2, mid_in_zp, out_zp, tag),
            x.rescale(out_dtype, m2, Vec(sh2[0] - exponent), in_zp, out_zp, tag),
            eq(dtype(x)).to(String(narrow)),
            eq(mid_dtype).to(String(INT32)),
            eq(mid_out_zp).to(i64(0)),
            eq(mid_in_zp).to(i64(0)),
            *is_exact_power_of_two_scaling(m, sh, exponent),
            *is_per_tensor(m2),
            *fuses_exactly(exponent, sh2[0]),
        )
        # rescale_pc(rescale(x, int32, m1, s1, zi, 0), d, m2, s2, 0, zo) == rescale_pc(x, d, m2, s2 - k, zi, zo)
        #   when x is int8/int16, the first is per-tensor with m1 * 2^-s1 == 2^k exactly, k <= 15, and s2[c] - k >= 17 on
        #   every channel c; rounding, per channel: ((x-zi)*2^k*m2[c] + 2^(s2[c]-1)) >> s2[c] == ((x-zi)*m2[c] + 2^(s2[c]-k-1)) >> (s2[c]-k).
        #   (A per-channel first rescale is left out: its exponent differs per channel, and Vec has no elementwise zip.)
        shifts = var("shifts", Vec[i64])
        yield law(
            f"rescale-per-channel-rescale-exact-{narrow.removeprefix('torch.')}",
            x.rescale(mid_dtype, m, sh, in_zp, mid_out_zp, inner_tag).rescale(out_dtype, m2, sh2, mid_in_zp, out_zp, tag),
            x.rescale(out_dtype, m2, shifts, in_zp, out_zp, tag),
            eq(dtype(x)).to(String(narrow)),
            eq(mid_dtype).to(String(INT32)),
            eq(mid_out_zp).to(i64(0)),
            eq(mid_in_zp).to(i64(0)),
            *is_exact_power_of_two_scaling(m, sh, exponent),
            *fuses_exactly_per_channel(exponent, sh2),
            eq(shifts).to(shifted_down(sh2, exponent)),
            eq(shifts.length()).to(sh2.length()),
        )


@rescale.register
def _data_movement_through_rescale():
    # transpose(rescale(x, P), p) == rescale(transpose(x, p), P)  per-tensor
    yield law(
        "transpose-through-rescale",
        x.rescale(out_dtype, m, sh, in_zp, out_zp, tag).transpose(p),
        x.transpose(p).rescale(out_dtype, m, sh, in_zp, out_zp, tag),
        *is_per_tensor(m),
    )
    # transpose(rescale_pc(x, P), p) == rescale_pc(transpose(x, p), P)  when p keeps the channel (last) axis last
    yield law(
        "transpose-through-per-channel-rescale",
        x.rescale(out_dtype, m, sh, in_zp, out_zp, tag).transpose(p),
        x.transpose(p).rescale(out_dtype, m, sh, in_zp, out_zp, tag),
        i64(1) < m.length(),
        *keeps_last_axis(p),
    )
    # slice(rescale(x, P), box) == rescale(slice(x, box), P)  per-tensor
    yield law(
        "slice-through-rescale",
        x.rescale(out_dtype, m, sh, in_zp, out_zp, tag).slice(start, size),
        x.slice(start, size).rescale(out_dtype, m, sh, in_zp, out_zp, tag),
        *is_per_tensor(m),
    )
    # slice(rescale_pc(x, P), box) == rescale_pc(slice(x, box), P)  when the box keeps every channel
    yield law(
        "slice-through-per-channel-rescale",
        x.rescale(out_dtype, m, sh, in_zp, out_zp, tag).slice(start, size),
        x.slice(start, size).rescale(out_dtype, m, sh, in_zp, out_zp, tag),
        i64(1) < m.length(),
        *same_last_dim(size, shape(x)),
    )
    kept_m, kept_sh, first, count, last = var("kept_m", Vec[i64]), var("kept_sh", Vec[i64]), var("first", i64), var("count", i64), var("last", i64)
    # slice(rescale_pc(x, m, s), box) == rescale_pc(slice(x, box), m[c:c+n], s[c:c+n])  when the box takes n < len(m)
    #   channels from channel c (start and size on the last axis): channel j of the slice is channel c + j of x
    yield law(
        "slice-of-channels-through-per-channel-rescale",
        x.rescale(out_dtype, m, sh, in_zp, out_zp, tag).slice(start, size),
        x.slice(start, size).rescale(out_dtype, kept_m, kept_sh, in_zp, out_zp, tag),
        i64(1) < m.length(),
        eq(last).to(size.length() - 1),
        eq(count).to(size[last]),
        count < m.length(),
        eq(first).to(start[last]),
        eq(kept_m).to(window(m, first, count)),
        eq(kept_sh).to(window(sh, first, count)),
    )
    # reshape(rescale(x, P), s) == rescale(reshape(x, s), P)  per-tensor
    yield law(
        "reshape-through-rescale",
        x.rescale(out_dtype, m, sh, in_zp, out_zp, tag).reshape(s),
        x.reshape(s).rescale(out_dtype, m, sh, in_zp, out_zp, tag),
        *is_per_tensor(m),
    )
    # reshape(rescale_pc(x, P), s) == rescale_pc(reshape(x, s), P)  when the last dim is kept
    yield law(
        "reshape-through-per-channel-rescale",
        x.rescale(out_dtype, m, sh, in_zp, out_zp, tag).reshape(s),
        x.reshape(s).rescale(out_dtype, m, sh, in_zp, out_zp, tag),
        i64(1) < m.length(),
        *same_last_dim(s, shape(x)),
    )


@rescale.register
def _shared_operand_rescale():
    key, operands, shared = var("key", String), var("operands", Vec[Tensor]), var("shared", Tensor)
    # f(r, r) == f(r, r')  for r = rescale(x, P, tag) and r' = rescale(x, P, -1 - tag), f elementwise: r' is r under
    #   another tag (the same values), so that each operand slot reads a RESCALE of its own
    yield law(
        "split-shared-operand-rescale",
        Tensor.elementwise(key, operands),
        Tensor.elementwise(key, Vec(shared, x.rescale(out_dtype, m, sh, in_zp, out_zp, i64(-1) - tag))),
        *two_operands(operands, shared, shared),
        eq(shared).to(x.rescale(out_dtype, m, sh, in_zp, out_zp, tag)),
    )


@rescale.register
def _concat_of_rescales():
    source_dtype, sources = var("source_dtype", String), var("sources", Vec[Tensor])
    # concat([rescale(a_i, P)], axis) == rescale(concat([a_i], axis), P)  when every a_i has the same dtype and,
    #   for a per-channel P, axis is not the channel (last) axis (the hoisted rescale keeps the first input's tag)
    yield law(
        "concat-of-rescales",
        Tensor.concat(parts, axis),
        Tensor.concat(sources, axis).rescale(out_dtype, m, sh, in_zp, out_zp, tag),
        i64(1) < parts.length(),
        eq(sources).to(rescaled_sources(parts, out_dtype, m, sh, in_zp, out_zp, tag, source_dtype, parts.length())),
        eq(dims).to(shape(sources[0])),
        *concat_keeps_channels(axis, dims, m),
    )
