//! WebDataset tar shards: indexing (the `tar` crate lists the members: ustar, GNU and PAX
//! headers, long names, PAX `size`, base-256 sizes, header checksums) and reading a
//! member's bytes by their range.
//!
//! Members are grouped into samples by key (the member name up to the first dot of its
//! file name): the image (any extension a folder listing takes: `jpg`, `jpeg`, `png`, `webp`, `bmp`, `tif`, `tiff`, `gif`, ...), the label mask (`mask.png`
//! or `seg.png`; or `png` beside a JPEG), the label (`cls`, a decimal integer), the class
//! name (`cls.txt`, UTF-8) and the sample's path in the dataset it was converted from
//! (`path.txt`, UTF-8; see [`super::write`]).
//!
//! Damage: a member whose data runs past the end of the shard is indexed and is cut short
//! when read; a shard cut short inside a header ends there. A header the crate refuses
//! (its checksum fails, or a field does not parse) is handled by a small scan here, for
//! the damaged case only (the crate stops at the first such header):
//! - if its size still reads and agrees with the shard (a header, the end-of-archive
//!   zeros or the end of the shard follow where it says the member ends, or the member
//!   runs past the end and no header follows), it is used as it is: the damage is
//!   elsewhere in the header. This is what listing did before checksums were checked,
//!   so a damaged mode, time, owner or checksum field changes nothing;
//! - otherwise the scan looks on, 512 bytes at a time, for the next block that is a header
//!   whose checksum holds, and listing resumes there. The member of the damaged header is
//!   lost, so the sample it belonged to (the one beside it its name's key names; both
//!   beside it if it names neither) is left out, logged, rather than listed incomplete. A
//!   block whose name gives no key (a damaged end-of-archive block, PAX records) takes no
//!   sample with it. (Before, a size field that did not parse refused the whole shard.)

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use super::{recorded_text, with_shard, Entry, ReadError, MAX_RECORDED};
use crate::error::{Error, Result};

/// Reads bytes `[offset, offset + len)` of `path` into `buf` (a tar member).
pub fn read_range(
    path: &Path,
    offset: u64,
    len: u64,
    max_bytes: u64,
    buf: &mut Vec<u8>,
) -> Result<(), ReadError> {
    if len > max_bytes {
        return Err(ReadError::MemberTooLarge {
            len,
            limit: max_bytes,
        });
    }
    buf.clear();
    buf.resize(len as usize, 0);
    with_shard(path, offset, |f| f.read_exact(buf)).map_err(|error| ReadError::MemberCutShort {
        path: path.to_path_buf(),
        offset,
        error,
    })
}

/// The most bytes the `tar` crate may read between two seeks while indexing: a header, and
/// the GNU long name or PAX records before a member, which the crate reads whole into
/// memory. More is a damaged header claiming a huge extension: an error, not an
/// allocation.
const EXTENSION_LIMIT: u64 = 1 << 20;

/// The shard as the `tar` crate reads it while indexing. Member data is skipped by
/// seeking, so what is read is headers and extensions: a seek skips with
/// [`BufReader::seek_relative`], keeping the read buffer for the headers that follow
/// small members, and at most [`EXTENSION_LIMIT`] bytes are read between two seeks.
/// Positions are relative to `base`, where the archive being listed starts (the start of
/// the shard, or where listing resumed after a damaged header).
struct Window {
    file: BufReader<File>,
    base: u64,
    /// The position, relative to `base`.
    pos: u64,
    /// Where the last seek went, relative to `base`: the crate seeks to each header before
    /// reading it, so this is the header it is reading.
    header_at: u64,
    /// Bytes read since the last seek.
    run: u64,
}

impl Window {
    fn open(shard: &Path) -> io::Result<Self> {
        Ok(Window {
            file: BufReader::with_capacity(1 << 20, File::open(shard)?),
            base: 0,
            pos: 0,
            header_at: 0,
            run: 0,
        })
    }

    /// Starts a new archive at `at` (a header position in the shard).
    fn restart(&mut self, at: u64) -> io::Result<()> {
        self.file.seek(SeekFrom::Start(at))?;
        self.base = at;
        self.pos = 0;
        self.header_at = 0;
        self.run = 0;
        Ok(())
    }

