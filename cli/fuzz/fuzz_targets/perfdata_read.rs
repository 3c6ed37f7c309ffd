// SPDX-License-Identifier: MIT OR Apache-2.0
//! Any bytes through the perf.data reader, the record describer and the
//! checker: errors are fine, panics are not.
#![no_main]

use libfuzzer_sys::fuzz_target;
use perfaux_cli::dump::{check, describe};
use perfaux_cli::perfdata::PerfData;

fuzz_target!(|bytes: &[u8]| {
    let Ok(file) = PerfData::parse(bytes) else {
        return;
    };
    for record in file.records() {
        match record {
            Ok(r) => {
                let _ = describe(&file, &r);
            }
            Err(_) => break,
        }
    }
    let _ = check(&file);
});
