-- The protected resource in SQLite: the tables behind `fencelock::resource::ResourceState`.
--
-- Loaded by node/src/resource/sqlite.rs (include_str!) on every open; every
-- statement is idempotent. Tokens, request ids and client ids are u64/u32 in
-- the core and INTEGER (i64) here: a value above i64::MAX is refused before it
-- reaches the database, and every column holding one is checked non-negative.
-- Both write paths share one fence per key (the rule is per key, not per
-- path), so there is no per-path table.

-- One row (id = 1): the restore state of the whole image.
-- Invariant: while `restored` is not NULL every write is answered
-- Unavailable and changes nothing; only raise_floor clears it.
-- `stale_through_new` is the floor given to keys first written after it.
CREATE TABLE IF NOT EXISTS resource_meta (
    id                INTEGER PRIMARY KEY CHECK (id = 1),
    restored          INTEGER CHECK (restored >= 0),
    stale_through_new INTEGER CHECK (stale_through_new >= 0)
);
INSERT OR IGNORE INTO resource_meta (id) VALUES (1);

-- Per key: the fence (the highest accepted token and its holder), the floor
-- a restore set, and the status value.
-- Invariant: fence_token never goes down; it is raised only inside the
-- transaction of an accepted write of the key or of a floor raise, and every
-- accepted write of the key (on either path) had a token at most fence_token.
-- A fence is whole or absent: its token and holder are set together.
CREATE TABLE IF NOT EXISTS resource_key (
    key           TEXT PRIMARY KEY NOT NULL,
    fence_token   INTEGER CHECK (fence_token >= 0),
    fence_client  INTEGER CHECK (fence_client >= 0),
    fence_request INTEGER CHECK (fence_request >= 0),
    stale_through INTEGER CHECK (stale_through >= 0),
    value         TEXT NOT NULL DEFAULT '',
    CHECK ((fence_token IS NULL) = (fence_client IS NULL)),
    CHECK ((fence_token IS NULL) = (fence_request IS NULL))
) WITHOUT ROWID;

-- The append-only ledger of each key: one line per accepted Ledger write.
-- Invariant: lines are only inserted, at seq = the key's last seq + 1, in
-- the same transaction as the token check that accepted them.
CREATE TABLE IF NOT EXISTS ledger_line (
    key   TEXT NOT NULL REFERENCES resource_key (key),
    seq   INTEGER NOT NULL CHECK (seq >= 1),
    token INTEGER NOT NULL CHECK (token >= 0),
    line  TEXT NOT NULL,
    PRIMARY KEY (key, seq)
) WITHOUT ROWID;

-- Per client: the highest request id whose answer was dropped from the window.
-- Invariant: a request id at or below forgotten_max that answered_write does
-- not hold is an old duplicate: answered DuplicateForgotten, never applied.
CREATE TABLE IF NOT EXISTS answered_client (
    client        INTEGER PRIMARY KEY CHECK (client >= 0),
    forgotten_max INTEGER CHECK (forgotten_max >= 0)
);

-- The first answer to each of a client's last writes (at most
-- WRITES_REMEMBERED_PER_CLIENT per client), for retries.
-- Invariant: a write id is judged once; a retry finds its row and gets the
-- original answer with no second effect. Only first answers are stored.
CREATE TABLE IF NOT EXISTS answered_write (
    client  INTEGER NOT NULL REFERENCES answered_client (client),
    request INTEGER NOT NULL CHECK (request >= 0),
    verdict TEXT NOT NULL CHECK (verdict IN ('accepted', 'rejected_stale', 'rejected_equal_token')),
    highest INTEGER CHECK (highest >= 0),
    CHECK ((verdict = 'accepted') = (highest IS NULL)),
    PRIMARY KEY (client, request)
) WITHOUT ROWID;
