//! The protected resource (the shop database) in real SQL: SQLite or PostgreSQL.
//!
//! The rule is core's, unchanged: [`fencelock::resource::ResourceState::write`]
//! told as rows. Per key the database keeps the fence (the highest accepted
//! token and its holder), the floor a restore set, the status value and the
//! ledger; per client the first answers to its last
//! [`WRITES_REMEMBERED_PER_CLIENT`] writes; and one row saying whether the
//! image was restored and awaits its floor (node/sql/*.sql say which
//! invariant each table keeps).
//!
//! One write is one transaction: read the restore mark, the client's
//! remembered answer and the key's fence, decide with the pure functions
//! below (the token comparison itself is core's [`check_token`]), apply the
//! effect and remember the answer, commit. The check and the effect can
//! therefore not be interleaved with another write of the key, whichever
//! process or connection sends it:
//!
//! - SQLite: `BEGIN IMMEDIATE`, which takes the database's write lock before
//!   the first read, so concurrent writers queue (`busy_timeout`) instead of
//!   failing at commit.
//! - PostgreSQL: READ COMMITTED with row locks taken in one order: the
//!   restore row `FOR SHARE` (a restore or floor raise takes it `FOR UPDATE`
//!   and so waits for, and holds off, every write), then the client's row
//!   `FOR UPDATE` (its dedup window), then the key's row `FOR UPDATE`. Each
//!   write locks one client and one key after the shared restore row, so
//!   there is no lock cycle and no deadlock. Locks were chosen over
//!   SERIALIZABLE because a write then never aborts on a conflict: it waits,
//!   and there is no retry loop that could re-run a judgement.
//!
//! The API is async because tokio-postgres is. rusqlite is synchronous: its
//! calls run in `spawn_blocking`, because a commit waits for an fsync
//! (milliseconds) and would otherwise stall every task of that runtime thread.
//!
//! The variants of the resource rule that are a matter of the rule
//! (`sink-unfenced`, `second-path-unfenced`, `resource-no-dedup`,
//! `resource-restore-naive`) are supported, so a real database can show their
//! bugs too. The two that are a matter of durability (`sink-max-in-memory`,
//! `resource-sync-lazy`) are refused: a real database does not forget a
//! committed row because of a flag.

mod postgres;
mod sqlite;

use crate::client::{FloorError, FloorRead, FloorReader};
use fencelock::resource::WRITES_REMEMBERED_PER_CLIENT;
use fencelock::resource::{check_token, Fence, LockFloor, ResourceState, Write, WritePath, WriteVerdict};
use fencelock::{ClientId, Holder, Key, NodeId, RequestId, Token, Variant};
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

pub use postgres::PostgresResource;
pub use sqlite::SqliteResource;

/// The protected resource in one of the two databases.
pub enum SqlResource {
    Sqlite(SqliteResource),
    Postgres(PostgresResource),
}

/// A backup taken by [`SqlResource::backup`], to restore with [`SqlResource::restore`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backup {
    /// The operator's name for it.
    pub label: String,
    /// SQLite: the file `VACUUM INTO` wrote. PostgreSQL: `None`, the rows
    /// live in the database's backup tables under `label`.
    pub path: Option<PathBuf>,
}

/// Why a call to the resource failed (as opposed to a write being refused,
/// which is a [`WriteVerdict`]).
#[derive(Debug)]
pub enum ResourceError {
    Sqlite(rusqlite::Error),
    Postgres(tokio_postgres::Error),
    Io(std::io::Error),
    /// The URL is neither `sqlite:PATH`, a path, nor `postgres://…`.
    Url(String),
    /// A token, request or client id above what a signed 64-bit column holds.
    OutOfRange {
        what: &'static str,
        value: u64,
    },
    /// A variant the SQL resource does not implement.
    Variant(Variant),
    /// A row that breaks an invariant of the schema (written by someone else).
    Corrupt(String),
    /// A floor that contradicts itself (a held token above its counter).
    Floor(String),
    /// The blocking task running a SQLite call failed.
    Task(String),
    /// A backup label other than 1 to 64 of `[A-Za-z0-9_-]`.
    Label(String),
    /// No backup was taken under this label.
    NoBackup(String),
    /// The floor could not be read from the lock service.
    FloorRead(FloorError),
    /// Restores kept overtaking the floor reads meant for them.
    FloorOvertaken {
        rounds: usize,
    },
}

