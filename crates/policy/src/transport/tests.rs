//! Unit and property tests of the transport plan.

use super::*;
use proptest::prelude::*;

fn kernel() -> Congestion {
    Congestion {
        available: vec!["reno".into(), "cubic".into(), "bbr".into()],
        default: "cubic".into(),
    }
}

/// Stock Linux caps, as an ordinary user (no override).
fn stock() -> BufferCaps {
    BufferCaps {
        wmem_max: 212_992,
        rmem_max: 212_992,
        tcp_wmem_max: 4 << 20,
        tcp_rmem_max: 6 << 20,
        can_force: false,
    }
}

fn request(role: Role, rate_bps: Option<u64>, window: Window) -> TransportRequest {
    TransportRequest {
        role,
        streams: 4,
        rate_bps,
        window,
        congestion: None,
    }
}

const MS: fn(u64) -> Duration = Duration::from_millis;

#[test]
fn auto_window_without_rate_probes_on_a_long_path_only() {
    let req = request(Role::Sender, None, Window::Auto);
    let long = plan_transport(&req, MS(180), &stock(), &kernel(), None).unwrap();
    assert!(long.probe.is_some());
    assert_eq!(long.congestion.as_deref(), Some("bbr"));
    assert_eq!(long.pacing_bps, None);
    assert!(!long.window_fixed);
    // Sized for the probe's ceiling: 2 x 10 Gbit/s x 180 ms / 4 streams, capped at 1 GiB.
    assert_eq!(
        long.window_bytes,
        needed_buffer(PROBE_CEILING_BPS, MS(180), 4)
    );
    let lan = plan_transport(&req, Duration::from_micros(900), &stock(), &kernel(), None).unwrap();
    assert!(lan.probe.is_none(), "below 1 ms nothing is probed");
}

#[test]
fn a_receiver_neither_probes_nor_paces_nor_sets_congestion() {
    let req = TransportRequest {
        congestion: Some("vegas".into()), // the sender's business, not checked here
        ..request(Role::Receiver, Some(1_000_000_000), Window::Auto)
    };
    let p = plan_transport(&req, MS(180), &stock(), &kernel(), None).unwrap();
    assert_eq!(p.side, Side::Receive);
    assert_eq!(p.congestion, None);
    assert!(p.probe.is_none());
    assert_eq!(p.pacing_bps, None);
}

#[test]
fn pacing_is_the_rate_shared_by_the_streams() {
    let p = plan_transport(
        &request(Role::Sender, Some(1_000_000_000), Window::Auto),
        MS(180),
        &stock(),
        &kernel(),
        None,
    )
    .unwrap();
    assert_eq!(p.pacing_bps, Some(250_000_000));
    assert!(p.probe.is_none());
    // 1 Gbit/s x 180 ms = 22.5 MB; 2 x BDP / 4 streams per stream.
    assert_eq!(p.window_bytes, 11_250_000);
}

#[test]
fn unknown_congestion_control_is_an_error_naming_the_available_ones() {
    let req = TransportRequest {
        congestion: Some("vegas".into()),
        ..request(Role::Sender, None, Window::Auto)
    };
    let e = plan_transport(&req, MS(180), &stock(), &kernel(), None).unwrap_err();
    assert_eq!(
        e,
        PolicyError::UnknownCongestion {
            name: "vegas".into(),
            available: kernel().available
        }
    );
    let text = e.to_string();
    assert!(
        text.contains("reno cubic bbr") && text.contains("modprobe tcp_vegas"),
        "{text}"
    );

    let req = TransportRequest {
        congestion: Some("reno".into()),
        ..req
    };
    let p = plan_transport(&req, MS(180), &stock(), &kernel(), None).unwrap();
    assert_eq!(p.congestion.as_deref(), Some("reno"));
}

#[test]
fn without_bbr_the_kernel_default_runs_and_loss_ends_the_probe() {
    let k = Congestion {
        available: vec!["reno".into(), "cubic".into()],
        default: "cubic".into(),
    };
    let p = plan_transport(
        &request(Role::Sender, None, Window::Auto),
        MS(100),
        &stock(),
        &k,
        None,
    )
    .unwrap();
    assert_eq!(p.congestion.as_deref(), Some("cubic"));
    assert!(p.probe.is_some());
}

#[test]
fn capped_buffers_warn_with_the_sysctl_at_both_ends() {
    let req = request(Role::Sender, Some(1_000_000_000), Window::Auto);
    let p = plan_transport(&req, MS(180), &stock(), &kernel(), Some(&stock())).unwrap();
    assert!(
        matches!(p.buffer, BufferChoice::Capped { .. }),
        "{:?}",
        p.buffer
    );
    assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings);
    assert_eq!(
        p.warnings[0],
        "this host caps the send buffer at 212992 bytes but the path needs 11250000 per stream; \
         run as root (longhaul then overrides the cap) or: \
         sudo sysctl -w net.core.wmem_max=11250000 net.ipv4.tcp_wmem=\"4096 131072 22500000\""
    );
    assert!(
        p.warnings[1].starts_with("the server caps its receive buffer at 212992 bytes")
            && p.warnings[1].contains("sudo sysctl -w net.core.rmem_max=11250000"),
        "{}",
        p.warnings[1]
    );
    // As root the caps are overridden: no warning.
    let root = BufferCaps {
        can_force: true,
        ..stock()
    };
    let p = plan_transport(&req, MS(180), &root, &kernel(), Some(&root)).unwrap();
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
}

