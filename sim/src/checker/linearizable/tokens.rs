//! Tokens across keys: the one part of the specification that couples them.
//!
//! The service has one token counter for all keys, so the tokens clients are
//! told must be distinct, and a grant whose request was sent after another
//! grant was answered must carry a higher token, whatever the keys. Judging
//! keys apart (`search.rs`) cannot see either; these two checks can. They
//! are the real-time consequences of one counter, not a full search over all
//! keys at once.
//!
//! Both are judged as the history goes, keeping no grant for long: the
//! tokens told are a set of bits (one counter hands them out, so they are
//! dense: 128 bytes a thousand tokens, the one part that grows with the
//! run); each operation still open holds the grant with the highest token
//! answered before it was sent; and only the newest grants are kept whole,
//! to name the first teller of a token told again.

use super::{Property, Violation};
use crate::checker::keys::Keys;
use crate::checker::packed::{put, put_change, take, take_change, take_u32, Pack, PackedMap};
use fencelock::{ClientId, Key, RequestId, Token};
use std::collections::BTreeMap;

/// The tellers kept to name in a repeat's detail: those of the tokens at
/// most this far below the highest told. A token told again from further
/// back is still a violation; its detail says its first teller is not kept
/// (and a request told its token again from that far back, one grant
/// told twice, can no longer be told apart from two). The repeats the
/// unsafe variants make come within a few dozen tokens.
pub(crate) const TELLERS_KEPT: u64 = 1_024;

/// A `Granted` answer, as the token checks read it: about a fifth of the
/// operation it came from, and packed (`packed.rs`) while it is kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Told {
    pub client: ClientId,
    pub request: RequestId,
    /// The key's number in the checks' `Keys`.
    pub key: u32,
    pub token: Token,
    pub inv_us: u64,
    pub resp_us: u64,
}

impl Pack for Told {
    fn pack(&self, before: &Self, bytes: &mut Vec<u8>) {
        put(bytes, u64::from(self.client.0));
        put(bytes, self.request.0);
        put(bytes, u64::from(self.key));
        put_change(bytes, self.token.0, before.token.0);
        put_change(bytes, self.inv_us, before.inv_us);
        put_change(bytes, self.resp_us, self.inv_us);
    }

    fn unpack(before: &Self, bytes: &[u8], at: &mut usize) -> Self {
        let (client, request) = (ClientId(take_u32(bytes, at)), RequestId(take(bytes, at)));
        let key = take_u32(bytes, at);
        let token = Token(take_change(bytes, at, before.token.0));
        let inv_us = take_change(bytes, at, before.inv_us);
        Told { client, request, key, token, inv_us, resp_us: take_change(bytes, at, inv_us) }
    }
}

/// The tokens per page of [`TokenBits`].
const PAGE_TOKENS: u64 = 1_024;

/// A set of tokens as bits, in pages of [`PAGE_TOKENS`]: 128 bytes a page.
#[derive(Debug, Default)]
struct TokenBits {
    pages: BTreeMap<u64, Box<[u64; (PAGE_TOKENS / 64) as usize]>>,
}

impl TokenBits {
    /// Adds `token`; false if it was there.
    fn insert(&mut self, token: Token) -> bool {
        let page = self.pages.entry(token.0 / PAGE_TOKENS).or_insert_with(|| Box::new([0; 16]));
        let (word, bit) = ((token.0 % PAGE_TOKENS / 64) as usize, 1u64 << (token.0 % 64));
        let new = page[word] & bit == 0;
        page[word] |= bit;
        new
    }
}

/// Both token checks, fed the operations of every key in history order by
/// the log (`ops.rs`): an operation's first send, then how it settled.
#[derive(Debug, Default)]
pub(crate) struct TokenChecks {
    keys: Keys,
    told: TokenBits,
    /// The grants of the newest tokens told (see [`TELLERS_KEPT`]), by token.
    tellers: PackedMap<Token, Told>,
    highest_told: Token,
    /// The grant with the highest token among those answered before
    /// `instant_us` (the first of them answered, if several).
    highest_before: Option<Told>,
    /// The same among those answered at `instant_us`, the history's newest instant.
    highest_at: Option<Told>,
    instant_us: u64,
    /// Each open operation, by number, with `highest_before` as it was when
    /// the operation was first sent (operations sent before any grant are absent).
    sent_after: BTreeMap<u64, Told>,
    /// Violations found, reported when the run ends.
    found: Vec<Violation>,
}

