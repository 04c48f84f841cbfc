#!/usr/bin/env bash
# The test command: installs what the tests need, then runs formatting, lints and every
# test (unit, integration, doc tests, and each benchmark once as a smoke test). Run from
# anywhere; CI runs it through .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step's header says when it started (minutes and seconds since the script began),
# so a log shows where the time goes.
step() {
    printf '== [%02d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"
}

if ! command -v cargo >/dev/null 2>&1; then
    echo "error: cargo is not installed (https://rustup.rs)" >&2
    exit 1
fi

# Build tools from Debian: nasm (libjpeg-turbo's SIMD, used by mozjpeg-sys and by the
# benchmark's turbojpeg-sys) and cmake (turbojpeg-sys builds libjpeg-turbo 3 from source).
# Mesa's lavapipe (software Vulkan) runs every WGSL shader for real on a machine without a
# GPU; the wgpu tests compare it against the CPU reference.
missing=()
command -v nasm >/dev/null 2>&1 || missing+=(nasm)
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
# g++ runs the CUDA kernels on the CPU (tests/suite/kernels_host.rs): no GPU here.
command -v g++ >/dev/null 2>&1 || missing+=(g++)
if ! ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1; then
    missing+=(mesa-vulkan-drivers)
fi
if ! compgen -G '/usr/lib/*/libvulkan.so.1' >/dev/null && ! compgen -G '/usr/lib/libvulkan.so.1' >/dev/null; then
    missing+=(libvulkan1)
fi
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        step "installing ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "error: please install: ${missing[*]} (Debian/Ubuntu: apt-get install ${missing[*]})" >&2
        exit 1
    fi
fi

# CUDA without a GPU: NVRTC compiles every kernel and ptxas assembles it for sm_90
# (tests/kernels_compile.rs), and nvJPEG loads, from NVIDIA's PyPI wheels, pinned to
# 13.0.x (a later NVRTC writes PTX that CUDA 13.0's ptxas and driver reject) and
# installed without their dependencies (which would pull in 13.x releases) into a local
# virtual environment. Nothing CUDA is needed to build; the tests that need a GPU say
# they were skipped.
# nvvm (cicc) and cccl (libcu++, thrust) let nvcc compile candle's kernels, for the build
# of stoker beside candle's `cuda` feature below.
CUDA_WHEELS=(nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-nvcc==13.0.88 nvidia-cuda-runtime==13.0.96
    nvidia-cuda-crt==13.0.88 nvidia-nvjpeg==13.0.4.44 nvidia-nvvm==13.0.88
    nvidia-cuda-cccl==13.0.85)
# STOKER_VENVS: where the tools' virtual environments live (default: the checkout; .ci/run
# keeps them outside the clone, between runs).
venvs="${STOKER_VENVS:-.}"
mkdir -p "$venvs"
venv="$venvs/.venv-cuda"
if [ ! -x "$venv/bin/pip" ]; then
    if ! python3 -m venv "$venv" >/dev/null 2>&1; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            step "installing python3-venv"
            apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv python3-pip >/dev/null
            rm -rf "$venv"
            python3 -m venv "$venv"
        else
            echo "error: python3 -m venv failed; install python3-venv" >&2
            exit 1
        fi
    fi
fi
if ! "$venv/bin/pip" freeze 2>/dev/null | grep -qx "nvidia-nvvm==13.0.88"; then
    step "installing the CUDA 13.0 wheels (NVRTC, nvcc, ptxas, nvJPEG)"
    "$venv/bin/pip" install --quiet --no-deps "${CUDA_WHEELS[@]}"
fi
CUDA_HOME="$("$venv/bin/python" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))')"
export CUDA_HOME
export LD_LIBRARY_PATH="$CUDA_HOME/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export STOKER_REQUIRE_NVRTC=1
export STOKER_REQUIRE_NVJPEG=1
export STOKER_REQUIRE_KERNEL_HOST=1

