//! A cache on disk of what NVRTC made of each kernel source (the PTX and, for a real
//! architecture, the CUBIN), shared by every process that names the same folder in
//! `STOKER_KERNEL_CACHE`: compiling the kernels takes seconds per process, and a run of
//! many processes (a test suite, a benchmark per backend) compiles them once.
//!
//! An entry is keyed by everything NVRTC's output depends on: the source file's name and
//! full text (headers included), the architecture, the options and the NVRTC version.
//! Its file name carries a hash of that key and the file itself the whole key but the
//! source (whose length and two hashes stand for it), checked when read: a changed
//! source, another architecture or another NVRTC is a miss and compiles again. A file
//! that cannot be read, is damaged or belongs to another key is a miss too (logged), and
//! an entry that cannot be written is only logged: the cache never makes compiling fail.
//! Entries are written to a temporary file beside their place and renamed there, so a
//! process never reads a half-written one.
#![doc(hidden)]

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use super::nvrtc::Output;
use crate::error::Result;

/// The environment variable naming the cache folder (unset or empty: no cache).
pub const ENV: &str = "STOKER_KERNEL_CACHE";

/// The first line of every entry.
const MAGIC: &[u8] = b"stoker kernel cache 1\n";

/// Entries larger than this are not read (a CUBIN of these kernels is under 1 MiB).
const MAX_ENTRY: u64 = 64 << 20;

/// The folder of `STOKER_KERNEL_CACHE`, if set.
pub fn dir() -> Option<PathBuf> {
    std::env::var_os(ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// What NVRTC's output for one source depends on.
#[derive(Debug, Clone, Copy)]
pub struct Key<'a> {
    /// The source's file name (`idct.cu`).
    pub file: &'a str,
    /// The full source as compiled.
    pub source: &'a str,
    /// The architecture (`sm_90`, `compute_90`).
    pub arch: &'a str,
    /// NVRTC's options, but the architecture.
    pub options: &'a [String],
    /// NVRTC's version.
    pub nvrtc: (i32, i32),
}

impl Key<'_> {
    /// The key as one line: every part but the source, which its length and hashes
    /// stand for.
    fn line(&self) -> String {
        let mut sip = std::hash::DefaultHasher::new();
        self.source.hash(&mut sip);
        format!(
            "file={} arch={} nvrtc={}.{} options={} source={}:{:08x}:{:016x}",
            self.file,
            self.arch,
            self.nvrtc.0,
            self.nvrtc.1,
            self.options.join(" "),
            self.source.len(),
            crc32c::crc32c(self.source.as_bytes()),
            sip.finish()
        )
    }

    /// The entry's file name: `idct-sm_90-nvrtc13.0-<hash of the key>.kernel`.
    pub fn file_name(&self) -> String {
        let mut sip = std::hash::DefaultHasher::new();
        self.line().hash(&mut sip);
        let stem = self.file.split('.').next().unwrap_or(self.file);
        let safe = |s: &str| -> String {
            s.chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect()
        };
        format!(
            "{}-{}-nvrtc{}.{}-{:016x}.kernel",
            safe(stem),
            safe(self.arch),
            self.nvrtc.0,
            self.nvrtc.1,
            sip.finish()
        )
    }
}

/// The entry for `key` in `dir`, or `compile()`'s output, then written there; with whether
/// it came from the cache. Without a folder, `compile()` alone.
pub fn compile_cached(
    dir: Option<&Path>,
    key: &Key<'_>,
    compile: impl FnOnce() -> Result<Output>,
) -> Result<(Output, bool)> {
    let Some(dir) = dir else {
        return compile().map(|o| (o, false));
    };
    let path = dir.join(key.file_name());
    if let Some(out) = read(&path, key) {
        log::debug!(
            "cuda: {} for {} from {}",
            key.file,
            key.arch,
            path.display()
        );
        return Ok((out, true));
    }
    let out = compile()?;
    if let Err(e) = write(dir, &path, key, &out) {
        log::info!(
            "cuda: could not keep {} for {} in {}: {e}",
            key.file,
            key.arch,
            dir.display()
        );
    }
    Ok((out, false))
}

/// The bytes of an entry.
fn encode(key: &Key<'_>, out: &Output) -> Vec<u8> {
    let cubin = out.cubin.as_deref();
    let mut b =
        Vec::with_capacity(MAGIC.len() + 256 + out.ptx.len() + cubin.map_or(0, <[u8]>::len) + 17);
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(key.line().as_bytes());
    b.push(b'\n');
    b.extend_from_slice(&(out.ptx.len() as u64).to_le_bytes());
    b.extend_from_slice(out.ptx.as_bytes());
    b.push(u8::from(cubin.is_some()));
    let c = cubin.unwrap_or_default();
    b.extend_from_slice(&(c.len() as u64).to_le_bytes());
    b.extend_from_slice(c);
    b
}

