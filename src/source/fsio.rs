//! Opening and reading the files a dataset names so that no read blocks forever and none
//! is unbounded: only regular files (and symlinks to them) are read, opened without
//! blocking (a FIFO named `x.jpg` would otherwise block `open` until something writes to
//! it), their type checked on the open descriptor (so a file swapped for a FIFO or a
//! device after listing is refused too), and every read stops at a byte limit. A URL
//! (`s3://...`, see [`super::remote`]) is read from its store, with the same limit.
#![doc(hidden)]

use std::fs::{File, FileType, OpenOptions};
use std::io::{self, Read};
use std::path::Path;

/// Why [`read_bounded`] read nothing: what the system said, or the file is over the
/// limit. (Its own type, so that this module depends on nothing else of the crate; the
/// shard sources' [`super::shards::ReadError`] converts from it.)
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be opened or read, or is not a regular file.
    #[error("{}: {error}", path.display())]
    File {
        /// The file.
        path: std::path::PathBuf,
        /// What the operating system said.
        error: io::Error,
    },
    /// The file holds more than the limit.
    #[error("{bytes} bytes exceed the limit of {limit}")]
    TooLarge {
        /// Bytes there are (or were read, for a file that grew).
        bytes: u64,
        /// The limit.
        limit: u64,
    },
}

/// What kind of file `t` is, in words, for reports: `"regular file"`, `"folder"`,
/// `"FIFO"`, `"socket"`, `"character device"`, `"block device"`, `"symlink"`.
pub fn kind_of(t: &FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "FIFO";
        }
        if t.is_socket() {
            return "socket";
        }
        if t.is_char_device() {
            return "character device";
        }
        if t.is_block_device() {
            return "block device";
        }
    }
    if t.is_file() {
        "regular file"
    } else if t.is_dir() {
        "folder"
    } else if t.is_symlink() {
        "symlink"
    } else {
        "special file"
    }
}

/// Opens `path` for reading if it is a regular file (following symlinks); anything else
/// (a FIFO, a socket, a device such as `/dev/zero`, a folder) is an error of kind
/// `InvalidInput` that says what it is. The open never blocks: on Unix it is
/// non-blocking (`O_NONBLOCK`, which changes nothing for the regular files that pass the
/// check).
pub fn open_regular(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = match options.open(path) {
        Ok(f) => f,
        // Some files cannot even be opened for what they are (a socket: "No such device
        // or address"): when the path names something other than a regular file, that
        // is the reason to give.
        Err(e) => {
            return Err(match std::fs::metadata(path) {
                Ok(meta) if !meta.is_file() => not_regular(&meta),
                _ => e,
            })
        }
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    Ok(file)
}

/// The error of [`open_regular`] for a file of another kind, saying which.
fn not_regular(meta: &std::fs::Metadata) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "not a regular file (a {}); only regular files are read",
            kind_of(&meta.file_type())
        ),
    )
}

/// Reads the regular file at `path` into `buf` (cleared first), refusing it when it holds
/// more than `max_bytes`: checked on its size before reading, and again while reading (a
/// file that grows is not followed past the limit).
pub fn read_bounded(path: &Path, max_bytes: u64, buf: &mut Vec<u8>) -> Result<(), ReadError> {
    buf.clear();
    let file_error = |error| ReadError::File {
        path: path.to_path_buf(),
        error,
    };
    if super::remote::is_url(path) {
        let url = path.to_string_lossy();
        return match super::remote::read_all(&url, max_bytes) {
            Ok(bytes) => {
                *buf = bytes;
                Ok(())
            }
            Err(super::remote::RemoteError::TooLarge { bytes, limit, .. }) => {
                Err(ReadError::TooLarge { bytes, limit })
            }
            Err(e) => Err(file_error(e.into())),
        };
    }
    let mut f = open_regular(path).map_err(file_error)?;
    let len = f.metadata().map_err(file_error)?.len();
    if len > max_bytes {
        return Err(ReadError::TooLarge {
            bytes: len,
            limit: max_bytes,
        });
    }
    buf.try_reserve_exact(len as usize)
        .map_err(|e| file_error(io::Error::new(io::ErrorKind::OutOfMemory, e.to_string())))?;
    (&mut f)
        .take(max_bytes.saturating_add(1))
        .read_to_end(buf)
        .map_err(file_error)?;
    if buf.len() as u64 > max_bytes {
        return Err(ReadError::TooLarge {
            bytes: buf.len() as u64,
            limit: max_bytes,
        });
    }
    Ok(())
}

/// [`read_bounded`] for text (a file list, a manifest, a class list): UTF-8 or an error.
pub fn read_text(path: &Path, max_bytes: u64) -> Result<String, ReadError> {
    let mut buf = Vec::new();
    read_bounded(path, max_bytes, &mut buf)?;
    String::from_utf8(buf).map_err(|e| ReadError::File {
        path: path.to_path_buf(),
        error: io::Error::new(
            io::ErrorKind::InvalidData,
            format!("not UTF-8 text ({})", e.utf8_error()),
        ),
    })
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_socket_is_refused_as_a_socket() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sock = dir.path().join("x.jpg");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).expect("socket");
        let e = open_regular(&sock).expect_err("a socket is no sample");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("socket"), "{e}");
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("x.jpg");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(status.success());
        let e = open_regular(&fifo).expect_err("a FIFO is no sample");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("FIFO"), "{e}");
    }

    #[test]
    fn devices_are_refused_and_reads_stop_at_the_limit() {
        let e = open_regular(Path::new("/dev/zero")).expect_err("a device");
        assert!(e.to_string().contains("character device"), "{e}");
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("a.bin");
        std::fs::write(&p, [7u8; 100]).expect("write");
        let mut buf = vec![1, 2, 3];
        read_bounded(&p, 100, &mut buf).expect("at the limit");
        assert_eq!(buf, [7u8; 100]);
        match read_bounded(&p, 99, &mut buf) {
            Err(ReadError::TooLarge {
                bytes: 100,
                limit: 99,
            }) => {}
            other => panic!("{other:?}"),
        }
    }
}
