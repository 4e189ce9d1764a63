//! Fuzzes the reader of a peer's host report (`longhaul tune --peer`): arbitrary text never
//! panics, and whatever it accepts writes back to a report that reads the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_tune::{report_from_json, report_to_json};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(report) = report_from_json(&text) {
        let again = report_to_json(&report.host, &report.findings, usize::MAX);
        let back = report_from_json(&again).expect("a written report reads back");
        assert_eq!(back.findings, report.findings);
    }
});
