//! `longhaul plan`: the figures a path needs, computed by `longhaul-model`, each printed with
//! its formula in words; `--json` prints one object `{"type":"plan", ...}`.
//!
//! JSON fields (snake_case, unit in the name): the inputs `rate_bps`, `rtt_seconds`,
//! `mtu_bytes`, `mss_bytes`, `streams`; `bdp_bytes`, `bdp_per_stream_bytes`,
//! `socket_buffer_bytes` (per stream), `window_scale_ceiling_bytes`, `single_stream_can_cover`,
//! `streams_can_cover`, `streams_needed_for_window`, `single_stream_max_bps`,
//! `goodput_fraction`, `goodput_ceiling_bps`, `window_segments_per_stream`,
//! `reno_recovery_seconds` (delayed ACKs), `reno_recovery_no_delayed_ack_seconds`,
//! `reno_recovery_jumbo_seconds`, `reno_recovery_jumbo_no_delayed_ack_seconds`,
//! `max_loss_reno`, `max_loss_cubic`, `max_loss_hstcp`, `cubic_k_seconds`,
//! `router_buffer_bytes`, `router_buffer_for_streams_bytes`, `merge_buffer_bytes`,
//! `pacing_rate_per_stream_bps`, `parallel_reno_utilisation`, `target_reachable`,
//! `shortfalls` (sentences); with `--loss`: `loss`, `mathis_throughput_bps`; with `--size`:
//! `size_bytes`, `transfer_seconds`, `stock_rate_bps`, `stock_transfer_seconds`; with
//! `--distance`: `distance_m`, `bit_meters_per_second`.
//!
//! Exit code 0 when the planned streams can reach the target; 1 when they cannot (the
//! window ceiling is below the BDP share of a stream, or the Mathis bound at `--loss` is
//! below the target rate); 2 on a usage error.

