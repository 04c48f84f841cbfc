//! A device backend's host work for one sample: its [`DeviceJob`] (see
//! [`crate::backend::work`]). A JPEG is entropy-decoded for the device's decode (only the
//! window its plan reads, at the plan's IDCT scale), handed whole to a hardware decoder,
//! or decoded by the CPU where the device path does not take it (counted as a fallback);
//! a sample with a place in the device cache is decoded whole on the device and kept.

use std::sync::Arc;
use std::time::Instant;

use super::cache::Reservation;
use super::job::{self, DeviceJob, DeviceSample, HardwareDecode, Prepared, SharedImage};
use crate::augment::SamplePlan;
use crate::backend::device::sample_work::{
    Count, Cx, DeviceWorkConfig, HostImage, Kept, Made, Redone, SampleHost, SampleWork, WorkScratch,
};
use crate::decode::{DecodeOptions, ImageInfo};
use crate::error::{SampleError, SampleErrorKind};
use crate::source::Sample;

/// The host work of a device backend.
#[derive(Debug)]
pub(crate) struct DeviceWork {
    cfg: DeviceWorkConfig,
}

impl DeviceWork {
    pub(crate) fn new(cfg: DeviceWorkConfig) -> Self {
        DeviceWork { cfg }
    }

    /// A place in the device cache for the whole upright image of `s` (`info` its
    /// headers), when there is a device cache with room for it and the image fits one
    /// storage binding of the device (as every decoded window must).
    fn cache_place(&self, s: &Sample, info: &ImageInfo) -> Option<Reservation> {
        let dc = self.cfg.cache.as_ref()?;
        let (w, h) = info.oriented_size();
        let bytes = 4 * u64::from(w) * u64::from(h) + 256;
        if bytes > self.cfg.max_binding {
            return None;
        }
        dc.reserve(s.id, w, h)
    }

    /// The device input of one sample from its bytes: see the module docs.
    fn prepare(
        &self,
        host: &dyn SampleHost,
        s: &Sample,
        image: &[u8],
        mask: &[u8],
        ws: &mut WorkScratch,
    ) -> Made {
        ws.reservation = None;
        let t = Instant::now();
        let (info, plan) = host.plan_from_headers(s, image)?;
        // With the device cache on, a sample that gets a place there is decoded whole on
        // the device and kept; the others go to the host cache when there is one.
        let reservation = self.cache_place(s, &info);
        if reservation.is_none() && host.has_host_cache() {
            // The cache keeps whole CPU-decoded images so any later crop can be served.
            let plan = host.decode_into(s, (image, mask), &mut ws.decoded)?;
            ws.warning = ws.decoded.warning.clone();
            // The worker's decode buffers go with the job (the cache has made its copy):
            // no second copy of the image.
            return Ok((plan, Some(decoded_job(host, plan, &mut ws.decoded))));
        }
        let opts = match reservation {
            // The whole upright image, at full scale: what any later plan may read.
            Some(_) => host.base_options(),
            None => plan.decode_options(host.base_options(), &info),
        };
        if s.mask.is_some() != host.has_masks() {
            return Err(SampleError::new(
                s,
                SampleErrorKind::Mask,
                "sample and pipeline disagree on having a mask".into(),
            ));
        }
        let prepared = self.prepared(host, s, image, &info, &opts);
        host.decode_time(t.elapsed(), s.id);
        let prepared = prepared?;
        self.check_binding(s, &prepared)?;
        match &prepared.cpu_reason {
            Some(reason) => {
                log::debug!("{}: decoded on the CPU ({reason})", s.path);
                host.count(Count::CpuFallback);
            }
            None => {
                host.count(Count::GpuDecoded);
                match &prepared.image {
                    DeviceSample::Entropy { packed, .. } => host.count(entropy_count(packed)),
                    DeviceSample::Encoded { .. } => host.count(Count::Hardware),
                    _ => {}
                }
            }
        }
        ws.warning = prepared.warning.clone();
        let mask = match s.mask {
            Some(_) => Some(host.decode_mask(s, mask, info.oriented_size())?),
            None => None,
        };
        let cache_to = reservation.map(|mut r| {
            r.warning = prepared.warning.clone();
            let slot = r.slot();
            ws.reservation = Some(Box::new(r));
            slot
        });
        let job = DeviceJob {
            plan,
            image: prepared.image,
            mask,
            cache_to,
        };
        Ok((plan, Some(job)))
    }

