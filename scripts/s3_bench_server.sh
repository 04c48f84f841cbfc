# Sourced by the object-store benchmarks (bench_object_store.sh, bench_autotune.sh): starts
# the local S3 server ($moto) on a free port and scripts/latency_proxy.py in front of it
# ($latency_ms added to each request), makes the bucket `bench`, and on exit stops both and
# removes the scratch folder. Sets work (the scratch folder), s3_port and proxy_port.
work="$(mktemp -d)"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
s3_port="$(free_port)"
proxy_port="$(free_port)"
"$moto" -H 127.0.0.1 -p "$s3_port" >/dev/null 2>&1 &
pids+=($!)
python3 scripts/latency_proxy.py "$proxy_port" "$s3_port" "$latency_ms" &
pids+=($!)
for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$s3_port/" && break
    sleep 0.1
done
curl -s -f -X PUT "http://127.0.0.1:$s3_port/bench" >/dev/null
