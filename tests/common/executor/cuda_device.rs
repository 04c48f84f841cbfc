//! The CUDA kernels on a GPU: as the backend compiles (NVRTC) and loads them, each step launched
//! on the device's stream with the backend's [`KernelArgs`]; decodes through its
//! [`CudaBatcher`]. Skips where there is no CUDA device unless `STOKER_REQUIRE_CUDA=1`
//! (set on GPU machines).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use stoker::backend::cuda::batch::CudaBatcher;
use stoker::backend::cuda::cudarc::driver::{
    result, CudaFunction, DevicePtr, DriverError, LaunchConfig, PushKernelArg,
};
use stoker::backend::cuda::memory::KernelArgs;
use stoker::backend::cuda::{kernels, CudaDevice};
use stoker::backend::device::launch::MAX_BINDINGS;
use stoker::backend::device::{Binding, DeviceLimits, DeviceSample, Kernel, Step};
use stoker::decode::Image8;

use super::{Buffers, Executor};

/// A CUDA device with every kernel loaded.
pub struct CudaExecutor {
    device: CudaDevice,
    functions: HashMap<Kernel, CudaFunction>,
    batcher: Mutex<CudaBatcher>,
}

/// The executor on device 0, built once per test binary; `None` (said on stderr) without
/// a CUDA device, unless `STOKER_REQUIRE_CUDA=1`.
pub fn get() -> Option<&'static CudaExecutor> {
    static EXEC: OnceLock<Result<CudaExecutor, String>> = OnceLock::new();
    let exec = EXEC.get_or_init(|| CudaDevice::new(0).map(load).map_err(|e| e.to_string()));
    crate::common::require_or_skip(exec.as_ref(), "STOKER_REQUIRE_CUDA", "CUDA device")
}

/// Loads every kernel on `device` as the backend does (a device without NVRTC or whose
/// kernels do not load fails the test).
fn load(device: CudaDevice) -> CudaExecutor {
    let (major, minor) = device.capability();
    let loaded = kernels::load(device.context(), major, minor);
    let functions = loaded.unwrap_or_else(|e| panic!("{e}")).functions;
    let batcher = CudaBatcher::new(&device, 2).expect("the batcher");
    CudaExecutor {
        device,
        functions,
        batcher: Mutex::new(batcher),
    }
}

fn driver(e: DriverError) -> String {
    format!("cuda: {e}")
}

impl Executor for CudaExecutor {
    fn name(&self) -> &str {
        self.device.name()
    }

    fn limits(&self) -> DeviceLimits {
        DeviceLimits::UNBOUNDED
    }

    /// One allocation per buffer; every binding checked against it before anything is
    /// enqueued, then the launches and copies on the device's stream.
    fn try_run(&self, steps: &[Step], buffers: &mut Buffers) -> Result<(), String> {
        let stream = self.device.stream();
        self.device.context().bind_to_thread().map_err(driver)?;
        let mut slices = Vec::with_capacity(buffers.0.len());
        for (_, bytes) in &buffers.0 {
            // At least one word: the driver allocates nothing for 0 bytes.
            let mut padded = bytes.clone();
            padded.resize(bytes.len().max(4), 0);
            slices.push(stream.clone_htod(&padded).map_err(driver)?);
        }
        // The guard only records that the stream uses the slice: the stream is ours alone.
        let bases: Vec<u64> = slices.iter().map(|s| s.device_ptr(stream).0).collect();
        let address = |b: &Binding| -> Result<u64, String> {
            let i = buffers
                .index(b.buffer)
                .ok_or_else(|| format!("the steps bind {:?}, which the run lacks", b.buffer))?;
            let len = buffers.0[i].1.len() as u64;
            if b.offset + b.size > len {
                return Err(format!(
                    "the {:?} buffer holds {len} bytes, a step binds {}..{}",
                    b.buffer,
                    b.offset,
                    b.offset + b.size
                ));
            }
            Ok(bases[i] + b.offset)
        };
        for step in steps {
            match step {
                Step::Launch(l) if l.bindings.len() > MAX_BINDINGS => {
                    return Err(format!(
                        "{} binds {} buffers",
                        l.kernel.name(),
                        l.bindings.len()
                    ));
                }
                Step::Launch(l) => l.bindings.iter().try_for_each(|b| address(b).map(|_| ()))?,
                Step::Copy { src, dst } if src.size == dst.size => {
                    address(src)?;
                    address(dst)?;
                }
                other => return Err(format!("cannot run {other:?}")),
            }
        }
        for step in steps {
            match step {
                Step::Launch(l) => {
                    let mut args = KernelArgs {
                        params: l.params,
                        ..KernelArgs::default()
                    };
                    let slots = args.ptr.iter_mut().zip(&mut args.words);
                    for ((ptr, words), b) in slots.zip(&l.bindings) {
                        (*ptr, *words) = (address(b)?, (b.size / 4) as u32);
                    }
                    let cfg = LaunchConfig {
                        grid_dim: (l.grid[0], l.grid[1], 1),
                        block_dim: (l.kernel.workgroup(), 1, 1),
                        shared_mem_bytes: 0,
                    };
                    let mut launch = stream.launch_builder(&self.functions[&l.kernel]);
                    launch.arg(&args);
                    // SAFETY: every kernel takes one `KernelArgs` by value, which is what
                    // is pushed; each address in it was checked above to lie, with its
                    // length, within one of `slices`, which outlive the work (the stream
                    // is synchronised below, before they drop).
                    unsafe { launch.launch(cfg) }.map_err(driver)?;
                }
                Step::Copy { src, dst } => {
                    let (to, from) = (address(dst)?, address(src)?);
                    // SAFETY: both ranges were checked above to lie within `slices`, which
                    // outlive the copy (the stream is synchronised below).
                    unsafe {
                        result::memcpy_dtod_async(to, from, src.size as usize, stream.cu_stream())
                    }
                    .map_err(driver)?;
                }
                Step::Hardware | Step::EntropyCheck { .. } => unreachable!("refused above"),
            }
        }
        stream.synchronize().map_err(driver)?;
        for ((_, bytes), slice) in buffers.0.iter_mut().zip(&slices) {
            let len = bytes.len();
            *bytes = stream.clone_dtoh(slice).map_err(driver)?;
            bytes.truncate(len);
        }
        Ok(())
    }

    /// Through the backend's [`CudaBatcher::decode_to_host`].
    fn decode_to_host(&self, samples: &[DeviceSample]) -> Vec<Image8> {
        super::decoded(&self.batcher, |b| b.decode_to_host(samples))
    }
}
