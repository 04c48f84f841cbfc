//! burn: a batch as burn tensors on burn's own device (feature `burn`): its wgpu
//! backend (through cubecl) sharing one wgpu device with stoker, or a CPU backend.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use stoker::frameworks::burn as sb;
//! use stoker::{Augment, DType, Dataset, Pipeline};
//!
//! let device = sb::wgpu_device()?; // burn's wgpu device, known to stoker
//! let pipe = Pipeline::builder(Dataset::image_folder("data/train")?.all())
//!     .burn_device(&device) // stoker decodes and augments on the same wgpu device
//!     .augment(Augment::new().resize(64, 64).dtype(DType::F32))
//!     .build()?;
//! for batch in pipe.epoch(0)? {
//!     let t = batch?.to_burn(&device)?;
//!     let (images, labels) = (t.images, t.labels); // Tensor<4> [N, 3, 64, 64], Tensor<1, Int>
//!     # let _ = (images, labels);
//! }
//! # Ok(()) }
//! ```
//!
//! On wgpu the hand-off is one copy from the batch's buffer into a tensor burn allocated,
//! recorded on the queue both share: burn's pending work is submitted first, the copy
//! next, and whatever burn records on the tensor after it, so the order is the queue's
//! and nothing waits on the host. (cubecl cannot adopt a buffer it did not allocate, and
//! the batch's buffer goes back to the pipeline's ring when the batch is dropped.)
//!
//! burn must be built without its `fusion` feature for the device path (burn-wgpu's
//! default features turn it on): fusion wraps tensors in handles that stoker cannot
//! reach. `burn = { version = "0.22", default-features = false, features = ["std",
//! "wgpu", ...] }` does.

use std::sync::Mutex;

use burn::tensor::{DType as BurnDType, Device, Int, Tensor, TensorData};

use crate::augment::DType;
use crate::backend::device::OnDevice;
use crate::backend::wgpu::batch::WgpuBatchBuffers;
use crate::backend::wgpu::{WgpuBatch, WgpuContext};
use crate::error::{Error, Result};
use crate::pipeline::{Batch, PipelineBuilder};

/// A batch as burn tensors.
#[derive(Debug, Clone)]
pub struct BurnBatch {
    /// The images, `[N, 3, H, W]` (or `[N, H, W, 3]`, following the batch's layout), as
    /// `F32` or `F16` floats (the batch's dtype; a `u8` batch is an error on wgpu, whose
    /// shaders have no 8-bit storage, and becomes `F32` 0-255 values on the CPU).
    pub images: Tensor<4>,
    /// The class labels, `[N]`; `None` when no sample of the batch has one.
    pub labels: Option<Tensor<1, Int>>,
    /// The label masks, `[N, H, W]` class ids, for segmentation sets.
    pub masks: Option<Tensor<3, Int>>,
}

/// A wgpu device burn and stoker share: the burn device and stoker's context on the
/// handles it runs on (the pipelines built for the device run on that very context).
struct Shared {
    device: Device,
    ctx: WgpuContext,
}

/// The burn wgpu devices whose wgpu handles stoker knows (burn does not hand out the
/// handles of a device it set up itself), made by [`wgpu_device`] or [`share_wgpu`].
static SHARED: Mutex<Vec<Shared>> = Mutex::new(Vec::new());

fn burn_err(e: impl std::fmt::Display) -> Error {
    Error::Framework {
        framework: "burn",
        reason: e.to_string(),
    }
}

fn remember(device: &Device, wgpu: &::wgpu::Device, queue: &::wgpu::Queue) -> Result<()> {
    let mut shared = SHARED
        .lock()
        .map_err(|_| Error::poisoned("registry of shared burn devices"))?;
    shared.push(Shared {
        device: device.clone().without_autodiff(),
        ctx: WgpuContext::from_device(wgpu.clone(), queue.clone()),
    });
    Ok(())
}

