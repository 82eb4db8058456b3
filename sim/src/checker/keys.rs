//! Lock keys named by number: a run has few keys and many records that name
//! one (grants, belief pieces, requests), so a family keeps each name once.

use fencelock::Key;
use std::collections::BTreeMap;

/// Each key seen, once, by number (in the order first seen).
#[derive(Debug, Default)]
pub(crate) struct Keys {
    names: Vec<Key>,
    numbers: BTreeMap<Key, u32>,
}

impl Keys {
    /// `key`'s number, given it on first sight.
    pub fn number(&mut self, key: &Key) -> u32 {
        if let Some(number) = self.numbers.get(key) {
            return *number;
        }
        let number = u32::try_from(self.names.len()).expect("a run names fewer than 2^32 keys");
        self.names.push(key.clone());
        self.numbers.insert(key.clone(), number);
        number
    }

    /// `key`'s number, if it has one.
    pub fn find(&self, key: &Key) -> Option<u32> {
        self.numbers.get(key).copied()
    }

    pub fn name(&self, number: u32) -> &Key {
        &self.names[number as usize]
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }
}
