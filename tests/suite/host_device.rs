//! A host stand-in for a GPU (no GPU needed), for the tests of what the pipeline hands a
//! device backend: a [`Backend`] whose [`DeviceBatcher`] reports a hardware JPEG decoder
//! (the [`HardwareDecode`] policy a test gives, as the CUDA backend does on a card with
//! nvJPEG's engines), records how the workers handed it each sample ([`Took`]), decodes on
//! the host (the CPU decoder for whole files, the scalar oracles of the device decode for
//! coefficients) and augments with the reference augmentation into host buffers. Like a
//! hardware decoder it does not say whether a file is damaged: it decodes what it can.
//! And it rejects ([`DeviceError::Rejected`]) the samples a test names, before writing
//! anything, as the contract of [`DeviceBatcher::run`] says.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use stoker::augment::reference::{execute_image, execute_mask, Scratch};
use stoker::backend::device::batcher::downcast_buffers;
use stoker::backend::device::{
    BatchShape, BatcherConfig, DeviceBatcher, DeviceBuffers, DeviceError, DeviceJob, DeviceSample,
    Plane, Rejected,
};
use stoker::backend::Backend;
use stoker::decode::{cpu, DecodeError, DecodeOptions, Image8};
use stoker::{BackendKind, Error, HardwareDecode};

/// How the stand-in device took one sample: whole for a hardware decoder
/// ([`DeviceSample::Encoded`]), packed for the device Huffman path
/// ([`DeviceSample::Entropy`]), as coefficients, or as pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Took {
    Encoded,
    Entropy,
    Coefficients,
    Pixels,
}

/// One call of [`HostBatcher::run`]: each job's sample id and how it came, and the ids
/// rejected.
#[derive(Debug, Clone, Default)]
pub(crate) struct Call {
    pub(crate) jobs: Vec<(u64, Took)>,
    pub(crate) rejected: Vec<u64>,
}

/// The stand-in's record of calls, in the order they ran.
pub(crate) type Calls = Arc<Mutex<Vec<Call>>>;

/// A device with a hardware JPEG decoder, on the host.
#[derive(Debug)]
struct HostDevice {
    /// The samples it rejects, by id.
    reject: BTreeSet<u64>,
    /// The JPEGs its hardware decoder takes.
    hardware: HardwareDecode,
    calls: Calls,
}

impl Backend for HostDevice {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn device(&self) -> String {
        "a host stand-in for a GPU with a hardware JPEG decoder".into()
    }

    fn batcher(&self, _cfg: &BatcherConfig) -> stoker::Result<Option<Box<dyn DeviceBatcher>>> {
        Ok(Some(Box::new(HostBatcher {
            reject: self.reject.clone(),
            hardware: self.hardware,
            calls: Arc::clone(&self.calls),
            scratch: Scratch::default(),
        })))
    }
}

/// The batch buffers of [`HostBatcher`]: host memory.
#[derive(Debug)]
struct HostBuffers {
    images: Vec<u8>,
    masks: Option<Vec<u8>>,
    image_bytes: usize,
    mask_bytes: usize,
}

impl DeviceBuffers for HostBuffers {
    fn has_masks(&self) -> bool {
        self.masks.is_some()
    }

    fn read(&self, plane: Plane, n: usize) -> stoker::Result<Option<Vec<u8>>> {
        let buf = match plane {
            Plane::Images => Some(&self.images),
            Plane::Masks => self.masks.as_ref(),
        };
        let Some(buf) = buf else {
            return Ok(None);
        };
        match buf.get(..n) {
            Some(b) => Ok(Some(b.to_vec())),
            None => Err(DeviceError::ShortRead {
                len: buf.len(),
                requested: n,
            }
            .into()),
        }
    }

    fn release(&mut self) {}
}

#[derive(Debug)]
struct HostBatcher {
    reject: BTreeSet<u64>,
    hardware: HardwareDecode,
    calls: Calls,
    scratch: Scratch,
}

/// The stand-in turns no image upright.
fn upright_only(orientation: u8) -> Result<(), DecodeError> {
    match orientation {
        1 => Ok(()),
        o => Err(DecodeError::Unsupported(format!(
            "the stand-in turns no image upright (orientation {o})"
        ))),
    }
}

