//! The CUDA kernels (`kernels/*.cu`) on the CPU, through the C++ emulation of
//! `tests/kernel_host/` (see `common/executor/emulator.rs`): every case of
//! `common/executor/` (orientation, Huffman decoding, the self-synchronising Huffman
//! decode's passes, decode, augment) against the CPU oracles, and the emulator's own
//! checks. Without a C++ compiler the tests say so and pass, unless
//! `STOKER_REQUIRE_KERNEL_HOST=1`.

use crate::executor;
use crate::executor::{garbage, Buffers, Executor};
use stoker::backend::device::launch::PARAM_WORDS;
use stoker::backend::device::{AugmentInput, Binding, Buffer, Kernel, Launch, Step};
use stoker::decode::LabelPlane;
use stoker::Augment;

executor::executor_tests!(executor::emulator::get());

/// The emulator's own checks: a kernel writing past its binding, and a launch that breaks
/// the contract, fail with a message that says so.
#[test]
fn the_emulator_reports_out_of_bounds_accesses_and_bad_launches() {
    let Some(emu) = executor::emulator::get() else {
        return;
    };
    // One 16x16 window turned by 180 degrees, its job record in the decode input.
    let launch = |dst_bytes: u64, bindings: usize| {
        let mut params = [0u32; PARAM_WORDS];
        params[..3].copy_from_slice(&[1, 256, 256]);
        let mut b = vec![
            Binding {
                buffer: Buffer::Windows,
                offset: 0,
                size: 1024,
            },
            Binding {
                buffer: Buffer::DecodeInput,
                offset: 0,
                size: 32,
            },
            Binding {
                buffer: Buffer::Oriented,
                offset: 0,
                size: dst_bytes,
            },
        ];
        b.truncate(bindings);
        vec![Step::Launch(Launch {
            kernel: Kernel::Orient,
            grid: [4, 1],
            bindings: b,
            params,
        })]
    };
    let fresh = || {
        let job: [u32; 8] = [0, 16, 16, 3, 16, 16, 0, 0];
        Buffers::default()
            .with(Buffer::Windows, garbage(1024))
            .with(
                Buffer::DecodeInput,
                job.iter().flat_map(|w| w.to_le_bytes()).collect(),
            )
            .with(Buffer::Oriented, garbage(1024))
    };
    emu.run(&launch(1024, 3), &mut fresh());
    let e = emu
        .try_run(&launch(512, 3), &mut fresh())
        .expect_err("a 512-byte destination for 1024 bytes");
    assert!(e.contains("past the end of binding 2"), "{e}");
    let e = emu
        .try_run(&launch(1024, 2), &mut fresh())
        .expect_err("two bindings");
    assert!(e.contains("2 bindings, the kernel has 3"), "{e}");
}

/// The augment input refuses a sample whose output shape differs from the batch's, and a
/// label plane of the wrong size; `clear` empties it for the next batch.
#[test]
fn inconsistent_augment_batches_are_errors() {
    let (plan, image) = executor::augment::small_sample();
    let other = Augment::new().resize(8, 9).plan(1, 0, 2, 20, 20);
    let mut input = AugmentInput::new();
    input.push(&plan, image, None).expect("first");
    assert!(matches!(
        input.push(&other, image, None),
        Err(stoker::Error::Config { .. })
    ));
    let bad = LabelPlane {
        width: 3,
        height: 3,
        data: vec![0; 8],
    };
    assert!(input.push(&plan, image, Some(&bad)).is_err());
    assert_eq!(input.len(), 1);
    input.clear();
    assert!(input.is_empty());
    input.push(&plan, image, None).expect("after clear");
}
