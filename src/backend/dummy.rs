//! What the stand-ins for compiled-out backends (`cuda_dummy.rs`, `wgpu_dummy.rs`) share:
//! the error of opening one, and the backend type, whose device cannot exist.

use crate::error::Error;

/// The error of opening the backend `backend` (also its feature's name; `title` in
/// words) in a build without it.
pub(super) fn not_compiled(backend: &str, title: &str) -> Error {
    Error::BackendUnavailable {
        backend: backend.into(),
        reason: format!(
            "this build of stoker has no {title} backend (the `{backend}` feature is off)"
        ),
    }
}

/// Defines a compiled-out backend's type, `$backend($device)`, made by `new($arg)`: its
/// device type is uninhabited (a newtype over [`std::convert::Infallible`]), so every
/// method of [`super::Backend`] but `kind` is a `match` on nothing.
macro_rules! compiled_out_backend {
    ($(#[$attr:meta])* $backend:ident($device:ident), $arg:ident, $kind:expr) => {
        $(#[$attr])*
        pub struct $backend($device);

        impl $backend {
            #[doc = concat!(
                "A backend on `", stringify!($arg), "` (which cannot exist in this build)."
            )]
            pub fn new($arg: $device) -> Self {
                $backend($arg)
            }
        }

        impl $crate::backend::Backend for $backend {
            fn kind(&self) -> $crate::backend::BackendKind {
                $kind
            }

            fn device(&self) -> String {
                match (self.0).0 {}
            }

            fn batcher(
                &self,
                _: &$crate::backend::device::BatcherConfig,
            ) -> $crate::error::Result<Option<Box<dyn $crate::backend::device::DeviceBatcher>>>
            {
                match (self.0).0 {}
            }
        }
    };
}
pub(super) use compiled_out_backend;
