#!/usr/bin/env bash
# The test command: installs what the tests need, then runs formatting, lints and every
# test (unit, integration, doc tests, and each benchmark once as a smoke test). Run from
# anywhere; CI runs it through .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

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
if ! ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1; then
    missing+=(mesa-vulkan-drivers)
fi
if ! compgen -G '/usr/lib/*/libvulkan.so.1' >/dev/null && ! compgen -G '/usr/lib/libvulkan.so.1' >/dev/null; then
    missing+=(libvulkan1)
fi
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "== installing ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "error: please install: ${missing[*]} (Debian/Ubuntu: apt-get install ${missing[*]})" >&2
        exit 1
    fi
fi

# The corpus tests also read ../shared/corpus when it exists beside the checkout, and say
# "skipped" when it does not.
if [ ! -d ../shared/corpus ]; then
    echo "note: ../shared/corpus not found; the corpus tests will report themselves skipped"
fi

# With STOKER_REQUIRE_WGPU=1 (set by .ci/run) the wgpu tests fail instead of skipping
# when no adapter is found; without it they skip on a machine without Vulkan.
export STOKER_REQUIRE_WGPU="${STOKER_REQUIRE_WGPU:-0}"

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --locked -- -D warnings

echo "== cargo doc (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps --quiet

echo "== cargo test"
cargo test --locked --all-targets
cargo test --locked --doc

if [ "$STOKER_REQUIRE_WGPU" = 1 ]; then
    echo "== the wgpu example on this machine's adapter"
    cargo run --locked --quiet --example wgpu_consumer >/dev/null
fi