/// stoker's context on the wgpu handles of `device`, if stoker shares it.
fn shared_context(device: &Device) -> Result<Option<WgpuContext>> {
    let shared = SHARED
        .lock()
        .map_err(|_| Error::poisoned("registry of shared burn devices"))?;
    Ok(shared
        .iter()
        .find(|s| s.device == *device)
        .map(|s| s.ctx.clone()))
}

/// Brings up burn's wgpu runtime on its default adapter (a hardware GPU first; a software
/// one such as lavapipe where it is the only adapter) and returns its device, which
/// [`PipelineBuilder::burn_device`] then runs stoker on. Call it once and clone the
/// device (later calls return it again); for training, `device.clone().autodiff()`.
pub fn wgpu_device() -> Result<Device> {
    // burn brings its default runtime up once: later calls get the same device.
    static DEFAULT: Mutex<Option<Device>> = Mutex::new(None);
    let mut default = DEFAULT
        .lock()
        .map_err(|_| Error::poisoned("burn's default wgpu device"))?;
    if let Some(d) = default.as_ref() {
        return Ok(d.clone());
    }
    let (device, setup) = Device::wgpu_options().init_with_setup().map_err(burn_err)?;
    remember(&device, &setup.device, &setup.queue)?;
    *default = Some(device.clone());
    Ok(device)
}

/// Registers wgpu handles the application made itself with burn (once per setup), so
/// that burn, stoker and the application's own passes share them; returns the burn
/// device.
pub fn share_wgpu(setup: burn::tensor::wgpu::WgpuSetup) -> Result<Device> {
    let (wgpu, queue) = (setup.device.clone(), setup.queue.clone());
    let device = Device::wgpu_options()
        .setup(setup)
        .init()
        .map_err(burn_err)?;
    remember(&device, &wgpu, &queue)?;
    Ok(device)
}

/// Whether `device` is a wgpu device of burn's (shared with stoker or not).
fn is_wgpu(device: &Device) -> bool {
    matches!(
        device.clone().without_autodiff().as_dispatch(),
        burn_dispatch::DispatchDevice::Cube(cubecl::Device::Wgpu(_))
    )
}

impl PipelineBuilder {
    /// Runs the pipeline where burn's `device` is: on the wgpu backend on the very wgpu
    /// device and queue burn uses, for a device from [`wgpu_device`] or [`share_wgpu`]
    /// (a software adapter is then allowed: it is the one burn runs on), or on the CPU
    /// backend for burn's CPU backends (`NdArray`, `Flex`). Another device (a wgpu
    /// device stoker was not given the handles of, CUDA, ROCm) is an [`Error::Config`]
    /// at [`PipelineBuilder::build`].
    pub fn burn_device(self, device: &Device) -> Self {
        let plain = device.clone().without_autodiff();
        match shared_context(&plain) {
            Ok(Some(ctx)) => return self.wgpu_context(ctx).allow_software_gpu(true),
            Ok(None) => {}
            Err(e) => return self.refuse("burn_device", e.to_string()),
        }
        if is_wgpu(&plain) {
            return self.refuse(
                "burn_device",
                "stoker does not know the wgpu handles of this burn device: make it with \
                 stoker::frameworks::burn::wgpu_device() or share_wgpu(setup)",
            );
        }
        if is_host(&plain) {
            return self.backend(crate::BackendKind::Cpu);
        }
        self.refuse(
            "burn_device",
            format!("stoker cannot run on the burn device {plain:?} (wgpu and the CPU only)"),
        )
    }
}

/// Whether `device` is one of burn's CPU backends.
fn is_host(device: &Device) -> bool {
    matches!(
        device.as_dispatch(),
        burn_dispatch::DispatchDevice::NdArray(_)
    ) || format!("{device:?}").contains("Flex")
}

