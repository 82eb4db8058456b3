//! The cluster file: one TOML file that every process of a cluster reads.
//!
//! ```toml
//! cluster_id = "c-7f3a"
//! lease_ms = 2000          # the lease a client asks for unless told otherwise
//! heartbeat_ms = 40        # Raft timing, with the simulator model's names
//! election_ms_min = 100
//! election_ms_max = 200
//! admin = false            # accept admin requests (fault injection, clock)
//! history = "history"      # optional: a directory for JSON-lines histories
//! variant = "default"      # optional: a protocol variant (`fencesim variants`)
//!
//! [[node]]
//! id = 0
//! addr = "127.0.0.1:7100"
//! data_dir = "node-0"
//! ```
//!
//! The timing keys take the ranges and the cross-key rules of the
//! simulator's model (`sim/src/model.rs`, `KEYS` and `validate_raft_timing`),
//! with the same messages but "config key" for "model key": a cluster that
//! runs for real runs with timing the simulator can explore. The rules are
//! restated here rather than shared because `node` must not depend on `sim`
//! (madsim); a unit test pins the ranges. Relative paths are relative to the
//! file's directory, so a cluster directory can move as a whole.
//!
//! Every error is one line that names the file and, where there is one, the
//! key: a process started with a bad file exits 2 before it binds a port.

use fencelock::raft::TICK_MS_STANDARD;
use fencelock::{NodeId, Variant};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Servers per cluster: Raft's majorities past nine buy nothing on one machine.
pub const NODES_MAX: usize = 9;
/// The longest cluster file read; a cluster file is a few hundred bytes.
const FILE_LEN_MAX: u64 = 64 * 1024;
/// The longest cluster id: it is written into every data directory.
const CLUSTER_ID_LEN_MAX: usize = 64;

/// The cluster file as written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    pub cluster_id: String,
    #[serde(default = "default_lease_ms")]
    pub lease_ms: u64,
    #[serde(default = "default_heartbeat_ms")]
    pub heartbeat_ms: u64,
    #[serde(default = "default_election_ms_min")]
    pub election_ms_min: u64,
    #[serde(default = "default_election_ms_max")]
    pub election_ms_max: u64,
    /// The drift bound a client's lease belief assumes (the model's key).
    #[serde(default = "default_drift_ppm_max")]
    pub drift_ppm_max: u64,
    #[serde(default)]
    pub admin: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<PathBuf>,
    /// The protocol variant every process of the cluster runs (`default`
    /// unless told): servers, clients and the resource read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    pub node: Vec<NodeEntry>,
}

/// One server of the cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeEntry {
    pub id: u8,
    pub addr: String,
    pub data_dir: PathBuf,
}

// The standard model's values (sim/src/model.rs, `Model::default`).
fn default_lease_ms() -> u64 {
    2_000
}
fn default_heartbeat_ms() -> u64 {
    40
}
fn default_election_ms_min() -> u64 {
    100
}
fn default_election_ms_max() -> u64 {
    200
}
fn default_drift_ppm_max() -> u64 {
    500
}

/// A validated cluster: node `i` of `nodes` is `NodeId(i)`, paths are absolute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cluster {
    pub file: PathBuf,
    pub cluster_id: String,
    pub lease_ms: u64,
    pub heartbeat_ms: u64,
    pub election_ms_min: u64,
    pub election_ms_max: u64,
    pub drift_ppm_max: u64,
    pub admin: bool,
    pub history: Option<PathBuf>,
    pub variant: Variant,
    pub nodes: Vec<Node>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub id: NodeId,
    pub addr: SocketAddr,
    pub data_dir: PathBuf,
}

impl Cluster {
    /// Reads and validates the cluster file at `path`.
    pub fn load(path: &Path) -> Result<Cluster, String> {
        let origin = path.display().to_string();
        let metadata = std::fs::metadata(path).map_err(|e| format!("{origin}: cannot read: {e}"))?;
        if metadata.len() > FILE_LEN_MAX {
            return Err(format!("{origin}: {} bytes, more than a cluster file's {FILE_LEN_MAX}", metadata.len()));
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("{origin}: cannot read: {e}"))?;
        let base = path.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        Cluster::parse(&text, &origin, &base).map(|mut cluster| {
            cluster.file = path.to_path_buf();
            cluster
        })
    }

