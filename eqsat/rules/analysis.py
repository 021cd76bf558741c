"""The analysis: static shapes and dtypes of the terms the rewrites create.

Loaded terms get their shape and dtype from the FX meta (the bridge sets them).
These rules derive them for new terms, name the operands of concats and
elementwise ops with `element` handles that other rules join on, and fill the
lookups that let one rule stand for a law at every index (`concat_offset`,
`index_below`, `inverse_perm`, ...). They are saturated apart from the
rewrites (STYLE §egglog-python). Two helpers create extractable terms:
`transposed_inputs` builds the transposes that transpose-through-concat puts
in its new concat, and `reshaped_inputs` the reshapes that
reshape-through-concat puts in its new concat (finitely many: one per input of
a transposed or reshaped concat).

Bounds: every rule joins the matched term with at most two facts keyed on it
(its operand's shape, its element at index i, the previous step of an
inductive helper); the helpers that enumerate a Vec (`concat_offset`,
`prefix_min`, `window`, `rescaled_sources`, `transposed_sources`,
`inverse_perm`, `paired_perm`, `transposed_inputs`, `reshaped_inputs`) take
one element per step, and only for the terms whose law reads them (a
transpose under a slice, of a pad, of a concat; a reshape of a concat);
`view_window` is one row per pair of shapes around
the reshape of a transpose, reshape, transpose window, and
`first_inner_boundary`, whose rules enumerate the dims of both shapes, is keyed
on those rows, not on the windows: an e-graph of many equivalent windows
(every reshape view `transpose-rank` builds) has few pairs of shapes, and the
analysis runs its rules at every step of every iteration; `index_below` is 21
rows, whatever the graph. Ops of
one key share their dtype through `keyed_dtype` instead of a join of every
pair of same-key ops.
"""

from __future__ import annotations

from egglog import String, StringLike, Vec, eq, function, i64, i64Like, relation, rule, ruleset, set_, union, var

from eqsat.ir import MAX_RANK
from eqsat.rules.guards import MAX_CONCAT_ARITY, adjacent_along, zeros_like
from eqsat.terms import Tensor, dtype, shape

x, t = var("x", Tensor), var("t", Tensor)
parts = var("parts", Vec[Tensor])
perm, start, size, new_shape, dims = (var(n, Vec[i64]) for n in ("perm", "start", "size", "new_shape", "dims"))
axis = var("axis", i64)
multipliers, shifts = var("multipliers", Vec[i64]), var("shifts", Vec[i64])
in_zp, out_zp, tag = var("in_zp", i64), var("out_zp", i64), var("tag", i64)
element_type = var("element_type", String)

analysis = ruleset(name="analysis")


@function(egg_fn="concat_offset", merge=lambda old, new: old)
def concat_offset(parts: Vec[Tensor], axis: i64Like, index: i64Like) -> i64:
    """Where parts[index] starts along axis in concat(parts, axis): the sum of the extents before it.

    Defined for every index of every concat whose parts' shapes are known, so
    a rule can enumerate the inputs of a concat of any arity by joining on it
    (queries cannot iterate over a Vec, DESIGN §3).
    """


@function(egg_fn="keyed_dtype", merge=lambda old, new: old)
def keyed_dtype(key: StringLike) -> String:
    """The output type of the reduce or table ops with this key (the key names the op and fixes its output type)."""


@analysis.register
def _data_movement_shapes():
    # shape(transpose(x, p))[i] == shape(x)[p[i]]
    yield rule(eq(t).to(x.transpose(perm)), eq(dims).to(shape(x)), eq(dims.length()).to(perm.length()), name="shape-transpose").then(
        set_(shape(t)).to(perm.map(dims.__getitem__))
    )
    # shape(slice(x, start, size)) == size
    yield rule(eq(t).to(x.slice(start, size)), name="shape-slice").then(set_(shape(t)).to(size))
    # shape(reshape(x, s)) == s
    yield rule(eq(t).to(x.reshape(new_shape)), name="shape-reshape").then(set_(shape(t)).to(new_shape))
    # shape(reduce(k, x, a)) == shape(x) with dim a set to 1
    key = var("key", String)
    yield rule(eq(t).to(Tensor.reduce(key, x, axis)), eq(dims).to(shape(x)), axis < dims.length(), name="shape-reduce").then(
        set_(shape(t)).to(dims.set(axis, i64(1)))
    )
    # dtype(reduce(k, x, a)) == keyed_dtype(k) == dtype(reduce(k, y, b)): the key fixes the op and its output type
    #   (through keyed_dtype, so each rule joins two atoms keyed on one term, not every pair of same-key reduces)
    yield rule(eq(t).to(Tensor.reduce(key, x, axis)), eq(element_type).to(dtype(t)), name="keyed-dtype-of-reduce").then(
        set_(keyed_dtype(key)).to(element_type)
    )
    yield rule(eq(t).to(Tensor.reduce(key, x, axis)), eq(element_type).to(keyed_dtype(key)), name="dtype-reduce").then(
        set_(dtype(t)).to(element_type)
    )
    # shape(rescale(x, ...)) == shape(x)
    yield rule(eq(t).to(x.rescale(element_type, multipliers, shifts, in_zp, out_zp, tag)), eq(dims).to(shape(x)), name="shape-rescale").then(
        set_(shape(t)).to(dims)
    )


