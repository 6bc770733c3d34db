"""``python -m bench.estates english|dutch --seed N --matters M --out DIR [--check]``."""

from __future__ import annotations

import argparse
import json
import sys
import time

from bench.estates.estate import check


def main(argv: list[str] | None = None) -> int:
    """Generate one estate; with ``--check`` verify it and exit 1 on problems."""
    ap = argparse.ArgumentParser(description="Generate a synthetic estate of another firm's conventions.")
    ap.add_argument("firm", choices=["english", "dutch"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--matters", type=int, default=12)
    ap.add_argument("--out", required=True)
    ap.add_argument("--check", action="store_true", help="verify that every expectation is in the files")
    args = ap.parse_args(argv)
    started = time.monotonic()
    if args.firm == "english":
        from bench.estates.english import generate
    else:
        from bench.estates.dutch import generate
    truth = generate(args.seed, args.matters, args.out)
    print(json.dumps({"files": truth["stats"]["files"], "by_format": truth["stats"]["by_format"],
                      "matter_evidence": truth["stats"]["matter_evidence"],
                      "seconds": round(time.monotonic() - started, 1)}))
    if args.check:
        problems = check(args.out)
        for p in problems[:50]:
            print(p, file=sys.stderr)
        print(f"{len(problems)} problems", file=sys.stderr)
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
