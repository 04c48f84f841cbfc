#!/usr/bin/env bash
# The GPU check, in two halves. The helpers (packing, the environment probe, step records,
# results.json) are in scripts/device_check.py: Python's standard library only.
#
#   scripts/device-check.sh build   (on a build machine, no GPU needed)
#       Builds what must run on the GPU machine into .device-pkg/ (ignored by git):
#       python/ (the package's release wheel and pytest's wheels),
#       bin.tar.xz (gzip where Python lacks lzma) holding bin/ (the release `stoker`
#       binary and the test executables of TESTS below, stripped) and lib/ (libnvjpeg.so.13
#       from the pinned nvidia-nvjpeg wheel in .venv-cuda, when there); the photos and the
#       script that make the 2000-image benchmark set (from $STOKER_CORPUS, default
#       ../shared/corpus); and into .gl/ the Vulkan loader package for wgpu there. Then it
#       checks that what travels (the working tree, .device-pkg, .gl) stays under
#       CARRY_LIMIT_MIB (the limit is 64 MiB), dropping photos (largest first) until it
#       does, and prints the size. Carry .device-pkg and .gl to the GPU machine.
#
#   scripts/device-check.sh run     (on the GPU machine, from the repository root)
#       Needs no Rust, no network and no xz there: python3, and the card's driver.
#       In this order, each step under `timeout`:
#         probe       nvidia-smi (-q, the GPU's name, driver and memory), the package,
#                     the Vulkan loader, the libraries found (driver API, NVRTC and the PTX
#                     ISA it writes, nvJPEG) with their versions, python/torch/torchvision
#         tests       kernels_compile, nvjpeg_load, cuda_backend (one thread: it measures
#                     free device memory), device_pipeline, pipeline, shutdown,
#                     wgpu_kernels (STOKER_REQUIRE_WGPU=1, the card's Vulkan driver), with
#                     STOKER_REQUIRE_CUDA/NVRTC/NVJPEG=1; the Python package's pytest suite
#                     (python/tests: the CUDA DLPack hand-off and stream ordering with torch)
#                     from the carried wheel, in a virtual environment over the machine's
#                     torch
#         benchmarks  the 2000-image set (make_bench_set.py; tests/data/samples if it
#                     cannot be made), `stoker bench decode --backend cpu,cuda,wgpu`,
#                     `bench pipeline --backend cuda,cpu`, both again with --hardware all,
#                     torchvision's GPU decode (scripts/bench_torchvision_gpu.py) on the
#                     same files, then the same files with restart markers (`stoker
#                     convert --to folder`): bench decode with the GPU entropy path and
#                     with host entropy decoding (--entropy host), bench pipeline, CUDA
#                     and wgpu, engines off; the Python pipeline (CUDA) against the
#                     DataLoader (scripts/bench_python.py); `nvidia-smi dmon -s puc` in the background
#         rest        compute-sanitizer memcheck and racecheck over one test each (MEMCHECK_*,
#                     RACECHECK_* below), device_memory on the card's Vulkan driver,
#                     nvidia-smi after
#       stoker's own steps run with the carried lib/ first on LD_LIBRARY_PATH (then
#       $CUDA_HOME/lib64, default /usr/local/cuda: the machine's NVRTC), STOKER_LOG=info
#       (every fallback is in the log) and VK_DRIVER_FILES set to the NVIDIA ICD;
#       torchvision keeps the machine's environment and its own CUDA libraries.
#
# What $OUT gets (default /tmp/stoker-device-check):
#   steps.jsonl        one JSON line per step, written as each one ends:
#                      {"step", "rc", "seconds", "reason", "status", "phase", "limit_s", "log"}
#                      rc is the exit status, or null for a step that did not run; status is
#                      ok | failed | skipped | cut; reason says why in a few words
#                      ("skipped: no GPU (nvidia-smi not found)", "cut: deadline",
#                      "cut by the deadline after 40 s", "2 failed: a, b", ...)
#   results.json       rewritten after every step (a killed run still leaves it): the steps,
#                      failed_steps / cut_steps / skipped_steps / ok_steps, versions (driver,
#                      NVRTC, PTX ISA, nvJPEG), environment, benchmarks (each report as
#                      printed), summary (images/s and the ratio to torchvision), figures;
#                      "complete": true once the run got to its end, "running": the
#                      step under way while one is
#   figures/           STOKER_CHECK_OUT for every stoker test step: a test that measures
#                      something writes NAME.json there (kernels.json, nvjpeg.json, ...);
#                      each file is in results.json under "figures" with its stem as key
#                      (the sanitizer runs get sanitizer/memcheck/ and sanitizer/racecheck/:
#                      figures under a sanitizer are not kept)
#   logs/STEP.log      each step's output; device-check.log: this script's own output
#   bench/STEP.json    each benchmark's report; env/*.json: the probes' findings
#   nvidia-smi-q.txt, nvidia-smi.txt, gpu.csv, dmon.txt
#
# Time: a deadline from the start, STOKER_CHECK_DEADLINE seconds (default 510). Each step
# runs under `timeout` for min(its own cap, the time left to its phase): the tests end by
# 55% of the deadline, the benchmarks by 80%, the rest by 100%, so a hung test cannot
# take the benchmarks' time. A step whose time is gone is recorded "cut: deadline"
# (rc null); one stopped by it, "cut by the deadline" (rc 124); one that does not end even
# when killed is left behind ABANDON_AFTER (15) s after its limit. The run then takes at
# most the deadline, those 15 s and a few more for the records: under 9 minutes.
#
# Exit status: 0 when the run completed, whatever the steps gave (failed_steps in
# results.json says which failed; with no GPU every GPU step is recorded as skipped, with
# the reason). STOKER_CHECK_STRICT=1: 1 when a step failed or was cut, or there was no GPU.
# STOKER_CHECK_NO_GPU=1 treats the machine as having no GPU (a dry run of the machinery);
# STOKER_CHECK_SLEEP=N adds a first step that sleeps N s (to check the deadline);
# STOKER_DEVICE_CHECK_IMAGES=DIR benchmarks DIR instead of the 2000-image set;
# STOKER_CHECK_PKG=DIR reads the package from DIR instead of .device-pkg.
# (tests/suite/device_check_dry.rs runs all this on a machine without a GPU.)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

