#!/usr/bin/env bash
# Soak: resident memory over many epochs of `stoker bench pipeline` on a mixed-size image
# folder, to show it levels off after warm-up (run by hand; figures in BENCHMARKS.md,
# "Memory over epochs").
#
#   scripts/soak.sh [STOKER_BINARY] [IMAGE_FOLDER] [EPOCHS] [BACKEND] [MORE_OPTIONS...]
#
# defaults: target/release/stoker, bench-data/in500 (scripts' make_bench_set.py), 150, cpu.
# Prints the resident memory after a few epochs along the way, the last and the peak;
# with SOAK_SERIES=FILE also writes every epoch's resident bytes to FILE, one a line.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/stoker}
images=${2:-bench-data/in500}
epochs=${3:-150}
backend=${4:-cpu}
shift $(( $# < 4 ? $# : 4 ))
start=$(date +%s)
"$bin" bench pipeline --images "$images" --epochs "$epochs" --size 224 --batch 32 \
    --backend "$backend" "$@" --json 2>/dev/null |
    python3 -c '
import json, os, sys
r = json.load(sys.stdin)["results"][0]
if "rss_bytes_per_epoch" not in r:
    sys.exit("the backend did not run: " + r.get("error", "?"))
rss = r["rss_bytes_per_epoch"]
series = os.environ.get("SOAK_SERIES")
if series:
    with open(series, "w") as f:
        f.writelines("%d\n" % b for b in rss)
mb = lambda b: "%.0f MB" % (b / 1e6)
shown = [e for e in (1, 3, 10, 30, 100, 150, 300, 1000, 2000, 3000) if e <= len(rss)]
print(" ".join("epoch %d: %s," % (e, mb(rss[e - 1])) for e in shown),
      "last (%d): %s, peak: %s, delivered %d" % (len(rss), mb(rss[-1]), mb(r["peak_rss_bytes"]), r["delivered"]))
'
echo "($(( $(date +%s) - start )) s)"
