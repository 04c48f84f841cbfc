//! The command line's contract over every failure class of the issue "nothing hangs,
//! nothing aborts, nothing is lost": for each class (special files, labels out of range,
//! damaged and hostile JPEGs, damaged shards, files that are no images, an unreadable
//! folder, a missing input, an unwritable output) every command that can meet it runs
//! with `--json` under a watchdog, and: it exits with the documented code; stdout is
//! exactly one JSON object; a non-zero code comes with an error object whose kind is the
//! code's; stderr says `error: ...`; the report names each failed sample with its path and
//! a reason; `bench pipeline` delivers or reports every sample. Then invalid options and
//! combinations: each exits 2 (`usage`) with a message naming the option.
//! (`tests/cli.rs` checks the fields of every report; this file checks the contract.)
#![cfg(unix)]

mod common;
#[path = "common/watched.rs"]
mod watched;

use std::path::{Path, PathBuf};

use serde_json::Value;
use watched::Run;

/// The kind of each exit code (`stoker --help`).
fn kind_of_code(code: i32) -> &'static str {
    match code {
        1 => "partial",
        2 => "usage",
        3 => "no_input",
        4 => "backend_unavailable",
        5 => "output",
        6 => "failed",
        _ => "?",
    }
}

/// Checks the error contract of a run that should exit `code`: the code, the error
/// object (kind of the code, the code, a message) and `error: <message>` on stderr; a
/// zero code has no error object.
fn check_status(what: &str, r: &Run, code: i32) {
    assert_eq!(r.code, code, "{what}: {} / {}", r.json, r.stderr);
    let e = &r.json["error"];
    if code == 0 {
        assert!(e.is_null(), "{what}: {}", r.json);
        return;
    }
    assert_eq!(e["kind"], kind_of_code(code), "{what}: {}", r.json);
    assert_eq!(e["code"], code, "{what}: {}", r.json);
    let message = e["message"].as_str().unwrap_or_default();
    assert!(!message.is_empty(), "{what}: {}", r.json);
    assert!(
        r.stderr.contains(&format!("error: {message}")),
        "{what}: stderr lacks `error: {message}`: {}",
        r.stderr
    );
}

/// The failures a report lists, as (path, reason): `errors` of `decode`, `inspect` and
/// `convert`, `failed` of each `bench pipeline` result, `skipped` (what listing left
/// out) of any.
fn failures(v: &Value) -> Vec<(String, String)> {
    let mut lists: Vec<&Value> = vec![&v["errors"], &v["skipped"]];
    if let Some(results) = v["results"].as_array() {
        lists.extend(results.iter().map(|r| &r["failed"]));
    }
    lists
        .into_iter()
        .filter_map(Value::as_array)
        .flatten()
        .map(|f| {
            let path = f["path"]
                .as_str()
                .or(f["file"].as_str())
                .unwrap_or_default();
            let reason = f["reason"].as_str().unwrap_or_default();
            assert!(!reason.trim().is_empty(), "a failure without a reason: {f}");
            (path.to_string(), reason.to_string())
        })
        .collect()
}

/// One command over one failure class.
struct Case {
    /// The class and command, for messages.
    what: String,
    args: Vec<String>,
    /// Run as `nobody` (file modes matter).
    nobody: bool,
    code: i32,
    /// (a part of the path, a part of the reason) of each failure the report must list.
    failed: Vec<(&'static str, &'static str)>,
    /// For `bench pipeline`: the samples of the dataset, each delivered or reported.
    samples: Option<u64>,
    /// A part of the error message.
    says: Option<&'static str>,
}

fn s(p: &Path) -> String {
    p.to_str().expect("utf-8 path").to_string()
}

fn case(what: &str, args: &[&str], code: i32) -> Case {
    Case {
        what: what.to_string(),
        args: args.iter().map(|a| a.to_string()).collect(),
        nobody: false,
        code,
        failed: Vec::new(),
        samples: None,
        says: None,
    }
}

