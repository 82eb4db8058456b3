//! A key's ledger: the lines its accepted Ledger writes appended, in order.
//!
//! A ledger only grows, and the database is copied whole: a restart's image,
//! a backup, a restore. The lines are kept in pages of [`PAGE_LINES`]; a full
//! page never changes again, so copies share it (`Arc`) and a copy costs one
//! pointer per full page plus the last, partly filled page. Without this, a
//! long run held every line once per copy of the database.

use crate::types::Token;
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::sync::Arc;

/// Lines per page.
const PAGE_LINES: usize = 64;

/// One line: the token it was written with and its text.
type Line = (Token, String);

/// The lines of one key, oldest first: full pages, then the open page. Two
/// ledgers with the same lines have the same pages, so the derived equality
/// is equality of lines.
#[derive(Clone, Default, PartialEq, Eq)]
pub(super) struct Ledger {
    /// Each holds exactly [`PAGE_LINES`] lines.
    full: Vec<Arc<Page>>,
    /// Fewer than [`PAGE_LINES`] lines; its buffers serve every page in turn.
    open: Page,
}

/// Lines end to end: a page is four blocks, where a block per line's text
/// kept a run's ledger as thousands of small blocks scattered among
/// short-lived ones.
#[derive(Clone, Default, PartialEq, Eq)]
struct Page {
    tokens: Vec<Token>,
    /// Where each line's text ends in `text`.
    ends: Vec<u32>,
    text: String,
}

impl Page {
    fn len(&self) -> usize {
        self.tokens.len()
    }

    fn push(&mut self, token: Token, text: &str) {
        self.tokens.push(token);
        self.text.push_str(text);
        self.ends.push(u32::try_from(self.text.len()).expect("a page's text is under 4 GiB"));
    }

    /// Empties it, keeping its buffers.
    fn clear(&mut self) {
        self.tokens.clear();
        self.ends.clear();
        self.text.clear();
    }

    fn iter(&self) -> impl Iterator<Item = (Token, &str)> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        let spans = starts.zip(self.ends.iter().copied());
        self.tokens.iter().zip(spans).map(|(token, (start, end))| (*token, &self.text[start as usize..end as usize]))
    }
}

impl Ledger {
    /// Appends a line; a page that fills is sealed and shared from then on.
    pub(super) fn push(&mut self, token: Token, text: &str) {
        self.open.push(token, text);
        if self.open.len() == PAGE_LINES {
            // A copy is exactly as long as its lines; the open page keeps
            // its buffers for the next.
            self.full.push(Arc::new(self.open.clone()));
            self.open.clear();
        }
    }

    /// How many lines it holds.
    pub(super) fn len(&self) -> usize {
        self.full.len() * PAGE_LINES + self.open.len()
    }

    /// Its lines, oldest first.
    pub(super) fn iter(&self) -> impl Iterator<Item = (Token, &str)> + '_ {
        self.full.iter().flat_map(|page| page.iter()).chain(self.open.iter())
    }
}

impl From<Vec<Line>> for Ledger {
    fn from(lines: Vec<Line>) -> Ledger {
        let mut ledger = Ledger::default();
        for (token, text) in lines {
            ledger.push(token, &text);
        }
        ledger
    }
}

/// The lines, as the plain list they are (not the pages).
impl fmt::Debug for Ledger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// The serde form is the plain sequence of lines, as before pages.
impl Serialize for Ledger {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // The length up front: formats such as postcard need it.
        let mut seq = serializer.serialize_seq(Some(self.len()))?;
        for line in self.iter() {
            seq.serialize_element(&line)?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for Ledger {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Ledger, D::Error> {
        Vec::<Line>::deserialize(deserializer).map(Ledger::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(n: u64) -> Vec<Line> {
        (0..n).map(|i| (Token(i), format!("line {i}"))).collect()
    }

    #[test]
    fn lines_come_back_in_order_across_pages() {
        for n in [0, 1, PAGE_LINES as u64 - 1, PAGE_LINES as u64, PAGE_LINES as u64 + 1, 3 * PAGE_LINES as u64 + 5] {
            let ledger = Ledger::from(lines(n));
            assert_eq!(ledger.len() as u64, n);
            assert_eq!(ledger.iter().map(|(token, text)| (token, text.to_string())).collect::<Vec<_>>(), lines(n));
            assert!(ledger.full.iter().all(|page| page.len() == PAGE_LINES));
            assert!(ledger.open.len() < PAGE_LINES);
        }
    }

    #[test]
    fn a_copy_shares_the_full_pages_and_grows_apart() {
        let mut ledger = Ledger::from(lines(2 * PAGE_LINES as u64 + 3));
        let copy = ledger.clone();
        assert!(ledger.full.iter().zip(&copy.full).all(|(a, b)| Arc::ptr_eq(a, b)));
        ledger.push(Token(99), "after the copy");
        assert_eq!(copy.len(), 2 * PAGE_LINES + 3);
        assert_eq!(ledger.len(), 2 * PAGE_LINES + 4);
        assert_ne!(ledger, copy);
        assert_eq!(ledger.iter().last(), Some((Token(99), "after the copy")));
    }

    #[test]
    fn it_prints_as_its_lines() {
        let ledger = Ledger::from(lines(PAGE_LINES as u64 + 1));
        assert_eq!(format!("{ledger:?}"), format!("{:?}", lines(PAGE_LINES as u64 + 1)));
    }

    #[test]
    fn the_serde_form_is_the_plain_sequence_of_lines() {
        let ledger = Ledger::from(lines(PAGE_LINES as u64 + 2));
        let json = serde_json::to_value(&ledger).expect("serializes");
        assert_eq!(json, serde_json::to_value(lines(PAGE_LINES as u64 + 2)).expect("serializes"));
        let back: Ledger = serde_json::from_value(json).expect("deserializes");
        assert_eq!(back, ledger);
        // A format that needs the length first takes it too, byte for byte as the plain lines.
        let bytes = postcard::to_stdvec(&ledger).expect("serializes");
        assert_eq!(bytes, postcard::to_stdvec(&lines(PAGE_LINES as u64 + 2)).expect("serializes"));
        assert_eq!(postcard::from_bytes::<Ledger>(&bytes).expect("deserializes"), ledger);
    }
}