@analysis.register
def _pad_and_table_types():
    padding, value = var("padding", Vec[i64]), var("value", i64)
    for rank in range(1, MAX_RANK + 1):
        # shape(pad(x, padding, v))[i] == shape(x)[i] + padding[2i] + padding[2i + 1]
        yield rule(
            eq(t).to(x.pad(padding, value)),
            eq(dims).to(shape(x)),
            eq(dims.length()).to(i64(rank)),
            eq(padding.length()).to(i64(2 * rank)),
            name=f"shape-pad-{rank}",
        ).then(set_(shape(t)).to(Vec[i64](*[dims[i] + padding[2 * i] + padding[2 * i + 1] for i in range(rank)])))
    # dtype(pad(x, padding, v)) == dtype(x)
    yield rule(eq(t).to(x.pad(padding, value)), eq(element_type).to(dtype(x))).then(set_(dtype(t)).to(element_type))
    key, lut = var("key", String), var("lut", Tensor)
    # shape(table(k, x, lut)) == shape(x)
    yield rule(eq(t).to(Tensor.table(key, x, lut)), eq(dims).to(shape(x)), name="shape-table").then(set_(shape(t)).to(dims))
    # dtype(table(k, x, lut)) == keyed_dtype(k) == dtype(table(k, y, lut')): the key fixes the op and its output type
    yield rule(eq(t).to(Tensor.table(key, x, lut)), eq(element_type).to(dtype(t)), name="keyed-dtype-of-table").then(
        set_(keyed_dtype(key)).to(element_type)
    )
    yield rule(eq(t).to(Tensor.table(key, x, lut)), eq(element_type).to(keyed_dtype(key)), name="dtype-table").then(
        set_(dtype(t)).to(element_type)
    )


@analysis.register
def _operand_elements():
    key, index, operand = var("key", String), var("index", i64), var("operand", Tensor)
    # element(parts, 0) == parts[0]  for the inputs of every concat and the operands of every elementwise op
    yield rule(eq(t).to(Tensor.concat(parts, axis)), i64(0) < parts.length(), name="first-concat-element").then(
        union(Tensor.element(parts, i64(0))).with_(parts[0])
    )
    yield rule(eq(t).to(Tensor.elementwise(key, parts)), i64(0) < parts.length(), name="first-operand-element").then(
        union(Tensor.element(parts, i64(0))).with_(parts[0])
    )
    # element(parts, i + 1) == parts[i + 1]  while i + 1 < len(parts)
    yield rule(
        eq(operand).to(Tensor.element(parts, index)), index + 1 < parts.length(), name="next-element"
    ).then(union(Tensor.element(parts, index + 1)).with_(parts[index + 1]))


@analysis.register
def _concat_shapes():
    total, first_shape = var("total", i64), var("first_shape", Vec[i64])
    # shape(concat(parts, axis)) == shape(parts[0]) with dim axis the sum of the parts' extents
    yield rule(
        eq(t).to(Tensor.concat(parts, axis)),
        eq(total).to(concat_offset(parts, axis, parts.length())),
        eq(first_shape).to(shape(Tensor.element(parts, i64(0)))),
        axis < first_shape.length(),
        name="shape-concat",
    ).then(set_(shape(t)).to(first_shape.set(axis, total)))


@analysis.register
def _data_movement_dtypes():
    # data movement keeps the element type
    yield rule(eq(t).to(x.transpose(perm)), eq(element_type).to(dtype(x))).then(set_(dtype(t)).to(element_type))
    yield rule(eq(t).to(x.slice(start, size)), eq(element_type).to(dtype(x))).then(set_(dtype(t)).to(element_type))
    yield rule(eq(t).to(x.reshape(new_shape)), eq(element_type).to(dtype(x))).then(set_(dtype(t)).to(element_type))
    yield rule(eq(t).to(Tensor.concat(parts, axis)), eq(element_type).to(dtype(Tensor.element(parts, i64(0))))).then(
        set_(dtype(t)).to(element_type)
    )
    # dtype(rescale(x, d, ...)) == d
    yield rule(eq(t).to(x.rescale(element_type, multipliers, shifts, in_zp, out_zp, tag))).then(set_(dtype(t)).to(element_type))


