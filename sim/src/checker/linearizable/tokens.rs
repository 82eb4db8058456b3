//! Tokens across keys: the one part of the specification that couples them.
//!
//! The service has one token counter for all keys, so the tokens clients are
//! told must be distinct, and a grant whose request was sent after another
//! grant was answered must carry a higher token, whatever the keys. Judging
//! keys apart (`search.rs`) cannot see either; these two checks can. They
//! are the real-time consequences of one counter, not a full search over all
//! keys at once.

use super::ops::Op;
use super::{Property, Report, Violation};
use fencelock::service::ClientReply;
use fencelock::Token;
use std::collections::BTreeMap;

/// Judges the `Granted` answers of every key together (`ops` in history order).
pub(crate) fn check<'a>(ops: impl IntoIterator<Item = &'a Op>, report: &mut Report) {
    let mut grants: Vec<(&Op, Token)> = ops
        .into_iter()
        .filter_map(|op| match op.answer {
            Some(ClientReply::Granted { token, .. }) => Some((op, token)),
            _ => None,
        })
        .collect();
    let mut first_by_token: BTreeMap<Token, &Op> = BTreeMap::new();
    for (op, token) in &grants {
        match first_by_token.get(token) {
            Some(first) if (first.client, first.request) != (op.client, op.request) => {
                let detail = format!(
                    "{token} was told to two requests: {}/{} on {} (answered at {} ms) and {}/{} on {} \
                     (answered at {} ms); a token names one grant",
                    first.client,
                    first.request,
                    first.key,
                    first.resp_us / 1_000,
                    op.client,
                    op.request,
                    op.key,
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
    let mut by_answer: Vec<(&Op, Token)> = grants.clone();
    by_answer.sort_by_key(|(op, _)| op.resp_us);
    grants.sort_by_key(|(op, _)| op.inv_us);
    let mut answered = by_answer.iter().peekable();
    let mut highest: Option<(&Op, Token)> = None;
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
                    op.key,
                    earlier.client,
                    earlier.request,
                    earlier.key,
                    earlier.resp_us / 1_000,
                    op.inv_us / 1_000
                );
                let v = Violation::new(Property::Linearizable, op.resp_us, detail);
                report.push(v.clients(&[earlier.client, op.client]).tokens(&[earlier_token, *token]));
            }
        }
    }
}
