#!/usr/bin/env bash
# Runs every fuzz target (fuzz/, cargo-fuzz and libFuzzer, nightly Rust) for a bounded
# time, seeded from tests/data (and ../shared/corpus where it exists). A crash, a panic,
# a timeout or an allocation over the limit is copied to tests/data/regress/<target>/
# (tests/suite/regress.rs replays it on every test run) and fails the run.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]      default: 15 s, every target
#
# Needs a nightly toolchain (`rustup toolchain install nightly`) and cargo-fuzz (`cargo
# install cargo-fuzz`); scripts/test.sh installs cargo-fuzz where nightly is present.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-15}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(jpeg_decode coefficients device_oracle sync_huffman image_formats png_mask shards shard_index file_list manifests)
fi

# Seeds: the bundled test files by kind, and the shared corpus's JPEGs.
seed() {
    local target=$1 dir=fuzz/corpus/$1
    mkdir -p "$dir"
    local from=()
    case $target in
        jpeg_decode | coefficients | device_oracle | sync_huffman) from=(tests/data/jpeg tests/data/lenient) ;;
        image_formats) from=(tests/data/formats) ;; # lossy, lossless, extended WebP; BMP incl. RLE
        png_mask) from=(tests/data/masks) ;;
        shards) from=(tests/data/shards) ;;
        shard_index) from=(tests/data/shard_index) ;;
        file_list) from=() ;;
        manifests) from=() ;;
    esac
    for d in "${from[@]}"; do
        find "$d" -type f -size -2M -exec cp -n {} "$dir/" \; 2>/dev/null || true
    done
    if [ "$target" = jpeg_decode ] && [ -d ../shared/corpus ]; then
        # (find is cut off by head: the pipeline's status is not the copy's.)
        find ../shared/corpus -type f -iname '*.jpg' -size -300k 2>/dev/null | head -40 |
            while read -r f; do cp -n "$f" "$dir/" 2>/dev/null || true; done || true
    fi
    if [ "$target" = file_list ]; then
        printf 'a.jpg 1\nb/c.jpg\t2\n# comment\n' >"$dir/list1"
        printf 'x.png\n\ny z.png\n' >"$dir/list2"
    fi
    if [ "$target" = manifests ]; then
        printf '{"path": "a.jpg", "label": 1, "boxes": [[1, 2, 3, 4, 0]]}\n{"path": "b/c.jpg", "mask": "m.png"}\n' >"$dir/jsonl1"
        printf 'path,label,boxes\na.jpg,1,1 2 3 4 0; 5 5 6 6\n\n"b\nc.jpg",,\n' >"$dir/csv1"
        printf '{"images": [{"id": 1, "file_name": "a.jpg"}, {"id": 2, "file_name": "b.jpg"}], "annotations": [{"id": 5, "image_id": 1, "category_id": 3, "bbox": [1, 2, 3, 4], "keypoints": [1, 1, 2]}, {"id": 6, "image_id": 9, "category_id": 3}], "categories": [{"id": 3, "name": "x"}]}' >"$dir/coco1"
    fi
    # Earlier findings seed their target too.
    if [ -d "tests/data/regress/$target" ]; then
        cp -n "tests/data/regress/$target"/* "$dir/" 2>/dev/null || true
    fi
}

# Every target built in one cargo run (in parallel, sharing the dependencies) before any
# runs: each `cargo fuzz run` below then finds its target built with the same options.
# STOKER_FUZZ_BUILD=dev builds the targets without optimisation (cargo-fuzz's --dev):
# a few times quicker to build, slower to run; what scripts/test.sh uses for its short
# runs. The default is cargo-fuzz's release build, for fuzzing in earnest.
build=()
case "${STOKER_FUZZ_BUILD:-release}" in
    release) ;;
    dev) build=(--dev) ;;
    *)
        echo "error: STOKER_FUZZ_BUILD is release or dev, not ${STOKER_FUZZ_BUILD}" >&2
        exit 2
        ;;
esac
# STOKER_FUZZ_TARGET_DIR: where cargo-fuzz builds (default fuzz/target); .ci/run keeps it
# outside the clone, beside cargo's own target directory.
if [ -n "${STOKER_FUZZ_TARGET_DIR:-}" ]; then
    build+=(--target-dir "$STOKER_FUZZ_TARGET_DIR")
fi
if ! cargo +nightly fuzz build "${build[@]}" --fuzz-dir fuzz >fuzz/build.log 2>&1; then
    tail -40 fuzz/build.log
    exit 1
fi

status=0
for t in "${targets[@]}"; do
    seed "$t"
    echo "== fuzz $t for ${seconds}s"
    rm -rf "fuzz/artifacts/$t"
    # -malloc_limit_mb: no single allocation may come near what the checks' small
    # limits allow (a few tens of MB); -rss_limit_mb bounds the whole process. The
    # WebP, BMP, TIFF and GIF decoders need 32 MB at most in one allocation under the
    # checks' 4 Mpx (16-bit RGBA output): one of 256 MB is a header believed past them.
    malloc=1024
    case $t in
        image_formats) malloc=256 ;;
    esac
    if ! cargo +nightly fuzz run "${build[@]}" --fuzz-dir fuzz "$t" "fuzz/corpus/$t" -- \
        -max_total_time="$seconds" -malloc_limit_mb="$malloc" -rss_limit_mb=2560 \
        -timeout=20 -print_final_stats=1 >"fuzz/$t.log" 2>&1; then
        status=1
        tail -40 "fuzz/$t.log"
        mkdir -p "tests/data/regress/$t"
        for a in fuzz/artifacts/"$t"/*; do
            [ -f "$a" ] || continue
            cp "$a" "tests/data/regress/$t/"
            echo "error: fuzz target $t failed on $a (copied to tests/data/regress/$t/)" >&2
        done
    else
        grep -E "^stat::number_of_executed_units|^Done [0-9]+ runs" "fuzz/$t.log" | tail -1 || true
    fi
done
exit $status