impl Case {
    fn failed(mut self, f: &[(&'static str, &'static str)]) -> Self {
        self.failed = f.to_vec();
        self
    }
    fn samples(mut self, n: u64) -> Self {
        self.samples = Some(n);
        self
    }
    fn nobody(mut self) -> Self {
        self.nobody = true;
        self
    }
    fn says(mut self, m: &'static str) -> Self {
        self.says = Some(m);
        self
    }
}

fn check(c: &Case) {
    let r = watched::stoker(&c.args, c.nobody);
    let what = format!("{} (stoker {})", c.what, c.args.join(" "));
    check_status(&what, &r, c.code);
    let listed = failures(&r.json);
    for (path, reason) in &c.failed {
        assert!(
            listed
                .iter()
                .any(|(p, why)| p.contains(path) && why.contains(reason)),
            "{what}: no failure of {path:?} saying {reason:?} in {listed:?}"
        );
    }
    if let Some(n) = c.samples {
        let res = &r.json["results"][0];
        let (d, rep) = (
            res["delivered"].as_u64().expect("delivered"),
            res["reported"].as_u64().expect("reported"),
        );
        assert_eq!(d + rep, n, "{what}: delivered {d} + reported {rep}: {res}");
        // Every reported sample is named (the report lists the first 20).
        let named = res["failed"].as_array().map_or(0, Vec::len) as u64;
        assert_eq!(named, rep.min(20), "{what}: {res}");
        assert_eq!(rep > 0, !c.failed.is_empty(), "{what}: {res}");
    }
    if let Some(m) = c.says {
        let message = r.json["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(m), "{what}: {message:?} lacks {m:?}");
    }
}

/// `bench pipeline` over `data`: one epoch, small, on the CPU.
fn bench(data: &Path) -> Vec<String> {
    let mut a = watched::small_bench(data);
    a.extend(args(&["--backend", "cpu"]));
    a
}

/// `convert data --to to --out out`, exiting with `code`: the case `what: convert`.
fn convert(what: &str, data: &str, to: &str, out: &Path, code: i32) -> Case {
    case(
        &format!("{what}: convert"),
        &["convert", data, "--to", to, "--out", &s(out)],
        code,
    )
}

/// [`bench`] over `data`, exiting with `code`: the case `what: bench pipeline`.
fn bench_case(what: &str, data: &Path, code: i32) -> Case {
    Case {
        args: bench(data),
        ..case(&format!("{what}: bench pipeline"), &[], code)
    }
}

/// `inspect` and [`bench_case`] of `data` (`samples` samples), both exiting with 1 and
/// naming `failed`: the cases `what: inspect` and `what: bench pipeline`.
fn inspect_and_bench(
    what: &str,
    data: &Path,
    failed: &[(&'static str, &'static str)],
    samples: u64,
) -> [Case; 2] {
    [
        case(&format!("{what}: inspect"), &["inspect", &s(data)], 1).failed(failed),
        bench_case(what, data, 1).failed(failed).samples(samples),
    ]
}

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|a| a.to_string()).collect()
}

fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// A good JPEG and its bytes.
fn good_jpeg() -> Vec<u8> {
    std::fs::read(common::data_dir().join("jpeg/ljt_testorig.jpg")).expect("jpeg")
}

