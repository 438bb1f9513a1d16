"""A training checkpoint as a shipped model: the same file with the learner's parameters alone
(no optimizer state, replay buffer or frozen opponent), as `czjax/data/models/czjax-N.msgpack`.

    python experiments/strength/ship_model.py runs/cpu-hour/seed0/stage-3600 czjax/data/models/czjax-3.msgpack

Then name it in `czjax.agents.SHIPPED_MODELS` (and `SHIPPED_MODEL` when it is the newest).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import msgpack


def slim(source: Path, target: Path) -> int:
    """Writes ``target``; returns its size in bytes."""
    if source.is_dir():
        source = source / "checkpoint.msgpack"
    stored = msgpack.unpackb(source.read_bytes(), raw=False, strict_map_key=False)
    if "params" not in stored.get("state", {}):
        raise ValueError(f"{source} holds no learner parameters")
    stored["state"] = {"params": stored["state"]["params"]}
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(msgpack.packb(stored, use_bin_type=True))
    return target.stat().st_size


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("source", help="a run folder or its checkpoint.msgpack")
    parser.add_argument("target", help="the shipped file to write")
    args = parser.parse_args(argv)
    try:
        size = slim(Path(args.source), Path(args.target))
    except (OSError, ValueError) as err:
        print(f"ship_model.py: {err}", file=sys.stderr)
        return 2
    print(f"wrote {args.target} ({size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
