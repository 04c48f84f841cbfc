#!/bin/sh
# Writes tests/data/split/v1-fraction.json and v1-group.json: split manifests of the
# previous format, `stoker-split/1`, so that tests can check they still load and extend.
# They must come from a `stoker` binary that still writes that format (commit 316300f or
# earlier):
#
#   git worktree add /tmp/old 316300f && (cd /tmp/old && cargo build --bin stoker)
#   STOKER=/tmp/old/target/debug/stoker scripts/make_split_v1_manifests.sh
#
# The dataset is 60 empty `.png` files, `patientNN/scanK.png` (10 patients, 6 scans each):
# listing a folder reads no image bytes, and tests/suite/split.rs rebuilds the same paths in
# memory.
set -eu
: "${STOKER:?set STOKER to a stoker binary that writes stoker-split/1}"
out="$(dirname "$0")/../tests/data/split"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for p in 0 1 2 3 4 5 6 7 8 9; do
    mkdir -p "$tmp/patient0$p"
    for s in 0 1 2 3 4 5; do
        : >"$tmp/patient0$p/scan$s.png"
    done
done
mkdir -p "$out"
"$STOKER" split "$tmp" --val 0.2 --seed 5 --out "$out/v1-fraction.json" >/dev/null
"$STOKER" split "$tmp" --val 0.25 --seed 9 --group-by '^(patient\d+)/' \
    --out "$out/v1-group.json" >/dev/null
grep -q '"stoker-split/1"' "$out/v1-fraction.json"
grep -q '"stoker-split/1"' "$out/v1-group.json"
