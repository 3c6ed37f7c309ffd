// SPDX-License-Identifier: MIT OR Apache-2.0
//! The one error type of the engine, and its Linux errno.
//!
//! Every fallible operation returns [`Error`]. Each variant stands for one
//! Linux errno, so a caller that speaks the kernel's language (the C ABI, the
//! kernel module) can pass [`Error::errno`] on unchanged, and a Rust caller
//! can match on what went wrong.

use core::fmt;

/// What went wrong, as the Linux errno the kernel returns in the same case.
///
/// The variants carry no payload so that the type stays a single byte and can
/// be returned from PMI paths at no cost.
///
/// ```
/// use perfaux::Error;
/// assert_eq!(Error::TooBig.errno(), -7);
/// assert_eq!(Error::from_errno(-22), Some(Error::Invalid));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// `EPERM` (1): the operation is not permitted.
    NotPermitted,
    /// `ENOENT` (2): no such entry (an index past the last of a table).
    NoEntry,
    /// `E2BIG` (7): the attr size is out of range or carries unknown non-zero bytes.
    TooBig,
    /// `ENOMEM` (12): caller-supplied memory is too small for the request.
    NoMemory,
    /// `EACCES` (13): a permission the caller declared absent is needed.
    Access,
    /// `EFAULT` (14): a read or write reached beyond the memory the caller made available.
    Fault,
    /// `EBUSY` (16): the object is in use.
    Busy,
    /// `ENODEV` (19): no such device (CPU or PMU).
    NoDevice,
    /// `EINVAL` (22): an argument breaks a rule.
    Invalid,
    /// `ENOSPC` (28): no room in the ring.
    NoSpace,
    /// `ENOSYS` (38): the platform lacks the facility (e.g. user stack dumps).
    NoSys,
    /// `EOPNOTSUPP` (95): the PMU lacks the capability the request needs.
    NotSupported,
}

impl Error {
    /// The negative Linux errno for this error, as a kernel function returns it.
    pub const fn errno(self) -> i32 {
        -(self.errno_positive())
    }

    /// The positive Linux errno value (as user space sees it in `errno`).
    pub const fn errno_positive(self) -> i32 {
        match self {
            Error::NotPermitted => 1,
            Error::NoEntry => 2,
            Error::TooBig => 7,
            Error::NoMemory => 12,
            Error::Access => 13,
            Error::Fault => 14,
            Error::Busy => 16,
            Error::NoDevice => 19,
            Error::Invalid => 22,
            Error::NoSpace => 28,
            Error::NoSys => 38,
            Error::NotSupported => 95,
        }
    }

    /// The error for a Linux errno, positive or negative; `None` for one the
    /// engine never produces.
    pub const fn from_errno(errno: i32) -> Option<Error> {
        let positive = if errno < 0 {
            errno.wrapping_neg()
        } else {
            errno
        };
        Some(match positive {
            1 => Error::NotPermitted,
            2 => Error::NoEntry,
            7 => Error::TooBig,
            12 => Error::NoMemory,
            13 => Error::Access,
            14 => Error::Fault,
            16 => Error::Busy,
            19 => Error::NoDevice,
            22 => Error::Invalid,
            28 => Error::NoSpace,
            38 => Error::NoSys,
            95 => Error::NotSupported,
            _ => return None,
        })
    }

    /// The errno's symbolic name, e.g. `"EINVAL"`.
    pub const fn name(self) -> &'static str {
        match self {
            Error::NotPermitted => "EPERM",
            Error::NoEntry => "ENOENT",
            Error::TooBig => "E2BIG",
            Error::NoMemory => "ENOMEM",
            Error::Access => "EACCES",
            Error::Fault => "EFAULT",
            Error::Busy => "EBUSY",
            Error::NoDevice => "ENODEV",
            Error::Invalid => "EINVAL",
            Error::NoSpace => "ENOSPC",
            Error::NoSys => "ENOSYS",
            Error::NotSupported => "EOPNOTSUPP",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.errno())
    }
}

impl core::error::Error for Error {}

/// The engine's result type.
pub type Result<T> = core::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Error; 12] = [
        Error::NotPermitted,
        Error::NoEntry,
        Error::TooBig,
        Error::NoMemory,
        Error::Access,
        Error::Fault,
        Error::Busy,
        Error::NoDevice,
        Error::Invalid,
        Error::NoSpace,
        Error::NoSys,
        Error::NotSupported,
    ];

    #[test]
    fn errno_round_trips() {
        for e in ALL {
            assert!(e.errno() < 0);
            assert_eq!(Error::from_errno(e.errno()), Some(e));
            assert_eq!(Error::from_errno(e.errno_positive()), Some(e));
        }
        assert_eq!(Error::from_errno(0), None);
        assert_eq!(Error::from_errno(i32::MIN), None);
    }

    #[test]
    fn errno_values_are_linux_generic() {
        assert_eq!(Error::TooBig.errno(), -7);
        assert_eq!(Error::Fault.errno(), -14);
        assert_eq!(Error::Invalid.errno(), -22);
        assert_eq!(Error::NoSpace.errno(), -28);
        assert_eq!(Error::NotSupported.errno(), -95);
    }
}
