//! Writing shards (`stoker convert`): TFRecord files of `tf.train.Example` records, or
//! WebDataset tar files (written by the `tar` crate), each indexed when it is closed.

use std::path::{Path, PathBuf};

use super::index::{index, Kind};
use super::tfrecord::{encode_example, frame_record};
use super::ExampleKeys;
use crate::error::{Error, Result};

/// The shard formats [`ShardWriter`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardFormat {
    /// TFRecord files of `tf.train.Example` records.
    TfRecord,
    /// WebDataset tar files.
    Tar,
}

/// The shard being written, held in memory until it is closed.
enum Open {
    TfRecord(Vec<u8>),
    Tar(::tar::Builder<Vec<u8>>),
}

impl Open {
    fn new(format: ShardFormat) -> Self {
        match format {
            ShardFormat::TfRecord => Open::TfRecord(Vec::new()),
            ShardFormat::Tar => Open::Tar(::tar::Builder::new(Vec::new())),
        }
    }

    /// Bytes written so far.
    fn len(&self) -> usize {
        match self {
            Open::TfRecord(b) => b.len(),
            Open::Tar(t) => t.get_ref().len(),
        }
    }

    /// The shard's bytes (a tar file with its end-of-archive blocks).
    fn into_bytes(self) -> std::io::Result<Vec<u8>> {
        match self {
            Open::TfRecord(b) => Ok(b),
            Open::Tar(t) => t.into_inner(),
        }
    }
}

impl std::fmt::Debug for Open {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            Open::TfRecord(_) => "TfRecord",
            Open::Tar(_) => "Tar",
        };
        write!(f, "{kind}({} bytes)", self.len())
    }
}

/// Appends one member (a regular file, mode 644, owner 0, time 0) to a tar shard.
fn tar_member(tar: &mut ::tar::Builder<Vec<u8>>, name: &str, data: &[u8]) -> std::io::Result<()> {
    let mut h = ::tar::Header::new_ustar();
    h.set_entry_type(::tar::EntryType::Regular);
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    tar.append_data(&mut h, name, data)
}

/// The extension of an encoded image, from its magic bytes.
fn image_ext(bytes: &[u8]) -> &'static str {
    match bytes {
        [0xFF, 0xD8, ..] => "jpg",
        [0x89, b'P', b'N', b'G', ..] => "png",
        [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'E', b'B', b'P', ..] => "webp",
        [b'B', b'M', ..] => "bmp",
        _ => "bin",
    }
}

/// Writes samples into shards of about `shard_bytes` each (`<prefix>-00000.tfrecord` or
/// `.tar` in `dir`), each indexed when it is closed. Samples keep their order.
#[derive(Debug)]
pub struct ShardWriter {
    format: ShardFormat,
    dir: PathBuf,
    prefix: String,
    shard_bytes: u64,
    open: Open,
    in_shard: usize,
    written: Vec<PathBuf>,
    keys: ExampleKeys,
}

impl ShardWriter {
    /// A writer into `dir` (created if missing).
    pub fn new(format: ShardFormat, dir: &Path, prefix: &str, shard_bytes: u64) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        Ok(ShardWriter {
            format,
            dir: dir.to_path_buf(),
            prefix: prefix.into(),
            shard_bytes: shard_bytes.max(1),
            open: Open::new(format),
            in_shard: 0,
            written: Vec::new(),
            keys: ExampleKeys::default(),
        })
    }

    /// Adds a sample: its encoded image, label, mask, and a name (kept as
    /// `image/filename`, and as the tar key's suffix).
    pub fn add(
        &mut self,
        name: &str,
        image: &[u8],
        label: Option<u32>,
        mask: Option<&[u8]>,
    ) -> Result<()> {
        match &mut self.open {
            Open::TfRecord(buf) => {
                let mut bytes: Vec<(&str, &[u8])> = vec![
                    (&self.keys.image, image),
                    ("image/filename", name.as_bytes()),
                    ("image/format", image_ext(image).as_bytes()),
                ];
                if let Some(m) = mask {
                    bytes.push((&self.keys.mask, m));
                }
                let ints: Vec<(&str, i64)> = label
                    .map(|l| vec![(self.keys.label.as_str(), i64::from(l))])
                    .unwrap_or_default();
                frame_record(&encode_example(&bytes, &ints), buf);
            }
            Open::Tar(tar) => {
                // WebDataset keys hold no dots (the first dot starts the extension).
                let stem: String = name
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                            c
                        } else {
                            '_'
                        }
                    })
                    .take(60)
                    .collect();
                let key = format!("{:06}_{stem}", self.in_shard);
                let io = |e| Error::io(&self.dir, e);
                tar_member(tar, &format!("{key}.{}", image_ext(image)), image).map_err(io)?;
                if let Some(l) = label {
                    tar_member(tar, &format!("{key}.cls"), l.to_string().as_bytes()).map_err(io)?;
                }
                if let Some(m) = mask {
                    tar_member(tar, &format!("{key}.mask.png"), m).map_err(io)?;
                }
            }
        }
        self.in_shard += 1;
        if self.open.len() as u64 >= self.shard_bytes {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the open shard (and its index), if it holds any sample.
    fn flush(&mut self) -> Result<()> {
        if self.in_shard == 0 {
            return Ok(());
        }
        let (ext, kind) = match self.format {
            ShardFormat::TfRecord => ("tfrecord", Kind::TfRecord(&self.keys)),
            ShardFormat::Tar => ("tar", Kind::Tar),
        };
        let path = self
            .dir
            .join(format!("{}-{:05}.{ext}", self.prefix, self.written.len()));
        let bytes = std::mem::replace(&mut self.open, Open::new(self.format))
            .into_bytes()
            .map_err(|e| Error::io(&path, e))?;
        std::fs::write(&path, &bytes).map_err(|e| Error::io(&path, e))?;
        index(&path, kind)?;
        self.written.push(path);
        self.in_shard = 0;
        Ok(())
    }

    /// Writes the last shard and returns every shard written.
    pub fn finish(mut self) -> Result<Vec<PathBuf>> {
        self.flush()?;
        Ok(std::mem::take(&mut self.written))
    }
}