@analysis.register
def _concat_offsets():
    offset, next_offset, extent, index, next_index = (var(n, i64) for n in ("offset", "next_offset", "extent", "index", "next_index"))
    # concat_offset(parts, axis, 0) == 0
    yield rule(eq(t).to(Tensor.concat(parts, axis)), name="concat-offset-first").then(
        set_(concat_offset(parts, axis, i64(0))).to(i64(0))
    )
    # concat_offset(parts, axis, i + 1) == concat_offset(parts, axis, i) + shape(parts[i])[axis]
    yield rule(
        eq(offset).to(concat_offset(parts, axis, index)),
        eq(next_index).to(index + 1),
        eq(dims).to(shape(Tensor.element(parts, index))),
        axis < dims.length(),
        eq(extent).to(dims[axis]),
        eq(next_offset).to(offset + extent),
        name="concat-offset-next",
    ).then(set_(concat_offset(parts, axis, next_index)).to(next_offset))


@function(egg_fn="prefix_product")
def prefix_product(dims: Vec[i64], count: i64Like) -> i64:
    """dims[0] * ... * dims[count - 1], the number of elements in the leading count dims (1 for count 0).

    Defined for 0 <= count <= len(dims) of every known shape, so a rule can
    find the dims at which two shapes of a reshape line up by joining on it
    (queries cannot iterate over a Vec, DESIGN §3).
    """


@analysis.register
def _prefix_products():
    known = var("known", Vec[i64])
    for rank in range(MAX_RANK + 1):
        products = [var(f"product{i}", i64) for i in range(rank + 1)]
        # prefix_product(shape(t), i) == shape(t)[0] * ... * shape(t)[i - 1]  for 0 <= i <= rank
        yield rule(
            eq(known).to(shape(t)),
            eq(known.length()).to(i64(rank)),
            eq(products[0]).to(i64(1)),
            *[eq(products[i + 1]).to(products[i] * known[i]) for i in range(rank)],
            name=f"prefix-products-{rank}",
        ).then(*[set_(prefix_product(known, i64(i))).to(product) for i, product in enumerate(products)])


@function(egg_fn="prefix_min")
def prefix_min(values: Vec[i64], count: i64Like) -> i64:
    """min(values[0], ..., values[count - 1]), for 1 <= count <= len(values).

    Defined for the shifts of every per-channel rescale of a rescale (what
    per-channel rescale fusion needs: its smallest shift), so a rule can bound
    every channel at once (queries cannot iterate over a Vec, DESIGN §3).
    """


@function(egg_fn="window")
def window(values: Vec[i64], start: i64Like, count: i64Like) -> Vec[i64]:
    """values[start : start + count], for the windows `wants_window` asks for (Vec has no slice primitive)."""


wants_window = relation("wants_window", Vec[i64], i64, i64)
"""wants_window(v, start, n): some rule needs window(v, start, n); the analysis builds it one element at a time."""


@analysis.register
def _channel_vectors():
    v, w = var("v", Vec[i64]), var("w", Vec[i64])
    m2, s2 = var("m2", Vec[i64]), var("s2", Vec[i64])
    low, next_low, k, n, first, element, last = (var(name, i64) for name in ("low", "next_low", "k", "n", "first", "element", "last"))
    other_type = var("other_type", String)
    other_zp, other_out_zp, other_tag = var("other_zp", i64), var("other_out_zp", i64), var("other_tag", i64)
    # prefix_min(s, 1) == s[0]  for the shifts s of a per-channel rescale of a rescale
    yield rule(
        eq(t).to(x.rescale(other_type, multipliers, shifts, other_zp, other_out_zp, other_tag).rescale(element_type, m2, s2, in_zp, out_zp, tag)),
        i64(1) < s2.length(),
        eq(first).to(s2[0]),
        name="prefix-min-first",
    ).then(set_(prefix_min(s2, i64(1))).to(first))
    # prefix_min(v, k + 1) == min(prefix_min(v, k), v[k])  while k < len(v)
    yield rule(
        eq(low).to(prefix_min(v, k)),
        k < v.length(),
        eq(next_low).to(low.min(v[k])),
        name="prefix-min-next",
    ).then(set_(prefix_min(v, k + 1)).to(next_low))
    # wants_window(m, c, n) and wants_window(s, c, n)  for a per-channel rescale (m, s) under a slice whose box
    #   takes n < len(m) channels from channel c; window(v, c, 0) == []
    yield rule(
        eq(t).to(x.rescale(element_type, multipliers, shifts, in_zp, out_zp, tag).slice(start, size)),
        i64(1) < multipliers.length(),
        eq(last).to(size.length() - 1),
        eq(n).to(size[last]),
        n < multipliers.length(),
        eq(axis).to(start[last]),
        name="wants-channel-window",
    ).then(
        wants_window(multipliers, axis, n),
        wants_window(shifts, axis, n),
        set_(window(multipliers, axis, i64(0))).to(Vec[i64].empty()),
        set_(window(shifts, axis, i64(0))).to(Vec[i64].empty()),
    )
    # window(v, c, k + 1) == window(v, c, k) + [v[c + k]]  while k < n for a wanted window(v, c, n)
    yield rule(
        eq(w).to(window(v, axis, k)),
        wants_window(v, axis, n),
        k < n,
        eq(element).to(v[axis + k]),
        name="window-next",
    ).then(set_(window(v, axis, k + 1)).to(w.push(element)))


