//! Randomized test of the lock state machine: thousands of command sequences
//! from seeded ChaCha streams, checking `token-monotonic` and `expire-safety`
//! after every applied command, and that a snapshot taken mid-run (a serde
//! round trip) continues exactly like the original.

use fencelock::{ApplyResult, ClientId, Command, Decline, Holder, Key, LockState, RequestId, Token, Variant};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SEQUENCES: u64 = 4_000;
const COMMANDS_PER_SEQUENCE: usize = 60;
const KEYS: usize = 3;
const CLIENTS: u32 = 4;
const TOKEN_FLOOR: u64 = 40;

/// What the generator remembers to build realistic late and retried commands.
struct Workload {
    rng: ChaCha8Rng,
    keys: Vec<Key>,
    /// Each client's next request id; a new acquire takes it, a retry reuses an older one.
    request_next: Vec<u64>,
    /// Every token granted so far, with its key and holder, for late releases and expiries.
    granted: Vec<(Key, Token, Holder)>,
}

impl Workload {
    fn new(seed: u64) -> Workload {
        Workload {
            rng: ChaCha8Rng::seed_from_u64(seed),
            keys: (0..KEYS).map(|index| Key::new(format!("invoice/B-{}", 1042 + index))).collect(),
            request_next: vec![1; CLIENTS as usize],
            granted: Vec::new(),
        }
    }

    fn command(&mut self, state: &LockState) -> Command {
        let key = self.keys[self.rng.gen_range(0..KEYS)].clone();
        match self.rng.gen_range(0..12) {
            0..=3 => Command::Grant { key, lease_ms: 1_000, holder: self.acquirer() },
            4 | 5 => {
                let reason = if self.rng.gen_bool(0.5) { Decline::Busy } else { Decline::TimedOut };
                Command::Decline { key, holder: self.acquirer(), reason }
            }
            choice => {
                let (key, token, holder) = self.target(state, key);
                if choice <= 8 {
                    Command::Release { key, token, holder }
                } else {
                    Command::Expire { key, token }
                }
            }
        }
    }

    /// Who acquires: mostly a new request, sometimes a retry or a late
    /// duplicate of an older one (Grants and Declines share the ids).
    fn acquirer(&mut self) -> Holder {
        let client = self.rng.gen_range(0..CLIENTS);
        let next = &mut self.request_next[client as usize];
        let request = if *next > 1 && self.rng.gen_bool(0.3) {
            self.rng.gen_range(1..*next)
        } else {
            *next += 1;
            *next - 1
        };
        Holder { client: ClientId(client), request: RequestId(request) }
    }

    /// A token to release or expire: the current one, a late old one, or one never issued.
    fn target(&mut self, state: &LockState, key: Key) -> (Key, Token, Holder) {
        let nobody = Holder { client: ClientId(99), request: RequestId(0) };
        match self.rng.gen_range(0..3) {
            0 => match state.lock(&key) {
                Some(lock) => (key, lock.token, lock.holder),
                None => (key, Token(TOKEN_FLOOR), nobody),
            },
            1 if !self.granted.is_empty() => self.granted[self.rng.gen_range(0..self.granted.len())].clone(),
            _ => (key, Token(self.rng.gen_range(0..=state.token_last().0 + 2)), nobody),
        }
    }
}

/// What went wrong in one applied command.
enum Violation {
    TokenNotIncreasing { before: Token, issued: Token },
    RemovedOtherToken { command: Command, removed: Token },
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Violation::TokenNotIncreasing { before, issued } => {
                write!(f, "token-monotonic: issued {issued} after {before}")
            }
            Violation::RemovedOtherToken { command, removed } => {
                write!(f, "expire-safety: {command:?} removed the lock with {removed}")
            }
        }
    }
}

/// Applies one command and checks both properties against the state before it.
fn apply_checked(state: &mut LockState, command: &Command, variant: Variant) -> Result<ApplyResult, Violation> {
    let before = state.clone();
    let result = state.apply(command, variant);
    let token_before = before.token_last();
    if state.token_last() != token_before {
        // A new token was issued: exactly the next one, answered as Granted, never seen before.
        let issued = state.token_last();
        if issued <= token_before || result != (ApplyResult::Granted { token: issued }) {
            return Err(Violation::TokenNotIncreasing { before: token_before, issued });
        }
    }
    if let ApplyResult::Granted { token } = result {
        assert!(token <= state.token_last(), "a granted token was issued");
        assert!(token > Token(TOKEN_FLOOR), "tokens start above the floor");
    }
    let key = command.key();
    let removed = before.lock(key).filter(|_| state.lock(key).is_none());
    match command {
        Command::Release { token, .. } | Command::Expire { token, .. } => {
            if let Some(lock) = removed {
                if lock.token != *token {
                    return Err(Violation::RemovedOtherToken { command: command.clone(), removed: lock.token });
                }
            }
        }
        Command::Grant { .. } => assert!(removed.is_none(), "a grant never removes a lock"),
        Command::Decline { .. } => assert_eq!(state.lock(key), before.lock(key), "a decline never changes a lock"),
    }
    // Nothing but the command's own key may change.
    for (other, lock) in before.locks().filter(|(other, _)| *other != key) {
        assert_eq!(state.lock(other), Some(lock), "{command:?} changed another key");
    }
    Ok(result)
}

