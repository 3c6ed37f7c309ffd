// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perfaux attr` end to end: verdicts, exit codes, and clear errors.

use assert_cmd::Command;

fn perfaux() -> Command {
    Command::cargo_bin("perfaux").expect("the perfaux binary is built")
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn aux_sampler_under_a_pt_leader_is_accepted() {
    let out = perfaux()
        .args([
            "attr",
            "--example",
            "aux-sampler",
            "--leader-example",
            "pt-leader",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(text.contains("aux_sample_size      4096"), "{text}");
    assert!(
        text.contains("IP|TID|TIME|CPU|PERIOD|IDENTIFIER|AUX"),
        "{text}"
    );
    assert!(text.contains("perf_event_open: 0 (accepted)"), "{text}");
}

#[test]
fn aux_sampler_alone_is_refused_with_its_rule() {
    let out = perfaux()
        .args(["attr", "--example", "aux-sampler"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("EINVAL (-22) (AuxEventWithoutLeader)"));
}

#[test]
fn hex_from_the_command_line_and_stdin_agree() {
    // A VER0 attr (64 bytes) with size 64: the smallest valid one.
    let mut attr = [0u8; 64];
    attr[0] = 1; // software
    attr[4] = 64;
    let hex: String = attr.iter().map(|b| format!("{b:02x}")).collect();
    let direct = perfaux().args(["attr", &hex]).output().unwrap();
    let piped = perfaux()
        .args(["attr", "-"])
        .write_stdin(hex.clone())
        .output()
        .unwrap();
    assert_eq!(direct.status.code(), Some(0));
    assert_eq!(stdout(&direct), stdout(&piped));
}

#[test]
fn oversized_attr_reports_e2big_and_the_write_back() {
    let mut attr = [0u8; 144];
    attr[4] = 144;
    attr[140] = 1;
    let hex: String = attr.iter().map(|b| format!("{b:02x}")).collect();
    let out = perfaux().args(["attr", &hex]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("E2BIG (-7) (UnknownTailNonZero)"), "{text}");
    assert!(
        text.contains("writes 136 into the caller's size field"),
        "{text}"
    );
}

#[test]
fn unreadable_bytes_are_efault() {
    let out = perfaux()
        .args([
            "attr",
            "--example",
            "aux-sampler",
            "--readable",
            "100",
            "-q",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("EFAULT (-14) (AttrUnreadable)"));
}

#[test]
fn bad_arguments_get_one_clear_line_and_exit_2() {
    for (args, needle) in [
        (vec!["attr", "0g"], "not a hex digit"),
        (vec!["attr", "012"], "odd number of hex digits"),
        (
            vec!["attr", "--example", "aux-sampler", "--readable", "999"],
            "more than the 136 bytes given",
        ),
        (
            vec!["attr", "--example", "aux-sampler", "--pmu", "warp"],
            "unknown PMU capability",
        ),
        // Too few bytes: a short argument, not a fault to model.
        (
            vec!["attr", "0800000080"],
            "5 bytes given: an attr starts with its type and size",
        ),
        (
            vec!["attr", "01000000800000000000"],
            "10 bytes given, but the attr's size field says 128",
        ),
    ] {
        let out = perfaux().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    let out = perfaux().args(["attr"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(129),
        "a usage error: clap refuses a missing attr"
    );
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("perfaux: "));
}
