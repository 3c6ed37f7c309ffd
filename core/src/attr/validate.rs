// SPDX-License-Identifier: MIT OR Apache-2.0
//! The post-copy checks of `perf_copy_attr` (`kernel/events/core.c`), in Linux 6.18's order.

use super::rule::Rule;
use crate::abi::{
    PerfEventAttr, attr_flags, aux_action, branch_sample_type as br, read_format,
    sample_type as st, x86_regs,
};

/// What the post-copy checks need to know about the system they emulate.
///
/// [`CopyPolicy::default`] is a Linux 6.18 x86-64 kernel as Debian and most
/// distributions configure it, opened by a caller allowed to profile the
/// kernel (root, or `perf_event_paranoid <= 1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyPolicy {
    /// `kernel.perf_event_max_stack`: replaces a zero `sample_max_stack`.
    pub max_stack: u16,
    /// Whether `perf_allow_kernel()` passes; when not, capturing kernel or
    /// hypervisor branches gives `EACCES`.
    pub kernel_allowed: bool,
    /// `CONFIG_CGROUP_PERF`: without it `PERF_SAMPLE_CGROUP` is `EINVAL`.
    pub cgroup_perf: bool,
    /// `arch_perf_have_user_stack_dump()`: without it `PERF_SAMPLE_STACK_USER`
    /// is `ENOSYS`.
    pub user_stack_dump: bool,
}

impl CopyPolicy {
    /// The default `kernel.perf_event_max_stack` (`PERF_MAX_STACK_DEPTH`).
    pub const DEFAULT_MAX_STACK: u16 = 127;

    /// A Linux 6.18 x86-64 kernel with cgroup perf support, for a caller
    /// allowed to profile the kernel.
    pub const LINUX_X86_64: CopyPolicy = CopyPolicy {
        max_stack: Self::DEFAULT_MAX_STACK,
        kernel_allowed: true,
        cgroup_perf: true,
        user_stack_dump: true,
    };
}

impl Default for CopyPolicy {
    fn default() -> Self {
        Self::LINUX_X86_64
    }
}

