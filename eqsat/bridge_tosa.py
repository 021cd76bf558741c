"""TOSA flatbuffer ⇄ FX graph in the TOSA dialect.

`read_flatbuffer` turns a TOSA flatbuffer (the file Vela compiles, as the Arm backend
dumps it) into the FX graph the pass already optimizes inside the Arm
pipeline: `exir_ops.backend.tosa.*` nodes with FakeTensor `val` meta. The
ops eqsat models become the dialect nodes their `eqsat.ops` readers read
(TRANSPOSE, RESHAPE, SLICE, PAD, CONCAT, RESCALE, TABLE, REDUCE_*, ADD, SUB,
MUL, CLAMP, CAST); every other operator becomes an opaque node
(`FlatbufferOperator`, named after the op). So a file goes through the very same loading,
saturation, extraction, budgets and fallback as a lowering (`eqsat.pipeline`).

`write_flatbuffer` turns the graph the pass returns back into a flatbuffer. A node that
stands for an operator of the file, with the same non-tensor arguments, is
written as that operator verbatim (op, attribute, constant inputs, location),
on the tensors its operands now are; a new node is written from its dialect
arguments as the Arm backend's node visitors write it. Attributes and tensors
are copied field by field with the generated `tosa` flatbuffer modules, so
what eqsat does not model passes through unchanged.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import flatbuffers
import numpy as np
import torch
from executorch.backends.arm.tosa.mapping import TosaSpecialDtype
from torch import fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.node import map_aggregate
from tosa.Attribute import Attribute
from tosa.DType import DType
from tosa.NanPropagationMode import NanPropagationMode
from tosa.Op import Op
from tosa.TosaGraph import TosaGraph

from eqsat.ops.nodes import POOL_WINDOW_META, TOSA, node_args, op_name, output_slots
from eqsat.ops.rescale import multipliers_and_shifts, scales_of

READS_VERSION = (1, 0)
"""The TOSA specification version (major, minor) this module reads: the one the Arm backend and Vela 5.1 use."""

OP_NAMES = {value: name for name, value in vars(Op).items() if not name.startswith("_")}
ATTRIBUTE_NAMES = {value: name for name, value in vars(Attribute).items() if not name.startswith("_")}
NAN_MODES = {value: name for name, value in vars(NanPropagationMode).items() if not name.startswith("_")}
DTYPE_NAMES = {value: name for name, value in vars(DType).items() if not name.startswith("_")}

TORCH_DTYPES = {
    DType.BOOL: (torch.bool, None),
    DType.INT4: (torch.int8, TosaSpecialDtype.INT4),
    DType.INT8: (torch.int8, None),
    DType.INT16: (torch.int16, None),
    DType.INT32: (torch.int32, None),
    DType.INT48: (torch.int64, TosaSpecialDtype.INT48),
    DType.INT64: (torch.int64, None),
}
"""The TOSA dtypes of the INT profile (what Ethos-U runs), as torch stores them; special ones are marked as the Arm backend marks them."""

TOSA_DTYPES = {torch.bool: DType.BOOL, torch.int8: DType.INT8, torch.int16: DType.INT16, torch.int32: DType.INT32, torch.int64: DType.INT64}

CONTROL_FLOW = frozenset({"COND_IF", "WHILE_LOOP"})



class TosaFileError(ValueError):
    """A file this module cannot read: not TOSA, another TOSA version or profile, or control flow."""


class FlatbufferOperator:
    """The FX target of a TOSA operator eqsat does not model, carried verbatim: its name,
    `flatbuffer.<OP>.operator`, names the operator for the opaque term's key and for the cost model,
    which prices it as the TOSA op it is (`extract.vela_cost.short_op_name`), as it prices the Arm
    dialect's `tosa.<OP>.default`. Never run: nodes carry their `val`."""

    def __init__(self, op: str):
        self.op = op
        self.__module__ = "flatbuffer"
        self.__name__ = f"{op}.operator"

    def __call__(self, *operands: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"TOSA {self.op} is carried verbatim, not evaluated")


_OPERATOR_TARGETS: dict[str, FlatbufferOperator] = {}


def flatbuffer_operator(op: str) -> FlatbufferOperator:
    """The one FX target of every `op` operator eqsat does not model."""
    return _OPERATOR_TARGETS.setdefault(op, FlatbufferOperator(op))


# ---------------------------------------------------------------- flatbuffer tables as plain data


