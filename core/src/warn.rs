// SPDX-License-Identifier: MIT OR Apache-2.0
//! `WARN_ON_ONCE` for states the contracts rule out: where Linux's driver
//! warns (`pt_event_snapshot_aux`'s `WARN_ON_ONCE(!buf)` and
//! `WARN_ON_ONCE(!buf->snapshot)`, say), perfaux calls the platform's warn
//! hook once per site and counts every occurrence, then takes the same safe
//! way out Linux takes. A kernel module's hook is `WARN()`; on the host the
//! count is what tests read.
//!
//! The hook and the count are process-wide statics: they order nothing
//! (Relaxed), and use `core`'s atomics even under loom (they are not part
//! of any protocol loom checks).

use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

/// What a warn hook is given: `file:line: what went wrong`.
pub type WarnHook = fn(&'static str);

/// The hook, a `WarnHook` cast to a data pointer (null: none).
static HOOK: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());
/// Warnings since the start (every occurrence, not once per site).
static COUNT: AtomicU64 = AtomicU64::new(0);

/// Installs `hook` (`None`: none), called once per warning site, possibly
/// from NMI context: it must not block.
pub fn set_hook(hook: Option<WarnHook>) {
    let p = hook.map_or(core::ptr::null_mut(), |f| f as *mut ());
    // Relaxed: a function pointer, published to nothing else.
    HOOK.store(p, Ordering::Relaxed);
}

/// How many warnings were raised so far (all sites, every occurrence).
pub fn count() -> u64 {
    // Relaxed: a statistic.
    COUNT.load(Ordering::Relaxed)
}

/// Counts a warning and, the first time `once` is seen, calls the hook.
/// Use [`warn_on_once!`](crate::warn_on_once).
#[doc(hidden)]
pub fn report(once: &AtomicBool, message: &'static str) {
    // Relaxed: a statistic and a once-flag; a second report racing with
    // the first may call the hook twice, which is harmless.
    COUNT.fetch_add(1, Ordering::Relaxed);
    if once.swap(true, Ordering::Relaxed) {
        return;
    }
    let p = HOOK.load(Ordering::Relaxed);
    if !p.is_null() {
        // SAFETY: `p` was stored by `set_hook` from a `WarnHook`; function
        // and data pointers have the same size on every target perfaux
        // builds for.
        let hook: WarnHook = unsafe { core::mem::transmute::<*mut (), WarnHook>(p) };
        hook(message);
    }
}

/// `WARN_ON_ONCE(cond)`: evaluates to `cond`, reporting it when true.
#[macro_export]
#[doc(hidden)]
macro_rules! warn_on_once {
    ($cond:expr, $msg:literal) => {{
        let cond: bool = $cond;
        if cond {
            static ONCE: core::sync::atomic::AtomicBool =
                core::sync::atomic::AtomicBool::new(false);
            $crate::warn::report(&ONCE, concat!(file!(), ":", line!(), ": ", $msg));
        }
        cond
    }};
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_every_occurrence_and_evaluates_to_the_condition() {
        let before = super::count();
        for _ in 0..3 {
            assert!(crate::warn_on_once!(true, "test"));
        }
        assert!(!crate::warn_on_once!(false, "never"));
        assert!(super::count() >= before + 3);
    }
}