/// Every run of the test, one class after the other (the fixtures under `root`).
fn cases(root: &Path) -> Vec<Case> {
    let jpg = good_jpeg();
    let mut v = Vec::new();
    let out = root.join("out");
    std::fs::create_dir_all(&out).expect("mkdir");
    chmod(&out, 0o777);

    // --- Special files named in a file list: a FIFO, a socket, /dev/zero. (Met in a
    // folder they are left out at listing: tests/special_files.rs.)
    let sp = root.join("special");
    common::write(&sp, "a.jpg", &jpg);
    common::mkfifo(&sp.join("fifo.jpg"));
    // The socket file stays when its listener closes.
    drop(std::os::unix::net::UnixListener::bind(sp.join("sock.jpg")).expect("socket"));
    std::os::unix::fs::symlink("/dev/zero", sp.join("zero.jpg")).expect("symlink");
    std::fs::write(sp.join("list.txt"), "a.jpg\nfifo.jpg\nsock.jpg\nzero.jpg\n").expect("list");
    let special = [
        ("fifo.jpg", "FIFO"),
        ("sock.jpg", "socket"),
        ("zero.jpg", "character device"),
    ];
    let list = s(&sp.join("list.txt"));
    let mut d = args(&["decode", &s(&sp.join("a.jpg"))]);
    for f in ["fifo.jpg", "sock.jpg", "zero.jpg"] {
        d.push(s(&sp.join(f)));
    }
    d.extend(args(&["--out", &s(&out.join("special"))]));
    v.push(Case {
        args: d,
        ..case("special files: decode", &[], 1).failed(&special)
    });
    v.push(
        case(
            "special files: inspect --decode",
            &["inspect", &list, "--decode"],
            1,
        )
        .failed(&special),
    );
    v.push(convert("special files", &list, "tar", &out.join("sp-tar"), 1).failed(&special));
    v.extend(inspect_and_bench(
        "special files",
        &sp.join("list.txt"),
        &special,
        4,
    ));

    // --- A label above stoker::MAX_LABEL: in a file list, in a tar shard's `.cls`.
    let lb = root.join("labels");
    common::write(&lb, "a.jpg", &jpg);
    common::write(&lb, "b.jpg", &jpg);
    let big = (stoker::MAX_LABEL + 1).to_string();
    std::fs::write(lb.join("list.txt"), format!("a.jpg 0\nb.jpg {big}\n")).expect("list");
    let label = [("b.jpg", "MAX_LABEL")];
    let list = s(&lb.join("list.txt"));
    v.push(convert("label", &list, "tfrecord", &out.join("lb-tf"), 1).failed(&label));
    v.extend(inspect_and_bench("label", &lb.join("list.txt"), &label, 2));
    let tar_dir = root.join("labels-tar");
    std::fs::create_dir_all(&tar_dir).expect("mkdir");
    {
        let mut b = tar::Builder::new(Vec::new());
        for (name, data) in [
            ("a.jpg", jpg.as_slice()),
            ("a.cls", b"0".as_slice()),
            ("b.jpg", jpg.as_slice()),
            ("b.cls", big.as_bytes()),
        ] {
            let mut h = tar::Header::new_ustar();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_entry_type(tar::EntryType::Regular);
            b.append_data(&mut h, name, data).expect("member");
        }
        std::fs::write(tar_dir.join("l-00000.tar"), b.into_inner().expect("tar")).expect("tar");
    }
    let label = [("b", "MAX_LABEL")];
    v.extend(inspect_and_bench("label in a tar", &tar_dir, &label, 2));

    // --- Batches that cannot fit in memory.
    let mut huge = bench(&common::data_dir().join("samples"));
    for (flag, value) in [("--size", "16384"), ("--batch", "64")] {
        let at = huge.iter().position(|a| a == flag).expect("flag");
        huge[at + 1] = value.to_string();
    }
    v.push(Case {
        args: huge,
        ..case("memory", &[], 2).says("memory")
    });

    // --- Damaged JPEGs under strict decoding: cut short, garbled; and a valid JPEG whose
    // header claims 65535 x 65535 pixels.
    let dm = root.join("damaged");
    common::write(&dm, "good/a.jpg", &jpg);
    common::write(&dm, "bad/cut.jpg", &jpg[..jpg.len() / 3]);
    let mut garbled = jpg.clone();
    for b in garbled.iter_mut().skip(700).step_by(3) {
        *b = 0xFF;
    }
    common::write(&dm, "bad/garbled.jpg", &garbled);
    let bomb = std::fs::read(common::data_dir().join("jpeg/jd_crash_max_size.jpg")).expect("bomb");
    common::write(&dm, "bad/huge.jpg", &bomb);
    let damaged = [("cut.jpg", ""), ("garbled.jpg", ""), ("huge.jpg", "65535")];
    let mut d = args(&["decode"]);
    for f in [
        "good/a.jpg",
        "bad/cut.jpg",
        "bad/garbled.jpg",
        "bad/huge.jpg",
    ] {
        d.push(s(&dm.join(f)));
    }
    d.extend(args(&["--out", &s(&out.join("damaged"))]));
    v.push(Case {
        args: d,
        ..case("damaged JPEGs: decode", &[], 1).failed(&damaged)
    });
    // Headers only: the cut and garbled files have whole headers; the huge one does not
    // pass the limits.
    v.push(case("damaged JPEGs: inspect", &["inspect", &s(&dm)], 1).failed(&damaged[2..]));
    v.push(
        case(
            "damaged JPEGs: inspect --decode",
            &["inspect", &s(&dm), "--decode"],
            1,
        )
        .failed(&damaged),
    );
    v.push(
        bench_case("damaged JPEGs", &dm, 1)
            .failed(&damaged)
            .samples(4),
    );
    // Only the huge one, alone: nothing could be read.
    v.push(
        case(
            "huge header alone: decode",
            &[
                "decode",
                &s(&dm.join("bad/huge.jpg")),
                "--out",
                &s(&out.join("huge")),
            ],
            3,
        )
        .failed(&damaged[2..]),
    );

    // --- Damaged shards: a tar with a zeroed header, a tar with a header whose checksum
    // fails, a TFRecord whose second length is damaged. Each made by `stoker convert`
    // from the bundled samples (6), then damaged.
    let samples = common::data_dir().join("samples");
    for (name, to) in [
        ("zeroed", "tar"),
        ("checksum", "tar"),
        ("length", "tfrecord"),
    ] {
        let dir = root.join(format!("shard-{name}"));
        let r = watched::stoker(
            &args(&["convert", &s(&samples), "--to", to, "--out", &s(&dir)]),
            false,
        );
        check_status("convert the samples", &r, 0);
        let shard = PathBuf::from(r.json["shards"][0].as_str().expect("a shard"));
        let mut bytes = std::fs::read(&shard).expect("shard");
        match name {
            "zeroed" => {
                let at = tar_header_of(&bytes, "000002_");
                bytes[at..at + 512].fill(0);
            }
            "checksum" => {
                let at = tar_header_of(&bytes, "000002_");
                bytes[at + 100] ^= 0x01; // the mode field: only the checksum tells
            }
            _ => {
                let first = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
                let second = 16 + first as usize;
                bytes[second + 3] ^= 0x10;
            }
        }
        std::fs::write(&shard, &bytes).expect("damage");
        for e in std::fs::read_dir(&dir).expect("shards").flatten() {
            if e.file_name().to_string_lossy().ends_with(".stoker-index") {
                std::fs::remove_file(e.path()).expect("index");
            }
        }
        let damage: &'static [(&'static str, &'static str)] = match name {
            "zeroed" => &[("", "zeros")],
            "checksum" => &[("", "checksum")],
            _ => &[("", "checksum")],
        };
        let what = format!("damaged {to} shard ({name})");
        v.push(case(&format!("{what}: inspect"), &["inspect", &s(&dir)], 1).failed(damage));
        v.push(
            case(
                &format!("{what}: inspect --decode"),
                &["inspect", &s(&dir), "--decode"],
                1,
            )
            .failed(damage),
        );
        let other = if to == "tar" { "tfrecord" } else { "tar" };
        v.push(convert(&what, &s(&dir), other, &out.join(format!("re-{name}")), 1).failed(damage));
        v.push(
            bench_case(&what, &dir, 1)
                .failed(damage)
                .samples(listed(&dir)),
        );
    }

    // --- Files named .jpg that are no images: empty, text.
    let ni = root.join("notimages");
    common::write(&ni, "a.jpg", &jpg);
    common::write(&ni, "empty.jpg", b"");
    common::write(
        &ni,
        "notes.jpg",
        b"these are not the pixels you are looking for\n",
    );
    let not_images = [("empty.jpg", ""), ("notes.jpg", "")];
    v.push(convert("not images", &s(&ni), "tar", &out.join("ni"), 1).failed(&not_images));
    v.push(case("not images: inspect", &["inspect", &s(&ni)], 1).failed(&not_images));
    v.push(
        bench_case("not images", &ni, 1)
            .failed(&not_images)
            .samples(3),
    );
    // None an image: nothing could be used.
    let none = root.join("noneimages");
    common::write(&none, "empty.jpg", b"");
    common::write(&none, "notes.jpg", b"text\n");
    v.push(convert("no images at all", &s(&none), "tar", &out.join("none"), 3).failed(&not_images));
    v.push(
        bench_case("no images at all", &none, 3)
            .failed(&not_images)
            .samples(2),
    );

    // --- An unreadable sub-folder (mode 000, the commands run as nobody): reported in
    // `skipped` with the reason, the rest used.
    let lk = root.join("locked");
    common::write(&lk, "cat/a.jpg", &jpg);
    common::write(&lk, "dog/b.jpg", &jpg);
    common::write(&lk, "dog/locked/c.jpg", &jpg);
    chmod(&lk.join("dog/locked"), 0o000);
    let locked = [("dog/locked", "ermission denied")];
    v.push(
        case("unreadable folder: inspect", &["inspect", &s(&lk)], 0)
            .failed(&locked)
            .nobody(),
    );
    v.push(
        convert("unreadable folder", &s(&lk), "tar", &out.join("lk"), 0)
            .failed(&locked)
            .nobody(),
    );
    v.push(
        bench_case("unreadable folder", &lk, 0)
            .failed(&locked)
            .nobody(),
    );
    v.push(
        case(
            "unreadable folder: split",
            &[
                "split",
                &s(&lk),
                "--val",
                "0.5",
                "--out",
                &s(&out.join("lk.json")),
            ],
            0,
        )
        .failed(&locked)
        .nobody(),
    );

    // --- A missing input.
    let missing = root.join("nope");
    let m = s(&missing);
    for (what, a) in [
        ("inspect", args(&["inspect", &m])),
        (
            "convert",
            args(&["convert", &m, "--to", "tar", "--out", &s(&out.join("m"))]),
        ),
        ("bench pipeline", bench(&missing)),
        (
            "split",
            args(&[
                "split",
                &m,
                "--val",
                "0.5",
                "--out",
                &s(&out.join("m.json")),
            ]),
        ),
        (
            "split --check",
            args(&["split", "--check", &s(&missing.join("split.json"))]),
        ),
        (
            "decode",
            args(&[
                "decode",
                &s(&missing.join("x.jpg")),
                "--out",
                &s(&out.join("m")),
            ]),
        ),
    ] {
        // `decode` names the file in its report, the others in the message.
        let c = case(&format!("missing input: {what}"), &[], 3);
        let c = if what == "decode" {
            c.failed(&[("nope/x.jpg", "No such file")])
        } else {
            c.says("nope")
        };
        v.push(Case { args: a, ..c });
    }

    // --- An unwritable output: under a regular file, and in a folder nobody may write.
    let file = root.join("a-file");
    std::fs::write(&file, b"x").expect("file");
    let ro = root.join("read-only");
    std::fs::create_dir_all(&ro).expect("mkdir");
    chmod(&ro, 0o555);
    let good = s(&dm.join("good/a.jpg"));
    for (under, nobody) in [(&file, false), (&ro, true)] {
        let o = |name: &str| s(&under.join(name));
        let tag = if nobody {
            "read-only folder"
        } else {
            "under a file"
        };
        for (what, a) in [
            (
                "convert",
                args(&[
                    "convert",
                    &s(&lk.join("cat")),
                    "--to",
                    "tar",
                    "--out",
                    &o("shards"),
                ]),
            ),
            ("decode", args(&["decode", &good, "--out", &o("png")])),
            (
                "split",
                args(&[
                    "split",
                    &s(&samples),
                    "--val",
                    "0.5",
                    "--out",
                    &o("split.json"),
                ]),
            ),
            (
                "render",
                args(&[
                    "render",
                    "--n",
                    "1",
                    "--size",
                    "32",
                    "--backend",
                    "cpu",
                    "--out",
                    &o("sheet.png"),
                ]),
            ),
        ] {
            let mut c = case(&format!("unwritable output ({tag}): {what}"), &[], 5);
            c.args = a;
            c.nobody = nobody;
            v.push(c.says(if nobody { "ermission denied" } else { "a-file" }));
        }
    }
    v
}

