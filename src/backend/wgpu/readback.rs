//! Reads of device buffers back to the host: the copy recorded into a command encoder
//! ([`WgpuContext::record_readback`]) and the wait for the submission that holds it
//! ([`Readback::wait`]). The host waits for that submission alone, not for what was
//! queued after it: a batch's entropy status is read while its later passes run.

use super::{WgpuContext, WgpuError};
use crate::error::Result;

/// A copy of a buffer's bytes into a mappable staging buffer, recorded and not yet read.
#[derive(Debug)]
#[must_use = "a readback is read with `wait` once its encoder is submitted"]
pub(crate) struct Readback {
    staging: wgpu::Buffer,
    len: u64,
}

impl WgpuContext {
    /// Records into `enc` the copy of `len` bytes at `offset` of `buffer` (which needs
    /// `COPY_SRC`) into the staging buffer kept in `kept` (grown, or made, when it is too
    /// small: a batcher reads its status through one buffer batch after batch; it must
    /// not be recorded into again before this readback is waited for). A range outside
    /// the buffer, or not 4-byte aligned at its start, is [`WgpuError::ReadRange`].
    pub(crate) fn record_readback(
        &self,
        enc: &mut wgpu::CommandEncoder,
        buffer: &wgpu::Buffer,
        offset: u64,
        len: u64,
        kept: &mut Option<wgpu::Buffer>,
    ) -> Result<Readback> {
        let padded = len.max(1).div_ceil(wgpu::COPY_BUFFER_ALIGNMENT) * wgpu::COPY_BUFFER_ALIGNMENT;
        let end = offset.checked_add(padded);
        if !offset.is_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT)
            || end.is_none_or(|e| e > buffer.size())
        {
            return Err(WgpuError::ReadRange {
                offset,
                len,
                size: buffer.size(),
            }
            .into());
        }
        let staging = self.grow_buffer(
            kept,
            "stoker readback",
            padded,
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        )?;
        enc.copy_buffer_to_buffer(buffer, offset, &staging, 0, padded);
        Ok(Readback { staging, len })
    }
}

impl Readback {
    /// The bytes, once `submission` (the one whose encoder recorded the copy) has run.
    /// Blocks until then; work submitted after it may still be running.
    pub(crate) fn wait(
        self,
        ctx: &WgpuContext,
        submission: wgpu::SubmissionIndex,
    ) -> Result<Vec<u8>> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.staging
            .slice(..)
            .map_async(wgpu::MapMode::Read, move |r| {
                let _ = tx.send(r);
            });
        ctx.device()
            .poll(wgpu::PollType::Wait {
                submission_index: Some(submission),
                timeout: None,
            })
            .map_err(WgpuError::Poll)?;
        rx.recv()
            .map_err(|_| WgpuError::MapLost("readback"))?
            .map_err(|source| WgpuError::Map {
                what: "readback",
                source,
            })?;
        let data = {
            let view = self
                .staging
                .slice(..)
                .get_mapped_range()
                .map_err(|source| WgpuError::View {
                    what: "readback",
                    source,
                })?;
            view.get(..self.len as usize).unwrap_or(&[]).to_vec()
        };
        self.staging.unmap();
        Ok(data)
    }
}
