//! The device cache of decoded samples through a [`BatchPlan`]: a batch that decodes
//! images whole and keeps them ([`DeviceJob::cache_to`]) copies each upright image into
//! [`Buffer::DecodedCache`], and a later batch that serves them from there
//! ([`DeviceSample::Cached`]) decodes nothing and gives the same windows, images and masks
//! bit for bit; an image that is not whole is refused a place.

use stoker::backend::device::{
    prepare, BatchPlan, Buffer, CacheSlot, DeviceJob, DeviceSample, Step,
};
use stoker::decode::{peek_info, DecodeOptions};
use stoker::{Augment, DType};

use super::random::random_mask;
use super::{Buffers, Executor};

pub fn cached_images_come_back_as_they_were_decoded(e: &dyn Executor) {
    let dir = crate::common::data_dir().join("jpeg");
    let files = [
        "go_video-001_q50_411.jpg",
        "pil_hopper_orientation_6.jpg",
        "jd_moz_jpg-gray.jpg",
        "go_video-001_221212.jpg",
    ];
    let aug = Augment::new()
        .random_resized_crop(21, (0.2, 1.0), (0.75, 1.333))
        .flip_horizontal(0.5)
        .color_jitter(0.3, 0.3, 0.3)
        .dtype(DType::U8);
    let mut rng = crate::common::TestRng(0xcac4e);
    let mut first = Vec::new();
    let mut places = Vec::new();
    let mut at = 0u64;
    for (id, file) in files.iter().enumerate() {
        let bytes = std::fs::read(dir.join(file)).expect("jpeg");
        let (w, h) = peek_info(&bytes).expect("info").oriented_size();
        let plan = aug.plan(3, 0, id as u64, w, h);
        // Whole and upright: what the cache keeps.
        let p = prepare(&bytes, &DecodeOptions::default()).expect("prepare");
        assert!(p.cpu_reason.is_none(), "{file}: {:?}", p.cpu_reason);
        let slot = CacheSlot {
            offset: at,
            width: w,
            height: h,
        };
        at += slot.bytes().next_multiple_of(256);
        places.push(slot);
        first.push(DeviceJob {
            plan,
            image: p.image,
            mask: Some(random_mask(&mut rng, w, h)),
            cache_to: Some(slot),
        });
    }
    let mut plan = BatchPlan::new(e.limits());
    plan.plan(&first, true).expect("plan");
    assert_eq!(
        plan.sizes().decoded_cache,
        places[3].offset + places[3].bytes()
    );
    let mut buffers = Buffers::for_plan(&plan, &first);
    e.run(plan.steps(), &mut buffers);
    let decoded = plan
        .windows_to_host(buffers.get(Buffer::Windows))
        .expect("windows");
    let images = buffers.get(Buffer::Images).to_vec();
    let masks = buffers.get(Buffer::Masks).to_vec();
    let cache = buffers.get(Buffer::DecodedCache).to_vec();

    // The same samples with the same plans, served from the cache, in another order of
    // slots than they were kept in.
    let order = [2usize, 0, 3, 1];
    let later: Vec<DeviceJob> = order
        .iter()
        .map(|&k| DeviceJob {
            plan: first[k].plan,
            image: DeviceSample::Cached {
                offset: places[k].offset,
                width: places[k].width,
                height: places[k].height,
            },
            mask: first[k].mask.clone(),
            cache_to: None,
        })
        .collect();
    let mut plan = BatchPlan::new(e.limits());
    plan.plan(&later, true).expect("plan");
    assert_eq!(plan.sizes().decode_input, 4, "nothing to decode");
    assert!(plan
        .steps()
        .iter()
        .all(|s| !matches!(s, Step::Launch(l) if l.kernel.source() != "augment")));
    let mut buffers = Buffers::for_plan(&plan, &later).with(Buffer::DecodedCache, cache);
    e.run(plan.steps(), &mut buffers);
    let served = plan
        .windows_to_host(buffers.get(Buffer::Windows))
        .expect("windows");
    let slot_bytes = images.len() / files.len();
    let mask_bytes = masks.len() / files.len();
    for (i, &k) in order.iter().enumerate() {
        let (a, b) = (&decoded[k], &served[i]);
        assert_eq!(
            (a.width, a.height, a.origin, a.full, &a.data),
            (b.width, b.height, b.origin, b.full, &b.data),
            "{}: window from the cache",
            files[k]
        );
        assert_eq!(
            &buffers.get(Buffer::Images)[i * slot_bytes..(i + 1) * slot_bytes],
            &images[k * slot_bytes..(k + 1) * slot_bytes],
            "{}: image from the cache",
            files[k]
        );
        assert_eq!(
            &buffers.get(Buffer::Masks)[i * mask_bytes..(i + 1) * mask_bytes],
            &masks[k * mask_bytes..(k + 1) * mask_bytes],
            "{}: mask",
            files[k]
        );
    }

    // A window of an image is not what its place holds.
    let bytes = std::fs::read(dir.join(files[0])).expect("jpeg");
    let (w, h) = peek_info(&bytes).expect("info").oriented_size();
    let opts = DecodeOptions {
        window: Some([0, 0, w / 2, h]),
        ..DecodeOptions::default()
    };
    let p = prepare(&bytes, &opts).expect("prepare");
    let job = DeviceJob {
        plan: aug.plan(3, 0, 9, w, h),
        image: p.image,
        mask: None,
        cache_to: Some(CacheSlot {
            offset: 0,
            width: w,
            height: h,
        }),
    };
    let mut plan = BatchPlan::new(e.limits());
    let err = plan
        .plan(&[job], false)
        .expect_err("a window refused a place");
    assert!(err.to_string().contains("device cache"), "{err}");
}
