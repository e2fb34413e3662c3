"""Run directories and their files (schemas in docs/results.md).

  atomic      write-to-temp-then-rename helpers: no half-written file, ever
  provenance  what produced a run: git commit, versions, host, kernel, command
  rundir      one run directory: config, provenance, point fragments, tables
  load        ``load(paths...)``: many runs as one polars DataFrame
"""

from netkv.results.load import load

__all__ = ["load"]
