//! What the resource tests share: where PostgreSQL is, and a fresh schema
//! per test on it.

use std::io::Write as _;

/// The variable naming the PostgreSQL server the tests use.
pub const POSTGRES_URL_VAR: &str = "FENCELOCK_POSTGRES_URL";

/// The server's URL, or `None` after one line saying how to set it. The line
/// goes to the real stderr, not through the test harness's capture, so that a
/// skip shows in a passing run.
pub fn postgres_url() -> Option<String> {
    match std::env::var(POSTGRES_URL_VAR) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            let _ = writeln!(
                std::io::stderr(),
                "skipped: {POSTGRES_URL_VAR} is not set (eval \"$(scripts/postgres.sh start)\" starts a local server \
                 and sets it; scripts/postgres.sh stop stops it)"
            );
            None
        }
    }
}

/// A URL of the server at `base` whose tables live in a new, empty schema
/// `schema`, so that tests running at once (and runs one after another) do
/// not see each other's rows.
pub async fn fresh_postgres_url(base: &str, schema: &str) -> String {
    let mut urls = fresh_postgres_urls(base, &[schema]).await;
    urls.pop().expect("one schema, one URL")
}

/// [`fresh_postgres_url`] for each of `schemas`, made over one connection
/// (a connection is a new server process: a run of many cases made one per
/// case and spent a share of its time starting them).
pub async fn fresh_postgres_urls(base: &str, schemas: &[&str]) -> Vec<String> {
    let plain = |schema: &str| schema.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    assert!(schemas.iter().all(|schema| plain(schema)), "plain schema names: {schemas:?}");
    let (client, connection) = tokio_postgres::connect(base, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|error| panic!("cannot connect to {POSTGRES_URL_VAR}={base}: {error}"));
    let task = tokio::spawn(connection);
    // A transaction per schema: dropping one locks each of its objects, and
    // all of a run's in one would fill the server's lock table.
    for schema in schemas {
        client
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"))
            .await
            .unwrap_or_else(|error| panic!("cannot create schema {schema}: {error}"));
    }
    drop(client);
    let _ = task.await;
    let separator = if base.contains('?') { '&' } else { '?' };
    schemas.iter().map(|schema| format!("{base}{separator}options=-c%20search_path%3D{schema}")).collect()
}
