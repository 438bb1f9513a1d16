#!/usr/bin/env bash
# Refreshes the known-good versions that ./run.sh and ./test.sh install (constraints/*.txt).
#   scripts/refresh-constraints.sh          CPU: a fresh venv with the newest releases pyproject.toml
#                                           allows, the whole suite run in it, and only if it passes
#                                           its `pip freeze` written to constraints/cpu.txt
#   scripts/refresh-constraints.sh gpu FILE the GPU set: FILE is the `pip freeze` of a machine whose
#                                           suite passed (the campaign's suite-gpu step saves it as
#                                           versions.log), copied to constraints/gpu-h100.txt
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = gpu ]; then
  [ -f "${2:-}" ] || { echo "refresh-constraints: give the GPU machine's pip freeze: scripts/refresh-constraints.sh gpu FILE" >&2; exit 2; }
  { echo "# Known-good versions on one NVIDIA H100 (the device image, Python 3.12): the suite passed with these."
    echo "# Refreshed by scripts/refresh-constraints.sh gpu FILE from the campaign's suite-gpu step."
    grep -E '^[A-Za-z0-9_.-]+==' "$2" | grep -v '^czjax=='; } > constraints/gpu-h100.txt
  echo "wrote constraints/gpu-h100.txt ($(grep -c '==' constraints/gpu-h100.txt) pins)"
  exit 0
fi
python="${PYTHON:-python3}"
venv=$(mktemp -d)/venv
trap 'rm -rf "$(dirname "$venv")"' EXIT
echo "refresh-constraints: a fresh venv in $venv with the newest versions pyproject.toml allows"
# as ./test.sh sets one up (torch's CPU build first), without the constraints
CZJAX_VENV="$venv" CZJAX_CONSTRAINTS=none PYTHON="$python" scripts/setup-venv.sh test
echo "refresh-constraints: running the suite with them"
(. "$venv/bin/activate" && python -m pytest -q -n 2 --dist loadfile tests)
{ echo "# Known-good versions on the CPU ($("$venv/bin/python" --version), $(uname -m)): the suite passed with these."
  echo "# ./run.sh and ./test.sh install them (scripts/setup-venv.sh; CZJAX_CONSTRAINTS=none for the newest instead)."
  echo "# Refresh: scripts/refresh-constraints.sh"
  "$venv/bin/python" -m pip freeze --exclude-editable | grep -E '^[A-Za-z0-9_.-]+==' | sed 's/+cpu$//'; } > constraints/cpu.txt  # +cpu: pip finds torch's CPU build by its plain version here
echo "wrote constraints/cpu.txt ($(grep -c '==' constraints/cpu.txt) pins)"
