//! Which decoder takes each encoded JPEG of a batch, and what happens when one fails.
//!
//! nvJPEG's `nvjpegDecodeBatchedSupported` passes images that the hardware engines then
//! reject (seen in the field as `JPEG_NOT_SUPPORTED` and `INVALID_PARAMETER`), and one such
//! image fails the whole call. One bad image must stay one sample's problem, so each image
//! goes down this chain until something decodes it:
//!
//! 1. the hardware engines, for the images they say they support, in one call;
//! 2. nvJPEG's GPU decoder, for the rest (the engines' refusals, and every image of an
//!    engine call that failed as a whole), in one call;
//! 3. the GPU decoder again, one image per call, for the images of a GPU call that failed
//!    as a whole;
//! 4. the CPU decoder (as strict as the pipeline), uploaded;
//! 5. nothing: the sample is rejected with each decoder's reason, and the pipeline
//!    applies its `OnError` policy to it, as the CPU backend would.
//!
//! The chain is plain host logic over the decoders as closures, so it is tested here with
//! fake decoders; [`super::batch`] runs it with nvJPEG and the CPU decoder.

use std::fmt::Display;

use super::nvjpeg::Refusal;
use crate::backend::device::DecodePaths;
use crate::error::{DecodeError, Error};

/// One call on a batched decoder for some images (indices into the batch's encoded
/// images): `Err(why)` when the call failed as a whole (every image to be retried),
/// else a result per image, in the order given (`Err(why)`: that image was refused).
pub(crate) type Attempt<E> = Result<Vec<Result<(), E>>, E>;

/// A batched decoder: decodes the images whose indices it is given.
pub(crate) type BatchDecode<'a, E> = dyn FnMut(&[usize]) -> Attempt<E> + 'a;

/// A batched decoder's call that returned no result for an image it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the decoder gave no result for the image")]
pub(crate) struct NoResult;

/// Why one decoder of the chain did not decode an image (or failed a call as a whole).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ImageFailure {
    /// nvJPEG or the driver failed (the call, or the upload of the CPU's pixels).
    #[error(transparent)]
    Call(Box<Error>),
    /// nvJPEG left the image out of its call (checked on the host).
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The CPU decoder rejected the image.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The CPU decoded another size than the header that planned the batch says.
    #[error(
        "decoded {}x{}, but its header says {}x{}",
        decoded[0],
        decoded[1],
        header[0],
        header[1]
    )]
    Size {
        /// Width and height decoded.
        decoded: [u32; 2],
        /// Width and height in the header.
        header: [u32; 2],
    },
    /// The decoder gave no result for the image.
    #[error(transparent)]
    NoResult(#[from] NoResult),
}

impl From<Error> for ImageFailure {
    fn from(e: Error) -> Self {
        ImageFailure::Call(Box::new(e))
    }
}

/// Which decoder took an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Path {
    /// The hardware engines.
    Hardware,
    /// nvJPEG's GPU decoder.
    GpuDecoder,
    /// The CPU decoder.
    Cpu,
    /// Nothing: why each decoder refused it.
    Rejected(String),
}

