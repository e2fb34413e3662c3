"""Paper figures as one command: ``python -m netkv reproduce pegasus/fig7``.

  spec     the experiment YAML (sweep, plot, the paper's claims as checks)
  run      ``reproduce NAME``: dispatch to the experiment kind's runner
  reproduce  a sweep: run every (series, x) point, collect, plot, check, report
  checks   evaluate the claims against the measured tables
  timeline  ``kind: timeline``: a fixed-load time series while the workload changes
"""
