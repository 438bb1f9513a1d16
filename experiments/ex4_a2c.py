"""Example 4: A2C (one-step TD targets from the value head), Mk4 CNN with value head, against RandomPunisher.

python experiments/ex4_a2c.py --time-budget 900        # a CPU-scale run
python experiments/ex4_a2c.py --batches 20000          # 1M games (a GPU)
"""

from common import run_preset, tail_mean, win_rate_trend


def verdict(rows):
    return win_rate_trend(rows) + (
        f"; training win rate {tail_mean(rows, 'win_rate'):.2f}; value loss {tail_mean(rows, 'value_loss'):.3f}"
    )


if __name__ == "__main__":
    run_preset("ex4-a2c", __doc__, verdict)
