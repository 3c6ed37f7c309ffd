// SPDX-License-Identifier: MIT OR Apache-2.0
//! The platform's warn hook in C: where the engine finds a state its
//! contracts rule out (Linux's driver has `WARN_ON_ONCE` there), it calls
//! the hook once per site and takes the safe way out; a kernel module makes
//! the hook `WARN()`. The count covers every occurrence.

use core::ffi::c_char;
use core::sync::atomic::{AtomicPtr, Ordering};

/// A warn hook (the argument of `perfaux_set_warn_hook`).
type WarnFn = unsafe extern "C" fn(msg: *const c_char, len: usize);

/// The C hook, a `WarnFn` as a data pointer (null: none).
static C_HOOK: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());

fn forward(message: &'static str) {
    // Relaxed: a function pointer, published to nothing else.
    let p = C_HOOK.load(Ordering::Relaxed);
    if !p.is_null() {
        // SAFETY: stored by `perfaux_set_warn_hook` from a `WarnFn`
        // (function and data pointers have one size on perfaux's targets);
        // the message is valid for `len` bytes for the whole call.
        unsafe {
            let hook = core::mem::transmute::<*mut (), WarnFn>(p);
            hook(message.as_ptr().cast(), message.len());
        }
    }
}

/// Installs `hook` (NULL: none) as the warn hook: `msg` is `len` bytes of
/// text (`file:line: what`), not NUL-terminated. It is called once per
/// site, from any context the engine runs in, NMI included: it must not
/// block. A kernel module passes a function that calls `WARN()`.
#[unsafe(no_mangle)]
pub extern "C" fn perfaux_set_warn_hook(
    hook: Option<unsafe extern "C" fn(msg: *const c_char, len: usize)>,
) {
    let p = hook.map_or(core::ptr::null_mut(), |f| f as *mut ());
    // Relaxed: see `forward`.
    C_HOOK.store(p, Ordering::Relaxed);
    perfaux::warn::set_hook(hook.map(|_| forward as perfaux::warn::WarnHook));
}

/// Warnings raised so far (every occurrence, all sites).
#[unsafe(no_mangle)]
pub extern "C" fn perfaux_warn_count() -> u64 {
    perfaux::warn::count()
}
