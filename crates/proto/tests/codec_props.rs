//! Property tests of the frame codec: every message round-trips, arbitrary bytes never
//! panic, and a decoded frame never claims more bytes than it was given.

use longhaul_proto::namespace::*;
use longhaul_proto::ticket::{RelayDone, RelayProgress};
use longhaul_proto::*;
use proptest::prelude::*;

fn arb_sample() -> impl Strategy<Value = StreamSample> {
    (
        any::<u16>(),
        any::<u64>(),
        any::<u64>(),
        any::<u32>(),
        any::<u32>(),
        any::<[u64; 5]>(),
    )
        .prop_map(
            |(stream, bytes, cwnd_bytes, srtt_us, retransmits, r)| StreamSample {
                stream,
                bytes,
                cwnd_bytes,
                srtt_us,
                retransmits,
                delivery_rate_bps: r[0],
                pacing_rate_bps: r[1],
                busy_us: r[2],
                rwnd_limited_us: r[3],
                sndbuf_limited_us: r[4],
            },
        )
}

fn arb_result() -> impl Strategy<Value = StreamResult> {
    (any::<u16>(), any::<[u64; 8]>(), any::<u32>(), any::<u32>()).prop_map(|(stream, v, a, b)| {
        StreamResult {
            stream,
            bytes: v[0],
            elapsed_us: v[1],
            retransmits: v[2],
            busy_us: v[3],
            rwnd_limited_us: v[4],
            sndbuf_limited_us: v[5],
            min_rtt_us: a,
            srtt_us: b,
            cwnd_bytes: v[6],
            cpu_us: v[7],
        }
    })
}

