#!/usr/bin/env bash
# Throughput of the full pipeline (`stoker bench pipeline`) on the same tar shards read
# three ways: from local files, from a local S3 server (moto, as scripts/test.sh installs
# it), and from that server behind LATENCY_MS (default 20) of added latency per request
# (scripts/latency_proxy.py); each in both orders (a full permutation, the default; block
# order with windows of BLOCK shards); and the last with the disk cache on (a fresh cache
# each run: the first epoch fills it, the later ones read it). Alternating, ROUNDS rounds
# (default 3): one line of JSON per run, then the medians of the whole run's and of the
# last epoch's images/s, and each remote row's ratio to local files.
#
#   scripts/bench_object_store.sh [IMAGES] (default bench-data/in500: make_bench_set.py)
#
# Builds the release CLI with the object-store feature.
set -euo pipefail
cd "$(dirname "$0")/.."
images="${1:-bench-data/in500}"
rounds="${ROUNDS:-3}"
latency_ms="${LATENCY_MS:-20}"
block="${BLOCK:-2}"
shard_size="${SHARD_SIZE:-2MiB}"
extra=(${BENCH_ARGS:---size 224 --batch 32 --epochs 2})
moto="${STOKER_MOTO_SERVER:-.venv-s3/bin/moto_server}"

cargo build --release --locked --quiet --features object-store --bin stoker
stoker=target/release/stoker
# shellcheck source=scripts/s3_bench_server.sh
. scripts/s3_bench_server.sh

export AWS_ALLOW_HTTP=true AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1
conv=(convert "$images" --to tar --restarts off --shard-size "$shard_size" --quiet --json)
"$stoker" "${conv[@]}" --out "$work/tar" >/dev/null
AWS_ENDPOINT="http://127.0.0.1:$s3_port" "$stoker" "${conv[@]}" --out s3://bench/tar/ >/dev/null
echo "shards: $(ls "$work"/tar/*.tar | wc -l) of $(du -sh "$work/tar" | cut -f1)" >&2

results="$work/results.jsonl"
for round in $(seq "$rounds"); do
    for order in permutation block; do
        order_args=()
        [ "$order" = block ] && order_args=(--block-order "$block")
        for source in local s3 "s3+${latency_ms}ms" "s3+${latency_ms}ms+cache"; do
            cache=
            case "$source" in
            local) where="$work/tar/"; endpoint= ;;
            s3) where=s3://bench/tar/; endpoint="http://127.0.0.1:$s3_port" ;;
            *cache) where=s3://bench/tar/; endpoint="http://127.0.0.1:$proxy_port"
                cache="$work/cache-$round-$order" ;;
            *) where=s3://bench/tar/; endpoint="http://127.0.0.1:$proxy_port" ;;
            esac
            out="$(AWS_ENDPOINT="$endpoint" STOKER_CACHE_DIR="$cache" "$stoker" bench pipeline \
                --images "$where" "${extra[@]}" "${order_args[@]}" --json --quiet)"
            python3 - "$round" "$order" "$source" "$out" >>"$results" <<'PY'
import json, sys
round_, order, source, out = sys.argv[1:5]
r = json.loads(out)["results"][0]
last = r["samples"] / max(r["epoch_seconds"][-1], 1e-9)
print(json.dumps({"round": int(round_), "order": order, "source": source,
                  "images_per_s": round(r["images_per_s"], 1),
                  "last_epoch_images_per_s": round(last, 1),
                  "delivered": r["delivered"], "reported": r["reported"]}))
PY
            tail -n 1 "$results"
        done
    done
done
python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med, last = {}, {}
for r in rows:
    med.setdefault((r["order"], r["source"]), []).append(r["images_per_s"])
    last.setdefault((r["order"], r["source"]), []).append(r["last_epoch_images_per_s"])
print("order        source              images/s  ratio   last epoch  ratio   (medians)")
for key, v in med.items():
    order, source = key
    base = statistics.median(med[(order, "local")])
    base_last = statistics.median(last[(order, "local")])
    m, l = statistics.median(v), statistics.median(last[key])
    print(f"{order:<12} {source:<18} {m:>9.1f}  {m / base:5.2f}  {l:>10.1f}  {l / base_last:5.2f}")
PY
