"""``ki serve`` whose ``fetch`` handler waits for a gate file (browser tests that need a run to stay active).

Usage: ``python tests/helpers/gated_serve.py GATE_FILE serve --port P ...`` — everything after the gate file is
``ki``'s command line. Each ``fetch`` waits until ``GATE_FILE`` exists (at most 300 s), then fetches as usual, so
a test can hold a run active, act on it in the console, and then let it go on.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def main() -> None:
    gate = Path(sys.argv[1])
    from ki.stages import STAGE_HANDLERS

    original = STAGE_HANDLERS["fetch"]

    def fetch(ctx):
        deadline = time.monotonic() + 300
        while not gate.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return original(ctx)

    STAGE_HANDLERS["fetch"] = fetch
    sys.argv = ["ki", *sys.argv[2:]]
    from ki.cli.app import main as ki_main

    ki_main()


if __name__ == "__main__":
    main()