# A real S3 API server for the object-storage tests (tests/object_store.rs): moto's
# server mode, pinned, from PyPI, in a virtual environment of its own (about 40 s to
# install); the tests start it on a free port and put a fault-injecting proxy in front.
S3_VENV="$venvs/.venv-s3"
if [ ! -x "$S3_VENV/bin/moto_server" ] || ! "$S3_VENV/bin/pip" freeze 2>/dev/null | grep -qx "moto==5.1.22"; then
    step "installing moto's S3 server (moto[server]==5.1.22)"
    rm -rf "$S3_VENV"
    python3 -m venv "$S3_VENV"
    "$S3_VENV/bin/pip" install --quiet "moto[server]==5.1.22"
fi
export STOKER_MOTO_SERVER="$(cd "$S3_VENV" && pwd)/bin/moto_server"
export STOKER_REQUIRE_S3=1

# The corpus tests also read ../shared/corpus when it exists beside the checkout, and say
# "skipped" when it does not.
if [ ! -d ../shared/corpus ]; then
    echo "note: ../shared/corpus not found; the corpus tests will report themselves skipped"
fi

# With STOKER_REQUIRE_WGPU=1 (set by .ci/run) the wgpu tests fail instead of skipping
# when no adapter is found; without it they skip on a machine without Vulkan.
export STOKER_REQUIRE_WGPU="${STOKER_REQUIRE_WGPU:-0}"

# One build from scratch: incremental state would only add disk (gigabytes over all the
# feature combinations below) and time. Say how much disk there is, since a full disk shows
# up as a linker failure.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
step "disk free for target/: $(df -h . | awk 'NR == 2 { print $4 }')"

step "cargo fmt --check"
cargo fmt --all -- --check

step "the modules import only downwards (scripts/check_layers.py)"
python3 scripts/check_layers.py

step "no file over 800 lines of code, no function over 150 (scripts/loc.py --strict)"
python3 scripts/loc.py --strict --top 0

# Every backend can be compiled out: each single-backend build and the CPU-only build
# must build and lint clean, so no cfg combination rots (a compiled-out backend keeps its
# names as stand-ins that say it is not in this build). These are checks (no code
# generated) of a graph without burn and candle: a few minutes for the three.
for features in "--no-default-features" "--no-default-features --features wgpu" \
    "--no-default-features --features cuda"; do
    step "cargo clippy --all-targets $features -- -D warnings"
    # shellcheck disable=SC2086
    cargo clippy --all-targets --locked $features -- -D warnings
done

# The Python bindings without their optional features (CUDA, Parquet, object storage):
# the wheel's build below has them all, so this is where their stand-ins are linted.
step "cargo clippy -p stoker-python --no-default-features -- -D warnings"
cargo clippy --locked -p stoker-python --no-default-features -- -D warnings

step "the library alone builds none of the CLI's dependencies (feature cli)"
if cargo tree --locked --no-default-features --features wgpu -e normal --prefix none |
    grep -E '^(clap|indicatif|plotters|font8x8) '; then
    echo "error: the library without the cli feature depends on the CLI's crates" >&2
    exit 1
fi

# rustdoc's lints (broken links, ...) on the default build with Parquet; the hand-offs'
# module docs compile as doc tests below. (Documenting with burn and candle would check
# their whole graph once more: 10 minutes.)
step "cargo doc --features parquet,object-store (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps --quiet --features parquet,object-store
# What those docs show is the public API: the same list as scripts/public-api.txt, and no
# link into a hidden module (reads the HTML just written: about a second).
step "the public API the docs show (scripts/check_api.py)"
python3 scripts/check_api.py