    /// The sample prepared for the device path as `opts` says, with the verdicts a CPU
    /// decode of part of a JPEG takes.
    fn prepared(
        &self,
        host: &dyn SampleHost,
        s: &Sample,
        image: &[u8],
        info: &ImageInfo,
        opts: &DecodeOptions,
    ) -> Result<Prepared, SampleError> {
        let cfg = &self.cfg;
        // A JPEG the CPU decoded for part of its image (the coefficients being left to
        // it) takes the whole file's verdict, as on the CPU backend.
        let partial = info.format == crate::decode::Format::Jpeg
            && (opts.window.is_some() || opts.scale != 1);
        // A JPEG both the engines and the device entropy path take: the pipeline's share.
        let engines_first = cfg.share.to_engines(s.id);
        // What one device binding cannot hold is decoded by the CPU for this sample.
        let prepare = |hardware| {
            job::prepare_device_verified(
                image,
                *info,
                opts,
                &cfg.coeff_pool,
                hardware,
                job::EntropyPaths {
                    restart: cfg.device_entropy,
                    sync: cfg.device_sync,
                },
                cfg.max_binding,
                // A file's first crop on the device entropy path decodes it whole.
                !partial || host.known_clean(s.id, image),
                engines_first,
            )
            .and_then(|p| p.fit_bindings(image, opts, &cfg.coeff_pool, cfg.max_binding))
            // Packed here, so that the batch's planner only copies (once, into staging).
            .and_then(|p| p.packed(&cfg.coeff_pool))
            .map_err(|e| host.decode_error(s, "image", &e))
        };
        prepare(cfg.hardware_decode).and_then(|p| match p.image {
            DeviceSample::Encoded { .. } => verify_encoded(host, s, image, p, prepare),
            _ if partial && p.cpu_reason.is_some() => {
                let mut p = p;
                p.warning = host
                    .verdict(s.id, image)
                    .map_err(|e| host.decode_error(s, "image", &e))?;
                Ok(p)
            }
            _ => Ok(p),
        })
    }

    /// Refuses a sample whose decoded window does not fit one storage binding of the
    /// device.
    fn check_binding(&self, s: &Sample, prepared: &Prepared) -> Result<(), SampleError> {
        let (ww, wh) = match &prepared.image {
            DeviceSample::Jpeg { window, .. } | DeviceSample::Encoded { window, .. } => (
                window[2].saturating_sub(window[0]),
                window[3].saturating_sub(window[1]),
            ),
            DeviceSample::Rgb(img) => (img.width, img.height),
            DeviceSample::Shared(img) => (img.image().width, img.image().height),
            DeviceSample::Cached { width, height, .. } => (*width, *height),
            DeviceSample::Entropy { packed, .. } => {
                (packed.packed.image.width, packed.packed.image.height)
            }
            DeviceSample::Packed { packed, .. } => (packed.image.width, packed.image.height),
        };
        // (A binding starts on a 256-byte boundary at or before the window.)
        let bytes = 4 * u64::from(ww) * u64::from(wh) + 256;
        let largest = self.cfg.max_binding;
        if bytes > largest {
            return Err(SampleError::new(
                s,
                SampleErrorKind::Limit,
                format!(
                    "image: its decoded window ({ww}x{wh}, {bytes} bytes) exceeds the device's largest storage binding ({largest} bytes)",
                ),
            ));
        }
        Ok(())
    }
}

impl SampleWork for DeviceWork {
    fn make(&self, cx: Cx<'_>, (image, mask): (&[u8], &[u8])) -> Made {
        self.prepare(cx.host, cx.sample, image, mask, cx.ws)
    }

    fn make_decoded(&self, cx: Cx<'_>, plan: SamplePlan, image: HostImage<'_>) -> Made {
        let job = match image {
            HostImage::Worker => decoded_job(cx.host, plan, &mut cx.ws.decoded),
            // Shared with the host cache (no copy), with a copy of its mask.
            HostImage::Shared(d) => DeviceJob {
                plan,
                image: DeviceSample::Shared(SharedImage::new(Arc::clone(d) as _)),
                mask: d.mask.clone(),
                cache_to: None,
            },
        };
        Ok((plan, Some(job)))
    }

    fn kept(&self, id: u64) -> Option<Kept> {
        self.cfg.cache.as_ref()?.get(id)
    }

