#!/usr/bin/env bash
# The tests: set up .venv with the test extras if needed, make Chromium available for the browser
# test where this machine allows it, run the checks (scripts/check.sh: ruff, mypy, the docs site),
# then the whole suite in two workers (extra arguments go to pytest; `-n 0` runs it in one process).
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup-venv.sh test

# The browser test drives Debian's Chromium at /usr/bin/chromium; without it that test skips
# and says why. Installed here only where apt-get runs without a password (root, as on CI).
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" = 0 ] || { sudo -n true 2>/dev/null && sudo="sudo -n"; } || sudo="none"
  if [ "$sudo" != none ]; then
    echo "test: installing Chromium for the browser test (apt-get install chromium)"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y -qq chromium >/dev/null 2>&1 \
      || { $sudo apt-get update -qq >/dev/null 2>&1 && $sudo apt-get install -y -qq chromium >/dev/null 2>&1; } \
      || echo "test: could not install Chromium: the browser test will skip"
  fi
fi
[ -x /usr/bin/chromium ] || echo "test: no /usr/bin/chromium: the browser test will skip (apt-get install chromium as root to run it)"

# Compiling for a GPU and a TPU without one (tests/test_kernels.py): the CUDA plugin and libtpu in
# .plugins/, beside .venv (about 390 MB to download, 30 s here; docs/testing.md).
scripts/setup-plugins.sh || echo "test: could not install the compile plugins: tests/test_kernels.py's compiling tests will say so"

# Lint, format, types and the docs site first: seconds to fail, where the suite takes minutes.
scripts/check.sh

.venv/bin/python -c "import jax, flax, optax, chex; print('jax', jax.__version__, 'flax', flax.__version__, 'optax', optax.__version__, jax.devices())"
. .venv/bin/activate
# Two workers, each test file on one of them (its module fixtures compile once): most of the
# suite's time is XLA compiling, which is single-threaded, so two workers use both cores.
exec python -m pytest -q -n 2 --dist loadfile --durations=25 tests "$@"
