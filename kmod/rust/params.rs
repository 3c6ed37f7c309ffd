// SPDX-License-Identifier: GPL-2.0
//! Module parameters, as `module_param()` (include/linux/moduleparam.h)
//! lays them out: a `struct kernel_param` in the `__param` section, which
//! the module loader parses and sysfs shows under
//! /sys/module/perfaux_rs/parameters/, and the `parmtype=` and `parm=`
//! strings `modinfo` prints. 6.12's `module!` macro has no parameters.

use crate::bindings;

/// One `__param` entry.
///
/// # Invariants
/// Built only by [`module_param!`]: `name` is a NUL-terminated string and
/// `arg` the address of a `static mut` of the type `ops` parses, both
/// living as long as the module.
#[repr(transparent)]
pub(crate) struct Param(pub(crate) bindings::kernel_param);

// SAFETY: the kernel reads the entry (the loader at load time, sysfs
// later); nothing writes it. The variable it points to is written only by
// the loader, before the module's init runs.
unsafe impl Sync for Param {}

// `struct module` holds a zero-sized `struct lockdep_map` without
// CONFIG_LOCKDEP, which the lint calls not FFI-safe; only the address is used.
#[allow(improper_ctypes)]
unsafe extern "C" {
    /// This module (the loader fills it in; `.gnu.linkonce.this_module`),
    /// declared as `module!` declares it.
    pub(crate) static __this_module: kernel::types::Opaque<kernel::bindings::module>;
}

/// `module_param(name, type, 0444)` with a description: a read-only
/// parameter named after the `static mut` it sets, parsed by
/// `param_ops_<type>`. With `ops = OPS`, `module_param_cb()`: a read-only
/// parameter whose `get` is `OPS`'s, over the static `var`.
macro_rules! module_param {
    ($var:path, $name:literal, ops = $ops:expr, $desc:literal) => {
        const _: () = {
            $crate::params::param_entry!(
                $name,
                &raw const $ops,
                (&raw const $var).cast_mut().cast(),
                $desc
            );
        };
    };
    ($var:ident, $name:literal, $ops:ident, $type:literal, $desc:literal) => {
        const _: () = {
            $crate::params::param_entry!(
                $name,
                &raw const $crate::bindings::$ops,
                // SAFETY: only the address is taken.
                (&raw mut $var).cast(),
                $desc
            );
            #[unsafe(link_section = ".modinfo")]
            #[used]
            static TYPE: [u8; concat!("parmtype=", $name, ":", $type, "\0").len()] =
                $crate::params::bytes(concat!("parmtype=", $name, ":", $type, "\0"));
        };
    };
}
pub(crate) use module_param;

/// [`module_param!`]'s two forms in common: the read-only `__param` entry
/// (`ops` over `arg`) and the description in `.modinfo`.
macro_rules! param_entry {
    ($name:literal, $ops:expr, $arg:expr, $desc:literal) => {
        #[unsafe(link_section = "__param")]
        #[used]
        static PARAM: $crate::params::Param =
            $crate::params::Param($crate::bindings::kernel_param {
                name: concat!($name, "\0").as_ptr().cast(),
                mod_: (&raw const $crate::params::__this_module).cast_mut().cast(),
                ops: $ops,
                perm: 0o444,
                level: -1,
                flags: 0,
                __bindgen_anon_1: $crate::bindings::kernel_param__bindgen_ty_1 { arg: $arg },
            });
        #[unsafe(link_section = ".modinfo")]
        #[used]
        static DESC: [u8; concat!("parm=", $name, ":", $desc, "\0").len()] =
            $crate::params::bytes(concat!("parm=", $name, ":", $desc, "\0"));
    };
}
pub(crate) use param_entry;

/// The `kernel_param_ops` of a read-only counter: an `AtomicU64` shown in
/// decimal (perfaux_pt.ko's `pax_count_get`).
pub(crate) struct CountOps(pub(crate) bindings::kernel_param_ops);

// SAFETY: read-only after it is built; the kernel only calls through it.
unsafe impl Sync for CountOps {}

/// The counters' ops.
pub(crate) static COUNT_OPS: CountOps = CountOps(bindings::kernel_param_ops {
    flags: 0,
    set: None,
    get: Some(count_get),
    free: None,
});

/// `get` of a counter parameter.
///
/// # Safety
/// Called by sysfs with a page-sized `buf` and a parameter whose `arg` is
/// an `AtomicU64` (every user of `COUNT_OPS` is one).
unsafe extern "C" fn count_get(
    buf: *mut kernel::ffi::c_char,
    kp: *const bindings::kernel_param,
) -> kernel::ffi::c_int {
    // SAFETY: the parameter's `arg` is a static `AtomicU64` (this
    // function's `# Safety`).
    let n = unsafe {
        &*(*kp)
            .__bindgen_anon_1
            .arg
            .cast::<core::sync::atomic::AtomicU64>()
    }
    .load(core::sync::atomic::Ordering::Relaxed);
    // SAFETY: a page-sized buffer, and a format taking one u64.
    unsafe { bindings::sysfs_emit(buf, c"%llu\n".as_ptr().cast(), n) }
}

/// A string's bytes as an array of its length (for `.modinfo`).
pub(crate) const fn bytes<const N: usize>(s: &str) -> [u8; N] {
    let mut out = [0u8; N];
    let b = s.as_bytes();
    let mut i = 0;
    while i < N && i < b.len() {
        out[i] = b[i];
        i += 1;
    }
    out
}
