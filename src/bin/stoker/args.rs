//! Why a command-line value is refused: the error of every value parser of the CLI
//! (clap prints it after "invalid value ... for '--flag'"), with the parse error that
//! caused it, where there is one, as its source.

use std::num::{ParseFloatError, ParseIntError};

/// A value of an option that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ArgError {
    /// Not a number (floating point).
    #[error("{source}")]
    NotAFloat {
        #[source]
        source: ParseFloatError,
    },
    /// Not a whole number, or one out of the type's range.
    #[error("{source}")]
    NotAnInteger {
        #[source]
        source: ParseIntError,
    },
    /// A count that must be at least 1.
    #[error("must be at least 1")]
    Zero,
    /// `--val`: outside `[0, 1]`.
    #[error("{0} is not a fraction in [0, 1]")]
    NotAFraction(f64),
    /// `--group-by`: a regular expression that does not compile.
    #[error("{source}")]
    Pattern {
        #[source]
        source: regex::Error,
    },
    /// `--format` of `stoker convert`.
    #[error("unknown output format {0:?} (expected tfrecord, tar or folder)")]
    UnknownFormat(String),
    /// `--restarts` of `stoker convert`.
    #[error("unknown --restarts {0:?} (expected auto or off)")]
    UnknownRestarts(String),
    /// A size that does not start with a number.
    #[error("bad size {value:?} (expected a number and a unit, e.g. 256MiB)")]
    BadSize {
        value: String,
        #[source]
        source: ParseFloatError,
    },
    /// A size with a unit that is not one of bytes' units.
    #[error(
        "unknown size unit {unit:?} in {value:?} (expected B, kB, KiB, MB, MiB, GB, GiB, TB or TiB)"
    )]
    UnknownUnit { unit: String, value: String },
    /// A size under 1 byte or over 1PB.
    #[error("size {0:?} out of range (1 byte to 1PB)")]
    SizeOutOfRange(String),
    /// `--shard-size` above the most a shard may hold (`max` bytes).
    #[error(
        "{value:?} is {bytes} bytes, more than a shard may hold ({max} bytes, 1TiB): \
         shards of 100MB to a few GB suit most readers"
    )]
    ShardTooLarge { value: String, bytes: u64, max: u64 },
    /// MiB whose count of bytes overflows a `u64`.
    #[error("{0} MiB is more bytes than a 64-bit count holds")]
    TooManyMib(u64),
    /// `--mixup`, `--cutmix`: zero, negative, or not finite.
    #[error("alpha {0} must be positive and finite")]
    Alpha(f64),
    /// A simulated time above the most, `max` milliseconds.
    #[error("{ms} ms is more than the most, {max} ms (an hour)")]
    TooManyMillis { ms: u64, max: u64 },
    /// `--plot` with an extension other than `.svg`.
    #[error(
        "unsupported plot format \".{0}\": the plot is written as SVG, give a file ending in .svg"
    )]
    PlotFormat(String),
    /// `--plot` without an extension.
    #[error("the plot file needs the extension .svg")]
    NoPlotExtension,
}

impl From<ParseFloatError> for ArgError {
    fn from(source: ParseFloatError) -> Self {
        ArgError::NotAFloat { source }
    }
}

impl From<ParseIntError> for ArgError {
    fn from(source: ParseIntError) -> Self {
        ArgError::NotAnInteger { source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// clap prints the value parser's message: a parse failure reads as the standard
    /// library's, and keeps that error as its source.
    #[test]
    fn a_parse_failure_keeps_its_cause() {
        let cause = "x".parse::<f64>().expect_err("not a number");
        let e = ArgError::from(cause.clone());
        assert_eq!(e.to_string(), cause.to_string());
        let source = std::error::Error::source(&e).expect("a source");
        assert_eq!(source.downcast_ref::<ParseFloatError>(), Some(&cause));
    }
}