impl Batch {
    /// The batch as burn tensors on `device` (see [`BurnBatch`]).
    ///
    /// - A host batch (CPU backend) becomes tensors by one copy, onto any device.
    /// - A wgpu batch becomes tensors on the same wgpu device (one that
    ///   [`PipelineBuilder::burn_device`] was given) by one device-to-device copy per
    ///   plane on the shared queue, read back to the host never.
    /// - A device batch wanted on another device is an [`Error::DeviceMismatch`].
    pub fn to_burn(&self, device: &Device) -> Result<BurnBatch> {
        let labels = self.burn_labels(device)?;
        if !self.on_device() {
            return self.host_to_burn(device, labels);
        }
        let plain = device.clone().without_autodiff();
        let bufs = self.device_buffers_as::<WgpuBatchBuffers>();
        if let (Some(bufs), Some(ctx)) = (bufs, shared_context(&plain)?) {
            // The batch must live on burn's own wgpu device (a pipeline built with
            // `burn_device`): a copy between the buffers of two devices is not a transfer.
            if bufs.context().same_as(&ctx) {
                return self.wgpu_to_burn(
                    &bufs.images,
                    (ctx.device(), ctx.queue()),
                    device,
                    labels,
                );
            }
        }
        Err(Error::DeviceMismatch {
            batch: super::batch_location(self),
            wanted: format!("{plain:?}"),
            hint: "build the pipeline with burn_device(&device) on a device from \
                   stoker::frameworks::burn::wgpu_device() or share_wgpu(setup)"
                .into(),
        })
    }

    /// `[N]` int labels (see [`super::labels`]).
    fn burn_labels(&self, device: &Device) -> Result<Option<Tensor<1, Int>>> {
        Ok(super::labels(self, "burn")?.map(|values| {
            let wide: Vec<i64> = values.into_iter().map(i64::from).collect();
            let n = wide.len();
            Tensor::from_data(TensorData::new(wide, [n]), device)
        }))
    }

    fn host_to_burn(&self, device: &Device, labels: Option<Tensor<1, Int>>) -> Result<BurnBatch> {
        let shape = self.shape();
        let data = match self.dtype() {
            DType::U8 => TensorData::new(
                self.images::<u8>()?
                    .iter()
                    .map(|&v| f32::from(v))
                    .collect::<Vec<f32>>(),
                shape,
            ),
            DType::F16 => TensorData::new(self.images::<half::f16>()?.to_vec(), shape),
            DType::F32 => TensorData::new(self.images::<f32>()?.to_vec(), shape),
        };
        let images = Tensor::<4>::from_data(data, device);
        let masks = match self.masks() {
            Some(m) => {
                let wide: Vec<i64> = m.iter().map(|&v| i64::from(v)).collect();
                Some(Tensor::<3, Int>::from_data(
                    TensorData::new(wide, super::mask_shape(self)),
                    device,
                ))
            }
            None => None,
        };
        Ok(BurnBatch {
            images,
            labels,
            masks,
        })
    }

    fn wgpu_to_burn(
        &self,
        images: &::wgpu::Buffer,
        (wgpu, queue): (&::wgpu::Device, &::wgpu::Queue),
        device: &Device,
        labels: Option<Tensor<1, Int>>,
    ) -> Result<BurnBatch> {
        let plain = device.clone().without_autodiff();
        let dtype = match self.dtype() {
            DType::F32 => BurnDType::F32,
            DType::F16 => BurnDType::F16,
            DType::U8 => {
                return Err(burn_err(
                    "a u8 batch cannot become a burn tensor on wgpu (its shaders have no \
                     8-bit storage): set Augment::dtype(DType::F32) or F16",
                ))
            }
        };
        let shape = self.shape();
        let bytes = (self.images_len_bytes() as u64).next_multiple_of(4);
        let mut enc = wgpu.create_command_encoder(&::wgpu::CommandEncoderDescriptor {
            label: Some("stoker: batch to burn"),
        });
        let t = Tensor::<4>::zeros(shape, (&plain, dtype));
        let keep = copy_into(&t, images, bytes, &mut enc)?;
        let packed = match self.wgpu_masks() {
            Some(m) => Some(copy_masks(self, m, &plain, &mut enc)?),
            None => None,
        };
        // The copies go to the queue before burn records anything that reads the tensors
        // (cubecl may submit its own work at any operation).
        queue.submit([enc.finish()]);
        drop(keep);
        let masks = packed.map(|(packed, keep)| {
            drop(keep);
            unpack_masks(packed, super::mask_shape(self)).to_device(device)
        });
        Ok(BurnBatch {
            images: t.to_device(device),
            labels,
            masks,
        })
    }
}