def _table_module(name: str):
    return importlib.import_module(f"tosa.{name}")


def _table_fields(name: str) -> list[str]:
    prefix = f"{name}Add"
    return [n[len(prefix) :] for n in vars(_table_module(name)) if n.startswith(prefix)]


def read_table(table: Any, name: str) -> dict[str, Any]:
    """A flatbuffer table (object of the generated class `tosa.<name>`) as {field: value}: numpy arrays for
    vectors of scalars, bytes for strings, Python scalars; absent fields are left out."""
    fields: dict[str, Any] = {}
    for f in _table_fields(name):
        if hasattr(table, f"{f}AsNumpy"):
            if not getattr(table, f"{f}IsNone")():
                value = getattr(table, f"{f}AsNumpy")()
                fields[f] = value if isinstance(value, np.ndarray) else np.zeros(0, np.uint8)
        elif hasattr(table, f"{f}Length"):
            raise TosaFileError(f"{name}.{f} is a vector of tables or strings, which eqsat does not carry")
        else:
            value = getattr(table, f)()
            if isinstance(value, (bytes, bool, int, float)):
                fields[f] = value
            elif value is not None:
                raise TosaFileError(f"{name}.{f} is a nested table, which eqsat does not carry")
    return fields


def write_table(builder: flatbuffers.Builder, name: str, fields: dict[str, Any]) -> int:
    """Build table `tosa.<name>` from {field: value} (read_table's form, or offsets of objects already built);
    returns its offset."""
    module = _table_module(name)
    offsets = {}
    for f, value in fields.items():
        if isinstance(value, np.ndarray):
            offsets[f] = builder.CreateNumpyVector(value)
        elif isinstance(value, bytes):
            offsets[f] = builder.CreateString(value)
    getattr(module, f"{name}Start")(builder)
    for f, value in fields.items():
        getattr(module, f"{name}Add{f}")(builder, offsets.get(f, value))
    return getattr(module, f"{name}End")(builder)


def _table_vector(builder: flatbuffers.Builder, offsets: list[int]) -> int:
    builder.StartVector(4, len(offsets), 4)
    for offset in reversed(offsets):
        builder.PrependUOffsetTRelative(offset)
    return builder.EndVector()


def _string_vector(builder: flatbuffers.Builder, strings: list[bytes]) -> int:
    return _table_vector(builder, [builder.CreateString(s) for s in strings])


@dataclass
class Operator:
    """One TOSA operator: op name, attribute (class name and fields), input and output names, location text."""

    op: str
    attribute: str | None
    fields: dict[str, Any]
    inputs: list[bytes]
    outputs: list[bytes]
    location: dict[str, Any] | None = None


@dataclass
class TosaFile:
    """The main block of a TOSA flatbuffer as plain data; tensors and shapes keep every field of the file."""

    version: dict[str, Any]
    software_version: dict[str, Any] | None
    region: bytes
    block: bytes
    operators: list[Operator]
    tensors: dict[bytes, dict[str, Any]]
    shapes: dict[bytes, dict[str, Any]]
    inputs: list[bytes]
    outputs: list[bytes]
    producer: dict[bytes, int] = field(default_factory=dict)
    """The index of the operator that writes each tensor or shape."""