# One build for every test: every backend, Parquet, and the burn and candle hand-offs.
# burn and candle turn on features of crates the rest of the graph shares (serde, rand,
# hashbrown, ...), so a build without them and one with them share almost nothing: two
# feature sets would cost two whole builds.
#
# Clippy lints every target of the crate while the tests build (clippy-driver is the
# compiler of the crate's own targets; the dependencies build with rustc, once), rather
# than in a check of its own: a check generates no code, so it shares nothing with the
# build and would cost a third pass over the whole graph (15 minutes here). `-D
# warnings` makes every warning, clippy's too, an error; the dependencies' lints are
# capped by cargo as always. Every cargo command from here to the fuzzing runs with the
# same flags, so none rebuilds what another built.
FEATURES=parquet,burn,candle,object-store
clippy_driver="$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver || true)"
if [ -z "$clippy_driver" ]; then
    echo "error: clippy-driver not found (rustup component add clippy)" >&2
    exit 1
fi
export RUSTC_WORKSPACE_WRAPPER="$clippy_driver"
export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-D warnings"

# Every target, the hand-offs' tests and the two training examples' runs among them
# (a few minutes: each must end well above chance).
step "cargo test --all-targets --features $FEATURES (and clippy on every target)"
cargo test --locked --all-targets --features "$FEATURES"
step "cargo test --doc --features $FEATURES"
cargo test --locked --doc --features "$FEATURES"

# The Python package (python/, PyO3 and maturin): the wheel built as a user's `pip install
# ./python` builds it, but unoptimised (`--profile dev`) and with the features of the test
# build above (burn and candle, which the wheel does not need: the Python crate then shares
# every crate the test build compiled, and builds only PyO3, dlpark, object_store again
# (the tests' sha2 turns on a feature of a crate below it) and the crate: about a minute
# here), installed beside the pinned NumPy, Pillow, pytest, torch, torchvision and JAX (CPU) in
# a virtual environment, and its tests run: the torch hand-off, `stoker.torch.Loader` against
# torchvision's ImageFolder and DataLoader, torch.compile (triton) after an `auto` pipeline,
# and JAX's from_dlpack. Those that need a GPU say they were skipped (there is none here).
step "the Python package: the wheel (maturin), installed in a virtual environment, pytest"
PY_BUILD_VENV="$venvs/.venv-py"
if ! "$PY_BUILD_VENV/bin/pip" freeze 2>/dev/null | grep -qx "auditwheel==6.4.2"; then
    rm -rf "$PY_BUILD_VENV"
    python3 -m venv "$PY_BUILD_VENV"
    "$PY_BUILD_VENV/bin/pip" install --quiet maturin==1.16.0 auditwheel==6.4.2 pyelftools==0.33
fi
py_tmp="$(mktemp -d)"
"$PY_BUILD_VENV/bin/maturin" build --quiet --locked --profile dev -m python/Cargo.toml \
    --features stoker/default,stoker/burn,stoker/candle -o "$py_tmp/wheels"
# The wheel a user installs without Rust: one abi3 wheel (CPython 3.10 and later) that
# maturin tags with the manylinux policy its symbols allow, and that auditwheel (the PyPA's
# checker) finds consistent with that tag. The release wheel (`maturin build --release`)
# links the same libraries; this one is built unoptimised to share the test build.
py_wheel="$(ls "$py_tmp"/wheels/stoker-*.whl)"
py_tag="$(basename "$py_wheel" .whl | awk -F- '{ print $NF }')"
case "$(basename "$py_wheel")" in
    stoker-*-cp310-abi3-manylinux_*_x86_64.whl) ;;
    *) echo "error: $(basename "$py_wheel") is not an abi3 manylinux wheel" >&2; exit 1 ;;
esac
"$PY_BUILD_VENV/bin/auditwheel" show "$py_wheel" >"$py_tmp/auditwheel.txt"
if ! tr -s ' \n' ' ' <"$py_tmp/auditwheel.txt" | grep -q "is consistent with the following platform tag: \"$py_tag\""; then
    cat "$py_tmp/auditwheel.txt" >&2
    echo "error: auditwheel does not accept $(basename "$py_wheel") as $py_tag" >&2
    exit 1