/// The wgpu memory of a burn tensor, kept in place while held.
type Resource = cubecl_runtime::storage::ManagedResource<cubecl_wgpu::WgpuResource>;

/// Records a copy of the first `bytes` of `src` into the memory of `t` (a tensor burn
/// just allocated on a wgpu device), after submitting the work burn has recorded, so the
/// copy lands after it on the shared queue.
fn copy_into(
    t: &Tensor<4>,
    src: &::wgpu::Buffer,
    bytes: u64,
    enc: &mut ::wgpu::CommandEncoder,
) -> Result<Resource> {
    let prim = t
        .clone()
        .try_into_primitive::<burn_wgpu::CubeBackend>()
        .map_err(|e| burn_err(format!("the tensor is not a cubecl tensor: {e:?}")))?;
    copy_into_primitive(&prim, src, bytes, enc)
}

fn copy_into_primitive(
    prim: &burn_wgpu::CubeTensor,
    src: &::wgpu::Buffer,
    bytes: u64,
    enc: &mut ::wgpu::CommandEncoder,
) -> Result<Resource> {
    let res = prim
        .client
        .get_resource::<cubecl_wgpu::WgpuServer<cubecl_wgpu::AutoCompiler>>(prim.handle.clone())
        .map_err(burn_err)?;
    // Burn's fill of the tensor (and all it recorded before) goes to the queue first.
    prim.client.flush().map_err(burn_err)?;
    let r = res.resource();
    if bytes > r.size || bytes > src.size() {
        return Err(Error::internal(format!(
            "a burn tensor of {} bytes for a batch plane of {bytes}",
            r.size
        )));
    }
    enc.copy_buffer_to_buffer(src, 0, &r.buffer, r.offset, bytes);
    Ok(res)
}

/// Records the copy of the batch's `u16` masks into an int tensor of half as many `i32`s
/// (each holds a pair), for [`unpack_masks`] once the copy is submitted.
fn copy_masks(
    batch: &Batch,
    src: &::wgpu::Buffer,
    device: &Device,
    enc: &mut ::wgpu::CommandEncoder,
) -> Result<(Tensor<1, Int>, Resource)> {
    let [n, h, w] = super::mask_shape(batch);
    let words = (n * h * w).div_ceil(2);
    let packed = Tensor::<1, Int>::zeros([words], (device, BurnDType::I32));
    let prim = packed
        .clone()
        .try_into_primitive::<burn_wgpu::CubeBackend>()
        .map_err(|e| burn_err(format!("the tensor is not a cubecl tensor: {e:?}")))?;
    let keep = copy_into_primitive(&prim, src, 4 * words as u64, enc)?;
    Ok((packed, keep))
}

/// The pairs of `u16` class ids in `packed` split apart by burn's integer ops on the
/// device, as `[N, H, W]`. Little-endian: the first id of a pair is the low half.
fn unpack_masks(packed: Tensor<1, Int>, [n, h, w]: [usize; 3]) -> Tensor<3, Int> {
    let words = packed.dims()[0];
    let lo = packed.clone().bitwise_and_scalar(0xffff);
    let hi = packed
        .bitwise_right_shift_scalar(16)
        .bitwise_and_scalar(0xffff);
    let pairs: Tensor<2, Int> = Tensor::stack(vec![lo, hi], 1);
    pairs
        .reshape([2 * words])
        .narrow(0, 0, n * h * w)
        .reshape([n, h, w])
}