/// An entry's output, if `bytes` is a whole entry for `key`.
fn decode(bytes: &[u8], key: &Key<'_>) -> Option<Output> {
    let rest = bytes.strip_prefix(MAGIC)?;
    let line = key.line();
    let rest = rest.strip_prefix(line.as_bytes())?.strip_prefix(b"\n")?;
    let (ptx, rest) = take(rest)?;
    let (&has_cubin, rest) = rest.split_first()?;
    let (cubin, rest) = take(rest)?;
    if !rest.is_empty() || has_cubin > 1 {
        return None;
    }
    let ptx = std::str::from_utf8(ptx).ok()?.to_string();
    // PTX has a `.version` line; a CUBIN is an ELF image.
    if !ptx.contains(".version") {
        return None;
    }
    let cubin = match has_cubin {
        1 if cubin.starts_with(b"\x7fELF") => Some(cubin.to_vec()),
        1 => return None,
        _ => None,
    };
    if cubin.is_some() != key.arch.starts_with("sm_") {
        return None;
    }
    Some(Output { ptx, cubin })
}

/// A length-prefixed part of an entry, and what follows it.
fn take(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, rest) = bytes.split_first_chunk::<8>()?;
    let len = usize::try_from(u64::from_le_bytes(*len)).ok()?;
    (len <= rest.len()).then(|| rest.split_at(len))
}

