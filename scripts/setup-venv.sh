#!/usr/bin/env bash
# Creates .venv (if missing) and installs czjax into it with the given extras, once: a stamp in
# .venv records what was installed for which pyproject.toml, so a second call returns at once.
#   scripts/setup-venv.sh            czjax and its runtime dependencies (jax for the CPU)
#   scripts/setup-venv.sh test       ... plus the test extras (pytest, hypothesis, torch CPU, onnx, playwright)
#   GPU=1 scripts/setup-venv.sh      ... plus jax with CUDA 12 (GPU=cuda13 for CUDA 13)
# Versions: the known-good ones in constraints/cpu.txt (those the suite passed with; refreshed by
# scripts/refresh-constraints.sh); CZJAX_CONSTRAINTS=none takes the newest pyproject.toml allows,
# CZJAX_CONSTRAINTS=FILE another set. CZJAX_SETUP_DRY_RUN=1 prints the pip commands only.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
python="${PYTHON:-python3}"
gpu="${GPU:-}"
case "$gpu" in
  "" | 0) gpu="" ;;
  1 | cuda12) gpu="cuda12" ;;
  cuda13) gpu="cuda13" ;;
  *) echo "setup: GPU must be 1, cuda12 or cuda13, got '$gpu'" >&2; exit 2 ;;
esac

if ! command -v "$python" >/dev/null 2>&1; then
  echo "setup: $python not found: czjax needs Python 3.10 or newer (set PYTHON=... to choose one)" >&2; exit 2
fi
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
  echo "setup: czjax needs Python 3.10 or newer; $python is $("$python" --version 2>&1)" >&2; exit 2
fi

constraints="${CZJAX_CONSTRAINTS:-constraints/cpu.txt}"
if [ "$constraints" = none ]; then
  pin=()
elif [ -f "$constraints" ]; then
  pin=(-c "$constraints")
else
  echo "setup: no constraints file $constraints (CZJAX_CONSTRAINTS=none installs the newest versions instead)" >&2; exit 2
fi
if [ -n "${CZJAX_SETUP_DRY_RUN:-}" ]; then
  echo "pip install -e .${extras:+[$extras]} ${pin[*]}"
  exit 0
fi

hash=$(cat pyproject.toml ${pin[1]:+"${pin[1]}"} | "$python" -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest()[:12])')
stamp() { echo ".venv/.czjax-installed-${1:-base}${gpu:+-$gpu}-$hash"; }
# Test extras include everything the runtime needs, so they satisfy a plain install too.
if [ -f "$(stamp "$extras")" ] || { [ -z "$extras" ] && [ -f "$(stamp test)" ]; }; then
  exit 0
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $("$python" --version 2>&1)"
  "$python" -m venv .venv || { echo "setup: '$python -m venv' failed: install your system's venv package (Debian/Ubuntu: apt-get install python3-venv)" >&2; exit 2; }
fi
echo "setup: installing czjax${extras:+ with its $extras extras}${gpu:+ and jax[$gpu]} into .venv${pin[1]:+ at the versions in ${pin[1]}} (once; later calls skip this)"
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".${extras:+[$extras]}" ${pin[@]+"${pin[@]}"}
if [ -n "$gpu" ]; then  # the CPU set's jax version, with its CUDA plugin
  .venv/bin/python -m pip install --quiet --upgrade "jax[$gpu]" ${pin[@]+"${pin[@]}"}
fi
rm -f .venv/.czjax-installed-*
touch "$(stamp "$extras")"