@function(egg_fn="rescaled_sources", merge=lambda old, new: old)
def rescaled_sources(
    parts: Vec[Tensor],
    dtype: StringLike,
    multipliers: Vec[i64],
    shifts: Vec[i64],
    in_zp: i64Like,
    out_zp: i64Like,
    tag: i64Like,
    source_dtype: StringLike,
    count: i64Like,
) -> Vec[Tensor]:
    """[a_0, ..., a_{count-1}] when parts[i] == rescale(a_i, dtype, multipliers, shifts, in_zp, out_zp, tag_i) for every
    i < count, every a_i has dtype source_dtype, and tag is the tag of parts[0]'s rescale.

    Defined for the inputs of every concat whose first input is a rescale, one
    input at a time, so that concat-of-rescales joins a bounded number of atoms
    per step instead of one rescale atom per input (k-way self-joins explode,
    DESIGN §3). Where an input's e-class holds several such rescales, the first
    found is kept (merge: old); each is a valid source.
    """


@function(egg_fn="transposed_sources", merge=lambda old, new: old)
def transposed_sources(parts: Vec[Tensor], perm: Vec[i64], count: i64Like) -> Vec[Tensor]:
    """[a_0, ..., a_{count-1}] when parts[i] == transpose(a_i, perm) for every i < count.

    Built like rescaled_sources, for transpose-hoist-from-concat.
    """


@analysis.register
def _hoistable_concat_inputs():
    first, item, y, source = var("first", Tensor), var("item", Tensor), var("y", Tensor), var("source", Tensor)
    sources = var("sources", Vec[Tensor])
    index, other_tag = var("index", i64), var("other_tag", i64)
    source_type = var("source_type", String)
    # rescaled_sources(parts, P, tag, d, 1) == [a]  when parts[0] == rescale(a, P, tag) and dtype(a) == d
    yield rule(
        eq(t).to(Tensor.concat(parts, axis)),
        eq(first).to(Tensor.element(parts, i64(0))),
        eq(first).to(x.rescale(element_type, multipliers, shifts, in_zp, out_zp, tag)),
        eq(source_type).to(dtype(x)),
        name="rescaled-sources-first",
    ).then(set_(rescaled_sources(parts, element_type, multipliers, shifts, in_zp, out_zp, tag, source_type, i64(1))).to(Vec[Tensor](x)))
    # rescaled_sources(parts, P, tag, d, i + 1) == rescaled_sources(parts, P, tag, d, i) + [a]
    #   when parts[i] == rescale(a, P, any tag) and dtype(a) == d, while i < len(parts)
    yield rule(
        eq(sources).to(rescaled_sources(parts, element_type, multipliers, shifts, in_zp, out_zp, tag, source_type, index)),
        index < parts.length(),
        eq(item).to(Tensor.element(parts, index)),
        eq(item).to(y.rescale(element_type, multipliers, shifts, in_zp, out_zp, other_tag)),
        eq(source_type).to(dtype(y)),
        name="rescaled-sources-next",
    ).then(set_(rescaled_sources(parts, element_type, multipliers, shifts, in_zp, out_zp, tag, source_type, index + 1)).to(sources.push(y)))
    # transposed_sources(parts, p, 1) == [a]  when parts[0] == transpose(a, p)
    yield rule(
        eq(t).to(Tensor.concat(parts, axis)),
        eq(first).to(Tensor.element(parts, i64(0))),
        eq(first).to(x.transpose(perm)),
        name="transposed-sources-first",
    ).then(set_(transposed_sources(parts, perm, i64(1))).to(Vec[Tensor](x)))
    # transposed_sources(parts, p, i + 1) == transposed_sources(parts, p, i) + [a]  when parts[i] == transpose(a, p), while i < len(parts)
    yield rule(
        eq(sources).to(transposed_sources(parts, perm, index)),
        index < parts.length(),
        eq(item).to(Tensor.element(parts, index)),
        eq(item).to(source.transpose(perm)),
        name="transposed-sources-next",
    ).then(set_(transposed_sources(parts, perm, index + 1)).to(sources.push(source)))


