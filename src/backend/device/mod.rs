//! What every GPU backend shares: the host side of a device batch.

pub mod launch;
