//! WebDataset tar shards: indexing (a walk over the 512-byte blocks of the shard: ustar,
//! GNU and PAX headers, GNU long names, PAX `path` and `size`, octal and base-256 sizes,
//! header checksums verified) and reading a member's bytes by their range.
//!
//! Members are grouped into samples by key (the member name up to the first dot of its
//! file name): the image (any extension a folder listing takes: `jpg`, `jpeg`, `png`, `webp`, `bmp`, `tif`, `tiff`, `gif`, ...), the label mask (`mask.png`
//! or `seg.png`; or `png` beside a JPEG), the label (`cls`, a decimal integer), the class
//! name (`cls.txt`, UTF-8) and the sample's path in the dataset it was converted from
//! (`path.txt`, UTF-8; see [`super::write`]), and targets beyond one class id (`json`:
//! an object with the keys of a JSON Lines manifest, `labels`, `values`, `boxes`,
//! `box_classes`, `keypoints`; see [`crate::source::target::targets_from_json`]).
//!
//! Every sample a shard holds is listed, and one that cannot be delivered is listed as
//! reported ([`super::Problem`]), never left out:
//! - a sample key with no image member (a renamed image, a member that is not a regular
//!   file) is reported under its key, with its members;
//! - a `cls` member that is not a number is reported as a label problem (and a sample
//!   without one, in a dataset whose samples have labels, when the dataset is listed);
//! - a `json` member that is not JSON, holds unusable targets (a box that is not four
//!   finite numbers with `x0 <= x1`, more than [`super::super::target::MAX_TARGETS`]
//!   of a kind, ...) or is over [`TARGETS_LIMIT`] bytes is reported as a label problem;
//! - damage: a block where a header should be that is not one (its checksum fails, it is
//!   zeros followed by more of the shard, its size does not read, its size runs past the
//!   end of the shard while a header follows, an extension that does not parse) starts a
//!   damaged region, which runs to the next block that is a header whose checksum holds,
//!   where the walk resumes (reading the shard once, a block at a time). A region whose
//!   first block is an intact header with a bad size is reported under its member's
//!   sample. Else it is reported under the sample beside it that lacks a member (both
//!   neighbours of one key; the neighbour of the name a header with a failed checksum
//!   still gives, when it lacks one; the one of the two without its image or label);
//!   else under the neighbour of that name; else, for a name no sample has, as a sample
//!   of its own under that name (a damaged name never lists one sample twice); else,
//!   when it cannot be told whose it is, as an entry of its own,
//!   `<shard file name>/@<offset>`. A region of blocks that are (nearly) zeros running to
//!   the end of the shard is its end-of-archive marker, not damage;
//! - a member whose data runs past the end of the shard with no header after it (the
//!   shard is cut short) is reported under its sample;
//! - a shard of 0 bytes, or one with no tar header at all, is one entry `@0` that is
//!   reported.
//!
//! No size read from the shard is allocated before it is checked: extensions (long names,
//! PAX records) are read only up to [`EXTENSION_LIMIT`] bytes and within the shard, and
//! a member's data is skipped, not read, except the small text members (`cls`,
//! `cls.txt`, `path.txt`, up to [`MAX_RECORDED`] bytes) and `json` (up to
//! [`TARGETS_LIMIT`] bytes).

use std::io::{self, BufReader, Read};
use std::path::Path;

use super::check::Check;
use super::{recorded_text, with_shard, Entry, Problem, ReadError, MAX_RECORDED};
use crate::error::{Error, Result};
use crate::source::target::{targets_from_json, Targets, TargetsError};

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
    with_shard(path, offset, len, |f| f.read_exact(buf)).map_err(|error| {
        ReadError::MemberCutShort {
            path: path.to_path_buf(),
            offset,
            error,
        }
    })
}

/// The most bytes of a GNU long name or PAX records read while indexing. A larger one is
/// skipped (logged): the member after it keeps the name its own header gives.
const EXTENSION_LIMIT: u64 = 1 << 20;

/// A tar block.
pub(super) const BLOCK: u64 = 512;

/// The most bytes of extension headers (and their data) before a member that its check
/// covers ([`Check`]); a member after more is checked by its own header alone.
const HEAD_LIMIT: u64 = 64 << 10;

/// One 512-byte block of a shard.
pub(super) type Block = [u8; BLOCK as usize];

/// The extensions of a member that is a sample's text (read while indexing).
const TEXT: [&str; 3] = ["cls", "cls.txt", "path.txt"];

/// The members whose data indexing takes into a sample's entry: the texts and the
/// targets. A read of the sample checks them ([`Check`]).
const RECORDED: [&str; 4] = ["cls", "cls.txt", "path.txt", "json"];

/// The most bytes of a sample's `json` member (its targets) read while indexing: room
/// for [`crate::source::target::MAX_TARGETS`] boxes and keypoints written out in full.
pub(crate) const TARGETS_LIMIT: u64 = 1 << 20;

/// The shard, read a block at a time through a small buffer: skipping a member's data
/// seeks within the buffer where it can.
struct Blocks {
    r: BufReader<Box<dyn super::ShardRead>>,
    pos: u64,
    size: u64,
    /// Whether the members' data is read too, for its CRC-32C (a local shard: a read of
    /// the whole file, once, when it is indexed; a shard in a store is indexed from its
    /// headers alone).
    hash: bool,
}

impl Blocks {
    fn seek(&mut self, to: u64) -> io::Result<()> {
        let delta = i64::try_from(i128::from(to) - i128::from(self.pos))
            .map_err(|_| io::Error::other("tar seek out of range"))?;
        self.r.seek_relative(delta)?;
        self.pos = to;
        Ok(())
    }

