//! The protected resource in a PostgreSQL database: each write one READ
//! COMMITTED transaction with row locks (module doc of `resource` for the
//! order and why not SERIALIZABLE), backups as snapshots of every table into
//! the `backup_*` tables under a label, restores as one transaction that puts
//! a label's rows back and marks the image restored.

use super::{
    check_label, client_of, dedups, fence_columns, fence_of_row, from_sql, held_by_key, judge, raised,
    restore_awaits_floor, retry_answer, to_sql, verdict_of_row, verdict_row, Backup, ClientImage, Image, KeyImage,
    Remembered, ResourceError, WriteColumns, WINDOW,
};
use fencelock::resource::{LockFloor, Write, WritePath, WriteVerdict};
use fencelock::{Key, RequestId, Token, Variant};
use tokio_postgres::{Client, IsolationLevel, NoTls, Statement, Transaction};

const SCHEMA: &str = include_str!("../../sql/postgres.sql");

/// Writes share the restore row; a restore or floor raise takes it alone.
const SELECT_META_SHARED: &str = "SELECT restored, stale_through_new FROM resource_meta WHERE id = 1 FOR SHARE";
const SELECT_META_ALONE: &str = "SELECT restored, stale_through_new FROM resource_meta WHERE id = 1 FOR UPDATE";
const SELECT_META: &str = "SELECT restored, stale_through_new FROM resource_meta WHERE id = 1";
const SELECT_KEYS: &str =
    "SELECT key, fence_token, fence_client, fence_request, stale_through, value FROM resource_key";
const SELECT_LINES: &str = "SELECT key, token, line FROM ledger_line ORDER BY key, seq";
const SELECT_CLIENTS: &str = "SELECT client, forgotten_max FROM answered_client";
const SELECT_ANSWERS: &str = "SELECT client, request, verdict, highest FROM answered_write";
const INSERT_CLIENT: &str = "INSERT INTO answered_client (client) VALUES ($1) ON CONFLICT DO NOTHING";
const SELECT_CLIENT: &str = "SELECT forgotten_max FROM answered_client WHERE client = $1 FOR UPDATE";
const SELECT_ANSWER: &str = "SELECT verdict, highest FROM answered_write WHERE client = $1 AND request = $2";
const INSERT_KEY: &str = "INSERT INTO resource_key (key, stale_through) VALUES ($1, $2) ON CONFLICT DO NOTHING";
const SELECT_KEY: &str =
    "SELECT fence_token, fence_client, fence_request, stale_through FROM resource_key WHERE key = $1 FOR UPDATE";
const UPDATE_FENCE: &str =
    "UPDATE resource_key SET fence_token = $2, fence_client = $3, fence_request = $4 WHERE key = $1";
const UPDATE_VALUE: &str = "UPDATE resource_key SET value = $2 WHERE key = $1";
const INSERT_LINE: &str = "INSERT INTO ledger_line (key, seq, token, line) \
     SELECT $1, COALESCE(MAX(seq), 0) + 1, $2, $3 FROM ledger_line WHERE key = $1";
const INSERT_ANSWER: &str = "INSERT INTO answered_write (client, request, verdict, highest) VALUES ($1, $2, $3, $4)";
/// The highest of the client's answers beyond the newest `WINDOW`.
const SELECT_BEYOND_WINDOW: &str =
    "SELECT request FROM answered_write WHERE client = $1 ORDER BY request DESC LIMIT 1 OFFSET $2";
const DELETE_ANSWERS_THROUGH: &str = "DELETE FROM answered_write WHERE client = $1 AND request <= $2";
/// GREATEST ignores NULL, which makes it core's `Option::max`.
const RAISE_FORGOTTEN: &str =
    "UPDATE answered_client SET forgotten_max = GREATEST(forgotten_max, $2) WHERE client = $1";
const RAISE_STALE_ALL: &str = "UPDATE resource_key SET stale_through = GREATEST(stale_through, $1)";
const RAISE_STALE_NEW: &str =
    "UPDATE resource_meta SET stale_through_new = GREATEST(stale_through_new, $1) WHERE id = 1";