fn arb_message() -> impl Strategy<Value = Message> {
    let name = "[a-z0-9_]{0,16}";
    prop_oneof![
        (any::<u16>(), any::<u64>(), any::<[u8; 32]>()).prop_map(|(version, features, nonce)| {
            Message::ClientHello {
                version,
                features,
                nonce,
            }
        }),
        (
            any::<u16>(),
            any::<u64>(),
            any::<[u8; 32]>(),
            any::<[u8; 32]>()
        )
            .prop_map(|(version, features, nonce, proof)| Message::ServerHello {
                version,
                features,
                nonce,
                proof
            }),
        proptest::collection::vec(any::<[u8; 32]>(), 0..64)
            .prop_map(|proofs| Message::ServerProofs { proofs }),
        any::<[u8; 32]>().prop_map(|proof| Message::ClientProof { proof }),
        any::<u64>().prop_map(|session_id| Message::Welcome { session_id }),
        any::<u32>().prop_map(|seq| Message::Ping { seq }),
        any::<u32>().prop_map(|seq| Message::Pong { seq }),
        (
            any::<u16>(),
            any::<[u64; 5]>(),
            (any::<bool>(), any::<bool>()),
            name,
            any::<u32>(),
            any::<u32>(),
            0u8..3
        )
            .prop_map(
                |(streams, v, (rev, window_fixed), congestion, rtt_us, interval_ms, mode)| {
                    Message::BenchParams(BenchParams {
                        streams,
                        duration_ms: v[0],
                        bytes: v[1],
                        direction: if rev {
                            Direction::ServerToClient
                        } else {
                            Direction::ClientToServer
                        },
                        congestion,
                        rate_bps: v[2],
                        window_bytes: v[3],
                        window_fixed,
                        rx_rate_bps: v[4],
                        read_rate_bps: v[0] ^ v[4],
                        rtt_us,
                        interval_ms,
                        send_mode: [SendMode::Write, SendMode::Sendfile, SendMode::MsgZerocopy]
                            [mode as usize],
                        jump: (v[1] % 2 == 1).then_some(longhaul_proto::JumpAsk {
                            start_bps: v[2],
                            remembered_bps: v[3],
                            init_cwnd: v[4] as u32,
                            init_rwnd: v[0] as u32,
                        }),
                    })
                }
            ),
        (any::<[u64; 7]>(), any::<bool>(), name).prop_map(|(v, force, cc)| {
            Message::BenchReady(BenchReady {
                facts: HostFacts {
                    wmem_max: v[0],
                    rmem_max: v[1],
                    tcp_wmem_max: v[2],
                    tcp_rmem_max: v[3],
                    can_force_buffers: force,
                    default_congestion: cc,
                },
                rcvbuf_bytes: v[4],
                sndbuf_bytes: v[5],
                rx_rate_bps: v[6],
                jump_start_bps: v[0] ^ v[6],
                jump_note: if force {
                    "no route".into()
                } else {
                    String::new()
                },
            })
        }),
        (any::<u64>(), any::<u16>(), any::<[u8; 32]>()).prop_map(|(session_id, stream, mac)| {
            Message::DataHello {
                session_id,
                stream,
                mac,
            }
        }),
        Just(Message::Start),
        (
            any::<u64>(),
            any::<u64>(),
            prop::collection::vec(arb_sample(), 0..20)
        )
            .prop_map(
                |(start_ms, end_ms, streams)| Message::Interval(IntervalReport {
                    start_ms,
                    end_ms,
                    streams
                })
            ),
        (
            any::<[u64; 3]>(),
            prop::collection::vec(arb_result(), 0..20)
        )
            .prop_map(|(v, streams)| {
                Message::Results(Results {
                    wall_us: v[0],
                    cpu_user_us: v[1],
                    cpu_system_us: v[2],
                    streams,
                })
            }),
        (any::<u64>(), any::<u32>())
            .prop_map(|(rate_bps, rtt_us)| Message::HostReportRequest { rate_bps, rtt_us }),
        "\\PC{0,300}".prop_map(|findings_json| Message::HostReport { findings_json }),
        (0u8..4).prop_map(|b| Message::JumpVerdict {
            outcome: JumpOutcome::from_wire(b).unwrap()
        }),
        any::<u64>().prop_map(|bps| Message::HeldRate { bps }),
        ("\\PC{0,200}", 1u16..8).prop_map(|(message, code)| Message::Error {
            code: ErrorCode::from_wire(code),
            message
        }),
        prop_oneof![
            (arb_path(), 1u32..=3600).prop_map(|(path, lifetime_secs)| Message::TicketRequest {
                path,
                lifetime_secs
            }),
            arb_grant().prop_map(Message::TicketIssued),
            (any::<[u8; 16]>(), any::<[u8; 32]>())
                .prop_map(|(id, proof)| Message::TicketProof { id, proof }),
            prop::collection::vec(any::<u64>(), 5).prop_map(|v| Message::RelayProgress(
                RelayProgress {
                    elapsed_ms: v[0],
                    files_total: v[1] as u32,
                    files_done: v[2] as u32,
                    bytes_total: v[3],
                    bytes_done: v[4],
                    moved_bytes: v[0] ^ v[4],
                    streams: v[1] as u16,
                }
            )),
            (
                prop::collection::vec(any::<u64>(), 4),
                prop::collection::vec("\\PC{0,40}", 0..=32),
                "\\PC{0,100}"
            )
                .prop_map(|(v, failures, limited_by)| Message::RelayDone(RelayDone {
                    elapsed_ms: v[0],
                    files_ok: v[1] as u32,
                    files_skipped: (v[1] >> 32) as u32,
                    files_failed: v[2] as u32,
                    bytes: v[3],
                    moved_bytes: v[2],
                    resumed_bytes: v[1],
                    streams: v[0] as u16,
                    rtt_us: (v[3] >> 7) as u32,
                    failures,
                    limited_by,
                })),
            (arb_op(), arb_path()).prop_map(|(op, path)| Message::FsRequest { op, path }),
            arb_stat().prop_map(Message::FsStat),
            prop::collection::vec(
                ("[a-z0-9_]{1,40}", arb_stat()).prop_map(|(name, stat)| FsEntry {
                    name: name.into_bytes(),
                    stat
                }),
                0..=MAX_FS_ENTRIES_PER_FRAME
            )
            .prop_map(Message::FsEntries),
            Just(Message::FsDone),
            prop_oneof![
                any::<[u8; 32]>().prop_map(|v| Message::FsChecksum {
                    kind: ChecksumKind::Blake3,
                    value: v.to_vec()
                }),
                any::<[u8; 4]>().prop_map(|v| Message::FsChecksum {
                    kind: ChecksumKind::Adler32,
                    value: v.to_vec()
                }),
            ],
            (0usize..7, "\\PC{0,100}").prop_map(|(k, message)| Message::FsFailed {
                kind: [
                    FsErrorKind::NotFound,
                    FsErrorKind::Exists,
                    FsErrorKind::NotEmpty,
                    FsErrorKind::NotADirectory,
                    FsErrorKind::IsADirectory,
                    FsErrorKind::Denied,
                    FsErrorKind::Other
                ][k],
                message
            }),
        ],
    ]
}