PKG=${STOKER_CHECK_PKG:-.device-pkg}
HELPER=scripts/device_check.py
# What travels to the GPU machine may be 64 MiB; build keeps a margin.
CARRY_LIMIT_MIB=60
# The test executables built for the GPU machine (run runs them in this order, and
# device_memory in the rest).
TESTS=(kernels_compile nvjpeg_load cuda_backend cuda_hardware device_pipeline pipeline shutdown wgpu_kernels device_memory)
# Each step's own cap, in seconds.
declare -A CAP=(
    [kernels_compile]=60 [nvjpeg_load]=60 [cuda_backend]=150 [cuda_hardware]=90 [device_pipeline]=120
    [pipeline]=90 [shutdown]=60 [wgpu_kernels]=90 [device_memory]=90
    [bench_set]=150 [bench_decode]=120 [bench_decode_hw_all]=60 [bench_pipeline]=120
    [bench_pipeline_hw_all]=60 [torchvision]=120 [sanitizer]=90
    [restart_set]=60 [bench_decode_entropy]=90 [bench_decode_entropy_host]=60
    [bench_pipeline_entropy]=90 [python_package]=150 [bench_python]=120
)
# The sanitizer runs: a test executable and a libtest filter (a substring of test names).
MEMCHECK_TEST=cuda_backend
MEMCHECK_FILTER=hybrid
RACECHECK_TEST=cuda_backend
RACECHECK_FILTER=batches_arrive_on_the_callers_stream
# Seconds after a step's limit at which a step that did not end even when killed is left
# behind (see step).
ABANDON_AFTER=15
# The benchmark set: made once per machine, reused by a later run there.
BENCH_SET=/tmp/stoker-bench2000

# ---------------------------------------------------------------------------- build

