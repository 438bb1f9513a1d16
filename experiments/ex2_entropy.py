"""Example 2: the same run with an entropy bonus of 0.05 does not collapse.

python experiments/ex2_entropy.py --batches 4000       # the same 200k games as example 1
"""

from common import run_preset, tail_mean


def verdict(rows):
    entropies = [r["entropy"] for r in rows[len(rows) // 10 :]]  # after the first 10% (the start is ~1.9)
    low, high, last = min(entropies), max(entropies), tail_mean(rows, "entropy")
    ok = 0.7 <= last <= 1.3
    return (
        f"{'no collapse' if ok else 'outside the expected band'}: mean entropy {last:.2f} over the last 10% "
        f"(range {low:.2f}-{high:.2f} after the first 10%), game length {tail_mean(rows, 'game_length'):.1f}"
    )


if __name__ == "__main__":
    run_preset("ex2-entropy", __doc__, verdict)