const CLEAR_STALE: &str = "UPDATE resource_key SET stale_through = NULL WHERE key = $1";
const SET_RESTORED: &str = "UPDATE resource_meta SET restored = $1 WHERE id = 1";

/// Each table but `resource_meta`, with its columns, parents before
/// children: a backup copies them in this order and a restore deletes in the
/// reverse. The `resource_meta` row is copied too but never deleted: writes
/// wait on its lock during a restore, and must find it (updated) after.
const TABLES: [(&str, &str); 4] = [
    ("resource_key", "key, fence_token, fence_client, fence_request, stale_through, value"),
    ("ledger_line", "key, seq, token, line"),
    ("answered_client", "client, forgotten_max"),
    ("answered_write", "client, request, verdict, highest"),
];
const BACKUP_META: &str =
    "INSERT INTO backup_resource_meta (label, id, restored, stale_through_new) SELECT $1, id, restored, stale_through_new FROM resource_meta";
const DELETE_BACKUP_META: &str = "DELETE FROM backup_resource_meta WHERE label = $1";
/// A write waiting on the row re-reads it once the restore commits, and so
/// finds the image marked restored.
const RESTORE_META: &str = "UPDATE resource_meta SET restored = b.restored, stale_through_new = b.stale_through_new \
     FROM backup_resource_meta b WHERE b.label = $1 AND resource_meta.id = 1";

/// The resource in one PostgreSQL database (and schema: the URL's
/// `options=-c search_path=…` picks it).
pub struct PostgresResource {
    client: Client,
    /// The write path's statements, prepared on this connection.
    statements: Statements,
    /// The image's reads, prepared on this connection at its first read
    /// (an image, or whether it awaits a floor).
    reads: Option<Reads>,
    variant: Variant,
}

/// Every statement a write sends (a floor raise uses the key's three too),
/// prepared once per connection. Sent as text, each cost a round trip to be
/// parsed before the one that ran it, on every write: prepared, it is one
/// round trip and nothing to parse.
struct Statements {
    meta_shared: Statement,
    insert_client: Statement,
    select_client: Statement,
    select_answer: Statement,
    insert_key: Statement,
    select_key: Statement,
    update_fence: Statement,
    update_value: Statement,
    insert_line: Statement,
    insert_answer: Statement,
    beyond_window: Statement,
    delete_answers_through: Statement,
    raise_forgotten: Statement,
}

impl Statements {
    async fn prepare(client: &Client) -> Result<Statements, tokio_postgres::Error> {
        Ok(Statements {
            meta_shared: client.prepare(SELECT_META_SHARED).await?,
            insert_client: client.prepare(INSERT_CLIENT).await?,
            select_client: client.prepare(SELECT_CLIENT).await?,
            select_answer: client.prepare(SELECT_ANSWER).await?,
            insert_key: client.prepare(INSERT_KEY).await?,
            select_key: client.prepare(SELECT_KEY).await?,
            update_fence: client.prepare(UPDATE_FENCE).await?,
            update_value: client.prepare(UPDATE_VALUE).await?,
            insert_line: client.prepare(INSERT_LINE).await?,
            insert_answer: client.prepare(INSERT_ANSWER).await?,
            beyond_window: client.prepare(SELECT_BEYOND_WINDOW).await?,
            delete_answers_through: client.prepare(DELETE_ANSWERS_THROUGH).await?,
            raise_forgotten: client.prepare(RAISE_FORGOTTEN).await?,
        })
    }
}

/// The statements that read the image (and whether it awaits a floor),
/// prepared once per connection, at the first read: a connection that only
/// writes never needs them, and one that reads the image after every step
/// (the differential test) parses them once instead of on every read.
struct Reads {
    meta: Statement,
    keys: Statement,
    lines: Statement,
    clients: Statement,
    answers: Statement,
}