@function(egg_fn="slice_run_begin", merge=lambda old, new: old.min(new))
def slice_run_begin(parts: Vec[Tensor], axis: i64Like, x: Tensor, start: Vec[i64], index: i64Like) -> i64:
    """The first input of the run of adjacent slices of x, along axis, in concat(parts, axis) that holds
    parts[index] == slice(x, start, _): the smallest b with parts[b..index] slices of x, each starting
    along axis where the one before it ends, the same box on every other dim. (Merge: min, so its
    value after saturation is the run's true first input.)"""


@function(egg_fn="slice_run_end", merge=lambda old, new: old.max(new))
def slice_run_end(parts: Vec[Tensor], axis: i64Like, x: Tensor, start: Vec[i64], index: i64Like) -> i64:
    """One past the last input of that run (merge: max)."""


@function(egg_fn="first_slice_run", merge=lambda old, new: old.min(new))
def first_slice_run(parts: Vec[Tensor], axis: i64Like) -> i64:
    """The first input of the first run of two or more adjacent slices in concat(parts, axis) (merge: min:
    while the runs are being found a later input may be proposed, never an earlier one)."""


@function(egg_fn="first_nested_concat", merge=lambda old, new: old.min(new))
def first_nested_concat(parts: Vec[Tensor], axis: i64Like) -> i64:
    """The first input of concat(parts, axis) that is itself a concat along axis and can be flattened into it
    (the flattened concat has at most MAX_CONCAT_ARITY + 1 inputs). Merge: min."""


@function(egg_fn="leading_wanted", merge=lambda old, new: old.max(new))
def leading_wanted(parts: Vec[Tensor]) -> i64:
    """How many leading inputs of parts some law rebuilds a concat from (merge: max)."""


@function(egg_fn="leading_parts", merge=lambda old, new: old)
def leading_parts(parts: Vec[Tensor], count: i64Like) -> Vec[Tensor]:
    """parts[:count] for count <= leading_wanted(parts) (Vec has no slice primitive)."""


@function(egg_fn="trailing_parts", merge=lambda old, new: old)
def trailing_parts(parts: Vec[Tensor], first: i64Like) -> Vec[Tensor]:
    """parts[first:], for the concats some law rebuilds (those with a leading_wanted)."""


def wants_leading(parts: Vec[Tensor], count: i64) -> list:
    """Actions: build leading_parts(parts, 0..count) and trailing_parts(parts, 0..len(parts))."""
    return [
        set_(leading_wanted(parts)).to(count),
        set_(leading_parts(parts, i64(0))).to(Vec[Tensor].empty()),
        set_(trailing_parts(parts, i64(0))).to(parts),
    ]


