//! The futex the locks use on this target: the Linux system call, the
//! portable fallback elsewhere, loom's under `cfg(loom)`. Kept apart from
//! `futex.rs` (the trait) and `parking.rs` (the fallback, which implements
//! it), so that neither of those imports the other's user.

/// The futex the locks use on this target.
#[cfg(all(target_os = "linux", not(loom)))]
pub(crate) type PlatformFutex = crate::futex::LinuxFutex;
/// The futex the locks use on this target.
#[cfg(all(not(target_os = "linux"), not(loom)))]
pub(crate) type PlatformFutex = crate::parking::ParkingFutex;
/// The futex the locks use under loom.
#[cfg(loom)]
pub(crate) type PlatformFutex = crate::futex::loom_futex::LoomFutex;
