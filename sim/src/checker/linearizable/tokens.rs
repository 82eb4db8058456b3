//! Tokens across keys: the one part of the specification that couples them.
//!
//! The service has one token counter for all keys, so the tokens clients are
//! told must be distinct, and a grant whose request was sent after another
//! grant was answered must carry a higher token, whatever the keys. Judging
//! keys apart (`search.rs`) cannot see either; these two checks can. They
//! are the real-time consequences of one counter, not a full search over all
//! keys at once.

use super::{Property, Report, Violation};
use crate::checker::keys::Keys;
use crate::checker::packed::{put, put_change, take, take_change, take_u32, Pack};
use fencelock::{ClientId, RequestId, Token};
use std::collections::BTreeMap;

/// A `Granted` answer, as the token checks read it. Both checks are over the
/// whole run by their definition (a token told twice may be told again at any
/// time; a later grant may be compared with any earlier answer), so every
/// grant is kept, but only this: about a fifth of the operation it came
/// from, and packed (`packed.rs`) until the end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Told {
    pub client: ClientId,
    pub request: RequestId,
    /// The key's number in the log's `Keys`.
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

/// Judges the `Granted` answers of every key together (`told` in history order).
pub(crate) fn check<'a>(told: impl IntoIterator<Item = &'a Told>, keys: &Keys, report: &mut Report) {
    let mut grants: Vec<(&Told, Token)> = told.into_iter().map(|op| (op, op.token)).collect();
    let mut first_by_token: BTreeMap<Token, &Told> = BTreeMap::new();
    for (op, token) in &grants {
        match first_by_token.get(token) {
            Some(first) if (first.client, first.request) != (op.client, op.request) => {
                let detail = format!(
                    "{token} was told to two requests: {}/{} on {} (answered at {} ms) and {}/{} on {} \
                     (answered at {} ms); a token names one grant",
                    first.client,
                    first.request,
                    keys.name(first.key),
                    first.resp_us / 1_000,
                    op.client,
                    op.request,
                    keys.name(op.key),
                    op.resp_us / 1_000
                );
                let v = Violation::new(Property::Linearizable, op.resp_us, detail);
                report.push(v.clients(&[first.client, op.client]).tokens(&[*token]));
            }
            Some(_) => {}
            None => {
                first_by_token.insert(*token, op);
            }
        }
    }
    // Sweep by first send, with every grant answered before it behind.
    let mut by_answer: Vec<(&Told, Token)> = grants.clone();
    by_answer.sort_by_key(|(op, _)| op.resp_us);
    grants.sort_by_key(|(op, _)| op.inv_us);
    let mut answered = by_answer.iter().peekable();
    let mut highest: Option<(&Told, Token)> = None;
    for (op, token) in &grants {
        while let Some((earlier, earlier_token)) = answered.next_if(|(earlier, _)| earlier.resp_us < op.inv_us) {
            if highest.is_none_or(|(_, t)| *earlier_token > t) {
                highest = Some((earlier, *earlier_token));
            }
        }
        if let Some((earlier, earlier_token)) = highest {
            if earlier_token > *token {
                let detail = format!(
                    "{}/{} was granted {token} on {} although {}/{} had been told {earlier_token} on {} \
                     (answered at {} ms) before it sent its request at {} ms: tokens must increase",
                    op.client,
                    op.request,
                    keys.name(op.key),
                    earlier.client,
                    earlier.request,
                    keys.name(earlier.key),
                    earlier.resp_us / 1_000,
                    op.inv_us / 1_000
                );
                let v = Violation::new(Property::Linearizable, op.resp_us, detail);
                report.push(v.clients(&[earlier.client, op.client]).tokens(&[earlier_token, *token]));
            }
        }
    }
}
