"""Hand-built FX graphs for tests: the builder lives in eqsat.graph_builder, the bit-exact comparison in
eqsat.soundness; both are re-exported here."""

from eqsat.graph_builder import GraphBuilder
from eqsat.soundness import assert_bit_identical, random_inputs

__all__ = ["GraphBuilder", "assert_bit_identical", "random_inputs"]
