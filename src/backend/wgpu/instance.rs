//! The wgpu instances stoker lists adapters from, made so that listing them prints
//! nothing on a headless Linux machine.
//!
//! Mesa's device-select Vulkan layer (an implicit layer every Vulkan program loads where
//! Mesa is installed) connects to the Wayland compositor on every
//! `vkEnumeratePhysicalDevices` of an instance that enabled `VK_KHR_wayland_surface`,
//! to rank the compositor's GPU first. Without a session (`XDG_RUNTIME_DIR` unset: a
//! server, a container, CI) libwayland writes `error: XDG_RUNTIME_DIR is invalid or not
//! set in the environment.` straight to stderr, twice per listing (wgpu asks for the
//! count, then the devices), past any logger, though nothing is wrong. An instance
//! without that extension is never looked at by that part of the layer.
//!
//! wgpu enables every window-system extension the Vulkan loader offers, and its
//! instance options cannot leave one out; wgpu-hal's instance constructor takes a
//! callback that edits the list, and `wgpu::Instance::from_hal` wraps the result. So on
//! Linux the Vulkan instance is made here, without `VK_KHR_wayland_surface`, and the
//! other graphics APIs asked for (GL) come from an ordinary instance. stoker's own
//! instances only compute: they never make a surface, the one thing that extension
//! serves (a caller who presents passes their own device, [`super::WgpuContext::from_device`]).
//! This module holds the backend's only `unsafe`: the two calls into wgpu-hal.

/// Instances covering `backends`: on Linux, a Vulkan instance without the Wayland surface
/// extension (when Vulkan is asked for and loads) and an ordinary one for the rest;
/// elsewhere one ordinary instance.
pub(super) fn instances(backends: wgpu::Backends) -> Vec<wgpu::Instance> {
    let mut out = Vec::new();
    let mut rest = backends;
    #[cfg(target_os = "linux")]
    if backends.contains(wgpu::Backends::VULKAN) {
        if let Some(vulkan) = vulkan_without_wayland() {
            out.push(vulkan);
            rest.remove(wgpu::Backends::VULKAN);
        }
    }
    if !rest.is_empty() {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = rest;
        out.push(wgpu::Instance::new(desc));
    }
    out
}

/// A Vulkan instance as wgpu makes one, less `VK_KHR_wayland_surface`; `None` when
/// Vulkan cannot be loaded (the caller then asks an ordinary instance, which says why in
/// the log).
#[cfg(target_os = "linux")]
fn vulkan_without_wayland() -> Option<wgpu::Instance> {
    use wgpu::hal::vulkan;
    let desc = wgpu::hal::InstanceDescriptor {
        name: "stoker",
        flags: wgpu::InstanceFlags::default(),
        memory_budget_thresholds: wgpu::MemoryBudgetThresholds::default(),
        backend_options: wgpu::BackendOptions::default(),
        telemetry: None,
        display: None,
    };
    let leave_out: Box<vulkan::CreateInstanceCallback<'_>> =
        Box::new(|args: vulkan::CreateInstanceCallbackArgs<'_, '_, '_>| {
            args.extensions
                .retain(|e| e.to_bytes() != b"VK_KHR_wayland_surface");
        });
    // SAFETY: `init_with_callback` has `init`'s contract, which a descriptor without a
    // display handle meets (wgpu-core makes its own instances so), plus the callback's:
    // it asks that no extension be removed, because wgpu assumes some it asked for are on.
    // The Wayland surface extension is not one of those: wgpu-hal 30 uses it only in
    // `create_surface_from_wayland`, which first checks the instance's own extension list
    // and returns an error without it (as on a driver that lacks the extension), and
    // stoker creates no surface on this instance. Nothing else is changed.
    let hal = unsafe { vulkan::Instance::init_with_callback(&desc, Some(leave_out)) };
    match hal {
        // SAFETY: `hal` is a Vulkan instance wgpu-hal just made and no one else holds;
        // wgpu takes it over and destroys it with the last reference.
        Ok(hal) => Some(unsafe { wgpu::Instance::from_hal::<wgpu::hal::api::Vulkan>(hal) }),
        Err(e) => {
            log::debug!("wgpu: no Vulkan instance: {e}");
            None
        }
    }
}
