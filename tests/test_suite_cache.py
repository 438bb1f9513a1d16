"""The suite's compilation cache folder is kept under its size limit (tests/conftest.py)."""

import os

from tests.conftest import prune_cache


def _entry(folder, name, size, written):
    path = folder / name
    path.write_bytes(b"x" * size)
    os.utime(path, (written, written))
    return path


def test_a_cache_over_its_limit_loses_its_oldest_written_entries_down_to_half(tmp_path):
    """Six entries of 100 bytes written at times 1-6 (600 bytes) with a limit of 500: the four
    oldest go (200 bytes left, at most half the limit); a hidden lock file stays."""
    entries = [_entry(tmp_path, f"key{t}-cache", 100, t) for t in (3, 1, 6, 2, 5, 4)]
    lock = _entry(tmp_path, ".lockfile", 1000, 0)
    deleted = prune_cache(tmp_path, limit=500)
    assert sorted(path.name for path in deleted) == ["key1-cache", "key2-cache", "key3-cache", "key4-cache"]
    assert sorted(path.name for path in tmp_path.iterdir() if not path.name.startswith(".")) == [
        "key5-cache",
        "key6-cache",
    ]
    assert lock.exists() and len(entries) == 6


def test_a_cache_within_its_limit_is_left_alone(tmp_path):
    for t in range(5):
        _entry(tmp_path, f"key{t}-cache", 100, t)
    assert prune_cache(tmp_path, limit=500) == []
    assert len(list(tmp_path.iterdir())) == 5
