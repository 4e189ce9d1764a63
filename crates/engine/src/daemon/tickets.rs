//! The tickets a server has issued for third-party copies (see `longhaul_proto::ticket`):
//! each opens one path for one pull, once, until it expires. The book is plain data with
//! the time passed in; the session driver draws the random id and secret.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use longhaul_proto::{TicketGrant, TicketId, Token};

/// The most tickets a server holds at once: a client that asks for more before they are
/// used or expire is refused (each is about 100 bytes).
pub const MAX_TICKETS: usize = 4096;

/// What a ticket opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TicketScope {
    /// The issuing client's token (its place in the keyring): the ticket reaches only
    /// what that token reaches.
    pub token: usize,
    /// The path, in the canonical wire form of a pull's request.
    pub path: Vec<u8>,
}

struct Held {
    secret: [u8; 32],
    scope: TicketScope,
    expires: Instant,
}

/// A ticket presented for use: its secret to check the proof with, and its scope.
#[derive(Clone)]
pub struct Presented {
    /// The secret the holder must have proved with.
    pub secret: Token,
    /// What it opens.
    pub scope: TicketScope,
}

/// The tickets issued and not yet used or expired.
#[derive(Default)]
pub struct TicketBook {
    held: Mutex<HashMap<TicketId, Held>>,
}

impl TicketBook {
    /// Records a ticket `id` with `secret` for `scope`, valid for `lifetime` from `now`
    /// (expired tickets are dropped first). Refused when [`MAX_TICKETS`] are held.
    pub fn issue(
        &self,
        id: TicketId,
        secret: [u8; 32],
        scope: TicketScope,
        lifetime: Duration,
        now: Instant,
    ) -> Result<TicketGrant, String> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.retain(|_, h| h.expires > now);
        if held.len() >= MAX_TICKETS {
            return Err(format!(
                "this server holds {MAX_TICKETS} unused tickets; use them or wait for them to \
                 expire"
            ));
        }
        held.insert(
            id,
            Held {
                secret,
                scope,
                expires: now + lifetime,
            },
        );
        Ok(TicketGrant {
            id,
            secret,
            lifetime_secs: lifetime.as_secs().min(u64::from(u32::MAX)) as u32,
        })
    }

    /// Takes ticket `id` for use at `now`: it is gone from the book either way, so a
    /// ticket opens one session at most. An unknown, used or expired one is refused
    /// with words that say what to do.
    pub fn take(&self, id: &TicketId, now: Instant) -> Result<Presented, String> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        match held.remove(id) {
            Some(h) if h.expires > now => Ok(Presented {
                secret: Token::from_secret(h.secret),
                scope: h.scope,
            }),
            Some(_) => Err(
                "the ticket has expired; ask its issuer for a new one (longhaul cp asks for \
                 one per copy)"
                    .into(),
            ),
            None => Err(
                "no such ticket here: it was used already, or issued by another server; ask \
                 its issuer for a new one"
                    .into(),
            ),
        }
    }

    /// How many tickets are held (expired ones included until the next issue).
    pub fn len(&self) -> usize {
        self.held.lock().map(|h| h.len()).unwrap_or(0)
    }

    /// Whether no ticket is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope() -> TicketScope {
        TicketScope {
            token: 0,
            path: b"data".to_vec(),
        }
    }

    #[test]
    fn a_ticket_opens_once_and_only_until_it_expires() {
        let book = TicketBook::default();
        let t0 = Instant::now();
        let minute = Duration::from_secs(60);
        let g = book.issue([1; 16], [2; 32], scope(), minute, t0).unwrap();
        assert_eq!(g.lifetime_secs, 60);
        let got = book.take(&[1; 16], t0 + Duration::from_secs(59)).unwrap();
        assert_eq!(got.scope, scope());
        assert!(got.secret.same(&Token::from_secret([2; 32])));
        let again = book.take(&[1; 16], t0).err().unwrap();
        assert!(again.contains("used already"), "{again}");
        book.issue([3; 16], [4; 32], scope(), minute, t0).unwrap();
        let late = book.take(&[3; 16], t0 + minute).err().unwrap();
        assert!(late.contains("expired"), "{late}");
        assert!(book.is_empty(), "an expired ticket presented is gone too");
    }

    #[test]
    fn the_book_is_bounded_and_sheds_expired_tickets() {
        let book = TicketBook::default();
        let t0 = Instant::now();
        let second = Duration::from_secs(1);
        for i in 0..MAX_TICKETS {
            let id: TicketId = [
                (i >> 8) as u8,
                i as u8,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                9,
            ];
            book.issue(id, [0; 32], scope(), second, t0).unwrap();
        }
        let full = book
            .issue([7; 16], [0; 32], scope(), second, t0)
            .err()
            .unwrap();
        assert!(full.contains("unused tickets"), "{full}");
        // Once they have expired they make room.
        book.issue([7; 16], [0; 32], scope(), second, t0 + second)
            .unwrap();
        assert_eq!(book.len(), 1);
    }
}
