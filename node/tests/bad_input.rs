//! Bad input to the real binary ends with exit code 2 and one line on
//! stderr, never a panic: a cluster file with duplicate ids, a corrupt
//! cluster file, a data directory of another cluster, bad flags (of the
//! operator's restores too).

use crate::common;

use common::{run, serial, stderr, TestCluster};

fn assert_one_line_exit_2(output: &std::process::Output, expected: &str) {
    let err = stderr(output);
    assert_eq!(output.status.code(), Some(2), "exit 2 for {expected:?}; stderr {err:?}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err:?}");
    assert!(err.contains(expected), "{err:?} should say {expected:?}");
    assert!(!err.contains("panicked"), "no panic: {err:?}");
}

const TWO_NODES: &str = r#"cluster_id = "bad"
[[node]]
id = 0
addr = "127.0.0.1:1"
data_dir = "n0"
[[node]]
id = 0
addr = "127.0.0.1:2"
data_dir = "n1"
"#;

#[test]
fn duplicate_ids_and_a_corrupt_file_are_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("cluster.toml");
    std::fs::write(&file, TWO_NODES).expect("write");
    let path = file.display().to_string();
    assert_one_line_exit_2(&run(&["serve", "--config", &path, "--id", "0"]), "duplicate id 0");
    std::fs::write(&file, "cluster_id = \"x\"\n[[node]\nid = ").expect("write");
    assert_one_line_exit_2(&run(&["serve", "--config", &path, "--id", "0"]), &path);
    std::fs::write(&file, [0xff, 0xfe, 0x00, 0x41]).expect("write");
    assert_one_line_exit_2(&run(&["status", "--config", &path]), &path);
    assert_one_line_exit_2(&run(&["serve", "--config", "/nonexistent/cluster.toml", "--id", "0"]), "cannot read");
}

#[test]
fn a_data_dir_of_another_cluster_is_refused() {
    let _serial = serial();
    let first = TestCluster::up(1);
    let node_dir = first.cluster.nodes[0].data_dir.display().to_string();
    // Stopped, but its directory stays until `first` is dropped.
    fencelock_node::cluster::stop(&first.pids, std::time::Duration::from_secs(2));
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("cluster.toml");
    let text = format!("cluster_id = \"other\"\n[[node]]\nid = 0\naddr = \"127.0.0.1:9\"\ndata_dir = \"{node_dir}\"\n");
    std::fs::write(&file, text).expect("write");
    let output = run(&["serve", "--config", &file.display().to_string(), "--id", "0"]);
    assert_one_line_exit_2(&output, "other");
}

#[test]
fn a_restore_from_a_backup_never_taken_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("cluster.toml");
    let text = "cluster_id = \"restore\"\n[[node]]\nid = 0\naddr = \"127.0.0.1:9\"\ndata_dir = \"n0\"\n";
    std::fs::write(&file, text).expect("write");
    let resource = format!("sqlite:{}", dir.path().join("resource.sqlite").display());
    let config = file.display().to_string();
    let args =
        ["resource", "restore", "--resource", &resource, "--config", &config, "--label", "never", "--restore", "1"];
    assert_one_line_exit_2(&run(&args), "no backup labelled \"never\"");
}

#[test]
fn bad_flags_are_one_line() {
    assert_one_line_exit_2(&run(&["cluster", "up", "--nodes", "0", "--dir", "/tmp/x-never"]), "--nodes");
    assert_one_line_exit_2(&run(&["lock", "acquire", "k"]), "--dir DIR or --config FILE");
    assert_one_line_exit_2(&run(&["bench", "--clients", "0"]), "--clients");
    assert_one_line_exit_2(&run(&["lock", "renew", "k", "--token", "x", "--dir", "/tmp"]), "invalid value");
    assert_one_line_exit_2(&run(&["frobnicate"]), "unrecognized subcommand");
    let restore = ["resource", "restore", "--resource", "sqlite:/tmp/x-never", "--config", "/tmp/x-never.toml"];
    assert_one_line_exit_2(&run(&[&restore[..], &["--restore", "0"]].concat()), "--restore counts restores from 1");
    assert_one_line_exit_2(&run(&[&restore[..], &["--restore", "1", "--wait-ms", "0"]].concat()), "--wait-ms");
    let cluster_restore = ["cluster", "restore", "--from", "/tmp", "--config", "/tmp/x-never.toml"];
    assert_one_line_exit_2(&run(&[&cluster_restore[..], &["--epoch", "0"]].concat()), "--epoch counts");
    assert_one_line_exit_2(&run(&["admin", "cut", "--id", "0", "--peers", "x", "--dir", "/tmp"]), "invalid value");
}
