//! Checks a folder written by `stoker convert --to folder` against the folder it came
//! from: every file decodes (on the CPU, strict) to the same pixels, and every JPEG that
//! changed is one baseline scan with restart markers. Prints the counts.
//!
//! ```text
//! cargo run --release --example transcode_check -- ORIGINAL_DIR CONVERTED_DIR
//! ```

use std::path::{Path, PathBuf};

use stoker::decode::jpeg::transcode::layout;
use stoker::decode::{cpu, DecodeOptions, Image8};

fn files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            files(&p, out)?;
        } else {
            out.push(p);
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [orig, conv] = args.as_slice() else {
        return Err("usage: transcode_check ORIGINAL_DIR CONVERTED_DIR".into());
    };
    let mut list = Vec::new();
    files(orig, &mut list)?;
    list.sort();
    let (mut same, mut changed, mut intervals) = (0, 0, std::collections::BTreeMap::new());
    let opts = DecodeOptions::default();
    let (mut a, mut b) = (Image8::default(), Image8::default());
    for p in &list {
        let q = conv.join(p.strip_prefix(orig)?);
        let (x, y) = (std::fs::read(p)?, std::fs::read(&q)?);
        if x == y {
            same += 1;
            continue;
        }
        let l = layout(&y).ok_or_else(|| format!("{}: no layout", q.display()))?;
        if (l.frame, l.scans) != (0xC0, 1) || l.restart_interval == 0 && l.restart_markers > 0 {
            return Err(format!("{}: {l:?}", q.display()).into());
        }
        *intervals.entry(l.restart_interval).or_insert(0) += 1;
        cpu::decode_image(&x, &opts, &mut a)?;
        cpu::decode_image(&y, &opts, &mut b)?;
        if (a.width, a.height, &a.data) != (b.width, b.height, &b.data) {
            return Err(format!("{}: pixels differ", q.display()).into());
        }
        changed += 1;
    }
    println!(
        "{} files: {changed} transcoded (same pixels, SOF0, one scan), {same} byte for byte; \
         restart intervals (MCUs: files): {intervals:?}",
        list.len()
    );
    Ok(())
}