build() (
    set -euo pipefail
    local corpus=${STOKER_CORPUS:-../shared/corpus}
    rm -rf "$PKG"
    mkdir -p "$PKG/bin" "$PKG/lib" "$PKG/photos"
    echo "== release binary"
    cargo build --release --locked --bin stoker --message-format=json-render-diagnostics \
        | python3 "$HELPER" collect "$PKG/bin"
    echo "== test executables"
    local args=()
    for t in "${TESTS[@]}"; do args+=(--test "$t"); done
    cargo test --release --locked --no-run --message-format=json-render-diagnostics "${args[@]}" \
        | python3 "$HELPER" collect "$PKG/bin"
    strip "$PKG"/bin/* 2>/dev/null || true
    # nvJPEG from the pinned wheel (scripts/test.sh installs it): 6 MB, self-contained, so
    # the check does not depend on the machine's toolkit having it. NVRTC stays the
    # machine's own (the wheel's is 109 MB).
    local nvjpeg
    nvjpeg=$(compgen -G ".venv-cuda/lib/python3*/site-packages/nvidia/cu13/lib/libnvjpeg.so.13" | head -n 1 || true)
    if [ -n "$nvjpeg" ]; then
        cp "$nvjpeg" "$PKG/lib/"
    else
        echo "warning: no libnvjpeg.so.13 in .venv-cuda (scripts/test.sh installs it): the machine's own nvJPEG will be used"
    fi
    echo "== packing"
    python3 "$HELPER" pack "$PKG/bin" "$PKG" bin lib
    rm -rf "${PKG:?}/bin" "${PKG:?}/lib"
    # The Python package: the release wheel (stripped), and pytest's wheels for a machine
    # without it (pure Python, a few hundred KiB; no network there).
    echo "== Python wheel"
    mkdir -p "$PKG/python"
    if ! .venv-py/bin/pip freeze 2>/dev/null | grep -qx "maturin==1.16.0"; then
        rm -rf .venv-py && python3 -m venv .venv-py && .venv-py/bin/pip install --quiet maturin==1.16.0
    fi
    .venv-py/bin/maturin build --quiet --release --locked -m python/Cargo.toml -o "$PKG/python"
    .venv-py/bin/pip download --quiet --only-binary=:all: --dest "$PKG/python" pytest==9.2.0 ||
        echo "warning: could not fetch pytest's wheels; the Python step needs pytest on the GPU machine"
    echo "== benchmark photos"
    if [ -d "$corpus/photos" ]; then
        cp "$corpus"/photos/* "$PKG/photos/"
        cp "$corpus/make_bench_set.py" "$PKG/"
    else
        echo "warning: $corpus/photos not found (STOKER_CORPUS names the corpus): the benchmarks will run on tests/data/samples"
    fi
    # wgpu on the GPU machine needs the Vulkan loader, which its image may lack.
    if [ ! -d .gl ] && command -v apt-get >/dev/null 2>&1; then
        echo "== Vulkan loader package"
        mkdir -p .gl /tmp/amd64/partial
        local o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64)
        if ! { apt-get "${o[@]}" update -qq && (cd .gl && apt-get "${o[@]}" download libvulkan1 >/dev/null); }; then
            echo "warning: could not fetch libvulkan1; wgpu will use the machine's loader, if any"
            rm -rf .gl
        fi
    fi
    echo "== carry size"
    python3 "$HELPER" carry --limit-mib "$CARRY_LIMIT_MIB" --pkg "$PKG" --also .gl
    echo "carry: $PKG .gl   command: bash scripts/device-check.sh run"
)

# ---------------------------------------------------------------------------- run

# NOW_MS: milliseconds since the epoch.
now_ms() {
    if [ -n "${EPOCHREALTIME:-}" ]; then
        local t=${EPOCHREALTIME/[.,]/}
        NOW_MS=$((10#$t / 1000))
    else
        NOW_MS=$(($(date +%s%N) / 1000000))
    fi
}

# phase NAME PERCENT: the steps that follow end by PERCENT% of the deadline.
phase() {
    PHASE=$1
    PHASE_END_S=$((DEADLINE * $2 / 100))
    PHASE_END_MS=$((T0_MS + DEADLINE * $2 * 10))
    echo "== phase $PHASE (until ${PHASE_END_S} s)"
}

rec() { "$PY" -S "$HELPER" record "$OUT" --phase "$PHASE" --phase-end "$PHASE_END_S" "$@"; }

# note NAME REASON: a step that did not run (once the phase is over: "cut: deadline").
note() {
    now_ms
    if [ "$NOW_MS" -ge "$PHASE_END_MS" ]; then
        rec --name "$1" --rc null --reason "cut: deadline (the $PHASE phase ended at ${PHASE_END_S} s)"
    else
        rec --name "$1" --rc null --reason "$2"
    fi
}

# step NAME CAP KIND [--gpu] [--needs FILE] [--missing WHY] [--filter F] [--stdout FILE]
#      [--reason R] -- CMD...
#   Runs CMD under timeout for min(CAP, the time left to the phase) and records it. KIND:
#   cmd, test (libtest output), bench (a JSON report on stdout), sanitizer. --gpu: needs
#   the GPU; --needs: needs FILE (an executable of the package); --missing: cannot run,
#   for WHY. Returns CMD's status, or 1 when it did not run.
step() {
    local name=$1 cap=$2 kind=$3 gpu=0 needs="" missing="" filter="" stdout="" reason=""
    shift 3
    while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
        case $1 in
            --gpu) gpu=1; shift ;;
            --needs) needs=$2; shift 2 ;;
            --missing) missing=$2; shift 2 ;;
            --filter) filter=$2; shift 2 ;;
            --stdout) stdout=$2; shift 2 ;;
            --reason) reason=$2; shift 2 ;;
            *) echo "step $name: unknown option $1" >&2; return 2 ;;
        esac
    done
    shift
    now_ms
    local t=$NOW_MS left=$(((PHASE_END_MS - NOW_MS) / 1000))
    if [ "$left" -lt 1 ]; then
        rec --name "$name" --rc null --reason "cut: deadline (the $PHASE phase ended at ${PHASE_END_S} s)"
        return 1
    fi
    local why=()
    if [ "$gpu" = 1 ] && [ "$GPU" != 1 ]; then why+=("no GPU ($NO_GPU_REASON)"); fi
    if [ -n "$needs" ] && [ ! -x "$needs" ]; then
        if [ -z "$BIN" ]; then why+=("no package ($PKG_REASON)"); else why+=("${needs##*/} is not in the package"); fi
    fi
    if [ -n "$missing" ]; then why+=("$missing"); fi
    if [ ${#why[@]} -gt 0 ]; then
        local joined=${why[0]} w
        for w in "${why[@]:1}"; do joined+="; $w"; done
        note "$name" "skipped: $joined"
        return 1
    fi
    local limit=$((cap < left ? cap : left)) log="$OUT/logs/$name.log"
    echo "== $name (up to $limit s)"
    # results.json names the step under way: a run killed now still says where it was.
    "$PY" -S "$HELPER" set "$OUT" running "{\"step\": \"$name\", \"at_s\": $(((NOW_MS - T0_MS) / 1000)), \"limit_s\": $limit}"
    # timeout sends TERM at the limit and KILL 5 s later. A process that even KILL does not
    # end (stuck in the driver) is left behind when a watchdog signals this script
    # ABANDON_AFTER s after the limit: wait returns, and the check goes on.
    if [ -n "$stdout" ]; then
        timeout -k 5 "$limit" "$@" >"$stdout" 2>"$log" </dev/null &
    else
        timeout -k 5 "$limit" "$@" >"$log" 2>&1 </dev/null &
    fi
    local pid=$! rc
    ABANDONED=0
    (
        trap 'kill "$s" 2>/dev/null; exit 0' TERM
        sleep $((limit + ABANDON_AFTER)) &
        s=$!
        wait "$s" && kill -USR1 $$
    ) &
    local dog=$!
    wait "$pid"
    rc=$?
    kill "$dog" 2>/dev/null
    wait "$dog" 2>/dev/null
    if [ "$ABANDONED" = 1 ]; then
        rc=137 reason="abandoned: still running $ABANDON_AFTER s after its limit of $limit s, though killed"
        echo "$reason" >>"$log"
    fi
    now_ms
    rec --name "$name" --rc "$rc" --ms $((NOW_MS - t)) --limit "$limit" --cap "$cap" \
        --kind "$kind" --filter "$filter" --log "$log" --stdout "$stdout" --reason "$reason"
    if [ "$rc" != 0 ]; then tail -n 12 "$log" | awk '{ print "   | " $0 }'; fi
    return "$rc"
}

probe_gpu() {
    if ! nvidia-smi -q >"$OUT/nvidia-smi-q.txt" 2>&1; then
        tail -n 3 "$OUT/nvidia-smi-q.txt"
        return 1
    fi
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$OUT/gpu.csv" || return
    nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1
    cat "$OUT/gpu.csv"
}

# The .deb files of .gl, unpacked under $WORK/gl (dpkg-deb where there is one).
vulkan_loader() {
    local f
    for f in .gl/*.deb; do
        if command -v dpkg-deb >/dev/null 2>&1; then
            dpkg-deb -x "$f" "$WORK/gl" || return
        else
            python3 "$HELPER" deb "$f" "$WORK/gl" || return
        fi
    done
    find "$WORK/gl" -name 'libvulkan.so*'
}

# The sanitizer, on PATH or in the CUDA toolkit.
find_sanitizer() {
    command -v compute-sanitizer 2>/dev/null && return
    local d
    for d in "$CUDA_HOME/bin" /usr/local/cuda/bin; do
        if [ -x "$d/compute-sanitizer" ]; then echo "$d/compute-sanitizer"; return; fi
    done
    return 1
}

run() {
    OUT=${OUT:-/tmp/stoker-device-check}
    mkdir -p "$OUT" || exit 2
    OUT=$(cd "$OUT" && pwd)
    rm -rf "$OUT/logs" "$OUT/figures" "$OUT/bench" "$OUT/env" "$OUT/sanitizer"
    rm -f "$OUT/steps.jsonl" "$OUT/results.json" "$OUT/gpu.csv" "$OUT/nvidia-smi-q.txt" "$OUT/dmon.txt"
    mkdir -p "$OUT/logs" "$OUT/figures" "$OUT/bench" "$OUT/env"
    : >"$OUT/steps.jsonl"
    exec > >(tee "$OUT/device-check.log") 2>&1
    DEADLINE=${STOKER_CHECK_DEADLINE:-510}
    if ! [[ $DEADLINE =~ ^[0-9]+$ ]]; then
        echo "warning: STOKER_CHECK_DEADLINE=$DEADLINE is not a number of seconds: 510"
        DEADLINE=510
    fi
    now_ms
    T0_MS=$NOW_MS
    # The helpers' interpreter, resolved once (a launcher shim costs time on every call).
    PY=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) || PY=python3
    local strict=()
    [ "${STOKER_CHECK_STRICT:-0}" = 1 ] && strict=(--strict)
    "$PY" -S "$HELPER" start "$OUT" --deadline "$DEADLINE" "${strict[@]}"
    echo "== $(date -u +%FT%TZ) device check: deadline $DEADLINE s, results in $OUT"
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/stoker-device-check.XXXXXX")
    DMON=""
    trap 'if [ -n "$DMON" ]; then kill "$DMON" 2>/dev/null; fi; rm -rf "$WORK"' EXIT
    trap 'exit 143' TERM INT
    trap 'ABANDONED=1' USR1
    export OUT WORK HELPER
    export -f probe_gpu vulkan_loader
    CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
    GPU=0 NO_GPU_REASON="" BIN="" PKG_REASON=""

    # ------------------------------------------------------------ probe
    if [[ ${STOKER_CHECK_SLEEP:-} =~ ^[0-9]+$ ]]; then
        phase selftest 100
        step sleep $((STOKER_CHECK_SLEEP + 10)) cmd -- sleep "$STOKER_CHECK_SLEEP"
    fi
    phase probe 55
    if [ "${STOKER_CHECK_NO_GPU:-0}" = 1 ]; then
        NO_GPU_REASON="STOKER_CHECK_NO_GPU=1"
        note probe_gpu "skipped: no GPU ($NO_GPU_REASON)"
    elif ! command -v nvidia-smi >/dev/null 2>&1; then
        NO_GPU_REASON="nvidia-smi not found"
        note probe_gpu "skipped: no GPU ($NO_GPU_REASON)"
    elif step probe_gpu 60 cmd -- bash -c probe_gpu; then
        GPU=1
    else
        if [ -s "$OUT/logs/probe_gpu.log" ]; then
            NO_GPU_REASON="nvidia-smi failed: $(tail -n 1 "$OUT/logs/probe_gpu.log" | cut -c1-160)"
        else
            NO_GPU_REASON="nvidia-smi did not run or said nothing (the probe_gpu step says why)"
        fi
    fi
    "$PY" -S "$HELPER" set "$OUT" gpu "$([ "$GPU" = 1 ] && echo true || echo false)"
    [ -n "$NO_GPU_REASON" ] && "$PY" -S "$HELPER" set "$OUT" no_gpu_reason "$NO_GPU_REASON"

    local archive
    archive=$(compgen -G "$PKG/bin.tar.*" | head -n 1)
    if [ -z "$archive" ]; then
        PKG_REASON="$PKG/bin.tar.xz not found: run scripts/device-check.sh build first"
        note unpack "skipped: no package ($PKG_REASON)"
    elif step unpack 90 cmd -- python3 "$HELPER" unpack "$archive" "$WORK" && [ -d "$WORK/bin" ]; then
        BIN=$WORK/bin
    else
        PKG_REASON="$archive could not be unpacked"
    fi
    if compgen -G ".gl/*.deb" >/dev/null; then
        step vulkan_loader 30 cmd -- bash -c vulkan_loader
    else
        note vulkan_loader "skipped: no .gl/*.deb (build fetches libvulkan1): the machine's own loader, if any"
    fi
    step probe_libraries 60 cmd -- \
        python3 "$HELPER" probe "$OUT" --carried-lib "$WORK/lib" --cuda-home "$CUDA_HOME"
    step probe_python 90 cmd -- python3 "$HELPER" probe-python "$OUT"

    # stoker's steps: the carried nvJPEG first, the machine's NVRTC, the Vulkan loader
    # carried in .gl, the NVIDIA ICD; figures into $OUT/figures.
    local icd="${VK_DRIVER_FILES:-}" f
    if [ -z "$icd" ]; then
        for f in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
            /etc/vulkan/icd.d/nvidia_icd.json; do
            if [ -f "$f" ]; then icd=$f; break; fi
        done
    fi
    local ld="$WORK/lib:$CUDA_HOME/lib64:$CUDA_HOME/lib:$WORK/gl/usr/lib/x86_64-linux-gnu"
    local senv=(env "LD_LIBRARY_PATH=$ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "CUDA_HOME=$CUDA_HOME"
        STOKER_LOG=info "STOKER_CHECK_OUT=$OUT/figures" STOKER_REQUIRE_CUDA=1 STOKER_REQUIRE_NVRTC=1
        STOKER_REQUIRE_NVJPEG=1 "STOKER_TEST_DATA=$PWD/tests/data" RUST_BACKTRACE=1)
    [ -n "$icd" ] && senv+=("VK_DRIVER_FILES=$icd")

    # ------------------------------------------------------------ tests
    phase tests 55
    local t threads wgpu
    for t in "${TESTS[@]}"; do
        [ "$t" = device_memory ] && continue # in the rest
        threads=4 wgpu=()
        [ "$t" = cuda_backend ] && threads=1 # it measures free device memory
        [ "$t" = wgpu_kernels ] && wgpu=(STOKER_REQUIRE_WGPU=1)
        step "$t" "${CAP[$t]}" test --gpu --needs "$BIN/$t" -- \
            "${senv[@]}" "${wgpu[@]}" "$BIN/$t" --test-threads="$threads" --nocapture
    done

    # The Python package on the card: its pytest suite (the torch hand-off on CUDA and
    # stream ordering among it) in a virtual environment over the machine's torch.
    local pyenv="$WORK/pyenv" nowheel=()
    compgen -G "$PKG/python/stoker-*.whl" >/dev/null ||
        nowheel=(--missing "no wheel in $PKG/python (scripts/device-check.sh build makes it)")
    step python_package "${CAP[python_package]}" cmd --gpu "${nowheel[@]}" -- \
        bash -c 'python3 -m venv --system-site-packages "$1" &&
            "$1/bin/pip" install --quiet --no-index --find-links "$2" stoker pytest &&
            cd python/tests && "${@:3}" "$1/bin/python" -m pytest -q -rs -p no:cacheprovider .' \
        _ "$pyenv" "$PKG/python" "${senv[@]}"

    # ------------------------------------------------------------ benchmarks
    phase benchmarks 80
    local images=tests/data/samples fallback=""
    if [ -n "${STOKER_DEVICE_CHECK_IMAGES:-}" ]; then
        images=$STOKER_DEVICE_CHECK_IMAGES
        note bench_set "skipped: STOKER_DEVICE_CHECK_IMAGES=$images"
    elif [ -f "$BENCH_SET/.complete" ]; then
        images=$BENCH_SET
        rec --name bench_set --rc 0 --reason "reused $BENCH_SET from an earlier run"
    elif [ ! -f "$PKG/make_bench_set.py" ]; then
        fallback="no $PKG/make_bench_set.py (the corpus was missing at build)"
        note bench_set "skipped: $fallback"
    elif rm -rf "$BENCH_SET.tmp" && step bench_set "${CAP[bench_set]}" cmd --gpu -- \
        python3 "$PKG/make_bench_set.py" "$PKG/photos" "$BENCH_SET.tmp" -n 2000 -j "$(nproc)" &&
        rm -rf "$BENCH_SET" && mv "$BENCH_SET.tmp" "$BENCH_SET" && touch "$BENCH_SET/.complete"; then
        images=$BENCH_SET
    else
        fallback="the benchmark set was not made (the bench_set step says why)"
    fi
    "$PY" -S "$HELPER" bench-images "$OUT" "$images" "$fallback"

    # Engine use (the jpg and dec columns: nvJPEG's hardware engines) during the
    # benchmarks, never past the phase's end.
    local dmon_s
    now_ms
    dmon_s=$(((PHASE_END_MS - NOW_MS) / 1000))
    if [ "$GPU" = 1 ] && [ "$dmon_s" -ge 1 ]; then
        timeout "$dmon_s" nvidia-smi dmon -s puc -o T >"$OUT/dmon.txt" 2>&1 &
        DMON=$!
    fi
    local s="$BIN/stoker" b
    b=(--images "$images" --batch 256 --json)
    step bench_decode "${CAP[bench_decode]}" bench --gpu --needs "$s" --stdout "$OUT/bench/bench_decode.json" -- \
        "${senv[@]}" "$s" bench decode --backend cpu,cuda,wgpu "${b[@]}"
    step bench_decode_hw_all "${CAP[bench_decode_hw_all]}" bench --gpu --needs "$s" \
        --stdout "$OUT/bench/bench_decode_hw_all.json" -- \
        "${senv[@]}" "$s" bench decode --backend cuda --hardware all "${b[@]}"
    b+=(--size 224 --dtype f16 --epochs 3)
    step bench_pipeline "${CAP[bench_pipeline]}" bench --gpu --needs "$s" \
        --stdout "$OUT/bench/bench_pipeline.json" -- \
        "${senv[@]}" "$s" bench pipeline --backend cuda,cpu "${b[@]}"
    step bench_pipeline_hw_all "${CAP[bench_pipeline_hw_all]}" bench --gpu --needs "$s" \
        --stdout "$OUT/bench/bench_pipeline_hw_all.json" -- \
        "${senv[@]}" "$s" bench pipeline --backend cuda --hardware all "${b[@]}"
    # The peer: the machine's own environment and CUDA libraries, not stoker's.
    step torchvision "${CAP[torchvision]}" bench --gpu --stdout "$OUT/bench/torchvision.json" -- \
        python3 scripts/bench_torchvision_gpu.py "$images" --batch 256 --seconds 15
    # The Python package's pipeline against torch's DataLoader on the same files.
    [ -x "$pyenv/bin/python" ] || nowheel=(--missing "the python_package step made no environment")
    step bench_python "${CAP[bench_python]}" cmd --gpu "${nowheel[@]}" -- \
        "${senv[@]}" "$pyenv/bin/python" scripts/bench_python.py --images "$images" --backend cuda \
        --batch 256 --rounds 3 --workers 8 --json "$OUT/bench/python.json"
    # The same files with restart markers (`stoker convert --to folder`, lossless): the
    # GPU entropy path against host entropy decoding and the engines, CUDA and wgpu.
    local rst="$WORK/bench-rst"
    if rm -rf "$rst" && step restart_set "${CAP[restart_set]}" cmd --gpu --needs "$s" -- \
        "$s" convert "$images" --to folder --out "$rst" --json; then
        b=(--images "$rst" --batch 256 --json)
        step bench_decode_entropy "${CAP[bench_decode_entropy]}" bench --gpu --needs "$s" \
            --stdout "$OUT/bench/bench_decode_entropy.json" -- \
            "${senv[@]}" "$s" bench decode --backend cuda,wgpu --hardware off "${b[@]}"
        step bench_decode_entropy_host "${CAP[bench_decode_entropy_host]}" bench --gpu --needs "$s" \
            --stdout "$OUT/bench/bench_decode_entropy_host.json" -- \
            "${senv[@]}" "$s" bench decode --backend cuda,wgpu --hardware off --entropy host "${b[@]}"
        b+=(--size 224 --dtype f16 --epochs 3)
        step bench_pipeline_entropy "${CAP[bench_pipeline_entropy]}" bench --gpu --needs "$s" \
            --stdout "$OUT/bench/bench_pipeline_entropy.json" -- \
            "${senv[@]}" "$s" bench pipeline --backend cuda,wgpu --hardware off "${b[@]}"
    fi
    if [ -n "$DMON" ]; then
        kill "$DMON" 2>/dev/null
        wait "$DMON" 2>/dev/null
        DMON=""
        rec --name dmon --rc 0 --reason "$(grep -cv '^#' "$OUT/dmon.txt") samples during the benchmarks (dmon.txt)"
    elif [ "$GPU" = 1 ]; then
        note dmon "cut: deadline (the $PHASE phase ended at ${PHASE_END_S} s)"
    else
        note dmon "skipped: no GPU ($NO_GPU_REASON)"
    fi

    # ------------------------------------------------------------ rest
    phase rest 100
    # Their figures go to sanitizer/, not figures/: times under a sanitizer mean nothing.
    local san nosan=""
    san=$(find_sanitizer) || nosan="compute-sanitizer not on PATH or in $CUDA_HOME/bin"
    step memcheck "${CAP[sanitizer]}" sanitizer --gpu --needs "$BIN/$MEMCHECK_TEST" --missing "$nosan" \
        --filter "$MEMCHECK_FILTER" -- \
        "${senv[@]}" "STOKER_CHECK_OUT=$OUT/sanitizer/memcheck" "$san" --tool memcheck --error-exitcode 86 \
        "$BIN/$MEMCHECK_TEST" --test-threads=1 --nocapture "$MEMCHECK_FILTER"
    step racecheck "${CAP[sanitizer]}" sanitizer --gpu --needs "$BIN/$RACECHECK_TEST" --missing "$nosan" \
        --filter "$RACECHECK_FILTER" -- \
        "${senv[@]}" "STOKER_CHECK_OUT=$OUT/sanitizer/racecheck" "$san" --tool racecheck --error-exitcode 86 \
        "$BIN/$RACECHECK_TEST" --test-threads=1 --nocapture "$RACECHECK_FILTER"
    step device_memory "${CAP[device_memory]}" test --gpu --needs "$BIN/device_memory" -- \
        "${senv[@]}" STOKER_REQUIRE_WGPU=1 "$BIN/device_memory" --test-threads=1 --nocapture
    # shellcheck disable=SC2016 # $OUT is expanded by that bash (exported)
    step nvidia_smi_after 20 cmd --gpu -- bash -c 'nvidia-smi | tee -a "$OUT/nvidia-smi.txt"'

    now_ms
    echo "== done in $(((NOW_MS - T0_MS) / 1000)) s"
    "$PY" -S "$HELPER" summarise "$OUT" --final
}

case "${1:-}" in
    build) build ;;
    run) run ;;
    *)
        echo "usage: $0 build|run" >&2
        exit 2
        ;;
esac
