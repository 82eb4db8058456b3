-- The protected resource in PostgreSQL: the tables behind `fencelock::resource::ResourceState`.
--
-- Loaded by node/src/resource/postgres.rs (include_str!) on every connect, in
-- one transaction under an advisory lock, so that two processes opening a
-- fresh database at once do not race on CREATE TABLE IF NOT EXISTS. Every
-- statement is idempotent. Tokens, request ids and client ids are u64/u32 in
-- the core and BIGINT (i64) here: a value above i64::MAX is refused before it
-- reaches the database, and every column holding one is checked non-negative.
-- Both write paths share one fence per key (the rule is per key, not per
-- path), so there is no per-path table.

BEGIN;
-- Any constant: it only has to be the same in every process.
SELECT pg_advisory_xact_lock(4210421042);

-- One row (id = 1): the restore state of the whole image.
-- Invariant: while `restored` is not NULL every write is answered
-- Unavailable and changes nothing; only raise_floor clears it.
-- `stale_through_new` is the floor given to keys first written after it.
CREATE TABLE IF NOT EXISTS resource_meta (
    id                SMALLINT PRIMARY KEY CHECK (id = 1),
    restored          BIGINT CHECK (restored >= 0),
    stale_through_new BIGINT CHECK (stale_through_new >= 0)
);
INSERT INTO resource_meta (id) VALUES (1) ON CONFLICT DO NOTHING;

-- Per key: the fence (the highest accepted token and its holder), the floor
-- a restore set, and the status value.
-- Invariant: fence_token never goes down; it is raised only inside the
-- transaction of an accepted write of the key or of a floor raise, and every
-- accepted write of the key (on either path) had a token at most fence_token.
-- A fence is whole or absent: its token and holder are set together.
CREATE TABLE IF NOT EXISTS resource_key (
    key           TEXT PRIMARY KEY NOT NULL,
    fence_token   BIGINT CHECK (fence_token >= 0),
    fence_client  BIGINT CHECK (fence_client >= 0),
    fence_request BIGINT CHECK (fence_request >= 0),
    stale_through BIGINT CHECK (stale_through >= 0),
    value         TEXT NOT NULL DEFAULT '',
    CHECK ((fence_token IS NULL) = (fence_client IS NULL)),
    CHECK ((fence_token IS NULL) = (fence_request IS NULL))
);

-- The append-only ledger of each key: one line per accepted Ledger write.
-- Invariant: lines are only inserted, at seq = the key's last seq + 1, in
-- the same transaction as the token check that accepted them.
CREATE TABLE IF NOT EXISTS ledger_line (
    key   TEXT NOT NULL REFERENCES resource_key (key),
    seq   BIGINT NOT NULL CHECK (seq >= 1),
    token BIGINT NOT NULL CHECK (token >= 0),
    line  TEXT NOT NULL,
    PRIMARY KEY (key, seq)
);

-- Per client: the highest request id whose answer was dropped from the window.
-- Invariant: a request id at or below forgotten_max that answered_write does
-- not hold is an old duplicate: answered DuplicateForgotten, never applied.
CREATE TABLE IF NOT EXISTS answered_client (
    client        BIGINT PRIMARY KEY CHECK (client >= 0),
    forgotten_max BIGINT CHECK (forgotten_max >= 0)
);

-- The first answer to each of a client's last writes (at most
-- WRITES_REMEMBERED_PER_CLIENT per client), for retries.
-- Invariant: a write id is judged once; a retry finds its row and gets the
-- original answer with no second effect. Only first answers are stored.
CREATE TABLE IF NOT EXISTS answered_write (
    client  BIGINT NOT NULL REFERENCES answered_client (client),
    request BIGINT NOT NULL CHECK (request >= 0),
    verdict TEXT NOT NULL CHECK (verdict IN ('accepted', 'rejected_stale', 'rejected_equal_token')),
    highest BIGINT CHECK (highest >= 0),
    CHECK ((verdict = 'accepted') = (highest IS NULL)),
    PRIMARY KEY (client, request)
);

-- Backups: an operator's snapshot of every table above, by label, taken in
-- one transaction (node/src/resource/postgres.rs, `backup`). A restore puts a
-- label's rows back and marks the image restored (resource_meta.restored).
-- Invariant: a label's rows are one consistent image: they were copied while
-- the resource_meta row was locked against every write.
CREATE TABLE IF NOT EXISTS backup_resource_meta (label TEXT NOT NULL, LIKE resource_meta);
CREATE TABLE IF NOT EXISTS backup_resource_key (label TEXT NOT NULL, LIKE resource_key);
CREATE TABLE IF NOT EXISTS backup_ledger_line (label TEXT NOT NULL, LIKE ledger_line);
CREATE TABLE IF NOT EXISTS backup_answered_client (label TEXT NOT NULL, LIKE answered_client);
CREATE TABLE IF NOT EXISTS backup_answered_write (label TEXT NOT NULL, LIKE answered_write);

COMMIT;