impl TokenChecks {
    /// The history has reached `at_us`: grants answered before it are behind every operation sent from now on.
    fn reach(&mut self, at_us: u64) {
        if at_us > self.instant_us {
            self.instant_us = at_us;
            if let Some(at) = self.highest_at.take() {
                if self.highest_before.is_none_or(|before| at.token > before.token) {
                    self.highest_before = Some(at);
                }
            }
        }
    }

    /// Operation `number` was first sent at `at_us`.
    pub fn sent(&mut self, number: u64, at_us: u64) {
        self.reach(at_us);
        if let Some(before) = self.highest_before {
            self.sent_after.insert(number, before);
        }
    }

    /// Operation `number` settled without a grant.
    pub fn settled(&mut self, number: u64) {
        self.sent_after.remove(&number);
    }

    /// `key`'s number, for a [`Told`].
    pub fn key_number(&mut self, key: &Key) -> u32 {
        self.keys.number(key)
    }

    /// Operation `number` was answered `Granted`, as `op` says.
    pub fn granted(&mut self, number: u64, op: Told) {
        let token = op.token;
        self.reach(op.resp_us);
        if !self.told.insert(token) {
            // The same request told its token again is one grant.
            let first = self.tellers.get(token);
            if first.is_none_or(|first| (first.client, first.request) != (op.client, op.request)) {
                self.found.push(self.repeat(&op, first));
            }
        }
        if let Some(earlier) = self.sent_after.remove(&number) {
            if earlier.token > token {
                self.found.push(self.decrease(&earlier, &op));
            }
        }
        self.tellers.insert(token, op);
        if token > self.highest_told {
            self.highest_told = token;
            self.tellers.forget_below(Token(token.0.saturating_sub(TELLERS_KEPT)));
        }
        if self.highest_at.is_none_or(|at| token > at.token) {
            self.highest_at = Some(op);
        }
    }

    /// The violations found, taken out.
    pub fn take_found(&mut self) -> Vec<Violation> {
        std::mem::take(&mut self.found)
    }

    /// What is held now: keys named, tellers, pages of bits and open
    /// operations (a test's measure of the memory kept).
    #[cfg(test)]
    pub fn held(&self) -> (usize, usize, usize, usize) {
        (self.keys.len(), self.tellers.len(), self.told.pages.len(), self.sent_after.len())
    }

    /// `op` was told a token told before, first to `first` if its teller is kept.
    fn repeat(&self, op: &Told, first: Option<Told>) -> Violation {
        let Told { client, request, key, token, resp_us, .. } = *op;
        let key = self.keys.name(key);
        let answered_ms = resp_us / 1_000;
        let v = match first {
            Some(first) => {
                let detail = format!(
                    "{token} was told to two requests: {}/{} on {} (answered at {} ms) and {client}/{request} on \
                     {key} (answered at {answered_ms} ms); a token names one grant",
                    first.client,
                    first.request,
                    self.keys.name(first.key),
                    first.resp_us / 1_000,
                );
                Violation::new(Property::Linearizable, resp_us, detail).clients(&[first.client, client])
            }
            None => {
                let detail = format!(
                    "{token} was told to two requests: one answered earlier (more than {TELLERS_KEPT} tokens \
                     below the highest told, so its teller is no longer kept; the run's trace names it) and \
                     {client}/{request} on {key} (answered at {answered_ms} ms); a token names one grant"
                );
                Violation::new(Property::Linearizable, resp_us, detail).clients(&[client])
            }
        };
        v.tokens(&[token])
    }

    /// `op` was granted a token below one `earlier` was told before `op` was sent.
    fn decrease(&self, earlier: &Told, op: &Told) -> Violation {
        let detail = format!(
            "{}/{} was granted {} on {} although {}/{} had been told {} on {} (answered at {} ms) before it \
             sent its request at {} ms: tokens must increase",
            op.client,
            op.request,
            op.token,
            self.keys.name(op.key),
            earlier.client,
            earlier.request,
            earlier.token,
            self.keys.name(earlier.key),
            earlier.resp_us / 1_000,
            op.inv_us / 1_000
        );
        let v = Violation::new(Property::Linearizable, op.resp_us, detail);
        v.clients(&[earlier.client, op.client]).tokens(&[earlier.token, op.token])
    }
}
