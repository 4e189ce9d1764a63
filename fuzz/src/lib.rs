//! The checks the fuzz targets share, so a target for a new decoder is a few lines: name
//! its decode and encode functions in a [`FrameCodec`] and hand the fuzzer's bytes to
//! [`check_frames`] (see `fuzz/README.md`).
//!
//! What a frame decoder must do with any bytes, however hostile:
//! - never panic, and never claim more bytes than it was given, nor zero;
//! - be self-delimiting: the frame alone decodes the same, and every cut of it short of
//!   the end is "need more" (`Ok(None)`), never an error or a different message;
//! - round-trip: what it accepts encodes, and that encoding decodes to the same message
//!   (and, for a canonical codec, is the very bytes that were decoded).

use std::fmt::Debug;

/// What a frame decoder returns: `Ok(None)` until a whole frame is there, else the message
/// and the bytes it used.
pub type Decoded<M> = Result<Option<(M, usize)>, longhaul_proto::ProtoError>;

/// A frame decoder and its encoder, as the targets check them.
pub struct FrameCodec<M> {
    /// Decodes the first frame of a buffer: `Ok(None)` until it is complete, else the
    /// message and the bytes it used.
    pub decode: fn(&[u8]) -> Decoded<M>,
    /// Encodes one message as a whole frame; every decoded message must encode.
    pub encode: fn(&M) -> Vec<u8>,
    /// Whether each message has exactly one encoding (then re-encoding a decoded frame
    /// gives back its bytes).
    pub canonical: bool,
}

/// Decodes `data` as a stream of frames, checking every frame decoded (see the module
/// docs); returns the messages, in order, up to the first error or incomplete frame.
pub fn check_frames<M: PartialEq + Debug>(codec: &FrameCodec<M>, data: &[u8]) -> Vec<M> {
    let mut out = Vec::new();
    let mut rest = data;
    while let Ok(Some((msg, used))) = (codec.decode)(rest) {
        assert!(
            used > 0 && used <= rest.len(),
            "used {used} of {} bytes",
            rest.len()
        );
        let frame = &rest[..used];
        check_one(codec, frame, &msg);
        rest = &rest[used..];
        out.push(msg);
    }
    out
}

fn check_one<M: PartialEq + Debug>(codec: &FrameCodec<M>, frame: &[u8], msg: &M) {
    // Self-delimiting: the frame alone is the same message; any shorter cut needs more.
    let alone = (codec.decode)(frame).expect("a frame that decoded in a stream decodes alone");
    assert_eq!(
        alone.as_ref().map(|(m, n)| (m, *n)),
        Some((msg, frame.len()))
    );
    let header = longhaul_proto::FRAME_HEADER_LEN.min(frame.len() - 1);
    for cut in [0, header, frame.len() / 2, frame.len() - 1] {
        match (codec.decode)(&frame[..cut]) {
            Ok(None) => {}
            other => panic!(
                "a cut at {cut} of a {}-byte frame gave {other:?}",
                frame.len()
            ),
        }
    }
    // Round trip: decode -> encode -> decode is the same message.
    let again = (codec.encode)(msg);
    let back = (codec.decode)(&again)
        .unwrap_or_else(|e| panic!("{msg:?} re-encoded does not decode: {e}"))
        .unwrap_or_else(|| panic!("{msg:?} re-encoded is incomplete"));
    assert_eq!(
        &back.0, msg,
        "decode -> encode -> decode changed the message"
    );
    assert_eq!(back.1, again.len(), "the re-encoded frame is used whole");
    if codec.canonical {
        assert_eq!(again, frame, "{msg:?} has two encodings");
    }
}

/// `decode_frame` / `encode_frame`: the bench and session messages. Not canonical: an
/// error code this build does not know decodes as `Internal`.
pub const BENCH_FRAMES: FrameCodec<longhaul_proto::Message> = FrameCodec {
    decode: longhaul_proto::decode_frame,
    encode: |m| {
        let mut out = Vec::new();
        longhaul_proto::encode_frame(m, &mut out);
        out
    },
    canonical: false,
};

/// `decode_transfer_frame` / `encode_transfer_frame`: the file-transfer messages.
pub const TRANSFER_FRAMES: FrameCodec<longhaul_proto::transfer::TransferMessage> = FrameCodec {
    decode: longhaul_proto::transfer::decode_transfer_frame,
    encode: |m| {
        let mut out = Vec::new();
        longhaul_proto::transfer::encode_transfer_frame(m, &mut out)
            .unwrap_or_else(|e| panic!("a decoded {m:?} does not encode: {e}"));
        out
    },
    canonical: true,
};

/// The next `N` bytes of the fuzzer's input (zeros once it runs out), for targets that
/// build a value field by field: a checksummed header is reached only that way.
pub fn take<const N: usize>(data: &mut &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    let n = N.min(data.len());
    out[..n].copy_from_slice(&data[..n]);
    *data = &data[n..];
    out
}
