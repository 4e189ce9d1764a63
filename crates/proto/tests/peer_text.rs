//! Text a peer sends for a person to read (error messages, reasons, congestion names) is
//! refused when it holds a terminal escape, a newline that would forge a log line, or a
//! bidirectional override; longhaul's own writer replaces such characters, so its own
//! messages always decode.

use longhaul_proto::{decode_frame, encode_frame, printable, ErrorCode, Message};

/// A frame carrying `message` exactly as given, the way a hostile peer would write it
/// (longhaul's encoder would clean it): the encoder's frame with the text bytes patched.
fn raw_error_frame(message: &str) -> Vec<u8> {
    let placeholder = "x".repeat(message.len());
    let mut frame = Vec::new();
    encode_frame(
        &Message::Error {
            code: ErrorCode::Protocol,
            message: placeholder.clone(),
        },
        &mut frame,
    );
    let at = frame
        .windows(placeholder.len())
        .position(|w| w == placeholder.as_bytes())
        .expect("the text is in the frame");
    frame[at..at + message.len()].copy_from_slice(message.as_bytes());
    frame
}

#[test]
fn control_characters_from_a_peer_are_refused() {
    for hostile in [
        "\x1b[2J\x1b[31mroot password accepted",
        "ok\nlonghaul serve: session 9 from 10.0.0.1: done",
        "progress\r100 %",
        "file \u{202E}txt.exe",
        "\u{9b}31m",
    ] {
        let err = decode_frame(&raw_error_frame(hostile))
            .expect_err(&format!("{hostile:?} was accepted"))
            .to_string();
        assert!(err.contains("control character"), "{err}");
    }
    // Plain text, including non-ASCII, passes unchanged.
    let fine = "disk full on /data — free 2 GB (größer)";
    match decode_frame(&raw_error_frame(fine)) {
        Ok(Some((Message::Error { message, .. }, _))) => assert_eq!(message, fine),
        other => panic!("{other:?}"),
    }
}

#[test]
fn our_own_messages_are_cleaned_before_they_are_sent() {
    let mut frame = Vec::new();
    encode_frame(
        &Message::Error {
            code: ErrorCode::Params,
            message: "first line\nsecond\tline \x1b[0m".into(),
        },
        &mut frame,
    );
    match decode_frame(&frame) {
        Ok(Some((Message::Error { message, .. }, _))) => {
            assert_eq!(message, "first line second line ?[0m")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn printable_escapes_what_a_terminal_would_obey() {
    assert_eq!(printable("plain/path — ok"), "plain/path — ok");
    assert_eq!(
        printable("a\x1b[2Jb\nc\u{202E}d"),
        "a\\u{1b}[2Jb\\u{a}c\\u{202e}d"
    );
}

#[test]
fn cut_at_char_keeps_whole_characters_within_the_bound() {
    use longhaul_proto::cut_at_char;
    assert_eq!(cut_at_char("abc", 10), "abc");
    assert_eq!(cut_at_char("abc", 2), "ab");
    // "é" is two bytes: a bound inside it leaves it out.
    assert_eq!(cut_at_char("aé", 2), "a");
    assert_eq!(cut_at_char("aé", 3), "aé");
    assert_eq!(cut_at_char("", 0), "");
}