/// How often each result came up, so the test can show its workload reaches every row.
#[derive(Debug, Default)]
struct Coverage {
    granted_new: u64,
    granted_retry: u64,
    grant_rejected: u64,
    released: u64,
    not_found: u64,
    expired: u64,
    expired_nothing: u64,
    declined: u64,
    noop: u64,
}

impl Coverage {
    fn count(&mut self, result: ApplyResult, token_issued: bool) {
        let counter = match result {
            ApplyResult::Granted { .. } if token_issued => &mut self.granted_new,
            ApplyResult::Granted { .. } => &mut self.granted_retry,
            ApplyResult::GrantRejected => &mut self.grant_rejected,
            ApplyResult::Released => &mut self.released,
            ApplyResult::NotFound => &mut self.not_found,
            ApplyResult::Expired { existed: true } => &mut self.expired,
            ApplyResult::Expired { existed: false } => &mut self.expired_nothing,
            ApplyResult::Declined { .. } => &mut self.declined,
            ApplyResult::Noop => &mut self.noop,
        };
        *counter += 1;
    }
}

/// Runs one seeded sequence; returns the first violation, if any.
fn run_sequence(seed: u64, variant: Variant, coverage: &mut Coverage) -> Result<(), Violation> {
    let mut workload = Workload::new(seed);
    let mut state = LockState::new(Token(TOKEN_FLOOR));
    let mut snapshot: Option<(LockState, Vec<Command>)> = None;
    for step in 0..COMMANDS_PER_SEQUENCE {
        if step == COMMANDS_PER_SEQUENCE / 2 {
            let json = serde_json::to_string(&state).expect("serialize");
            snapshot = Some((serde_json::from_str(&json).expect("deserialize"), Vec::new()));
        }
        let command = workload.command(&state);
        let token_last = state.token_last();
        let result = apply_checked(&mut state, &command, variant)?;
        coverage.count(result, state.token_last() != token_last);
        if let (ApplyResult::Granted { token }, Command::Grant { key, holder, .. }) = (result, &command) {
            workload.granted.push((key.clone(), token, *holder));
        }
        if let Some((_, replay)) = snapshot.as_mut() {
            replay.push(command);
        }
    }
    // A node that restored the mid-run snapshot and applied the rest agrees exactly.
    let (mut restored, replay) = snapshot.expect("the sequence is long enough for a snapshot");
    for command in &replay {
        restored.apply(command, variant);
    }
    assert_eq!(restored, state, "seed {seed}: snapshot and replay diverged");
    Ok(())
}

#[test]
fn default_variant_keeps_tokens_increasing_and_removals_matching() {
    let mut coverage = Coverage::default();
    for seed in 0..SEQUENCES {
        if let Err(violation) = run_sequence(seed, Variant::Default, &mut coverage) {
            panic!("seed {seed}: {violation}");
        }
    }
    // Every result row must come up often, or the properties were checked on a toy workload.
    let rows = [
        coverage.granted_new,
        coverage.granted_retry,
        coverage.grant_rejected,
        coverage.released,
        coverage.not_found,
        coverage.expired,
        coverage.expired_nothing,
        coverage.declined,
        coverage.noop,
    ];
    eprintln!("coverage over {SEQUENCES} sequences: {coverage:?}");
    assert!(rows.iter().all(|&count| count >= 1_000), "a result row is rarely reached: {coverage:?}");
}

#[test]
fn the_checks_catch_the_unsafe_variants() {
    // Proves the check above can fail: the token-ignoring variants must be
    // caught removing another holder's lock within a few sequences.
    for variant in [Variant::ExpireIgnoresToken, Variant::ReleaseIgnoresToken] {
        let mut coverage = Coverage::default();
        let caught =
            (0..SEQUENCES).find_map(|seed| run_sequence(seed, variant, &mut coverage).err().map(|v| (seed, v)));
        match caught {
            Some((seed, violation @ Violation::RemovedOtherToken { .. })) => {
                eprintln!("{variant:?} caught at seed {seed}: {violation}");
            }
            Some((seed, other)) => panic!("{variant:?} was caught for the wrong reason at seed {seed}: {other}"),
            None => panic!("{variant:?} was not caught in {SEQUENCES} sequences"),
        }
    }
}
