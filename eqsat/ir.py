"""The term language as plain data: what the bridge reads, the extractors choose and the cost model prices.

No torch, no egglog: the extractors and the cost model import this module,
never the FX bridge.
"""

from __future__ import annotations

from typing import NamedTuple

MAX_RANK = 6
"""The largest tensor rank of the TOSA profile the Arm backend targets (and that Vela compiles)."""


class Term(NamedTuple):
    """One e-node in Python: a constructor of eqsat.terms, its tensor operands and attributes.

    `args` are node indices when the term is read from FX and e-class ids when
    it is read from the e-graph. `attrs` per op:
    Transpose (perm,), Concat (axis,), Slice (start, size), Reshape (shape,),
    Rescale (dtype, multipliers, shifts, in_zp, out_zp, tag), Reduce (key, axis),
    Pad (padding, value), Opaque, Elementwise and Table (key,) (Table's args are
    its input and its lookup table). A key is "<op name>#<id>"; a pooling's also
    carries its window (`with_window`), which its price depends on.
    """

    op: str
    args: tuple
    attrs: tuple

    def with_args(self, args: tuple) -> Term:
        return Term(self.op, tuple(args), self.attrs)


class TensorType(NamedTuple):
    """The static shape of a tensor and its dtype as torch spells it ("torch.int8"); dtype None if unknown."""

    shape: tuple[int, ...]
    dtype: str | None


class Graph(NamedTuple):
    """A graph as terms, as plain data: `terms[i]` computes value i (args are value indices), `types[i]`
    its type (None: unknown), `names[i]` the name the lowering gives it (Vela names a layer after the
    tensor it writes), `outputs` the value of each output slot."""

    names: list[str]
    terms: list[Term]
    types: list[TensorType | None]
    outputs: list[int]

    def as_data(self) -> dict:
        """The graph as JSON-able data (`Graph.from_data` reads it back)."""
        return {
            "names": list(self.names),
            "terms": [[t.op, list(t.args), list(t.attrs)] for t in self.terms],
            "types": [None if t is None else [list(t.shape), t.dtype] for t in self.types],
            "outputs": list(self.outputs),
        }

    def boundary_transposes(self) -> list[int]:
        """The TRANSPOSEs that read a graph input or write a graph output, through RESHAPEs alone: the NCHW <-> NHWC
        transposes a contiguous 4-D input or output costs a delegate (eqsat.lowering.IO_LAYOUTS), which no rewrite
        inside it can remove. A graph input is an operand-less term."""
        outputs = set(self.outputs)
        readers: dict[int, list[int]] = {}
        for value, term in enumerate(self.terms):
            for operand in term.args:
                readers.setdefault(operand, []).append(value)

        def from_input(value: int) -> bool:  # value is a graph input, reshaped
            while self.terms[value].op == "Reshape":
                value = self.terms[value].args[0]
            return not self.terms[value].args

        def to_output(value: int) -> bool:  # value is returned, reshaped, and read by nothing else
            while value not in outputs:
                reading = readers.get(value, [])
                if len(reading) != 1 or self.terms[reading[0]].op != "Reshape":
                    return False
                value = reading[0]
            return True

        return [
            value
            for value, term in enumerate(self.terms)
            if term.op == "Transpose" and (from_input(term.args[0]) or to_output(value))
        ]

    @classmethod
    def from_data(cls, data: dict) -> Graph:
        return cls(
            list(data["names"]),
            [Term(op, tuple(args), _tuples(attrs)) for op, args, attrs in data["terms"]],
            [None if t is None else TensorType(tuple(t[0]), t[1]) for t in data["types"]],
            list(data["outputs"]),
        )


WINDOW_MARK = "@"


KEY_MARK = "#"


def op_of(key: str) -> str:
    """The op a key names, without its instance and window: "tosa.MAX_POOL2D.default" for
    "tosa.MAX_POOL2D.default#3@3x3"."""
    return key.partition(KEY_MARK)[0]


def with_window(key: str, window: tuple[int, int]) -> str:
    """An opaque pooling's key with its window (kernel height, width) appended: "tosa.MAX_POOL2D.default#3@3x3"."""
    return f"{key}{WINDOW_MARK}{window[0]}x{window[1]}"


def window_of(key: str) -> tuple[int, int] | None:
    """The window `with_window` appended to key; None when it carries none."""
    _, mark, window = key.rpartition(WINDOW_MARK)
    height, x, width = window.partition("x")
    return (int(height), int(width)) if mark and x and height.isdigit() and width.isdigit() else None


def _tuples(value):
    """JSON's lists back as the tuples terms hold (attributes are hashable)."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value
