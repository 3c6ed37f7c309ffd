// SPDX-License-Identifier: MIT OR Apache-2.0
//! The panic handler of bare-metal builds.
//!
//! No panic is reachable from the C ABI by construction; should one happen
//! anyway, the platform decides what that means (the kernel module calls
//! `BUG()`). Linking fails loudly if the platform does not provide the hook.

unsafe extern "C" {
    /// Provided by the platform (the kernel module's C glue): never returns.
    fn perfaux_platform_panic() -> !;
}

#[panic_handler]
fn panic(_info: &core::panic::PanicInfo<'_>) -> ! {
    // SAFETY: the hook takes no arguments and the platform contract says it
    // does not return; it is only called here, on a path that is a bug.
    unsafe { perfaux_platform_panic() }
}
