#!/usr/bin/env bash
# Wheels for what the test extra needs and a GPU machine's image lacks, for a machine without
# network: copy them there with the checkout.
#   scripts/device-wheels.sh [DIR] [FREEZE]
# DIR (default .whl, ignored by git): where the wheels go. FREEZE (default the suite-gpu step's
# versions.log): that machine's `pip freeze`; a package listed there is not downloaded again.
# There, before the suite:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site DIR/*.whl && export PYTHONPATH=$PWD:/tmp/site
# Playwright's browser tests stay skipped there (no browser on that machine).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.whl}
freeze=${2:-docs/results/test-suite/suite-gpu/versions.log}
pins=constraints/cpu.txt
packages=(wandb tensorboardX nbclient nbformat ipykernel mctx pgx)
wanted=()
for name in "${packages[@]}"; do
  pin=$(grep -i "^$name==" "$pins" || true)
  wanted+=("${pin:-$name}")
done
mkdir -p "$dir"
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 -d "$dir" "${wanted[@]}"
# drop what the machine already has: two versions of one package would stop the install there
normalize() { tr 'A-Z_.' 'a-z--' <<<"$1"; }
have=$(sed -n 's/==.*//p' "$freeze" | while read -r name; do normalize "$name"; done)
for wheel in "$dir"/*.whl; do
  name=$(normalize "$(basename "$wheel" | cut -d- -f1)")
  if grep -qx "$name" <<<"$have"; then rm "$wheel"; fi
done
du -sh "$dir"
ls "$dir"