impl ResourceError {
    /// SQLite's answer to a write that waited out its busy timeout behind
    /// another connection's write lock: nothing was written, so the same
    /// write may be sent again.
    pub fn is_busy(&self) -> bool {
        matches!(
            self,
            ResourceError::Sqlite(rusqlite::Error::SqliteFailure(error, _))
                if matches!(error.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        )
    }
}

impl fmt::Display for ResourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResourceError::Sqlite(error) => write!(f, "sqlite: {error}"),
            ResourceError::Postgres(error) => write!(f, "postgres: {error}"),
            ResourceError::Io(error) => write!(f, "io: {error}"),
            ResourceError::Url(url) => {
                write!(f, "resource url {url:?} is neither sqlite:PATH, a path, nor postgres://…")
            }
            ResourceError::OutOfRange { what, value } => write!(f, "{what} {value} is above i64::MAX"),
            ResourceError::Variant(variant) => {
                write!(f, "variant {} is about durability, which the SQL resource does not fake", variant.name())
            }
            ResourceError::Corrupt(what) => write!(f, "corrupt resource row: {what}"),
            ResourceError::Floor(what) => write!(f, "invalid floor: {what}"),
            ResourceError::Task(what) => write!(f, "sqlite task: {what}"),
            ResourceError::Label(label) => write!(f, "backup label {label:?} is not 1 to 64 of [A-Za-z0-9_-]"),
            ResourceError::NoBackup(label) => write!(f, "no backup labelled {label:?} in this resource"),
            ResourceError::FloorRead(error) => write!(f, "floor read: {error}"),
            ResourceError::FloorOvertaken { rounds } => {
                write!(f, "a newer restore overtook each of {rounds} floor reads")
            }
        }
    }
}

impl std::error::Error for ResourceError {}

impl From<rusqlite::Error> for ResourceError {
    fn from(error: rusqlite::Error) -> ResourceError {
        ResourceError::Sqlite(error)
    }
}

impl From<tokio_postgres::Error> for ResourceError {
    fn from(error: tokio_postgres::Error) -> ResourceError {
        ResourceError::Postgres(error)
    }
}

impl From<FloorError> for ResourceError {
    fn from(error: FloorError) -> ResourceError {
        ResourceError::FloorRead(error)
    }
}

impl From<std::io::Error> for ResourceError {
    fn from(error: std::io::Error) -> ResourceError {
        ResourceError::Io(error)
    }
}

impl SqlResource {
    /// Opens (creating its tables if needed) the resource at `url` under the
    /// default, safe rule: `sqlite:PATH`, a bare path, or `postgres://…`.
    pub async fn open(url: &str) -> Result<SqlResource, ResourceError> {
        SqlResource::open_variant(url, Variant::Default).await
    }

    /// Opens the resource at `url` judging writes as core does under `variant`.
    pub async fn open_variant(url: &str, variant: Variant) -> Result<SqlResource, ResourceError> {
        if matches!(variant, Variant::SinkMaxInMemory | Variant::ResourceSyncLazy) {
            return Err(ResourceError::Variant(variant));
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(SqlResource::Postgres(PostgresResource::open(url, variant).await?));
        }
        let path = url.strip_prefix("sqlite:").unwrap_or(url);
        if path.is_empty() || path.contains("://") {
            return Err(ResourceError::Url(url.to_string()));
        }
        Ok(SqlResource::Sqlite(SqliteResource::open(PathBuf::from(path), variant).await?))
    }

    /// Checks and applies one write in one transaction; a retry of an
    /// answered write gets the original answer and has no second effect.
    pub async fn write(&mut self, write: &Write) -> Result<WriteVerdict, ResourceError> {
        match self {
            SqlResource::Sqlite(resource) => resource.write(write).await,
            SqlResource::Postgres(resource) => resource.write(write).await,
        }
    }

    /// Takes a consistent backup named `label`; writes wait for the copy
    /// (a later backup with the same label replaces it).
    pub async fn backup(&mut self, label: &str) -> Result<Backup, ResourceError> {
        match self {
            SqlResource::Sqlite(resource) => resource.backup(label).await,
            SqlResource::Postgres(resource) => resource.backup(label).await,
        }
    }