    /// Parses a cluster file's text; `origin` names it in errors and
    /// relative paths are taken from `base`.
    pub fn parse(text: &str, origin: &str, base: &Path) -> Result<Cluster, String> {
        let file: ClusterFile = toml::from_str(text).map_err(|e| toml_error(origin, text, &e))?;
        file.validate().map_err(|e| format!("{origin}: {e}"))?;
        let absolute = |p: &Path| if p.is_absolute() { p.to_path_buf() } else { base.join(p) };
        let mut nodes: Vec<Node> = file
            .node
            .iter()
            .map(|n| Node {
                id: NodeId(n.id),
                addr: n.addr.parse().expect("validated above"),
                data_dir: absolute(&n.data_dir),
            })
            .collect();
        nodes.sort_by_key(|n| n.id);
        let variant = file.variant();
        Ok(Cluster {
            file: PathBuf::from(origin),
            cluster_id: file.cluster_id,
            lease_ms: file.lease_ms,
            heartbeat_ms: file.heartbeat_ms,
            election_ms_min: file.election_ms_min,
            election_ms_max: file.election_ms_max,
            drift_ppm_max: file.drift_ppm_max,
            admin: file.admin,
            history: file.history.as_deref().map(absolute),
            variant,
            nodes,
        })
    }

    pub fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(usize::from(id.0))
    }

    pub fn node_count(&self) -> u8 {
        u8::try_from(self.nodes.len()).expect("at most NODES_MAX nodes")
    }
}

impl ClusterFile {
    /// Checks every key; the error names it.
    pub fn validate(&self) -> Result<(), String> {
        if self.cluster_id.is_empty() || self.cluster_id.len() > CLUSTER_ID_LEN_MAX {
            return Err(format!("config key `cluster_id` must be 1..={CLUSTER_ID_LEN_MAX} bytes"));
        }
        if !self.cluster_id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(format!("config key `cluster_id` must be letters, digits, - and _, got {:?}", self.cluster_id));
        }
        for (name, value, min, max) in [
            ("lease_ms", self.lease_ms, 100, 600_000),
            ("heartbeat_ms", self.heartbeat_ms, 10, 990),
            ("election_ms_min", self.election_ms_min, 20, 1_990),
            ("election_ms_max", self.election_ms_max, 30, 2_000),
            ("drift_ppm_max", self.drift_ppm_max, 0, 100_000),
        ] {
            if !(min..=max).contains(&value) {
                return Err(format!("config key `{name}` must be in {min}..={max}, got {value}"));
            }
        }
        self.validate_raft_timing()?;
        if let Some(name) = &self.variant {
            let variant = name.parse::<Variant>().map_err(|e| format!("config key `variant`: {e}"))?;
            buildable(variant).map_err(|e| format!("config key `variant`: {e}"))?;
        }
        self.validate_nodes()
    }

    fn variant(&self) -> Variant {
        self.variant.as_deref().map_or(Variant::Default, |name| name.parse().expect("validated"))
    }

    /// The model's `validate_raft_timing`, word for word but for "config key".
    fn validate_raft_timing(&self) -> Result<(), String> {
        let tick = TICK_MS_STANDARD;
        for (name, ms) in [
            ("heartbeat_ms", self.heartbeat_ms),
            ("election_ms_min", self.election_ms_min),
            ("election_ms_max", self.election_ms_max),
        ] {
            if ms == 0 || ms % tick != 0 {
                return Err(format!("config key `{name}` must be a positive multiple of the {tick} ms tick, got {ms}"));
            }
        }
        if self.election_ms_min < 2 * self.heartbeat_ms {
            return Err(format!(
                "config key `election_ms_min` must be at least twice `heartbeat_ms` ({}), got {}",
                self.heartbeat_ms, self.election_ms_min
            ));
        }
        if self.election_ms_max <= self.election_ms_min {
            return Err(format!(
                "config key `election_ms_max` must be above `election_ms_min` ({}) and at most 2000, got {}",
                self.election_ms_min, self.election_ms_max
            ));
        }
        Ok(())
    }

    /// Ids `0..n` once each, distinct loopback ports, distinct data directories.
    fn validate_nodes(&self) -> Result<(), String> {
        if self.node.is_empty() || self.node.len() > NODES_MAX {
            return Err(format!("config key `node` must list 1..={NODES_MAX} nodes, got {}", self.node.len()));
        }
        let mut ids = BTreeSet::new();
        let mut ports = BTreeSet::new();
        let mut dirs = BTreeSet::new();
        for node in &self.node {
            if !ids.insert(node.id) {
                return Err(format!("config key `node.id`: duplicate id {}", node.id));
            }
            let addr: SocketAddr = node.addr.parse().map_err(|_| {
                format!("config key `node.addr` of node {}: not an IP:PORT address: {:?}", node.id, node.addr)
            })?;
            // The wire carries no authentication: a cluster stays on one machine.
            if !addr.ip().is_loopback() {
                return Err(format!("config key `node.addr` of node {}: {addr} is not a loopback address", node.id));
            }
            if addr.port() == 0 {
                return Err(format!("config key `node.addr` of node {}: port 0 is not a fixed port", node.id));
            }
            if !ports.insert(addr.port()) {
                return Err(format!("config key `node.addr` of node {}: duplicate port {}", node.id, addr.port()));
            }
            if !dirs.insert(node.data_dir.clone()) {
                return Err(format!(
                    "config key `node.data_dir` of node {}: duplicate directory {}",
                    node.id,
                    node.data_dir.display()
                ));
            }
        }
        // The client library numbers servers 0..n (`ClientConfig::nodes`).
        let expected: BTreeSet<u8> = (0..self.node.len() as u8).collect();
        if ids != expected {
            return Err(format!(
                "config key `node.id`: ids must be 0..{} without gaps, got {:?}",
                self.node.len(),
                ids
            ));
        }
        Ok(())
    }
}

