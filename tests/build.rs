// SPDX-License-Identifier: MIT OR Apache-2.0
//! Runs bindgen on the system's `<linux/perf_event.h>` so that the ABI test
//! can compare every field of perfaux's layouts with the C compiler's.
//!
//! bindgen needs libclang (Debian: `libclang-dev`). Without it the bindings
//! are replaced by a note saying why, and the ABI test reports that it could
//! not compare, unless `PERFAUX_REQUIRE_BINDGEN=1` (CI sets it), which turns
//! the absence into a build failure.

use std::env;
use std::fs;
use std::panic;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=PERFAUX_REQUIRE_BINDGEN");
    println!("cargo:rerun-if-changed=/usr/include/linux/perf_event.h");
    println!("cargo::rustc-check-cfg=cfg(perf_event_bindings)");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("perf_event_sys.rs");

    // bindgen panics when it cannot load libclang: turn that into a reason.
    let generated = panic::catch_unwind(|| {
        bindgen::Builder::default()
            .header_contents("wrapper.h", "#include <linux/perf_event.h>\n")
            .allowlist_type("perf_event_attr|perf_event_header|perf_event_mmap_page")
            .allowlist_type("perf_event_type|perf_event_sample_format|perf_event_read_format")
            .allowlist_type("perf_branch_sample_type|perf_type_id|perf_sw_ids")
            .allowlist_var("PERF_.*")
            .prepend_enum_name(false)
            .derive_default(true)
            .layout_tests(false)
            .generate()
    });
    let text = match generated {
        Ok(Ok(bindings)) => {
            println!("cargo:rustc-cfg=perf_event_bindings");
            format!("pub const UNAVAILABLE: Option<&str> = None;\n{bindings}")
        }
        Ok(Err(e)) => unavailable(format!("bindgen could not parse <linux/perf_event.h>: {e}")),
        Err(_) => unavailable("bindgen could not load libclang (install libclang-dev)".to_owned()),
    };
    fs::write(&out, text).expect("write the bindings");
}

fn unavailable(reason: String) -> String {
    if env::var_os("PERFAUX_REQUIRE_BINDGEN").is_some_and(|v| v == "1") {
        panic!("PERFAUX_REQUIRE_BINDGEN=1 but {reason}");
    }
    println!("cargo:warning=ABI cross-check disabled: {reason}");
    format!("pub const UNAVAILABLE: Option<&str> = Some({reason:?});\n")
}
