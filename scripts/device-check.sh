#!/usr/bin/env bash
# The GPU check, in two halves.
#
#   scripts/device-check.sh build   (on a build machine, no GPU needed)
#       Builds what must run on the GPU machine into .device-pkg/ (ignored by git): the
#       release `stoker` binary, the CUDA test executables, the photos and the script that
#       make the 2000-image benchmark set, and the Vulkan loader packages for wgpu there.
#       Carry .device-pkg (and .gl, see below) to the GPU machine.
#
#   scripts/device-check.sh run     (on the GPU machine, from the repository root)
#       Runs the CUDA tests with STOKER_REQUIRE_CUDA=1 (decode parity within +-2, augment
#       parity within +-1, label planes exact, every sample once, no device memory growth
#       over 1000 batches, nvJPEG), makes the benchmark set, runs `stoker bench decode
#       --backend cpu,cuda,wgpu` and `bench pipeline` on it next to torchvision's batched
#       GPU decode on the same files, with nvidia-smi before and after. Writes under $OUT:
#       device-check.log (everything), results.json (all figures), nvidia-smi.txt. Takes
#       about 5 minutes; needs no Rust there.
set -euo pipefail
cd "$(dirname "$0")/.."
PKG=.device-pkg
# The CUDA tests that run there (the others need no GPU and run in CI).
TESTS=(cuda_backend wgpu_kernels device_pipeline pipeline shutdown nvjpeg_load kernels_compile)

