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

/// Defines a compiled-out backend's device type, `$device`, uninhabited (a newtype over
/// [`std::convert::Infallible`]): `new($arg: $ty)` is the not-compiled error of
/// `$backend` (`$title` in words), and `name` and `wait` match on nothing.
macro_rules! compiled_out_device {
    ($(#[$attr:meta])* $device:ident, $arg:ident: $ty:ty, $backend:literal, $title:literal) => {
        $(#[$attr])*
        #[derive(Debug, Clone)]
        pub struct $device(std::convert::Infallible);

        impl $device {
            #[doc = concat!(
                "Always [`Error::BackendUnavailable`](crate::Error::BackendUnavailable): \
                 this build has no ", $title, " backend."
            )]
            pub fn new($arg: $ty) -> $crate::error::Result<Self> {
                let _ = $arg;
                Err($crate::backend::dummy::not_compiled($backend, $title))
            }

            /// The device, in words.
            pub fn name(&self) -> &str {
                match self.0 {}
            }

            /// Blocks until the device has finished the work handed to it.
            pub fn wait(&self) -> $crate::error::Result<()> {
                match self.0 {}
            }
        }
    };
}
pub(super) use compiled_out_device;

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