    /// `buf.len()` bytes from `at`.
    fn read_at(&mut self, at: u64, buf: &mut [u8]) -> io::Result<()> {
        self.seek(at)?;
        self.r.read_exact(buf)?;
        self.pos += buf.len() as u64;
        Ok(())
    }

    /// The CRC-32C of the `len` bytes at `at`, read in pieces.
    fn crc_of(&mut self, at: u64, len: u64) -> io::Result<u32> {
        self.seek(at)?;
        let mut crc = 0;
        let mut left = len;
        let mut buf = vec![0u8; (64 << 10).min(len) as usize];
        while left > 0 {
            let n = (buf.len() as u64).min(left) as usize;
            self.r.read_exact(&mut buf[..n])?;
            crc = crc32c::crc32c_append(crc, &buf[..n]);
            self.pos += n as u64;
            left -= n as u64;
        }
        Ok(crc)
    }

    fn block(&mut self, at: u64) -> io::Result<Block> {
        let mut b = [0u8; BLOCK as usize];
        self.read_at(at, &mut b)?;
        Ok(b)
    }

    /// The first position at or after `from` (in steps of 512 bytes) of a block that is a
    /// header whose checksum holds (`None` when the shard ends first), and whether every
    /// block before it is (nearly) zeros.
    fn next_header(&mut self, from: u64) -> io::Result<(Option<u64>, bool)> {
        let mut quiet = true;
        let mut at = from;
        while at + BLOCK <= self.size {
            let b = self.block(at)?;
            if checksum_holds(&b) {
                return Ok((Some(at), quiet));
            }
            quiet &= nearly_zero(&b);
            at += BLOCK;
        }
        if at < self.size {
            let mut tail = vec![0u8; (self.size - at) as usize];
            self.read_at(at, &mut tail)?;
            quiet &= nearly_zero(&tail);
        }
        Ok((None, quiet))
    }
}

/// Whether `b` has at most 4 bytes that are not zero: an end-of-archive block, even with a
/// damaged byte or two.
fn nearly_zero(b: &[u8]) -> bool {
    b.iter().filter(|&&x| x != 0).count() <= 4
}

/// An octal number field: optional leading spaces, octal digits, then NULs or spaces to
/// the end; a blank field is 0. `None` for anything else, or more than 64 bits.
fn octal(field: &[u8]) -> Option<u64> {
    let digits = field.iter().skip_while(|&&b| b == b' ');
    let mut v = 0u64;
    let mut ended = false;
    for &b in digits {
        match b {
            b'0'..=b'7' if !ended => v = v.checked_mul(8)?.checked_add(u64::from(b - b'0'))?,
            0 | b' ' => ended = true,
            _ => return None,
        }
    }
    Some(v)
}

/// A number field: octal, or GNU base-256 (the first byte's high bit set, the value
/// big-endian in the rest; a negative one, first byte `0xff`, is no size).
pub(super) fn number(field: &[u8]) -> Option<u64> {
    match field.split_first() {
        Some((&first, rest)) if first & 0x80 != 0 => {
            if first == 0xff {
                return None;
            }
            rest.iter().try_fold(u64::from(first & 0x7f), |v, &b| {
                v.checked_mul(256)?.checked_add(u64::from(b))
            })
        }
        _ => octal(field),
    }
}

/// Whether `b` is a tar header whose checksum holds: the checksum field (octal, with at
/// least one digit) is the sum of the block's bytes, the field itself counted as spaces
/// (unsigned, or signed as some old writers summed). An all-zero block is not.
pub(super) fn checksum_holds(b: &Block) -> bool {
    let field = &b[148..156];
    let Some(want) = octal(field).filter(|_| field.iter().any(u8::is_ascii_digit)) else {
        return false;
    };
    let (mut unsigned, mut signed) = (0u64, 0i64);
    for (i, &x) in b.iter().enumerate() {
        let x = if (148..156).contains(&i) { b' ' } else { x };
        unsigned += u64::from(x);
        signed += i64::from(x as i8);
    }
    b.iter().any(|&x| x != 0) && (want == unsigned || i64::try_from(want) == Ok(signed))
}

/// The member name a header gives (ustar prefix and name, as the `tar` crate reads them).
pub(super) fn name_of(b: &Block) -> String {
    let mut h = ::tar::Header::new_old();
    h.as_mut_bytes().copy_from_slice(b);
    String::from_utf8_lossy(&h.path_bytes()).into_owned()
}

