"""Example 5: PPO (clip 0.2, up to 4 epochs per batch, stopped at KL 0.01), Mk4 CNN with value head, against RandomPunisher.

python experiments/ex5_ppo.py --time-budget 900        # a CPU-scale run
python experiments/ex5_ppo.py --batches 20000          # 1M games (a GPU)
"""

from common import run_preset, tail_mean, win_rate_trend


def verdict(rows):
    return win_rate_trend(rows) + (
        f"; training win rate {tail_mean(rows, 'win_rate'):.2f}; epochs per batch {tail_mean(rows, 'ppo_epochs'):.2f}, "
        f"KL {tail_mean(rows, 'ppo_kl'):.4f}"
    )


if __name__ == "__main__":
    run_preset("ex5-ppo", __doc__, verdict)
