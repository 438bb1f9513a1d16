"""Pure helpers for the experiment scripts: metric curves per seed, values at milestones, seed bands.

A *row* is one logged interval of a run (czjax's ``metrics.jsonl`` rows, or the PyTorch
peer's): a dict with ``games`` (games played so far by that run), ``seed`` where several runs
share a file, and metric values. No JAX and no plotting here, so the functions are cheap to test.
"""

from __future__ import annotations

import math

import numpy as np


def per_seed(rows: list[dict], key: str) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """``{seed: (games, values)}``, each sorted by games; rows without ``key`` are left out.
    Rows without a ``seed`` count as seed 0 (a single run)."""
    out: dict[int, list[tuple[int, float]]] = {}
    for r in rows:
        if key in r and r[key] is not None:
            out.setdefault(int(r.get("seed", 0)), []).append((int(r["games"]), float(r[key])))
    return {
        seed: (np.array([g for g, _ in sorted(pts)]), np.array([v for _, v in sorted(pts)]))
        for seed, pts in sorted(out.items())
    }


def trailing_mean(values: np.ndarray, width: int) -> np.ndarray:
    """The mean of each value and the ``width - 1`` before it (fewer at the start), so a
    smoothed curve never uses the future."""
    values = np.asarray(values, float)
    if width <= 1 or values.size == 0:
        return values
    cumulative = np.concatenate([[0.0], np.cumsum(values)])
    ends = np.arange(1, values.size + 1)
    starts = np.maximum(ends - width, 0)
    return (cumulative[ends] - cumulative[starts]) / (ends - starts)


def value_at(games: np.ndarray, values: np.ndarray, at: int, window: int) -> float | None:
    """The mean of ``values`` logged at games in ``(at - window, at]``: a run's reading at a
    milestone. None when the run has not reached ``at`` games or logged nothing in the window."""
    games, values = np.asarray(games), np.asarray(values, float)
    if games.size == 0 or games.max() < at:
        return None
    inside = (games > at - window) & (games <= at)
    return float(values[inside].mean()) if inside.any() else None


def min_until(games: np.ndarray, values: np.ndarray, at: int, window: int) -> float | None:
    """The lowest ``window``-games trailing mean over ``(0, at]`` (e.g. how low entropy fell
    early in a run). None when the run has not reached ``at`` games."""
    games, values = np.asarray(games), np.asarray(values, float)
    if games.size == 0 or games.max() < at:
        return None
    means = [value_at(games, values, int(g), window) for g in games if g <= at]
    means = [m for m in means if m is not None]
    return float(min(means)) if means else None


def seed_band(values) -> dict | None:
    """Mean over seeds with a band of two standard errors: ``{mean, low, high, se, n}``.
    Missing values (None) are left out; None when none is left. With one seed the standard
    error is unknown: ``se``, ``low`` and ``high`` are None."""
    present = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not present:
        return None
    mean = float(np.mean(present))
    if len(present) < 2:
        return {"mean": mean, "low": None, "high": None, "se": None, "n": 1}
    se = float(np.std(present, ddof=1) / math.sqrt(len(present)))
    return {"mean": mean, "low": mean - 2 * se, "high": mean + 2 * se, "se": se, "n": len(present)}


def agrees(
    band: dict | None, value: float | None = None, low: float | None = None, high: float | None = None
) -> bool | None:
    """Whether czjax's seed band agrees with a published figure: a point ``value`` lies within
    the band (mean +- 2 SE); a range (``low`` and/or ``high``) holds the seed mean. None when
    either side is missing (a run too short, one seed for a point value, no figure)."""
    if band is None:
        return None
    if value is not None:
        if band["low"] is None:
            return None
        return bool(band["low"] <= value <= band["high"])
    if low is None and high is None:
        return None
    return bool((low is None or band["mean"] >= low) and (high is None or band["mean"] <= high))


def mean_interval(values, level: float = 0.95) -> dict | None:
    """Mean with its two-sided ``level`` confidence interval (Student's t over the seeds):
    ``{mean, low, high, n}``; None without values, no interval with one."""
    from scipy import stats

    present = np.asarray([float(v) for v in values if v is not None and math.isfinite(v)])
    if present.size == 0:
        return None
    mean = float(present.mean())
    if present.size < 2:
        return {"mean": mean, "low": None, "high": None, "n": 1}
    half = float(stats.t.ppf(0.5 + level / 2, present.size - 1) * present.std(ddof=1) / math.sqrt(present.size))
    return {"mean": mean, "low": mean - half, "high": mean + half, "n": int(present.size)}


def format_interval(m: dict | None, digits: int = 3) -> str:
    """:func:`mean_interval`'s result as ``mean [low, high]`` (the mean alone without an
    interval, ``-`` without a mean)."""
    if m is None:
        return "-"
    if m["low"] is None:
        return f"{m['mean']:.{digits}f}"
    return f"{m['mean']:.{digits}f} [{m['low']:.{digits}f}, {m['high']:.{digits}f}]"


def difference_interval(a, b, level: float = 0.95) -> dict | None:
    """``mean(a) - mean(b)`` with Welch's two-sided ``level`` interval (unequal variances):
    ``{diff, low, high, df}``; None with fewer than two values on either side."""
    from scipy import stats

    a = np.asarray([float(v) for v in a if v is not None and math.isfinite(v)])
    b = np.asarray([float(v) for v in b if v is not None and math.isfinite(v)])
    if a.size < 2 or b.size < 2:
        return None
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    diff = float(a.mean() - b.mean())
    if se == 0:
        return {"diff": diff, "low": diff, "high": diff, "df": float(a.size + b.size - 2)}
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    half = float(stats.t.ppf(0.5 + level / 2, df) * se)
    return {"diff": diff, "low": diff - half, "high": diff + half, "df": float(df)}


def paired_interval(differences, level: float = 0.95) -> dict | None:
    """The mean of per-item differences (two players on the same positions) with its two-sided
    ``level`` interval, normal approximation over the items: ``{diff, low, high, n}``; None
    with fewer than two items."""
    from scipy import stats

    d = np.asarray(differences, np.float64)
    if d.size < 2:
        return None
    half = float(stats.norm.ppf(0.5 + level / 2) * d.std(ddof=1) / math.sqrt(d.size))
    mean = float(d.mean())
    return {"diff": mean, "low": mean - half, "high": mean + half, "n": int(d.size)}


def equivalence_verdict(a, b, margin: float, alpha: float = 0.05) -> dict | None:
    """Two one-sided tests (TOST) at ``alpha`` with the equivalence margin ``+-margin``: the
    sides are *equivalent* when the ``1 - 2 alpha`` interval of the difference lies inside the
    margin; *different* when the ``1 - alpha`` interval excludes 0 and the difference is not
    shown equivalent; else *inconclusive*. None with fewer than two seeds a side."""
    from scipy import stats

    tost = difference_interval(a, b, 1 - 2 * alpha)
    plain = difference_interval(a, b, 1 - alpha)
    if tost is None or plain is None:
        return None
    if -margin < tost["low"] and tost["high"] < margin:
        verdict = "equivalent"
    elif plain["low"] > 0 or plain["high"] < 0:
        verdict = "different"
    else:
        verdict = "inconclusive"
    return {
        "verdict": verdict,
        "margin": margin,
        "diff": plain["diff"],
        "ci95": [plain["low"], plain["high"]],
        "ci90": [tost["low"], tost["high"]],
        # Mann-Whitney U, two-sided: no normality assumed (collapsed runs split into modes)
        "rank_p": float(stats.mannwhitneyu(list(a), list(b), alternative="two-sided").pvalue),
    }
