"""Example 1: plain REINFORCE in self-play collapses (entropy -> 0, the same short game).

python experiments/ex1_collapse.py --batches 4000      # 200k games, about a minute on a 2-core CPU
"""

from common import run_preset, tail_mean


def verdict(rows):
    entropy, first_len, last_len = tail_mean(rows, "entropy"), rows[0]["game_length"], tail_mean(rows, "game_length")
    collapsed = entropy < 0.1 and last_len < first_len
    return (
        f"{'collapsed' if collapsed else 'did not collapse'}: mean entropy {entropy:.3f} over the last 10% "
        f"(below 0.1: {entropy < 0.1}), game length {first_len:.1f} -> {last_len:.1f}"
    )


if __name__ == "__main__":
    run_preset("ex1-collapse", __doc__, verdict)
