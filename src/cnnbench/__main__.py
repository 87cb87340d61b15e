"""``python -m cnnbench`` is the same as the ``cnnbench`` command."""

from cnnbench.cli import main

raise SystemExit(main())
