//! One test body per executor. The GPU backends run the same planned [`Step`]s
//! (`stoker::backend::device`); an [`Executor`] is anything that runs them over host
//! [`Buffers`]:
//!
//! - [`emulator`]: the CUDA kernels (`kernels/*.cu`) compiled as C++ by a host compiler and
//!   run on the CPU (`tests/kernel_host/`), every binding ending at a guard page;
//! - [`wgpu_device`]: the WGSL shaders on this machine's wgpu adapter (lavapipe in CI);
//! - [`cuda_device`]: the CUDA kernels on a GPU.
//!
//! The cases ([`orient`], [`huffman`], [`sync_huffman`], [`sync_crop`], [`decode`], [`augment`],
//! [`cache`], [`mix`]) are written once against the trait and compare with the CPU
//! oracles; [`executor_tests!`] makes one `#[test]` per case for an executor. A test
//! binary opts in with
//!
//! ```ignore
//! mod common;
//! #[path = "common/executor/mod.rs"]
//! mod executor;
//! executor::executor_tests!(executor::emulator::get());
//! ```
//!
//! (the other test binaries, which `common` serves too, do not compile any of this). Where
//! an executor is missing (no C++ compiler, no wgpu adapter, no CUDA device) its tests say
//! so and pass, unless `STOKER_REQUIRE_KERNEL_HOST=1`, `STOKER_REQUIRE_WGPU=1` or
//! `STOKER_REQUIRE_CUDA=1` makes that a failure.
#![allow(dead_code)]

pub mod augment;
pub mod cache;
#[cfg(feature = "cuda")]
pub mod cuda_device;
pub mod decode;
pub mod emulator;
pub mod huffman;
pub mod mix;
pub mod orient;
pub mod random;
pub mod sync_crop;
pub mod sync_huffman;
#[cfg(feature = "wgpu")]
pub mod wgpu_device;

use stoker::backend::device::{BatchPlan, Buffer, DeviceLimits, DeviceSample, Kernel, Step};
use stoker::decode::Image8;

/// The buffers of one run, by [`Buffer`]: each executor uploads them, runs the steps and
/// reads every one back into place.
#[derive(Default)]
pub struct Buffers(pub Vec<(Buffer, Vec<u8>)>);

impl Buffers {
    /// With `buffer` holding `bytes` (in place of what it held).
    pub fn with(mut self, buffer: Buffer, bytes: Vec<u8>) -> Self {
        self.0.retain(|(b, _)| *b != buffer);
        self.0.push((buffer, bytes));
        self
    }

    /// What `buffer` holds.
    pub fn get(&self, buffer: Buffer) -> &[u8] {
        &self.0.iter().find(|(b, _)| *b == buffer).expect("buffer").1
    }

    /// Where `buffer` is in the list.
    pub fn index(&self, buffer: Buffer) -> Option<usize> {
        self.0.iter().position(|(b, _)| *b == buffer)
    }

    /// The buffers of a planned batch: the upload's two parts (written from `samples`, as
    /// planned), and garbage of the size the plan asks for in every other buffer.
    pub fn for_plan<S: AsRef<DeviceSample>>(plan: &BatchPlan, samples: &[S]) -> Self {
        let sizes = plan.sizes();
        let mut upload = vec![0u8; sizes.upload as usize];
        plan.write_upload(&mut upload.as_mut_slice(), &|k| {
            samples.get(k).map(|s| s.as_ref())
        })
        .expect("upload");
        let a = sizes.augment_offset as usize;
        let mut buffers = Buffers::default()
            .with(
                Buffer::DecodeInput,
                upload[..sizes.decode_input as usize].to_vec(),
            )
            .with(
                Buffer::AugmentInput,
                upload[a..a + sizes.augment_input as usize].to_vec(),
            );
        for b in [
            Buffer::Planes,
            Buffer::Windows,
            Buffer::Oriented,
            Buffer::Horizontal,
            Buffer::Resized,
            Buffer::Images,
            Buffer::Masks,
            Buffer::Rgbi,
            Buffer::Coefficients,
            Buffer::EntropyStatus,
            Buffer::DecodedCache,
            Buffer::SyncRecords,
        ] {
            buffers = buffers.with(b, garbage(sizes.of(b).max(4)));
        }
        buffers
    }
}

/// Runs planned steps.
pub trait Executor: Sync {
    /// In words, for messages.
    fn name(&self) -> &str;

    /// What it binds and dispatches at most (the limits the cases plan for).
    fn limits(&self) -> DeviceLimits;

    /// Whether it has `kernel` (wgpu has no `pack_rgbi`).
    fn runs(&self, kernel: Kernel) -> bool {
        let _ = kernel;
        true
    }

