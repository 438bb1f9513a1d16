"""How czjax's training programs are compiled, per platform: :func:`jit` and :func:`compile_lowered` are
``jax.jit`` and ``Lowered.compile`` with the compiler options :func:`compiler_options` chooses
(the platform's ``convolution_options``, :mod:`czjax.util.platforms`).

On the CPU, jaxlib (0.10 on) hands matrix products to YNNPACK, and reductions with the work
feeding them: a convolution followed by a sum (GroupNorm's statistics) becomes one YNNPACK
fusion, which runs on one thread where XLA's own convolution uses every core. On the 2-core
CPU the blog's CNN (Mk4) trains at 61 games/s with the default and 100 with YNNPACK kept for
matrix products only (docs/benchmarks.md, "Mk4 on the CPU"). Programs without convolutions
(the MLPs; the ResNet, whose CPU convolutions are im2col products) keep the default: their
speed is the same either way, and their results stay bit for bit those recorded
(tests/test_unchanged.py), which reductions outside YNNPACK would change in the last bits.

The options are passed per program, not through ``XLA_FLAGS``: an ``XLA_FLAGS`` entry a jaxlib
does not know aborts the process, while an unknown per-program option is an error czjax can
catch (a jaxlib without it compiles with its defaults). A user's own ``XLA_FLAGS`` choice of
YNNPACK fusions wins over czjax's.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import jax

from czjax.util import platforms

YNN_FUSIONS = platforms.YNN_FUSIONS


def compiler_options(convolutions: bool, platform: str | None = None) -> dict[str, str | bool] | None:
    """The compiler options for a program built for ``platform`` (None: :func:`platforms.target`;
    ``convolutions``: whether it holds convolution ops), or None where there are none, this
    machine's jaxlib does not take them, or ``XLA_FLAGS`` sets them."""
    options = platforms.choices_for(platform).convolution_options if convolutions else ()
    if not options or any(name in os.environ.get("XLA_FLAGS", "") for name, _ in options):
        return None
    return dict(options) if accepted(options) else None


@functools.cache
def accepted(options: tuple[tuple[str, str | bool], ...]) -> bool:
    """Whether this machine's jaxlib compiles a program with ``options`` (once per process)."""
    try:
        jax.jit(lambda x: x + 1).lower(0.0).compile(compiler_options=dict(options))
    except Exception:  # noqa: BLE001 - any refusal means: this jaxlib's defaults
        return False
    return True


def jit(fn: Callable, *, convolutions: bool, platform: str | None = None, **kwargs: Any) -> Callable:
    """``jax.jit(fn, **kwargs)`` with :func:`compiler_options` for ``platform``. JAX takes compiler
    options on a top-level program only: called inside another trace (a scan's ``jit``, a
    ``vmap``), the function is traced without them, as part of the caller's program and under its
    options."""
    options = compiler_options(convolutions, platform)
    if options is None:
        return jax.jit(fn, **kwargs)
    return _TopLevelOptions(jax.jit(fn, compiler_options=options, **kwargs), jax.jit(fn, **kwargs))


class _TopLevelOptions:
    """A jitted function with compiler options at the top level, without them when traced."""

    def __init__(self, top: Any, nested: Any):
        self._top, self._nested = top, nested

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        traced = any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves((args, kwargs)))
        return (self._nested if traced else self._top)(*args, **kwargs)

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        return self._top.lower(*args, **kwargs)


def compile_lowered(
    lowered: jax.stages.Lowered, extra: dict[str, str | bool] | None = None, platform: str | None = None
) -> jax.stages.Compiled:
    """``lowered.compile`` with :func:`compiler_options` for what the program holds and the
    platform it was built for (None: this machine's), and ``extra`` (a caller's own, such as a
    profile's: they win)."""
    convolutions = "stablehlo.convolution" in lowered.as_text()
    options = {**(compiler_options(convolutions, platform) or {}), **(extra or {})}
    return lowered.compile(compiler_options=options or None)
