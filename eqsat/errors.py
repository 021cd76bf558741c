"""The project's base error, in a module of its own so that every module can raise it without importing the pipeline.

Domain errors are ValueError (the caller gave something eqsat cannot take) or EqsatError (eqsat got something
wrong: a rewrite that computes another value, two graphs that differ, a law that did not fire as its test states).
Never AssertionError: `python -O` cannot strip them, and a caller's `except ValueError` or `except EqsatError` sees them.
"""

from __future__ import annotations


class EqsatError(RuntimeError):
    """An internal failure of the optimizer (`optimize` raises it only in strict mode; the fuzzer, for a graph it got
    wrong; the soundness and translation-validation checks, for graphs that compute different values)."""
