"""Example 4: A2C (one-step TD targets from the value head), Mk4 CNN with value head, against RandomPunisher.

    python experiments/ex4_a2c.py --time-budget 900        # a CPU-scale run
    python experiments/ex4_a2c.py --batches 20000          # 1M games (a GPU)
"""

from common import run_preset, tail_mean


def verdict(rows):
    head = rows[: max(1, len(rows) // 10)]
    start = sum(r["eval_win_rate"] for r in head) / len(head)
    return (f"win rate against RandomPunisher {start:.2f} (first 10% of the run) -> {tail_mean(rows, 'eval_win_rate'):.2f} "
            f"(last 10%); training win rate {tail_mean(rows, 'win_rate'):.2f}; value loss {tail_mean(rows, 'value_loss'):.3f}")


if __name__ == "__main__":
    run_preset("ex4-a2c", __doc__, verdict)
