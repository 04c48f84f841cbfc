//! What can go wrong in the wgpu backend at run time, with wgpu's own error where it gives
//! one. A [`WgpuError`] reaches the caller as [`crate::Error::Device`]
//! boxed.

use crate::backend::device::launch::Buffer;
use crate::error::Error;

/// A wgpu failure, with the operation and the values involved.
#[derive(Debug, thiserror::Error)]
pub enum WgpuError {
    /// Waiting for the device failed.
    #[error("wgpu poll failed: {0}")]
    Poll(#[from] wgpu::PollError),
    /// The device rejected a shader, a binding or a command buffer (caught by an error
    /// scope instead of wgpu's uncaptured-error handler, which panics).
    #[error("{what} rejected: {source}")]
    Rejected {
        /// `"shader"`, `"bindings"`, `"batch commands"`.
        what: &'static str,
        /// wgpu's error.
        source: wgpu::Error,
    },
    /// A buffer larger than the device's largest.
    #[error("{label}: {bytes} bytes exceed the device's largest buffer ({max} bytes)")]
    BufferTooLarge {
        /// The buffer's label.
        label: String,
        /// The size asked for.
        bytes: u64,
        /// The device's `max_buffer_size`.
        max: u64,
    },
    /// A buffer could not be created (out of memory, or invalid).
    #[error("{label}: cannot create {bytes} bytes: {source}")]
    CreateBuffer {
        /// The buffer's label.
        label: String,
        /// The size asked for.
        bytes: u64,
        /// wgpu's error.
        source: wgpu::Error,
    },
    /// A read-back range that is unaligned or beyond the buffer.
    #[error("cannot read {len} bytes at {offset} of a {size}-byte buffer")]
    ReadRange {
        /// Where the read starts.
        offset: u64,
        /// Bytes to read.
        len: u64,
        /// The buffer's size.
        size: u64,
    },
    /// A buffer mapping's callback was dropped without running.
    #[error("{0} mapping never completed")]
    MapLost(&'static str),
    /// Mapping a buffer failed.
    #[error("{what} mapping failed: {source}")]
    Map {
        /// Which buffer (`"readback"`).
        what: &'static str,
        /// wgpu's error.
        source: wgpu::BufferAsyncError,
    },
    /// A mapped buffer's contents could not be viewed.
    #[error("{what} view failed: {source}")]
    View {
        /// Which buffer (`"readback"`, `"staging"`).
        what: &'static str,
        /// wgpu's error.
        source: wgpu::MapRangeError,
    },
    /// A step binds a buffer without the usage it needs.
    #[error("the {buffer:?} buffer lacks {usage:?} usage")]
    Usage {
        /// The buffer.
        buffer: Buffer,
        /// The usage needed.
        usage: wgpu::BufferUsages,
    },
}

impl From<WgpuError> for Error {
    fn from(e: WgpuError) -> Self {
        Error::Device(Box::new(e))
    }
}