    /// The 512-byte block at `at`.
    fn block(&mut self, at: u64) -> io::Result<::tar::Header> {
        self.file.seek(SeekFrom::Start(at))?;
        let mut header = ::tar::Header::new_old();
        self.file.read_exact(header.as_mut_bytes())?;
        Ok(header)
    }

    /// The member length of the damaged `header` (at `at`, in a shard of `size` bytes) and
    /// where the next header is, if its size field reads (a blank one as 0) and agrees
    /// with the shard: a block that is a header (its checksum holds, or it has the ustar
    /// magic: two damaged headers in a row), the end-of-archive zeros (even with a damaged
    /// byte or two), or the end of the shard follow the member; or the member runs past
    /// the end of the shard and no header follows (the shard is cut short inside it).
    /// Extension headers (long names, PAX, sparse files) are not followed.
    fn follows(
        &mut self,
        header: &::tar::Header,
        at: u64,
        size: u64,
    ) -> io::Result<Option<(u64, u64)>> {
        let t = header.entry_type();
        if t.is_gnu_longname()
            || t.is_gnu_longlink()
            || t.is_pax_local_extensions()
            || t.is_pax_global_extensions()
            || t.is_gnu_sparse()
        {
            return Ok(None);
        }
        let blank = header.as_old().size.iter().all(|&b| b == 0 || b == b' ');
        let Some(len) = header.entry_size().ok().or(blank.then_some(0)) else {
            return Ok(None);
        };
        let Some(next) = len
            .checked_add(511)
            .and_then(|l| (at + 512).checked_add(l & !511))
        else {
            return Ok(None);
        };
        if next > size {
            let cut_short = self.next_header(at + 512, size)?.is_none();
            return Ok(cut_short.then_some((len, next)));
        }
        if next + 512 > size {
            return Ok(Some((len, next)));
        }
        let after = self.block(next)?;
        let zeros = after.as_bytes().iter().filter(|&&b| b != 0).count() <= 4;
        let ustar = after.as_bytes().get(257..262) == Some(&b"ustar"[..]);
        Ok((zeros || ustar || is_header(&after)).then_some((len, next)))
    }

    /// The first position at or after `from` (in steps of 512 bytes) of a block that is a
    /// tar header whose checksum holds; `None` when the shard ends first.
    fn next_header(&mut self, from: u64, size: u64) -> io::Result<Option<u64>> {
        self.file.seek(SeekFrom::Start(from))?;
        let mut header = ::tar::Header::new_old();
        let mut at = from;
        while at + 512 <= size {
            self.file.read_exact(header.as_mut_bytes())?;
            if is_header(&header) {
                return Ok(Some(at));
            }
            at += 512;
        }
        Ok(None)
    }
}

impl Read for Window {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let room = (512 + EXTENSION_LIMIT).saturating_sub(self.run);
        if room == 0 {
            return Err(io::Error::other(format!(
                "tar extension header over {EXTENSION_LIMIT} bytes"
            )));
        }
        let n = buf.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        let n = self.file.read(&mut buf[..n])?;
        self.pos += n as u64;
        self.run += n as u64;
        Ok(n)
    }
}

impl Seek for Window {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let target = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
            SeekFrom::End(_) => None,
        };
        let delta = target.and_then(|t| i64::try_from(i128::from(t) - i128::from(self.pos)).ok());
        let (Some(target), Some(delta)) = (target, delta) else {
            return Err(io::Error::other("tar seek out of range"));
        };
        self.file.seek_relative(delta)?;
        self.pos = target;
        self.header_at = target;
        self.run = 0;
        Ok(target)
    }
}

/// Whether `header` is one whose checksum holds (an all-zero block, which ends an
/// archive, is not).
fn is_header(header: &::tar::Header) -> bool {
    let mut summed = header.clone();
    summed.set_cksum();
    header.as_bytes().iter().any(|&b| b != 0)
        && matches!((header.cksum(), summed.cksum()), (Ok(a), Ok(b)) if a == b)
}

/// A tar member of a sample: its extension, data offset and length.
type Member = (String, u64, u64);

/// The members of one sample key, in shard order.
struct Group {
    key: String,
    members: Vec<Member>,
}

