"""``python -m memoro`` is the ``memoro`` command."""

from memoro.cli import main

main()