def parse(data: bytes) -> TosaFile:
    """The main block of a TOSA flatbuffer; raises TosaFileError for what this module cannot read."""
    if len(data) < 8 or not TosaGraph.TosaGraphBufferHasIdentifier(data, 0):
        raise TosaFileError("not a TOSA flatbuffer (no 'TOSA' file identifier)")
    try:
        graph = TosaGraph.GetRootAs(data, 0)
        version = read_table(graph.Version(), "Version") if graph.Version() is not None else {}
        found = (version.get("_Major", 0), version.get("_Minor", 0))
        if found != READS_VERSION:
            raise TosaFileError(
                f"TOSA {found[0]}.{found[1]}.{version.get('_Patch', 0)}: eqsat optimize reads TOSA "
                f"{READS_VERSION[0]}.{READS_VERSION[1]} (what the Arm backend writes and Vela 5.1 reads)"
            )
        if graph.RegionsLength() != 1 or graph.Regions(0).BlocksLength() != 1:
            raise TosaFileError("the graph has several regions or blocks (control flow), which eqsat optimize does not support")
        region = graph.Regions(0)
        block = region.Blocks(0)
        software = graph.SoftwareVersion()
        operators = [_read_operator(block.Operators(i)) for i in range(block.OperatorsLength())]
        parsed = TosaFile(
            version=version,
            software_version=read_table(software, "SoftwareVersion") if software is not None else None,
            region=region.Name() or b"",
            block=block.Name() or b"",
            operators=operators,
            tensors={t.Name(): read_table(t, "TosaTensor") for t in (block.Tensors(i) for i in range(block.TensorsLength()))},
            shapes={s.Name(): read_table(s, "TosaShape") for s in (block.Shapes(i) for i in range(block.ShapesLength()))},
            inputs=[block.Inputs(i) for i in range(block.InputsLength())],
            outputs=[block.Outputs(i) for i in range(block.OutputsLength())],
        )
    except TosaFileError:
        raise
    except Exception as error:  # noqa: BLE001 - a malformed buffer fails anywhere in the generated readers
        raise TosaFileError(f"not a readable TOSA flatbuffer ({type(error).__name__}: {error})") from None
    _check_profile(parsed)
    declared = set(parsed.tensors) | set(parsed.shapes)
    for operator in parsed.operators:
        undeclared = next((n for n in operator.inputs + operator.outputs if n not in declared), None)
        if undeclared is not None:
            raise TosaFileError(f"a {operator.op} operator names tensor {undeclared.decode()}, which the block does not declare")
    for index, operator in enumerate(parsed.operators):
        for name in operator.outputs:
            parsed.producer[name] = index
    return parsed


def _read_operator(operator: Any) -> Operator:
    op = OP_NAMES.get(operator.Op(), f"op {operator.Op()}")
    attribute = ATTRIBUTE_NAMES.get(operator.AttributeType()) if operator.AttributeType() else None
    fields = {}
    if attribute is not None and op not in CONTROL_FLOW:
        table = getattr(_table_module(attribute), attribute)()
        union = operator.Attribute()
        table.Init(union.Bytes, union.Pos)
        fields = read_table(table, attribute)
    location = operator.Location()
    return Operator(
        op=op,
        attribute=attribute,
        fields=fields,
        inputs=[operator.Inputs(i) for i in range(operator.InputsLength())],
        outputs=[operator.Outputs(i) for i in range(operator.OutputsLength())],
        location=read_table(location, "OpLocation") if location is not None else None,
    )


def _check_profile(parsed: TosaFile) -> None:
    flow = sorted({o.op for o in parsed.operators if o.op in CONTROL_FLOW})
    if flow:
        raise TosaFileError(f"the graph has control flow ({', '.join(flow)}), which eqsat optimize does not support")
    others = sorted({DTYPE_NAMES.get(t.get("Type", 0), str(t.get("Type"))) for t in parsed.tensors.values() if t.get("Type", 0) not in TORCH_DTYPES})
    if others:
        raise TosaFileError(
            f"the graph has {', '.join(others)} tensors: eqsat optimize reads the TOSA INT profile (what Ethos-U runs)"
        )
    several = next((o for o in parsed.operators if len(o.outputs) != 1), None)
    if several is not None:
        raise TosaFileError(f"a {several.op} operator has {len(several.outputs)} outputs: eqsat optimize reads single-output operators")
    if any(t.get("Variable") for t in parsed.tensors.values()):
        raise TosaFileError("the graph has stateful variables, which eqsat optimize does not support")


# ---------------------------------------------------------------- flatbuffer -> FX


def _values(tensor: dict[str, Any]) -> np.ndarray:
    """The elements of a constant tensor, in its numpy dtype."""
    torch_dtype, special = TORCH_DTYPES[tensor["Type"]]
    if special is not None:
        raise TosaFileError(f"constant of special dtype {special.name} read as values")
    return tensor.get("Data", np.zeros(0, np.uint8)).view(torch.empty(0, dtype=torch_dtype).numpy().dtype)


def _shape_values(shape: dict[str, Any]) -> list[int]:
    return [int(v) for v in shape.get("Data", np.zeros(0, np.uint8)).view(np.int64)]


SOURCE_META = "tosa_source"
"""The meta key under which a node read from a flatbuffer keeps its TosaSource."""


