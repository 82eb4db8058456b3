//! The simulated machine every process runs on: true and local clocks,
//! timers, disks held outside the process, the wire format and the network.

pub mod clock;
pub mod disk;
pub mod envelope;
pub mod net;
pub mod timer;
pub mod wire;