/// The sample key and extension of the member `name`: the name up to the first dot of its
/// file name, and the rest (lowercased); `None` for a name without a dot.
fn key_of(name: &str) -> Option<(String, String)> {
    let (dir, file) = match name.rsplit_once('/') {
        Some((d, f)) => (format!("{d}/"), f),
        None => (String::new(), name),
    };
    let (stem, ext) = file.split_once('.')?;
    Some((format!("{dir}{stem}"), ext.to_ascii_lowercase()))
}

/// The member name a header gives (the `tar` crate's reading of its name fields).
fn name_of(header: &::tar::Header) -> String {
    String::from_utf8_lossy(&header.path_bytes()).into_owned()
}

/// Members grouped into samples, in shard order.
#[derive(Default)]
struct Samples {
    groups: Vec<Group>,
    /// Damaged headers whose members were lost: the key the header's name gives, and the
    /// number of groups before it.
    lost: Vec<(String, usize)>,
}

impl Samples {
    /// Adds the member `name` (a regular file) with its data offset and length.
    fn add(&mut self, name: &str, data_at: u64, len: u64) {
        let Some((key, ext)) = key_of(name) else {
            return;
        };
        let member = (ext, data_at, len);
        match self.groups.last_mut() {
            Some(g) if g.key == key => g.members.push(member),
            _ => self.groups.push(Group {
                key,
                members: vec![member],
            }),
        }
    }

    /// The damaged `header` follows the members so far, and its member is lost. A header
    /// whose name gives no sample key (an end-of-archive block, or a member outside any
    /// sample) takes no sample's member with it.
    fn lose(&mut self, header: &::tar::Header) {
        if let Some((key, _)) = key_of(&name_of(header)) {
            self.lost.push((key, self.groups.len()));
        }
    }

    /// Which groups lost a member to a damaged header: the one beside it that its name's
    /// key names, or both beside it when the name names neither.
    fn incomplete(&self) -> Vec<bool> {
        let mut out = vec![false; self.groups.len()];
        for (key, at) in &self.lost {
            let (before, after) = (at.checked_sub(1), Some(*at).filter(|&i| i < out.len()));
            let names = |i: Option<usize>| {
                i.and_then(|i| self.groups.get(i))
                    .is_some_and(|g| g.key == *key)
            };
            let hit = if names(before) {
                [before, None]
            } else if names(after) {
                [after, None]
            } else {
                [before, after]
            };
            for i in hit.into_iter().flatten() {
                if let Some(o) = out.get_mut(i) {
                    *o = true;
                }
            }
        }
        out
    }

    /// One entry per sample that has an image member, its label read from its `cls`.
    fn entries(self, shard: &Path) -> Vec<Entry> {
        let incomplete = self.incomplete();
        let mut out = Vec::with_capacity(self.groups.len());
        for (Group { key, members }, incomplete) in self.groups.into_iter().zip(incomplete) {
            if incomplete {
                log::warn!(
                    "{}: sample {key:?} left out: it lost a member to a damaged header",
                    shard.display()
                );
                continue;
            }
            let find = |exts: &[&str]| {
                members
                    .iter()
                    .find(|(e, _, _)| exts.contains(&e.as_str()))
                    .map(|&(_, o, l)| (o, l))
            };
            let jpeg = find(&["jpg", "jpeg", "jpe", "jfif"]);
            let png = find(&["png"]);
            let named_mask = find(&["mask.png", "seg.png"]);
            let (image, mask) = match (jpeg, png) {
                (Some(j), p) => (Some(j), named_mask.or(p)),
                (None, Some(p)) => (Some(p), named_mask),
                // Any other extension a folder listing takes as an image.
                (None, None) => (find(crate::source::files::IMAGE_EXTENSIONS), named_mask),
            };
            let Some((offset, len)) = image else {
                log::warn!("{}: sample {key:?} has no image member", shard.display());
                continue;
            };
            // A small member's bytes (longer ones are not what they should be).
            let small = |exts: &[&str], limit: u64| {
                let (o, l) = find(exts)?;
                let mut b = Vec::new();
                read_range(shard, o, l, limit, &mut b).ok().map(|()| b)
            };
            let label = small(&["cls"], 64)
                .and_then(|b| String::from_utf8(b).ok())
                .and_then(|s| s.trim().parse::<u32>().ok());
            let path = small(&["path.txt"], MAX_RECORDED).and_then(|b| recorded_text(&b));
            let class = small(&["cls.txt"], MAX_RECORDED).and_then(|b| recorded_text(&b));
            out.push(Entry {
                name: key,
                offset,
                len,
                label,
                mask,
                path,
                class,
            });
        }
        out
    }
}

