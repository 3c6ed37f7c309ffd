// SPDX-License-Identifier: MIT OR Apache-2.0
//! # perfaux-ffi
//!
//! The C ABI of the perfaux engine. `include/perfaux.h` is generated from
//! this crate by cbindgen and committed; a test fails when it drifts.
//!
//! Conventions, for every function:
//! - the result is 0 (or a length) on success and a negative Linux errno on
//!   failure;
//! - null, misaligned, too small or inconsistent arguments are refused with
//!   `-EINVAL` (the caller's own objects) or `-EFAULT` (memory standing for
//!   user space);
//! - no panic can cross the boundary: the paths are checked so that none is
//!   reachable, and the crate is built with `panic = "abort"`.
//!
//! - objects live in storage the caller declares (`struct perfaux_ring`
//!   and the like: opaque words of the size and alignment the header
//!   gives); they refer to each other in place, so none may move while
//!   initialized, and they are torn down in the reverse order of set-up.
//!   Rust callers of these functions take raw pointers to that storage
//!   once and use only those (a `&` or `&mut` taken later would invalidate
//!   the objects' references into each other).
//!
//! The crate is `no_std` on bare targets (`x86_64-unknown-none`, the kernel
//! module build) and uses std elsewhere.

#![cfg_attr(target_os = "none", no_std)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![allow(non_camel_case_types)] // C type names, as the header spells them

mod attr;
mod aux;
mod caps;
mod event;
#[cfg(target_os = "none")]
mod panic;
mod platform;
mod pt;
mod ring;
mod sample;
mod sink;
mod storage;
mod warn;

pub use attr::*;
pub use aux::*;
pub use caps::*;
pub use event::*;
pub use platform::*;
pub use pt::*;
pub use ring::*;
pub use sample::*;
pub use sink::*;
pub use warn::*;
