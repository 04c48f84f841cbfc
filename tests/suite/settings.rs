//! The settings enums parse from the names they serialise to (any case, surrounding
//! spaces ignored), as the command line and configuration files give them; an unknown
//! name is a configuration error that quotes it, names the setting and lists the names.

use std::fmt::Debug;
use std::str::FromStr;

use serde::Serialize;
use stoker::{BackendKind, DType, Error, HardwareDecode, OnError};

/// Every value of `all` parses back from its serialised name, in any case and padded;
/// `unknown` is refused with `setting` and `listing` in the message.
fn check<T>(all: &[T], setting: &str, unknown: &str, listing: &str)
where
    T: FromStr<Err = Error> + Serialize + PartialEq + Debug + Copy,
{
    for &v in all {
        let name = serde_json::to_value(v).unwrap();
        let name = name.as_str().unwrap();
        for spelling in [
            name.to_string(),
            name.to_ascii_uppercase(),
            format!("  {name} "),
        ] {
            assert_eq!(spelling.parse::<T>().unwrap(), v, "{spelling:?}");
        }
    }
    let e = unknown.parse::<T>().unwrap_err();
    match &e {
        Error::Config { setting: s, reason } => {
            assert_eq!(s, setting);
            assert!(reason.contains(&format!("{unknown:?}")), "{reason}");
            assert!(reason.contains(listing), "{reason}");
        }
        other => panic!("{unknown:?} gave {other:?}, not a config error"),
    }
}

#[test]
fn dtype() {
    check(
        &[DType::U8, DType::F16, DType::F32],
        "dtype",
        "f64",
        "u8, f16 or f32",
    );
}

#[test]
fn hardware_decode() {
    check(
        &[
            HardwareDecode::Off,
            HardwareDecode::Exact,
            HardwareDecode::All,
        ],
        "hardware_decode",
        "some",
        "exact, all or off",
    );
}

#[test]
fn backend() {
    check(
        &[
            BackendKind::Auto,
            BackendKind::Cpu,
            BackendKind::Wgpu,
            BackendKind::Cuda,
        ],
        "backend",
        "tpu",
        "auto, cpu, wgpu or cuda",
    );
}

#[test]
fn on_error() {
    check(
        &[OnError::Fail, OnError::Skip, OnError::Replace],
        "on_error",
        "retry",
        "fail, skip or replace",
    );
}
