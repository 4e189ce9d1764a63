//! The one driver of the client's set-up machines on the control connection
//! ([`SetupMachine`]: proto's [`ClientSession`], a copy's [`CopyOpening`]): it sends what
//! a machine queued, and reads the server's frames into it until the caller's condition
//! holds, each read waiting as long as the machine's [`Wait`] allows. When the machine
//! fails it sends what the machine queued for the server (its error) before returning.
//! The machines decide what comes next; this moves the bytes and keeps the time.
//!
//! The dial's wait for the server's proof, `tune --peer`'s for its welcome, bench's for
//! `BenchReady` and `Start` and a copy's for `TransferReady` all run here.

use std::io;

use longhaul_proto::{ClientSession, ProtoError, Wait};
use longhaul_transfer::opening::{ControlFrame, CopyOpening, OpeningError};

use super::framed::{Frame, FramedConn, RecvError};
use super::BenchError;

/// A client's set-up machine as the driver sees it.
pub trait SetupMachine {
    /// Why the machine failed.
    type Error;
    /// Takes a frame the server sent.
    fn take(&mut self, frame: Frame) -> Result<(), Self::Error>;
    /// The next frame to send.
    fn next_frame(&mut self) -> Option<ControlFrame>;
    /// What the machine waits for from the server, if anything.
    fn waiting(&self) -> Option<Wait>;
}

impl SetupMachine for ClientSession {
    type Error = ProtoError;

    fn take(&mut self, frame: Frame) -> Result<(), ProtoError> {
        match frame {
            Frame::Bench(m) => self.handle(m),
            Frame::Transfer(m) => Err(ProtoError::Unexpected {
                got: m.kind(),
                state: "a bench session",
            }),
        }
    }

    fn next_frame(&mut self) -> Option<ControlFrame> {
        self.poll_transmit().map(ControlFrame::Session)
    }

    fn waiting(&self) -> Option<Wait> {
        ClientSession::waiting(self)
    }
}

impl SetupMachine for CopyOpening {
    type Error = OpeningError;

    fn take(&mut self, frame: Frame) -> Result<(), OpeningError> {
        self.handle(frame.into())
    }

    fn next_frame(&mut self) -> Option<ControlFrame> {
        self.poll_transmit()
    }

    fn waiting(&self) -> Option<Wait> {
        CopyOpening::waiting(self)
    }
}

/// Why reading the server's next frame failed, and what the machine waited for.
#[derive(Debug)]
pub struct ReadFailed {
    /// The wait the read was for.
    pub wait: Wait,
    /// Why it failed.
    pub cause: RecvError,
}

impl ReadFailed {
    /// Nothing came within the wait's limit.
    pub fn timed_out(&self) -> bool {
        matches!(&self.cause, RecvError::Io(e) if is_timeout(e))
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Why a set-up step failed: the machine's error, or the read's.
#[derive(Debug)]
pub enum SetupError<E> {
    /// The machine refused what came (or the server's error came).
    Machine(E),
    /// Reading failed.
    Read(ReadFailed),
}

/// Sends every frame `m` queued.
pub fn send_queued<M: SetupMachine>(conn: &mut FramedConn, m: &mut M) -> io::Result<()> {
    while let Some(frame) = m.next_frame() {
        conn.send_control(&frame)?;
    }
    Ok(())
}

/// Reads the server's frames into `m` until `done(m)` holds (checked first: nothing is
/// read when it already does). Each read waits at most the machine's wait's limit; a
/// machine that waits for nothing is read with the client's limit
/// ([`longhaul_proto::CLIENT_WAIT`]). Nothing is sent but, when the machine fails, what
/// it queued for the server.
pub fn read_until<M: SetupMachine>(
    conn: &mut FramedConn,
    m: &mut M,
    mut done: impl FnMut(&mut M) -> bool,
) -> Result<(), SetupError<M::Error>> {
    while !done(m) {
        let wait = m.waiting().unwrap_or(Wait::Welcome);
        let frame = read_for(conn, wait).map_err(SetupError::Read)?;
        if let Err(e) = m.take(frame) {
            let _ = send_queued(conn, m);
            return Err(SetupError::Machine(e));
        }
    }
    Ok(())
}

/// Reads one frame for `wait`.
fn read_for(conn: &mut FramedConn, wait: Wait) -> Result<Frame, ReadFailed> {
    let fail = |cause| ReadFailed { wait, cause };
    conn.stream()
        .set_read_timeout(Some(wait.limit()))
        .map_err(|e| fail(RecvError::Io(e)))?;
    conn.recv_any().map_err(fail)
}

/// A failed read of the server's control connection as a client's error, naming what
/// the client was doing: a close, a timeout, a socket's failure or a malformed frame.
pub fn read_error(cause: RecvError, what: &'static str) -> BenchError {
    match cause {
        RecvError::Closed => BenchError::Io {
            what: format!("the server closed the connection while {what}"),
            cause: io::ErrorKind::UnexpectedEof.into(),
        },
        RecvError::Io(e) if is_timeout(&e) => BenchError::Timeout(what),
        RecvError::Io(cause) => BenchError::Io {
            what: format!("control connection, while {what}"),
            cause,
        },
        RecvError::Proto(p) => p.into(),
    }
}

impl From<ReadFailed> for BenchError {
    fn from(r: ReadFailed) -> Self {
        read_error(r.cause, r.wait.what())
    }
}

impl From<SetupError<ProtoError>> for BenchError {
    fn from(e: SetupError<ProtoError>) -> Self {
        match e {
            SetupError::Machine(p) => p.into(),
            SetupError::Read(r) => r.into(),
        }
    }
}