    /// The backup [`SqlResource::backup`] took under `label`, to restore from
    /// another process than the one that took it.
    pub fn backup_named(&self, label: &str) -> Result<Backup, ResourceError> {
        check_label(label)?;
        let path = match self {
            SqlResource::Sqlite(resource) => Some(resource.backup_path(label)),
            SqlResource::Postgres(_) => None,
        };
        Ok(Backup { label: label.to_string(), path })
    }

    /// Takes the resource's write lock in a transaction left open: every
    /// write waits until this process ends (`fencelock-node resource hold`,
    /// what a real run plays a crash of the resource as).
    pub async fn hold_writes(&mut self) -> Result<(), ResourceError> {
        match self {
            SqlResource::Sqlite(resource) => resource.hold_writes().await,
            SqlResource::Postgres(resource) => resource.hold_writes().await,
        }
    }

    /// Whether a backup was taken under `backup`'s label.
    pub async fn has_backup(&mut self, backup: &Backup) -> Result<bool, ResourceError> {
        match self {
            SqlResource::Sqlite(_) => Ok(backup.path.as_deref().is_some_and(std::path::Path::is_file)),
            SqlResource::Postgres(resource) => resource.has_backup(&backup.label).await,
        }
    }

    /// The operator's restore: puts `backup` back as the whole image and marks
    /// it restored by restore number `restore`, in one step, so that no write
    /// is served from the old image before its floor is raised. Like
    /// [`ResourceState::restored`].
    pub async fn restore(&mut self, backup: &Backup, restore: u64) -> Result<(), ResourceError> {
        match self {
            SqlResource::Sqlite(resource) => resource.restore(backup, restore).await,
            SqlResource::Postgres(resource) => resource.restore(backup, restore).await,
        }
    }

    /// The restore whose floors are still to be read, if any.
    pub async fn awaiting_floor(&mut self) -> Result<Option<u64>, ResourceError> {
        match self {
            SqlResource::Sqlite(resource) => resource.awaiting_floor().await,
            SqlResource::Postgres(resource) => resource.awaiting_floor().await,
        }
    }

    /// Raises every key's floor from a lock-service read taken after restore
    /// `restore`, and serves writes again; like [`ResourceState::raise_floor`].
    /// Returns whether the floor was taken (a floor of an overtaken restore is not).
    pub async fn raise_floor(&mut self, restore: u64, floor: &LockFloor) -> Result<bool, ResourceError> {
        for (key, fence) in &floor.held {
            if fence.token > floor.token_last {
                return Err(ResourceError::Floor(format!(
                    "{key} held with {} above the read's counter {}",
                    fence.token, floor.token_last
                )));
            }
        }
        match self {
            SqlResource::Sqlite(resource) => resource.raise_floor(restore, floor).await,
            SqlResource::Postgres(resource) => resource.raise_floor(restore, floor).await,
        }
    }

    /// The operator's step after [`SqlResource::restore`]: reads the floor
    /// from the lock service with `reader` and raises it, when the image
    /// awaits one; the real counterpart of the simulator's restored resource
    /// (`sim/src/nodes/resource.rs`). Returns the restore whose floor was
    /// raised and the floor, or `None` when no restore awaited a floor.
    ///
    /// The floor is read after the restore mark was seen, so the read is
    /// taken after the restore, as the rule needs. If another restore lands
    /// between the read and the raise, that floor is not taken (it may
    /// predate the newer restore) and the newer restore's floor is read in
    /// turn, at most [`FLOOR_ROUNDS_MAX`] times.
    pub async fn raise_floor_from(&mut self, reader: &mut FloorReader) -> Result<Option<RaisedFloor>, ResourceError> {
        for _ in 0..FLOOR_ROUNDS_MAX {
            let Some(restore) = self.awaiting_floor().await? else { return Ok(None) };
            reader.read_for(restore);
            let FloorRead { floor, from, read } = reader.read_floor_answered().await?;
            if self.raise_floor(restore, &floor).await? {
                return Ok(Some(RaisedFloor { restore, floor, from, read }));
            }
        }
        Err(ResourceError::FloorOvertaken { rounds: FLOOR_ROUNDS_MAX })
    }

