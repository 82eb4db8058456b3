use crate::raft::{Config, DurableState, RaftNode};
use crate::types::NodeId;

fn standard() -> Config {
    Config::standard(NodeId(0), vec![NodeId(0), NodeId(1), NodeId(2)])
}

fn field_of(config: Config) -> &'static str {
    config.validate().expect_err("config must be refused").field
}

#[test]
fn the_standard_config_is_valid() {
    assert_eq!(standard().validate(), Ok(()));
    let even = Config::standard(NodeId(1), vec![NodeId(0), NodeId(1)]);
    assert_eq!(even.validate(), Ok(()), "an even number of voters is allowed");
}

#[test]
fn every_error_names_its_field() {
    assert_eq!(field_of(Config { voters: vec![], ..standard() }), "voters");
    assert_eq!(field_of(Config { voters: vec![NodeId(1), NodeId(2)], ..standard() }), "voters");
    assert_eq!(field_of(Config { voters: vec![NodeId(0), NodeId(0)], ..standard() }), "voters");
    assert_eq!(field_of(Config { heartbeat_ticks: 0, ..standard() }), "heartbeat_ticks");
    assert_eq!(field_of(Config { election_ticks_min: 2, ..standard() }), "election_ticks_min");
    assert_eq!(field_of(Config { election_ticks_max: 10, ..standard() }), "election_ticks_max");
    assert_eq!(field_of(Config { entries_per_message_max: 0, ..standard() }), "entries_per_message_max");
    assert_eq!(field_of(Config { inflight_max: 0, ..standard() }), "inflight_max");
    assert_eq!(field_of(Config { snapshot_threshold_entries: 0, ..standard() }), "snapshot_threshold_entries");
}

#[test]
fn the_error_message_names_the_field() {
    let error = standard().validate().and(Config { inflight_max: 0, ..standard() }.validate()).unwrap_err();
    assert!(error.to_string().contains("`inflight_max`"), "{error}");
}

#[test]
fn new_refuses_an_invalid_config() {
    let result = RaftNode::new(Config { heartbeat_ticks: 0, ..standard() }, DurableState::default(), 7);
    assert_eq!(result.err().map(|error| error.field), Some("heartbeat_ticks"));
}

/// "At least 1" includes 1: a heartbeat every tick, one entry per append, one
/// append in flight and a snapshot after every applied entry are slow but
/// valid settings, and a test may need exactly them.
#[test]
fn a_value_of_one_is_accepted_where_at_least_one_is_asked() {
    let smallest = Config {
        heartbeat_ticks: 1,
        election_ticks_min: 2,
        election_ticks_max: 3,
        entries_per_message_max: 1,
        inflight_max: 1,
        snapshot_threshold_entries: 1,
        ..standard()
    };
    assert_eq!(smallest.validate(), Ok(()));
}
