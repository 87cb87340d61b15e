"""``python -m cnnbench`` is the same as the ``cnnbench`` command."""

from cnnbench.cli import main

if __name__ == "__main__":  # worker processes started with "spawn" import this module too
    raise SystemExit(main())
