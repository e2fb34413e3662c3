"""Run directories and their files (schemas in docs/results.md).

  atomic      write-to-temp-then-rename helpers: no half-written file, ever
  provenance  what produced a run: binary hashes, build, git, machine, load; stale-build check
  columns     the config as flattened group.key columns of every row
  noise       per point: machine busyness, switch and server drops
  figures     every series visible, log axes where needed, PNG/SVG/PDF
  rundir      one run directory: config, provenance, point fragments, tables
  load        ``load(paths...)``: many runs as one polars DataFrame
"""

from netkv.results.load import load

__all__ = ["load"]
