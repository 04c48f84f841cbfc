//! A batch's submission ([`CudaBatcher::submit`]): its upload through the next slot of the
//! staging ring, the buffers its bindings resolve to, and its steps enqueued on the compute
//! stream.

use super::*;
use crate::backend::device::batch::Sizes;

/// The hardware output of a batch: its address, length and `released` event.
type HardwareOut = (u64, u64, Arc<CudaEvent>);

/// Where each buffer a binding may name lies: its address and length.
type Bases = HashMap<Buffer, (u64, u64)>;

impl CudaBatcher {
    /// Uploads the plan through the next slot and enqueues its steps.
    pub(super) fn submit<'a>(
        &mut self,
        out: Option<&CudaBatchBuffers>,
        sample: &dyn Fn(usize) -> Option<&'a DeviceSample>,
    ) -> Result<CudaEvent> {
        let sizes = self.plan.sizes();
        // The hardware decoder first, before this batch's upload and kernels are queued
        // (see `Hardware`): samples nothing decodes are rejected before anything is
        // written for the batch.
        let rgbi = self.hardware_step(sample)?;
        let (input, mut record) = self.upload(sizes, sample, rgbi.as_ref())?;
        let bases = self.bases(sizes, input, rgbi.as_ref(), out)?;
        // Check every step before enqueueing any.
        self.check_steps(&bases, rgbi.as_ref())?;
        let mut status = std::mem::take(&mut self.status);
        let enqueued = self.enqueue(out, &bases, rgbi.as_ref(), &mut record, &mut status);
        drop(record);
        // Everything is queued: the host now waits for the status copy alone (the
        // device runs the batch's later passes meanwhile), and only where there is one.
        let checked = enqueued.and_then(|copied| match copied {
            Some(bytes) => self.entropy_verdict(status.downloaded(bytes)?),
            None => Ok(()),
        });
        self.status = status;
        checked?;
        self.compute.record_event(None).map_err(device_err)
    }

    /// Writes the plan's upload into the next slot's staging buffer and copies it to the
    /// slot's input buffer, which the compute stream then waits for. Returns the input's
    /// address and what records the slot's `consumed` event (and the hardware output's
    /// `released`) after whatever the batch queues, on every path out.
    fn upload<'a>(
        &mut self,
        sizes: Sizes,
        sample: &dyn Fn(usize) -> Option<&'a DeviceSample>,
        rgbi: Option<&HardwareOut>,
    ) -> Result<(u64, RecordOnDrop)> {
        let k = self.next % self.slots.len();
        self.next += 1;
        let slot = &mut self.slots[k];
        if slot.used {
            // The staging buffer is written again only once the copy out of it is done.
            slot.uploaded.synchronize().map_err(device_err)?;
        }
        let staging = slot.pinned.ensure(&self.device, sizes.upload)?;
        self.plan.write_upload(&mut &mut staging[..], sample)?;
        // The copy waits for the kernels that still read this slot's input buffer.
        if slot.used {
            self.copy.wait(&slot.consumed).map_err(device_err)?;
        }
        let input = slot.input.ensure(&self.copy, sizes.upload)?;
        // SAFETY: the staging buffer is written or grown again only after `uploaded`,
        // recorded just below, has completed (the `synchronize` above, on the slot's next
        // use), and dropped only after the batcher's drop has finished both streams.
        // `input` is the slot's buffer, allocated (so freed) on the copy stream; the copy
        // is ordered after the kernels of the slot's last batch (the copy stream waited for
        // `consumed` above) and before this batch's (the compute stream waits for
        // `uploaded`).
        unsafe {
            slot.pinned
                .upload(&self.copy, input, sizes.upload as usize)?;
        }
        slot.uploaded.record(&self.copy).map_err(device_err)?;
        slot.used = true;
        // From here on kernels may read the slot's input (and the hardware output): their
        // events are recorded after whatever this batch queues, on every path out.
        let mut events = vec![Arc::clone(&slot.consumed)];
        if let Some((_, _, released)) = rgbi {
            events.push(Arc::clone(released));
        }
        let record = RecordOnDrop {
            events,
            stream: Arc::clone(&self.compute),
        };
        self.compute.wait(&slot.uploaded).map_err(device_err)?;
        let input = address(input, &self.compute);
        Ok((input, record))
    }

    /// Grows the scratch buffers (and the decoded cache, within its budget) to the plan's
    /// sizes; returns where each buffer the plan may bind lies.
    fn bases(
        &mut self,
        sizes: Sizes,
        input: u64,
        rgbi: Option<&HardwareOut>,
        out: Option<&CudaBatchBuffers>,
    ) -> Result<Bases> {
        let c = &self.compute;
        let s = &mut self.scratch;
        s.planes.ensure(c, sizes.planes)?;
        s.windows.ensure(c, sizes.windows)?;
        s.oriented.ensure(c, sizes.oriented)?;
        s.horizontal.ensure(c, sizes.horizontal)?;
        s.resized.ensure(c, sizes.resized)?;
        s.coefficients.ensure(c, sizes.coefficients)?;
        s.entropy_status.ensure(c, sizes.entropy_status)?;
        s.mix_scratch.ensure(c, sizes.mix_scratch)?;
        s.sync_records.ensure(c, sizes.sync_records)?;
        if sizes.decoded_cache > self.decoded_cache_budget {
            return Err(DeviceError::Bounds {
                buffer: Buffer::DecodedCache,
                len: self.decoded_cache_budget,
                start: 0,
                end: sizes.decoded_cache,
            }
            .into());
        }
        if sizes.decoded_cache > 0 {
            self.decoded_cache
                .ensure(c, sizes.decoded_cache, self.decoded_cache_budget)?;
        }
        let scratch = |b: &DeviceBuffer| b.get().map(|x| (address(x, c), x.len() as u64));
        let mut bases: HashMap<Buffer, (u64, u64)> = HashMap::new();
        bases.insert(Buffer::DecodeInput, (input, sizes.decode_input));
        bases.insert(
            Buffer::AugmentInput,
            (input + sizes.augment_offset, sizes.augment_input),
        );
        for (buffer, b) in [
            (Buffer::Planes, &s.planes),
            (Buffer::Windows, &s.windows),
            (Buffer::Oriented, &s.oriented),
            (Buffer::Horizontal, &s.horizontal),
            (Buffer::Resized, &s.resized),
            (Buffer::Coefficients, &s.coefficients),
            (Buffer::EntropyStatus, &s.entropy_status),
            (Buffer::MixScratch, &s.mix_scratch),
            (Buffer::SyncRecords, &s.sync_records),
        ] {
            if let Some(x) = scratch(b) {
                bases.insert(buffer, x);
            }
        }
        if let Some((base, len, _)) = rgbi {
            bases.insert(Buffer::Rgbi, (*base, *len));
        }
        if let Some(x) = self.decoded_cache.get() {
            bases.insert(Buffer::DecodedCache, (address(x, c), x.len() as u64));
        }
        if let Some(o) = out {
            bases.insert(
                Buffer::Images,
                (address(&o.images, c), o.images.len() as u64),
            );
            if let Some(m) = &o.masks {
                bases.insert(Buffer::Masks, (address(m, c), m.len() as u64));
            }
        }
        Ok(bases)
    }

    /// Checks every step of the plan (bindings within their buffers, the hardware output
    /// present where a step needs it) before any is enqueued.
    fn check_steps(&self, bases: &Bases, rgbi: Option<&HardwareOut>) -> Result<()> {
        for step in self.plan.steps() {
            match step {
                Step::Launch(l) => {
                    if l.bindings.len() > MAX_BINDINGS {
                        return Err(DeviceError::TooManyBindings {
                            kernel: l.kernel.name(),
                            bindings: l.bindings.len(),
                            max: MAX_BINDINGS,
                        }
                        .into());
                    }
                    for b in &l.bindings {
                        resolve(bases, b)?;
                    }
                }
                Step::Copy { src, dst } => {
                    resolve(bases, src)?;
                    resolve(bases, dst)?;
                }
                Step::Hardware => {
                    if rgbi.is_none() {
                        return Err(DeviceError::NoHardwareDecoder.into());
                    }
                }
                Step::EntropyCheck { status } => {
                    resolve(bases, status)?;
                }
            }
        }
        Ok(())
    }

    /// Enqueues the plan's steps on the compute stream, in order.
    fn enqueue(
        &self,
        out: Option<&CudaBatchBuffers>,
        bases: &Bases,
        rgbi: Option<&HardwareOut>,
        record: &mut RecordOnDrop,
        status: &mut Pinned,
    ) -> Result<Option<usize>> {
        let c = &self.compute;
        let mut copied = None;
        // Before the first launch that writes the batch's outputs, the compute stream waits
        // for the consumer's release of them (on their first use, for everything on the
        // consumer's stream, where they were made and zeroed). The decode before it, and
        // the launches that read the hardware output, never wait for the consumer: the
        // hardware output's `released` is recorded right after the last of those, so the
        // engines' next write into it waits for them alone, not for the training step.
        let writes_out = |l: &crate::backend::device::Launch| {
            l.bindings
                .iter()
                .any(|b| matches!(b.buffer, Buffer::Images | Buffer::Masks))
        };
        let reads_hardware = |step: &Step| matches!(step, Step::Launch(l) if l.bindings.iter().any(|b| b.buffer == Buffer::Rgbi));
        let last_hardware_read = self.plan.steps().iter().rposition(reads_hardware);
        let consumer = self.device.stream();
        let mut gated = false;
        let gate = |gated: &mut bool| -> Result<()> {
            if std::mem::replace(gated, true) {
                return Ok(());
            }
            if let Some(o) = out {
                if let Some(r) = &o.released {
                    c.wait(r).map_err(device_err)?;
                }
                if o.writer.is_none() {
                    c.join(consumer).map_err(device_err)?;
                }
            }
            Ok(())
        };
        for (index, step) in self.plan.steps().iter().enumerate() {
            if matches!(step, Step::Launch(l) if writes_out(l)) {
                gate(&mut gated)?;
            }
            match step {
                Step::Launch(l) => self.launch(l, bases)?,
                Step::Copy { src, dst } => {
                    let (to, from) = (resolve(bases, dst)?, resolve(bases, src)?);
                    // SAFETY: both ranges were resolved within their buffers, and the plan
                    // only copies between distinct buffers (`Oriented` to `Windows`,
                    // `Windows` to and from `DecodedCache`, `Images` to `MixScratch`); the buffers stay allocated
                    // until this stream has passed the copy, as for the launches above (the
                    // decoded cache is allocated and freed on this stream).
                    unsafe { memory::copy_dtod(c, to, from, src.size as usize)? };
                }
                // Done first (`hardware_step`); the compute stream waits for it.
                Step::Hardware => {}
                // The huffman launches before it have been queued: their status words are
                // copied back here, in stream order, and read once the rest is queued.
                Step::EntropyCheck { .. } => copied = self.status_copy(status)?,
            }
            if Some(index) == last_hardware_read {
                if let Some((_, _, released)) = rgbi {
                    released.record(c).map_err(device_err)?;
                    record.events.retain(|e| !Arc::ptr_eq(e, released));
                }
            }
        }
        gate(&mut gated)?;
        Ok(copied)
    }

    /// Enqueues launch `l` on the compute stream, its bindings resolved in `bases`.
    fn launch(&self, l: &crate::backend::device::Launch, bases: &Bases) -> Result<()> {
        let c = &self.compute;
        let mut args = KernelArgs {
            params: l.params,
            ..KernelArgs::default()
        };
        for (i, b) in l.bindings.iter().enumerate() {
            args.ptr[i] = resolve(bases, b)?;
            args.words[i] = u32::try_from(b.size / 4).map_err(|_| DeviceError::TooLarge {
                what: "a binding's length in words",
                value: b.size / 4,
                max: u32::MAX.into(),
            })?;
        }
        let f = self
            .functions
            .get(&l.kernel)
            .ok_or(DeviceError::Kernel(l.kernel.name()))?;
        // SAFETY: `f` was loaded from `kernels/*.cu`, whose kernels take one
        // `KernelArgs`; every address in `args` was resolved within its buffer
        // (`resolve` checks offset + size against the buffer's length). The
        // buffers are the slot's input, the scratch buffers, the hardware
        // output and the batch's outputs: scratch is freed on this (compute)
        // stream, the input only after the copy stream has waited for
        // `consumed`, the hardware output only after the host has waited for
        // its `released` (both recorded by `record` after these launches, on
        // every path; `released` after the last launch that reads it), and the outputs after their writer (this stream) is
        // synchronised. Nothing else writes them meanwhile: the next upload
        // into the input waits for `consumed`, the engines' next write into the
        // hardware output for `released` on the host, the consumer for the
        // batch's event.
        unsafe { memory::launch(c, f, l, &args)? };
        Ok(())
    }

    /// Enqueues on the compute stream the copy of the huffman launches' status words into
    /// `status`; the bytes copied, or `None` where the batch has no entropy status.
    fn status_copy(&self, status: &mut Pinned) -> Result<Option<usize>> {
        let bytes = self.plan.sizes().entropy_status as usize;
        match self.scratch.entropy_status.get() {
            Some(b) if bytes > 0 => {
                status.download(&self.device, &self.compute, b, bytes)?;
                Ok(Some(bytes))
            }
            _ => Ok(None),
        }
    }

    /// The status words read back: an error naming the samples flagged, if any. The
    /// batch's later passes were queued already, and wrote the outputs; the batch runs
    /// again (over them) before anything delivers it.
    fn entropy_verdict(&self, status: &[u8]) -> Result<()> {
        let flagged = self.plan.flagged(status);
        if !flagged.is_empty() {
            return Err(DeviceError::EntropyFlagged(flagged).into());
        }
        Ok(())
    }
}

/// The address of binding `b` in `bases`, checked against its buffer's length.
fn resolve(bases: &Bases, b: &crate::backend::device::Binding) -> Result<u64> {
    let (base, len) = bases
        .get(&b.buffer)
        .copied()
        .ok_or(DeviceError::Unbound(b.buffer))?;
    if b.offset + b.size > len {
        return Err(DeviceError::Bounds {
            buffer: b.buffer,
            len,
            start: b.offset,
            end: b.offset + b.size,
        }
        .into());
    }
    Ok(base + b.offset)
}