/// The post-copy checks of `perf_copy_attr` on an attr already copied in,
/// with Linux's side effects:
///
/// 1. reserved flag bits 38..63, `__reserved_2`, `aux_action` bits 3..31 → `EINVAL`;
/// 2. `sample_type` bits from 25 up → `EINVAL`;
/// 3. `read_format` bits from 5 up → `EINVAL`;
/// 4. with `PERF_SAMPLE_BRANCH_STACK`: undefined branch bits, or no branch-type
///    bit → `EINVAL`; with no privilege-level bit, the levels not excluded by
///    `exclude_kernel`/`exclude_user`/`exclude_hv` are **written into**
///    `branch_sample_type`; kernel or hypervisor capture without permission → `EACCES`;
/// 5. with `PERF_SAMPLE_REGS_USER`: an invalid x86-64 register mask → `EINVAL`;
/// 6. with `PERF_SAMPLE_STACK_USER`: no user stack dumps → `ENOSYS`; a size of
///    65535 or more, or not a multiple of 8 → `EINVAL`;
/// 7. `sample_max_stack == 0` **becomes** the system's `max_stack`;
/// 8. with `PERF_SAMPLE_REGS_INTR`: an invalid mask is remembered, not
///    returned: a later check's error wins, and otherwise it is the result;
/// 9. `PERF_SAMPLE_CGROUP` without cgroup perf support → `EINVAL`;
/// 10. `WEIGHT` with `WEIGHT_STRUCT` → `EINVAL`;
/// 11. `inherit_thread` without `inherit` → `EINVAL`;
/// 12. `remove_on_exec` with `enable_on_exec` → `EINVAL`;
/// 13. `sigtrap` without `remove_on_exec` → `EINVAL`.
///
/// Nothing relates `aux_sample_size` to `PERF_SAMPLE_AUX`, and any
/// `aux_sample_size` is accepted: it is clamped per sample.
pub fn validate_attr(attr: &mut PerfEventAttr, policy: &CopyPolicy) -> Result<(), Rule> {
    if attr.flags & attr_flags::RESERVED != 0
        || attr.reserved_2 != 0
        || attr.aux_action & aux_action::RESERVED != 0
    {
        return Err(Rule::ReservedBits);
    }
    if attr.sample_type & !st::KNOWN != 0 {
        return Err(Rule::UnknownSampleType);
    }
    if attr.read_format & !read_format::KNOWN != 0 {
        return Err(Rule::UnknownReadFormat);
    }

    if attr.sample_type & st::BRANCH_STACK != 0 {
        check_branch_sample_type(attr, policy)?;
    }

    if attr.sample_type & st::REGS_USER != 0 {
        validate_regs(attr.sample_regs_user).map_err(|()| Rule::RegsUserMask)?;
    }

    if attr.sample_type & st::STACK_USER != 0 {
        if !policy.user_stack_dump {
            return Err(Rule::NoUserStackDump);
        }
        // A u32 field, but the u16 record size bounds what can be dumped.
        if attr.sample_stack_user >= u32::from(u16::MAX) || attr.sample_stack_user % 8 != 0 {
            return Err(Rule::StackUserSize);
        }
    }

    if attr.sample_max_stack == 0 {
        attr.sample_max_stack = policy.max_stack;
    }

    // Linux stores this result and carries on (`perf_copy_attr`'s
    // `ret = perf_reg_validate(...)` for REGS_INTR): a later
    // check's error is returned first.
    let regs_intr = if attr.sample_type & st::REGS_INTR != 0 {
        validate_regs(attr.sample_regs_intr).map_err(|()| Rule::RegsIntrMask)
    } else {
        Ok(())
    };

    if attr.sample_type & st::CGROUP != 0 && !policy.cgroup_perf {
        return Err(Rule::CgroupUnsupported);
    }
    if attr.sample_type & st::WEIGHT_TYPE == st::WEIGHT_TYPE {
        return Err(Rule::WeightAndWeightStruct);
    }
    if !attr.inherit() && attr.inherit_thread() {
        return Err(Rule::InheritThreadWithoutInherit);
    }
    if attr.remove_on_exec() && attr.enable_on_exec() {
        return Err(Rule::RemoveOnExecWithEnableOnExec);
    }
    if attr.sigtrap() && !attr.remove_on_exec() {
        return Err(Rule::SigtrapWithoutRemoveOnExec);
    }
    regs_intr
}

/// Check 4: the branch filter, with the privilege-level propagation.
fn check_branch_sample_type(attr: &mut PerfEventAttr, policy: &CopyPolicy) -> Result<(), Rule> {
    let mut mask = attr.branch_sample_type;
    if mask & !(br::MAX - 1) != 0 {
        return Err(Rule::UnknownBranchType);
    }
    if mask & !br::PLM_ALL == 0 {
        return Err(Rule::NoBranchType);
    }
    if mask & br::PLM_ALL == 0 {
        if !attr.exclude_kernel() {
            mask |= br::KERNEL;
        }
        if !attr.exclude_user() {
            mask |= br::USER;
        }
        if !attr.exclude_hv() {
            mask |= br::HV;
        }
        // The kernel adjusts the user's setting for the hardware filter.
        attr.branch_sample_type = mask;
    }
    if mask & br::PERM_PLM != 0 && !policy.kernel_allowed {
        return Err(Rule::BranchPrivilege);
    }
    Ok(())
}