    /// The whole stored state as core's [`ResourceState`], comparable with
    /// `==` to the model's (see [`Image::into_state`]).
    pub async fn state(&mut self) -> Result<ResourceState, ResourceError> {
        let image = match self {
            SqlResource::Sqlite(resource) => resource.image().await?,
            SqlResource::Postgres(resource) => resource.image().await?,
        };
        image.into_state()
    }
}

/// Floor reads [`SqlResource::raise_floor_from`] makes while newer restores
/// keep overtaking them; an operator restoring in a loop is told, not waited for.
pub const FLOOR_ROUNDS_MAX: usize = 4;

/// A floor [`SqlResource::raise_floor_from`] read and raised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaisedFloor {
    /// The restore it was read for.
    pub restore: u64,
    pub floor: LockFloor,
    /// The server that answered the read, and the read's id.
    pub from: NodeId,
    pub read: u64,
}

/// What a write found in its transaction before it was judged.
#[derive(Clone, Copy, Debug)]
struct Remembered {
    /// The stored first answer to this very write id, if any.
    verdict: Option<WriteVerdict>,
    /// The client's highest forgotten request id.
    forgotten_max: Option<RequestId>,
}

/// What the rule decided for a fresh (not retried) write of a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Judgement {
    verdict: WriteVerdict,
    /// The key's fence after the write (changed only if accepted).
    fence: Option<Fence>,
}

/// The answer to a retried write, as core's `ResourceState::retry_answer`.
fn retry_answer(remembered: Remembered, request: RequestId) -> Option<WriteVerdict> {
    if let Some(verdict) = remembered.verdict {
        return Some(WriteVerdict::Duplicate { accepted: verdict.is_accepted() });
    }
    match remembered.forgotten_max {
        Some(forgotten_max) if request <= forgotten_max => Some(WriteVerdict::DuplicateForgotten),
        _ => None,
    }
}

/// Whether `path` compares tokens under `variant` (core's `is_fenced`).
fn is_fenced(variant: Variant, path: WritePath) -> bool {
    match variant {
        Variant::SinkUnfenced => false,
        Variant::SecondPathUnfenced => path == WritePath::Status,
        _ => true,
    }
}

/// Whether `variant` keeps the table of answers (core's `ResourceNoDedup`).
fn dedups(variant: Variant) -> bool {
    variant != Variant::ResourceNoDedup
}

/// Whether a restore under `variant` waits for its floor (core's `ResourceRestoreNaive`).
fn restore_awaits_floor(variant: Variant) -> bool {
    variant != Variant::ResourceRestoreNaive
}

/// Judges a fresh write of a key whose row holds `fence` and `stale_through`.
fn judge(fence: Option<Fence>, stale_through: Option<Token>, write: &Write, variant: Variant) -> Judgement {
    let checked = if is_fenced(variant, write.path) {
        check_token(fence, stale_through, write.token, write.holder)
    } else {
        Ok(())
    };
    match checked {
        Ok(()) => Judgement { verdict: WriteVerdict::Accepted, fence: raised(fence, write.token, write.holder) },
        Err(rejected) => Judgement { verdict: rejected, fence },
    }
}

/// The fence raised to `token` if that is higher (core's `Record::raise_fence`):
/// under the unfenced variants a lower token may be accepted, and the fence
/// still keeps the highest seen.
fn raised(fence: Option<Fence>, token: Token, holder: Holder) -> Option<Fence> {
    let after = match fence {
        Some(fence) if fence.token >= token => Some(fence),
        _ => Some(Fence { token, holder }),
    };
    assert!(after.map(|fence| fence.token) >= fence.map(|fence| fence.token), "the fence never goes down");
    assert!(after.map(|fence| fence.token) >= Some(token), "the fence covers every accepted token");
    after
}

/// A first answer as stored in `answered_write`: its kind and the highest token it names.
fn verdict_row(verdict: WriteVerdict) -> (&'static str, Option<Token>) {
    match verdict {
        WriteVerdict::Accepted => ("accepted", None),
        WriteVerdict::RejectedStale { highest } => ("rejected_stale", Some(highest)),
        WriteVerdict::RejectedEqualToken { highest } => ("rejected_equal_token", Some(highest)),
        WriteVerdict::Duplicate { .. } | WriteVerdict::DuplicateForgotten | WriteVerdict::Unavailable => {
            unreachable!("only first answers are remembered, not {verdict}")
        }
    }
}

