//! Fuzzes the ssh start-up's ready line (`SshReady::parse`), the one message the far
//! end sends over the ssh channel (its port, one-time token and certificate fingerprint):
//! whatever parses encodes to one line that parses back to the same value, within the
//! line bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_proto::SshReady;

fuzz_target!(|data: &[u8]| {
    if let Ok(ready) = SshReady::parse(data) {
        let line = ready.encode();
        assert!(line.len() <= 1024, "{line:?} is longer than the bound");
        assert_eq!(
            SshReady::parse(line.as_bytes()).as_ref(),
            Ok(&ready),
            "{line:?}"
        );
    }
});
