// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perf record -b` and `-j FILTER`: the branch filter words of perf
//! (`tools/perf/util/parse-branch-options.c`) turned into the
//! `branch_sample_type` perf writes, and the ones perfaux's last-branch
//! record cannot serve refused in one line.

use perfaux::abi::branch_sample_type as br;
use perfaux::lbr::BranchFilter;

/// perf's filter words and their bits (perf 6.1's, and the three later
/// perf versions added: `no_flags`, `no_cycles`, `hw_index`).
const WORDS: &[(&str, u64)] = &[
    ("u", br::USER),
    ("k", br::KERNEL),
    ("hv", br::HV),
    ("any", br::ANY),
    ("any_call", br::ANY_CALL),
    ("any_ret", br::ANY_RETURN),
    ("ind_call", br::IND_CALL),
    ("abort_tx", br::ABORT_TX),
    ("in_tx", br::IN_TX),
    ("no_tx", br::NO_TX),
    ("cond", br::COND),
    ("ind_jmp", br::IND_JUMP),
    ("call", br::CALL),
    ("no_flags", br::NO_FLAGS),
    ("no_cycles", br::NO_CYCLES),
    ("save_type", br::TYPE_SAVE),
    ("stack", br::CALL_STACK),
    ("hw_index", br::HW_INDEX),
    ("priv", br::PRIV_SAVE),
];

/// `-b` (`--branch-any`): every taken branch.
pub const ANY: u64 = br::ANY;

/// The `branch_sample_type` of a `-j` filter, as perf's
/// `parse_branch_str` makes it: the words' bits, and `any` alone when no
/// word names a branch kind (privilege levels alone).
///
/// # Errors
/// An empty filter or a word perf does not know.
pub fn parse(filter: &str) -> Result<u64, String> {
    let mut bits = 0;
    for word in filter.split(',') {
        let Some(&(_, bit)) = WORDS.iter().find(|(name, _)| *name == word) else {
            let known: Vec<&str> = WORDS.iter().map(|(name, _)| *name).collect();
            return Err(format!(
                "-j {filter}: unknown branch filter '{word}' (perf's words: {})",
                known.join(", ")
            ));
        };
        bits |= bit;
    }
    if bits & !br::PLM_ALL == 0 {
        // parse_branch_str: "default to any branch".
        bits = br::ANY;
    }
    Ok(bits)
}

/// Refuses a `branch_sample_type` the last-branch record cannot serve.
///
/// # Errors
/// The filter word and why (kernel branches, transactions, call stacks).
pub fn check(bits: u64) -> Result<(), String> {
    BranchFilter::new(bits).map(|_| ()).map_err(|e| {
        let word = WORDS
            .iter()
            .find(|(_, bit)| *bit == e.bit)
            .map_or("the filter", |(name, _)| name);
        format!("-j {word}: {}", e.reason)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_words_become_perf_bits() {
        assert_eq!(parse("any,u").unwrap(), br::ANY | br::USER);
        assert_eq!(
            parse("any_call,any_ret,save_type").unwrap(),
            br::ANY_CALL | br::ANY_RETURN | br::TYPE_SAVE
        );
        // Privilege levels alone: any branch, the levels dropped as perf
        // drops them (the kernel takes them from the exclude bits).
        assert_eq!(parse("u").unwrap(), br::ANY);
        assert!(
            parse("any,bogus")
                .unwrap_err()
                .contains("unknown branch filter 'bogus'")
        );
        assert!(parse("").unwrap_err().contains("unknown branch filter ''"));
    }

    #[test]
    fn what_cannot_be_served_is_refused_by_its_word() {
        assert_eq!(
            check(parse("any,k").unwrap()).unwrap_err(),
            "-j k: kernel branches are not recorded (user only: u)"
        );
        assert!(
            check(parse("any,stack").unwrap())
                .unwrap_err()
                .starts_with("-j stack:")
        );
        assert!(
            check(parse("in_tx").unwrap())
                .unwrap_err()
                .starts_with("-j in_tx:")
        );
        assert!(check(parse("cond,u,save_type,hw_index").unwrap()).is_ok());
    }
}