    /// Whether its arithmetic is the reference's operation for operation (no FMA
    /// contraction), so that elements off the reference at all stay rare (at most 0.1 %).
    fn exact_arithmetic(&self) -> bool {
        false
    }

    /// Runs `steps` over `buffers`, reading every buffer back; `Err` says why it refused
    /// or failed.
    fn try_run(&self, steps: &[Step], buffers: &mut Buffers) -> Result<(), String>;

    /// [`Executor::try_run`], which must succeed.
    fn run(&self, steps: &[Step], buffers: &mut Buffers) {
        if let Err(e) = self.try_run(steps, buffers) {
            panic!("{}: {e}", self.name());
        }
    }

    /// Decodes `samples` and reads the windows back, as the backend's batcher does
    /// (`decode_to_host`); here, a [`BatchPlan`] for [`Executor::limits`] run by
    /// [`Executor::run`].
    fn decode_to_host(&self, samples: &[DeviceSample]) -> Vec<Image8> {
        let mut plan = BatchPlan::new(self.limits());
        plan.plan_decode(samples.iter()).expect("plan");
        let mut buffers = Buffers::for_plan(&plan, samples);
        self.run(plan.steps(), &mut buffers);
        plan.windows_to_host(buffers.get(Buffer::Windows))
            .expect("windows")
    }
}

/// What a backend's batcher (behind `batcher`) decodes with `decode`, which must succeed.
fn decoded<B>(
    batcher: &std::sync::Mutex<B>,
    decode: impl FnOnce(&mut B) -> stoker::Result<Vec<Image8>>,
) -> Vec<Image8> {
    decode(&mut batcher.lock().expect("batcher")).expect("device decode")
}

/// `n` bytes of a recognisable pattern, so that anything a run should have written and
/// did not shows.
pub fn garbage(n: u64) -> Vec<u8> {
    vec![0xA5; n as usize]
}

pub fn words_to_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

pub fn bytes_to_words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// One `#[test]` per case, named after it, on the executor `$executor` evaluates to (an
/// `Option<&Executor>`: `None` skips, having said why).
macro_rules! executor_tests {
    ($executor:expr) => {
        $crate::executor::executor_tests!(@cases $executor;
            orient::orient_launches_match_an_independent_reorientation,
            huffman::huffman_matches_the_oracle_on_random_restart_jpegs,
            huffman::huffman_matches_the_oracle_on_damaged_intervals,
            huffman::huffman_flags_blocks_past_the_simd_range_as_the_oracle_does,
            huffman::huffman_checks_blocks_at_the_edges_of_the_simd_range_as_the_oracle_does,
            huffman::transcoded_files_match_the_oracle_and_the_host_coefficients,
            sync_huffman::sync_huffman_matches_the_oracle_on_random_jpegs,
            sync_huffman::sync_huffman_matches_the_oracle_on_the_bundled_jpegs,
            sync_huffman::sync_huffman_matches_the_oracle_on_damaged_jpegs,
            sync_crop::sync_huffman_matches_the_oracle_on_cropped_jpegs,
            decode::decode_matches_the_oracle_and_the_cpu,
            decode::small_bindings_split_a_decode_into_chunks,
            decode::rotated_jpegs_through_a_batch_plan_match_the_oracle_upright,
            decode::exif_orientation_matches_the_cpu_decoder,
            decode::hybrid_decode_matches_the_cpu_decoder_at_every_scale,
            decode::hardware_decoded_jpegs_through_a_batch_plan_match_the_cpu_decoder,
            augment::augment_matches_the_reference_for_every_dtype_and_layout,
            augment::every_jitter_order_matches_the_reference,
            augment::colour_ops_after_the_jitter_match_the_reference,
            augment::whole_image_ops_match_the_reference,
            augment::policies_match_the_reference,
            augment::erasing_matches_the_reference_for_every_dtype_and_layout,
            augment::large_outputs_take_the_wide_contrast_sum,
            augment::masks_match_the_reference_exactly,
            augment::small_bindings_split_the_augment_and_give_the_same_result,
            augment::f16_rounding_ties_and_overflow_match_half,
            augment::a_batch_plan_decodes_and_augments_like_the_reference,
            augment::short_buffers_are_refused,
            cache::cached_images_come_back_as_they_were_decoded,
            mix::mixing_matches_its_definition_for_every_dtype_and_layout,
        );
    };
    (@cases $executor:expr; $($module:ident :: $case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                if let Some(e) = $executor {
                    $crate::executor::$module::$case(e);
                }
            }
        )*
    };
}
pub(crate) use executor_tests;
