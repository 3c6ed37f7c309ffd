// SPDX-License-Identifier: GPL-2.0
//! `WARN()` for Rust code in 6.12, which has no `warn_on!`: the kernel's
//! own, through `pax_warn()` (helpers.c), so the banner, the stack, the W
//! taint and `panic_on_warn` are the kernel's. The perfaux crate's
//! `warn_on_once!` sites report here (its warn hook), and so do this
//! module's own "cannot happen" checks.

use kernel::ffi::c_int;

use crate::bindings;

/// Reports a broken contract: a kernel `WARNING` with the stack, tainting
/// the kernel W (and panicking under `panic_on_warn`, as every `WARN()`
/// does). Callable from any context, NMI included (printk defers).
pub(crate) fn warn(message: &str) {
    let len = message.len().min(c_int::MAX as usize) as c_int;
    // SAFETY: `message` is readable for `len` bytes, which `%.*s` prints
    // without needing a NUL.
    unsafe { bindings::pax_warn(message.as_ptr().cast(), len) };
}

/// The perfaux crate's warn hook (`perfaux::warn::set_hook`).
pub(crate) fn hook(message: &'static str) {
    warn(message);
}
