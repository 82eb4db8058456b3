//! A map keyed by [`Addr`], stored densely by the address's number.
//!
//! The net looks up the receiver's inbox on every send and every receive
//! (about three lookups a message); a run's addresses are a few servers and
//! clients numbered from 0, so an index does what a `BTreeMap`'s search did
//! for a twentieth of its work. Iteration goes in `Addr`'s order (servers,
//! clients, the resource), as the map's did.

use super::Addr;

/// Client numbers an address table holds; the model allows 64 clients.
const CLIENTS_MAX: u32 = 1 << 16;

pub(super) struct AddrTable<T> {
    servers: Vec<Option<T>>,
    clients: Vec<Option<T>>,
    resource: Option<T>,
}

impl<T> Default for AddrTable<T> {
    fn default() -> AddrTable<T> {
        AddrTable { servers: Vec::new(), clients: Vec::new(), resource: None }
    }
}

impl<T> AddrTable<T> {
    fn slot(&self, addr: Addr) -> Option<&Option<T>> {
        match addr {
            Addr::Server(node) => self.servers.get(usize::from(node.0)),
            Addr::Client(client) => self.clients.get(client.0 as usize),
            Addr::Resource => Some(&self.resource),
        }
    }

    fn slot_mut(&mut self, addr: Addr) -> Option<&mut Option<T>> {
        match addr {
            Addr::Server(node) => self.servers.get_mut(usize::from(node.0)),
            Addr::Client(client) => self.clients.get_mut(client.0 as usize),
            Addr::Resource => Some(&mut self.resource),
        }
    }

    pub(super) fn get(&self, addr: Addr) -> Option<&T> {
        self.slot(addr)?.as_ref()
    }

    pub(super) fn get_mut(&mut self, addr: Addr) -> Option<&mut T> {
        self.slot_mut(addr)?.as_mut()
    }

    pub(super) fn contains(&self, addr: Addr) -> bool {
        self.get(addr).is_some()
    }

    /// Puts `value` at `addr`, returning what was there.
    pub(super) fn insert(&mut self, addr: Addr, value: T) -> Option<T> {
        let (slots, index) = match addr {
            Addr::Server(node) => (&mut self.servers, usize::from(node.0)),
            Addr::Client(client) => {
                assert!(client.0 < CLIENTS_MAX, "net: client number {} beyond {CLIENTS_MAX}", client.0);
                (&mut self.clients, client.0 as usize)
            }
            Addr::Resource => return self.resource.replace(value),
        };
        if slots.len() <= index {
            slots.resize_with(index + 1, || None);
        }
        slots[index].replace(value)
    }

    pub(super) fn remove(&mut self, addr: Addr) -> Option<T> {
        self.slot_mut(addr)?.take()
    }

    pub(super) fn clear(&mut self) {
        *self = AddrTable::default();
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &T> {
        self.servers.iter().chain(&self.clients).chain(std::iter::once(&self.resource)).flatten()
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.servers.iter_mut().chain(&mut self.clients).chain(std::iter::once(&mut self.resource)).flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::{Addr, AddrTable};
    use fencelock::{ClientId, NodeId};
    use std::collections::BTreeMap;

    /// The table answers as a map would, through inserts, replacements and
    /// removals in any order, and lists its values in `Addr`'s order.
    #[test]
    fn an_address_table_is_a_map_by_address() {
        let addrs: Vec<Addr> = (0..6)
            .map(|n| Addr::Server(NodeId(n)))
            .chain((0..9).map(|c| Addr::Client(ClientId(c))))
            .chain([Addr::Resource, Addr::Server(NodeId(255)), Addr::Client(ClientId(300))])
            .collect();
        let mut table = AddrTable::default();
        let mut map = BTreeMap::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for step in 0..2_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let addr = addrs[(x % addrs.len() as u64) as usize];
            if (x >> 20).is_multiple_of(3) {
                assert_eq!(table.remove(addr), map.remove(&addr), "remove {addr}");
            } else {
                assert_eq!(table.insert(addr, step), map.insert(addr, step), "insert {addr}");
            }
            for probe in &addrs {
                assert_eq!(table.get(*probe), map.get(probe));
                assert_eq!(table.contains(*probe), map.contains_key(probe));
            }
            assert!(table.values().eq(map.values()));
        }
        for value in table.values_mut() {
            *value += 1;
        }
        assert!(table.values().copied().eq(map.values().map(|v| v + 1)));
        table.clear();
        assert_eq!(table.values().count(), 0);
        assert_eq!(table.get(Addr::Resource), None);
    }

    #[test]
    #[should_panic(expected = "beyond")]
    fn a_client_number_beyond_the_table_is_refused() {
        AddrTable::default().insert(Addr::Client(ClientId(u32::MAX)), ());
    }
}