/// x86-64 `perf_reg_validate`: a non-empty mask without the segment
/// registers the kernel cannot sample and without the reserved bits.
fn validate_regs(mask: u64) -> Result<(), ()> {
    if mask == 0 || mask & (x86_regs::NOT_SUPPORTED | x86_regs::RESERVED) != 0 {
        Err(())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    type Result<T> = core::result::Result<T, Error>;

    fn validate(a: &mut PerfEventAttr, policy: &CopyPolicy) -> Result<()> {
        validate_attr(a, policy).map_err(Error::from)
    }
    use crate::abi::PERF_ATTR_SIZE_VER8;

    fn attr() -> PerfEventAttr {
        PerfEventAttr::new(PERF_ATTR_SIZE_VER8)
    }

    fn check(mut a: PerfEventAttr) -> Result<PerfEventAttr> {
        validate(&mut a, &CopyPolicy::default()).map(|()| a)
    }

    #[test]
    fn reserved_bits() {
        for bit in 38..64 {
            let mut a = attr();
            a.flags = 1 << bit;
            assert_eq!(check(a), Err(Error::Invalid), "flag bit {bit}");
        }
        let mut a = attr();
        a.reserved_2 = 1;
        assert_eq!(check(a), Err(Error::Invalid));
        for bit in 3..32 {
            let mut a = attr();
            a.aux_action = 1 << bit;
            assert_eq!(check(a), Err(Error::Invalid), "aux_action bit {bit}");
        }
        let mut a = attr();
        a.aux_action = aux_action::START_PAUSED | aux_action::PAUSE | aux_action::RESUME;
        assert!(check(a).is_ok(), "defined aux_action bits pass the copy");
        a.flags = attr_flags::KNOWN & !(attr_flags::INHERIT_THREAD | attr_flags::SIGTRAP);
        a.flags &= !attr_flags::ENABLE_ON_EXEC;
        a.flags |= attr_flags::INHERIT;
        assert!(check(a).is_ok());
    }

    #[test]
    fn sample_type_and_read_format_bits() {
        for bit in 0..25 {
            let mut a = attr();
            a.sample_type = 1 << bit;
            // Bits needing extra fields are covered below; the others pass alone.
            let needs = st::BRANCH_STACK | st::REGS_USER | st::REGS_INTR;
            if (1u64 << bit) & needs == 0 {
                assert!(check(a).is_ok(), "sample bit {bit}");
            }
        }
        for bit in 25..64 {
            let mut a = attr();
            a.sample_type = 1 << bit;
            assert_eq!(check(a), Err(Error::Invalid));
        }
        let mut a = attr();
        a.read_format = read_format::KNOWN;
        assert!(check(a).is_ok());
        a.read_format = read_format::MAX;
        assert_eq!(check(a), Err(Error::Invalid));
    }

    #[test]
    fn branch_stack_rules_and_privilege_propagation() {
        let mut a = attr();
        a.sample_type = st::BRANCH_STACK;
        a.branch_sample_type = br::USER; // no branch-type bit
        assert_eq!(check(a), Err(Error::Invalid));
        a.branch_sample_type = br::ANY | br::MAX;
        assert_eq!(check(a), Err(Error::Invalid));
        a.branch_sample_type = br::ANY | br::COUNTERS;
        assert!(check(a).is_ok());

        a.branch_sample_type = br::ANY;
        a.flags = attr_flags::EXCLUDE_KERNEL | attr_flags::EXCLUDE_HV;
        assert_eq!(check(a).unwrap().branch_sample_type, br::ANY | br::USER);
        a.flags = 0;
        assert_eq!(check(a).unwrap().branch_sample_type, br::ANY | br::PLM_ALL);

        let no_kernel = CopyPolicy {
            kernel_allowed: false,
            ..CopyPolicy::default()
        };
        assert_eq!(validate(&mut a.clone(), &no_kernel), Err(Error::Access));
        a.flags = attr_flags::EXCLUDE_KERNEL | attr_flags::EXCLUDE_HV;
        assert!(validate(&mut a.clone(), &no_kernel).is_ok());
        a.branch_sample_type = br::ANY | br::HV; // explicit level: not adjusted
        assert_eq!(validate(&mut a.clone(), &no_kernel), Err(Error::Access));
    }

    #[test]
    fn regs_masks() {
        let mut a = attr();
        a.sample_type = st::REGS_USER;
        for (mask, ok) in [
            (0u64, false),
            (1 << x86_regs::DS, false),
            (1 << 24, false),
            (1 << 31, false),
            (0xff_0fff, true),
            (1 << 32, true),
        ] {
            a.sample_regs_user = mask;
            assert_eq!(check(a).is_ok(), ok, "mask {mask:#x}");
        }
    }

    #[test]
    fn stack_user_limits() {
        let mut a = attr();
        a.sample_type = st::STACK_USER;
        for (size, ok) in [
            (0, true),
            (8, true),
            (12, false),
            (65528, true),
            (65535, false),
            (65536, false),
        ] {
            a.sample_stack_user = size;
            assert_eq!(check(a).is_ok(), ok, "size {size}");
        }
        let no_dump = CopyPolicy {
            user_stack_dump: false,
            ..CopyPolicy::default()
        };
        a.sample_stack_user = 12;
        assert_eq!(validate(&mut a.clone(), &no_dump), Err(Error::NoSys));
    }

    #[test]
    fn max_stack_is_filled_in() {
        assert_eq!(check(attr()).unwrap().sample_max_stack, 127);
        let mut a = attr();
        a.sample_max_stack = 7;
        assert_eq!(check(a).unwrap().sample_max_stack, 7);
    }

    #[test]
    fn regs_intr_error_is_returned_after_every_later_check() {
        let mut a = attr();
        a.sample_type = st::REGS_INTR;
        a.sample_regs_intr = 1 << x86_regs::GS;
        assert_eq!(check(a), Err(Error::Invalid));
        a.sample_regs_intr = 1;
        assert!(check(a).is_ok());
        // Every later check also gives EINVAL, so the deferral shows only in
        // that the later checks still run: the result is EINVAL either way,
        // and the max_stack fill (before it) has happened.
        let mut b = attr();
        b.sample_type = st::REGS_INTR | st::WEIGHT_TYPE;
        assert_eq!(
            validate(&mut b, &CopyPolicy::default()),
            Err(Error::Invalid)
        );
        assert_eq!(b.sample_max_stack, 127);
    }

    #[test]
    fn combination_rules() {
        let mut a = attr();
        a.sample_type = st::WEIGHT | st::WEIGHT_STRUCT;
        assert_eq!(check(a), Err(Error::Invalid));
        let mut a = attr();
        a.flags = attr_flags::INHERIT_THREAD;
        assert_eq!(check(a), Err(Error::Invalid));
        a.flags |= attr_flags::INHERIT;
        assert!(check(a).is_ok());
        let mut a = attr();
        a.flags = attr_flags::REMOVE_ON_EXEC | attr_flags::ENABLE_ON_EXEC;
        assert_eq!(check(a), Err(Error::Invalid));
        let mut a = attr();
        a.flags = attr_flags::SIGTRAP;
        assert_eq!(check(a), Err(Error::Invalid));
        a.flags |= attr_flags::REMOVE_ON_EXEC;
        assert!(check(a).is_ok());
        let mut a = attr();
        a.sample_type = st::CGROUP;
        assert!(check(a).is_ok());
        let no_cgroup = CopyPolicy {
            cgroup_perf: false,
            ..CopyPolicy::default()
        };
        assert_eq!(validate(&mut a, &no_cgroup), Err(Error::Invalid));
    }

    #[test]
    fn any_aux_sample_size_passes_the_copy() {
        let mut a = attr();
        a.aux_sample_size = u32::MAX;
        assert!(check(a).is_ok());
        a.sample_type = st::AUX;
        a.aux_sample_size = 0;
        assert!(check(a).is_ok());
    }
}