/// The samples `stoker inspect` lists in `dir`.
fn listed(dir: &Path) -> u64 {
    let r = watched::stoker(&args(&["inspect", &s(dir)]), false);
    r.json["samples"].as_u64().expect("samples")
}

/// The offset of the tar header of the first member whose name starts with `prefix`.
fn tar_header_of(bytes: &[u8], prefix: &str) -> usize {
    (0..bytes.len())
        .step_by(512)
        .find(|&at| bytes[at..].starts_with(prefix.as_bytes()))
        .expect("member")
}

#[test]
fn every_failure_class_has_its_exit_code_error_object_and_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The commands that run as nobody must reach the fixtures.
    chmod(dir.path(), 0o755);
    let cases = cases(dir.path());
    all_of(cases.iter().map(|c| move || check(c)));
    eprintln!("{} runs", cases.len());
}

/// Runs every check, then fails with the messages of all that failed (not just the
/// first).
fn all_of<F: FnOnce()>(checks: impl Iterator<Item = F>) {
    let failed: Vec<String> = checks
        .filter_map(|f| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
                .err()
                .map(|e| {
                    e.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default()
                })
        })
        .collect();
    assert!(
        failed.is_empty(),
        "{} check(s) failed:\n{}",
        failed.len(),
        failed.join("\n---\n")
    );
}

