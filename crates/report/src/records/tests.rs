//! The lines as the README documents them: each record's text, `type` first, `null` and
//! absent where the schema says.

use super::*;

fn line<T: RecordKind + Serialize>(body: T) -> String {
    Record::new(body).to_line()
}

#[test]
fn the_notes_are_written_as_documented() {
    assert_eq!(
        line(Warning {
            message: "skipped fifo p".into()
        }),
        r#"{"type":"warning","message":"skipped fifo p"}"#
    );
    assert_eq!(
        line(RunError {
            source: None,
            error: "refused".into()
        }),
        r#"{"type":"error","error":"refused"}"#
    );
    assert_eq!(
        line(RunError {
            source: Some("longhaul://h/a".into()),
            error: "refused".into()
        }),
        r#"{"type":"error","source":"longhaul://h/a","error":"refused"}"#
    );
    assert_eq!(
        line(FarStart {
            seconds: 1.5,
            uploaded_bytes: None,
            upload_seconds: None,
            data_via: DataVia::ConnectBack,
            connect_back_port: Some(5290),
        }),
        r#"{"type":"far_start","seconds":1.5,"uploaded_bytes":null,"upload_seconds":null,"data_via":"connect-back","connect_back_port":5290}"#
    );
    assert_eq!(
        line(HashedAhead {
            files: 3,
            used_files: 2,
            used_bytes: 10
        }),
        r#"{"type":"hashed_ahead","files":3,"used_files":2,"used_bytes":10}"#
    );
}

#[test]
fn a_dry_run_is_written_as_documented() {
    assert_eq!(
        line(WouldSend {
            path: "sub/f1".into(),
            action: SendAction::of(true),
            size: 5000,
            bytes: 4096,
        }),
        r#"{"type":"would_send","path":"sub/f1","action":"update","size":5000,"bytes":4096}"#
    );
    assert_eq!(
        line(WouldDelete {
            path: "extra".into()
        }),
        r#"{"type":"would_delete","path":"extra"}"#
    );
    let end = DryRunEnd {
        ok: true,
        dry_run: true,
        would_delete: 2,
        files: 2,
        would_send_bytes: 12000,
        unchanged_files: 3,
        compared_files: 1,
        failures: Vec::new(),
        direction: "pull".into(),
    };
    let text = line(end.clone());
    assert_eq!(
        text,
        r#"{"type":"end","ok":true,"dry_run":true,"would_delete":2,"files":2,"would_send_bytes":12000,"unchanged_files":3,"compared_files":1,"failures":[],"direction":"pull"}"#
    );
    let back: Record<DryRunEnd> = serde_json::from_str(&text).expect("reads back");
    assert_eq!(back, Record::new(end));
}

#[test]
fn a_record_of_another_type_is_not_read_as_this_one() {
    let warning: Map<String, Value> =
        serde_json::from_str(r#"{"type":"warning","message":"m"}"#).expect("an object");
    assert_eq!(
        read_record::<Warning>(&warning),
        Some(Warning {
            message: "m".into()
        })
    );
    assert_eq!(read_record::<RunError>(&warning), None);
    // A line of the type but without a field of the record: for the tolerant reader.
    let older: Map<String, Value> =
        serde_json::from_str(r#"{"type":"hashed_ahead","files":3}"#).expect("an object");
    assert_eq!(read_record::<HashedAhead>(&older), None);
}

#[test]
fn a_share_that_failed_has_its_error_and_no_figures() {
    let failed = ShareEnd {
        share: 2,
        source: "longhaul://a2/x".into(),
        destination: "longhaul://b2/y".into(),
        ok: false,
        done: None,
        error: Some("connection refused".into()),
    };
    let text = serde_json::to_string(&failed).expect("serialises");
    assert_eq!(
        text,
        r#"{"share":2,"source":"longhaul://a2/x","destination":"longhaul://b2/y","ok":false,"error":"connection refused"}"#
    );
    let back: ShareEnd = serde_json::from_str(&text).expect("reads back");
    assert_eq!(back, failed);
    let ended = ShareEnd {
        ok: true,
        done: Some(ShareDone {
            files: 1,
            sent_bytes: 10,
            resumed_bytes: 0,
            seconds: 0.5,
            bits_per_second: 160.0,
            streams: 2,
            rtt_ms: 0.25,
            failures: Vec::new(),
            limited_by_text: String::new(),
        }),
        error: None,
        ..failed
    };
    let text = serde_json::to_string(&ended).expect("serialises");
    assert!(text.ends_with(r#""ok":true,"files":1,"sent_bytes":10,"resumed_bytes":0,"seconds":0.5,"bits_per_second":160.0,"streams":2,"rtt_ms":0.25,"failures":[],"limited_by_text":""}"#), "{text}");
    assert_eq!(serde_json::from_str::<ShareEnd>(&text).ok(), Some(ended));
}
