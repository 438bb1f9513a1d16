#!/usr/bin/env bash
# The checks ./test.sh runs before the suite (each configured in pyproject.toml / mkdocs.yml):
# ruff's lint and format check on czjax, tests and experiments; mypy on czjax; the docs site
# built with warnings as errors. Needs .venv with the test extras (scripts/setup-venv.sh test).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
echo "check: ruff check"
"$bin/ruff" check --quiet czjax tests experiments
echo "check: ruff format --check"
"$bin/ruff" format --check --quiet czjax tests experiments
echo "check: mypy (czjax)"
"$bin/mypy" --no-error-summary
site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
echo "check: mkdocs build --strict"
"$bin/mkdocs" build --strict --quiet --site-dir "$site/site"
echo "check: all clean"