/// Invalid options and combinations: each exits 2 with kind `usage` and a message that
/// names the option (as the flag or as its name).
#[test]
fn invalid_options_are_usage_errors_naming_the_option() {
    let dir = tempfile::tempdir().expect("tempdir");
    let samples = s(&common::data_dir().join("samples"));
    let out = s(&dir.path().join("out"));
    let split_out = s(&dir.path().join("split.json"));
    let jpg = s(&common::data_dir().join("jpeg/ljt_testorig.jpg"));
    // `convert` of the samples to tar shards of `size`.
    let shard_size = |size: &str| {
        args(&[
            "convert",
            &samples,
            "--to",
            "tar",
            "--shard-size",
            size,
            "--out",
            &out,
        ])
    };
    let pipeline = |extra: &[&str]| {
        let mut a = args(&[
            "bench", "pipeline", "--epochs", "1", "--size", "16", "--batch", "2",
        ]);
        a.extend(args(extra));
        a
    };
    let cases: Vec<(Vec<String>, &[&str])> = vec![
        (pipeline(&["--rank", "0"]), &["--world-size"]),
        (pipeline(&["--world-size", "2"]), &["--rank"]),
        (pipeline(&["--rank", "2", "--world-size", "2"]), &["--rank"]),
        (
            pipeline(&["--rank", "0", "--world-size", "0"]),
            &["--world-size"],
        ),
        (pipeline(&["--batch", "0"]), &["--batch"]),
        (pipeline(&["--size", "0"]), &["--size"]),
        (pipeline(&["--size", "16385"]), &["--size"]),
        (pipeline(&["--epochs", "0"]), &["--epochs"]),
        (pipeline(&["--workers", "0"]), &["--workers"]),
        (pipeline(&["--readers", "0"]), &["--readers"]),
        (pipeline(&["--prefetch", "0"]), &["--prefetch"]),
        (pipeline(&["--dtype", "f64"]), &["--dtype"]),
        (pipeline(&["--hardware", "sometimes"]), &["--hardware"]),
        (pipeline(&["--backend", "tpu"]), &["--backend"]),
        (
            pipeline(&["--cache-mb", "18446744073709551615"]),
            &["--cache-mb"],
        ),
        (pipeline(&["--cache-mb", "100000000"]), &["--cache-mb"]),
        (
            pipeline(&["--device-cache-mb", "18446744073709551615"]),
            &["--device-cache-mb"],
        ),
        (pipeline(&["--step-ms=-1"]), &["--step-ms"]),
        (
            pipeline(&["--step-ms", "18446744073709551615"]),
            &["--step-ms"],
        ),
        (pipeline(&["--batch", "x"]), &["--batch"]),
        (args(&["bench", "decode", "--batch", "0"]), &["--batch"]),
        (args(&["bench", "decode", "--repeat", "0"]), &["--repeat"]),
        (
            args(&["bench", "decode", "--backend", "cpu,tpu"]),
            &["--backend"],
        ),
        (args(&["bench", "overlap", "--n", "0"]), &["--n"]),
        (
            args(&["bench", "overlap", "--load-ms", "18446744073709551615"]),
            &["--load-ms"],
        ),
        (
            args(&["decode", &jpg, "--backend", "tpu", "--out", &out]),
            &["--backend"],
        ),
        (args(&["decode", "--out", &out]), &["FILES"]),
        (
            args(&["inspect", &samples, "--threads", "0"]),
            &["--threads"],
        ),
        (
            args(&["convert", &samples, "--to", "zip", "--out", &out]),
            &["--to"],
        ),
        (args(&["convert", &samples, "--out", &out]), &["--to"]),
        (shard_size("0"), &["--shard-size"]),
        (shard_size("12parsecs"), &["--shard-size"]),
        (
            args(&["split", &samples, "--val", "1.5", "--out", &split_out]),
            &["--val"],
        ),
        (
            args(&["split", &samples, "--val=-0.1", "--out", &split_out]),
            &["--val"],
        ),
        (
            args(&["split", &samples, "--val", "NaN", "--out", &split_out]),
            &["--val"],
        ),
        (
            args(&["split", &samples, "--val", "half", "--out", &split_out]),
            &["--val"],
        ),
        (
            args(&[
                "split",
                &samples,
                "--val",
                "0.2",
                "--group-by",
                "(",
                "--out",
                &split_out,
            ]),
            &["--group-by"],
        ),
        (args(&["split", &samples, "--out", &split_out]), &["--val"]),
        (args(&["split", &samples, "--val", "0.2"]), &["--out"]),
        (
            args(&["split", "--check", &split_out, "--val", "0.2"]),
            &["--val"],
        ),
        (args(&["render", "--n", "0", "--out", &out]), &["--n"]),
        (args(&["render", "--size", "4", "--out", &out]), &["--size"]),
        (
            args(&["render", "--masks", &samples, "--out", &out]),
            &["--images"],
        ),
        (args(&["nonsense"]), &["nonsense"]),
    ];
    all_of(cases.iter().map(|(a, names)| {
        move || {
            let r = watched::stoker(a, false);
            let what = format!("stoker {}", a.join(" "));
            check_status(&what, &r, 2);
            let message = r.json["error"]["message"].as_str().unwrap_or_default();
            assert!(
                names.iter().any(|n| message.contains(n)),
                "{what}: the message does not name {names:?}: {message}"
            );
        }
    }));
    assert!(
        !Path::new(&out).exists() && !Path::new(&split_out).exists(),
        "a refused command wrote its output"
    );
}