fi
echo "auditwheel: $(basename "$py_wheel") is consistent with $py_tag"
# The test environment holds the pinned packages; the wheel is installed into it afresh each
# run (it is kept, with the other environments, where STOKER_VENVS is). torch's wheel brings
# its CUDA libraries and triton: a first install takes well over a minute from a warm pip
# cache (100 s here) and the environment is about 6 GB; a kept one is checked (every pin present) and
# reused.
PY_TEST_VENV="$venvs/.venv-pytest"
PY_TEST_PINS="numpy==2.4.6 pillow==13.0.0 pytest==9.2.0 torch==2.15.0 torchvision==0.29.2 jax==0.10.2 jaxlib==0.10.2"
py_frozen="$("$PY_TEST_VENV/bin/pip" freeze 2>/dev/null || true)"
py_missing=""
for pin in $PY_TEST_PINS; do
    grep -qx "$pin" <<<"$py_frozen" || py_missing="$py_missing $pin"
done
if [ -n "$py_missing" ]; then
    rm -rf "$PY_TEST_VENV"
    python3 -m venv "$PY_TEST_VENV"
    "$PY_TEST_VENV/bin/pip" install --quiet numpy==2.4.6 pillow==13.0.0 pytest==9.2.0 \
        torch==2.15.0 torchvision==0.29.2 "jax[cpu]==0.10.2"
fi
# The tests skip themselves where a framework is missing: here each must be importable, so
# that none of them is skipped for that.
"$PY_TEST_VENV/bin/python" -c "import torch, torchvision, triton, jax"
"$PY_TEST_VENV/bin/pip" uninstall --quiet --yes stoker >/dev/null 2>&1 || true
"$PY_TEST_VENV/bin/pip" install --quiet --no-deps "$py_tmp"/wheels/stoker-*.whl
(cd python/tests && "$PY_TEST_VENV/bin/python" -m pytest -q -rs -p no:cacheprovider .)
rm -rf "$py_tmp"

# stoker beside candle's `cuda` feature, which makes cudarc link the CUDA libraries rather
# than load them (a linked program needs libcuda, cuBLAS and cuRAND, which a machine
# without a GPU does not have) and builds candle's kernels with nvcc (the pinned wheels')
# for the compute capability named here. So nothing is linked: the library is built (and
# linted) with it, an rlib. (The candle example's code for it is not compiled here: any
# build of an example links it.) cudarc, candle, burn's crates above `half` and the crate
# are built again.
#
# candle-kernels builds two things with nvcc: the PTX of candle's tensor kernels (what a
# stoker + candle program runs), compiled here for real, and a static library of
# quantised-LLM kernels (MoE and GGUF matrix products: llama.cpp's templates, most of the
# nvcc time, about 5 minutes on two cores), which nothing here links: `nvcc-check`
# (beside nvcc, so that candle's build finds the toolkit's headers from it) runs nvcc for
# everything else and leaves the library's objects empty.
step "stoker beside candle's cuda feature: the library, nothing linked"
export PATH="$CUDA_HOME/bin:$PATH"
export CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}"
cat >"$CUDA_HOME/bin/nvcc-check" <<'NVCC'
#!/usr/bin/env bash
# nvcc for a build that links nothing: object and library outputs are left empty.
out=
mode=
prev=
for a in "$@"; do
    case "$a" in -c | --lib) mode=$a ;; esac
    [ "$prev" = -o ] && out=$a
    prev=$a
done
if [ -n "$mode" ] && [ -n "$out" ]; then
    : >"$out"
    exit 0
fi
exec "$(dirname "$0")/nvcc" "$@"
NVCC
chmod +x "$CUDA_HOME/bin/nvcc-check"
NVCC="$CUDA_HOME/bin/nvcc-check" cargo build --locked --lib --features parquet,burn,candle-cuda,object-store

