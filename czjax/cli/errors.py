"""One-line errors for what the system refuses and for memory that does not fit."""

from __future__ import annotations

import errno

# What to change when the system refuses a file operation, by errno.
OS_ERROR_FIXES = {
    errno.ENOSPC: "free some space on that disk, or choose another --out",
    errno.EDQUOT: "free some space within your quota, or choose another --out",
    errno.EROFS: "that file system is read-only: choose another --out",
    errno.EACCES: "you may not write there: choose another --out",
    errno.EPERM: "you may not write there: choose another --out",
    errno.ENOTDIR: "a file stands where a folder is needed: choose another path",
    errno.EEXIST: "a file stands where a folder is needed: choose another path",
    errno.EISDIR: "a folder stands where a file is needed: choose another path",
    errno.ENAMETOOLONG: "choose a shorter path",
}


def system_error_line(err: OSError) -> str:
    where = f" ({err.filename})" if err.filename else ""
    fix = OS_ERROR_FIXES.get(err.errno or 0, "check the path and the disk")
    return f"{err.strerror or err}{where}: {fix}"


def out_of_memory(err: BaseException) -> bool:
    """A device (XLA: RESOURCE_EXHAUSTED) or host allocation that did not fit."""
    return isinstance(err, MemoryError) or "RESOURCE_EXHAUSTED" in str(err).split("\n", 1)[0]


def out_of_memory_line(err: BaseException) -> str:
    detail = str(err).split("\n", 1)[0].replace("RESOURCE_EXHAUSTED: ", "").strip()
    return (
        f"out of memory{f' ({detail})' if detail else ''}: play fewer games at once (--games-per-batch, --eval-games, "
        "--games), or use a smaller --model or fewer simulations; a run that had not saved yet left nothing behind"
    )