build() {
    rm -rf "$PKG"
    mkdir -p "$PKG/bin" "$PKG/photos"
    echo "== release binary"
    cargo build --release --locked --bin stoker
    cp target/release/stoker "$PKG/bin/"
    echo "== test executables"
    local args=()
    for t in "${TESTS[@]}"; do args+=(--test "$t"); done
    cargo test --release --locked --no-run --message-format=json "${args[@]}" \
        | python3 -c '
import json, sys, shutil
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        shutil.copy(m["executable"], sys.argv[1] + "/" + m["target"]["name"])
' "$PKG/bin"
    strip "$PKG"/bin/* 2>/dev/null || true
    # Compressed: what travels to the GPU machine is limited to 64 MiB.
    tar -C "$PKG" -cJf "$PKG/bin.tar.xz" bin
    rm -rf "$PKG/bin"
    echo "== benchmark photos"
    local corpus=../shared/corpus
    if [ -d "$corpus/photos" ]; then
        cp "$corpus"/photos/* "$PKG/photos/"
        cp "$corpus/make_bench_set.py" "$PKG/"
    else
        echo "warning: $corpus/photos not found: the benchmarks will run on tests/data/samples"
    fi
    # wgpu on the GPU machine needs the Vulkan loader, which its image lacks.
    if [ ! -d .gl ] && command -v apt-get >/dev/null 2>&1; then
        echo "== Vulkan loader packages"
        mkdir -p .gl /tmp/amd64/partial
        local o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64)
        if apt-get "${o[@]}" update -qq && (cd .gl && apt-get "${o[@]}" download libvulkan1 >/dev/null); then
            :
        else
            echo "warning: could not fetch libvulkan1; wgpu will be reported unavailable there"
            rm -rf .gl
        fi
    fi
    grep -qx '/.gl/' .git/info/exclude 2>/dev/null || echo '/.gl/' >>.git/info/exclude
    du -sh "$PKG" .gl 2>/dev/null || true
    echo "carry: $PKG .gl   command: bash scripts/device-check.sh run"
}

run() {
    OUT=${OUT:-/tmp/stoker-device-check}
    mkdir -p "$OUT"
    local log="$OUT/device-check.log"
    exec > >(tee -a "$log") 2>&1
    local t0=$SECONDS
    echo "== $(date -u +%FT%TZ) device check"
    for f in .gl/*.deb; do [ -f "$f" ] && dpkg -x "$f" /; done
    ldconfig 2>/dev/null || true
    export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
    export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
    export LD_LIBRARY_PATH="$CUDA_HOME/lib64:$CUDA_HOME/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export PATH="$CUDA_HOME/bin:$PATH"
    export STOKER_REQUIRE_CUDA=1 STOKER_REQUIRE_NVRTC=1 STOKER_REQUIRE_NVJPEG=1
    export STOKER_TEST_DATA="$PWD/tests/data" RUST_BACKTRACE=1
    nvidia-smi 2>&1 | tee "$OUT/nvidia-smi.txt" || true
    local bin=/tmp/stoker-device-bin
    mkdir -p "$bin"
    tar -C "$bin" -xJf "$PKG/bin.tar.xz"
    bin="$bin/bin"
    local failed=()
    for t in "${TESTS[@]}"; do
        echo "== test $t"
        if ! timeout 240 "$bin/$t" --test-threads=4 --nocapture; then failed+=("$t"); fi
    done
    echo "== tests done after $((SECONDS - t0)) s; failed: ${failed[*]:-none}"

    # STOKER_DEVICE_CHECK_IMAGES: another image folder (a dry run of this script).
    local images=${STOKER_DEVICE_CHECK_IMAGES:-tests/data/samples}
    if [ -z "${STOKER_DEVICE_CHECK_IMAGES:-}" ] && [ -f "$PKG/make_bench_set.py" ]; then
        images=/tmp/stoker-bench2000
        [ -d "$images" ] || python3 "$PKG/make_bench_set.py" "$PKG/photos" "$images" -n 2000 >/dev/null
    fi
    echo "== benchmarks on $images ($(find "$images" -name '*.jpg' | wc -l) JPEGs) after $((SECONDS - t0)) s"
    local stoker="$bin/stoker"
    # A run that exits non-zero (a sample reported: partial) still printed its report,
    # the error object inside: kept; only a run that printed nothing is replaced.
    "$stoker" bench decode --backend cpu,cuda,wgpu --images "$images" --batch 256 --json \
        >"$OUT/bench-decode.json" || [ -s "$OUT/bench-decode.json" ] || echo '{"error": "bench decode failed"}' >"$OUT/bench-decode.json"
    "$stoker" bench decode --backend cuda --hardware all --images "$images" --batch 256 --json \
        >"$OUT/bench-decode-all.json" || [ -s "$OUT/bench-decode-all.json" ] || echo '{"error": "bench decode failed"}' >"$OUT/bench-decode-all.json"
    "$stoker" bench pipeline --backend cuda,cpu --images "$images" --size 224 --batch 256 \
        --dtype f16 --epochs 3 --json >"$OUT/bench-pipeline.json" \
        || [ -s "$OUT/bench-pipeline.json" ] || echo '{"error": "bench pipeline failed"}' >"$OUT/bench-pipeline.json"
    "$stoker" bench pipeline --backend cuda --hardware all --images "$images" --size 224 \
        --batch 256 --dtype f16 --epochs 3 --json >"$OUT/bench-pipeline-all.json" \
        || [ -s "$OUT/bench-pipeline-all.json" ] || echo '{"error": "bench pipeline failed"}' >"$OUT/bench-pipeline-all.json"
    timeout 120 python3 scripts/bench_torchvision_gpu.py "$images" --batch 256 --seconds 15 \
        >"$OUT/torchvision.json" || echo '{"error": "torchvision failed"}' >"$OUT/torchvision.json"
    nvidia-smi 2>&1 | tee -a "$OUT/nvidia-smi.txt" || true
    python3 - "$OUT" "${failed[*]:-}" <<'PY'
import json, sys, os
out, failed = sys.argv[1], sys.argv[2].split()
res = {"failed_tests": failed}
for k in ["bench-decode", "bench-decode-all", "bench-pipeline", "bench-pipeline-all", "torchvision"]:
    try:
        res[k] = json.load(open(os.path.join(out, k + ".json")))
    except Exception as e:  # keep going: the log has the rest
        res[k] = {"error": str(e)}
def rate(j, backend, key="images_per_s"):
    for r in j.get("results", []):
        if r.get("backend") == backend:
            return r.get(key)
tv = res["torchvision"]
dec, pipe = rate(res["bench-decode"], "cuda"), rate(res["bench-pipeline"], "cuda")
summary = {
    "cuda_decode_images_per_s": dec,
    "cuda_decode_hardware_all_images_per_s": rate(res["bench-decode-all"], "cuda"),
    "cuda_pipeline_hardware_all_images_per_s": rate(res["bench-pipeline-all"], "cuda"),
    "torchvision_decode_images_per_s": tv.get("decode", {}).get("images_per_s"),
    "cuda_pipeline_images_per_s": pipe,
    "torchvision_train_images_per_s": tv.get("train", {}).get("images_per_s"),
}
if dec and summary["torchvision_decode_images_per_s"]:
    summary["decode_ratio_vs_torchvision"] = dec / summary["torchvision_decode_images_per_s"]
res["summary"] = summary
json.dump(res, open(os.path.join(out, "results.json"), "w"), indent=1)
print(json.dumps(summary, indent=1))
PY
    rm -f "$OUT"/bench-*.json "$OUT/torchvision.json"
    echo "== done in $((SECONDS - t0)) s"
    [ ${#failed[@]} -eq 0 ]
}

case "${1:-}" in
    build) build ;;
    run) run ;;
    *) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
