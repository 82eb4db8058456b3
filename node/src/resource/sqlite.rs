//! The protected resource in one SQLite file: each write one `BEGIN IMMEDIATE`
//! transaction, backups by `VACUUM INTO`, restores by copying a backup's rows
//! over the live ones (marked restored) in one `BEGIN IMMEDIATE` transaction.
//!
//! Any number of processes may share the file (`fencesim real` runs one
//! worker process per client and the operator's restores as processes of
//! their own): a restore is a transaction of the live file, so every
//! connection sees the old image or the restored, marked one.
//!
//! rusqlite is synchronous; every call runs in `spawn_blocking` on the one
//! connection, behind a mutex (module doc of `resource`).

use super::{
    check_label, client_of, dedups, fence_columns, fence_of_row, from_sql, held_by_key, judge, raised,
    restore_awaits_floor, retry_answer, to_sql, verdict_of_row, verdict_row, Backup, ClientImage, Image, KeyImage,
    Remembered, ResourceError, WriteColumns, WINDOW,
};
use fencelock::resource::{LockFloor, Write, WritePath, WriteVerdict};
use fencelock::{Key, RequestId, Token, Variant};
use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SCHEMA: &str = include_str!("../../sql/sqlite.sql");

/// How long a write waits for another process's write lock before it fails.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

const SELECT_META: &str = "SELECT restored, stale_through_new FROM resource_meta WHERE id = 1";
const SELECT_FORGOTTEN: &str = "SELECT forgotten_max FROM answered_client WHERE client = ?1";
const SELECT_ANSWER: &str = "SELECT verdict, highest FROM answered_write WHERE client = ?1 AND request = ?2";
const INSERT_KEY: &str = "INSERT OR IGNORE INTO resource_key (key, stale_through) VALUES (?1, ?2)";
const SELECT_KEY: &str =
    "SELECT fence_token, fence_client, fence_request, stale_through FROM resource_key WHERE key = ?1";
const UPDATE_FENCE: &str =
    "UPDATE resource_key SET fence_token = ?2, fence_client = ?3, fence_request = ?4 WHERE key = ?1";
const UPDATE_VALUE: &str = "UPDATE resource_key SET value = ?2 WHERE key = ?1";
const INSERT_LINE: &str = "INSERT INTO ledger_line (key, seq, token, line) \
     SELECT ?1, COALESCE(MAX(seq), 0) + 1, ?2, ?3 FROM ledger_line WHERE key = ?1";
const INSERT_CLIENT: &str = "INSERT OR IGNORE INTO answered_client (client) VALUES (?1)";
const INSERT_ANSWER: &str = "INSERT INTO answered_write (client, request, verdict, highest) VALUES (?1, ?2, ?3, ?4)";
/// The highest of the client's answers beyond the newest `WINDOW`.
const SELECT_BEYOND_WINDOW: &str =
    "SELECT request FROM answered_write WHERE client = ?1 ORDER BY request DESC LIMIT 1 OFFSET ?2";
const DELETE_ANSWERS_THROUGH: &str = "DELETE FROM answered_write WHERE client = ?1 AND request <= ?2";
/// SQLite's two-argument MAX is NULL if either is; the COALESCE makes it
/// core's `Option::max` (every stored value is at least 0).
const RAISE_FORGOTTEN: &str =
    "UPDATE answered_client SET forgotten_max = MAX(COALESCE(forgotten_max, 0), ?2) WHERE client = ?1";
const RAISE_STALE_ALL: &str = "UPDATE resource_key SET stale_through = MAX(COALESCE(stale_through, 0), ?1)";
const RAISE_STALE_NEW: &str =
    "UPDATE resource_meta SET stale_through_new = MAX(COALESCE(stale_through_new, 0), ?1) WHERE id = 1";
const CLEAR_STALE: &str = "UPDATE resource_key SET stale_through = NULL WHERE key = ?1";
const SET_RESTORED: &str = "UPDATE resource_meta SET restored = ?1 WHERE id = 1";

