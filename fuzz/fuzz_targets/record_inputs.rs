//! Fuzzes what `longhaul record` and `longhaul plot` read from users: run logs (JSON Lines),
//! record histories (CSV) and routes, then renders the charts and the HTML report of
//! whatever parsed. None of it may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_model::lsr::history::{history, parse_history};
use longhaul_model::route::Route;
use longhaul_report::charts::run_figure_svg;
use longhaul_report::{render_report, ReportInput, RunFigures, RunLog};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = parse_history(&text);
    let route = Route::parse(&text).ok();
    if let Ok(log) = RunLog::parse(&text) {
        let _ = run_figure_svg(&log);
        let figures = RunFigures {
            bits_per_second: log.bits_per_second().unwrap_or(0.0),
            bytes: log.bytes(),
            seconds: log.seconds(),
            streams: log.streams().unwrap_or(1),
            ipv6: log.ipv6().unwrap_or(false),
            retransmits: log.retransmits(),
            limited_by: log.limited_by().map(str::to_string),
        };
        let fallback = Route::parse("GVA,ORD").expect("static route parses");
        let _ = render_report(&ReportInput {
            title: "fuzz".into(),
            generated_at: "now".into(),
            route: Some(route.as_ref().unwrap_or(&fallback)),
            figures,
            log: Some(&log),
            history: history(),
            settings: Vec::new(),
            extra_sections: Vec::new(),
            counted_distance_km: None,
        });
    }
});
