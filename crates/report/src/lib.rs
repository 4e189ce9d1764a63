//! Reports of longhaul runs, with no I/O: the records `longhaul cp --json` prints, typed for
//! the writer and the reader alike, the tolerant reader of `longhaul bench --json` run
//! logs, a small SVG chart writer, the run's graphs (throughput, cwnd, RTT, retransmits), the
//! Land Speed Record history chart, and the self-contained HTML report.
//!
//! Everything takes text or data and returns text; the caller reads and writes files.
#![forbid(unsafe_code)]

pub mod charts;
pub mod history_chart;
pub mod html;
pub mod records;
pub mod runlog;
pub mod svg;

pub use html::{render_report, ReportInput, RunFigures};
pub use runlog::{RunLog, RunLogError};