# Another reader of what `stoker convert` transcodes: Pillow (its own libjpeg build) must
# decode every transcoded JPEG to the original's pixels. (TensorFlow's check of the shards,
# scripts/make_shard_fixtures.py --check, needs a 1.6 GB environment: run by hand.)
step "stoker convert's transcoded JPEGs read back by Pillow (scripts/check_transcode_pillow.py)"
if ! "$venv/bin/pip" freeze 2>/dev/null | grep -qx "pillow==13.0.0"; then
    "$venv/bin/pip" install --quiet pillow==13.0.0
fi
# The CLI the tests above built (integration tests build the binaries with their
# features): `cargo run` would build it again without the dev-dependencies' features.
stoker_bin="${CARGO_TARGET_DIR:-target}/debug/stoker"
if [ ! -x "$stoker_bin" ]; then
    echo "error: $stoker_bin was not built by the tests" >&2
    exit 1
fi
transcoded="$(mktemp -d)"
for d in jpeg samples; do
    # Exit status 1: a few of the test files are no image (reported, not written).
    "$stoker_bin" convert "tests/data/$d" --to folder \
        --out "$transcoded/$d" >/dev/null || [ $? = 1 ]
    "$venv/bin/python" scripts/check_transcode_pillow.py "tests/data/$d" "$transcoded/$d"
done
rm -rf "$transcoded"

# The CPU-only build (--no-default-features) and each single-backend build are linted
# above, every target. Its tests are not run again here: without burn and candle the
# shared crates take other features, so that would be a third whole build (about 10
# minutes) to run the same CPU code the suite above runs; the fuzz targets below do run a
# build of the library without its default features.

if [ "$STOKER_REQUIRE_WGPU" = 1 ]; then
    step "the wgpu example on this machine's adapter"
    cargo run --locked --quiet --features "$FEATURES" --example wgpu_consumer >/dev/null
fi

step "the CUDA example (it says so and exits where there is no GPU)"
cargo run --locked --quiet --features "$FEATURES" --example cuda_consumer

# Fuzzing (fuzz/, libFuzzer with AddressSanitizer): every target for a bounded time
# (STOKER_FUZZ_SECONDS each, default 5), seeded from tests/data and the earlier findings
# in tests/data/regress/ (which tests/suite/regress.rs also replays on stable). cargo-fuzz needs
# a nightly toolchain; it is installed from crates.io when missing (about a minute).
# (cargo-fuzz and the fuzz build take their own compiler flags: not the lint's.)
unset RUSTC_WORKSPACE_WRAPPER RUSTFLAGS
fuzz_seconds="${STOKER_FUZZ_SECONDS:-5}"
if [ "$fuzz_seconds" != 0 ] && rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    if ! command -v cargo-fuzz >/dev/null 2>&1; then
        step "installing cargo-fuzz"
        cargo install --quiet --locked cargo-fuzz --version 0.13.2
    fi
    step "fuzzing every target for ${fuzz_seconds} s (scripts/fuzz.sh)"
    # Unoptimised builds (cargo-fuzz's --dev): for runs of a few seconds, the build is
    # what costs (a release fuzz build compiles every crate as one codegen unit).
    STOKER_FUZZ_BUILD="${STOKER_FUZZ_BUILD:-dev}" bash scripts/fuzz.sh "$fuzz_seconds"
elif [ "$fuzz_seconds" != 0 ]; then
    echo "note: no nightly toolchain (rustup toolchain install nightly): the fuzz targets did not run; tests/suite/regress.rs replayed their findings"
fi
# Last, where the files stand against the house's limits (800 lines of code a file, 150 a
# function; checked above) and how much code is written twice, so that every change sees
# the drift.
step "the largest files by lines of code (scripts/loc.py)"
python3 scripts/loc.py
step "code written twice (scripts/dupes.py)"
python3 scripts/dupes.py
step "done"