/// The resource in the SQLite file at `path`.
pub struct SqliteResource {
    path: PathBuf,
    connection: Arc<Mutex<Connection>>,
    variant: Variant,
}

impl SqliteResource {
    pub(super) async fn open(path: PathBuf, variant: Variant) -> Result<SqliteResource, ResourceError> {
        let opened = path.clone();
        let connection = blocking(move || connect(&opened)).await?;
        Ok(SqliteResource { path, connection: Arc::new(Mutex::new(connection)), variant })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the backup labelled `label` is (or will be) written.
    pub(super) fn backup_path(&self, label: &str) -> PathBuf {
        backup_path(&self.path, label)
    }

    pub(super) async fn write(&mut self, write: &Write) -> Result<WriteVerdict, ResourceError> {
        let write = write.clone();
        let variant = self.variant;
        self.with_connection(move |connection| write_once(connection, &write, variant)).await
    }

    pub(super) async fn backup(&mut self, label: &str) -> Result<Backup, ResourceError> {
        check_label(label)?;
        let file = backup_path(&self.path, label);
        let target = file.clone();
        self.with_connection(move |connection| {
            // VACUUM INTO refuses to overwrite; a backup of the same label replaces the older one.
            remove_if_present(&target)?;
            let target = target.to_str().ok_or_else(|| ResourceError::Url(target.display().to_string()))?;
            connection.execute("VACUUM INTO ?1", [target])?;
            Ok(())
        })
        .await?;
        Ok(Backup { label: label.to_string(), path: Some(file) })
    }

    pub(super) async fn restore(&mut self, backup: &Backup, restore: u64) -> Result<(), ResourceError> {
        let source = backup.path.clone().ok_or_else(|| ResourceError::NoBackup(backup.label.clone()))?;
        if !source.is_file() {
            return Err(ResourceError::NoBackup(backup.label.clone()));
        }
        let mark = restore_awaits_floor(self.variant).then(|| to_sql(restore, "restore")).transpose()?;
        self.with_connection(move |connection| restore_file(connection, &source, mark)).await
    }

    /// Begins a write transaction and leaves it open: every other writer
    /// waits (busy timeout) until this connection's process ends.
    pub(super) async fn hold_writes(&mut self) -> Result<(), ResourceError> {
        self.with_connection(|connection| Ok(connection.execute_batch("BEGIN IMMEDIATE")?)).await
    }

    pub(super) async fn awaiting_floor(&mut self) -> Result<Option<u64>, ResourceError> {
        self.with_connection(|connection| {
            let restored: Option<i64> = connection.prepare_cached(SELECT_META)?.query_row([], |row| row.get(0))?;
            restored.map(|restore| from_sql(restore, "restore")).transpose()
        })
        .await
    }

    pub(super) async fn raise_floor(&mut self, restore: u64, floor: &LockFloor) -> Result<bool, ResourceError> {
        let floor = floor.clone();
        self.with_connection(move |connection| raise_floor_once(connection, restore, &floor)).await
    }

    pub(super) async fn image(&mut self) -> Result<Image, ResourceError> {
        self.with_connection(|connection| read_image(&connection.transaction()?)).await
    }

    /// Runs `call` on the connection in a blocking task.
    async fn with_connection<T, F>(&self, call: F) -> Result<T, ResourceError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, ResourceError> + Send + 'static,
    {
        let connection = Arc::clone(&self.connection);
        blocking(move || {
            // A call that panicked mid-transaction left nothing committed (the
            // transaction rolled back on drop), so a poisoned lock is still usable.
            let mut connection = connection.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            call(&mut connection)
        })
        .await
    }
}

async fn blocking<T, F>(call: F) -> Result<T, ResourceError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ResourceError> + Send + 'static,
{
    tokio::task::spawn_blocking(call).await.map_err(|error| ResourceError::Task(error.to_string()))?
}

/// Opens the file and creates the tables if they are missing.
fn connect(path: &Path) -> Result<Connection, ResourceError> {
    let connection = Connection::open(path)?;
    connection.busy_timeout(BUSY_TIMEOUT)?;
    // An accepted write must be on disk before its writer hears so: a rollback
    // journal with a full fsync at every commit.
    connection.pragma_update(None, "journal_mode", "DELETE")?;
    connection.pragma_update(None, "synchronous", "FULL")?;
    connection.pragma_update(None, "foreign_keys", "ON")?;
    connection.execute_batch(SCHEMA)?;
    // Every statement is prepared once per connection and kept (about twenty:
    // a write's, a restore's and the image's reads), where each call parsed
    // its SQL again.
    connection.set_prepared_statement_cache_capacity(STATEMENTS_CACHED);
    Ok(connection)
}

/// Room in the connection's statement cache: more than the statements this file runs.
const STATEMENTS_CACHED: usize = 32;

/// One write, one `BEGIN IMMEDIATE` transaction: a return before the commit
/// drops the transaction, which rolls it back, so a write that was not
/// judged leaves nothing behind.
fn write_once(connection: &mut Connection, write: &Write, variant: Variant) -> Result<WriteVerdict, ResourceError> {
    let columns = WriteColumns::of(write)?;
    let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let (restored, stale_through_new): (Option<i64>, Option<i64>) =
        tx.prepare_cached(SELECT_META)?.query_row([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    if restored.is_some() {
        return Ok(WriteVerdict::Unavailable);
    }
    let remembered = read_remembered(&tx, &columns)?;
    if let Some(answer) = retry_answer(remembered, write.request) {
        return Ok(answer);
    }
    tx.prepare_cached(INSERT_KEY)?.execute(params![write.key.as_str(), stale_through_new])?;
    let (token, client, request, stale_through): (Option<i64>, Option<i64>, Option<i64>, Option<i64>) = tx
        .prepare_cached(SELECT_KEY)?
        .query_row([&write.key.as_str()], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)))?;
    let fence = fence_of_row(token, client, request)?;
    let stale_through = stale_through.map(|token| from_sql(token, "stale_through")).transpose()?.map(Token);
    let judgement = judge(fence, stale_through, write, variant);
    if judgement.verdict.is_accepted() {
        let (token, client, request) = fence_columns(judgement.fence)?;
        tx.prepare_cached(UPDATE_FENCE)?.execute(params![write.key.as_str(), token, client, request])?;
        match write.path {
            WritePath::Status => tx.prepare_cached(UPDATE_VALUE)?.execute(params![write.key.as_str(), write.value])?,
            WritePath::Ledger => {
                tx.prepare_cached(INSERT_LINE)?.execute(params![write.key.as_str(), columns.token, write.value])?
            }
        };
    }
    // The one place Variant::ResourceNoDedup is consulted, as in core.
    if dedups(variant) {
        remember(&tx, &columns, judgement.verdict)?;
    }
    tx.commit()?;
    Ok(judgement.verdict)
}

/// The client's stored answer to this write id and its forgotten bound.
fn read_remembered(tx: &Transaction<'_>, columns: &WriteColumns) -> Result<Remembered, ResourceError> {
    let forgotten_max: Option<i64> =
        tx.prepare_cached(SELECT_FORGOTTEN)?.query_row([columns.client], |row| row.get(0)).optional()?.flatten();
    let answer: Option<(String, Option<i64>)> = tx
        .prepare_cached(SELECT_ANSWER)?
        .query_row([columns.client, columns.request], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    Ok(Remembered {
        verdict: answer.map(|(kind, highest)| verdict_of_row(&kind, highest)).transpose()?,
        forgotten_max: forgotten_max.map(|request| from_sql(request, "forgotten_max")).transpose()?.map(RequestId),
    })
}

/// Stores the first answer and drops the client's answers beyond the window,
/// raising its forgotten bound to the highest dropped (core's `remember`).
fn remember(tx: &Transaction<'_>, columns: &WriteColumns, verdict: WriteVerdict) -> Result<(), ResourceError> {
    let (kind, highest) = verdict_row(verdict);
    let highest = highest.map(|token| to_sql(token.0, "highest")).transpose()?;
    tx.prepare_cached(INSERT_CLIENT)?.execute([columns.client])?;
    tx.prepare_cached(INSERT_ANSWER)?.execute(params![columns.client, columns.request, kind, highest])?;
    let dropped_max: Option<i64> =
        tx.prepare_cached(SELECT_BEYOND_WINDOW)?.query_row([columns.client, WINDOW], |row| row.get(0)).optional()?;
    if let Some(dropped_max) = dropped_max {
        tx.prepare_cached(DELETE_ANSWERS_THROUGH)?.execute([columns.client, dropped_max])?;
        tx.prepare_cached(RAISE_FORGOTTEN)?.execute([columns.client, dropped_max])?;
    }
    Ok(())
}

/// Core's `raise_floor` in one `BEGIN IMMEDIATE` transaction.
fn raise_floor_once(connection: &mut Connection, restore: u64, floor: &LockFloor) -> Result<bool, ResourceError> {
    let restore = to_sql(restore, "restore")?;
    let token_last = to_sql(floor.token_last.0, "token_last")?;
    let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let restored: Option<i64> = tx.prepare_cached(SELECT_META)?.query_row([], |row| row.get(0))?;
    if restored != Some(restore) {
        return Ok(false);
    }
    // Every key free at the read: tokens through the read's counter are stale.
    // The held keys get the same here and lose it below, as in core.
    tx.prepare_cached(RAISE_STALE_ALL)?.execute([token_last])?;
    tx.prepare_cached(RAISE_STALE_NEW)?.execute([token_last])?;
    for (key, fence) in held_by_key(floor) {
        tx.prepare_cached(INSERT_KEY)?.execute(params![key.as_str(), Option::<i64>::None])?;
        let (token, client, request): (Option<i64>, Option<i64>, Option<i64>) = tx
            .prepare_cached(SELECT_KEY)?
            .query_row([&key.as_str()], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?;
        let (token, client, request) =
            fence_columns(raised(fence_of_row(token, client, request)?, fence.token, fence.holder))?;
        tx.prepare_cached(UPDATE_FENCE)?.execute(params![key.as_str(), token, client, request])?;
        tx.prepare_cached(CLEAR_STALE)?.execute([&key.as_str()])?;
    }
    tx.prepare_cached(SET_RESTORED)?.execute([Option::<i64>::None])?;
    tx.commit()?;
    Ok(true)
}

/// The tables of an image, parents before the tables that refer to them.
const TABLES: [&str; 5] = ["resource_meta", "resource_key", "ledger_line", "answered_client", "answered_write"];

/// Puts the rows of the backup file at `source` in place of the live rows,
/// marked restored (`mark`), in one `BEGIN IMMEDIATE` transaction.
///
/// Every process with the file open sees the old image or the restored one,
/// marked, and never the backup's rows unmarked: the swap is a transaction
/// of the live file, not a rename under the other connections' feet (a
/// process that kept the old file open would go on writing to it).
fn restore_file(connection: &mut Connection, source: &Path, mark: Option<i64>) -> Result<(), ResourceError> {
    if !source.is_file() {
        // ATTACH would create an empty database and restore nothing.
        let missing = std::io::Error::new(std::io::ErrorKind::NotFound, format!("no backup at {}", source.display()));
        return Err(missing.into());
    }
    let source = source.to_str().ok_or_else(|| ResourceError::Url(source.display().to_string()))?;
    connection.execute("ATTACH DATABASE ?1 AS backup", [source])?;
    let restored = copy_rows(connection, mark);
    let detached = connection.execute("DETACH DATABASE backup", []);
    restored?;
    detached?;
    Ok(())
}

/// The backup's rows over the live ones, in one transaction.
fn copy_rows(connection: &mut Connection, mark: Option<i64>) -> Result<(), ResourceError> {
    let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    for table in TABLES.iter().rev() {
        tx.execute(&format!("DELETE FROM main.{table}"), [])?;
    }
    for table in TABLES {
        tx.execute(&format!("INSERT INTO main.{table} SELECT * FROM backup.{table}"), [])?;
    }
    if let Some(restore) = mark {
        tx.prepare_cached(SET_RESTORED)?.execute([restore])?;
    }
    tx.commit()?;
    Ok(())
}

/// Every table, read in one transaction.
fn read_image(tx: &Transaction<'_>) -> Result<Image, ResourceError> {
    let mut image = Image::default();
    let (restored, stale_through_new): (Option<i64>, Option<i64>) =
        tx.prepare_cached(SELECT_META)?.query_row([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    image.restored = restored.map(|restore| from_sql(restore, "restore")).transpose()?;
    image.stale_through_new =
        stale_through_new.map(|token| from_sql(token, "stale_through_new")).transpose()?.map(Token);
    let mut keys = tx.prepare_cached(
        "SELECT key, fence_token, fence_client, fence_request, stale_through, value FROM resource_key ORDER BY key",
    )?;
    let mut rows = keys.query([])?;
    while let Some(row) = rows.next()? {
        let key: String = row.get(0)?;
        let stale_through: Option<i64> = row.get(4)?;
        let record = KeyImage {
            fence: fence_of_row(row.get(1)?, row.get(2)?, row.get(3)?)?,
            stale_through: stale_through.map(|token| from_sql(token, "stale_through")).transpose()?.map(Token),
            value: row.get(5)?,
            ledger: Vec::new(),
        };
        image.keys.insert(Key::new(key), record);
    }
    let mut lines = tx.prepare_cached("SELECT key, token, line FROM ledger_line ORDER BY key, seq")?;
    let mut rows = lines.query([])?;
    while let Some(row) = rows.next()? {
        let key: String = row.get(0)?;
        let token = Token(from_sql(row.get(1)?, "ledger token")?);
        let record = image
            .keys
            .get_mut(&Key::new(key))
            .ok_or_else(|| ResourceError::Corrupt("a line without its key".into()))?;
        record.ledger.push((token, row.get(2)?));
    }
    let mut clients = tx.prepare_cached("SELECT client, forgotten_max FROM answered_client")?;
    let mut rows = clients.query([])?;
    while let Some(row) = rows.next()? {
        let client = client_of(row.get(0)?)?;
        let forgotten_max: Option<i64> = row.get(1)?;
        let forgotten_max = forgotten_max.map(|request| from_sql(request, "forgotten_max")).transpose()?.map(RequestId);
        image.clients.insert(client, ClientImage { forgotten_max, ..ClientImage::default() });
    }
    let mut answers = tx.prepare_cached("SELECT client, request, verdict, highest FROM answered_write")?;
    let mut rows = answers.query([])?;
    while let Some(row) = rows.next()? {
        let client = client_of(row.get(0)?)?;
        let request = RequestId(from_sql(row.get(1)?, "request")?);
        let kind: String = row.get(2)?;
        let verdict = verdict_of_row(&kind, row.get(3)?)?;
        image.clients.entry(client).or_default().verdicts.insert(request, verdict);
    }
    Ok(image)
}

/// `live` with `suffix` appended to its file name (`shop.db-journal`).
fn sibling(live: &Path, suffix: &str) -> PathBuf {
    let mut name = live.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn backup_path(live: &Path, label: &str) -> PathBuf {
    sibling(live, &format!(".backup-{label}"))
}

fn remove_if_present(path: &Path) -> Result<(), ResourceError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error.into()),
    }
}