class TosaSource(NamedTuple):
    """Where a node read from a flatbuffer came from: the index of its operator in the file, the operator's input
    positions that are the node's operands (in order), and the node's non-tensor arguments as read (`_signature`):
    a node with the same signature is written back as that operator verbatim."""

    operator: int
    operand_positions: tuple[int, ...]
    signature: str


def _signature(args: Any, kwargs: Any) -> str:
    """The non-tensor arguments of a node: two nodes with the same target and signature are the same operator."""
    return repr(map_aggregate((args, kwargs), lambda a: "$" if isinstance(a, fx.Node) else a))


class _Reader:
    def __init__(self, parsed: TosaFile):
        self.parsed = parsed
        self.graph = fx.Graph()
        self.fake = FakeTensorMode(allow_non_fake_inputs=True)
        self.nodes: dict[bytes, fx.Node] = {}

    def tensor_meta(self, node: fx.Node, name: bytes) -> None:
        tensor = self.parsed.tensors[name]
        torch_dtype, special = TORCH_DTYPES[tensor["Type"]]
        shape = [int(d) for d in tensor.get("Shape", np.zeros(0, np.int32))]
        with self.fake:
            node.meta["val"] = torch.empty(shape, dtype=torch_dtype)
        if special is not None:
            node.meta[TosaSpecialDtype.meta_key()] = special

    def value(self, name: bytes) -> fx.Node:
        """The FX node computing a tensor or shape; constants are read on first use."""
        if name not in self.nodes:
            if name not in self.parsed.producer:
                raise TosaFileError(f"tensor {name.decode()} is read before any operator writes it")
            self.operator(self.parsed.producer[name])
        return self.nodes[name]

    def operator(self, index: int) -> None:
        operator = self.parsed.operators[index]
        read_operator = DIALECT_READERS.get(operator.op)
        form = read_operator(self, operator) if read_operator is not None else None
        if form is None:
            operands = tuple(self.value(n) for n in operator.inputs)
            form = (flatbuffer_operator(operator.op), operands, {"index": index}, list(range(len(operator.inputs))))
        target, args, kwargs, operand_positions = form
        node = self.graph.call_function(target, args, kwargs)
        output = operator.outputs[0]
        if output in self.parsed.shapes:
            node.meta["val"] = list(args[0]) if target is TOSA.CONST_SHAPE.default else None
            node.meta[TosaSpecialDtype.meta_key()] = TosaSpecialDtype.SHAPE
        else:
            self.tensor_meta(node, output)
        node.meta[SOURCE_META] = TosaSource(index, tuple(operand_positions), _signature(args, kwargs))
        if operator.op in ("MAX_POOL2D", "AVG_POOL2D") and "Kernel" in operator.fields:
            node.meta[POOL_WINDOW_META] = tuple(int(k) for k in operator.fields["Kernel"])
        self.nodes[output] = node

    def constant(self, name: bytes) -> np.ndarray | None:
        producer = self.parsed.producer.get(name)
        if producer is None or self.parsed.operators[producer].op != "CONST" or name not in self.parsed.tensors:
            return None
        try:
            return _values(self.parsed.tensors[name])
        except TosaFileError:
            return None


def _read_const_shape(reader: _Reader, o: Operator):
    return TOSA.CONST_SHAPE.default, (_shape_values(reader.parsed.shapes[o.outputs[0]]),), {}, []


def _read_transpose(reader: _Reader, o: Operator):
    return TOSA.TRANSPOSE.default, (reader.value(o.inputs[0]), [int(p) for p in o.fields.get("Perms", [])]), {}, [0]


def _read_reshape(reader: _Reader, o: Operator):
    return TOSA.RESHAPE.default, (reader.value(o.inputs[0]), reader.value(o.inputs[1])), {}, [0, 1]


def _read_slice(reader: _Reader, o: Operator):
    return TOSA.SLICE.default, tuple(reader.value(n) for n in o.inputs[:3]), {}, [0, 1, 2]


def _read_pad(reader: _Reader, o: Operator):
    value = reader.constant(o.inputs[2]) if len(o.inputs) > 2 else None
    if value is None or value.size != 1:
        return None
    return TOSA.PAD.default, (reader.value(o.inputs[0]), reader.value(o.inputs[1])), {"value": int(value[0])}, [0, 1]


def _read_concat(reader: _Reader, o: Operator):
    return TOSA.CONCAT.default, ([reader.value(n) for n in o.inputs],), {"axis": int(o.fields.get("Axis", 0))}, list(range(len(o.inputs)))


