//! Frame codec: `len: u32 BE | type: u8 | fields`, every field big-endian, strings and
//! lists length-prefixed and bounded. Decoding never allocates more than the frame holds.

use crate::auth::{MAC_LEN, MAX_TOKENS, NONCE_LEN};
use crate::error::{ErrorCode, ProtoError};
use crate::limits;
use crate::message::*;
use crate::namespace;
use crate::ticket;
use crate::wire::{invalid, Reader, Writer};

/// Bytes before each frame body: its length as a big-endian u32.
pub const FRAME_HEADER_LEN: usize = 4;

mod ty {
    pub const CLIENT_HELLO: u8 = 0x01;
    pub const SERVER_HELLO: u8 = 0x02;
    pub const CLIENT_PROOF: u8 = 0x03;
    pub const SERVER_PROOFS: u8 = 0x07;
    pub const WELCOME: u8 = 0x04;
    pub const PING: u8 = 0x05;
    pub const PONG: u8 = 0x06;
    pub const BENCH_PARAMS: u8 = 0x10;
    pub const BENCH_READY: u8 = 0x11;
    pub const DATA_HELLO: u8 = 0x20;
    pub const START: u8 = 0x21;
    pub const INTERVAL: u8 = 0x22;
    pub const RESULTS: u8 = 0x23;
    pub const HOST_REPORT_REQUEST: u8 = 0x30;
    pub const HOST_REPORT: u8 = 0x31;
    pub const JUMP_VERDICT: u8 = 0x24;
    pub const HELD_RATE: u8 = 0x25;
    // 0x40..=0x4f are taken by the file-transfer messages (crate::transfer).
    pub const TICKET_REQUEST: u8 = 0x50;
    pub const TICKET_ISSUED: u8 = 0x51;
    pub const TICKET_PROOF: u8 = 0x52;
    pub const RELAY_PULL: u8 = 0x53;
    pub const RELAY_PROGRESS: u8 = 0x54;
    pub const RELAY_DONE: u8 = 0x55;
    pub const FS_REQUEST: u8 = 0x60;
    pub const FS_STAT: u8 = 0x61;
    pub const FS_ENTRIES: u8 = 0x62;
    pub const FS_DONE: u8 = 0x63;
    pub const FS_CHECKSUM: u8 = 0x64;
    pub const FS_FAILED: u8 = 0x65;
    pub const ERROR: u8 = 0x7f;
}

