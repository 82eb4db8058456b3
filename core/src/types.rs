//! Newtypes shared by every layer, so a term can never be passed where a token is expected.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

macro_rules! id_newtype {
    ($(#[$doc:meta])* $name:ident($inner:ty), $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub $inner);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

id_newtype!(
    /// A Raft server, numbered from 0.
    NodeId(u8), "n"
);
/// A Raft term. A whole-cluster restore starts its cluster's terms above
/// `e · 2^32` in restore epoch `e`, as it does tokens: `t3@e1` is term 3 of
/// epoch 1, `t3` a term before any restore.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Term(pub u64);

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (epoch, term) = epoch_split(self.0);
        match epoch {
            0 => write!(f, "t{term}"),
            epoch => write!(f, "t{term}@e{epoch}"),
        }
    }
}
id_newtype!(
    /// A position in the replicated log; 0 means "before the first entry".
    LogIndex(u64), "i"
);
/// A fencing token: strictly increasing, never reissued. After the `e`-th
/// whole-cluster restore tokens are above `e · 2^32` (ARCHITECTURE.md,
/// "Tokens across restores"): the high bits are the restore epoch, the low
/// bits the counter within it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Token(pub u64);

impl Token {
    /// Bits of the counter within one restore epoch.
    pub const EPOCH_SHIFT: u32 = 32;

    /// The lowest token of restore epoch `epoch`.
    pub fn epoch_base(epoch: u32) -> Token {
        Token(u64::from(epoch) << Token::EPOCH_SHIFT)
    }

    pub fn epoch(self) -> u64 {
        epoch_split(self.0).0
    }

    pub fn counter(self) -> u64 {
        epoch_split(self.0).1
    }
}

/// A token or term as (restore epoch, count within it): the high and low bits.
fn epoch_split(value: u64) -> (u64, u64) {
    (value >> Token::EPOCH_SHIFT, value & ((1 << Token::EPOCH_SHIFT) - 1))
}

/// `tok41` before any restore; `tok5@e1` is counter 5 of restore epoch 1.
impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.epoch() {
            0 => write!(f, "tok{}", self.0),
            epoch => write!(f, "tok{}@e{epoch}", self.counter()),
        }
    }
}
id_newtype!(
    /// A client (worker) of the lock service.
    ClientId(u32), "c"
);
id_newtype!(
    /// A client-chosen request id; a retry reuses it.
    RequestId(u64), "r"
);

/// A lock key, such as `invoice/B-1042`.
///
/// Shared, not owned: a key is copied into every command, log entry, lock,
/// answer and history event that names it, and a copy of an `Arc` is a
/// count, where a `String` was an allocation (one per message in the
/// simulator, a fifth of its allocations).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key(Arc<str>);

impl Key {
    pub fn new(name: impl Into<Arc<str>>) -> Key {
        Key(name.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key named `text`, shared with the keys this thread named before
    /// (up to [`KEYS_NAMED_KEPT`]).
    ///
    /// A service has few keys and names them in nearly every message, so a
    /// decoded key was an allocation per message, and the copies kept for
    /// long (log entries, locks, the checker's records) sat one by one among
    /// short-lived blocks, keeping the holes between them from being reused.
    fn named(text: &str) -> Key {
        thread_local! {
            static NAMED: std::cell::RefCell<Vec<Key>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        NAMED.with_borrow_mut(|named| {
            if let Some(key) = named.iter().find(|key| key.as_str() == text) {
                return key.clone();
            }
            let key = Key::new(text);
            if named.len() < KEYS_NAMED_KEPT {
                named.push(key.clone());
            }
            key
        })
    }
}

/// The keys a thread keeps to share with the keys it names next: a
/// workload's keys, not a store's.
const KEYS_NAMED_KEPT: usize = 16;

/// On the wire and in files a key is its text.
impl Serialize for Key {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Key, D::Error> {
        struct KeyText;
        impl serde::de::Visitor<'_> for KeyText {
            type Value = Key;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a lock key")
            }

            /// A key this thread has read before is that key again (a
            /// count, no allocation); a new one goes straight into the
            /// shared text.
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Key, E> {
                Ok(Key::named(text))
            }
        }
        deserializer.deserialize_str(KeyText)
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Who holds (or asked for) a lock: the client and the request that acquired it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Holder {
    pub client: ClientId,
    pub request: RequestId,
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.client, self.request)
    }
}

#[cfg(test)]
mod tests {
    use super::{ClientId, Holder, Key, RequestId, Term, Token};

    #[test]
    fn keys_and_holders_read_as_the_trace_tells_them() {
        assert_eq!(Key::new("invoice/B-1042").to_string(), "invoice/B-1042");
        assert_eq!(Holder { client: ClientId(3), request: RequestId(12) }.to_string(), "c3/r12");
    }

    #[test]
    fn a_key_read_again_shares_the_text_read_before() {
        let read = |text: &str| -> Key { serde_json::from_str(&format!("\"{text}\"")).expect("a key") };
        let (first, again) = (read("a-key-read-twice"), read("a-key-read-twice"));
        assert_eq!(first, again);
        assert!(std::sync::Arc::ptr_eq(&first.0, &again.0), "the second read shares the first's text");
        // Past the keys a thread keeps, a key is its own text, and still the key.
        for n in 0..super::KEYS_NAMED_KEPT {
            read(&format!("filler-{n}"));
        }
        let (late, late_again) = (read("a-key-read-late"), read("a-key-read-late"));
        assert_eq!(late, late_again);
        assert!(!std::sync::Arc::ptr_eq(&late.0, &late_again.0));
    }

    #[test]
    fn a_token_shows_its_restore_epoch() {
        assert_eq!(Token(41).to_string(), "tok41");
        assert_eq!(Token(4_294_967_301).to_string(), "tok5@e1");
        assert_eq!(Token::epoch_base(2).to_string(), "tok0@e2");
        assert!(Token::epoch_base(1) > Token((1 << 32) - 1), "every token of epoch 1 is above epoch 0's");
    }

    #[test]
    fn a_term_shows_its_restore_epoch() {
        assert_eq!(Term(7).to_string(), "t7");
        assert_eq!(Term(4_294_967_297).to_string(), "t1@e1");
        assert_eq!(Term(Token::epoch_base(3).0).to_string(), "t0@e3");
    }
}
