"""Example 3: REINFORCE with baseline, Mk4 CNN with value head, self-play against a checkpoint copy.

The blog's full run is 32,000 batches of 50 games (1.6M games; 94% against RandomPunisher).
On a 2-core CPU use a time budget:

    python experiments/ex3_rwb.py --time-budget 3600       # about an hour
    python experiments/ex3_rwb.py --batches 32000          # the blog's run (a GPU)
"""

from common import run_preset, tail_mean, win_rate_trend


def verdict(rows):
    return win_rate_trend(rows) + (
        f"; value loss {tail_mean(rows, 'value_loss'):.3f}, advantage std {tail_mean(rows, 'advantage_std'):.3f} "
        f"vs returns std {tail_mean(rows, 'returns_std'):.3f}"
    )


if __name__ == "__main__":
    run_preset("ex3-rwb", __doc__, verdict)
