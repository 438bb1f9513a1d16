"""The first two blog posts in one picture: entropy bonus 0, 0.01, 0.02, 0.05, 0.1 x 3 seeds,
REINFORCE self-play with SimpleMLP, all 15 runs as one compiled program.

    python experiments/entropy-scan/scan_entropy.py --batches 4000          # 200k games per run; a few minutes per 1000 batches on 2 cores
"""

import argparse
import sys

from czjax.jobs import presets, scan


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=4000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--chunk", type=int, default=None, help="configurations at a time (default: all)")
    parser.add_argument("--out", default="runs/scan-entropy")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--overwrite", action="store_true", help="start again where --out already holds a scan")
    args = parser.parse_args(argv)
    preset = presets.get_preset("ex2-entropy")
    grid = {"entropy_bonus": [0.0, 0.01, 0.02, 0.05, 0.1]}
    rows = scan.run_scan(
        preset.config,
        dict(preset.hparams),
        scan.grid_settings(grid),
        list(range(args.seeds)),
        args.out,
        args.batches,
        chunk=args.chunk,
        resume=args.resume,
        overwrite=args.overwrite,
        log=lambda m: print(m, flush=True),
    )
    print(scan.write_report(rows, args.out, list(grid), sort_by="entropy", title="entropy bonus scan (ex2-entropy)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
