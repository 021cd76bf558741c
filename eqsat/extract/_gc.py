"""`paused_gc`: run a phase that allocates millions of small objects without Python's cyclic collector.

Reading a large e-graph and extracting from it allocate a tuple, a `Term` or a
heap entry per e-node and free nothing cyclic. The collector still runs a full
pass over the whole heap every so many allocations, so its cost grows with the
heap: on an e-graph of 800k e-nodes it took about 40% of the CPU time of both
phases. Reference counting still frees everything the phase drops; the
collector runs again when the phase ends. The pass (eqsat.pipeline.optimize)
runs paused as a whole, its worker included: on the 20,000-node scale graph,
in one process beside other jobs, it took 6.9 s of CPU with the collector
running outside these phases and 5.5 s without it (write-back 1.4 -> 0.9 s,
extraction 1.4 -> 1.1 s, refinement 1.35 -> 1.15 s).
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def paused_gc() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