/// Adds the regular files of `archive` (which starts at `base` in the shard) to
/// `samples`, up to the end of the archive or the first header the crate refuses, whose
/// error it returns.
fn list(
    archive: &mut ::tar::Archive<Window>,
    base: u64,
    samples: &mut Samples,
) -> Option<io::Error> {
    let entries = match archive.entries_with_seek() {
        Ok(entries) => entries,
        Err(e) => return Some(e),
    };
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => return Some(e),
        };
        if entry.header().entry_type().is_file() {
            let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            samples.add(&name, base + entry.raw_file_position(), entry.size());
        }
    }
    None
}

/// Indexes a WebDataset tar shard of `size` bytes (see the module docs for damage).
pub(super) fn index(shard: &Path, size: u64) -> Result<Vec<Entry>> {
    let io = |e: io::Error| Error::io(shard, e);
    let mut window = Window::open(shard).map_err(io)?;
    let mut samples = Samples::default();
    loop {
        let base = window.base;
        let mut archive = ::tar::Archive::new(window);
        let refused = list(&mut archive, base, &mut samples);
        window = archive.into_inner();
        let Some(e) = refused else {
            break;
        };
        let at = base.saturating_add(window.header_at);
        if at.saturating_add(512) > size {
            // Cut short inside a header (or an extension): the shard ends there.
            break;
        }
        let header = window.block(at).map_err(io)?;
        let next = match window.follows(&header, at, size).map_err(io)? {
            Some((len, next)) => {
                log::warn!(
                    "{}: damaged tar header at offset {at} ({e}); its size agrees with the shard, so it is used",
                    shard.display()
                );
                if header.entry_type().is_file() {
                    samples.add(&name_of(&header), at + 512, len);
                }
                Some(next)
            }
            None => {
                samples.lose(&header);
                let next = window.next_header(at + 512, size).map_err(io)?;
                log::warn!(
                    "{}: damaged tar header at offset {at} ({e}); resuming at {next:?}",
                    shard.display()
                );
                next
            }
        };
        match next {
            Some(p) if p + 512 <= size => window.restart(p).map_err(io)?,
            _ => break,
        }
    }
    Ok(samples.entries(shard))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ustar member.
    fn member(tar: &mut ::tar::Builder<Vec<u8>>, name: &str, data: &[u8]) {
        let mut h = ::tar::Header::new_ustar();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        tar.append_data(&mut h, name, data).expect("member");
    }

    /// Samples `s0`, `s1`, `s2`: an image of 700 bytes (`i` repeated) and a label each.
    fn three() -> Vec<u8> {
        let mut tar = ::tar::Builder::new(Vec::new());
        for i in 0..3u8 {
            member(&mut tar, &format!("s{i}.jpg"), &[i; 700]);
            member(&mut tar, &format!("s{i}.cls"), format!("{i}").as_bytes());
        }
        tar.into_inner().expect("tar")
    }

    /// One PAX record: `<length> <key>=<value>\n`, the length counting itself.
    fn pax(key: &str, value: &str) -> String {
        let body = format!(" {key}={value}\n");
        let mut n = body.len() + 1;
        loop {
            let record = format!("{n}{body}");
            if record.len() == n {
                return record;
            }
            n = record.len();
        }
    }

    /// A PAX extension member (nameless) holding `records`, for the member after it.
    fn pax_member(tar: &mut ::tar::Builder<Vec<u8>>, records: &str) {
        let mut x = ::tar::Header::new_ustar();
        x.set_entry_type(::tar::EntryType::XHeader);
        x.set_size(records.len() as u64);
        x.set_cksum();
        tar.append(&x, records.as_bytes()).expect("pax");
    }

    /// Where the header of member `name` is.
    fn header_of(bytes: &[u8], name: &str) -> usize {
        (0..bytes.len())
            .step_by(512)
            .find(|&at| bytes[at..].starts_with(name.as_bytes()))
            .expect("header")
    }

    /// The samples of `bytes` as a shard: (key, label, image bytes).
    fn listed(bytes: &[u8]) -> Vec<(String, Option<u32>, Vec<u8>)> {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.tar");
        std::fs::write(&path, bytes).expect("write");
        index(&path, bytes.len() as u64)
            .expect("index")
            .into_iter()
            .map(|e| {
                let mut image = Vec::new();
                let _ = read_range(&path, e.offset, e.len, u64::MAX, &mut image);
                (e.name, e.label, image)
            })
            .collect()
    }

    fn keys(bytes: &[u8]) -> Vec<String> {
        listed(bytes).into_iter().map(|(k, _, _)| k).collect()
    }

    #[test]
    fn members_group_by_key_through_long_names_and_pax_paths() {
        let mut tar = ::tar::Builder::new(Vec::new());
        member(&mut tar, "s0.jpg", b"zero");
        // A path too long for a ustar header: the crate writes a GNU long name before it.
        let deep = format!("{}/s1", "d".repeat(120));
        let mut h = ::tar::Header::new_gnu();
        h.set_size(3);
        tar.append_data(&mut h, format!("{deep}.jpg"), &b"one"[..])
            .expect("long name");
        member(&mut tar, "s1.cls", b"1");
        // A PAX path record naming the member that follows.
        pax_member(&mut tar, &pax("path", "p/s2.jpeg"));
        member(&mut tar, "placeholder.bin", b"two");
        let bytes = tar.into_inner().expect("tar");
        let got = listed(&bytes);
        let want = [
            ("s0".to_string(), None, b"zero".to_vec()),
            (deep, None, b"one".to_vec()),
            ("p/s2".to_string(), None, b"two".to_vec()),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn a_damaged_header_whose_size_agrees_with_the_shard_is_used() {
        let mut bytes = three();
        // The mode field of s1.jpg: the checksum fails, nothing else is wrong.
        let at = header_of(&bytes, "s1.jpg");
        bytes[at + 101] ^= 0x02;
        let got = listed(&bytes);
        assert_eq!(keys(&bytes), ["s0", "s1", "s2"]);
        assert_eq!(got[1], ("s1".to_string(), Some(1), vec![1; 700]));
    }

    #[test]
    fn a_header_with_a_garbled_size_is_skipped_and_its_sample_left_out() {
        let mut bytes = three();
        let at = header_of(&bytes, "s1.jpg");
        bytes[at + 124] = b'9';
        assert_eq!(keys(&bytes), ["s0", "s2"]);
        // Its name garbled too: neither neighbour can be told from the other, both go.
        bytes[at] = b'x';
        assert_eq!(keys(&bytes), ["s2"]);
    }

    #[test]
    fn a_damaged_end_of_archive_block_changes_nothing() {
        let mut bytes = three();
        let end = bytes.len() - 1024;
        bytes[end + 7] ^= 0x10;
        bytes[end + 600] ^= 0x01;
        assert_eq!(keys(&bytes), ["s0", "s1", "s2"]);
    }

    #[test]
    fn a_shard_cut_inside_a_header_ends_there() {
        let mut bytes = three();
        bytes.truncate(header_of(&bytes, "s1.cls") + 100);
        let got = listed(&bytes);
        assert_eq!(keys(&bytes), ["s0", "s1"]);
        assert_eq!(got[1], ("s1".to_string(), None, vec![1; 700]));
    }

    #[test]
    fn a_huge_extension_is_refused_not_read_whole() {
        // PAX records renaming the next member, padded past the limit: were they read,
        // s1 would be listed as `p/renamed`.
        let mut records = pax("path", "p/renamed.jpg");
        while (records.len() as u64) <= EXTENSION_LIMIT {
            records += &pax("comment", &"x".repeat(1000));
        }
        let mut tar = ::tar::Builder::new(Vec::new());
        member(&mut tar, "s0.jpg", b"zero");
        pax_member(&mut tar, &records);
        member(&mut tar, "s1.jpg", b"one");
        member(&mut tar, "s2.jpg", b"two");
        let bytes = tar.into_inner().expect("tar");
        // Listing resumes at the member the records describe, under its own name; the
        // records, nameless, took no sample's member with them.
        assert_eq!(keys(&bytes), ["s0", "s1", "s2"]);
        // Under the limit they are read.
        let mut tar = ::tar::Builder::new(Vec::new());
        pax_member(&mut tar, &pax("path", "p/renamed.jpg"));
        member(&mut tar, "s1.jpg", b"one");
        assert_eq!(keys(&tar.into_inner().expect("tar")), ["p/renamed"]);
    }
}
