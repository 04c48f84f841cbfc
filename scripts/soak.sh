#!/usr/bin/env bash
# Soak: resident memory of `stoker bench pipeline` over a long run on a mixed-size image
# folder, sampled every few seconds, to show that it is flat after warm-up (run by hand;
# figures in BENCHMARKS.md, "Memory over epochs").
#
#   scripts/soak.sh [STOKER_BINARY] [IMAGE_FOLDER] [MINUTES] [BACKEND] [MORE_OPTIONS...]
#
# defaults: target/release/stoker, bench-data/mixed, 30, cpu. bench-data/mixed is the
# 500-image set of make_bench_set.py with the corpus photos (up to 16 Mpx) beside it; see
# BENCHMARKS.md for how it is made. The run is stopped after MINUTES; its resident memory
# (VmRSS) is read every SOAK_INTERVAL seconds (default 10) and written, one
# "seconds rss_bytes" line per sample, to SOAK_SERIES (default soak-BACKEND.txt).
#
# Verdict: over the last two thirds of the run (the last 20 of 30 minutes), the median of
# each 5-minute block must stay within SOAK_TOLERANCE (default 0.10) of the first block's
# median, above and below: that is drift (memory kept). Single samples also swing with
# what is live at that instant (a 16 Mpx photo decoding on each worker holds its buffers
# for a moment); the script prints their band too, and the peak. It exits 1 on drift.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/stoker}
images=${2:-bench-data/mixed}
minutes=${3:-30}
backend=${4:-cpu}
shift $(($# < 4 ? $# : 4))
interval=${SOAK_INTERVAL:-10}
series=${SOAK_SERIES:-soak-$backend.txt}
tolerance=${SOAK_TOLERANCE:-0.10}

# Far more epochs than fit in the time: the run is stopped from here.
"$bin" bench pipeline --images "$images" --epochs 1000000 --size 224 --batch 32 \
    --backend "$backend" "$@" >/dev/null 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT
: >"$series"
start=$(date +%s)
end=$((start + minutes * 60))
while [ "$(date +%s)" -lt "$end" ]; do
    sleep "$interval"
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "error: the pipeline stopped before the soak's end (see: $bin bench pipeline ...)" >&2
        exit 2
    fi
    rss_kb=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status")
    echo "$(($(date +%s) - start)) $((rss_kb * 1024))" >>"$series"
done
hwm_kb=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status")
kill "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
trap - EXIT

python3 - "$series" "$tolerance" "$hwm_kb" <<'PY'
import sys
series, tol, hwm_kb = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
rows = [tuple(map(int, l.split())) for l in open(series) if l.strip()]
total = rows[-1][0]
mb = lambda b: "%.0f MB" % (b / 1e6)
marks = [60, 120, 300, 600, 900, 1200, 1500, 1800]
shown = []
for m in marks:
    r = [b for t, b in rows if t >= m]
    if r:
        shown.append("%d s: %s" % (m, mb(r[0])))
start = total // 3
tail = [(t, b) for t, b in rows if t >= start]
blocks = {}
for t, b in tail:
    blocks.setdefault((t - start) // 300, []).append(b)
med = lambda v: sorted(v)[len(v) // 2]
meds = [med(v) for k, v in sorted(blocks.items()) if len(v) >= 10]
first = meds[0]
drift = [m / first - 1 for m in meds]
flat = all(abs(d) <= tol for d in drift)
lo, hi = min(b for _, b in tail), max(b for _, b in tail)
print(", ".join(shown))
print("samples %d over %d s; from %d s on: 5-minute medians %s (%+.1f %% .. %+.1f %% of the first); "
      "single samples %s .. %s; peak %s"
      % (len(rows), total, start, ", ".join(mb(m) for m in meds), 100 * min(drift),
         100 * max(drift), mb(lo), mb(hi), mb(hwm_kb * 1024)))
print("flat" if flat else "NOT flat (drift beyond %.0f %%)" % (100 * tol))
sys.exit(0 if flat else 1)
PY