def _read_rescale(reader: _Reader, o: Operator):
    """A signed scale32 SINGLE_ROUND RESCALE whose multipliers and shifts are exactly those of its float scales."""
    f = o.fields
    if not f.get("Scale32") or f.get("RoundingMode") != 1 or f.get("InputUnsigned") or f.get("OutputUnsigned"):
        return None
    constants = [reader.constant(n) for n in o.inputs[1:5]]
    if len(o.inputs) != 5 or any(c is None for c in constants):
        return None
    multipliers, shifts, in_zp, out_zp = constants
    exact = (tuple(int(m) for m in multipliers), tuple(int(s) for s in shifts))
    scales = scales_of(*exact)
    if multipliers_and_shifts(scales) != exact or in_zp.size != 1 or out_zp.size != 1:
        return None
    out_dtype = TORCH_DTYPES[reader.parsed.tensors[o.outputs[0]]["Type"]][0]
    return TOSA.RESCALE.default, (reader.value(o.inputs[0]), out_dtype, scales, int(in_zp[0]), int(out_zp[0])), {}, [0]


def _read_table(reader: _Reader, o: Operator):
    return TOSA.TABLE.default, (reader.value(o.inputs[0]), reader.value(o.inputs[1])), {}, [0, 1]


def _read_reduce(reader: _Reader, o: Operator):
    kwargs: dict[str, Any] = {"axis": int(o.fields.get("Axis", 0))}
    if "NanMode" in o.fields:
        kwargs["nan_mode"] = NAN_MODES[o.fields["NanMode"]]
    return getattr(TOSA, o.op).default, (reader.value(o.inputs[0]),), kwargs, [0]


def _read_elementwise(reader: _Reader, o: Operator):
    return getattr(TOSA, o.op).default, (reader.value(o.inputs[0]), reader.value(o.inputs[1])), {}, [0, 1]  # ADD, SUB


def _read_mul(reader: _Reader, o: Operator):
    shift = reader.constant(o.inputs[2]) if len(o.inputs) > 2 else np.zeros(1, np.int8)
    if shift is None or shift.size != 1:
        return None
    return TOSA.MUL.default, (reader.value(o.inputs[0]), reader.value(o.inputs[1])), {"shift": int(shift[0])}, [0, 1]


def _read_clamp(reader: _Reader, o: Operator):
    dtype, special = TORCH_DTYPES[reader.parsed.tensors[o.inputs[0]]["Type"]]
    if special is not None or dtype == torch.bool:
        return None
    numpy_dtype = torch.empty(0, dtype=dtype).numpy().dtype
    low, high = (o.fields.get(k, np.zeros(0, np.uint8)).view(numpy_dtype) for k in ("MinVal", "MaxVal"))
    if low.size != 1 or high.size != 1:
        return None
    return TOSA.CLAMP.default, (reader.value(o.inputs[0]), int(low[0]), int(high[0])), {}, [0]


def _read_cast(reader: _Reader, o: Operator):
    dtype, special = TORCH_DTYPES[reader.parsed.tensors[o.outputs[0]]["Type"]]
    return (TOSA.CAST.default, (reader.value(o.inputs[0]), dtype), {}, [0]) if special is None else None


DIALECT_READERS = {
    "CONST_SHAPE": _read_const_shape,
    "TRANSPOSE": _read_transpose,
    "RESHAPE": _read_reshape,
    "SLICE": _read_slice,
    "PAD": _read_pad,
    "CONCAT": _read_concat,
    "RESCALE": _read_rescale,
    "TABLE": _read_table,
    "REDUCE_SUM": _read_reduce,
    "REDUCE_MAX": _read_reduce,
    "REDUCE_MIN": _read_reduce,
    "ADD": _read_elementwise,
    "SUB": _read_elementwise,
    "MUL": _read_mul,
    "CLAMP": _read_clamp,
    "CAST": _read_cast,
}
"""How each TOSA operator eqsat models becomes its dialect node: (target, args, kwargs, the operator's input
positions that are the node's operands, in order); None keeps it opaque."""


