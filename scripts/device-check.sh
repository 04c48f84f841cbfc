#!/usr/bin/env bash
# The GPU check, in two halves. The helpers (packing, the environment probe, step records,
# results.json, what comes back) are in scripts/device_check.py: Python's standard library only.
#
#   scripts/device-check.sh build   (on a build machine, no GPU needed)
#       Builds what must run on the GPU machine into .device-pkg/ (ignored by git):
#       python/ (the package's release wheel, its tags checked against CPython 3.12 on
#       x86-64 Linux, and pytest's wheels), bin.tar.xz (gzip where Python lacks lzma)
#       holding bin/ (the release `stoker` binary and the test executables of TESTS below,
#       stripped) and lib/ (libnvjpeg.so.13 from the pinned nvidia-nvjpeg wheel in
#       .venv-cuda, when there); the photos and the script that make the 2000-image
#       benchmark set (from $STOKER_CORPUS, default ../shared/corpus); and into .gl/ the
#       Vulkan loader package for wgpu there. Then it checks that what travels (the working
#       tree, .device-pkg, .gl) stays under CARRY_LIMIT_MIB (the limit is 64 MiB), dropping
#       photos (largest first) until it does, and prints the size. Carry .device-pkg and .gl.
#
#   scripts/device-check.sh run [--only STEP,...]   (on the GPU machine, repository root)
#       Needs no Rust, no network and no xz there: the machine's own python3 and the card's
#       driver. The steps, most valuable first, each under `timeout`:
#         sanity      (by 20% of the deadline) nvidia-smi and `ldd --version`, the package,
#                     the libraries (driver API, NVRTC and its PTX ISA, nvJPEG), python and
#                     torch; then: every kernel compiles (kernels_compile), nvJPEG decodes
#                     like the CPU (nvjpeg_load), engine batches of many sizes against the
#                     CPU decode (cuda_hardware), device Huffman decoding of restart-marked
#                     JPEGs against the CPU (device_pipeline)
#         key         (by 70%) the 2000-image set; `bench decode` CPU against CUDA and
#                     torchvision's batched decode_jpeg(device="cuda") on the same files;
#                     the same files with restart markers (`stoker convert --to folder`)
#                     through the engines (--hardware all) and through device Huffman
#                     (--hardware off); the RRC-224 f16 pipeline at batch 256 on CUDA and
#                     the CPU from the loose files and, on CUDA, from tar shards of the
#                     transcoded files; `nvidia-smi dmon -s puc` in the background
#         tests       (by 92%) the Python package from the carried wheels (pip --target,
#                     PYTHONPATH: the machine's torch stays visible) and its pytest suite,
#                     which must find torch; the test executables in full; the Python
#                     pipeline against the DataLoader (scripts/bench_python.py)
#         sanitizer   (to the end) compute-sanitizer, tried first (--version); memcheck and
#                     racecheck over one test each (MEMCHECK_*, RACECHECK_* below)
#       stoker's own steps run with the carried lib/ first on LD_LIBRARY_PATH (then
#       $CUDA_HOME/lib64, default /usr/local/cuda: the machine's NVRTC), STOKER_LOG=info
#       (every fallback is in the log), VK_DRIVER_FILES set to the NVIDIA ICD and
#       STOKER_KERNEL_CACHE set to one folder: the kernels are compiled once for the run.
#       torchvision keeps the machine's environment and its own CUDA libraries.
#       --only STEP,...: only those steps (and what they need: the probes, the package,
#       the image sets, the Python install), e.g. to rerun what failed.
#
# What $OUT gets (default /tmp/stoker-device-check): four flat files, each rewritten after
# every step (a run killed at any moment loses only the step under way):
#   results.json       the steps, failed_steps / cut_steps / skipped_steps / ok_steps,
#                      versions (driver, NVRTC, PTX ISA, nvJPEG, glibc), environment,
#                      benchmarks (each report as printed), summary (images/s and the ratio
#                      to torchvision), figures (each test's NAME.json, by stem);
#                      "complete": true once the run got to its end, "running": the step
#                      under way while one is
#   steps.jsonl        one JSON line per step: {"step", "rc", "seconds", "reason",
#                      "status", "phase", "limit_s", "log"}; rc is the exit status, or null
#                      for a step that did not run; status is ok | failed | skipped | cut
#   device-check.log   this script's own output
#   results.tar.gz     the whole work folder: logs/STEP.log, bench/, figures/, env/,
#                      sanitizer/, nvidia-smi output, dmon.txt (under 15 MiB: the largest
#                      files are left out, and named in left-out.txt, where it would not be)
# The GPU machine returns at most 8 files of 16 MiB (64 MiB together), flat names only.
#
# Time: a deadline from the start, STOKER_CHECK_DEADLINE seconds (default 480: with the
# records, under 540 s, leaving a 15-minute machine time for its start and a rerun).
# Each step runs under `timeout` for min(its own cap, the time left to its phase). A step
# whose time is gone is recorded "cut: deadline" (rc null); one stopped by it, "cut by the
# deadline" (rc 124); one that does not end even when killed is left behind
# ABANDON_AFTER (15) s after its limit.
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
# The test executables built for the GPU machine.
TESTS=(kernels_compile nvjpeg_load cuda_backend cuda_hardware device_pipeline pipeline shutdown wgpu_kernels device_memory)
# Each step's own cap, in seconds.
declare -A CAP=(
    [kernels_compile]=60 [nvjpeg_load]=45 [cuda_backend]=90 [cuda_hardware]=60 [device_pipeline]=90
    [pipeline]=60 [shutdown]=45 [wgpu_kernels]=60 [device_memory]=60
    [sanity_kernels]=30 [sanity_nvjpeg]=30 [sanity_engine_batch]=40 [sanity_device_huffman]=40 [sanity_device_sync]=40
    [bench_set]=90 [bench_decode]=60 [torchvision]=60 [restart_set]=45
    [bench_decode_rst_engines]=40 [bench_decode_rst_device_huffman]=40
    [bench_pipeline]=75 [shards_set]=30 [bench_pipeline_shards]=45
    [bench_share_half]=30 [bench_share_none]=30
    [python_install]=30 [python_package]=90 [bench_python]=60 [sanitizer]=60
)
# The sanity steps: a test executable and a libtest filter each.
declare -A SANITY=(
    [sanity_kernels]="kernels_compile"
    [sanity_nvjpeg]="nvjpeg_load decodes_like_the_cpu_decoder"
    [sanity_engine_batch]="cuda_hardware many_sizes_in_one_engine_batch"
    [sanity_device_huffman]="device_pipeline jpegs_with_restart_markers_are_huffman_decoded_on_the_device"
    [sanity_device_sync]="device_pipeline baseline_jpegs_without_restart_markers_are_huffman_decoded_on_the_device_by_sync"
)
# The sanitizer runs: a test executable and a libtest filter (a substring of test names).
MEMCHECK_TEST=cuda_hardware
MEMCHECK_FILTER=many_sizes_in_one_engine_batch
RACECHECK_TEST=cuda_backend
RACECHECK_FILTER=batches_arrive_on_the_callers_stream
# Seconds after a step's limit at which a step that did not end even when killed is left
# behind (see step).
ABANDON_AFTER=15
# The benchmark set: made once per machine, reused by a later run there.
BENCH_SET=/tmp/stoker-bench2000
# The wheel must install on this Python there.
TARGET_PYTHON=3.12


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
    .venv-py/bin/pip download --quiet --only-binary=:all: --python-version "$TARGET_PYTHON" \
        --dest "$PKG/python" pytest==9.2.0 ||
        echo "warning: could not fetch pytest's wheels; the Python step needs pytest on the GPU machine"
    # They install there with pip --target on the machine's CPython 3.12, x86-64 Linux.
    python3 "$HELPER" wheel-tags --python "$TARGET_PYTHON" "$PKG"/python/*.whl
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

# The records go to the work folder $RUN; the helper copies them to $OUT after each.
rec() { "$PY" -S "$HELPER" record "$RUN" --phase "$PHASE" --phase-end "$PHASE_END_S" "$@"; }
setf() { "$PY" -S "$HELPER" set "$RUN" "$@"; }

# wanted NAME: whether --only (when given) asks for NAME.
wanted() {
    [ -z "$ONLY" ] && return 0
    case ",$ONLY," in *",$1,"*) return 0 ;; esac
    return 1
}

# wanted_any NAME...: whether --only asks for any of them.
wanted_any() {
    local n
    for n in "$@"; do wanted "$n" && return 0; done
    return 1
}

# note NAME REASON: a step that did not run (once the phase is over: "cut: deadline").
note() {
    wanted "$1" || [ -n "${NEEDED:-}" ] || return 0
    now_ms
    if [ "$NOW_MS" -ge "$PHASE_END_MS" ]; then
        rec --name "$1" --rc null --reason "cut: deadline (the $PHASE phase ended at ${PHASE_END_S} s)"
    else
        rec --name "$1" --rc null --reason "$2"
    fi
}

# step NAME CAP KIND [--gpu] [--needs FILE] [--missing WHY] [--filter F] [--stdout FILE]
#      [--reason R] [--needed] -- CMD...
#   Runs CMD under timeout for min(CAP, the time left to the phase) and records it. KIND:
#   cmd, test (libtest output), bench (a JSON report on stdout), sanitizer. --gpu: needs
#   the GPU; --needs: needs FILE (an executable of the package); --missing: cannot run,
#   for WHY; --needed: runs under --only too (what other steps need). Returns CMD's
#   status, or 1 when it did not run (or was not asked for).
step() {
    local name=$1 cap=$2 kind=$3 gpu=0 needs="" missing="" filter="" stdout="" reason="" NEEDED=""
    shift 3
    while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
        case $1 in
            --gpu) gpu=1; shift ;;
            --needs) needs=$2; shift 2 ;;
            --missing) missing=$2; shift 2 ;;
            --filter) filter=$2; shift 2 ;;
            --stdout) stdout=$2; shift 2 ;;
            --reason) reason=$2; shift 2 ;;
            --needed) NEEDED=1; shift ;;
            *) echo "step $name: unknown option $1" >&2; return 2 ;;
        esac
    done
    shift
    if [ -z "$NEEDED" ] && ! wanted "$name"; then return 1; fi
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
    local limit=$((cap < left ? cap : left)) log="$RUN/logs/$name.log"
    echo "== $name (up to $limit s)"
    # results.json names the step under way: a run killed now still says where it was.
    setf running "{\"step\": \"$name\", \"at_s\": $(((NOW_MS - T0_MS) / 1000)), \"limit_s\": $limit}"
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
    ldd --version 2>&1 | head -n 1 | tee "$RUN/ldd-version.txt"
    if ! nvidia-smi -q >"$RUN/nvidia-smi-q.txt" 2>&1; then
        tail -n 3 "$RUN/nvidia-smi-q.txt"
        return 1
    fi
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$RUN/gpu.csv" || return
    nvidia-smi >"$RUN/nvidia-smi.txt" 2>&1
    cat "$RUN/gpu.csv"
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

# The Python package and pytest's wheels into $WORK/site, for the machine's python3 with
# PYTHONPATH: a virtual environment made from a virtual environment would not see its
# torch. The wheel's tags are checked against this python and glibc first.
python_install() {
    python3 "$HELPER" wheel-tags --python this "$PKG"/python/stoker-*.whl || return
    if python3 -m pip --version >/dev/null 2>&1; then
        python3 -m pip install --quiet --no-deps --no-index --target "$WORK/site" "$PKG"/python/*.whl || return
    else
        echo "no pip for python3: unzipping the wheels"
        python3 "$HELPER" unzip-wheels "$WORK/site" "$PKG"/python/*.whl || return
    fi
    PYTHONPATH="$WORK/site" python3 -c 'import stoker; print("stoker", stoker.__file__)'
}

# The pytest suite: torch must be there (its tests would skip quietly without it).
python_package() {
    if ! python3 -c 'import torch' 2>&1; then
        echo "error: torch is not importable by $(command -v python3): the torch tests cannot run"
        return 3
    fi
    cd python/tests && python3 -m pytest -q -rs -p no:cacheprovider .
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
    ONLY=""
    while [ "$#" -gt 0 ]; do
        case $1 in
            --only) ONLY=$2; shift 2 ;;
            --only=*) ONLY=${1#--only=}; shift ;;
            *) echo "usage: $0 run [--only STEP,...]" >&2; exit 2 ;;
        esac
    done
    OUT=${OUT:-/tmp/stoker-device-check}
    mkdir -p "$OUT" || exit 2
    OUT=$(cd "$OUT" && pwd)
    rm -f "$OUT/steps.jsonl" "$OUT/results.json" "$OUT/results.tar.gz" "$OUT/device-check.log"
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/stoker-device-check.XXXXXX")
    # The work folder: everything the run writes, packed into $OUT/results.tar.gz.
    RUN=$WORK/results
    mkdir -p "$RUN/logs" "$RUN/figures" "$RUN/bench" "$RUN/env"
    : >"$RUN/steps.jsonl"
    exec > >(tee "$OUT/device-check.log") 2>&1
    DEADLINE=${STOKER_CHECK_DEADLINE:-480}
    if ! [[ $DEADLINE =~ ^[0-9]+$ ]]; then
        echo "warning: STOKER_CHECK_DEADLINE=$DEADLINE is not a number of seconds: 480"
        DEADLINE=480
    fi
    now_ms
    T0_MS=$NOW_MS
    # The helpers' interpreter, resolved once (a launcher shim costs time on every call).
    PY=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) || PY=python3
    export STOKER_CHECK_PUBLISH=$OUT
    local strict=()
    [ "${STOKER_CHECK_STRICT:-0}" = 1 ] && strict=(--strict)
    "$PY" -S "$HELPER" start "$RUN" --deadline "$DEADLINE" --only "$ONLY" "${strict[@]}"
    echo "== $(date -u +%FT%TZ) device check: deadline $DEADLINE s${ONLY:+, only $ONLY}, results in $OUT"
    DMON=""
    trap 'if [ -n "$DMON" ]; then kill "$DMON" 2>/dev/null; fi; rm -rf "$WORK"' EXIT
    trap 'exit 143' TERM INT
    trap 'ABANDONED=1' USR1
    export RUN WORK HELPER PKG
    export -f probe_gpu vulkan_loader python_install python_package
    CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
    GPU=0 NO_GPU_REASON="" BIN="" PKG_REASON=""

    # ------------------------------------------------------------ sanity
    if [[ ${STOKER_CHECK_SLEEP:-} =~ ^[0-9]+$ ]]; then
        phase selftest 100
        step sleep $((STOKER_CHECK_SLEEP + 10)) cmd --needed -- sleep "$STOKER_CHECK_SLEEP"
    fi
    phase sanity 20
    ldd --version 2>&1 | head -n 1
    if [ "${STOKER_CHECK_NO_GPU:-0}" = 1 ]; then
        NO_GPU_REASON="STOKER_CHECK_NO_GPU=1"
        NEEDED=1 note probe_gpu "skipped: no GPU ($NO_GPU_REASON)"
    elif ! command -v nvidia-smi >/dev/null 2>&1; then
        NO_GPU_REASON="nvidia-smi not found"
        NEEDED=1 note probe_gpu "skipped: no GPU ($NO_GPU_REASON)"
    elif step probe_gpu 20 cmd --needed -- bash -c probe_gpu; then
        GPU=1
    else
        if [ -s "$RUN/logs/probe_gpu.log" ]; then
            NO_GPU_REASON="nvidia-smi failed: $(tail -n 1 "$RUN/logs/probe_gpu.log" | cut -c1-160)"
        else
            NO_GPU_REASON="nvidia-smi did not run or said nothing (the probe_gpu step says why)"
        fi
    fi
    setf gpu "$([ "$GPU" = 1 ] && echo true || echo false)"
    [ -n "$NO_GPU_REASON" ] && setf no_gpu_reason "$NO_GPU_REASON"

    local archive
    archive=$(compgen -G "$PKG/bin.tar.*" | head -n 1)
    if [ -z "$archive" ]; then
        PKG_REASON="$PKG/bin.tar.xz not found: run scripts/device-check.sh build first"
        NEEDED=1 note unpack "skipped: no package ($PKG_REASON)"
    elif step unpack 30 cmd --needed -- python3 "$HELPER" unpack "$archive" "$WORK" && [ -d "$WORK/bin" ]; then
        BIN=$WORK/bin
    else
        PKG_REASON="$archive could not be unpacked"
    fi
    if compgen -G ".gl/*.deb" >/dev/null; then
        step vulkan_loader 20 cmd --needed -- bash -c vulkan_loader
    else
        NEEDED=1 note vulkan_loader "skipped: no .gl/*.deb (build fetches libvulkan1): the machine's own loader, if any"
    fi
    step probe_libraries 30 cmd --needed -- \
        python3 "$HELPER" probe "$RUN" --carried-lib "$WORK/lib" --cuda-home "$CUDA_HOME"
    step probe_python 30 cmd --needed -- python3 "$HELPER" probe-python "$RUN"

    # stoker's steps: the carried nvJPEG first, the machine's NVRTC, the Vulkan loader
    # carried in .gl, the NVIDIA ICD, one kernel cache; figures into $RUN/figures.
    local icd="${VK_DRIVER_FILES:-}" f
    if [ -z "$icd" ]; then
        for f in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
            /etc/vulkan/icd.d/nvidia_icd.json; do
            if [ -f "$f" ]; then icd=$f; break; fi
        done
    fi
    local ld="$WORK/lib:$CUDA_HOME/lib64:$CUDA_HOME/lib:$WORK/gl/usr/lib/x86_64-linux-gnu"
    local senv=(env "LD_LIBRARY_PATH=$ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "CUDA_HOME=$CUDA_HOME"
        STOKER_LOG=info "STOKER_CHECK_OUT=$RUN/figures" STOKER_REQUIRE_CUDA=1 STOKER_REQUIRE_NVRTC=1
        STOKER_REQUIRE_NVJPEG=1 "STOKER_TEST_DATA=$PWD/tests/data" "STOKER_KERNEL_CACHE=$WORK/kernel-cache"
        RUST_BACKTRACE=1)
    [ -n "$icd" ] && senv+=("VK_DRIVER_FILES=$icd")

    local name spec
    for name in sanity_kernels sanity_nvjpeg sanity_engine_batch sanity_device_huffman sanity_device_sync; do
        spec=(${SANITY[$name]})
        step "$name" "${CAP[$name]}" test --gpu --needs "$BIN/${spec[0]}" --filter "${spec[1]:-}" -- \
            "${senv[@]}" "$BIN/${spec[0]}" --test-threads=4 --nocapture ${spec[1]:+"${spec[1]}"}
    done

    # ------------------------------------------------------------ key figures
    phase key 70
    local images=tests/data/samples fallback="" sets=0
    wanted_any bench_set bench_decode torchvision restart_set bench_decode_rst_engines \
        bench_decode_rst_device_huffman bench_pipeline shards_set bench_pipeline_shards bench_share_half bench_share_none bench_python && sets=1
    if [ -n "${STOKER_DEVICE_CHECK_IMAGES:-}" ]; then
        images=$STOKER_DEVICE_CHECK_IMAGES
        note bench_set "skipped: STOKER_DEVICE_CHECK_IMAGES=$images"
    elif [ "$sets" = 0 ]; then
        :
    elif [ -f "$BENCH_SET/.complete" ]; then
        images=$BENCH_SET
        rec --name bench_set --rc 0 --reason "reused $BENCH_SET from an earlier run"
    elif [ ! -f "$PKG/make_bench_set.py" ]; then
        fallback="no $PKG/make_bench_set.py (the corpus was missing at build)"
        note bench_set "skipped: $fallback"
    elif rm -rf "$BENCH_SET.tmp" && step bench_set "${CAP[bench_set]}" cmd --gpu --needed -- \
        python3 "$PKG/make_bench_set.py" "$PKG/photos" "$BENCH_SET.tmp" -n 2000 -j "$(nproc)" &&
        rm -rf "$BENCH_SET" && mv "$BENCH_SET.tmp" "$BENCH_SET" && touch "$BENCH_SET/.complete"; then
        images=$BENCH_SET
    else
        fallback="the benchmark set was not made (the bench_set step says why)"
    fi
    "$PY" -S "$HELPER" bench-images "$RUN" "$images" "$fallback"

    # Engine use (the jpg and dec columns: nvJPEG's hardware engines) during the
    # benchmarks, never past the phase's end.
    local dmon_s
    now_ms
    dmon_s=$(((PHASE_END_MS - NOW_MS) / 1000))
    if [ "$GPU" = 1 ] && [ "$dmon_s" -ge 1 ] && [ "$sets" = 1 ]; then
        timeout "$dmon_s" nvidia-smi dmon -s puc -o T >"$RUN/dmon.txt" 2>&1 &
        DMON=$!
    fi
    local s="$BIN/stoker" b
    b=(--images "$images" --batch 256 --json)
    step bench_decode "${CAP[bench_decode]}" bench --gpu --needs "$s" --stdout "$RUN/bench/bench_decode.json" -- \
        "${senv[@]}" "$s" bench decode --backend cpu,cuda "${b[@]}"
    # The peer: the machine's own environment and CUDA libraries, not stoker's.
    step torchvision "${CAP[torchvision]}" bench --gpu --stdout "$RUN/bench/torchvision.json" -- \
        python3 scripts/bench_torchvision_gpu.py "$images" --batch 256 --seconds 10
    # The same files with restart markers (`stoker convert --to folder`, lossless): the
    # engines against device Huffman decoding.
    local rst="$WORK/bench-rst" shards="$WORK/bench-shards" rst_ok=0
    if [ "$sets" = 1 ] && rm -rf "$rst" && step restart_set "${CAP[restart_set]}" cmd --gpu --needed --needs "$s" -- \
        "$s" convert "$images" --to folder --out "$rst" --json; then
        rst_ok=1
    fi
    local norst=()
    [ "$rst_ok" = 1 ] || norst=(--missing "no restart-marked set (the restart_set step says why)")
    b=(--images "$rst" --batch 256 --json)
    step bench_decode_rst_engines "${CAP[bench_decode_rst_engines]}" bench --gpu --needs "$s" "${norst[@]}" \
        --stdout "$RUN/bench/bench_decode_rst_engines.json" -- \
        "${senv[@]}" "$s" bench decode --backend cuda --hardware all "${b[@]}"
    step bench_decode_rst_device_huffman "${CAP[bench_decode_rst_device_huffman]}" bench --gpu --needs "$s" \
        "${norst[@]}" --stdout "$RUN/bench/bench_decode_rst_device_huffman.json" -- \
        "${senv[@]}" "$s" bench decode --backend cuda --hardware off "${b[@]}"
    # The RRC-224 f16 pipeline at batch 256: loose files, then shards of the transcoded files.
    b=(--batch 256 --size 224 --dtype f16 --epochs 2 --json)
    step bench_pipeline "${CAP[bench_pipeline]}" bench --gpu --needs "$s" \
        --stdout "$RUN/bench/bench_pipeline.json" -- \
        "${senv[@]}" "$s" bench pipeline --backend cuda,cpu --images "$images" "${b[@]}"
    local shards_ok=0
    if [ "$rst_ok" = 1 ] && rm -rf "$shards" && step shards_set "${CAP[shards_set]}" cmd --gpu --needed --needs "$s" -- \
        "$s" convert "$rst" --to tar --restarts off --out "$shards" --json; then
        shards_ok=1
    elif [ "$rst_ok" != 1 ] && [ "$sets" = 1 ]; then
        note shards_set "skipped: no restart-marked set to pack (the restart_set step says why)"
    fi
    local noshards=()
    [ "$shards_ok" = 1 ] || noshards=(--missing "no shards (the restart_set or shards_set step says why)")
    step bench_pipeline_shards "${CAP[bench_pipeline_shards]}" bench --gpu --needs "$s" "${noshards[@]}" \
        --stdout "$RUN/bench/bench_pipeline_shards.json" -- \
        "${senv[@]}" "$s" bench pipeline --backend cuda --images "$shards" "${b[@]}"
    # The default of `hardware_share` (1: every restart-marked file to the engines, above)
    # against half of them and none (all to device Huffman decoding), one epoch each.
    local share
    for share in half:0.5 none:0; do
        step "bench_share_${share%%:*}" "${CAP[bench_share_${share%%:*}]}" bench --gpu --needs "$s" "${noshards[@]}" \
            --stdout "$RUN/bench/bench_share_${share%%:*}.json" -- \
            "${senv[@]}" "$s" bench pipeline --backend cuda --images "$shards" --batch 256 --size 224 \
            --dtype f16 --epochs 1 --json --hardware-share "${share#*:}"
    done
    if [ -n "$DMON" ]; then
        kill "$DMON" 2>/dev/null
        wait "$DMON" 2>/dev/null
        DMON=""
        rec --name dmon --rc 0 --reason "$(grep -cv '^#' "$RUN/dmon.txt") samples during the benchmarks (dmon.txt)"
    elif [ "$GPU" = 1 ] && [ "$sets" = 1 ]; then
        note dmon "cut: deadline (the $PHASE phase ended at ${PHASE_END_S} s)"
    elif [ "$GPU" != 1 ]; then
        note dmon "skipped: no GPU ($NO_GPU_REASON)"
    fi

    # ------------------------------------------------------------ the other tests
    phase tests 92
    local nowheel=() py_ok=0
    compgen -G "$PKG/python/stoker-*.whl" >/dev/null ||
        nowheel=(--missing "no wheel in $PKG/python (scripts/device-check.sh build makes it)")
    if wanted_any python_install python_package bench_python &&
        step python_install "${CAP[python_install]}" cmd --needed "${nowheel[@]}" -- bash -c python_install; then
        py_ok=1
    fi
    local nopy=()
    [ "$py_ok" = 1 ] || nopy=(--missing "the Python package is not installed (the python_install step says why)")
    step python_package "${CAP[python_package]}" cmd --gpu "${nopy[@]}" -- \
        "${senv[@]}" "PYTHONPATH=$WORK/site" bash -c python_package
    local t threads wgpu
    for t in "${TESTS[@]}"; do
        # Run whole as sanity_kernels already (unless a rerun asks for it by name).
        if [ "$t" = kernels_compile ] && [ -z "$ONLY" ]; then continue; fi
        threads=4 wgpu=()
        [ "$t" = cuda_backend ] && threads=1 # it measures free device memory
        [ "$t" = device_memory ] && threads=1
        [ "$t" = wgpu_kernels ] || [ "$t" = device_memory ] && wgpu=(STOKER_REQUIRE_WGPU=1)
        step "$t" "${CAP[$t]}" test --gpu --needs "$BIN/$t" -- \
            "${senv[@]}" "${wgpu[@]}" "$BIN/$t" --test-threads="$threads" --nocapture
    done
    # The Python package's pipeline against torch's DataLoader on the same files.
    step bench_python "${CAP[bench_python]}" cmd --gpu "${nopy[@]}" -- \
        "${senv[@]}" "PYTHONPATH=$WORK/site" python3 scripts/bench_python.py --images "$images" --backend cuda \
        --batch 256 --rounds 2 --workers 8 --json "$RUN/bench/python.json"

    # ------------------------------------------------------------ sanitizer
    phase sanitizer 100
    # Their figures go to sanitizer/, not figures/: times under a sanitizer mean nothing.
    local san nosan=""
    san=$(find_sanitizer) || nosan="compute-sanitizer not on PATH or in $CUDA_HOME/bin"
    if [ -z "$nosan" ] && wanted_any sanitizer_version memcheck racecheck; then
        step sanitizer_version 15 cmd --gpu --needed -- "$san" --version ||
            nosan="compute-sanitizer --version failed (the sanitizer_version step says why)"
    fi
    step memcheck "${CAP[sanitizer]}" sanitizer --gpu --needs "$BIN/$MEMCHECK_TEST" --missing "$nosan" \
        --filter "$MEMCHECK_FILTER" -- \
        "${senv[@]}" "STOKER_CHECK_OUT=$RUN/sanitizer/memcheck" "$san" --tool memcheck --error-exitcode 86 \
        "$BIN/$MEMCHECK_TEST" --test-threads=1 --nocapture "$MEMCHECK_FILTER"
    step racecheck "${CAP[sanitizer]}" sanitizer --gpu --needs "$BIN/$RACECHECK_TEST" --missing "$nosan" \
        --filter "$RACECHECK_FILTER" -- \
        "${senv[@]}" "STOKER_CHECK_OUT=$RUN/sanitizer/racecheck" "$san" --tool racecheck --error-exitcode 86 \
        "$BIN/$RACECHECK_TEST" --test-threads=1 --nocapture "$RACECHECK_FILTER"
    # shellcheck disable=SC2016 # $RUN is expanded by that bash (exported)
    step nvidia_smi_after 15 cmd --gpu -- bash -c 'nvidia-smi | tee -a "$RUN/nvidia-smi.txt"'

    now_ms
    echo "== done in $(((NOW_MS - T0_MS) / 1000)) s"
    "$PY" -S "$HELPER" summarise "$RUN" --final
}

case "${1:-}" in
    build) build ;;
    run)
        shift
        run "$@"
        ;;
    *)
        echo "usage: $0 build | run [--only STEP,...]" >&2
        exit 2
        ;;
esac
