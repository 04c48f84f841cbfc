//! The CUDA batcher behind the interface every device backend shares
//! ([`DeviceBatcher`], [`DeviceBuffers`]).

use super::*;

impl DeviceBuffers for CudaBatchBuffers {
    fn has_masks(&self) -> bool {
        self.masks.is_some()
    }

    fn read(&self, plane: Plane, n: usize) -> Result<Option<Vec<u8>>> {
        match plane.pick(&self.images, self.masks.as_ref()) {
            Some(buf) if n <= buf.len() => {
                // On the consumer's stream, which already waits for the batch.
                let bytes = self
                    .device
                    .stream()
                    .clone_dtoh(&buf.slice(..n))
                    .map_err(device_err)?;
                Ok(Some(bytes))
            }
            Some(buf) => Err(DeviceError::ShortRead {
                len: buf.len(),
                requested: n,
            }
            .into()),
            None => Ok(None),
        }
    }

    fn release(&mut self) {
        let stream = self.device.stream();
        match stream.record_event(None) {
            Ok(e) => self.released = Some(e),
            Err(e) => {
                // Without the event the next batch could overwrite buffers the consumer
                // still reads: wait instead.
                log::warn!("cannot record a release event ({e}); synchronising");
                let _ = stream.synchronize();
            }
        }
    }
}

impl DeviceBatcher for CudaBatcher {
    fn buffers(&self, shape: BatchShape) -> Result<Box<dyn DeviceBuffers>> {
        Ok(Box::new(CudaBatchBuffers::new(&self.device, shape)?))
    }

    fn run(
        &mut self,
        jobs: &[DeviceJob],
        mix: Option<&BatchMix>,
        out: &mut dyn DeviceBuffers,
    ) -> Result<()> {
        let out = downcast_buffers::<CudaBatchBuffers>(out)?;
        let ready = CudaBatcher::run(self, jobs, mix, out)?;
        // The consumer's stream waits for the batch: its work enqueued after it receives
        // the batch sees the finished batch, with no host wait.
        self.device.stream().wait(&ready).map_err(device_err)?;
        out.ready = Some(ready);
        Ok(())
    }

    fn decode(&mut self, images: &[DeviceSample]) -> Result<()> {
        CudaBatcher::decode(self, images).map(|_| ())
    }

    fn decode_to_host(&mut self, images: &[DeviceSample]) -> Result<Vec<Image8>> {
        CudaBatcher::decode_to_host(self, images)
    }

    fn wait(&self) -> Result<()> {
        CudaBatcher::wait(self)?;
        self.device.wait()
    }

    fn memory_in_flight(&self) -> u64 {
        CudaBatcher::memory_in_flight(self)
    }

    fn plan_counts(&self) -> crate::backend::device::batch::PlanCounts {
        self.plan.counts()
    }

    fn hardware_decode(&self) -> HardwareDecode {
        CudaBatcher::hardware_decode(self)
    }

    fn decode_paths(&self) -> DecodePaths {
        CudaBatcher::decode_paths(self)
    }

    fn max_binding(&self) -> u64 {
        DeviceLimits::UNBOUNDED.max_binding
    }

    fn sync_entropy(&self) -> bool {
        true
    }

    fn set_decoded_cache(&mut self, bytes: u64) -> Result<u64> {
        // One allocation: at most what the device has free now.
        let (free, _) = self.device.memory()?;
        let budget = bytes.min(free as u64) / 256 * 256;
        if self.decoded_cache.bytes() > budget {
            // A smaller budget forgets what the cache held (the caller's map with it).
            self.decoded_cache.clear();
        }
        self.decoded_cache_budget = budget;
        Ok(budget)
    }

    fn decoded_cache_bytes(&self) -> u64 {
        self.decoded_cache.bytes()
    }
}