def read_flatbuffer(data: bytes) -> tuple[fx.GraphModule, TosaFile]:
    """The flatbuffer as an FX graph in the TOSA dialect, and the parsed file `write_flatbuffer` takes back."""
    parsed = parse(data)
    reader = _Reader(parsed)
    for name in parsed.inputs:
        node = reader.graph.placeholder(f"input_{len(reader.nodes)}")
        reader.tensor_meta(node, name)
        node.meta["tosa_tensor"] = name
        reader.nodes[name] = node
    for index, operator in enumerate(parsed.operators):
        if operator.outputs[0] not in reader.nodes and operator.op not in ("CONST", "CONST_SHAPE"):
            reader.operator(index)
    outputs = [reader.value(name) for name in parsed.outputs]
    reader.graph.output(tuple(outputs))
    return fx.GraphModule(torch.nn.Module(), reader.graph), parsed


# ---------------------------------------------------------------- FX -> flatbuffer


class _Writer:
    def __init__(self, parsed: TosaFile):
        self.parsed = parsed
        self.operators: list[Operator] = []
        self.tensors: dict[bytes, dict[str, Any]] = {}
        self.shapes: dict[bytes, dict[str, Any]] = {}
        self.name_of: dict[fx.Node, bytes] = {}
        self.taken: set[bytes] = set()
        self.reserved = set(parsed.tensors) | set(parsed.shapes)
        self.copied: set[bytes] = set()

    def fresh(self, wanted: bytes, own: bool = False) -> bytes:
        """A name not yet written: wanted itself if it is free and the node owns it (it was the file's
        name of that operator's output), else wanted with a suffix that names no tensor of the file."""
        name, k = wanted, 0
        while name in self.taken or (name in self.reserved and not (own and k == 0)):
            k += 1
            name = wanted + b"_eqsat%d" % k
        self.taken.add(name)
        return name

    def copy_source_value(self, name: bytes) -> None:
        """Write a constant input of an operator written verbatim (and its producer) as the file has it."""
        if name in self.copied:
            return
        if name in self.taken:
            raise ValueError(f"constant {name.decode()} was already written as another value")
        self.copied.add(name)
        self.taken.add(name)
        producer = self.parsed.producer.get(name)
        if producer is None:
            raise ValueError(f"input {name.decode()} of a verbatim operator has no producer in the file")
        operator = self.parsed.operators[producer]
        for input_name in operator.inputs:
            self.copy_source_value(input_name)
        self.operators.append(operator)
        self.store(name, self.parsed.tensors.get(name), self.parsed.shapes.get(name))

    def store(self, name: bytes, tensor: dict | None, shape: dict | None) -> None:
        if shape is not None:
            self.shapes[name] = {**shape, "Name": name}
        elif tensor is not None:
            self.tensors[name] = {**tensor, "Name": name}

    def output_tensor(self, node: fx.Node, name: bytes, source: dict | None) -> None:
        """The tensor entry of a node's output: the source tensor's fields with the node's shape, else from its val."""
        val = node.meta["val"]
        special = node.meta.get(TosaSpecialDtype.meta_key())
        dtype = int(special.value) if isinstance(special, TosaSpecialDtype) else int(TOSA_DTYPES[val.dtype])
        shape = [int(d) for d in val.shape]
        if source is not None and source.get("Type") == dtype and [int(d) for d in source.get("Shape", [])] == shape:
            self.tensors[name] = {**source, "Name": name}
            return
        self.tensors[name] = {"Name": name, "Shape": np.array(shape, dtype=np.int32), "Type": dtype}

    def constant(self, base: bytes, dtype: int, values: list[int]) -> bytes:
        torch_dtype = TORCH_DTYPES[dtype][0]
        name = self.fresh(base)
        data = np.array(values, dtype=torch.empty(0, dtype=torch_dtype).numpy().dtype).view(np.uint8)
        self.tensors[name] = {"Name": name, "Shape": np.array([len(values)], np.int32), "Type": dtype, "Data": data}
        self.operators.append(Operator("CONST", "ConstAttribute", {}, [], [name]))
        return name

    def node(self, node: fx.Node, wanted: bytes | None) -> None:
        source: TosaSource | None = node.meta.get(SOURCE_META)
        original = self.parsed.operators[source.operator] if source is not None else None
        base = wanted or (original.outputs[0] if original is not None else node.name.encode())
        verbatim = original is not None and source.signature == _signature(node.args, node.kwargs)
        if wanted is not None:
            name = wanted
        elif verbatim and not node_args(node) and original.outputs[0] in self.copied:
            self.name_of[node] = original.outputs[0]  # a constant already written as an input of a verbatim operator
            return
        else:
            name = self.fresh(base, own=original is not None)
        if verbatim and name == original.outputs[0]:
            self.copied.add(name)
        self.name_of[node] = name
        operands = [self.name_of[a] for a in node_args(node)]
        if verbatim:
            inputs = list(original.inputs)
            for position, operand in zip(source.operand_positions, operands, strict=True):
                inputs[position] = operand
            for position, input_name in enumerate(inputs):
                if position not in source.operand_positions:
                    self.copy_source_value(input_name)
            self.operators.append(Operator(original.op, original.attribute, original.fields, inputs, [name], original.location))
            if original.outputs[0] in self.parsed.shapes:
                self.shapes[name] = {**self.parsed.shapes[original.outputs[0]], "Name": name}
            else:
                self.output_tensor(node, name, self.parsed.tensors.get(original.outputs[0]))
            return
        write_operator = DIALECT_WRITERS.get(op_name(node.target))
        if write_operator is None:
            raise ValueError(f"cannot write node {node.name} ({op_name(node.target)}) as a TOSA operator")
        op, attribute, fields, inputs = write_operator(self, node, operands)
        location = original.location if original is not None else None
        self.operators.append(Operator(op, attribute, fields, inputs, [name], location))
        if op == "CONST_SHAPE":
            values = node.args[0]
            self.shapes[name] = {"Name": name, "Rank": len(values), "Data": np.array(values, np.int64).view(np.uint8)}
        else:
            self.output_tensor(node, name, None)