/// Appends `msg` as one frame to `out`.
///
/// Strings longer than their limit are cut at a character boundary and lists longer than
/// [`limits::MAX_STREAMS`] are cut, so an encoded frame always decodes.
pub fn encode_frame(msg: &Message, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; FRAME_HEADER_LEN]);
    let mut w = Writer(out);
    match msg {
        Message::ClientHello {
            version,
            features,
            nonce,
        } => {
            w.u8(ty::CLIENT_HELLO);
            w.u16(*version);
            w.u64(*features);
            w.bytes(nonce);
        }
        Message::ServerHello {
            version,
            features,
            nonce,
            proof,
        } => {
            w.u8(ty::SERVER_HELLO);
            w.u16(*version);
            w.u64(*features);
            w.bytes(nonce);
            w.bytes(proof);
        }
        Message::ServerProofs { proofs } => {
            w.u8(ty::SERVER_PROOFS);
            let n = proofs.len().min(MAX_TOKENS - 1);
            w.u16(n as u16);
            for p in &proofs[..n] {
                w.bytes(p);
            }
        }
        Message::ClientProof { proof } => {
            w.u8(ty::CLIENT_PROOF);
            w.bytes(proof);
        }
        Message::Welcome { session_id } => {
            w.u8(ty::WELCOME);
            w.u64(*session_id);
        }
        Message::Ping { seq } => {
            w.u8(ty::PING);
            w.u32(*seq);
        }
        Message::Pong { seq } => {
            w.u8(ty::PONG);
            w.u32(*seq);
        }
        Message::BenchParams(p) => {
            w.u8(ty::BENCH_PARAMS);
            w.u16(p.streams);
            w.u64(p.duration_ms);
            w.u64(p.bytes);
            w.u8(match p.direction {
                Direction::ClientToServer => 0,
                Direction::ServerToClient => 1,
            });
            w.text(&p.congestion, limits::MAX_CONGESTION_NAME);
            w.u64(p.rate_bps);
            w.u64(p.window_bytes);
            w.u8(p.window_fixed as u8);
            w.u64(p.rx_rate_bps);
            w.u64(p.read_rate_bps);
            w.u32(p.rtt_us);
            w.u32(p.interval_ms);
            w.u8(match p.send_mode {
                SendMode::Write => 0,
                SendMode::Sendfile => 1,
                SendMode::MsgZerocopy => 2,
            });
            w.jump_ask(p.jump.as_ref());
        }
        Message::BenchReady(r) => {
            w.u8(ty::BENCH_READY);
            w.u64(r.facts.wmem_max);
            w.u64(r.facts.rmem_max);
            w.u64(r.facts.tcp_wmem_max);
            w.u64(r.facts.tcp_rmem_max);
            w.u8(r.facts.can_force_buffers as u8);
            w.text(&r.facts.default_congestion, limits::MAX_CONGESTION_NAME);
            w.u64(r.rcvbuf_bytes);
            w.u64(r.sndbuf_bytes);
            w.u64(r.rx_rate_bps);
            w.u64(r.jump_start_bps);
            w.text(&r.jump_note, limits::MAX_TEXT);
        }
        Message::DataHello {
            session_id,
            stream,
            mac,
        } => {
            w.u8(ty::DATA_HELLO);
            w.u64(*session_id);
            w.u16(*stream);
            w.bytes(mac);
        }
        Message::Start => w.u8(ty::START),
        Message::Interval(r) => {
            w.u8(ty::INTERVAL);
            w.u64(r.start_ms);
            w.u64(r.end_ms);
            let n = r.streams.len().min(limits::MAX_STREAMS as usize);
            w.u16(n as u16);
            for s in &r.streams[..n] {
                w.u16(s.stream);
                w.u64(s.bytes);
                w.u64(s.cwnd_bytes);
                w.u32(s.srtt_us);
                w.u32(s.retransmits);
                w.u64(s.delivery_rate_bps);
                w.u64(s.pacing_rate_bps);
                w.u64(s.busy_us);
                w.u64(s.rwnd_limited_us);
                w.u64(s.sndbuf_limited_us);
            }
        }
        Message::Results(r) => {
            w.u8(ty::RESULTS);
            w.u64(r.wall_us);
            w.u64(r.cpu_user_us);
            w.u64(r.cpu_system_us);
            let n = r.streams.len().min(limits::MAX_STREAMS as usize);
            w.u16(n as u16);
            for s in &r.streams[..n] {
                w.u16(s.stream);
                w.u64(s.bytes);
                w.u64(s.elapsed_us);
                w.u64(s.retransmits);
                w.u64(s.busy_us);
                w.u64(s.rwnd_limited_us);
                w.u64(s.sndbuf_limited_us);
                w.u32(s.min_rtt_us);
                w.u32(s.srtt_us);
                w.u64(s.cwnd_bytes);
                w.u64(s.cpu_us);
            }
        }
        Message::HostReportRequest { rate_bps, rtt_us } => {
            w.u8(ty::HOST_REPORT_REQUEST);
            w.u64(*rate_bps);
            w.u32(*rtt_us);
        }
        Message::HostReport { findings_json } => {
            w.u8(ty::HOST_REPORT);
            w.str(findings_json, limits::MAX_HOST_REPORT);
        }
        Message::JumpVerdict { outcome } => {
            w.u8(ty::JUMP_VERDICT);
            w.u8(outcome.to_wire());
        }
        Message::HeldRate { bps } => {
            w.u8(ty::HELD_RATE);
            w.u64(*bps);
        }
        Message::TicketRequest {
            path,
            lifetime_secs,
        } => {
            w.u8(ty::TICKET_REQUEST);
            ticket::put_path(&mut w, path);
            w.u32(*lifetime_secs);
        }
        Message::TicketIssued(grant) => {
            w.u8(ty::TICKET_ISSUED);
            ticket::put_grant(&mut w, grant);
        }
        Message::TicketProof { id, proof } => {
            w.u8(ty::TICKET_PROOF);
            w.bytes(id);
            w.bytes(proof);
        }
        Message::RelayPull(p) => {
            w.u8(ty::RELAY_PULL);
            ticket::put_relay(&mut w, p);
        }
        Message::RelayProgress(p) => {
            w.u8(ty::RELAY_PROGRESS);
            ticket::put_progress(&mut w, p);
        }
        Message::RelayDone(d) => {
            w.u8(ty::RELAY_DONE);
            ticket::put_done(&mut w, d);
        }
        Message::FsRequest { op, path } => {
            w.u8(ty::FS_REQUEST);
            namespace::put_op(&mut w, *op, path);
        }
        Message::FsStat(st) => {
            w.u8(ty::FS_STAT);
            namespace::put_stat(&mut w, st);
        }
        Message::FsEntries(entries) => {
            w.u8(ty::FS_ENTRIES);
            namespace::put_entries(&mut w, entries);
        }
        Message::FsDone => w.u8(ty::FS_DONE),
        Message::FsChecksum { kind, value } => {
            w.u8(ty::FS_CHECKSUM);
            namespace::put_checksum(&mut w, *kind, value);
        }
        Message::FsFailed { kind, message } => {
            w.u8(ty::FS_FAILED);
            namespace::put_failed(&mut w, *kind, message);
        }
        Message::Error { code, message } => {
            w.u8(ty::ERROR);
            w.u16(*code as u16);
            w.text(message, limits::MAX_TEXT);
        }
    }
    let body_len = (out.len() - start - FRAME_HEADER_LEN) as u32;
    out[start..start + FRAME_HEADER_LEN].copy_from_slice(&body_len.to_be_bytes());
}

