//! Statements per message: Herald's store counts every round trip it makes
//! to the database (`herald_store_statements_total`, labelled with the
//! statement's first line, plus `BEGIN`/`COMMIT` and the pool's ping before
//! a connection is handed out). The benchmark reads `/metrics` before and
//! after a load and divides the difference by the messages of the load.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use anyhow::{Context, Result, bail};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SERIES: &str = "herald_store_statements_total{statement=\"";

/// Round trips by statement label, as `/metrics` showed them at one moment.
pub type Counts = BTreeMap<String, f64>;

/// One statement's share of a load.
#[derive(Clone, Debug, Serialize)]
pub struct PerMessage {
    pub statement: String,
    pub per_message: f64,
}

/// Reads Herald's `/metrics` at `address`.
pub async fn scrape(address: SocketAddr) -> Result<Counts> {
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .with_context(|| format!("connecting to Herald's /metrics at {address}"))?;
    let request = format!("GET /metrics HTTP/1.0\r\nHost: {address}\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let Some((head, body)) = response.split_once("\r\n\r\n") else {
        bail!("/metrics answered without a body");
    };
    if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
        bail!("/metrics answered {}", head.lines().next().unwrap_or_default());
    }
    Ok(parse(body))
}

/// The `herald_store_statements_total` samples of a Prometheus text body.
fn parse(body: &str) -> Counts {
    let mut counts = Counts::new();
    for line in body.lines() {
        let Some(rest) = line.strip_prefix(SERIES) else {
            continue;
        };
        let Some((label, value)) = rest.rsplit_once("\"} ") else {
            continue;
        };
        let Ok(value) = value.trim().parse::<f64>() else {
            continue;
        };
        let label = label.replace("\\\"", "\"").replace("\\\\", "\\");
        *counts.entry(label).or_default() += value;
    }
    counts
}

/// What each statement cost per message between two scrapes, most first.
pub fn per_message(before: &Counts, after: &Counts, messages: usize) -> Vec<PerMessage> {
    let mut rows: Vec<PerMessage> = after
        .iter()
        .map(|(statement, count)| PerMessage {
            statement: statement.clone(),
            per_message: (count - before.get(statement).copied().unwrap_or(0.0)) / messages.max(1) as f64,
        })
        .filter(|row| row.per_message > 0.0)
        .collect();
    rows.sort_by(|a, b| b.per_message.total_cmp(&a.per_message));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_read_and_divided_per_message() {
        let body = "# TYPE herald_store_statements_total counter\n\
                    herald_store_statements_total{statement=\"COMMIT\"} 40\n\
                    herald_store_statements_total{statement=\"SELECT \\\"x\\\" FROM t\"} 10\n\
                    herald_turns_total{channel=\"telegram\"} 3\n";
        let after = parse(body);
        assert_eq!(after.len(), 2);
        assert_eq!(after["SELECT \"x\" FROM t"], 10.0);
        let before = Counts::from([("COMMIT".to_owned(), 20.0)]);
        let rows = per_message(&before, &after, 10);
        let rows: Vec<(&str, f64)> = rows.iter().map(|r| (r.statement.as_str(), r.per_message)).collect();
        assert_eq!(rows, [("COMMIT", 2.0), ("SELECT \"x\" FROM t", 1.0)]);
    }
}