use super::common::{emit_json, say_text};
use longhaul_model::plan::{PathPlan, PlanRequest};
use longhaul_model::units::{
    format_bit_meters_per_second, format_bytes, format_distance_m, format_probability,
    format_rate_bps, format_seconds, parse_bytes, parse_distance_m, parse_duration,
    parse_probability, parse_rate_bps,
};
use longhaul_model::{path, tcp_response, PathSpec};
use serde_json::json;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `longhaul plan`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Target rate in bit/s: 10G, 1Gbit, 500M, 1e9 (SI: 1G = 1e9 bit/s).
    #[arg(long, value_parser = parse_rate_bps)]
    pub rate: u64,
    /// Round-trip time: 180ms, 0.5s.
    #[arg(long, value_parser = parse_duration)]
    pub rtt: Duration,
    /// IP MTU in bytes (1500 standard, 9000 jumbo).
    #[arg(long, default_value_t = path::DEFAULT_MTU_BYTES)]
    pub mtu: u32,
    /// Packet loss probability of the path: 1e-6, 0.01%.
    #[arg(long, value_parser = parse_probability)]
    pub loss: Option<f64>,
    /// Number of parallel TCP streams.
    #[arg(long, default_value_t = 1)]
    pub streams: u32,
    /// Amount of data to move, for transfer times: 1PB, 64GiB.
    #[arg(long, value_parser = parse_bytes)]
    pub size: Option<u64>,
    /// Terrestrial distance of the path, for the Land Speed Record metric: 28983km, 100mi.
    #[arg(long, value_parser = parse_distance_m)]
    pub distance: Option<f64>,
    /// Print one JSON object (`"type":"plan"`) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `longhaul plan`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let request = PlanRequest {
        path: PathSpec {
            rate_bps: args.rate,
            rtt: args.rtt,
            mtu_bytes: args.mtu,
            loss: args.loss,
            streams: args.streams,
        },
        size_bytes: args.size,
        distance_m: args.distance,
    };
    let plan = PathPlan::compute(&request)?;
    let shortfalls = shortfalls(&plan);
    if args.json {
        emit_json(&to_json(&plan, &shortfalls));
    } else {
        say_text(&to_text(&plan, &shortfalls));
    }
    Ok(if shortfalls.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Reasons the planned streams cannot reach the target rate, as sentences.
fn shortfalls(plan: &PathPlan) -> Vec<String> {
    let mut out = Vec::new();
    let p = &plan.path;
    if !plan.streams_can_cover {
        out.push(format!(
            "{} stream(s) cannot cover the BDP: each would need a {} window, above the 2^30-byte \
             ceiling; use --streams {} or more",
            p.streams,
            format_bytes(plan.bdp_per_stream_bytes as f64),
            plan.streams_needed_for_window
        ));
    }
    if let (Some(bound), Some(loss)) = (plan.mathis_throughput_bps, p.loss) {
        if bound < p.rate_bps as f64 {
            out.push(format!(
                "at loss {} Reno-like TCP is bounded at {} (Mathis), below the target {}: \
                 use more streams, jumbo frames, or a loss-tolerant congestion control (BBR)",
                format_probability(loss),
                format_rate_bps(bound),
                format_rate_bps(p.rate_bps as f64)
            ));
        }
    }
    out
}

fn to_json(plan: &PathPlan, shortfalls: &[String]) -> serde_json::Value {
    let p = &plan.path;
    let mut v = json!({
        "type": "plan",
        "rate_bps": p.rate_bps,
        "rtt_seconds": p.rtt_secs(),
        "mtu_bytes": p.mtu_bytes,
        "mss_bytes": plan.mss_bytes,
        "streams": p.streams,
        "bdp_bytes": plan.bdp_bytes,
        "bdp_per_stream_bytes": plan.bdp_per_stream_bytes,
        "socket_buffer_bytes": plan.socket_buffer_bytes,
        "window_scale_ceiling_bytes": plan.window_scale_ceiling_bytes,
        "single_stream_can_cover": plan.single_stream_can_cover,
        "streams_can_cover": plan.streams_can_cover,
        "streams_needed_for_window": plan.streams_needed_for_window,
        "single_stream_max_bps": plan.single_stream_max_bps,
        "goodput_fraction": plan.goodput_fraction,
        "goodput_ceiling_bps": plan.goodput_ceiling_bps,
        "window_segments_per_stream": plan.window_segments_per_stream,
        "reno_recovery_seconds": plan.reno_recovery_seconds,
        "reno_recovery_no_delayed_ack_seconds": plan.reno_recovery_no_delayed_ack_seconds,
        "reno_recovery_jumbo_seconds": plan.reno_recovery_jumbo_seconds,
        "reno_recovery_jumbo_no_delayed_ack_seconds": plan.reno_recovery_jumbo_no_delayed_ack_seconds,
        "max_loss_reno": plan.max_loss_reno,
        "max_loss_cubic": plan.max_loss_cubic,
        "max_loss_hstcp": plan.max_loss_hstcp,
        "cubic_k_seconds": plan.cubic_k_seconds,
        "router_buffer_bytes": plan.router_buffer_bytes,
        "router_buffer_for_streams_bytes": plan.router_buffer_for_streams_bytes,
        "merge_buffer_bytes": plan.merge_buffer_bytes,
        "pacing_rate_per_stream_bps": plan.pacing_rate_per_stream_bps,
        "parallel_reno_utilisation": plan.parallel_reno_utilisation,
        "target_reachable": shortfalls.is_empty(),
        "shortfalls": shortfalls,
    });
    let obj = v
        .as_object_mut()
        .expect("json! of an object literal is an object");
    if let (Some(loss), Some(bound)) = (p.loss, plan.mathis_throughput_bps) {
        obj.insert("loss".into(), json!(loss));
        obj.insert("mathis_throughput_bps".into(), json!(bound));
    }
    if let Some(t) = plan.transfer {
        obj.insert("size_bytes".into(), json!(t.size_bytes));
        obj.insert("transfer_seconds".into(), json!(t.transfer_seconds));
        obj.insert("stock_rate_bps".into(), json!(t.stock_rate_bps));
        obj.insert(
            "stock_transfer_seconds".into(),
            json!(t.stock_transfer_seconds),
        );
    }
    if let Some(metric) = plan.bit_meters_per_second {
        obj.insert(
            "distance_m".into(),
            json!(metric / plan.goodput_ceiling_bps),
        );
        obj.insert("bit_meters_per_second".into(), json!(metric));
    }
    v
}

/// One line: figure name, value, formula in words.
fn row(out: &mut String, name: &str, value: String, formula: String) {
    out.push_str(&format!("  {name:<30} {value:>14}   {formula}\n"));
}

fn to_text(plan: &PathPlan, shortfalls: &[String]) -> String {
    let p = &plan.path;
    let rate = format_rate_bps(p.rate_bps as f64);
    let per_stream = p.streams > 1;
    let mut o = String::new();
    o.push_str(&format!(
        "Path: {rate}, RTT {}, MTU {} (MSS {}), {} stream{}\n",
        format_seconds(p.rtt_secs()),
        p.mtu_bytes,
        plan.mss_bytes,
        p.streams,
        if per_stream { "s" } else { "" }
    ));

    o.push_str("\nWindow and buffers\n");
    row(
        &mut o,
        "bandwidth-delay product",
        format_bytes(plan.bdp_bytes as f64),
        "rate x RTT / 8: the bytes in flight that fill the path".into(),
    );
    row(
        &mut o,
        "socket buffer per stream",
        format_bytes(plan.socket_buffer_bytes as f64),
        if per_stream {
            "2 x BDP / streams: Linux needs about twice the window (sk_buff overhead)".into()
        } else {
            "2 x BDP: Linux needs about twice the window (sk_buff overhead)".into()
        },
    );
    row(
        &mut o,
        "one stream covers the BDP",
        yes_no(plan.single_stream_can_cover).into(),
        format!(
            "BDP <= 2^30 bytes (window scale 14); one stream tops out at 2^30 x 8 / RTT = {}",
            format_rate_bps(plan.single_stream_max_bps)
        ),
    );
    if per_stream {
        row(
            &mut o,
            "each stream covers its share",
            yes_no(plan.streams_can_cover).into(),
            format!(
                "BDP / streams = {} <= 2^30 bytes",
                format_bytes(plan.bdp_per_stream_bytes as f64)
            ),
        );
    }
    row(
        &mut o,
        "goodput ceiling",
        format_rate_bps(plan.goodput_ceiling_bps),
        format!(
            "rate x (MTU - 52) / (MTU + 38) = {:.1} % (TCP/IPv4 + timestamps over Ethernet)",
            plan.goodput_fraction * 100.0
        ),
    );

    let window = plan.window_segments_per_stream;
    o.push_str(&format!(
        "\nAfter one loss (per stream: {} = {window:.0} segments of {} bytes)\n",
        format_rate_bps(p.rate_per_stream_bps()),
        plan.mss_bytes
    ));
    row(
        &mut o,
        "Reno, delayed ACKs",
        format_seconds(plan.reno_recovery_seconds),
        "C x RTT^2 / MSS: half the rate back at one MSS per 2 RTTs (one ACK per 2 segments)".into(),
    );
    row(
        &mut o,
        "Reno, an ACK per segment",
        format_seconds(plan.reno_recovery_no_delayed_ack_seconds),
        "C x RTT^2 / (2 x MSS), C in bytes/s: one MSS more per RTT".into(),
    );
    let jumbo_mss = path::mss_for_mtu(path::JUMBO_MTU_BYTES);
    row(
        &mut o,
        "Reno, jumbo, delayed ACKs",
        format_seconds(plan.reno_recovery_jumbo_seconds),
        format!("the same with MSS {jumbo_mss} (MTU 9000)"),
    );
    row(
        &mut o,
        "Reno, jumbo, ACK per segment",
        format_seconds(plan.reno_recovery_jumbo_no_delayed_ack_seconds),
        format!("the same with MSS {jumbo_mss}, one ACK per segment"),
    );
    row(
        &mut o,
        "CUBIC K",
        format_seconds(plan.cubic_k_seconds),
        format!(
            "cbrt(W_max x (1 - {}) / {}), W_max in segments: time back to W_max (RFC 9438)",
            tcp_response::CUBIC_BETA,
            tcp_response::CUBIC_C
        ),
    );

    o.push_str(&format!(
        "\nLoss the path tolerates at {}\n",
        format_rate_bps(p.rate_bps as f64)
    ));
    row(
        &mut o,
        "Reno (Mathis)",
        format_probability(plan.max_loss_reno),
        "(1.22 / W)^2, W = window in segments".into(),
    );
    row(
        &mut o,
        "CUBIC (RFC 9438)",
        format_probability(plan.max_loss_cubic),
        "(1.054 x RTT^0.75 / W)^(4/3), or Reno's if larger".into(),
    );
    row(
        &mut o,
        "HighSpeed TCP (RFC 3649)",
        format_probability(plan.max_loss_hstcp),
        "(0.12 / W)^(1 / 0.835)".into(),
    );
    if let (Some(loss), Some(bound)) = (p.loss, plan.mathis_throughput_bps) {
        row(
            &mut o,
            &format!("Reno bound at loss {}", format_probability(loss)),
            format_rate_bps(bound),
            "(MSS x 8 / RTT) x 1.22 / sqrt(p) x streams (Mathis et al.)".into(),
        );
    }

    o.push_str("\nRouter buffers on the path\n");
    row(
        &mut o,
        "rule of thumb",
        format_bytes(plan.router_buffer_bytes as f64),
        "one BDP".into(),
    );
    row(
        &mut o,
        &format!("{} desynchronised flow(s)", p.streams),
        format_bytes(plan.router_buffer_for_streams_bytes as f64),
        "BDP / sqrt(n)".into(),
    );
    row(
        &mut o,
        "where two streams merge",
        format_bytes(plan.merge_buffer_bytes as f64),
        "1/4 x rate x RTT / 8: less and the merge drops packets".into(),
    );

    o.push_str("\nStreams\n");
    row(
        &mut o,
        "pacing rate per stream",
        format_rate_bps(plan.pacing_rate_per_stream_bps as f64),
        "rate / streams (SO_MAX_PACING_RATE; spreads bursts that overflow switch buffers)".into(),
    );
    row(
        &mut o,
        &format!("utilisation of {} Reno flow(s)", p.streams),
        format!("{:.1} %", plan.parallel_reno_utilisation * 100.0),
        "1 - 1 / (1 + 3 x streams)".into(),
    );

    if let Some(t) = plan.transfer {
        o.push_str(&format!("\nMoving {}\n", format_bytes(t.size_bytes as f64)));
        row(
            &mut o,
            "at the goodput ceiling",
            format_seconds(t.transfer_seconds),
            "size x 8 / goodput ceiling".into(),
        );
        row(
            &mut o,
            "on a stock Linux host",
            format_seconds(t.stock_transfer_seconds),
            format!(
                "at most {}: 4 MiB send buffer (tcp_wmem max) x 8 / RTT x streams",
                format_rate_bps(t.stock_rate_bps)
            ),
        );
    }
    if let Some(metric) = plan.bit_meters_per_second {
        let distance = metric / plan.goodput_ceiling_bps;
        o.push_str("\nLand Speed Record metric\n");
        row(
            &mut o,
            "bit-meters per second",
            format_bit_meters_per_second(metric),
            format!(
                "goodput ceiling x terrestrial distance ({})",
                format_distance_m(distance)
            ),
        );
    }

    if shortfalls.is_empty() {
        o.push_str(&format!("\nThe planned streams can reach {rate}.\n"));
    } else {
        o.push_str("\nTarget not reachable as planned:\n");
        for s in shortfalls {
            o.push_str(&format!("  - {s}\n"));
        }
    }
    o
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_for(rate: &str, rtt: &str, extra: impl FnOnce(&mut PlanRequest)) -> PathPlan {
        let mut req = PlanRequest {
            path: PathSpec::new(parse_rate_bps(rate).unwrap(), parse_duration(rtt).unwrap()),
            size_bytes: None,
            distance_m: None,
        };
        extra(&mut req);
        PathPlan::compute(&req).unwrap()
    }

    #[test]
    fn json_has_the_issue_field_names() {
        let plan = plan_for("1G", "180ms", |r| {
            r.path.loss = Some(1e-6);
            r.size_bytes = Some(1_000_000_000_000);
            r.distance_m = Some(28_983_000.0);
        });
        let v = to_json(&plan, &shortfalls(&plan));
        assert_eq!(v["type"], "plan");
        for key in [
            "bdp_bytes",
            "socket_buffer_bytes",
            "goodput_ceiling_bps",
            "reno_recovery_seconds",
            "mathis_throughput_bps",
            "max_loss_reno",
            "router_buffer_bytes",
            "transfer_seconds",
            "bit_meters_per_second",
        ] {
            assert!(v.get(key).is_some(), "missing {key} in {v}");
        }
        assert_eq!(v["socket_buffer_bytes"], 45_000_000);
        assert!((v["distance_m"].as_f64().unwrap() - 28_983_000.0).abs() < 1e-3);
    }

    #[test]
    fn optional_fields_only_when_asked() {
        let plan = plan_for("1G", "180ms", |_| {});
        let v = to_json(&plan, &shortfalls(&plan));
        for key in [
            "mathis_throughput_bps",
            "transfer_seconds",
            "bit_meters_per_second",
        ] {
            assert!(v.get(key).is_none(), "{key} present in {v}");
        }
    }

    #[test]
    fn shortfalls_name_the_fix() {
        let plan = plan_for("100G", "180ms", |_| {});
        let s = shortfalls(&plan);
        assert_eq!(s.len(), 1);
        assert!(s[0].contains("--streams 3"), "{s:?}");
        let plan = plan_for("10G", "100ms", |r| r.path.loss = Some(1e-4));
        let s = shortfalls(&plan);
        assert!(s.iter().any(|m| m.contains("Mathis")), "{s:?}");
        assert!(shortfalls(&plan_for("1G", "180ms", |_| {})).is_empty());
    }

    #[test]
    fn text_shows_each_figure_with_its_formula() {
        let plan = plan_for("1G", "180ms", |r| r.size_bytes = Some(1_000_000_000_000));
        let text = to_text(&plan, &shortfalls(&plan));
        assert!(
            text.contains("22.5 MB") && text.contains("rate x RTT / 8"),
            "{text}"
        );
        assert!(
            text.contains("45.0 MB") && text.contains("2 x BDP"),
            "{text}"
        );
        assert!(text.contains("C x RTT^2 / (2 x MSS)"), "{text}");
        assert!(text.contains("1/4 x rate x RTT"), "{text}");
        assert!(text.contains("on a stock Linux host"), "{text}");
    }
}