/// Decodes the first frame in `buf`.
///
/// Returns `Ok(None)` when `buf` does not yet hold a whole frame, `Ok(Some((msg, used)))`
/// with the number of bytes consumed otherwise. A frame header announcing more than
/// [`limits::MAX_FRAME_BODY`] is an error as soon as the header is seen.
pub fn decode_frame(buf: &[u8]) -> Result<Option<(Message, usize)>, ProtoError> {
    let Some(header) = buf.get(..FRAME_HEADER_LEN) else {
        return Ok(None);
    };
    let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
    if len > limits::MAX_FRAME_BODY {
        return Err(ProtoError::FrameTooLarge {
            len,
            max: limits::MAX_FRAME_BODY,
        });
    }
    let Some(body) = buf.get(FRAME_HEADER_LEN..FRAME_HEADER_LEN + len) else {
        return Ok(None);
    };
    let msg = decode_body(body)?;
    Ok(Some((msg, FRAME_HEADER_LEN + len)))
}

fn decode_body(body: &[u8]) -> Result<Message, ProtoError> {
    let mut r = Reader(body);
    let kind = r.u8("message type")?;
    let msg = match kind {
        ty::CLIENT_HELLO => Message::ClientHello {
            version: r.u16("version")?,
            features: r.u64("features")?,
            nonce: r.array::<NONCE_LEN>("nonce")?,
        },
        ty::SERVER_HELLO => Message::ServerHello {
            version: r.u16("version")?,
            features: r.u64("features")?,
            nonce: r.array::<NONCE_LEN>("nonce")?,
            proof: r.array::<MAC_LEN>("proof")?,
        },
        ty::SERVER_PROOFS => {
            let n = r.count("proofs", MAX_TOKENS - 1)?;
            let mut proofs = Vec::with_capacity(n);
            for _ in 0..n {
                proofs.push(r.array::<MAC_LEN>("proof")?);
            }
            Message::ServerProofs { proofs }
        }
        ty::CLIENT_PROOF => Message::ClientProof {
            proof: r.array::<MAC_LEN>("proof")?,
        },
        ty::WELCOME => Message::Welcome {
            session_id: r.u64("session id")?,
        },
        ty::PING => Message::Ping { seq: r.u32("seq")? },
        ty::PONG => Message::Pong { seq: r.u32("seq")? },
        ty::BENCH_PARAMS => Message::BenchParams(BenchParams {
            streams: r.u16("streams")?,
            duration_ms: r.u64("duration")?,
            bytes: r.u64("bytes")?,
            direction: match r.u8("direction")? {
                0 => Direction::ClientToServer,
                1 => Direction::ServerToClient,
                v => return Err(invalid("direction", format!("unknown value {v}"))),
            },
            congestion: r.text("congestion", limits::MAX_CONGESTION_NAME)?,
            rate_bps: r.u64("rate")?,
            window_bytes: r.u64("window")?,
            window_fixed: r.bool("window fixed")?,
            rx_rate_bps: r.u64("rx rate")?,
            read_rate_bps: r.u64("read rate")?,
            rtt_us: r.u32("rtt")?,
            interval_ms: r.u32("interval")?,
            send_mode: match r.u8("send mode")? {
                0 => SendMode::Write,
                1 => SendMode::Sendfile,
                2 => SendMode::MsgZerocopy,
                v => return Err(invalid("send mode", format!("unknown value {v}"))),
            },
            jump: r.jump_ask()?,
        }),
        ty::BENCH_READY => Message::BenchReady(BenchReady {
            facts: HostFacts {
                wmem_max: r.u64("wmem_max")?,
                rmem_max: r.u64("rmem_max")?,
                tcp_wmem_max: r.u64("tcp_wmem")?,
                tcp_rmem_max: r.u64("tcp_rmem")?,
                can_force_buffers: r.bool("can_force")?,
                default_congestion: r.text("congestion", limits::MAX_CONGESTION_NAME)?,
            },
            rcvbuf_bytes: r.u64("rcvbuf")?,
            sndbuf_bytes: r.u64("sndbuf")?,
            rx_rate_bps: r.u64("rx rate")?,
            jump_start_bps: r.u64("jump start rate")?,
            jump_note: r.text("jump note", limits::MAX_TEXT)?,
        }),
        ty::DATA_HELLO => Message::DataHello {
            session_id: r.u64("session id")?,
            stream: r.u16("stream")?,
            mac: r.array::<MAC_LEN>("mac")?,
        },
        ty::START => Message::Start,
        ty::INTERVAL => {
            let start_ms = r.u64("start")?;
            let end_ms = r.u64("end")?;
            let n = r.count("streams", limits::MAX_STREAMS as usize)?;
            let mut streams = Vec::with_capacity(n);
            for _ in 0..n {
                streams.push(StreamSample {
                    stream: r.u16("stream")?,
                    bytes: r.u64("bytes")?,
                    cwnd_bytes: r.u64("cwnd")?,
                    srtt_us: r.u32("srtt")?,
                    retransmits: r.u32("retransmits")?,
                    delivery_rate_bps: r.u64("delivery rate")?,
                    pacing_rate_bps: r.u64("pacing rate")?,
                    busy_us: r.u64("busy")?,
                    rwnd_limited_us: r.u64("rwnd limited")?,
                    sndbuf_limited_us: r.u64("sndbuf limited")?,
                });
            }
            Message::Interval(IntervalReport {
                start_ms,
                end_ms,
                streams,
            })
        }
        ty::RESULTS => {
            let wall_us = r.u64("wall")?;
            let cpu_user_us = r.u64("cpu user")?;
            let cpu_system_us = r.u64("cpu system")?;
            let n = r.count("streams", limits::MAX_STREAMS as usize)?;
            let mut streams = Vec::with_capacity(n);
            for _ in 0..n {
                streams.push(StreamResult {
                    stream: r.u16("stream")?,
                    bytes: r.u64("bytes")?,
                    elapsed_us: r.u64("elapsed")?,
                    retransmits: r.u64("retransmits")?,
                    busy_us: r.u64("busy")?,
                    rwnd_limited_us: r.u64("rwnd limited")?,
                    sndbuf_limited_us: r.u64("sndbuf limited")?,
                    min_rtt_us: r.u32("min rtt")?,
                    srtt_us: r.u32("srtt")?,
                    cwnd_bytes: r.u64("cwnd")?,
                    cpu_us: r.u64("cpu")?,
                });
            }
            Message::Results(Results {
                wall_us,
                cpu_user_us,
                cpu_system_us,
                streams,
            })
        }
        ty::HOST_REPORT_REQUEST => Message::HostReportRequest {
            rate_bps: r.u64("rate")?,
            rtt_us: r.u32("rtt")?,
        },
        ty::HOST_REPORT => Message::HostReport {
            findings_json: r.str("host report", limits::MAX_HOST_REPORT)?,
        },
        ty::JUMP_VERDICT => {
            let b = r.u8("jump outcome")?;
            Message::JumpVerdict {
                outcome: JumpOutcome::from_wire(b).ok_or_else(|| ProtoError::InvalidField {
                    field: "jump outcome",
                    why: format!("{b} is not one of 0..=3"),
                })?,
            }
        }
        ty::HELD_RATE => Message::HeldRate {
            bps: r.u64("held rate")?,
        },
        ty::TICKET_REQUEST => {
            let path = ticket::get_path(&mut r, "ticket path")?;
            let lifetime_secs = r.u32("ticket lifetime")?;
            ticket::validate_lifetime(lifetime_secs)?;
            Message::TicketRequest {
                path,
                lifetime_secs,
            }
        }
        ty::TICKET_ISSUED => Message::TicketIssued(ticket::get_grant(&mut r)?),
        ty::TICKET_PROOF => Message::TicketProof {
            id: r.array("ticket id")?,
            proof: r.array::<MAC_LEN>("ticket proof")?,
        },
        ty::RELAY_PULL => Message::RelayPull(Box::new(ticket::get_relay(&mut r)?)),
        ty::RELAY_PROGRESS => Message::RelayProgress(ticket::get_progress(&mut r)?),
        ty::RELAY_DONE => Message::RelayDone(ticket::get_done(&mut r)?),
        ty::FS_REQUEST => {
            let (op, path) = namespace::get_op(&mut r)?;
            Message::FsRequest { op, path }
        }
        ty::FS_STAT => Message::FsStat(namespace::get_stat(&mut r)?),
        ty::FS_ENTRIES => Message::FsEntries(namespace::get_entries(&mut r)?),
        ty::FS_DONE => Message::FsDone,
        ty::FS_CHECKSUM => {
            let (kind, value) = namespace::get_checksum(&mut r)?;
            Message::FsChecksum { kind, value }
        }
        ty::FS_FAILED => {
            let (kind, message) = namespace::get_failed(&mut r)?;
            Message::FsFailed { kind, message }
        }
        ty::ERROR => Message::Error {
            code: ErrorCode::from_wire(r.u16("error code")?),
            message: r.text("error message", limits::MAX_TEXT)?,
        },
        other => return Err(ProtoError::UnknownType(other)),
    };
    if !r.0.is_empty() {
        return Err(ProtoError::TrailingBytes {
            kind: msg.kind(),
            extra: r.0.len(),
        });
    }
    Ok(msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(m: &Message) -> Message {
        let mut buf = Vec::new();
        encode_frame(m, &mut buf);
        let (back, used) = decode_frame(&buf).unwrap().unwrap();
        assert_eq!(used, buf.len());
        back
    }

    #[test]
    fn partial_frames_need_more() {
        let mut buf = Vec::new();
        encode_frame(&Message::Ping { seq: 9 }, &mut buf);
        for cut in 0..buf.len() {
            assert_eq!(decode_frame(&buf[..cut]).unwrap(), None, "cut at {cut}");
        }
        assert_eq!(
            round_trip(&Message::Ping { seq: 9 }),
            Message::Ping { seq: 9 }
        );
    }

    #[test]
    fn oversized_header_is_refused_before_the_body_arrives() {
        let header = ((limits::MAX_FRAME_BODY + 1) as u32).to_be_bytes();
        assert!(matches!(
            decode_frame(&header),
            Err(ProtoError::FrameTooLarge { .. })
        ));
    }

    #[test]
    fn trailing_bytes_and_unknown_types_are_errors() {
        let frame = [0, 0, 0, 2, ty::START, 0];
        assert!(matches!(
            decode_frame(&frame),
            Err(ProtoError::TrailingBytes { .. })
        ));
        assert_eq!(
            decode_frame(&[0, 0, 0, 1, 0x6e]),
            Err(ProtoError::UnknownType(0x6e))
        );
        assert!(matches!(
            decode_frame(&[0, 0, 0, 0]),
            Err(ProtoError::Truncated { .. })
        ));
    }

    #[test]
    fn long_strings_are_cut_on_char_boundaries() {
        let message = "é".repeat(limits::MAX_TEXT);
        let back = round_trip(&Message::Error {
            code: ErrorCode::Params,
            message,
        });
        let Message::Error { message, .. } = back else {
            panic!("wrong kind")
        };
        assert!(message.len() <= limits::MAX_TEXT);
        assert!(message.chars().all(|c| c == 'é'));
    }

    #[test]
    fn host_reports_longer_than_the_bound_are_refused_on_decode() {
        let n = limits::MAX_HOST_REPORT + 1;
        let mut body = vec![ty::HOST_REPORT];
        body.extend_from_slice(&(n as u16).to_be_bytes());
        body.extend(vec![b'x'; n]);
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        assert!(matches!(
            decode_frame(&frame),
            Err(ProtoError::InvalidField {
                field: "host report",
                ..
            })
        ));
    }

    #[test]
    fn host_reports_are_cut_on_encode_to_fit_the_bound() {
        let long = "€".repeat(limits::MAX_HOST_REPORT);
        let Message::HostReport { findings_json } = round_trip(&Message::HostReport {
            findings_json: long,
        }) else {
            panic!("wrong kind")
        };
        assert!(findings_json.len() <= limits::MAX_HOST_REPORT);
        assert!(findings_json.len() > limits::MAX_HOST_REPORT - 3);
        assert!(findings_json.chars().all(|c| c == '€'));
    }

    #[test]
    fn held_rates_round_trip_and_a_short_one_is_refused() {
        for bps in [0, 1, 950_000_000, u64::MAX] {
            let m = Message::HeldRate { bps };
            assert_eq!(round_trip(&m), m);
        }
        let frame = [0, 0, 0, 4, ty::HELD_RATE, 0, 0, 1];
        assert!(decode_frame(&frame).is_err());
    }

    #[test]
    fn jump_verdicts_round_trip_and_unknown_outcomes_are_refused() {
        for b in 0..=3 {
            let outcome = JumpOutcome::from_wire(b).unwrap();
            assert_eq!(outcome.to_wire(), b);
            assert_eq!(
                round_trip(&Message::JumpVerdict { outcome }),
                Message::JumpVerdict { outcome }
            );
        }
        let frame = [0, 0, 0, 2, ty::JUMP_VERDICT, 4];
        assert!(matches!(
            decode_frame(&frame),
            Err(ProtoError::InvalidField {
                field: "jump outcome",
                ..
            })
        ));
    }

    #[test]
    fn stream_counts_beyond_the_limit_are_refused() {
        let mut body = vec![ty::INTERVAL];
        body.extend_from_slice(&[0; 16]);
        body.extend_from_slice(&(limits::MAX_STREAMS + 1).to_be_bytes());
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        assert!(matches!(
            decode_frame(&frame),
            Err(ProtoError::InvalidField { .. })
        ));
    }
}
