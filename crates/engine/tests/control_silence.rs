//! The control link's record of when the peer last said anything
//! (`ControlLink::silent_for`), on a real loopback connection: it grows while the peer is
//! silent and starts again with anything the peer sends, a keepalive included (which
//! the link takes without handing it on). A sender bounds its wait for the receiver's
//! answer to its list by it.

use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use longhaul_engine::transport::control::ControlLink;
use longhaul_engine::transport::framed::FramedConn;
use longhaul_engine::transport::secure::SecureStream;
use longhaul_proto::Message;

#[test]
fn silence_grows_until_the_peer_sends_anything_a_keepalive_included() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let near = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (far, _) = listener.accept().unwrap();
    let link = ControlLink::start(FramedConn::new(SecureStream::plain(near))).unwrap();
    let mut far = FramedConn::new(SecureStream::plain(far));
    std::thread::sleep(Duration::from_millis(300));
    let before = link.silent_for();
    assert!(before >= Duration::from_millis(300), "{before:?}");
    far.send(&Message::Pong { seq: 0 }).unwrap();
    // The reader takes it within a moment; the silence starts again.
    let mut after = link.silent_for();
    for _ in 0..100 {
        if after < before {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
        after = link.silent_for();
    }
    assert!(
        after < Duration::from_millis(200),
        "{after:?} after a keepalive"
    );
    // A keepalive is nothing the transfer sees.
    assert!(link.recv_timeout(Duration::from_millis(50)).is_none());
}