/// Runs the chain over `n` images: `supported[k]` says whether the engines claim image
/// `k`; `engine` and `gpu` are the two nvJPEG decoders where they are open; `cpu` decodes
/// one image on the host. Returns each image's path, and counts them into `paths`.
pub(crate) fn decode_chain<E: Display + From<NoResult>>(
    supported: &[bool],
    mut engine: Option<&mut BatchDecode<'_, E>>,
    mut gpu: Option<&mut BatchDecode<'_, E>>,
    cpu: &mut dyn FnMut(usize) -> Result<(), E>,
    paths: &mut DecodePaths,
) -> Vec<Path> {
    let n = supported.len();
    let mut path: Vec<Option<Path>> = vec![None; n];
    // Why each decoder refused each image, for the rejection message.
    let mut why: Vec<Vec<String>> = vec![Vec::new(); n];
    let mut for_gpu: Vec<usize> = Vec::new();
    let claimed: Vec<usize> = (0..n).filter(|&k| supported[k]).collect();
    match engine.as_mut() {
        Some(decode) if !claimed.is_empty() => match decode(&claimed) {
            Ok(results) => {
                for (&k, r) in claimed.iter().zip(results) {
                    match r {
                        Ok(()) => path[k] = Some(Path::Hardware),
                        Err(e) => {
                            why[k].push(format!("hardware decoder: {e}"));
                            for_gpu.push(k);
                        }
                    }
                }
                log_refusals("the JPEG engines", &for_gpu, claimed.len(), &why);
            }
            Err(e) => {
                let then = format!("its {} images go to nvJPEG's GPU decoder", claimed.len());
                call_failed(
                    "the JPEG engines",
                    &e,
                    &then,
                    &mut paths.engine_batches_failed,
                );
                for &k in &claimed {
                    why[k].push(format!("hardware decoder: the batch failed: {e}"));
                    for_gpu.push(k);
                }
            }
        },
        _ => for_gpu.extend(claimed.iter().copied()),
    }
    for_gpu.extend((0..n).filter(|&k| !supported[k]));
    for_gpu.sort_unstable();
    let mut for_cpu: Vec<usize> = Vec::new();
    match gpu.as_mut() {
        Some(decode) if !for_gpu.is_empty() => {
            let mut take = |k: usize, r: Result<(), E>, for_cpu: &mut Vec<usize>| match r {
                Ok(()) => path[k] = Some(Path::GpuDecoder),
                Err(e) => {
                    why[k].push(format!("GPU decoder: {e}"));
                    for_cpu.push(k);
                }
            };
            match decode(&for_gpu) {
                Ok(results) => {
                    for (&k, r) in for_gpu.iter().zip(results) {
                        take(k, r, &mut for_cpu);
                    }
                    log_refusals("nvJPEG's GPU decoder", &for_cpu, for_gpu.len(), &why);
                }
                Err(e) if for_gpu.len() == 1 => {
                    paths.gpu_batches_failed += 1;
                    take(for_gpu[0], Err(e), &mut for_cpu);
                }
                Err(e) => {
                    let then = format!("retrying its {} images one by one", for_gpu.len());
                    call_failed(
                        "nvJPEG's GPU decoder",
                        &e,
                        &then,
                        &mut paths.gpu_batches_failed,
                    );
                    for &k in &for_gpu {
                        let r = match decode(&[k]) {
                            Ok(mut results) => {
                                results.pop().unwrap_or_else(|| Err(E::from(NoResult)))
                            }
                            Err(e) => {
                                paths.gpu_batches_failed += 1;
                                Err(e)
                            }
                        };
                        take(k, r, &mut for_cpu);
                    }
                }
            }
        }
        _ => {
            for &k in &for_gpu {
                why[k].push("GPU decoder: not open".to_string());
            }
            for_cpu.extend(for_gpu.iter().copied());
        }
    }
    for k in for_cpu {
        path[k] = Some(match cpu(k) {
            Ok(()) => Path::Cpu,
            Err(e) => {
                why[k].push(format!("CPU decoder: {e}"));
                Path::Rejected(why[k].join("; "))
            }
        });
    }
    let out: Vec<Path> = path
        .into_iter()
        .zip(why)
        .map(|(p, w)| p.unwrap_or_else(|| Path::Rejected(w.join("; "))))
        .collect();
    for p in &out {
        match p {
            Path::Hardware => paths.hardware += 1,
            Path::GpuDecoder => paths.gpu_decoder += 1,
            Path::Cpu => paths.cpu += 1,
            Path::Rejected(_) => paths.rejected += 1,
        }
    }
    out
}

/// Logs that a whole call on `decoder` failed with `e`, and `then`, what becomes of its
/// images; counts it into `failed`.
fn call_failed(decoder: &str, e: &dyn Display, then: &str, failed: &mut u64) {
    log::info!("cuda: a call on {decoder} failed ({e}); {then}");
    *failed += 1;
}