/// A request's path: 1..64 bytes, no NUL.
fn arb_path() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(1u8..=255, 1..64)
}

fn arb_grant() -> impl Strategy<Value = TicketGrant> {
    (any::<[u8; 16]>(), any::<[u8; 32]>(), 1u32..=3600).prop_map(|(id, secret, lifetime_secs)| {
        TicketGrant {
            id,
            secret,
            lifetime_secs,
        }
    })
}

fn arb_op() -> impl Strategy<Value = FsOp> {
    prop_oneof![
        Just(FsOp::Stat),
        Just(FsOp::List),
        (0u32..=0o7777, any::<bool>()).prop_map(|(mode, parents)| FsOp::Mkdir { mode, parents }),
        Just(FsOp::Unlink),
        Just(FsOp::Rmdir),
        Just(FsOp::Checksum(ChecksumKind::Blake3)),
        Just(FsOp::Checksum(ChecksumKind::Adler32)),
    ]
}

fn arb_stat() -> impl Strategy<Value = FsStat> {
    (
        0usize..4,
        any::<u64>(),
        0u32..=0o7777,
        any::<i64>(),
        0u32..1_000_000_000,
    )
        .prop_map(|(k, size, mode, mtime_secs, mtime_nanos)| FsStat {
            kind: [FsKind::File, FsKind::Dir, FsKind::Symlink, FsKind::Other][k],
            size,
            mode,
            mtime_secs,
            mtime_nanos,
        })
}

proptest! {
    #[test]
    fn every_message_round_trips(m in arb_message()) {
        let mut buf = Vec::new();
        encode_frame(&m, &mut buf);
        let (back, used) = decode_frame(&buf).unwrap().unwrap();
        prop_assert_eq!(used, buf.len());
        prop_assert_eq!(back, m);
    }

    #[test]
    fn two_frames_back_to_back_decode_in_order(a in arb_message(), b in arb_message()) {
        let mut buf = Vec::new();
        encode_frame(&a, &mut buf);
        encode_frame(&b, &mut buf);
        let (first, used) = decode_frame(&buf).unwrap().unwrap();
        let (second, used2) = decode_frame(&buf[used..]).unwrap().unwrap();
        prop_assert_eq!(first, a);
        prop_assert_eq!(second, b);
        prop_assert_eq!(used + used2, buf.len());
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(Some((_, used))) = decode_frame(&bytes) {
            prop_assert!(used <= bytes.len());
        }
    }

    #[test]
    fn mutated_frames_never_panic(m in arb_message(), flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
        let mut buf = Vec::new();
        encode_frame(&m, &mut buf);
        for (pos, val) in flips {
            let i = pos % buf.len();
            buf[i] ^= val;
        }
        if let Ok(Some((_, used))) = decode_frame(&buf) {
            prop_assert!(used <= buf.len());
        }
    }

    #[test]
    fn host_reports_of_any_length_decode_within_the_bound(len in 0usize..70_000, ch in prop::sample::select(vec!['a', 'é', '€', '𝄞'])) {
        let findings_json = ch.to_string().repeat(len / ch.len_utf8());
        let mut buf = Vec::new();
        encode_frame(&Message::HostReport { findings_json: findings_json.clone() }, &mut buf);
        prop_assert!(buf.len() <= FRAME_HEADER_LEN + limits::MAX_FRAME_BODY);
        let (back, used) = decode_frame(&buf).unwrap().unwrap();
        prop_assert_eq!(used, buf.len());
        let Message::HostReport { findings_json: back } = back else {
            return Err(TestCaseError::fail("wrong kind"));
        };
        prop_assert!(back.len() <= limits::MAX_HOST_REPORT);
        prop_assert!(findings_json.starts_with(&back));
        if findings_json.len() <= limits::MAX_HOST_REPORT {
            prop_assert_eq!(back, findings_json);
        }
    }

    #[test]
    fn sessions_survive_arbitrary_messages(msgs in prop::collection::vec(arb_message(), 0..12)) {
        let t = Token::new(b"8c7f6a4c6401a604ce637ee4d604a230").unwrap();
        let binding = ChannelBinding { cert: [3; 32], exporter: [4; 32] };
        let mut s = ServerSession::new(t.clone().into(), [1; 32], binding);
        let mut c = ClientSession::new(t, [2; 32], binding);
        for m in msgs {
            let _ = s.handle(m.clone());
            let _ = c.handle(m);
            while s.poll_transmit().is_some() {}
            while c.poll_transmit().is_some() {}
        }
    }
}
