//! Every seeded random stream of a run, derived here and nowhere else.
//!
//! Separate streams (TigerBeetle's VOPR): switching one fault family off does
//! not reshuffle the workload or the other families. Each stream mixes the
//! run's seed with its own constant, and with the actor and its life where
//! there are many. madsim's own generator is left to madsim.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const NET: u64 = 0x6E65_7400_0000_0001;
/// The net's second constant: its stream was once derived in two places.
const NET_ROUTER: u64 = 0x4E45_7457_0B05_5EED;
const RAFT: u64 = 0x7261_6674_0000_0002;
const WORKLOAD: u64 = 0x776F_726B_0000_0003;
const OPERATOR: u64 = 0x6469_736B_0000_0004;
const CHURN: u64 = 0x6368_7572_0000_0005;
const FAULTS: u64 = 0xFA17_5EED;
const SWARM: u64 = 0x7377_6172_0000_0006;
const ACK_CRASH: u64 = 0x6163_6B63_0000_0007;
const RENEW_STRIKE: u64 = 0x7265_6E77_0000_0008;
const ACK_AMNESIA: u64 = 0x6163_6B72_0000_0009;
const VOTE_STRIKE: u64 = 0x766F_7465_0000_000A;

/// One stream seed for actor `who` in its `incarnation`-th life.
fn mixed(seed: u64, stream: u64, who: u64, incarnation: u64) -> u64 {
    // SplitMix64 finalizer: nearby inputs give unrelated seeds.
    let mut z =
        seed ^ stream ^ who.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ incarnation.wrapping_mul(0xD1B5_4A32_D192_ED03);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The network's loss, duplication, corruption and latency draws.
pub fn net(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed ^ NET ^ NET_ROUTER)
}

/// One fault family's schedule (`family` is the family's fixed number).
pub fn fault_family(seed: u64, family: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ FAULTS);
    rng.set_stream(family);
    rng
}

/// The seed of a Raft node's randomized election timeouts in one life.
pub fn raft(seed: u64, node: u8, incarnation: u64) -> u64 {
    mixed(seed, RAFT, u64::from(node), incarnation)
}

/// A worker's choices (keys, leases, stalls, misbehaviour) in one life.
pub fn worker(seed: u64, client: u32, incarnation: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(mixed(seed, WORKLOAD, u64::from(client), incarnation))
}

/// The operator's choices at the moment of a fault (which torn write survives).
pub fn operator(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed ^ OPERATOR)
}

/// Leader churn: its victims and instants, decided as leaders appear.
pub fn churn(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(mixed(seed, CHURN, 0, 0))
}

/// Crashes after acknowledging: each victim's down time, drawn as it is struck.
pub fn ack_crash(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(mixed(seed, ACK_CRASH, 0, 0))
}

/// Renew strikes: how long each victim's links stay cut after its pause, drawn as it is struck.
pub fn renew_strike(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(mixed(seed, RENEW_STRIKE, 0, 0))
}

/// Vote strikes: the servers kept with a pre-candidate, and each voter's time down, drawn as the strikes play.
pub fn vote_strike(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(mixed(seed, VOTE_STRIKE, 0, 0))
}

/// Ack amnesia: which followers are cut off, which one forgets and how long it is down, drawn as the episode plays.
pub fn ack_amnesia(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(mixed(seed, ACK_AMNESIA, 0, 0))
}

/// Swarm testing: which fault families a seed turns on, and how hard (`faults/swarm.rs`).
pub fn swarm(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(mixed(seed, SWARM, 0, 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn streams_of_one_seed_are_unrelated_and_repeatable() {
        let draws = |mut rng: ChaCha8Rng| (0..4).map(|_| rng.gen::<u64>()).collect::<Vec<_>>();
        let all = [
            draws(net(7)),
            draws(fault_family(7, 1)),
            draws(fault_family(7, 2)),
            draws(worker(7, 0, 0)),
            draws(worker(7, 0, 1)),
            draws(worker(7, 1, 0)),
            draws(operator(7)),
            draws(churn(7)),
            draws(swarm(7)),
            draws(ack_crash(7)),
            draws(renew_strike(7)),
            draws(ack_amnesia(7)),
            draws(vote_strike(7)),
        ];
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(draws(worker(7, 1, 0)), all[5]);
        assert_ne!(raft(7, 0, 0), raft(7, 1, 0));
        assert_ne!(raft(7, 0, 0), raft(7, 0, 1));
    }
}