def _write_const_shape(w: _Writer, node: fx.Node, operands: list[bytes]):
    return "CONST_SHAPE", "ConstShapeAttribute", {}, []


def _write_transpose(w: _Writer, node: fx.Node, operands: list[bytes]):
    return "TRANSPOSE", "TransposeAttribute", {"Perms": np.array(node.args[1], np.int32)}, operands


def _write_reshape(w: _Writer, node: fx.Node, operands: list[bytes]):
    return "RESHAPE", "ReshapeAttribute", {}, operands


def _write_slice(w: _Writer, node: fx.Node, operands: list[bytes]):
    return "SLICE", "SliceAttribute", {}, operands


def _write_concat(w: _Writer, node: fx.Node, operands: list[bytes]):
    return "CONCAT", "ConcatAttribute", {"Axis": int(node.kwargs["axis"])}, operands


def _write_pad(w: _Writer, node: fx.Node, operands: list[bytes]):
    dtype = TOSA_DTYPES[node.args[0].meta["val"].dtype]
    pad_const = w.constant(w.name_of[node] + b"_pad_const", int(dtype), [int(node.kwargs.get("value", 0))])
    return "PAD", "PadAttribute", {}, [*operands, pad_const]


def _write_rescale(w: _Writer, node: fx.Node, operands: list[bytes]):
    """As the Arm backend's RESCALE visitor writes it: multipliers and shifts of the float scales (scale32),
    SINGLE_ROUND, zero points as constants of the input and output dtypes."""
    x, out_dtype, scales, in_zp, out_zp = node.args[:5]
    multipliers, shifts = multipliers_and_shifts(list(scales))
    name = w.name_of[node]
    inputs = [
        operands[0],
        w.constant(name + b"_multipliers", int(DType.INT32), list(multipliers)),
        w.constant(name + b"_shifts", int(DType.INT8), list(shifts)),
        w.constant(name + b"_input_zp", int(TOSA_DTYPES[x.meta["val"].dtype]), [in_zp]),
        w.constant(name + b"_output_zp", int(TOSA_DTYPES[out_dtype]), [out_zp]),
    ]
    fields = {"Scale32": True, "RoundingMode": 1, "PerChannel": len(scales) > 1, "InputUnsigned": False, "OutputUnsigned": False}
    return "RESCALE", "RescaleAttribute", fields, inputs


def _write_reduce(w: _Writer, node: fx.Node, operands: list[bytes]):
    op = op_name(node.target).split(".")[1]
    attribute = "Reduce" + "".join(p.capitalize() for p in op.split("_")[1:]) + "Attribute"
    fields: dict[str, Any] = {"Axis": int(node.kwargs["axis"])}
    if op in ("REDUCE_MAX", "REDUCE_MIN"):
        fields["NanMode"] = getattr(NanPropagationMode, node.kwargs.get("nan_mode", "PROPAGATE"))
    return op, attribute, fields, operands