/// Whether real processes can run `variant` (`Variant::runs_real`), as an error line.
pub fn buildable(variant: Variant) -> Result<(), String> {
    variant.runs_real().map_err(|why| format!("variant `{}` cannot run as real processes: {why}", variant.name()))
}

/// A TOML error as one line: `FILE:LINE:COL: message`.
fn toml_error(origin: &str, text: &str, error: &toml::de::Error) -> String {
    let message = error.message().lines().next().unwrap_or("invalid TOML").trim();
    let Some(span) = error.span() else { return format!("{origin}: {message}") };
    let start = span.start.min(text.len());
    let line = text[..start].matches('\n').count() + 1;
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let column = text[line_start..start].chars().count() + 1;
    format!("{origin}:{line}:{column}: {message}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
cluster_id = "c1"
[[node]]
id = 0
addr = "127.0.0.1:7100"
data_dir = "n0"
[[node]]
id = 1
addr = "127.0.0.1:7101"
data_dir = "/abs/n1"
[[node]]
id = 2
addr = "127.0.0.1:7102"
data_dir = "n2"
"#;

    fn parse(text: &str) -> Result<Cluster, String> {
        Cluster::parse(text, "cluster.toml", Path::new("/base"))
    }

    #[test]
    fn a_good_file_takes_the_standard_timing_and_absolute_paths() {
        let cluster = parse(GOOD).expect("valid");
        assert_eq!((cluster.heartbeat_ms, cluster.election_ms_min, cluster.election_ms_max), (40, 100, 200));
        assert_eq!(cluster.lease_ms, 2_000);
        assert_eq!(cluster.nodes[0].data_dir, PathBuf::from("/base/n0"));
        assert_eq!(cluster.nodes[1].data_dir, PathBuf::from("/abs/n1"));
        assert!(!cluster.admin);
        assert_eq!(cluster.variant, Variant::Default);
        let unfenced = parse(&format!("variant = \"sink-unfenced\"\n{GOOD}")).expect("valid");
        assert_eq!(unfenced.variant, Variant::SinkUnfenced);
    }

    /// A change to the good file.
    type Edit = dyn Fn(&str) -> String;

    fn error_of(edit: impl Fn(&str) -> String) -> String {
        let error = parse(&edit(GOOD)).expect_err("invalid");
        assert!(!error.contains('\n'), "one line: {error}");
        assert!(error.starts_with("cluster.toml"), "names the file: {error}");
        error
    }

    #[test]
    fn every_bad_input_is_one_line_naming_the_key() {
        let cases: [(&Edit, &str); 10] = [
            (&|t| format!("variant = \"sink-unfence\"\n{t}"), "config key `variant`: unknown variant `sink-unfence`"),
            (&|t| format!("variant = \"sink-max-in-memory\"\n{t}"), "cannot run as real processes"),
            (&|t| t.replace("id = 1", "id = 0"), "duplicate id 0"),
            (&|t| t.replace("7101", "7100"), "duplicate port 7100"),
            (&|t| t.replace("127.0.0.1:7102", "10.0.0.5:7102"), "not a loopback address"),
            (&|t| format!("colour = 3\n{t}"), "unknown field `colour`"),
            (&|t| format!("heartbeat_ms = 15\n{t}"), "config key `heartbeat_ms` must be a positive multiple"),
            (&|t| format!("election_ms_min = 30\n{t}"), "config key `election_ms_min` must be at least twice"),
            (&|t| format!("election_ms_max = 100\n{t}"), "config key `election_ms_max` must be above"),
            (&|t| t.replace("id = 2", "id = 5"), "without gaps"),
        ];
        for (edit, expected) in cases {
            let error = error_of(edit);
            assert!(error.contains(expected), "{error:?} should say {expected:?}");
        }
        let error = error_of(|t| format!("lease_ms = 50\n{t}"));
        assert_eq!(error, "cluster.toml: config key `lease_ms` must be in 100..=600000, got 50");
        let error = error_of(|_| "cluster_id = [".to_string());
        assert!(error.starts_with("cluster.toml:1:"), "{error}");
    }
}
