"""The simulator's Python side: bindings to the C engine and analysis.

  native    cffi (ABI mode) declarations of libnetkv's simulator API
  engine    Workload (keys, placement, popularity) and SimEngine (one load
            point: run in epochs, controller hooks, results)
  analysis  expected per-server load from the placement and the exact Zipf
            probabilities; an independent numpy re-implementation of the
            key format, djb2 and the ring (to cross-check the C code)
"""