fn read(path: &Path, key: &Key<'_>) -> Option<Output> {
    let size = std::fs::metadata(path).ok()?.len();
    if size > MAX_ENTRY {
        log::info!(
            "cuda: {} is too large for a kernel, ignored",
            path.display()
        );
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    let out = decode(&bytes, key);
    if out.is_none() {
        log::info!(
            "cuda: {} is not an entry for {} (damaged or another key): compiling again",
            path.display(),
            key.file
        );
    }
    out
}

fn write(dir: &Path, path: &Path, key: &Key<'_>, out: &Output) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, encode(key, out))?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use std::cell::Cell;

    const OPTIONS: [&str; 1] = ["--fmad=false"];

    fn options() -> Vec<String> {
        OPTIONS.iter().map(|s| s.to_string()).collect()
    }

    fn key<'a>(
        source: &'a str,
        arch: &'a str,
        options: &'a [String],
        nvrtc: (i32, i32),
    ) -> Key<'a> {
        Key {
            file: "idct.cu",
            source,
            arch,
            options,
            nvrtc,
        }
    }

    fn fake_output(arch: &str, tag: &str) -> Output {
        Output {
            ptx: format!(".version 9.0\n.target {arch}\n// {tag}\n"),
            cubin: arch
                .starts_with("sm_")
                .then(|| [b"\x7fELF".as_slice(), tag.as_bytes()].concat()),
        }
    }

    /// [`compile_cached`] with a compiler that writes `tag` into its output.
    fn fake_compile(dir: Option<&Path>, k: &Key<'_>, tag: &str) -> Result<(Output, bool)> {
        compile_cached(dir, k, || Ok(fake_output(k.arch, tag)))
    }

    /// A test's own empty folder, removed when the test ends, passing or failing.
    struct Scratch(PathBuf);

    impl std::ops::Deref for Scratch {
        type Target = Path;

        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn scratch(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("stoker-kernel-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Scratch(dir)
    }

    #[test]
    fn a_second_compile_of_the_same_key_is_read_back_and_others_miss() {
        let dir = scratch("keys");
        let opts = options();
        let calls = Cell::new(0);
        let run = |k: &Key<'_>, tag: &str| {
            compile_cached(Some(&dir), k, || {
                calls.set(calls.get() + 1);
                Ok(fake_output(k.arch, tag))
            })
            .expect("compiles")
        };
        let base = key("kernel A", "sm_90", &opts, (13, 0));
        let (first, hit) = run(&base, "first");
        assert!(!hit);
        let (again, hit) = run(&base, "second");
        assert!(hit, "the same key is read back");
        assert_eq!(again.ptx, first.ptx);
        assert_eq!(again.cubin, first.cubin);
        assert_eq!(calls.get(), 1);
        // Each part of the key invalidates.
        let other_opts = vec!["--fmad=true".to_string()];
        for changed in [
            key("kernel B", "sm_90", &opts, (13, 0)),
            key("kernel A", "sm_100", &opts, (13, 0)),
            key("kernel A", "compute_90", &opts, (13, 0)),
            key("kernel A", "sm_90", &other_opts, (13, 0)),
            key("kernel A", "sm_90", &opts, (13, 1)),
        ] {
            let before = calls.get();
            let (out, hit) = run(&changed, "changed");
            assert!(!hit, "{changed:?} must not hit");
            assert!(out.ptx.contains("changed"));
            assert_eq!(calls.get(), before + 1);
            // ... and is then kept under its own name, beside the first.
            assert!(run(&changed, "again").1);
        }
        assert!(run(&base, "third").1, "the first entry is still there");
    }

    #[test]
    fn a_damaged_or_foreign_entry_compiles_again() {
        let dir = scratch("damaged");
        let opts = options();
        let k = key("kernel", "sm_90", &opts, (13, 0));
        fake_compile(Some(&dir), &k, "good").expect("first");
        let path = dir.join(k.file_name());
        let good = std::fs::read(&path).expect("entry written");
        // Truncated, a flipped key, not an ELF CUBIN, trailing bytes, garbage.
        let mut flipped = good.clone();
        flipped[MAGIC.len() + 5] ^= 1;
        let elf_at = good.windows(4).position(|w| w == b"\x7fELF").expect("elf");
        let mut not_elf = good.clone();
        not_elf[elf_at] = b'X';
        let mut longer = good.clone();
        longer.push(0);
        for bad in [
            good[..good.len() - 3].to_vec(),
            flipped,
            not_elf,
            longer,
            b"garbage".to_vec(),
        ] {
            std::fs::write(&path, &bad).expect("damage");
            let (out, hit) = fake_compile(Some(&dir), &k, "new").expect("compiles again");
            assert!(!hit);
            assert!(out.ptx.contains("new"));
            // The entry was rewritten whole.
            assert_eq!(
                decode(&std::fs::read(&path).expect("read"), &k).map(|o| o.ptx),
                Some(out.ptx)
            );
        }
    }

    #[test]
    fn without_a_folder_or_when_compiling_fails_nothing_is_kept() {
        let dir = scratch("fails");
        let opts = options();
        let k = key("kernel", "sm_90", &opts, (13, 0));
        let (_, hit) = fake_compile(None, &k, "x").expect("ok");
        assert!(!hit);
        let err = compile_cached(Some(&dir), &k, || Err(Error::internal("rejected")));
        assert!(err.is_err());
        assert!(!dir.join(k.file_name()).exists());
        // A folder that cannot be made (a file is in the way) is no error.
        std::fs::write(std::env::temp_dir().join("stoker-kernel-cache-file"), b"x").expect("f");
        let blocked = std::env::temp_dir()
            .join("stoker-kernel-cache-file")
            .join("sub");
        let (out, hit) = fake_compile(Some(&blocked), &k, "y").expect("ok");
        assert!(!hit && out.ptx.contains('y'));
    }

    #[test]
    fn file_names_are_plain_and_name_the_architecture_and_nvrtc() {
        let opts = options();
        let name = key("x", "sm_90", &opts, (13, 0)).file_name();
        assert!(name.starts_with("idct-sm_90-nvrtc13.0-"), "{name}");
        assert!(name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)));
        assert_ne!(name, key("y", "sm_90", &opts, (13, 0)).file_name());
    }

    /// NVRTC itself (no GPU needed), where it is loadable: a real CUBIN is kept and read
    /// back equal.
    #[test]
    fn nvrtc_output_is_kept_and_read_back() {
        if super::super::nvrtc::version().is_err() {
            assert!(
                std::env::var("STOKER_REQUIRE_NVRTC").as_deref() != Ok("1"),
                "STOKER_REQUIRE_NVRTC=1 but NVRTC is not loadable"
            );
            println!("skipped: NVRTC not loadable");
            return;
        }
        let dir = scratch("nvrtc");
        let src = r#"extern "C" __global__ void k(float* p) { p[threadIdx.x] = 2.0f; }"#;
        let opts = options();
        let nvrtc = super::super::nvrtc::version().expect("version");
        let k = Key {
            file: "k.cu",
            source: src,
            arch: "sm_90",
            options: &opts,
            nvrtc,
        };
        let compile = || super::super::nvrtc::compile("k.cu", src, "sm_90", &opts);
        let (first, hit) = compile_cached(Some(&dir), &k, compile).expect("compiles");
        assert!(!hit);
        let (again, hit) = compile_cached(Some(&dir), &k, || {
            Err(Error::internal("must come from the cache"))
        })
        .expect("cached");
        assert!(hit);
        assert_eq!(again.cubin, first.cubin);
        assert!(first
            .cubin
            .as_deref()
            .is_some_and(|c| c.starts_with(b"\x7fELF")));
    }
}
