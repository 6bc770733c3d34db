"""``python -m ki.cli``: the ``ki`` command."""

from ki.cli.app import main

main()
