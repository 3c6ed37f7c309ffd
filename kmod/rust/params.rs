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
/// `param_ops_<type>`.
macro_rules! module_param {
    ($var:ident, $name:literal, $ops:ident, $type:literal, $desc:literal) => {
        const _: () = {
            #[unsafe(link_section = "__param")]
            #[used]
            static PARAM: $crate::params::Param =
                $crate::params::Param($crate::bindings::kernel_param {
                    name: concat!($name, "\0").as_ptr().cast(),
                    mod_: (&raw const $crate::params::__this_module).cast_mut().cast(),
                    ops: &raw const $crate::bindings::$ops,
                    perm: 0o444,
                    level: -1,
                    flags: 0,
                    __bindgen_anon_1: $crate::bindings::kernel_param__bindgen_ty_1 {
                        // SAFETY: only the address is taken.
                        arg: (&raw mut $var).cast(),
                    },
                });
            #[unsafe(link_section = ".modinfo")]
            #[used]
            static TYPE: [u8; concat!("parmtype=", $name, ":", $type, "\0").len()] =
                $crate::params::bytes(concat!("parmtype=", $name, ":", $type, "\0"));
            #[unsafe(link_section = ".modinfo")]
            #[used]
            static DESC: [u8; concat!("parm=", $name, ":", $desc, "\0").len()] =
                $crate::params::bytes(concat!("parm=", $name, ":", $desc, "\0"));
        };
    };
}
pub(crate) use module_param;

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
