"""``python -m netkv``: see netkv.cli."""

from netkv.cli import main

raise SystemExit(main())