impl Reads {
    /// The reads in `slot`, prepared on `client` (the connection that owns
    /// the slot) if this is its first read. It takes the two fields, not the
    /// resource, so that the caller can query the client with them.
    async fn on<'a>(client: &Client, slot: &'a mut Option<Reads>) -> Result<&'a Reads, tokio_postgres::Error> {
        if slot.is_none() {
            *slot = Some(Reads::prepare(client).await?);
        }
        Ok(slot.as_ref().expect("prepared just above"))
    }

    async fn prepare(client: &Client) -> Result<Reads, tokio_postgres::Error> {
        Ok(Reads {
            meta: client.prepare(SELECT_META).await?,
            keys: client.prepare(SELECT_KEYS).await?,
            lines: client.prepare(SELECT_LINES).await?,
            clients: client.prepare(SELECT_CLIENTS).await?,
            answers: client.prepare(SELECT_ANSWERS).await?,
        })
    }
}

impl PostgresResource {
    pub(super) async fn open(url: &str, variant: Variant) -> Result<PostgresResource, ResourceError> {
        let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
        // The connection task ends when the client is dropped; its error, if
        // any, also fails the client's next call, which is where it is reported.
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::warn!(%error, "postgres connection ended");
            }
        });
        client.batch_execute(SCHEMA).await?;
        let statements = Statements::prepare(&client).await?;
        Ok(PostgresResource { client, statements, reads: None, variant })
    }

    pub(super) async fn write(&mut self, write: &Write) -> Result<WriteVerdict, ResourceError> {
        let columns = WriteColumns::of(write)?;
        let variant = self.variant;
        let tx = self.client.transaction().await?;
        let st = &self.statements;
        let meta = tx.query_one(&st.meta_shared, &[]).await?;
        let (restored, stale_through_new): (Option<i64>, Option<i64>) = (meta.get(0), meta.get(1));
        if restored.is_some() {
            tx.rollback().await?;
            return Ok(WriteVerdict::Unavailable);
        }
        let remembered = read_remembered(&tx, st, &columns).await?;
        if let Some(answer) = retry_answer(remembered, write.request) {
            tx.rollback().await?;
            return Ok(answer);
        }
        tx.execute(&st.insert_key, &[&write.key.as_str(), &stale_through_new]).await?;
        let row = tx.query_one(&st.select_key, &[&write.key.as_str()]).await?;
        let fence = fence_of_row(row.get(0), row.get(1), row.get(2))?;
        let stale_through: Option<i64> = row.get(3);
        let stale_through = stale_through.map(|token| from_sql(token, "stale_through")).transpose()?.map(Token);
        let judgement = judge(fence, stale_through, write, variant);
        if judgement.verdict.is_accepted() {
            let (token, client, request) = fence_columns(judgement.fence)?;
            tx.execute(&st.update_fence, &[&write.key.as_str(), &token, &client, &request]).await?;
            match write.path {
                WritePath::Status => tx.execute(&st.update_value, &[&write.key.as_str(), &write.value]).await?,
                WritePath::Ledger => {
                    tx.execute(&st.insert_line, &[&write.key.as_str(), &columns.token, &write.value]).await?
                }
            };
        }
        // The one place Variant::ResourceNoDedup is consulted, as in core.
        if dedups(variant) {
            remember(&tx, st, &columns, judgement.verdict).await?;
        }
        tx.commit().await?;
        Ok(judgement.verdict)
    }

    pub(super) async fn backup(&mut self, label: &str) -> Result<Backup, ResourceError> {
        check_label(label)?;
        let tx = self.client.transaction().await?;
        // Holding the restore row alone waits for the writes in flight and
        // holds off new ones, so the copies below are one image.
        tx.query_one(SELECT_META_ALONE, &[]).await?;
        for (table, _) in TABLES.iter().rev() {
            tx.execute(&format!("DELETE FROM backup_{table} WHERE label = $1"), &[&label]).await?;
        }
        tx.execute(DELETE_BACKUP_META, &[&label]).await?;
        tx.execute(BACKUP_META, &[&label]).await?;
        for (table, columns) in TABLES {
            let copy = format!("INSERT INTO backup_{table} (label, {columns}) SELECT $1, {columns} FROM {table}");
            tx.execute(&copy, &[&label]).await?;
        }
        tx.commit().await?;
        Ok(Backup { label: label.to_string(), path: None })
    }

    /// Begins a transaction holding the restore row alone and leaves it
    /// open: every write waits for it until this connection closes.
    pub(super) async fn hold_writes(&mut self) -> Result<(), ResourceError> {
        self.client.batch_execute("BEGIN").await?;
        self.client.query_one(SELECT_META_ALONE, &[]).await?;
        Ok(())
    }

    pub(super) async fn has_backup(&mut self, label: &str) -> Result<bool, ResourceError> {
        Ok(self.client.query_opt("SELECT 1 FROM backup_resource_meta WHERE label = $1", &[&label]).await?.is_some())
    }

    pub(super) async fn restore(&mut self, backup: &Backup, restore: u64) -> Result<(), ResourceError> {
        let mark = restore_awaits_floor(self.variant).then(|| to_sql(restore, "restore")).transpose()?;
        let label = backup.label.as_str();
        let tx = self.client.transaction().await?;
        tx.query_one(SELECT_META_ALONE, &[]).await?;
        let taken = tx.query_opt("SELECT 1 FROM backup_resource_meta WHERE label = $1", &[&label]).await?;
        if taken.is_none() {
            tx.rollback().await?;
            return Err(ResourceError::NoBackup(label.to_string()));
        }
        for (table, _) in TABLES.iter().rev() {
            tx.execute(&format!("DELETE FROM {table}"), &[]).await?;
        }
        tx.execute(RESTORE_META, &[&label]).await?;
        for (table, columns) in TABLES {
            let copy = format!("INSERT INTO {table} ({columns}) SELECT {columns} FROM backup_{table} WHERE label = $1");
            tx.execute(&copy, &[&label]).await?;
        }
        // Marked in the same transaction: no write ever sees the restored image unmarked.
        if let Some(restore) = mark {
            tx.execute(SET_RESTORED, &[&Some(restore)]).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn awaiting_floor(&mut self) -> Result<Option<u64>, ResourceError> {
        let reads = Reads::on(&self.client, &mut self.reads).await?;
        let restored: Option<i64> = self.client.query_one(&reads.meta, &[]).await?.get(0);
        restored.map(|restore| from_sql(restore, "restore")).transpose()
    }

    pub(super) async fn raise_floor(&mut self, restore: u64, floor: &LockFloor) -> Result<bool, ResourceError> {
        let restore = to_sql(restore, "restore")?;
        let token_last = to_sql(floor.token_last.0, "token_last")?;
        let tx = self.client.transaction().await?;
        let restored: Option<i64> = tx.query_one(SELECT_META_ALONE, &[]).await?.get(0);
        if restored != Some(restore) {
            tx.rollback().await?;
            return Ok(false);
        }
        // Every key free at the read: tokens through the read's counter are
        // stale. The held keys get the same here and lose it below, as in core.
        tx.execute(RAISE_STALE_ALL, &[&token_last]).await?;
        tx.execute(RAISE_STALE_NEW, &[&token_last]).await?;
        let st = &self.statements;
        for (key, fence) in held_by_key(floor) {
            tx.execute(&st.insert_key, &[&key.as_str(), &Option::<i64>::None]).await?;
            let row = tx.query_one(&st.select_key, &[&key.as_str()]).await?;
            let fence = raised(fence_of_row(row.get(0), row.get(1), row.get(2))?, fence.token, fence.holder);
            let (token, client, request) = fence_columns(fence)?;
            tx.execute(&st.update_fence, &[&key.as_str(), &token, &client, &request]).await?;
            tx.execute(CLEAR_STALE, &[&key.as_str()]).await?;
        }
        tx.execute(SET_RESTORED, &[&Option::<i64>::None]).await?;
        tx.commit().await?;
        Ok(true)
    }

    pub(super) async fn image(&mut self) -> Result<Image, ResourceError> {
        let reads = Reads::on(&self.client, &mut self.reads).await?;
        // One snapshot for every table, without blocking writes.
        let tx = self
            .client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let image = read_image(&tx, reads).await?;
        tx.commit().await?;
        Ok(image)
    }
}

/// Locks the client's row (creating it) and reads its answer to this write id.
async fn read_remembered(
    tx: &Transaction<'_>,
    st: &Statements,
    columns: &WriteColumns,
) -> Result<Remembered, ResourceError> {
    tx.execute(&st.insert_client, &[&columns.client]).await?;
    let forgotten_max: Option<i64> = tx.query_one(&st.select_client, &[&columns.client]).await?.get(0);
    let answer = tx.query_opt(&st.select_answer, &[&columns.client, &columns.request]).await?;
    let verdict = match answer {
        Some(row) => Some(verdict_of_row(row.get(0), row.get(1))?),
        None => None,
    };
    Ok(Remembered {
        verdict,
        forgotten_max: forgotten_max.map(|request| from_sql(request, "forgotten_max")).transpose()?.map(RequestId),
    })
}

/// Stores the first answer and drops the client's answers beyond the window,
/// raising its forgotten bound to the highest dropped (core's `remember`).
async fn remember(
    tx: &Transaction<'_>,
    st: &Statements,
    columns: &WriteColumns,
    verdict: WriteVerdict,
) -> Result<(), ResourceError> {
    let (kind, highest) = verdict_row(verdict);
    let highest = highest.map(|token| to_sql(token.0, "highest")).transpose()?;
    tx.execute(&st.insert_answer, &[&columns.client, &columns.request, &kind, &highest]).await?;
    let dropped = tx.query_opt(&st.beyond_window, &[&columns.client, &WINDOW]).await?;
    if let Some(row) = dropped {
        let dropped_max: i64 = row.get(0);
        tx.execute(&st.delete_answers_through, &[&columns.client, &dropped_max]).await?;
        tx.execute(&st.raise_forgotten, &[&columns.client, &dropped_max]).await?;
    }
    Ok(())
}

/// Every table, read in one transaction.
async fn read_image(tx: &Transaction<'_>, reads: &Reads) -> Result<Image, ResourceError> {
    let mut image = Image::default();
    let meta = tx.query_one(&reads.meta, &[]).await?;
    let (restored, stale_through_new): (Option<i64>, Option<i64>) = (meta.get(0), meta.get(1));
    image.restored = restored.map(|restore| from_sql(restore, "restore")).transpose()?;
    image.stale_through_new =
        stale_through_new.map(|token| from_sql(token, "stale_through_new")).transpose()?.map(Token);
    for row in tx.query(&reads.keys, &[]).await? {
        let stale_through: Option<i64> = row.get(4);
        let record = KeyImage {
            fence: fence_of_row(row.get(1), row.get(2), row.get(3))?,
            stale_through: stale_through.map(|token| from_sql(token, "stale_through")).transpose()?.map(Token),
            value: row.get(5),
            ledger: Vec::new(),
        };
        image.keys.insert(Key::new(row.get::<_, String>(0)), record);
    }
    for row in tx.query(&reads.lines, &[]).await? {
        let token = Token(from_sql(row.get(1), "ledger token")?);
        let record = image
            .keys
            .get_mut(&Key::new(row.get::<_, String>(0)))
            .ok_or_else(|| ResourceError::Corrupt("a line without its key".into()))?;
        record.ledger.push((token, row.get(2)));
    }
    for row in tx.query(&reads.clients, &[]).await? {
        let forgotten_max: Option<i64> = row.get(1);
        let forgotten_max = forgotten_max.map(|request| from_sql(request, "forgotten_max")).transpose()?.map(RequestId);
        image.clients.insert(client_of(row.get(0))?, ClientImage { forgotten_max, ..ClientImage::default() });
    }
    for row in tx.query(&reads.answers, &[]).await? {
        let request = RequestId(from_sql(row.get(1), "request")?);
        let verdict = verdict_of_row(row.get(2), row.get(3))?;
        image.clients.entry(client_of(row.get(0))?).or_default().verdicts.insert(request, verdict);
    }
    Ok(image)
}
