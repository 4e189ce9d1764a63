//! End-to-end tests of `longhaul record` and `longhaul plot`: the real binary on a sample run
//! log, its JSON and exit codes, the HTML report parsed as XML, and the report rendered in
//! headless Chromium (skipped with a message when Chromium is not installed).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::{Scratch, Server};

const SAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../report/tests/data/bench-2streams.jsonl"
);

fn longhaul(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_longhaul"))
        .args(args)
        .output()
        .expect("run longhaul")
}

fn json_of(out: &Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().next().expect("one JSON line");
    serde_json::from_str(line).expect("valid JSON")
}

#[test]
fn record_from_rate_reports_legs_metric_and_rules() {
    let out = longhaul(&[
        "record",
        "--route",
        "GVA,ORD,SJC",
        "--rate",
        "4310.62M",
        "--seconds",
        "3648.81",
        "--json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_of(&out);
    assert_eq!(v["type"], "record");
    let legs: Vec<f64> = v["legs_km"]
        .as_array()
        .expect("legs_km")
        .iter()
        .map(|l| l.as_f64().expect("km"))
        .collect();
    assert_eq!(legs.len(), 2);
    let distance = v["distance_km"].as_f64().expect("distance");
    assert!((legs.iter().sum::<f64>() - distance).abs() < 1e-9);
    let bps = v["bits_per_second"].as_f64().expect("bps");
    assert_eq!(bps, 4310.62e6);
    let bmps = v["bit_meters_per_second"].as_f64().expect("bmps");
    assert!((bmps - bps * distance * 1000.0).abs() / bmps < 1e-12);
    let rules = v["rules"].as_array().expect("rules");
    assert_eq!(rules.len(), 6);
    assert!(rules
        .iter()
        .all(|r| r["pass"] == true && r["why"].is_string()));
    assert_eq!(v["standing_record"]["date"], "2006-04");
    assert_eq!(v["standing_record"]["new_record"], false);
}

#[test]
fn short_run_fails_its_rules_with_exit_1() {
    let out = longhaul(&[
        "record",
        "--route",
        "GVA,ORD,SJC",
        "--log",
        SAMPLE,
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v = json_of(&out);
    let duration = v["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .find(|r| r["name"] == "duration")
        .expect("duration rule")
        .clone();
    assert_eq!(duration["status"], "fail");
    assert!(duration["why"].as_str().expect("why").contains("12.0 s"));
    assert_eq!(v["streams"], 2);
    assert_eq!(v["class"], "multiple streams");
}

#[test]
fn unknown_airport_is_an_error_with_suggestions() {
    let out = longhaul(&["record", "--route", "GVA,ORQ,SJC", "--rate", "1G"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ORQ") && err.contains("ORD (Chicago, US)"),
        "{err}"
    );
}

#[test]
fn plot_writes_svg_and_png() {
    let dir = Scratch::in_target_dir("plot");
    let svg = dir.join("run.svg");
    let out = longhaul(&["plot", SAMPLE, "-o", svg.to_str().expect("utf-8 path")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).expect("svg written");
    assert!(text.starts_with("<svg") && text.contains("37 retr") && text.contains("stream 1"));
    assert_well_formed(&text);

    let png_path = dir.join("run.png");
    let out = longhaul(&["plot", SAMPLE, "-o", png_path.to_str().expect("utf-8 path")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (w, h, pixels) = decode_png(&png_path);
    assert_eq!((w, h), (760, 840));
    // The total line is near-black, the retransmit markers red.
    assert!(count_near(&pixels, [0x11, 0x11, 0x11], 40) > 300);
    assert!(count_near(&pixels, [0xd6, 0x27, 0x28], 40) > 50);

    let bad = longhaul(&[
        "plot",
        SAMPLE,
        "-o",
        dir.join("run.gif").to_str().expect("path"),
    ]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn html_report_is_self_contained_and_carries_the_run() {
    let dir = Scratch::in_target_dir("html");
    let html_path = dir.join("report.html");
    let out = longhaul(&[
        "record",
        "--route",
        "GVA,ORD,SJC",
        "--log",
        SAMPLE,
        "--html",
        html_path.to_str().expect("utf-8 path"),
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&html_path).expect("report written");
    assert_well_formed(&html);
    assert_self_contained(&html);
    // The run's numbers: metric, throughput, legs, the run placed on the history chart,
    // host settings from the log.
    for needle in [
        "7.341 Pb·m/s",
        "734.7 Mbit/s",
        "7055.0",
        "2936.8",
        "9991.8",
        "this run (IPv4): 7.341 Pb·m/s",
        "mean 734.7 Mbit/s",
        "37 retr",
        "<th>client</th><th>server</th>",
        "<td>rmem_max</td><td>67108864</td><td>33554432</td>",
        "the network (loss or a full bottleneck)",
        "264.147 Pb·m/s",
    ] {
        assert!(html.contains(needle), "report lacks {needle:?}");
    }
}

#[test]
fn html_report_renders_in_headless_chromium_without_requests() {
    let Some(chromium) = find_chromium() else {
        eprintln!("SKIPPED: chromium not installed (apt-get install chromium); the report was not rendered");
        return;
    };
    let dir = Scratch::in_target_dir("chromium");
    let html_path = dir.join("report.html");
    let out = longhaul(&[
        "record",
        "--route",
        "GVA,ORD,SJC",
        "--log",
        SAMPLE,
        "--html",
        html_path.to_str().expect("utf-8 path"),
    ]);
    assert_eq!(out.status.code(), Some(1));

    // Negative control: the request detector must see the fetch of a page that makes one.
    let control = dir.join("control.html");
    std::fs::write(
        &control,
        "<!DOCTYPE html><html><body><img src=\"http://fetch-probe.invalid/x.png\"/></body></html>",
    )
    .expect("write control page");
    let control_run = render(&chromium, &dir, &control, "control");
    assert!(
        control_run
            .page_requests
            .iter()
            .any(|u| u.contains("fetch-probe.invalid")),
        "the net-log detector missed the control page's request: {:?}",
        control_run.page_requests
    );

    let run = render(&chromium, &dir, &html_path, "report");
    assert!(
        run.page_requests.is_empty(),
        "the report made requests: {:?}",
        run.page_requests
    );
    // The DOM Chromium built carries the charts with the run's numbers.
    assert!(run.dom.contains("<svg"), "no svg in the rendered DOM");
    assert!(run.dom.contains("this run (IPv4): 7.341 Pb·m/s"));
    assert!(run
        .dom
        .contains("Throughput per stream and in total (mean 734.7 Mbit/s)"));

    // The screenshot shows the page: mostly white, with the charts' colours drawn.
    let (w, h, pixels) = decode_png(&run.screenshot);
    assert_eq!((w, h), (1024, 4800));
    let non_white = pixels
        .chunks(4)
        .filter(|p| p[0] < 240 || p[1] < 240 || p[2] < 240)
        .count();
    let total = (w * h) as usize;
    assert!(
        non_white > total / 50,
        "screenshot nearly blank: {non_white} of {total}"
    );
    assert!(
        count_near(&pixels, [0xd6, 0x27, 0x28], 40) > 50,
        "no red run marker"
    );
    assert!(
        count_near(&pixels, [0x1f, 0x77, 0xb4], 40) > 200,
        "no blue series"
    );
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join("record-report-screenshot.png");
    let _ = std::fs::copy(&run.screenshot, &keep);
    eprintln!("report screenshot: {}", keep.display());
}

struct Rendered {
    dom: String,
    screenshot: PathBuf,
    page_requests: Vec<String>,
}

fn find_chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// Renders `page` twice (DOM dump with a net log, then a screenshot), each with a fresh
/// profile, and returns what the page fetched over the network.
fn render(chromium: &Path, dir: &Scratch, page: &Path, tag: &str) -> Rendered {
    let url = format!("file://{}", page.display());
    let netlog = dir.join(format!("{tag}-netlog.json"));
    let dom = run_chromium(
        chromium,
        dir,
        &[
            &format!("--log-net-log={}", netlog.display()),
            "--net-log-capture-mode=Default",
            "--dump-dom",
            &url,
        ],
        &format!("{tag}-dom"),
    );
    let screenshot = dir.join(format!("{tag}.png"));
    run_chromium(
        chromium,
        dir,
        &[
            "--hide-scrollbars",
            "--window-size=1024,4800",
            &format!("--screenshot={}", screenshot.display()),
            &url,
        ],
        &format!("{tag}-shot"),
    );
    Rendered {
        dom: String::from_utf8_lossy(&dom.stdout).into_owned(),
        screenshot,
        page_requests: page_requests(&netlog),
    }
}

fn run_chromium(chromium: &Path, dir: &Scratch, extra: &[&str], tag: &str) -> Output {
    let profile = dir.join(format!("{tag}-profile"));
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            &format!("--user-data-dir={}", profile.display()),
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    // Bound the wait: a hung browser must not hang the test suite.
    let deadline = Instant::now() + Duration::from_secs(120);
    let stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let mut stdout = stdout;
        let _ = std::io::Read::read_to_end(&mut stdout, &mut buf);
        buf
    });
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait chromium") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium ({tag}) did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = reader.join().expect("stdout reader");
    assert!(status.success(), "chromium ({tag}) failed: {status}");
    Output {
        status,
        stdout,
        stderr: Vec::new(),
    }
}

/// URLs the page itself asked the network stack for: requests whose isolation key is the
/// file:// page (the browser's own background requests have other keys).
fn page_requests(netlog: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(netlog).expect("chromium wrote its net log");
    // Chromium may leave the JSON unterminated when it exits quickly; close it if needed.
    let v: serde_json::Value = serde_json::from_str(&text)
        .or_else(|_| serde_json::from_str(&format!("{}]}}", text.trim_end().trim_end_matches(','))))
        .expect("net log is JSON");
    let start_job = v["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"].as_u64();
    v["events"]
        .as_array()
        .map(|events| {
            events
                .iter()
                .filter(|e| e["type"].as_u64() == start_job)
                .filter(|e| {
                    e["params"]["network_isolation_key"]
                        .as_str()
                        .is_some_and(|k| k.starts_with("file://"))
                })
                .filter_map(|e| e["params"]["url"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn assert_well_formed(xml: &str) {
    let body = xml.trim_start_matches("<!DOCTYPE html>");
    let mut reader = quick_xml::Reader::from_str(body);
    reader.config_mut().check_end_names = true;
    let mut depth = 0i64;
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Start(_)) => depth += 1,
            Ok(quick_xml::events::Event::End(_)) => depth -= 1,
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("not well-formed at {}: {e}", reader.buffer_position()),
        }
        assert!(depth >= 0);
    }
    assert_eq!(depth, 0, "unclosed elements");
}

fn assert_self_contained(html: &str) {
    let lower = html.to_ascii_lowercase();
    for forbidden in [
        "<script",
        "<link",
        "<img",
        "<iframe",
        "src=",
        "href=",
        "url(",
        "@import",
        "@font-face",
    ] {
        assert!(!lower.contains(forbidden), "report contains {forbidden:?}");
    }
    // The only URL is the SVG namespace name, which is never fetched.
    let urls = lower.matches("http://").count() + lower.matches("https://").count();
    let namespaces = lower
        .matches("xmlns=\"http://www.w3.org/2000/svg\"")
        .count();
    assert_eq!(
        urls, namespaces,
        "report has URLs besides the SVG namespace"
    );
}

fn decode_png(path: &Path) -> (u32, u32, Vec<u8>) {
    let file = std::fs::File::open(path).expect("png exists");
    let mut decoder = png::Decoder::new(std::io::BufReader::new(file));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::ALPHA);
    let mut reader = decoder.read_info().expect("png header");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("png frame");
    buf.truncate(info.buffer_size());
    let rgba = match info.color_type {
        png::ColorType::Rgba => buf,
        png::ColorType::GrayscaleAlpha => buf
            .chunks(2)
            .flat_map(|p| [p[0], p[0], p[0], p[1]])
            .collect(),
        other => panic!("unexpected PNG colour type {other:?}"),
    };
    (info.width, info.height, rgba)
}

fn count_near(rgba: &[u8], rgb: [u8; 3], tolerance: i32) -> usize {
    rgba.chunks(4)
        .filter(|p| (0..3).all(|i| (i32::from(p[i]) - i32::from(rgb[i])).abs() <= tolerance))
        .count()
}

#[test]
fn record_and_plot_read_a_real_bench_log() {
    // A real `longhaul bench --json` run on loopback, paced so it stays light.
    let dir = Scratch::in_target_dir("bench");
    let home = Scratch::new("record-bench-home");
    let server = Server::start_args(
        &[],
        &home.0,
        &["--listen", "127.0.0.1", "--port", "0", "--once"],
    );
    let bench = support::longhaul(&home.0)
        .args([
            "bench",
            &server.addr,
            "-P",
            "2",
            "-t",
            "2s",
            "--rate",
            "200M",
            "--json",
        ])
        .output()
        .expect("run bench");
    assert!(
        bench.status.success(),
        "{}",
        String::from_utf8_lossy(&bench.stderr)
    );
    let log_path = dir.join("run.jsonl");
    std::fs::write(&log_path, &bench.stdout).expect("write run log");
    let end: serde_json::Value = String::from_utf8_lossy(&bench.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "end")
        .expect("bench printed an end object");

    let log = log_path.to_str().expect("utf-8 path");
    let out = longhaul(&["record", "--route", "GVA,ORD", "--log", log, "--json"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a 2 s run fails the 10 minute rule"
    );
    let v = json_of(&out);
    assert_eq!(v["bytes"], end["summary"]["bytes"]);
    assert_eq!(v["bits_per_second"], end["summary"]["bits_per_second"]);
    assert_eq!(v["seconds"], end["summary"]["seconds"]);
    assert_eq!(v["streams"], 2);
    assert_eq!(v["ip"], "IPv4");

    let svg = dir.join("run.svg");
    let out = longhaul(&["plot", log, "-o", svg.to_str().expect("utf-8 path")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).expect("svg written");
    assert!(text.contains("stream 0") && text.contains("stream 1") && text.contains("total"));
    assert_well_formed(&text);
}
