"""A read-only view of a serialized e-graph, decoded into `Term`s.

egglog serializes the e-graph as JSON (DESIGN §3): every e-node with its op,
its children (e-node ids) and its e-class. This module turns the tensor e-nodes
into `Term`s whose args are e-class ids, finds the class of each `Node(i)`
handle, and reads the `shape` analysis, so the extractors and the cost model
never touch the JSON.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass

from egglog import EGraph

from eqsat.bridge_fx import Term, TensorType

TENSOR_OPS = frozenset({"Opaque", "Elementwise", "Transpose", "Concat", "Slice", "Reshape", "Rescale", "Reduce", "Pad", "Table"})


@dataclass
class EGraphView:
    """Tensor e-classes with their candidate terms.

    `candidates[c]` lists the distinct terms of e-class c (args are e-class
    ids), `class_of_node[i]` is the e-class of `Node(i)`, and `types[c]` the
    static shape and dtype of e-class c where the analysis knows them.
    """

    candidates: dict[str, list[Term]]
    class_of_node: list[str]
    types: dict[str, TensorType]
    enode_count: int

    @classmethod
    def of(cls, egraph: EGraph, node_count: int) -> EGraphView:
        serialized = json.loads(egraph._egraph.serialize([]).to_json())
        return cls.from_json(serialized["nodes"], node_count)

    @classmethod
    def from_json(cls, nodes: dict[str, dict], node_count: int) -> EGraphView:
        def ints(vec_id: str) -> tuple[int, ...]:
            return tuple(int(nodes[c]["op"]) for c in nodes[vec_id]["children"])

        def classes(vec_id: str) -> tuple[str, ...]:
            return tuple(nodes[c]["eclass"] for c in nodes[vec_id]["children"])

        def decode(node: dict) -> Term:
            op, children = node["op"], node["children"]
            if op in ("Opaque", "Elementwise"):
                return Term(op, classes(children[1]), (json.loads(nodes[children[0]]["op"]),))
            if op == "Reduce":
                return Term(op, (nodes[children[1]]["eclass"],), (json.loads(nodes[children[0]]["op"]), int(nodes[children[2]]["op"])))
            if op == "Table":
                return Term(op, (nodes[children[1]]["eclass"], nodes[children[2]]["eclass"]), (json.loads(nodes[children[0]]["op"]),))
            if op == "Concat":
                return Term(op, classes(children[0]), (int(nodes[children[1]]["op"]),))
            first = (nodes[children[0]]["eclass"],)
            if op == "Rescale":
                dtype_name, _, _, in_zp, out_zp, tag = (nodes[c]["op"] for c in children[1:])
                return Term(op, first, (json.loads(dtype_name), ints(children[2]), ints(children[3]), int(in_zp), int(out_zp), int(tag)))
            if op == "Pad":
                return Term(op, first, (ints(children[1]), int(nodes[children[2]]["op"])))
            if op == "Slice":
                return Term(op, first, (ints(children[1]), ints(children[2])))
            return Term(op, first, (ints(children[1]),))

        vec_of_class = {n["eclass"]: k for k, n in nodes.items() if n["op"] == "vec-of"}
        string_of_class = {n["eclass"]: n["op"] for n in nodes.values() if n["op"].startswith('"')}
        candidates: dict[str, list[Term]] = defaultdict(list)
        class_of_node: list[str | None] = [None] * node_count
        shapes: dict[str, tuple[int, ...]] = {}
        dtypes: dict[str, str] = {}
        for node in nodes.values():
            op = node["op"]
            if op in TENSOR_OPS:
                candidates[node["eclass"]].append(decode(node))
            elif op == "Node":
                class_of_node[int(nodes[node["children"][0]]["op"])] = node["eclass"]
            elif op == "shape":
                shapes[nodes[node["children"][0]]["eclass"]] = ints(vec_of_class[node["eclass"]])
            elif op == "dtype":
                dtypes[nodes[node["children"][0]]["eclass"]] = json.loads(string_of_class[node["eclass"]])
        missing = [i for i, c in enumerate(class_of_node) if c is None]
        if missing:
            raise ValueError(f"e-graph lost the handles of nodes {missing[:5]}")
        types = {c: TensorType(shape, dtypes.get(c)) for c, shape in shapes.items()}
        return cls(dict(candidates), class_of_node, types, sum(len(v) for v in candidates.values()))
