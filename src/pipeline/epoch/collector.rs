//! The collector: assembles an epoch's batches from what the workers deliver, slot by
//! slot, and runs the device batches (decode, augment, the redo of flagged samples and
//! the replacement of rejected ones), in order.

use super::*;

/// What a batch delivers, slot by slot, while it is assembled: one entry per slot in
/// every list, so that a slot the device rejects is left out or replaced in all of them.
struct Slots {
    ids: Vec<u64>,
    labels: Vec<Option<u32>>,
    plans: Vec<SamplePlan>,
    repeated: Vec<bool>,
    /// Each slot's sample as an index in the subset.
    samples: Vec<usize>,
    /// Under `OnError::Replace`: the failed sample a slot's sample stands in for.
    stands_in: Vec<Option<Box<StandsIn>>>,
    warnings: Vec<Option<Box<SampleWarning>>>,
    /// The slot's place in the device cache, recorded once the batch is submitted (given
    /// back if the slot is left out, replaced, or the batch fails).
    reservations: Vec<Option<Box<Reservation>>>,
    /// The targets a user transform left, in place of the sample's own.
    targets: Vec<Option<Arc<Targets>>>,
}

impl Slots {
    fn with_capacity(n: usize) -> Self {
        Slots {
            ids: Vec::with_capacity(n),
            labels: Vec::with_capacity(n),
            plans: Vec::with_capacity(n),
            repeated: Vec::with_capacity(n),
            samples: Vec::with_capacity(n),
            stands_in: Vec::with_capacity(n),
            warnings: Vec::with_capacity(n),
            reservations: Vec::with_capacity(n),
            targets: Vec::with_capacity(n),
        }
    }

    fn len(&self) -> usize {
        self.ids.len()
    }

    /// Appends `d`; `padding` when its position is past the rank's own samples.
    fn push(&mut self, d: Delivered, padding: bool) {
        self.repeated.push(d.replaced.is_some() || padding);
        self.ids.push(d.id);
        self.labels.push(d.label);
        self.plans.push(d.plan);
        self.samples.push(d.sample);
        self.stands_in.push(d.replaced);
        self.warnings.push(d.warning);
        self.reservations.push(d.reservation);
        self.targets.push(d.targets);
    }

    /// Leaves slot `k` out; the slots after it move down one.
    fn remove(&mut self, k: usize) {
        self.ids.remove(k);
        self.labels.remove(k);
        self.plans.remove(k);
        self.repeated.remove(k);
        self.samples.remove(k);
        self.stands_in.remove(k);
        self.warnings.remove(k);
        self.reservations.remove(k);
        self.targets.remove(k);
    }

    /// Puts the replacement `d` in slot `k`.
    fn replace(&mut self, k: usize, d: Delivered) {
        self.repeated[k] = true;
        self.ids[k] = d.id;
        self.labels[k] = d.label;
        self.plans[k] = d.plan;
        self.samples[k] = d.sample;
        self.stands_in[k] = d.replaced;
        self.warnings[k] = d.warning;
        self.reservations[k] = d.reservation;
        self.targets[k] = d.targets;
    }

    /// The slots filled by replacements, and the warnings, each with its slot.
    fn finish(&mut self) -> (Vec<Replacement>, Vec<SampleWarning>) {
        let replacements = self
            .stands_in
            .iter()
            .enumerate()
            .filter_map(|(slot, r)| {
                r.as_ref().map(|r| Replacement {
                    slot,
                    failed_id: r.failed_id,
                    by_id: self.ids[slot],
                })
            })
            .collect();
        let warnings = self
            .warnings
            .iter_mut()
            .enumerate()
            .filter_map(|(slot, w)| {
                let mut w = *w.take()?;
                w.slot = slot;
                Some(w)
            })
            .collect();
        (replacements, warnings)
    }
}

impl Collector {
    /// The targets of the batch's samples (those a user transform moved, or the dataset's)
    /// under their plans' geometry.
    fn targets(&self, slots: &Slots, cfg: &Config) -> Vec<Option<Targets>> {
        let samples = self.shared.subset.samples();
        let rule = cfg.augment.get_box_rule();
        slots
            .samples
            .iter()
            .zip(&slots.plans)
            .zip(&slots.targets)
            .map(|((&i, plan), moved)| {
                let t = match moved {
                    Some(t) => t,
                    None => samples.get(i)?.targets.as_ref()?,
                };
                Some(geometry::transform(plan, t, &rule))
            })
            .collect()
    }

