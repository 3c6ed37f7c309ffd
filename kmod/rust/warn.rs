// SPDX-License-Identifier: GPL-2.0
//! `WARN()` for Rust code in 6.12, which has no `warn_on!`: the message
//! with the `WARNING:` prefix the kernel's own warnings print, the stack,
//! and the W taint, as `__warn()` (kernel/panic.c) does. The perfaux
//! crate's `warn_on_once!` sites report here (its warn hook), and so do
//! this module's own "cannot happen" checks.

use kernel::prelude::*;

use crate::perf;

/// Reports a broken contract: a kernel `WARNING` with the stack, tainting
/// the kernel W. Callable from any context, NMI included (printk defers).
pub(crate) fn warn(message: &str) {
    pr_warn!("------------[ cut here ]------------\n");
    pr_warn!("WARNING: perfaux_rs: {}\n", message);
    // SAFETY: plain calls, valid in any context.
    unsafe {
        perf::dump_stack();
        perf::add_taint(perf::TAINT_WARN, perf::lockdep_ok_LOCKDEP_STILL_OK);
    }
}

/// The perfaux crate's warn hook (`perfaux::warn::set_hook`).
pub(crate) fn hook(message: &'static str) {
    warn(message);
}