/// What the stand-in's decoders make of one sample: whole files as a hardware decoder
/// does (whatever it can decode, damaged or not: it has no strict mode), coefficients
/// with the scalar oracles of the device decode (upright ones only), pixels as they are.
fn host_decode(image: &DeviceSample) -> Result<(Image8, Took), DecodeError> {
    if let DeviceSample::Jpeg { orientation, .. } | DeviceSample::Packed { orientation, .. } = image
    {
        upright_only(*orientation)?;
    }
    match image {
        DeviceSample::Encoded { bytes, .. } => {
            let mut img = Image8::default();
            let opts = DecodeOptions {
                strict: false,
                ..DecodeOptions::default()
            };
            cpu::decode_image(bytes, &opts, &mut img)?;
            Ok((img, Took::Encoded))
        }
        DeviceSample::Jpeg {
            coeffs,
            scale,
            window,
            ..
        } => {
            let img = stoker::decode::jpeg::color::decode_coefficients(coeffs, *scale, *window)?;
            Ok((img, Took::Coefficients))
        }
        DeviceSample::Packed { packed, .. } => {
            let img = stoker::decode::jpeg::color::decode_window(packed);
            Ok((img, Took::Coefficients))
        }
        DeviceSample::Rgb(img) => Ok((img.clone(), Took::Pixels)),
        DeviceSample::Shared(img) => Ok((img.image().clone(), Took::Pixels)),
        // Restart-marked files: the window the device entropy path would decode.
        DeviceSample::Entropy { bytes, opts, .. } => {
            let mut img = Image8::default();
            cpu::decode_image(bytes, opts, &mut img)?;
            Ok((img, Took::Entropy))
        }
        // The stand-in keeps no device cache (it grants none), so plans copy nothing.
        DeviceSample::Cached { .. } => Err(DecodeError::Unsupported(
            "the stand-in keeps no device cache".into(),
        )),
    }
}

impl DeviceBatcher for HostBatcher {
    fn buffers(&self, shape: BatchShape) -> stoker::Result<Box<dyn DeviceBuffers>> {
        let BatchShape {
            slots,
            image_bytes,
            mask_bytes,
        } = shape;
        Ok(Box::new(HostBuffers {
            images: vec![0; slots * image_bytes],
            masks: (mask_bytes > 0).then(|| vec![0; slots * mask_bytes]),
            image_bytes,
            mask_bytes,
        }))
    }

    fn run(
        &mut self,
        jobs: &[DeviceJob],
        mix: Option<&stoker::augment::mix::BatchMix>,
        out: &mut dyn DeviceBuffers,
    ) -> stoker::Result<()> {
        assert!(mix.is_none(), "the stand-in does not mix batches");
        let out = downcast_buffers::<HostBuffers>(out)?;
        assert!(
            jobs.len() * out.image_bytes <= out.images.len(),
            "more jobs than slots"
        );
        // Every sample is decoded (or refused) before anything is written.
        let mut call = Call::default();
        let mut decoded = Vec::with_capacity(jobs.len());
        let mut rejected = Vec::new();
        for (sample, job) in jobs.iter().enumerate() {
            let id = job.plan.id();
            let r = host_decode(&job.image);
            let took = match &r {
                Ok((_, t)) => *t,
                Err(_) => Took::Pixels,
            };
            call.jobs.push((id, took));
            let reason = match r {
                _ if self.reject.contains(&id) => {
                    "the hardware decoder, the GPU decoder and the CPU decoder refused it (the test says so)".to_string()
                }
                Err(e) => format!("the hardware decoder and the CPU decoder refused it: {e}"),
                Ok((img, _)) => {
                    decoded.push(img);
                    continue;
                }
            };
            call.rejected.push(id);
            rejected.push(Rejected { sample, reason });
        }
        self.calls.lock().expect("calls").push(call);
        if !rejected.is_empty() {
            return Err(DeviceError::Rejected(rejected).into());
        }
        let (ib, mb) = (out.image_bytes, out.mask_bytes);
        for (k, (job, img)) in jobs.iter().zip(&decoded).enumerate() {
            let slot = &mut out.images[k * ib..(k + 1) * ib];
            execute_image(&job.plan, img, slot, &mut self.scratch);
            if let (Some(m), Some(masks)) = (&job.mask, out.masks.as_mut()) {
                let dst: &mut [u16] = bytemuck::cast_slice_mut(&mut masks[k * mb..(k + 1) * mb]);
                execute_mask(&job.plan, m, dst);
            }
        }
        Ok(())
    }

    fn decode(&mut self, _images: &[DeviceSample]) -> stoker::Result<()> {
        Ok(())
    }

    fn decode_to_host(&mut self, images: &[DeviceSample]) -> stoker::Result<Vec<Image8>> {
        images
            .iter()
            .map(|i| Ok(host_decode(i)?.0))
            .collect::<Result<_, DecodeError>>()
            .map_err(Error::from)
    }

    fn wait(&self) -> stoker::Result<()> {
        Ok(())
    }

    fn memory_in_flight(&self) -> u64 {
        0
    }

    fn hardware_decode(&self) -> HardwareDecode {
        self.hardware
    }

    fn max_binding(&self) -> u64 {
        1 << 31
    }
}

/// The stand-in device, its hardware decoder taking the JPEGs `hardware` names and
/// rejecting the samples `reject` names, and its record of calls.
pub(crate) fn device(
    reject: &BTreeSet<u64>,
    hardware: HardwareDecode,
) -> (Arc<dyn Backend>, Calls) {
    let calls = Calls::default();
    let d = HostDevice {
        reject: reject.clone(),
        hardware,
        calls: Arc::clone(&calls),
    };
    (Arc::new(d), calls)
}