    /// Counts a batch assembled: its samples, replacements and samples with warnings.
    fn count_batch(&self, delivered: usize, replacements: usize, warnings: usize) {
        self.stats
            .samples_delivered
            .fetch_add(delivered as u64, Ordering::Relaxed);
        self.stats
            .replacements
            .fetch_add(replacements as u64, Ordering::Relaxed);
        self.stats
            .samples_with_warnings
            .fetch_add(warnings as u64, Ordering::Relaxed);
        self.stats.batches.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn assemble(&mut self, index: usize, p: Pending) -> Result<Batch> {
        let cfg = Arc::clone(&self.cfg);
        let internal = || Error::internal("a batch buffer is still shared");
        let mut images = p
            .images
            .map(SlotMemory::reclaim)
            .ok_or_else(internal)?
            .map_err(|_| internal())?;
        let mut masks = match p.masks {
            Some(m) => Some(SlotMemory::reclaim(m).map_err(|_| internal())?),
            None => None,
        };
        let n = p.outcomes.len();
        let mut slots = Slots::with_capacity(n);
        let mut errors = Vec::new();
        let mut exhausted = Vec::new();
        let batch_size = cfg.batch_size;
        let (ib, mb) = (cfg.host_image_bytes(), cfg.host_mask_bytes());
        let mut jobs: Vec<DeviceJob> = Vec::new();
        for (slot, o) in p.outcomes.into_iter().enumerate() {
            let Some(o) = o else {
                return Err(Error::internal(format!(
                    "slot {slot} of batch {index} never finished"
                )));
            };
            if o.exhausted {
                if let Some(e) = &o.error {
                    exhausted.push(e.clone());
                }
            }
            if let Some(e) = o.error {
                errors.push(e);
            }
            if let Some(mut d) = o.delivered {
                let k = slots.len();
                match (d.gpu.take(), &cfg.batcher) {
                    (Some(job), _) => jobs.push(job),
                    (None, Some(_)) => {
                        return Err(Error::internal(format!("slot {slot} has no device input")))
                    }
                    (None, None) => {}
                }
                if k != slot && ib + mb > 0 {
                    images
                        .bytes_mut()
                        .copy_within(slot * ib..(slot + 1) * ib, k * ib);
                    if let Some(m) = masks.as_mut() {
                        m.bytes_mut()
                            .copy_within(slot * mb..(slot + 1) * mb, k * mb);
                    }
                }
                let position = (self.first + index) * batch_size + slot;
                slots.push(d, position >= self.repeat_from);
            }
        }
        let exhausted_error = |samples| {
            Error::Pipeline(PipelineError::ReplacementsExhausted {
                attempts: cfg.replace_attempts,
                samples,
            })
        };
        let gpu = match (&cfg.batcher, p.gpu) {
            (Some(batcher), Some(mut bufs)) => {
                // The samples the device rejects and no candidate replaces are listed with
                // those the workers found none for, as on the CPU backend.
                let t = Instant::now();
                let r = self.run_device(
                    batcher,
                    &mut jobs,
                    &mut slots,
                    &mut errors,
                    &mut exhausted,
                    bufs.as_mut(),
                );
                let batch = (self.first + index) as u64;
                self.stats
                    .spent(&self.stats.device_ns, "device batch", t.elapsed(), batch);
                if !exhausted.is_empty() {
                    return Err(exhausted_error(exhausted));
                }
                r?;
                // The batch that fills them is submitted: the device cache's entries are
                // recorded, for later batches to copy out (after it, in queue order).
                for (job, r) in jobs.iter_mut().zip(&mut slots.reservations) {
                    if let Some(r) = r.take() {
                        if job.cache_to == Some(r.slot()) {
                            (*r).commit(job.mask.take());
                        }
                    }
                }
                cfg.coeff_pool.recycle(jobs.into_iter().map(|j| j.image));
                Some(bufs)
            }
            (None, None) if !exhausted.is_empty() => return Err(exhausted_error(exhausted)),
            (None, None) => None,
            _ => return Err(Error::internal("device buffers missing")),
        };
        let (replacements, warnings) = slots.finish();
        let targets = self.targets(&slots, &cfg);
        let subset = &self.shared.subset;
        let sources: Vec<usize> = slots.samples.iter().map(|&i| subset.source_of(i)).collect();
        let Slots {
            ids,
            labels,
            plans,
            repeated,
            ..
        } = slots;
        let (w, h) = cfg.augment.get_output_size();
        let mix = self.batch_mix(&ids);
        if let Some(m) = &mix {
            if targets.iter().any(Option::is_some) {
                return Err(Error::config(
                    "mixup",
                    "MixUp and CutMix mix image planes only: the user transform left targets \
                     (boxes, keypoints), which cannot be mixed",
                ));
            }
            let (dtype, layout) = (cfg.augment.get_dtype(), cfg.augment.get_layout());
            let (len, w, h) = (ids.len(), w as usize, h as usize);
            // The device backends mixed the batch on the device (`run_device`).
            if gpu.is_none() {
                mix::apply(m, images.bytes_mut(), dtype, layout, len, w, h)
                    .map_err(|e| Error::internal(format!("mixing batch {index}: {e}")))?;
            }
        }
        self.count_batch(ids.len(), replacements.len(), warnings.len());
        self.stats.count_sources(&sources, subset.sources());
        self.held.fetch_add(1, Ordering::AcqRel);
        Ok(Batch {
            index: self.first + index,
            epoch: self.epoch,
            len: ids.len(),
            width: w as usize,
            height: h as usize,
            dtype: cfg.augment.get_dtype(),
            layout: cfg.augment.get_layout(),
            buffers: Some(BatchBuffers { images, masks, gpu }),
            host_images: std::sync::OnceLock::new(),
            host_masks: std::sync::OnceLock::new(),
            labels,
            ids,
            plans,
            targets,
            mix,
            errors,
            replacements,
            repeated,
            warnings,
            return_tx: self.free_tx.clone(),
            held: Arc::clone(&self.held),
            state: cfg.progress.at(self.epoch, self.first + index + 1),
            sources,
        })
    }

    /// How the batch of `ids` is mixed (MixUp, CutMix), keyed by its first sample; `None`
    /// when mixing is off.
    fn batch_mix(&self, ids: &[u64]) -> Option<mix::BatchMix> {
        let mixing = self.cfg.augment.get_mixing();
        let (w, h) = self.cfg.augment.get_output_size();
        let &first = ids.first()?;
        mixing.draw(self.cfg.seed, self.epoch, first, w, h)
    }

    /// Runs the batch's `jobs` on the device into `out`. Samples the device rejects
    /// ([`DeviceError::Rejected`]: nothing decodes them; nothing was written) are reported
    /// as a worker's failures are and handled under the policy: `Fail` ends the epoch
    /// with the first; `Skip` leaves them out of `jobs` and `slots`; `Replace` puts each
    /// one's next replacement candidate, drawn as a worker draws it, in its slot, or, when
    /// none is left, leaves it out and adds its report to `exhausted` (the batch then
    /// fails, once the rest is known). Then the batch runs again, until it runs or fails
    /// otherwise.
    fn run_device(
        &mut self,
        batcher: &Mutex<Box<dyn DeviceBatcher>>,
        jobs: &mut Vec<DeviceJob>,
        slots: &mut Slots,
        errors: &mut Vec<SampleError>,
        exhausted: &mut Vec<SampleError>,
        out: &mut dyn DeviceBuffers,
    ) -> Result<()> {
        if jobs.len() != slots.len() {
            return Err(Error::internal(format!(
                "a device batch of {} jobs for {} slots",
                jobs.len(),
                slots.len()
            )));
        }
        // Every pass leaves out or replaces at least one sample, and a slot's replacements
        // go down one candidate list: this many passes are more than can happen.
        let passes = jobs.len().saturating_mul(self.cfg.replace_attempts + 1) + 1;
        for _ in 0..passes {
            // Keyed by the batch's first sample as it stands (skips and replacements
            // change it), as `assemble` keys the batch's `mix`.
            let mix = self.batch_mix(&slots.ids);
            let r = batcher
                .lock()
                .map_err(|_| Error::poisoned("device batcher"))?
                .run(jobs, mix.as_ref(), out);
            let err = match r {
                Ok(()) => {
                    self.cfg.work.ran(&*self.shared, jobs, &slots.ids);
                    return Ok(());
                }
                Err(e) => e,
            };
            let mut rejected: Vec<(usize, String)> = match DeviceError::of(&err) {
                Some(DeviceError::Rejected(list)) => {
                    list.iter().map(|r| (r.sample, r.reason.clone())).collect()
                }
                Some(DeviceError::EntropyFlagged(list)) => {
                    let list = list.clone();
                    let failed = self.redo_flagged(&list, jobs, slots)?;
                    if failed.is_empty() {
                        continue;
                    }
                    failed
                }
                _ => return Err(err),
            };
            rejected.sort_by_key(|r| r.0);
            rejected.dedup_by_key(|r| r.0);
            if rejected.is_empty() || rejected.iter().any(|r| r.0 >= jobs.len()) {
                return Err(Error::internal(format!(
                    "the device batcher rejected samples outside a batch of {}: {err}",
                    jobs.len()
                )));
            }
            let mut left_out = Vec::new();
            for (k, reason) in rejected {
                if self.cfg.on_error == OnError::Replace {
                    if let Some(e) = self.replace_rejected(k, &reason, jobs, slots, errors)? {
                        exhausted.push(e);
                        left_out.push(k);
                    }
                    continue;
                }
                let e = self.rejection(slots.samples[k], &reason)?;
                self.stats.report(&e);
                if self.cfg.on_error == OnError::Fail {
                    return Err(Error::Sample(e));
                }
                errors.push(e);
                left_out.push(k);
            }
            for &k in left_out.iter().rev() {
                let job = jobs.remove(k);
                self.cfg.coeff_pool.recycle(std::iter::once(job.image));
                slots.remove(k);
            }
        }
        Err(Error::internal(format!(
            "the device kept rejecting samples of a batch after {passes} passes"
        )))
    }

    /// The samples the device entropy pass flagged (`list`: slot, status), prepared
    /// again on the host path, where libjpeg reads and judges them as the CPU backend
    /// does: their jobs and warnings replaced in place. Returns the slots whose file the
    /// host path refuses, with the reason (handled as the device's rejections are).
    fn redo_flagged(
        &mut self,
        list: &[(usize, u32)],
        jobs: &mut [DeviceJob],
        slots: &mut Slots,
    ) -> Result<Vec<(usize, String)>> {
        let mut failed = Vec::new();
        self.stats
            .entropy_flagged
            .fetch_add(list.len() as u64, Ordering::Relaxed);
        for &(k, status) in list {
            let (Some(job), Some(&index)) = (jobs.get_mut(k), slots.samples.get(k)) else {
                return Err(Error::internal(format!(
                    "the device flagged slot {k} of a batch of {}",
                    jobs.len()
                )));
            };
            let sample = self.shared.subset.samples().get(index).ok_or_else(|| {
                Error::internal(format!("a flagged sample ({index}) outside the subset"))
            })?;
            log::debug!(
                "{}: the device entropy decode flagged it (status {status:#x}); decoding on the host path",
                sample.path
            );
            match self.cfg.work.redo_flagged(&*self.shared, sample, job) {
                None => {
                    return Err(Error::internal(format!(
                        "the device flagged slot {k}, which is not on the device entropy path"
                    )))
                }
                Some(Ok(warning)) => {
                    if let Some(Some(r)) = slots.reservations.get_mut(k) {
                        r.warning = warning.clone();
                    }
                    if let Some(w) = slots.warnings.get_mut(k) {
                        *w = warning.map(|w| {
                            Box::new(crate::pipeline::batch::SampleWarning::new(sample, w))
                        });
                    }
                }
                Some(Err(e)) => failed.push((k, e.to_string())),
            }
        }
        Ok(failed)
    }

    /// Under `OnError::Replace`: puts in slot `k`, which the device rejected for `reason`,
    /// the next replacement candidate of the sample that failed there: the slot's own
    /// sample (reported now), or, when the slot holds a replacement already, the sample it
    /// stands in for, whose candidate list goes on after it (as a worker passes over a
    /// candidate it cannot read). `Some(report)` on the failed sample when no candidate
    /// is left.
    fn replace_rejected(
        &mut self,
        k: usize,
        reason: &str,
        jobs: &mut [DeviceJob],
        slots: &mut Slots,
        errors: &mut Vec<SampleError>,
    ) -> Result<Option<SampleError>> {
        let (failed, from, failed_error) = match slots.stands_in[k].as_deref() {
            Some(&r) => {
                log::debug!("replacement candidate rejected by the device too: {reason}");
                let e = match errors.iter().find(|e| e.id == r.failed_id) {
                    Some(e) => e.clone(),
                    None => self.rejection(r.failed, reason)?,
                };
                (r.failed, r.position + 1, e)
            }
            None => {
                let e = self.rejection(slots.samples[k], reason)?;
                self.stats.report(&e);
                errors.push(e.clone());
                (slots.samples[k], 0, e)
            }
        };
        let Some(mut d) = device_replacement(&self.shared, &mut self.ws, failed, from) else {
            return Ok(Some(failed_error));
        };
        let job = d
            .gpu
            .take()
            .ok_or_else(|| Error::internal("a replacement has no device input"))?;
        let old = std::mem::replace(&mut jobs[k], job);
        self.cfg.coeff_pool.recycle(std::iter::once(old.image));
        slots.replace(k, d);
        Ok(None)
    }

    /// The report on the sample at `index` of the subset, which the device rejected for
    /// `reason`.
    fn rejection(&self, index: usize, reason: &str) -> Result<SampleError> {
        let sample = self.shared.subset.samples().get(index).ok_or_else(|| {
            Error::internal(format!("a rejected sample ({index}) outside the subset"))
        })?;
        Ok(SampleError::new(
            sample,
            SampleErrorKind::Decode,
            format!("image: {reason}"),
        ))
    }

    pub(super) fn handle(&mut self, msg: Msg) -> Option<Result<Batch>> {
        match msg {
            Msg::Start {
                batch,
                images,
                masks,
                gpu,
                len,
            } => {
                let p = self.pending.entry(batch).or_insert_with(|| Pending {
                    images: None,
                    masks: None,
                    gpu: None,
                    outcomes: (0..len).map(|_| None).collect(),
                    remaining: len,
                });
                p.images = Some(images);
                p.masks = masks;
                {
                    p.gpu = gpu;
                }
                None
            }
            Msg::Done {
                batch,
                slot,
                outcome,
            } => {
                if let Some(e) = &outcome.error {
                    self.stats.report(e);
                    if self.cfg.on_error == OnError::Fail {
                        self.done = true;
                        return Some(Err(Error::Sample(e.clone())));
                    }
                }
                let Some(p) = self.pending.get_mut(&batch) else {
                    self.done = true;
                    return Some(Err(Error::internal(format!(
                        "result for unknown batch {batch}"
                    ))));
                };
                if let Some(o) = p.outcomes.get_mut(slot) {
                    if o.is_none() {
                        p.remaining -= 1;
                    }
                    *o = Some(outcome);
                }
                None
            }
        }
    }

    /// The next batch, waiting for its samples; `None` once none is left. The time spent
    /// waiting is the consumer's, when it runs this (one span a batch in the trace).
    /// One more batch buffer in the ring (autotune raised prefetch). A buffer that
    /// cannot be made leaves the ring as it was.
    pub(super) fn lend_buffer(&mut self) {
        match BatchBuffers::new(&self.cfg) {
            Ok(b) => {
                if self.free_tx.send(b).is_ok() {
                    self.allocated += 1;
                }
            }
            Err(e) => log::warn!("autotune: no batch buffer added ({e})"),
        }
    }

    pub(super) fn next_batch(&mut self) -> Option<Result<Batch>> {
        let batch = (self.first + self.next) as u64;
        let mut waited = Duration::ZERO;
        let r = self.wait_for_batch(&mut waited);
        if self.counts_wait && r.is_some() {
            self.stats
                .spent(&self.stats.wait_ns, "wait for batch", waited, batch);
        }
        r
    }

    /// [`Collector::next_batch`], adding the time spent waiting for samples to `waited`.
    fn wait_for_batch(&mut self, waited: &mut Duration) -> Option<Result<Batch>> {
        loop {
            if self.done {
                return None;
            }
            if self
                .pending
                .get(&self.next)
                .is_some_and(|p| p.remaining == 0)
            {
                let index = self.next;
                let p = self.pending.remove(&index)?;
                self.next += 1;
                if self.next == self.num_batches {
                    self.done = true;
                }
                let r = self.assemble(index, p);
                if r.is_err() {
                    self.done = true;
                }
                return Some(r);
            }
            // The caller holds every buffer of the ring: lend one more rather than
            // deadlock. Memory then grows only with what the caller keeps.
            if self.held.load(Ordering::Acquire) >= self.allocated {
                log::debug!(
                    "caller holds {} batches; adding a batch buffer",
                    self.allocated
                );
                match BatchBuffers::new(&self.cfg) {
                    Ok(b) => {
                        let _ = self.free_tx.send(b);
                        self.allocated += 1;
                    }
                    Err(e) => {
                        self.done = true;
                        return Some(Err(e));
                    }
                }
            }
            let t = Instant::now();
            let msg = self.done_rx.recv_timeout(Duration::from_millis(100));
            *waited += t.elapsed();
            match msg {
                Ok(m) => {
                    if let Some(r) = self.handle(m) {
                        return Some(r);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.done = true;
                    return Some(Err(Error::Pipeline(PipelineError::Stopped)));
                }
            }
        }
    }
}