    fn make_kept(&self, plan: SamplePlan, e: &Kept) -> Made {
        let job = DeviceJob {
            plan,
            image: DeviceSample::Cached {
                offset: e.offset,
                width: e.width,
                height: e.height,
            },
            mask: e.mask.clone(),
            cache_to: None,
        };
        Ok((plan, Some(job)))
    }

    fn kept_bytes(&self) -> u64 {
        self.cfg.cache.as_ref().map_or(0, |c| c.used())
    }

    fn ran(&self, host: &dyn SampleHost, jobs: &[DeviceJob], ids: &[u64]) {
        for (job, &id) in jobs.iter().zip(ids) {
            if let DeviceSample::Entropy { packed, bytes, .. } = &job.image {
                if packed.whole {
                    host.record_clean(id, bytes);
                }
            }
        }
    }

    fn redo_flagged(&self, host: &dyn SampleHost, s: &Sample, job: &mut DeviceJob) -> Redone {
        let DeviceSample::Entropy {
            packed,
            bytes,
            info,
            opts,
            ..
        } = &job.image
        else {
            return None;
        };
        let pool = &self.cfg.coeff_pool;
        let partial = opts.window.is_some() || opts.scale != 1;
        let redone = job::prepare_host(bytes, *info, opts, pool)
            .and_then(|p| p.fit_bindings(bytes, opts, pool, self.cfg.max_binding))
            .and_then(|p| p.packed(pool))
            .and_then(|mut p| {
                // As a worker does: a partial CPU decode takes the whole file's verdict.
                if partial && p.cpu_reason.is_some() {
                    p.warning = host.verdict(s.id, bytes)?;
                }
                Ok(p)
            });
        host.uncount(entropy_count(packed));
        Some(match redone {
            Ok(p) => {
                if p.cpu_reason.is_some() {
                    host.uncount(Count::GpuDecoded);
                    host.count(Count::CpuFallback);
                }
                job.image = p.image;
                Ok(p.warning)
            }
            Err(e) => {
                host.uncount(Count::GpuDecoded);
                Err(e)
            }
        })
    }

    fn keeps_decoded(&self) -> bool {
        self.cfg.cache.is_some()
    }

    fn writes_host_slots(&self) -> bool {
        false
    }
}

/// The device input of a sample decoded (and transformed) on the CPU: its pixels, moved
/// out of the worker's buffers, for upload. Counted as a CPU fallback.
fn decoded_job(
    host: &dyn SampleHost,
    plan: SamplePlan,
    d: &mut crate::backend::device::sample_work::Decoded,
) -> DeviceJob {
    host.count(Count::CpuFallback);
    DeviceJob {
        plan,
        image: DeviceSample::Rgb(std::mem::take(&mut d.image)),
        mask: d.mask.take(),
        cache_to: None,
    }
}

/// A JPEG prepared for the hardware decoder (`p`, from `image`), verified as every other
/// JPEG is: the hardware decoder does not say whether or how a file is damaged, so libjpeg
/// reads its entropy-coded data whole, once (the whole file's verdict: kept for later
/// epochs). A file the verdict refuses fails with its error, as on the CPU backend. A file
/// it delivers with a warning (damaged data in lenient mode, extraneous bytes) carries the
/// whole file's warning, as on the CPU backend, and is prepared again by `prepare` for the
/// hybrid path instead (libjpeg's coefficients), so that its pixels are libjpeg's too
/// rather than what the hardware makes of the damage.
fn verify_encoded(
    host: &dyn SampleHost,
    s: &Sample,
    image: &[u8],
    p: Prepared,
    prepare: impl FnOnce(HardwareDecode) -> Result<Prepared, SampleError>,
) -> Result<Prepared, SampleError> {
    match host.verdict(s.id, image) {
        Err(e) => Err(host.decode_error(s, "image", &e)),
        Ok(None) => Ok(p),
        Ok(Some(warning)) => {
            let mut again = prepare(HardwareDecode::Off)?;
            again.warning = Some(warning);
            Ok(again)
        }
    }
}

/// The counter of a sample on the device entropy path: the restart-interval decode's or
/// the self-synchronising decode's.
fn entropy_count(packed: &crate::decode::jpeg::huffman::PackedEntropy) -> Count {
    match packed.sync {
        Some(_) => Count::GpuSyncEntropy,
        None => Count::GpuEntropy,
    }
}
