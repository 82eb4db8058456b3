//! The simulated machine every process runs on: true and local clocks,
//! timers, disks held outside the process, the network and its corruption
//! fault (the wire format itself is `fencelock::wire`).

pub mod clock;
pub mod disk;
pub mod net;
pub mod timer;
pub mod wire;
