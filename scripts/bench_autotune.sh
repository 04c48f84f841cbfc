#!/usr/bin/env bash
# Autotune against the defaults and hand-picked reader counts, side by side in one run, on
# loose JPEGs in a local S3 server (moto, as scripts/test.sh installs it) behind
# LATENCY_MS (default 20) of added latency per request (scripts/latency_proxy.py).
# The settings alternate within each of ROUNDS rounds (default 3): one line of JSON per
# run, then per round each setting's ratio to the round's best hand-picked setting and to
# the defaults, and the medians. Then one run per setting with --digest: every setting
# must print the same digest per epoch (what was delivered, in order, pixel for pixel).
#
#   scripts/bench_autotune.sh [IMAGES] (default bench-data/in500: make_bench_set.py)
#
# READERS: the hand-picked reader counts (default "8 16 32 64"); BENCH_ARGS: the other
# flags of `stoker bench pipeline` (default --size 224 --batch 32 --epochs 3);
# STOKER: a release CLI built with the object-store feature (default: built here).
set -euo pipefail
cd "$(dirname "$0")/.."
images="${1:-bench-data/in500}"
rounds="${ROUNDS:-3}"
latency_ms="${LATENCY_MS:-20}"
read -r -a hand <<<"${READERS:-8 16 32 64}"
read -r -a extra <<<"${BENCH_ARGS:---size 224 --batch 32 --epochs 3}"
moto="${STOKER_MOTO_SERVER:-.venv-s3/bin/moto_server}"

stoker="${STOKER:-}"
if [ -z "$stoker" ]; then
    cargo build --release --locked --quiet --features object-store --bin stoker
    stoker=target/release/stoker
fi
# shellcheck source=scripts/s3_bench_server.sh
. scripts/s3_bench_server.sh
# The loose JPEGs, one object each (the server takes unsigned puts).
n=0
for f in "$images"/*.jpg; do
    curl -s -f -T "$f" \
        "http://127.0.0.1:$s3_port/bench/images/$(basename "$f")" >/dev/null
    n=$((n + 1))
done
echo "uploaded $n JPEGs; $latency_ms ms added to each request" >&2

export AWS_ALLOW_HTTP=true AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1
export AWS_ENDPOINT="http://127.0.0.1:$proxy_port"
settings=(defaults autotune)
for r in "${hand[@]}"; do settings+=("readers=$r"); done
flags_of() {
    case "$1" in
    defaults) ;;
    autotune) echo --autotune on ;;
    readers=*) echo --readers "${1#readers=}" ;;
    esac
}

results="$work/results.jsonl"
run() { # round setting [flags...]
    local round="$1" setting="$2"
    shift 2
    local out
    # shellcheck disable=SC2046
    out="$("$stoker" bench pipeline --images s3://bench/images/ "${extra[@]}" \
        $(flags_of "$setting") "$@" --json --quiet)"
    python3 - "$round" "$setting" "$out" <<'PY'
import json, sys
round_, setting, out = sys.argv[1:4]
r = json.loads(out)["results"][0]
s = r["stats"]
print(json.dumps({"round": round_, "setting": setting,
                  "images_per_s": round(r["images_per_s"], 1),
                  "epoch_s": [round(x, 2) for x in r["epoch_seconds"]],
                  "readers": s.get("readers"), "workers": s.get("workers"),
                  "prefetch": s.get("prefetch"), "delivered": r["delivered"],
                  "reported": r["reported"], "digests": r["epoch_digests"],
                  "load": open("/proc/loadavg").read().split()[0]}))
PY
}
for round in $(seq "$rounds"); do
    for setting in "${settings[@]}"; do
        run "$round" "$setting" | tee -a "$results"
    done
done
for setting in "${settings[@]}"; do
    run digest "$setting" --digest | tee -a "$results"
done
python3 - "$results" "${hand[@]}" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
hand = [f"readers={r}" for r in sys.argv[2:]]
timed = [r for r in rows if r["round"] != "digest"]
by = {}
for r in timed:
    by.setdefault(r["round"], {})[r["setting"]] = r["images_per_s"]
print("round  " + "  ".join(f"{s:>11}" for s in by[next(iter(by))])
      + "  best hand-picked  autotune/best  autotune/defaults")
for rnd, v in by.items():
    best = max(hand, key=lambda s: v[s])
    print(f"{rnd:<6} " + "  ".join(f"{x:>11.1f}" for x in v.values())
          + f"  {best:>16}  {v['autotune'] / v[best]:13.3f}  {v['autotune'] / v['defaults']:17.3f}")
med = {s: statistics.median(v[s] for v in by.values()) for s in by[next(iter(by))]}
best = max(hand, key=lambda s: med[s])
print("median " + "  ".join(f"{x:>11.1f}" for x in med.values())
      + f"  {best:>16}  {med['autotune'] / med[best]:13.3f}  {med['autotune'] / med['defaults']:17.3f}")
digests = {r["setting"]: r["digests"] for r in rows if r["round"] == "digest"}
same = len({tuple(d) for d in digests.values()}) == 1
print("digests per epoch:", next(iter(digests.values())), "identical" if same else f"DIFFER: {digests}")
PY