DIALECT_WRITERS = {
    "tosa.CONST_SHAPE.default": _write_const_shape,
    "tosa.TRANSPOSE.default": _write_transpose,
    "tosa.RESHAPE.default": _write_reshape,
    "tosa.SLICE.default": _write_slice,
    "tosa.CONCAT.default": _write_concat,
    "tosa.PAD.default": _write_pad,
    "tosa.RESCALE.default": _write_rescale,
    "tosa.REDUCE_SUM.default": _write_reduce,
    "tosa.REDUCE_MAX.default": _write_reduce,
    "tosa.REDUCE_MIN.default": _write_reduce,
}
"""How a new node of each dialect target eqsat's emitters write becomes a TOSA operator: (op, attribute class,
attribute fields, input names). Keyed copies (elementwise, TABLE, opaque) always have a source operator."""


def write_flatbuffer(graph_module: fx.GraphModule, parsed: TosaFile) -> bytes:
    """The graph as a TOSA flatbuffer: the block inputs and outputs keep the file's names, order and tensors."""
    writer = _Writer(parsed)
    slots = output_slots(graph_module.graph)
    if len(set(slots)) != len(slots) or any(s.op == "placeholder" for s in slots):
        raise ValueError("an output is another output or an input: the file's output names cannot all be kept")
    wanted = dict(zip(slots, parsed.outputs))
    writer.taken.update(parsed.outputs)
    writer.taken.update(parsed.inputs)
    placeholders = [n for n in graph_module.graph.nodes if n.op == "placeholder"]
    for node, name in zip(placeholders, parsed.inputs, strict=True):
        writer.name_of[node] = name
        writer.tensors[name] = parsed.tensors[name]
    for node in graph_module.graph.nodes:
        if node.op == "call_function":
            writer.node(node, wanted.get(node))
    return _serialize(writer.operators, list(writer.tensors.values()), list(writer.shapes.values()), parsed)


def to_bytes(parsed: TosaFile) -> bytes:
    """A parsed file (or one edited as plain data) as a flatbuffer again."""
    return _serialize(parsed.operators, list(parsed.tensors.values()), list(parsed.shapes.values()), parsed)


def _serialize(operators: list[Operator], tensors: list[dict], shapes: list[dict], parsed: TosaFile) -> bytes:
    """A one-block TOSA flatbuffer with the file's version, names, inputs and outputs."""
    builder = flatbuffers.Builder(1 << 20)
    operator_offsets = []
    module = _table_module("TosaOperator")
    for o in operators:
        attribute = write_table(builder, o.attribute, o.fields) if o.attribute is not None else None
        inputs, outputs = _string_vector(builder, o.inputs), _string_vector(builder, o.outputs)
        location = write_table(builder, "OpLocation", o.location) if o.location is not None else None
        module.Start(builder)
        module.AddOp(builder, getattr(Op, o.op))
        if attribute is not None:
            module.AddAttributeType(builder, getattr(Attribute, o.attribute))
            module.AddAttribute(builder, attribute)
        module.AddInputs(builder, inputs)
        module.AddOutputs(builder, outputs)
        if location is not None:
            module.AddLocation(builder, location)
        operator_offsets.append(module.End(builder))
    tensor_offsets = [write_table(builder, "TosaTensor", t) for t in tensors]
    shape_offsets = [write_table(builder, "TosaShape", s) for s in shapes]
    block_fields = {
        "Name": builder.CreateString(parsed.block),
        "Operators": _table_vector(builder, operator_offsets),
        "Tensors": _table_vector(builder, tensor_offsets),
        "Inputs": _string_vector(builder, parsed.inputs),
        "Outputs": _string_vector(builder, parsed.outputs),
        "Shapes": _table_vector(builder, shape_offsets),
    }
    block = write_table(builder, "TosaBasicBlock", block_fields)
    region = write_table(builder, "TosaRegion", {"Name": builder.CreateString(parsed.region), "Blocks": _table_vector(builder, [block])})
    graph_fields = {"Version": write_table(builder, "Version", parsed.version), "Regions": _table_vector(builder, [region])}
    if parsed.software_version is not None:
        graph_fields["SoftwareVersion"] = write_table(builder, "SoftwareVersion", parsed.software_version)
    builder.Finish(write_table(builder, "TosaGraph", graph_fields), file_identifier=b"TOSA")
    return bytes(builder.Output())

