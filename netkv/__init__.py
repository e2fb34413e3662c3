"""netkv: experiment framework for in-network key-value protocols.

Map of the package:
  cli        the ``python -m netkv`` commands (run, list, reproduce, clean)
  config     pydantic models over the Hydra-composed config, and its validation
  wire       Python codec and scapy layers for every protocol's wire format
  native     where the C library and host programs are installed
  targets    sim, mininet, testbed: one module each, one Target interface
  protocols  the protocol registry (name, limits, controller)
  slo        throughput-under-SLO search, shared by every target
  results    run directories, atomic parquet writes, provenance, noise, loading
  report     ``python -m netkv report``: one self-contained HTML page per run or figure
"""

__version__ = "0.1.0"