@analysis.register
def _adjacent_slice_runs():
    index, begin, end, before, first = (var(n, i64) for n in ("index", "begin", "end", "before", "first"))
    start_b, size_b = var("start_b", Vec[i64]), var("size_b", Vec[i64])
    head, rest = var("head", Vec[Tensor]), var("rest", Vec[Tensor])
    item, source = var("item", Tensor), var("source", Tensor)
    # slice_run_begin(parts, axis, x, start, i) == i == slice_run_end(...) - 1  for every input parts[i] == slice(x, start, _)
    yield rule(
        eq(t).to(Tensor.concat(parts, axis)),
        eq(item).to(Tensor.element(parts, index)),
        eq(item).to(source.slice(start, size)),
        name="slice-run-single",
    ).then(
        set_(slice_run_begin(parts, axis, source, start, index)).to(index),
        set_(slice_run_end(parts, axis, source, start, index)).to(index + 1),
    )
    # slice_run_begin(.., start_b, i + 1) <= slice_run_begin(.., start, i)  when parts[i + 1] == slice(x, start_b, size_b)
    #   follows parts[i] == slice(x, start, size) along axis (keyed on the row for i, one input at a time)
    yield rule(
        eq(begin).to(slice_run_begin(parts, axis, source, start, index)),
        eq(Tensor.element(parts, index)).to(source.slice(start, size)),
        eq(Tensor.element(parts, index + 1)).to(source.slice(start_b, size_b)),
        *adjacent_along(axis, start, size, start_b, size_b),
        name="slice-run-begin-next",
    ).then(set_(slice_run_begin(parts, axis, source, start_b, index + 1)).to(begin))
    # slice_run_end(.., start, i - 1) >= slice_run_end(.., start_b, i)  when parts[i - 1] == slice(x, start, size) is followed
    #   along axis by parts[i] == slice(x, start_b, size_b)
    yield rule(
        eq(end).to(slice_run_end(parts, axis, source, start_b, index)),
        eq(before).to(index - 1),
        i64(0) <= before,
        eq(Tensor.element(parts, before)).to(source.slice(start, size)),
        eq(Tensor.element(parts, index)).to(source.slice(start_b, size_b)),
        *adjacent_along(axis, start, size, start_b, size_b),
        name="slice-run-end-previous",
    ).then(set_(slice_run_end(parts, axis, source, start, before)).to(end))
    # first_slice_run(parts, axis) <= i  when a run of two or more adjacent slices starts at i
    yield rule(
        eq(index).to(slice_run_begin(parts, axis, source, start, index)),
        eq(end).to(slice_run_end(parts, axis, source, start, index)),
        index + 2 <= end,
        name="first-slice-run",
    ).then(set_(first_slice_run(parts, axis)).to(index), *wants_leading(parts, index))
    inner = var("inner", Vec[Tensor])
    # first_nested_concat(parts, axis) <= i  when parts[i] == concat(inner, axis) and len(parts) + len(inner) <= MAX_CONCAT_ARITY + 1
    yield rule(
        eq(t).to(Tensor.concat(parts, axis)),
        eq(Tensor.element(parts, index)).to(Tensor.concat(inner, axis)),
        parts.length() + inner.length() <= i64(MAX_CONCAT_ARITY + 1),
        name="first-nested-concat",
    ).then(set_(first_nested_concat(parts, axis)).to(index), *wants_leading(parts, index))
    # leading_parts(parts, i + 1) == leading_parts(parts, i) + [parts[i]]  while i < leading_wanted(parts)
    yield rule(
        eq(head).to(leading_parts(parts, index)),
        eq(first).to(leading_wanted(parts)),
        index < first,
        eq(item).to(Tensor.element(parts, index)),
        name="leading-parts-next",
    ).then(set_(leading_parts(parts, index + 1)).to(head.push(item)))
    # trailing_parts(parts, i + 1) == trailing_parts(parts, i) without its first element  while i < len(parts)
    yield rule(
        eq(rest).to(trailing_parts(parts, index)),
        index < parts.length(),
        name="trailing-parts-next",
    ).then(set_(trailing_parts(parts, index + 1)).to(rest.remove(i64(0))))


index_below = relation("index_below", i64, i64, egg_fn="index_below")
"""index_below(n, i): 0 <= i < n, for 1 <= n <= MAX_RANK. A query joins it to enumerate the positions of a
permutation or shape (queries cannot iterate over a Vec, DESIGN §3): one rule for every position."""


@function(egg_fn="inverse_perm", merge=lambda old, new: old)
def inverse_perm(perm: Vec[i64], count: i64Like) -> Vec[i64]:
    """[0, ..., 0] with entry perm[k] set to k for every k < count; for count == len(perm), the inverse
    permutation: output dim inverse[d] of transpose(x, perm) is input dim d.

    Defined for the perm of every transpose under a slice (what slice-through-transpose needs: the box of
    the transpose as a box of its input), one entry per step.
    """


@function(egg_fn="paired_perm", merge=lambda old, new: old)
def paired_perm(perm: Vec[i64], count: i64Like) -> Vec[i64]:
    """[2 perm[0], 2 perm[0] + 1, ..., 2 perm[count - 1], 2 perm[count - 1] + 1]: for count == len(perm), the
    order of a PAD's (before, after) entries after transpose(., perm) (pair i is the input's pair perm[i]).

    Defined for the perm of every transpose of a pad, one pair per step.
    """


@function(egg_fn="transposed_inputs", merge=lambda old, new: old)
def transposed_inputs(parts: Vec[Tensor], perm: Vec[i64], count: i64Like) -> Vec[Tensor]:
    """[transpose(parts[0], perm), ..., transpose(parts[count - 1], perm)], for every transpose(concat(parts, _), perm)
    of 2..MAX_CONCAT_ARITY inputs: the inputs of the concat that transpose-through-concat builds.

    One of the two helpers that create tensor terms (with `reshaped_inputs`): the transposes the law puts
    in its new concat, one input per step, so that the law is one rule for every arity
    (queries cannot iterate over a Vec, DESIGN §3).
    """


