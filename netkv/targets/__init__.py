"""Targets: where a protocol runs. One module each, one interface (base.Target).

  base     Target and PointResult: prepare once, measure open-loop load points
  sim      the discrete-event simulator in libnetkv (default; any machine)
"""