/// The stored first answer back from its row.
fn verdict_of_row(kind: &str, highest: Option<i64>) -> Result<WriteVerdict, ResourceError> {
    let highest = highest.map(|token| from_sql(token, "highest")).transpose()?.map(Token);
    match (kind, highest) {
        ("accepted", None) => Ok(WriteVerdict::Accepted),
        ("rejected_stale", Some(highest)) => Ok(WriteVerdict::RejectedStale { highest }),
        ("rejected_equal_token", Some(highest)) => Ok(WriteVerdict::RejectedEqualToken { highest }),
        _ => Err(ResourceError::Corrupt(format!("answered_write verdict {kind:?} with highest {highest:?}"))),
    }
}

/// A u64 of the core as a signed 64-bit column value.
fn to_sql(value: u64, what: &'static str) -> Result<i64, ResourceError> {
    i64::try_from(value).map_err(|_| ResourceError::OutOfRange { what, value })
}

/// A signed 64-bit column value back as the core's u64 (the schema checks it is not negative).
fn from_sql(value: i64, what: &'static str) -> Result<u64, ResourceError> {
    u64::try_from(value).map_err(|_| ResourceError::Corrupt(format!("negative {what} {value}")))
}

/// The fence columns of a key row back as a fence: whole or absent.
fn fence_of_row(token: Option<i64>, client: Option<i64>, request: Option<i64>) -> Result<Option<Fence>, ResourceError> {
    match (token, client, request) {
        (None, None, None) => Ok(None),
        (Some(token), Some(client), Some(request)) => {
            let client = u32::try_from(client).map_err(|_| ResourceError::Corrupt(format!("fence client {client}")))?;
            Ok(Some(Fence {
                token: Token(from_sql(token, "fence token")?),
                holder: Holder { client: ClientId(client), request: RequestId(from_sql(request, "fence request")?) },
            }))
        }
        _ => Err(ResourceError::Corrupt("a fence with some of its columns NULL".to_string())),
    }
}

/// A client column back as the core's id.
fn client_of(client: i64) -> Result<ClientId, ResourceError> {
    u32::try_from(client).map(ClientId).map_err(|_| ResourceError::Corrupt(format!("client {client}")))
}

/// The columns of a write that go into SQL, range-checked once.
struct WriteColumns {
    token: i64,
    client: i64,
    request: i64,
}

impl WriteColumns {
    fn of(write: &Write) -> Result<WriteColumns, ResourceError> {
        Ok(WriteColumns {
            token: to_sql(write.token.0, "token")?,
            client: i64::from(write.holder.client.0),
            request: to_sql(write.request.0, "request")?,
        })
    }
}

/// A fence as its three nullable columns: token, holder client, holder request.
type FenceColumns = (Option<i64>, Option<i64>, Option<i64>);

/// The fence as its three nullable columns.
fn fence_columns(fence: Option<Fence>) -> Result<FenceColumns, ResourceError> {
    match fence {
        None => Ok((None, None, None)),
        Some(fence) => Ok((
            Some(to_sql(fence.token.0, "fence token")?),
            Some(i64::from(fence.holder.client.0)),
            Some(to_sql(fence.holder.request.0, "fence request")?),
        )),
    }
}

/// One key's row and ledger as read for [`SqlResource::state`].
#[derive(Clone, Debug, Default)]
struct KeyImage {
    fence: Option<Fence>,
    stale_through: Option<Token>,
    value: String,
    ledger: Vec<(Token, String)>,
}

/// One client's remembered answers as read for [`SqlResource::state`].
#[derive(Clone, Debug, Default)]
struct ClientImage {
    verdicts: BTreeMap<RequestId, WriteVerdict>,
    forgotten_max: Option<RequestId>,
}

/// Every table's rows, read in one transaction.
#[derive(Clone, Debug, Default)]
struct Image {
    keys: BTreeMap<Key, KeyImage>,
    clients: BTreeMap<ClientId, ClientImage>,
    restored: Option<u64>,
    stale_through_new: Option<Token>,
}

