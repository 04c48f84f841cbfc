#!/usr/bin/env bash
# The test command: installs what the tests need, then runs formatting, lints and every
# test (unit, integration, doc tests). Run from anywhere; CI runs it through .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
    echo "error: cargo is not installed (https://rustup.rs)" >&2
    exit 1
fi

# The tests need nothing outside Rust and the repository yet. The corpus tests also read
# ../shared/corpus when it exists beside the checkout, and say "skipped" when it does not.
if [ ! -d ../shared/corpus ]; then
    echo "note: ../shared/corpus not found; the corpus tests will report themselves skipped"
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --locked -- -D warnings

echo "== cargo test"
cargo test --locked --all-targets
cargo test --locked --doc
