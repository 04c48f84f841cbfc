//! Whether the machine has a GPU at all, asked of the kernel's device nodes before any
//! graphics driver is loaded.
//!
//! Listing wgpu's adapters loads every Vulkan driver and EGL implementation installed.
//! On a machine without a GPU those are Mesa's software rasterisers (lavapipe, llvmpipe),
//! which bring their own `libLLVM` into the process; a library that loads another LLVM
//! later (triton, under `torch.compile`) then crashes the process. A software adapter is
//! never chosen unless asked for, so where no GPU device node exists there is nothing
//! the listing could find that `Auto` would take: it is not done.

use std::path::Path;

/// DRM drivers that make render nodes without a GPU behind them.
const SOFTWARE_DRM: [&str; 2] = ["vgem", "vkms"];

/// Why this machine has no GPU device node (`/dev/nvidia0`..., a render node
/// `/dev/dri/renderD*` of a GPU driver, WSL's `/dev/dxg`), or `None` where it may have
/// one (and off Linux, where this is not asked).
pub(super) fn no_gpu_device() -> Option<String> {
    if cfg!(target_os = "linux") {
        no_gpu_device_in(Path::new("/"))
    } else {
        None
    }
}

/// [`no_gpu_device`] in the tree at `root` (`/`, or a test's copy of `/dev` and `/sys`).
/// A render node whose driver cannot be read counts as a GPU: the listing then runs, as
/// it always did.
pub(super) fn no_gpu_device_in(root: &Path) -> Option<String> {
    let dev = root.join("dev");
    let names = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let nvidia = names(&dev).into_iter().any(|n| {
        n.strip_prefix("nvidia")
            .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
    });
    if nvidia || dev.join("dxg").exists() {
        return None;
    }
    let gpu_render_node = names(&dev.join("dri"))
        .into_iter()
        .filter(|n| n.starts_with("renderD"))
        .any(|n| {
            let link = root.join("sys/class/drm").join(&n).join("device/driver");
            match std::fs::read_link(&link) {
                Ok(target) => target
                    .file_name()
                    .and_then(|d| d.to_str())
                    .is_none_or(|d| !SOFTWARE_DRM.contains(&d)),
                Err(_) => true,
            }
        });
    if gpu_render_node {
        return None;
    }
    Some(
        "no GPU device node (/dev/nvidia*, a GPU's /dev/dri/renderD*, /dev/dxg): \
         no graphics driver was loaded to look for a hardware adapter"
            .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(root: &Path, rel: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("dir");
        std::fs::write(p, b"").expect("node");
    }

    fn render_node(root: &Path, name: &str, driver: Option<&str>) {
        touch(root, &format!("dev/dri/{name}"));
        if let Some(d) = driver {
            let dev = root.join(format!("sys/class/drm/{name}/device"));
            std::fs::create_dir_all(&dev).expect("sysfs");
            let target = root.join(format!("sys/bus/pci/drivers/{d}"));
            std::fs::create_dir_all(&target).expect("driver");
            std::os::unix::fs::symlink(&target, dev.join("driver")).expect("link");
        }
    }

    #[test]
    fn device_nodes_decide_whether_drivers_are_loaded() {
        let empty = tempfile::tempdir().expect("tmp");
        assert!(no_gpu_device_in(empty.path()).is_some());

        // The control node alone is not a GPU; a numbered one is.
        let nv = tempfile::tempdir().expect("tmp");
        touch(nv.path(), "dev/nvidiactl");
        touch(nv.path(), "dev/nvidia-uvm");
        assert!(no_gpu_device_in(nv.path()).is_some());
        touch(nv.path(), "dev/nvidia0");
        assert!(no_gpu_device_in(nv.path()).is_none());

        // Render nodes of software DRM drivers are not GPUs; a GPU driver's, or one
        // whose driver cannot be read, is.
        let dri = tempfile::tempdir().expect("tmp");
        render_node(dri.path(), "renderD128", Some("vgem"));
        touch(dri.path(), "dev/dri/card0");
        assert!(no_gpu_device_in(dri.path()).is_some());
        render_node(dri.path(), "renderD129", Some("amdgpu"));
        assert!(no_gpu_device_in(dri.path()).is_none());
        let unknown = tempfile::tempdir().expect("tmp");
        render_node(unknown.path(), "renderD128", None);
        assert!(no_gpu_device_in(unknown.path()).is_none());

        let wsl = tempfile::tempdir().expect("tmp");
        touch(wsl.path(), "dev/dxg");
        assert!(no_gpu_device_in(wsl.path()).is_none());
    }
}