@function(egg_fn="reshaped_inputs", merge=lambda old, new: old)
def reshaped_inputs(parts: Vec[Tensor], axis: i64Like, new_shape: Vec[i64], new_axis: i64Like, count: i64Like) -> Vec[Tensor]:
    """[reshape(parts[0], s0), ..., reshape(parts[count - 1], s_count-1)], where s_i is new_shape with dim new_axis
    set to shape(parts[i])[axis]: the inputs of the concat that reshape-through-concat builds.

    Defined for every reshape(concat(parts, axis), new_shape) of 2..MAX_CONCAT_ARITY inputs that keeps the
    concat's axis as its dim new_axis, with as many elements before it (the law's condition), one input per
    step, so that the law is one rule for every arity.
    """


@analysis.register
def _reshaped_inputs():
    new_axis, before, index, extent = var("new_axis", i64), var("before", i64), var("index", i64), var("extent", i64)
    item, built = var("item", Tensor), var("built", Vec[Tensor])
    # reshaped_inputs(parts, axis, s, j, 0) == []  for every reshape(concat(parts, axis), s) of 2..MAX_CONCAT_ARITY
    #   inputs with prod(s[:j]) == prod(shape[:axis]) and s[j] == shape[axis]
    yield rule(
        eq(t).to(Tensor.concat(parts, axis).reshape(new_shape)),
        i64(1) < parts.length(),
        parts.length() <= i64(MAX_CONCAT_ARITY),
        eq(dims).to(shape(Tensor.concat(parts, axis))),
        axis < dims.length(),
        index_below(new_shape.length(), new_axis),
        eq(before).to(prefix_product(dims, axis)),
        eq(before).to(prefix_product(new_shape, new_axis)),
        eq(new_shape[new_axis]).to(dims[axis]),
        name="reshaped-inputs-first",
    ).then(set_(reshaped_inputs(parts, axis, new_shape, new_axis, i64(0))).to(Vec[Tensor].empty()))
    # reshaped_inputs(..., i + 1) == reshaped_inputs(..., i) + [reshape(parts[i], s with dim j = shape(parts[i])[axis])]
    yield rule(
        eq(built).to(reshaped_inputs(parts, axis, new_shape, new_axis, index)),
        index < parts.length(),
        eq(item).to(Tensor.element(parts, index)),
        eq(extent).to(shape(item)[axis]),
        name="reshaped-inputs-next",
    ).then(
        set_(reshaped_inputs(parts, axis, new_shape, new_axis, index + 1)).to(
            built.push(item.reshape(new_shape.set(new_axis, extent)))
        )
    )


@analysis.register
def _permutation_lookups():
    index, entry = var("index", i64), var("entry", i64)
    partial, following, zeros = var("partial", Vec[i64]), var("following", Vec[i64]), var("zeros", Vec[i64])
    item, built = var("item", Tensor), var("built", Vec[Tensor])
    padding, value = var("padding", Vec[i64]), var("value", i64)
    # index_below(n, i)  for 0 <= i < n <= MAX_RANK (a query with no atoms: it fires once)
    yield rule(name="index-below").then(*[index_below(i64(n), i64(i)) for n in range(1, MAX_RANK + 1) for i in range(n)])
    # inverse_perm(p, 0) == [0] * len(p)  for the perm of every slice(transpose(x, p), ...)
    yield rule(eq(t).to(x.transpose(perm).slice(start, size)), eq(zeros).to(zeros_like(perm)), name="inverse-perm-first").then(
        set_(inverse_perm(perm, i64(0))).to(zeros)
    )
    # inverse_perm(p, k + 1) == inverse_perm(p, k) with entry p[k] set to k  while k < len(p)
    yield rule(
        eq(partial).to(inverse_perm(perm, index)),
        index < perm.length(),
        eq(following).to(partial.set(perm[index], index)),
        name="inverse-perm-next",
    ).then(set_(inverse_perm(perm, index + 1)).to(following))
    # paired_perm(p, 0) == []  for the perm of every transpose(pad(x, ...), p)
    yield rule(eq(t).to(x.pad(padding, value).transpose(perm)), name="paired-perm-first").then(
        set_(paired_perm(perm, i64(0))).to(Vec[i64].empty())
    )
    # paired_perm(p, k + 1) == paired_perm(p, k) + [2 p[k], 2 p[k] + 1]  while k < len(p)
    yield rule(
        eq(partial).to(paired_perm(perm, index)),
        index < perm.length(),
        eq(entry).to(perm[index] * 2),
        name="paired-perm-next",
    ).then(set_(paired_perm(perm, index + 1)).to(partial.push(entry).push(entry + 1)))
    # transposed_inputs(parts, p, 0) == []  for every transpose(concat(parts, axis), p) of 2..MAX_CONCAT_ARITY inputs
    yield rule(
        eq(t).to(Tensor.concat(parts, axis).transpose(perm)),
        i64(1) < parts.length(),
        parts.length() <= i64(MAX_CONCAT_ARITY),
        name="transposed-inputs-first",
    ).then(set_(transposed_inputs(parts, perm, i64(0))).to(Vec[Tensor].empty()))
    # transposed_inputs(parts, p, i + 1) == transposed_inputs(parts, p, i) + [transpose(parts[i], p)]  while i < len(parts)
    yield rule(
        eq(built).to(transposed_inputs(parts, perm, index)),
        index < parts.length(),
        eq(item).to(Tensor.element(parts, index)),
        name="transposed-inputs-next",
    ).then(set_(transposed_inputs(parts, perm, index + 1)).to(built.push(item.transpose(perm))))


