"""The first two blog posts in one picture: entropy bonus 0, 0.01, 0.02, 0.05, 0.1 x 3 seeds,
REINFORCE self-play with SimpleMLP, all 15 runs as one compiled program.

    python experiments/scan_entropy.py --batches 4000          # 200k games per run; a few minutes per 1000 batches on 2 cores
"""

import argparse
import sys

from czjax import cli


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=4000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--chunk", type=int, default=None, help="configurations at a time (default: all)")
    parser.add_argument("--out", default="runs/scan-entropy")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--overwrite", action="store_true", help="start again where --out already holds a scan")
    args = parser.parse_args(argv)
    command = ["scan", "--preset", "ex2-entropy", "--grid", "entropy_bonus=0,0.01,0.02,0.05,0.1", "--seeds", str(args.seeds),
               "--batches", str(args.batches), "--out", args.out, "--sort", "entropy"]
    command += ["--chunk", str(args.chunk)] if args.chunk else []
    command += ["--resume"] if args.resume else []
    command += ["--overwrite"] if args.overwrite else []
    return cli.main(command)


if __name__ == "__main__":
    sys.exit(main())