/// The name a damaged block still gives, when it looks like a header (the ustar magic, or
/// a checksum field with digits) and the name is text: the member it stood for.
fn damaged_name(b: &Block) -> Option<String> {
    let magic = b.get(257..262) == Some(&b"ustar"[..]);
    let field = &b[148..156];
    let cksum = octal(field).is_some() && field.iter().any(u8::is_ascii_digit);
    if !(magic || cksum) {
        return None;
    }
    let mut h = ::tar::Header::new_old();
    h.as_mut_bytes().copy_from_slice(b);
    let name = String::from_utf8(h.path_bytes().into_owned()).ok()?;
    (!name.is_empty() && !name.chars().any(char::is_control)).then_some(name)
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

/// The bytes a 512-byte-padded member of `len` bytes whose header is at `at` takes, to
/// where the next header is; `None` past `u64`.
fn after(at: u64, len: u64) -> Option<u64> {
    let padded = len.checked_add(BLOCK - 1)? & !(BLOCK - 1);
    (at + BLOCK).checked_add(padded)
}

/// A GNU long name's data: the name, NUL-terminated (only NULs after it), UTF-8 without
/// control characters.
fn long_name(data: &[u8]) -> Option<String> {
    let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let (name, rest) = data.split_at(end);
    let name = std::str::from_utf8(name).ok()?;
    (!name.is_empty() && !name.chars().any(char::is_control) && rest.iter().all(|&b| b == 0))
        .then(|| name.to_string())
}

/// PAX extended header records (`<length> <key>=<value>\n`, the length counting the
/// whole record): the `path` and `size` they give. `None` when they do not parse.
fn pax(data: &[u8]) -> Option<(Option<String>, Option<u64>)> {
    let (mut path, mut size) = (None, None);
    let mut rest = data;
    // Writers pad the records with NULs to the block.
    while rest.first().is_some_and(|&b| b != 0) {
        let space = rest.iter().position(|&b| b == b' ')?;
        let n: usize = std::str::from_utf8(rest.get(..space)?).ok()?.parse().ok()?;
        let record = rest.get(..n)?;
        rest = rest.get(n..)?;
        let body = record.get(space + 1..)?.strip_suffix(b"\n")?;
        let eq = body.iter().position(|&b| b == b'=')?;
        let (key, value) = (body.get(..eq)?, body.get(eq + 1..)?);
        match key {
            b"path" => path = Some(String::from_utf8(value.to_vec()).ok()?),
            b"size" => size = Some(std::str::from_utf8(value).ok()?.parse().ok()?),
            _ => {}
        }
    }
    rest.iter().all(|&b| b == 0).then_some((path, size))
}

/// A tar member of a sample.
struct Member {
    /// Its name.
    name: String,
    /// Its extension (lowercased).
    ext: String,
    /// Its data offset and length.
    at: u64,
    len: u64,
    /// Where its header starts (the first of the extension headers before it, when they
    /// are few: see [`HEAD_LIMIT`]), and the CRC-32C of the bytes from there to its data.
    head: u64,
    head_crc: u32,
    /// Its type flag when it is not a regular file (a directory, a link, ...): listed in
    /// reports, never taken as the sample's image.
    other: Option<u8>,
    /// The data of a small text member (`cls`, `cls.txt`, `path.txt`) or of the targets
    /// (`json`).
    text: Option<Vec<u8>>,
    /// The CRC-32C of its data, where indexing reads the data ([`Blocks::hash`]).
    data_crc: Option<u32>,
}

impl Member {
    fn describe(&self) -> String {
        match self.other {
            Some(t) => format!(
                "{} (type {:?}, not a regular file)",
                self.name,
                char::from(t)
            ),
            None => self.name.clone(),
        }
    }
}

/// The members of one sample key, in shard order, and the damage reported against it.
struct Group {
    key: String,
    /// Where its first member's header (or the damage naming it) is.
    at: u64,
    members: Vec<Member>,
    damage: Vec<String>,
}

impl Group {
    /// The first regular file of the extensions `exts`: its data offset and length.
    fn find(&self, exts: &[&str]) -> Option<&Member> {
        self.members
            .iter()
            .find(|m| m.other.is_none() && exts.contains(&m.ext.as_str()))
    }

    /// The image member and the mask member.
    fn image_and_mask(&self) -> (Option<&Member>, Option<&Member>) {
        let jpeg = self.find(&["jpg", "jpeg", "jpe", "jfif"]);
        let png = self.find(&["png"]);
        let named_mask = self.find(&["mask.png", "seg.png"]);
        match (jpeg, png) {
            (Some(j), p) => (Some(j), named_mask.or(p)),
            (None, Some(p)) => (Some(p), named_mask),
            // Any other extension a folder listing takes as an image.
            (None, None) => (
                self.find(crate::source::files::IMAGE_EXTENSIONS),
                named_mask,
            ),
        }
    }

    fn members(&self) -> String {
        if self.members.is_empty() {
            return "none".into();
        }
        let names: Vec<String> = self.members.iter().map(Member::describe).collect();
        names.join(", ")
    }
}

/// A damaged region no intact member's header names: from `at` to `end`.
struct Region {
    at: u64,
    end: u64,
    what: String,
    /// The member name a damaged header still gives: a hint whose sample it is, not
    /// trusted (its checksum fails, so any of its bytes may be wrong).
    hint: Option<String>,
    /// The groups beside it (indexes into [`Samples::groups`]).
    before: Option<usize>,
    after: Option<usize>,
}

/// Members grouped into samples, and the damaged regions between them, in shard order.
#[derive(Default)]
struct Samples {
    groups: Vec<Group>,
    regions: Vec<Region>,
}

impl Samples {
    /// The group of `key` at the end (a new one unless the last group is of `key`), and
    /// the regions found since the last member told it is the one after them.
    fn group(&mut self, key: String, at: u64) -> Option<&mut Group> {
        if self.groups.last().is_none_or(|g| g.key != key) {
            self.groups.push(Group {
                key,
                at,
                members: Vec::new(),
                damage: Vec::new(),
            });
        }
        let last = self.groups.len() - 1;
        for r in self.regions.iter_mut().rev() {
            if r.after.is_some() {
                break;
            }
            r.after = Some(last);
        }
        self.groups.last_mut()
    }

    /// Adds a member (`at` its header's offset).
    fn add(&mut self, at: u64, member: Member) {
        let Some((key, ext)) = key_of(&member.name) else {
            return;
        };
        if let Some(g) = self.group(key, at) {
            g.members.push(Member { ext, ..member });
        }
    }

    /// Damage from `at` to `end`, `what` it is: reported under the sample of the member
    /// `name` when it names one, else as a region.
    fn damage(&mut self, at: u64, end: u64, what: String, name: Option<&str>) {
        match name.and_then(key_of) {
            Some((key, _)) => {
                let until = if end < at + BLOCK {
                    String::new()
                } else {
                    format!(" (no intact header from offset {at} to {end})")
                };
                if let Some(g) = self.group(key, at) {
                    g.damage.push(format!("{what}{until}"));
                }
            }
            None => self.suspect(at, end, what, None),
        }
    }

    /// Damage from `at` to `end`, `what` it is, starting at a block that may name a
    /// member (`hint`, from a header whose checksum fails): whose sample it is is told
    /// when the entries are made ([`Samples::entries`]), so that a damaged name never
    /// makes a sample of its own beside the one it damaged.
    fn suspect(&mut self, at: u64, end: u64, what: String, hint: Option<String>) {
        self.regions.push(Region {
            at,
            end,
            what,
            hint,
            before: self.groups.len().checked_sub(1),
            after: None,
        });
    }

    /// One entry per sample key, and one per region told to no sample, in shard order.
    fn entries(mut self, size: u64) -> Vec<Entry> {
        let labelled = self.groups.iter().any(|g| g.find(&["cls"]).is_some());
        let lacking =
            |g: &Group| g.image_and_mask().0.is_none() || (labelled && g.find(&["cls"]).is_none());
        let mut out: Vec<(u64, Entry)> = Vec::new();
        for r in std::mem::take(&mut self.regions) {
            let sides = [r.before, r.after];
            let hint = r.hint.as_deref().and_then(key_of).map(|(k, _)| k);
            let named = |i: &usize| {
                hint.as_ref()
                    .is_some_and(|k| self.groups.get(*i).is_some_and(|g| &g.key == k))
            };
            let whose = match sides {
                [Some(b), Some(a)] if a == b => Some(b),
                _ => {
                    let lack: Vec<usize> = sides
                        .into_iter()
                        .flatten()
                        .filter(|&i| self.groups.get(i).is_some_and(lacking))
                        .collect();
                    // The neighbour of the name it gives that lacks a member, else the
                    // one neighbour that lacks a member, else the neighbour of its name.
                    lack.iter()
                        .copied()
                        .find(named)
                        .or(match lack[..] {
                            [i] => Some(i),
                            _ => None,
                        })
                        .or_else(|| sides.into_iter().flatten().find(named))
                }
            };
            let until = if r.end >= size {
                "to the end of the shard".to_string()
            } else {
                format!("up to the next tar header, at offset {}", r.end)
            };
            // A damaged header that still gives a name is told as its own damage is.
            let told = r.hint.as_ref().map(|_| {
                let until = if r.end < r.at + BLOCK {
                    String::new()
                } else {
                    format!(" (no intact header from offset {} to {})", r.at, r.end)
                };
                format!("{}{until}", r.what)
            });
            if let Some(g) = whose.and_then(|i| self.groups.get_mut(i)) {
                g.damage.push(told.unwrap_or_else(|| {
                    format!(
                        "damaged region beside it at offset {}: {}, {until}",
                        r.at, r.what
                    )
                }));
                continue;
            }
            // A name no neighbour has, and no other sample: a sample of its own, all its
            // members lost.
            match hint.filter(|k| !self.groups.iter().any(|g| &g.key == k)) {
                Some(key) => {
                    let g = Group {
                        key,
                        at: r.at,
                        members: Vec::new(),
                        damage: told.into_iter().collect(),
                    };
                    out.push((r.at, g.entry()));
                }
                None => out.push((
                    r.at,
                    Entry::damage(
                        r.at,
                        r.end - r.at,
                        format!(
                            "at offset {}: damaged region: {}, {until}; which samples it held cannot be told",
                            r.at, r.what
                        ),
                    ),
                )),
            }
        }
        for g in self.groups {
            out.push((g.at, g.entry()));
        }
        out.sort_by_key(|(at, _)| *at);
        out.into_iter().map(|(_, e)| e).collect()
    }
}

impl Group {
    /// The group's entry: the sample, or what is wrong with it.
    fn entry(self) -> Entry {
        let (image, mask) = self.image_and_mask();
        let (offset, len) = image.map_or((self.at, 0), |m| (m.at, m.len));
        let text = |ext: &str| self.find(&[ext]).map(|m| (m, m.text.as_deref()));
        let mut problem = None;
        let mut label = None;
        if !self.damage.is_empty() {
            problem = Some(Problem::Corrupt(format!(
                "sample {:?}: {} (members: {})",
                self.key,
                self.damage.join("; "),
                self.members()
            )));
        } else if image.is_none() {
            problem = Some(Problem::Corrupt(format!(
                "sample {:?} has no image member (members: {})",
                self.key,
                self.members()
            )));
        } else if let Some((m, bytes)) = text("cls") {
            let text = bytes.map(String::from_utf8_lossy);
            match text
                .as_deref()
                .map(str::trim)
                .and_then(|t| t.parse::<i128>().ok())
            {
                Some(v) => label = Some(v),
                None => {
                    let holds = text
                        .map_or_else(|| format!("{} bytes", m.len), |t| format!("{:?}", t.trim()));
                    problem = Some(Problem::Label(format!(
                        "sample {:?}: its label member {} holds {holds}, not a class id",
                        self.key, m.name
                    )));
                }
            }
        }
        let mut targets = None;
        if problem.is_none() {
            if let Some((m, bytes)) = text("json") {
                match json_targets(bytes) {
                    Ok(t) => targets = t,
                    Err(why) => {
                        problem = Some(Problem::Label(format!(
                            "sample {:?}: its targets member {}: {why}",
                            self.key, m.name
                        )))
                    }
                }
            }
        }
        let recorded = |ext: &str| text(ext).and_then(|(_, b)| b).and_then(recorded_text);
        let deliverable = problem.is_none();
        Entry {
            name: self.key.clone(),
            offset,
            len,
            label,
            mask: mask.map(|m| (m.at, m.len)),
            path: recorded("path.txt"),
            class: recorded("cls.txt"),
            problem,
            unread: false,
            targets,
            check: image.filter(|_| deliverable).map(|m| Check {
                data: m.data_crc,
                ..self.check_of(m)
            }),
            mask_check: mask.filter(|_| deliverable).map(|m| Check {
                data: m.data_crc,
                ..Check::new(vec![(m.head, m.at - m.head, m.head_crc)])
            }),
        }
    }

    /// What a read of the sample's `image` checks: the image member's header (with the
    /// extension headers before it) and the members whose data the entry holds (the
    /// label, class name, path and targets: headers and data), so that a shard rewritten
    /// under an index it no longer matches never delivers another member's bytes, nor
    /// the sample with a label or path its members no longer give.
    fn check_of(&self, image: &Member) -> Check {
        let mut pieces = vec![(image.head, image.at - image.head, image.head_crc)];
        for ext in RECORDED {
            if let Some(m) = self.find(&[ext]) {
                let (len, crc) = match &m.text {
                    Some(t) => (m.len, crc32c::crc32c_append(m.head_crc, t)),
                    None => (0, m.head_crc),
                };
                pieces.push((m.head, m.at - m.head + len, crc));
            }
        }
        Check::new(pieces)
    }
}

/// The targets a `json` member holds (`None` for an object without any), or why it
/// cannot give them. `bytes` is `None` when the member was over [`TARGETS_LIMIT`] (or
/// not a regular file) and was not read.
fn json_targets(bytes: Option<&[u8]>) -> std::result::Result<Option<Targets>, JsonTargetsError> {
    let bytes = bytes.ok_or(JsonTargetsError::NotRead)?;
    let value: serde_json::Value = serde_json::from_slice(bytes)?;
    if !value.is_object() {
        return Err(JsonTargetsError::NotObject);
    }
    Ok(targets_from_json(&value)?)
}

/// Why a WebDataset `json` member gives no targets.
#[derive(Debug, thiserror::Error)]
enum JsonTargetsError {
    /// Over [`TARGETS_LIMIT`], or not a regular file: not read.
    #[error("not read (over {TARGETS_LIMIT} bytes, or not a regular file)")]
    NotRead,
    /// Not JSON.
    #[error("not JSON ({0})")]
    NotJson(#[from] serde_json::Error),
    /// JSON, but not an object.
    #[error("not a JSON object")]
    NotObject,
    /// An object whose targets cannot be used.
    #[error(transparent)]
    Targets(#[from] TargetsError),
}

/// A GNU long name or PAX records waiting for the member they describe.
#[derive(Default)]
struct Pending {
    name: Option<String>,
    size: Option<u64>,
    /// Where the first of the extension headers is, and the CRC-32C of the bytes from
    /// there to the next header.
    chain: Option<(u64, u32)>,
}

/// Indexes a WebDataset tar shard of `size` bytes (see the module docs for damage).
pub(super) fn index(shard: &Path, size: u64) -> Result<Vec<Entry>> {
    let io = |e: io::Error| Error::io(shard, e);
    if size == 0 {
        return Ok(vec![Entry::damage(
            0,
            0,
            "is empty (0 bytes): not a tar file".into(),
        )]);
    }
    let file = super::open_shard(shard).map_err(io)?;
    let mut blocks = Blocks {
        r: BufReader::with_capacity(64 << 10, file),
        pos: 0,
        size,
        hash: !crate::source::remote::is_url(shard),
    };
    let mut samples = Samples::default();
    walk(&mut blocks, &mut samples, &shard.display().to_string()).map_err(io)?;
    let entries = samples.entries(size);
    if entries.is_empty() && size > 0 {
        log::warn!("{}: a tar file with no members", shard.display());
    }
    Ok(entries)
}

/// What one header block leads to.
enum Step {
    /// The next header is at this offset.
    Next(u64),
    /// The shard ends here.
    End,
    /// Damage starts here: `what` it is, the member name it still gives, whether the
    /// block is (nearly) zeros, and where the next intact header is if that is known.
    Damage {
        what: String,
        name: Option<String>,
        /// Whether `name` is from a header whose checksum holds (else it is a hint).
        trusted: bool,
        zeros: bool,
        next: Option<Option<u64>>,
    },
}

impl Step {
    fn damage(what: String, name: Option<String>) -> Step {
        Step::Damage {
            what,
            name,
            trusted: true,
            zeros: false,
            next: None,
        }
    }
}

/// Walks the blocks of the shard from its start, adding its members and damage to
/// `samples`.
fn walk(blocks: &mut Blocks, samples: &mut Samples, shard: &str) -> io::Result<()> {
    let size = blocks.size;
    let mut pending = Pending::default();
    let mut at = 0u64;
    while at < size {
        if size - at < BLOCK {
            let (_, quiet) = blocks.next_header(at)?;
            if !quiet {
                let what = "the shard ends inside a header block".to_string();
                samples.damage(at, size, what, None);
            }
            return Ok(());
        }
        let b = blocks.block(at)?;
        let step = if checksum_holds(&b) {
            header(blocks, samples, &mut pending, at, &b, shard)?
        } else {
            let name = damaged_name(&b);
            let what = match &name {
                _ if b.iter().all(|&x| x == 0) => {
                    "a block of zeros where a tar header should be (an end-of-archive marker, or a zeroed header)".to_string()
                }
                Some(n) => format!("the tar header of {n} at offset {at} fails its checksum"),
                None => "a block that is not a tar header".to_string(),
            };
            Step::Damage {
                what,
                name,
                trusted: false,
                zeros: nearly_zero(&b),
                next: None,
            }
        };
        match step {
            Step::Next(p) => at = p,
            Step::End => return Ok(()),
            Step::Damage {
                what,
                name,
                trusted,
                zeros,
                next,
            } => {
                pending = Pending::default();
                let (next, quiet) = match next {
                    Some(n) => (n, false),
                    None => blocks.next_header(at + BLOCK)?,
                };
                if next.is_none() && quiet && zeros {
                    // The end-of-archive marker (and the zeros after it).
                    return Ok(());
                }
                let end = next.unwrap_or(size);
                log::warn!(
                    "{shard}: damaged tar data at offset {at} ({what}); resuming at {next:?}"
                );
                if trusted {
                    samples.damage(at, end, what, name.as_deref());
                } else {
                    samples.suspect(at, end, what, name);
                }
                at = end;
            }
        }
    }
    Ok(())
}

/// The header `b` at `at`, whose checksum holds: adds the member it gives to `samples`,
/// or keeps the extension it is in `pending` for the member after it.
fn header(
    blocks: &mut Blocks,
    samples: &mut Samples,
    pending: &mut Pending,
    at: u64,
    b: &Block,
    shard: &str,
) -> io::Result<Step> {
    let size = blocks.size;
    let name = name_of(b);
    let flag = b[156];
    let Some(own) = number(&b[124..136]) else {
        let field = String::from_utf8_lossy(&b[124..136]).into_owned();
        let what = format!("the size field of {name} at offset {at} is not a number ({field:?})");
        return Ok(Step::damage(what, Some(name)));
    };
    let extension = matches!(flag, b'L' | b'K' | b'x' | b'g');
    let len = if extension {
        own
    } else {
        pending.size.take().unwrap_or(own)
    };
    let Some(end) = after(at, len).filter(|&e| e <= size) else {
        let (next, _) = blocks.next_header(at + BLOCK)?;
        if next.is_some() || extension {
            let what = format!(
                "the size of {name} at offset {at}, {len} bytes, runs past the end of the shard ({size} bytes)"
            );
            let name = (!extension).then_some(name);
            return Ok(Step::Damage {
                what,
                name,
                trusted: true,
                zeros: false,
                next: Some(next),
            });
        }
        // No header follows: the shard is cut short inside this member.
        let name = pending.name.take().unwrap_or(name);
        let what = format!(
            "member {name} ({len} bytes at offset {}) is cut short: the shard ends at offset {size}",
            at + BLOCK
        );
        let head = (at, crc32c::crc32c(b));
        samples.add(at, member(name.clone(), at, head, len, flag, None));
        samples.damage(at, at, what, Some(&name));
        return Ok(Step::End);
    };
    if extension {
        if len > EXTENSION_LIMIT {
            log::warn!(
                "{shard}: tar extension header at offset {at} of {len} bytes (over {EXTENSION_LIMIT}) skipped"
            );
            *pending = Pending::default();
            return Ok(Step::Next(end));
        }
        // At most EXTENSION_LIMIT bytes and the padding to the block, within the shard
        // (checked above): all of it is the next member's check.
        let mut padded = vec![0u8; (end - at - BLOCK) as usize];
        blocks.read_at(at + BLOCK, &mut padded)?;
        let (start, crc) = pending.chain.unwrap_or((at, 0));
        let crc = crc32c::crc32c_append(crc32c::crc32c_append(crc, b), &padded);
        pending.chain = Some((start, crc));
        let data = padded.get(..len as usize).unwrap_or_default();
        let parsed = match flag {
            b'L' => long_name(data).map(|n| pending.name = Some(n)),
            b'x' => pax(data).map(|(path, size)| {
                pending.name = path.or(pending.name.take());
                pending.size = size.or(pending.size);
            }),
            b'g' => pax(data).map(|_| ()),
            _ => Some(()),
        };
        if parsed.is_none() {
            let kind = if flag == b'L' {
                "a GNU long name that is not a name"
            } else {
                "PAX records that do not parse"
            };
            return Ok(Step::damage(
                format!("{kind} ({len} bytes at offset {at})"),
                None,
            ));
        }
        return Ok(Step::Next(end));
    }
    let name = pending.name.take().unwrap_or(name);
    let head = match pending.chain.take() {
        Some((start, crc)) if at - start <= HEAD_LIMIT => (start, crc32c::crc32c_append(crc, b)),
        _ => (at, crc32c::crc32c(b)),
    };
    let file = matches!(flag, b'0' | 0 | b'7');
    let limit = match key_of(&name) {
        Some((_, ext)) if TEXT.contains(&ext.as_str()) => MAX_RECORDED,
        Some((_, ext)) if ext == "json" => TARGETS_LIMIT,
        _ => 0,
    };
    let text = if file && limit > 0 && len <= limit {
        // At most `limit` bytes, within the shard (checked above).
        let mut data = vec![0u8; len as usize];
        blocks.read_at(at + BLOCK, &mut data)?;
        Some(data)
    } else {
        None
    };
    // (Within the shard: checked above.)
    let data_crc = match &text {
        Some(t) => Some(crc32c::crc32c(t)),
        None if file && blocks.hash => Some(blocks.crc_of(at + BLOCK, len)?),
        None => None,
    };
    let mut m = member(name, at, head, len, flag, text);
    m.data_crc = data_crc;
    samples.add(at, m);
    Ok(Step::Next(end))
}

/// The member `name` of `len` bytes whose header (type `flag`) is at `at`, its headers
/// `head`: where they start and their CRC-32C (see [`Member::head`]).
fn member(
    name: String,
    at: u64,
    head: (u64, u32),
    len: u64,
    flag: u8,
    text: Option<Vec<u8>>,
) -> Member {
    let (head, head_crc) = head;
    Member {
        name,
        ext: String::new(),
        at: at + BLOCK,
        len,
        head,
        head_crc,
        other: (!matches!(flag, b'0' | 0 | b'7')).then_some(flag),
        text,
        data_crc: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `json` member that is not JSON keeps serde_json's error as its source (the
    /// message says where the JSON breaks).
    #[test]
    fn a_json_member_that_is_not_json_keeps_the_parser_error() {
        let e = json_targets(Some(b"{\"labels\": [1,")).expect_err("cut short");
        assert!(e.to_string().starts_with("not JSON ("), "{e}");
        let source = std::error::Error::source(&e).expect("a source");
        assert!(source.downcast_ref::<serde_json::Error>().is_some());
        assert!(matches!(
            json_targets(Some(b"[1]")),
            Err(JsonTargetsError::NotObject)
        ));
    }

    /// A ustar member.
    fn member(tar: &mut ::tar::Builder<Vec<u8>>, name: &str, data: &[u8]) {
        let mut h = ::tar::Header::new_ustar();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        tar.append_data(&mut h, name, data).expect("member");
    }

    /// A GNU member: a name too long for its header gets a GNU long-name entry before it.
    fn gnu_member(tar: &mut ::tar::Builder<Vec<u8>>, name: &str, data: &[u8]) {
        let mut h = ::tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        tar.append_data(&mut h, name, data).expect("long name");
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

    /// The entries of `bytes` as a shard.
    fn indexed(bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf, Vec<Entry>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.tar");
        std::fs::write(&path, bytes).expect("write");
        let entries = index(&path, bytes.len() as u64).expect("index");
        (dir, path, entries)
    }

    /// The samples of `bytes` as a shard: (key, label, image bytes), each a sample
    /// indexing found nothing wrong with.
    fn listed(bytes: &[u8]) -> Vec<(String, Option<i128>, Vec<u8>)> {
        let (_dir, path, entries) = indexed(bytes);
        entries
            .into_iter()
            .map(|e| {
                assert_eq!(e.problem, None, "{}", e.name);
                let mut image = Vec::new();
                let _ = read_range(&path, e.offset, e.len, u64::MAX, &mut image);
                (e.name, e.label, image)
            })
            .collect()
    }

    /// The entries of `bytes` as a shard: (name, what is wrong if anything).
    fn problems(bytes: &[u8]) -> Vec<(String, Option<String>)> {
        let (_dir, _path, entries) = indexed(bytes);
        entries
            .into_iter()
            .map(|e| {
                let what = e.problem.map(|p| match p {
                    Problem::Corrupt(w) => format!("corrupt: {w}"),
                    Problem::Label(w) => format!("label: {w}"),
                });
                (e.name, what)
            })
            .collect()
    }

    fn keys(bytes: &[u8]) -> Vec<String> {
        problems(bytes).into_iter().map(|(k, _)| k).collect()
    }

    #[test]
    fn members_group_by_key_through_long_names_and_pax_paths() {
        let mut tar = ::tar::Builder::new(Vec::new());
        member(&mut tar, "s0.jpg", b"zero");
        // A path too long for a ustar header: the crate writes a GNU long name before it.
        let deep = format!("{}/s1", "d".repeat(120));
        gnu_member(&mut tar, &format!("{deep}.jpg"), b"one");
        // Its label, under the same long key (a long name of its own).
        gnu_member(&mut tar, &format!("{deep}.cls"), b"1");
        // A PAX path record naming the member that follows.
        pax_member(&mut tar, &pax("path", "p/s2.jpeg"));
        member(&mut tar, "placeholder.bin", b"two");
        let bytes = tar.into_inner().expect("tar");
        let got = listed(&bytes);
        let want = [
            ("s0".to_string(), None, b"zero".to_vec()),
            (deep, Some(1), b"one".to_vec()),
            ("p/s2".to_string(), None, b"two".to_vec()),
        ];
        assert_eq!(got, want);
    }

    /// The names of the entries with a problem, and whether each problem's text has
    /// `says`.
    fn reported(bytes: &[u8], says: &str) -> Vec<(String, bool)> {
        problems(bytes)
            .into_iter()
            .filter_map(|(k, p)| p.map(|p| (k, p.contains(says))))
            .collect()
    }

    #[test]
    fn a_header_whose_checksum_fails_reports_its_sample() {
        let mut bytes = three();
        // The mode field of s1.jpg: the checksum fails, nothing else is wrong.
        let at = header_of(&bytes, "s1.jpg");
        bytes[at + 101] ^= 0x02;
        assert_eq!(keys(&bytes), ["s0", "s1", "s2"]);
        let says = format!("the tar header of s1.jpg at offset {at} fails its checksum");
        assert_eq!(reported(&bytes, &says), [("s1".to_string(), true)]);
    }

    #[test]
    fn a_header_with_a_garbled_size_reports_its_sample() {
        let mut bytes = three();
        let at = header_of(&bytes, "s1.jpg");
        bytes[at + 124] = b'9';
        assert_eq!(keys(&bytes), ["s0", "s1", "s2"]);
        assert_eq!(reported(&bytes, "s1.jpg"), [("s1".to_string(), true)]);
        // Its name garbled too: a header whose checksum fails is no sample of its own;
        // the damage is reported under s1, left with its label alone, with the name the
        // header gives.
        bytes[at] = b'x';
        assert_eq!(keys(&bytes), ["s0", "s1", "s2"]);
        assert_eq!(reported(&bytes, "x1.jpg"), [("s1".to_string(), true)]);
        // A sample of one member whose name is garbled: no neighbour lacks a member, so
        // it is listed under the name it gives, once.
        let mut tar = ::tar::Builder::new(Vec::new());
        for i in 0..3u8 {
            member(&mut tar, &format!("s{i}.jpg"), &[i; 700]);
        }
        let mut bytes = tar.into_inner().expect("tar");
        let at = header_of(&bytes, "s1.jpg");
        bytes[at] = b'x';
        assert_eq!(keys(&bytes), ["s0", "x1", "s2"]);
        assert_eq!(
            reported(&bytes, "the tar header of x1.jpg at offset"),
            [("x1".to_string(), true)]
        );
    }

    /// The check of sample `i` of `bytes` (see [`Check`]) and the check's ranges as the
    /// bytes they cover.
    fn checked(bytes: &[u8], i: usize) -> Vec<Vec<u8>> {
        let (_dir, _path, entries) = indexed(bytes);
        let check = entries[i].check.clone().expect("a check");
        check
            .pieces
            .iter()
            .map(|&(o, l)| bytes[o as usize..(o + l) as usize].to_vec())
            .collect()
    }

    #[test]
    fn a_samples_check_covers_its_image_header_and_label_and_what_it_records() {
        let mut tar = ::tar::Builder::new(Vec::new());
        member(&mut tar, "s0.jpg", &[0; 700]);
        member(&mut tar, "s0.cls", b"3");
        member(&mut tar, "s0.path.txt", b"cat/a.jpg");
        member(&mut tar, "s0.txt", b"not recorded");
        // A long name (GNU) before the second sample's image: its blocks are checked too.
        let deep = format!("{}/s1", "d".repeat(120));
        gnu_member(&mut tar, &format!("{deep}.jpg"), b"one");
        let bytes = tar.into_inner().expect("tar");
        let header = |name: &str| {
            let at = header_of(&bytes, name);
            bytes[at..at + 512].to_vec()
        };
        let with_data = |name: &str, data: &[u8]| [header(name), data.to_vec()].concat();
        let want = [
            header("s0.jpg"),
            with_data("s0.cls", b"3"),
            with_data("s0.path.txt", b"cat/a.jpg"),
        ];
        assert_eq!(checked(&bytes, 0), want);
        // The long name's header, its data (a block), the member's own header.
        let long = header_of(&bytes, "././@LongLink");
        let data = long + 3 * 512;
        assert_eq!(&bytes[data..data + 3], b"one");
        assert_eq!(checked(&bytes, 1), [bytes[long..data].to_vec()]);
    }

    #[test]
    fn a_zeroed_header_is_reported_under_the_sample_it_leaves_without_a_member() {
        let mut bytes = three();
        let at = header_of(&bytes, "s1.jpg");
        bytes[at..at + 512].fill(0);
        let says = format!("damaged region beside it at offset {at}: a block of zeros");
        assert_eq!(reported(&bytes, &says), [("s1".to_string(), true)]);
        assert_eq!(keys(&bytes), ["s0", "s1", "s2"]);
        // Where neither neighbour lacks a member (a whole sample of one member lost),
        // the region is an entry of its own.
        let mut tar = ::tar::Builder::new(Vec::new());
        for i in 0..3u8 {
            member(&mut tar, &format!("s{i}.jpg"), &[i; 700]);
        }
        let mut bytes = tar.into_inner().expect("tar");
        let at = header_of(&bytes, "s1.jpg");
        bytes[at..at + 512].fill(0);
        assert_eq!(keys(&bytes), ["s0", &format!("@{at}"), "s2"]);
        let says = format!("at offset {at}: damaged region: a block of zeros");
        assert_eq!(reported(&bytes, &says), [(format!("@{at}"), true)]);
    }

    #[test]
    fn base_256_sizes_are_read_and_negative_or_junk_sizes_are_damage() {
        assert_eq!(number(b"0000001234\0 "), Some(0o1234));
        assert_eq!(number(b"  1234 \0\0\0\0\0"), Some(0o1234));
        assert_eq!(number(b"\0\0\0\0"), Some(0));
        let mut big = [0u8; 12];
        big[0] = 0x80;
        big[4..].copy_from_slice(&(700u64 << 30).to_be_bytes());
        assert_eq!(number(&big), Some(700 << 30));
        big[0] = 0xff;
        assert_eq!(number(&big), None);
        for junk in [&b"00000012x4\0 "[..], b"12 3", b"0008"] {
            assert_eq!(number(junk), None, "{junk:?}");
        }
        // A shard whose sizes are all base-256 reads as the octal one does.
        let mut bytes = three();
        for name in ["s0.jpg", "s1.jpg", "s2.jpg"] {
            let at = header_of(&bytes, name);
            let mut field = [0u8; 12];
            field[0] = 0x80;
            field[4..].copy_from_slice(&700u64.to_be_bytes());
            bytes[at + 124..at + 136].copy_from_slice(&field);
            let mut h = ::tar::Header::new_old();
            h.as_mut_bytes().copy_from_slice(&bytes[at..at + 512]);
            h.set_cksum();
            bytes[at..at + 512].copy_from_slice(h.as_bytes());
        }
        let got = listed(&bytes);
        assert_eq!(got[1], ("s1".to_string(), Some(1), vec![1; 700]));
        assert_eq!(got.len(), 3);
    }

    #[test]
    fn a_damaged_end_of_archive_block_changes_nothing() {
        let mut bytes = three();
        let end = bytes.len() - 1024;
        bytes[end + 7] ^= 0x10;
        bytes[end + 600] ^= 0x01;
        assert_eq!(keys(&bytes), ["s0", "s1", "s2"]);
        assert_eq!(listed(&bytes).len(), 3);
    }

    #[test]
    fn a_shard_cut_inside_a_header_reports_the_sample_it_cut() {
        let mut bytes = three();
        let at = header_of(&bytes, "s1.cls");
        bytes.truncate(at + 100);
        assert_eq!(keys(&bytes), ["s0", "s1"]);
        let says = format!("damaged region beside it at offset {at}: the shard ends inside a header block, to the end of the shard");
        assert_eq!(reported(&bytes, &says), [("s1".to_string(), true)]);
    }

    #[test]
    fn empty_and_non_tar_shards_are_one_reported_entry() {
        let none = problems(b"");
        assert_eq!(none.len(), 1);
        assert_eq!(none[0].0, "@0");
        assert!(none[0]
            .1
            .as_ref()
            .is_some_and(|p| p.contains("is empty (0 bytes)")));
        let text = b"this is not a tar file\n".repeat(100);
        let got = problems(&text);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, "@0");
        assert!(got[0]
            .1
            .as_ref()
            .is_some_and(|p| p.contains("to the end of the shard")));
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