impl Image {
    /// The rows as core's [`ResourceState`], through its serde form: the
    /// state's fields are private to core, and its serde form is the one the
    /// simulator persists (core's `serde_round_trip_keeps_everything` keeps it
    /// whole). If core renames a field, this fails loudly with a missing field.
    ///
    /// A client row with no remembered answer is left out: the SQL resource
    /// creates it to lock it before the first answer, and core creates the
    /// entry only with one.
    fn into_state(self) -> Result<ResourceState, ResourceError> {
        let mut records = serde_json::Map::new();
        for (key, image) in self.keys {
            let record = serde_json::json!({
                "fence": image.fence,
                "stale_through": image.stale_through,
                "value": image.value,
                "ledger": image.ledger,
            });
            records.insert(key.as_str().to_owned(), record);
        }
        let mut answered = serde_json::Map::new();
        for (client, image) in self.clients {
            if image.verdicts.is_empty() && image.forgotten_max.is_none() {
                continue;
            }
            let verdicts: serde_json::Map<String, serde_json::Value> = image
                .verdicts
                .iter()
                .map(|(request, verdict)| (request.0.to_string(), serde_json::json!(verdict)))
                .collect();
            let entry = serde_json::json!({ "verdicts": verdicts, "forgotten_max": image.forgotten_max });
            answered.insert(client.0.to_string(), entry);
        }
        let state = serde_json::json!({
            "records": records,
            "answered": answered,
            "restored": self.restored,
            "stale_through_new": self.stale_through_new,
        });
        serde_json::from_value(state).map_err(|error| ResourceError::Corrupt(format!("as ResourceState: {error}")))
    }
}

/// A floor's held keys, one fence per key (the last one named wins, as in core).
fn held_by_key(floor: &LockFloor) -> BTreeMap<&Key, Fence> {
    floor.held.iter().map(|(key, fence)| (key, *fence)).collect()
}

/// How many first answers a client's window keeps, as an SQL `OFFSET`.
const WINDOW: i64 = WRITES_REMEMBERED_PER_CLIENT as i64;

/// Checks a backup label: it becomes part of a file name (SQLite).
fn check_label(label: &str) -> Result<(), ResourceError> {
    let valid = !label.is_empty()
        && label.len() <= 64
        && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if valid {
        Ok(())
    } else {
        Err(ResourceError::Label(label.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(client: u32) -> Holder {
        Holder { client: ClientId(client), request: RequestId(1) }
    }

    #[test]
    fn a_fence_is_raised_only_upwards() {
        let fence = Some(Fence { token: Token(42), holder: holder(2) });
        assert_eq!(raised(fence, Token(41), holder(1)), fence);
        assert_eq!(raised(fence, Token(42), holder(1)), fence, "an equal token keeps the first holder");
        assert_eq!(raised(fence, Token(43), holder(1)), Some(Fence { token: Token(43), holder: holder(1) }));
        assert_eq!(raised(None, Token(1), holder(1)), Some(Fence { token: Token(1), holder: holder(1) }));
    }

    #[test]
    fn first_answers_round_trip_through_their_rows() {
        for verdict in [
            WriteVerdict::Accepted,
            WriteVerdict::RejectedStale { highest: Token(42) },
            WriteVerdict::RejectedEqualToken { highest: Token(41) },
        ] {
            let (kind, highest) = verdict_row(verdict);
            let highest = highest.map(|token| to_sql(token.0, "highest").expect("in range"));
            assert_eq!(verdict_of_row(kind, highest).expect("a valid row"), verdict);
        }
        assert!(verdict_of_row("accepted", Some(3)).is_err());
    }

    #[test]
    fn values_above_i64_are_refused_not_wrapped() {
        assert!(matches!(to_sql(u64::MAX, "token"), Err(ResourceError::OutOfRange { .. })));
        assert_eq!(to_sql(Token::epoch_base(3).0, "token").expect("in range"), 3 << 32);
    }

    #[test]
    fn an_empty_image_is_a_new_resource_state() {
        assert_eq!(Image::default().into_state().expect("valid"), ResourceState::new());
    }
}