def boundary_inside(dims: Vec[i64], dim: i64, other: Vec[i64], boundary: i64, outer: i64) -> list:
    """Query facts: `boundary`, a prefix product of `other` (the elements in its leading dims), ends strictly inside
    dims[dim], `outer` elements of that dim in, so that splitting dims[dim] into (outer, dims[dim] / outer) puts a
    boundary there."""
    count = var("count", i64)
    return [
        index_below(other.length(), count),
        eq(boundary).to(prefix_product(other, count)),
        *split_inside(dims, dim, boundary, outer),
    ]


def split_inside(dims: Vec[i64], dim: i64, boundary: i64, outer: i64) -> list:
    """Query facts: the element count `boundary` ends strictly inside dims[dim], `outer` elements of that dim in,
    and splitting dims[dim] into (outer, dims[dim] / outer) puts a boundary there."""
    before = var("before", i64)
    return [
        index_below(dims.length(), dim),
        eq(before).to(prefix_product(dims, dim)),
        before < boundary,
        boundary < before * dims[dim],
        eq(boundary % before).to(i64(0)),
        eq(outer).to(boundary / before),
        eq(dims[dim] % outer).to(i64(0)),
    ]


view_window = relation("view_window", Vec[i64], Vec[i64], egg_fn="view_window")
"""view_window(shape(y), s): some transpose(reshape(y, s), p) reads a transpose y, and neither shape has a unit dim
(the transpose, reshape, transpose windows transpose-view splits). One row per pair of shapes, whatever the
number of windows that have them."""


@function(egg_fn="first_inner_boundary", merge=lambda old, new: old.min(new))
def first_inner_boundary(dims: Vec[i64], other: Vec[i64]) -> i64:
    """The smallest prefix product of `other` that ends strictly inside a dim of `dims` and splits it evenly (merge:
    min, so its value after the analysis saturates is the smallest).

    Defined both ways for the shapes of every view_window, so that transpose-view splits a chain's dims one
    boundary after the other, in order, rather than in every subset of the boundaries.
    """


@analysis.register
def _first_inner_boundaries():
    source, w, y = var("source", Vec[i64]), var("w", Tensor), var("y", Tensor)
    q, boundary, outer, dim = var("q", Vec[i64]), var("boundary", i64), var("outer", i64), var("dim", i64)
    # view_window(shape(y), s)  for transpose(reshape(y, s), p) with y a transpose, neither shape with a unit dim
    yield rule(
        eq(t).to(y.reshape(new_shape).transpose(perm)),
        eq(y).to(w.transpose(q)),
        eq(source).to(shape(y)),
        new_shape.not_contains(i64(1)),
        source.not_contains(i64(1)),
        name="view-window",
    ).then(view_window(source, new_shape))
    # first_inner_boundary(s, z) <= b  for view_window(z, s), b a boundary of z strictly inside a dim of s
    yield rule(
        view_window(source, new_shape),
        *boundary_inside(new_shape, dim, source, boundary, outer),
        name="first-inner-boundary-of-source",
    ).then(set_(first_inner_boundary(new_shape, source)).to(boundary))
    # first_inner_boundary(z, s) <= b  for view_window(z, s), b a boundary of s strictly inside a dim of z
    yield rule(
        view_window(source, new_shape),
        *boundary_inside(source, dim, new_shape, boundary, outer),
        name="first-inner-boundary-of-target",
    ).then(set_(first_inner_boundary(source, new_shape)).to(boundary))