#[test]
fn a_server_keeps_the_fixed_flag_of_the_request() {
    // The bug this guards against: a server that planned a fixed window as `auto`
    // autotuned and ran the probe. `Window::requested` carries the flag through.
    let caps = BufferCaps {
        tcp_wmem_max: 64 << 20,
        ..stock()
    };
    let auto = plan_transport(
        &request(Role::Sender, None, Window::requested(4 << 20, false)),
        MS(180),
        &caps,
        &kernel(),
        None,
    )
    .unwrap();
    assert_eq!(auto.buffer, BufferChoice::Autotune);
    assert!(auto.probe.is_some());
    assert_eq!(auto.window_bytes, 4 << 20);

    let fixed = plan_transport(
        &request(Role::Sender, None, Window::requested(4 << 20, true)),
        MS(180),
        &caps,
        &kernel(),
        None,
    )
    .unwrap();
    assert!(fixed.window_fixed);
    assert!(fixed.probe.is_none());
    assert_ne!(fixed.buffer, BufferChoice::Autotune);
}

fn caps() -> impl Strategy<Value = BufferCaps> {
    (
        0u64..(256 << 20),
        0u64..(256 << 20),
        0u64..(256 << 20),
        0u64..(256 << 20),
        any::<bool>(),
    )
        .prop_map(|(w, r, tw, tr, f)| BufferCaps {
            wmem_max: w,
            rmem_max: r,
            tcp_wmem_max: tw,
            tcp_rmem_max: tr,
            can_force: f,
        })
}

fn role() -> impl Strategy<Value = Role> {
    prop_oneof![Just(Role::Sender), Just(Role::Receiver)]
}

proptest! {
    #[test]
    fn a_fixed_window_never_probes_and_never_autotunes(
        role in role(),
        streams in 0u16..=256,
        rate in proptest::option::of(1u64..400_000_000_000),
        window in 1u64..(2u64 << 30),
        rtt_us in 0u64..2_000_000,
        local in caps(),
        peer in caps(),
    ) {
        let req = TransportRequest {
            role,
            streams,
            rate_bps: rate,
            window: Window::Fixed(window),
            congestion: None,
        };
        let rtt = Duration::from_micros(rtt_us);
        let p = plan_transport(&req, rtt, &local, &kernel(), Some(&peer)).unwrap();
        prop_assert!(p.window_fixed);
        prop_assert!(p.probe.is_none());
        prop_assert_ne!(&p.buffer, &BufferChoice::Autotune);
        prop_assert_eq!(p.window_bytes, window);
        // The same request as a server receives it.
        let served = TransportRequest { window: Window::requested(window, true), ..req };
        let s = plan_transport(&served, rtt, &local, &kernel(), None).unwrap();
        prop_assert!(s.probe.is_none());
        prop_assert_ne!(s.buffer, BufferChoice::Autotune);
    }

    #[test]
    fn a_rate_never_probes_and_paces_each_stream_at_its_share(
        role in role(),
        streams in 1u16..=256,
        rate in 1u64..400_000_000_000,
        auto in any::<bool>(),
        rtt_us in 0u64..2_000_000,
        local in caps(),
    ) {
        let req = TransportRequest {
            role,
            streams,
            rate_bps: Some(rate),
            window: if auto { Window::Auto } else { Window::Fixed(1 << 20) },
            congestion: None,
        };
        let p = plan_transport(&req, Duration::from_micros(rtt_us), &local, &kernel(), None)
            .unwrap();
        prop_assert!(p.probe.is_none());
        let want = (role == Role::Sender).then_some(rate / u64::from(streams));
        prop_assert_eq!(p.pacing_bps, want);
    }

    #[test]
    fn a_capped_buffer_always_comes_with_its_sysctl(
        role in role(),
        streams in 1u16..=256,
        rate in proptest::option::of(1u64..400_000_000_000),
        rtt_us in 0u64..2_000_000,
        local in caps(),
    ) {
        let req = TransportRequest { role, streams, rate_bps: rate, window: Window::Auto, congestion: None };
        let p = plan_transport(&req, Duration::from_micros(rtt_us), &local, &kernel(), None)
            .unwrap();
        match &p.buffer {
            BufferChoice::Capped { fix, .. } => {
                prop_assert_eq!(p.warnings.len(), 1);
                prop_assert!(p.warnings[0].contains(fix.as_str()));
                prop_assert!(fix.starts_with("sudo sysctl -w net.core."));
            }
            _ => prop_assert!(p.warnings.is_empty()),
        }
    }
}

#[test]
fn long_paths_get_more_streams_for_the_start_up() {
    let ms = Duration::from_millis;
    assert_eq!(streams_for_path(Duration::from_micros(50)), 2);
    assert_eq!(streams_for_path(ms(5)), 4);
    assert_eq!(streams_for_path(ms(50)), 4);
    assert_eq!(streams_for_path(ms(100)), 8);
    assert_eq!(streams_for_path(ms(150)), 16);
    assert_eq!(streams_for_path(ms(180)), 16);
    assert_eq!(streams_for_path(ms(436)), 32);
    assert_eq!(streams_for_path(ms(449)), 64);
    assert_eq!(streams_for_path(ms(5000)), 64);
}

#[test]
fn a_warmup_fills_the_free_window_on_a_long_path_only() {
    let ms = Duration::from_millis;
    // 10 segments of a 4470-byte MTU's MSS, one in flight (the data hello): 9 to fill.
    assert_eq!(warmup_bytes(ms(436), 10, 4418, 1), 9 * 4418 * 7 / 8 + 1);
    assert_eq!(
        warmup_bytes(ms(436), 10, 4418, 0),
        10 * 4418 - 10 * 4418 / 8
    );
    // A LAN gets its answer before a round of slow start would matter.
    assert_eq!(warmup_bytes(ms(1), 10, 1448, 0), 0);
    // Nothing to fill, or nothing known.
    assert_eq!(warmup_bytes(ms(100), 10, 1448, 12), 0);
    assert_eq!(warmup_bytes(ms(100), 10, 0, 0), 0);
}