/// Logs, once per call, how many of `asked` images `decoder` refused one by one (`refused`,
/// their reasons last in `why`): the first reason says what to look at.
fn log_refusals(decoder: &str, refused: &[usize], asked: usize, why: &[Vec<String>]) {
    if let Some(first) = refused.first().and_then(|&k| why.get(k)?.last()) {
        log::info!(
            "cuda: {decoder} refused {} of {asked} images (the first: {first})",
            refused.len()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// What the fake decoders say.
    #[derive(Debug, thiserror::Error)]
    enum FakeError {
        #[error("{0}")]
        Said(&'static str),
        #[error(transparent)]
        NoResult(#[from] NoResult),
    }

    /// A fake nvJPEG decoder: fails the whole call when it holds any image of
    /// `poison`, refuses the images of `refuse` one by one, decodes the rest; records its
    /// calls.
    struct Fake {
        poison: HashSet<usize>,
        refuse: HashSet<usize>,
        calls: Vec<Vec<usize>>,
    }

    impl Fake {
        fn new(poison: &[usize], refuse: &[usize]) -> Fake {
            Fake {
                poison: poison.iter().copied().collect(),
                refuse: refuse.iter().copied().collect(),
                calls: Vec::new(),
            }
        }

        fn decode(&mut self, images: &[usize]) -> Attempt<FakeError> {
            self.calls.push(images.to_vec());
            if images.iter().any(|k| self.poison.contains(k)) {
                return Err(FakeError::Said("NVJPEG_STATUS_JPEG_NOT_SUPPORTED (4)"));
            }
            Ok(images
                .iter()
                .map(|k| match self.refuse.contains(k) {
                    true => Err(FakeError::Said("NVJPEG_STATUS_BAD_JPEG (3)")),
                    false => Ok(()),
                })
                .collect())
        }
    }

    fn run(
        supported: &[bool],
        engine: Option<&mut Fake>,
        gpu: Option<&mut Fake>,
        cpu_fails: &[usize],
    ) -> (Vec<Path>, DecodePaths, Vec<usize>) {
        let mut paths = DecodePaths::default();
        let mut cpu_calls = Vec::new();
        let mut cpu = |k: usize| {
            cpu_calls.push(k);
            match cpu_fails.contains(&k) {
                true => Err(FakeError::Said("JPEG data ends early")),
                false => Ok(()),
            }
        };
        let mut e = engine.map(|f| move |i: &[usize]| f.decode(i));
        let mut g = gpu.map(|f| move |i: &[usize]| f.decode(i));
        let out = decode_chain(
            supported,
            e.as_mut().map(|f| f as &mut BatchDecode<'_, FakeError>),
            g.as_mut().map(|f| f as &mut BatchDecode<'_, FakeError>),
            &mut cpu,
            &mut paths,
        );
        (out, paths, cpu_calls)
    }

    #[test]
    fn everything_on_the_engines_when_they_take_it() {
        let mut engine = Fake::new(&[], &[]);
        let mut gpu = Fake::new(&[], &[]);
        let (out, paths, cpu) = run(&[true; 4], Some(&mut engine), Some(&mut gpu), &[]);
        assert_eq!(out, vec![Path::Hardware; 4]);
        assert_eq!(engine.calls, vec![vec![0, 1, 2, 3]]);
        assert!(gpu.calls.is_empty() && cpu.is_empty());
        assert_eq!(paths.hardware, 4);
    }

    #[test]
    fn an_engine_batch_that_fails_goes_to_the_gpu_decoder_as_a_set() {
        // Image 2 passes the support check and then fails the engines' call.
        let mut engine = Fake::new(&[2], &[]);
        let mut gpu = Fake::new(&[], &[]);
        let supported = [true, false, true, true];
        let (out, paths, cpu) = run(&supported, Some(&mut engine), Some(&mut gpu), &[]);
        assert_eq!(out, vec![Path::GpuDecoder; 4]);
        assert_eq!(engine.calls, vec![vec![0, 2, 3]]);
        // The failed set and the unsupported image, in one call.
        assert_eq!(gpu.calls, vec![vec![0, 1, 2, 3]]);
        assert!(cpu.is_empty());
        assert_eq!(paths.engine_batches_failed, 1);
        assert_eq!(paths.gpu_decoder, 4);
    }

    #[test]
    fn a_failing_gpu_batch_is_retried_image_by_image_then_on_the_cpu() {
        let mut engine = Fake::new(&[1], &[]);
        let mut gpu = Fake::new(&[1], &[]);
        let (out, paths, cpu) = run(&[true; 3], Some(&mut engine), Some(&mut gpu), &[]);
        assert_eq!(out, vec![Path::GpuDecoder, Path::Cpu, Path::GpuDecoder]);
        assert_eq!(gpu.calls, vec![vec![0, 1, 2], vec![0], vec![1], vec![2]]);
        assert_eq!(cpu, vec![1]);
        assert_eq!(
            (paths.engine_batches_failed, paths.gpu_batches_failed),
            (1, 2)
        );
        assert_eq!((paths.gpu_decoder, paths.cpu, paths.hardware), (2, 1, 0));
    }

    #[test]
    fn what_nothing_decodes_is_rejected_with_every_reason() {
        let mut engine = Fake::new(&[], &[0]);
        let mut gpu = Fake::new(&[], &[0]);
        let (out, paths, _) = run(&[true, true], Some(&mut engine), Some(&mut gpu), &[0]);
        assert_eq!(out[1], Path::Hardware);
        let Path::Rejected(why) = &out[0] else {
            panic!("not rejected: {:?}", out[0]);
        };
        assert!(
            why.contains("hardware decoder: NVJPEG_STATUS_BAD_JPEG"),
            "{why}"
        );
        assert!(why.contains("GPU decoder: NVJPEG_STATUS_BAD_JPEG"), "{why}");
        assert!(why.contains("CPU decoder: JPEG data ends early"), "{why}");
        assert_eq!((paths.rejected, paths.hardware), (1, 1));
    }

    #[test]
    fn without_nvjpeg_decoders_the_cpu_decodes() {
        let (out, paths, cpu) = run(&[true, false], None, None, &[]);
        assert_eq!(out, vec![Path::Cpu, Path::Cpu]);
        assert_eq!(cpu, vec![0, 1]);
        assert_eq!(paths.cpu, 2);
        // No GPU decoder: the engines' refusals go straight to the CPU.
        let mut engine = Fake::new(&[], &[1]);
        let (out, _, cpu) = run(&[true, true], Some(&mut engine), None, &[1]);
        assert_eq!(out[0], Path::Hardware);
        assert!(matches!(&out[1], Path::Rejected(w) if w.contains("GPU decoder: not open")));
        assert_eq!(cpu, vec![1]);
    }

    #[test]
    fn random_failures_never_lose_an_image() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        for _ in 0..200 {
            let n = 1 + next(12) as usize;
            let pick = |next: &mut dyn FnMut(u64) -> u64, p: u64| -> Vec<usize> {
                (0..n).filter(|_| next(100) < p).collect()
            };
            let supported: Vec<bool> = (0..n).map(|_| next(4) != 0).collect();
            let mut engine = Fake::new(&pick(&mut next, 10), &pick(&mut next, 10));
            let mut gpu = Fake::new(&pick(&mut next, 10), &pick(&mut next, 10));
            let cpu_fails = pick(&mut next, 30);
            let (out, paths, cpu) = run(&supported, Some(&mut engine), Some(&mut gpu), &cpu_fails);
            assert_eq!(out.len(), n);
            let total = paths.hardware + paths.gpu_decoder + paths.cpu + paths.rejected;
            assert_eq!(total, n as u64);
            for (k, p) in out.iter().enumerate() {
                // Rejected only when the CPU was asked and failed; the CPU only after both
                // nvJPEG decoders refused (or failed) the image.
                assert_eq!(
                    matches!(p, Path::Rejected(_)),
                    cpu.contains(&k) && cpu_fails.contains(&k)
                );
                if *p == Path::Hardware {
                    assert!(supported[k] && !engine.poison.contains(&k));
                }
            }
            // Each image was sent to the CPU at most once.
            let mut seen = HashSet::new();
            assert!(cpu.iter().all(|k| seen.insert(*k)));
        }
    }
}
