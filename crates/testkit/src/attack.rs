//! Hostile clients of Herald's public endpoints, for tests and benchmarks:
//! many connections that send a request's headers and then trickle its
//! body, the way a stranger without the webhook's secret would try to make
//! Herald hold memory. Each connection reports when the server closed it.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How a trickle attack is played.
#[derive(Clone, Debug)]
pub struct Trickle {
    /// Where to connect.
    pub address: SocketAddr,
    /// The request line and headers, ending with the empty line.
    pub head: String,
    /// Connections opened at once.
    pub connections: usize,
    /// Bytes of body sent in each step, and the pause between steps.
    pub step_bytes: usize,
    pub pause: Duration,
    /// How much body each connection sends at most.
    pub body_bytes: usize,
    /// When the attack gives up on connections still open.
    pub give_up_after: Duration,
    /// Send the body in HTTP/1.1 chunks (a head with
    /// `transfer-encoding: chunked`), so no length is declared up front.
    pub chunked: bool,
}

/// What became of one connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// When the server closed it, counted from when it was opened; `None`
    /// when it was still open at `give_up_after` (or never opened).
    pub closed_after: Option<Duration>,
    /// The status code the server answered with, if it answered.
    pub status: Option<u16>,
}

/// Plays `attack` and returns each connection's outcome.
pub async fn trickle(attack: &Trickle) -> Vec<Outcome> {
    let clients = (0..attack.connections).map(|_| one_connection(attack.clone()));
    futures::future::join_all(clients).await
}

async fn one_connection(attack: Trickle) -> Outcome {
    let opened = Instant::now();
    let Ok(stream) = TcpStream::connect(attack.address).await else {
        return Outcome {
            closed_after: Some(Duration::ZERO),
            status: None,
        };
    };
    let (mut reader, mut writer) = stream.into_split();
    let sending = tokio::spawn(async move {
        if writer.write_all(attack.head.as_bytes()).await.is_err() {
            return;
        }
        let mut sent = 0;
        while sent < attack.body_bytes {
            let step = attack.step_bytes.min(attack.body_bytes - sent);
            let data = vec![b'0'; step];
            let written = if attack.chunked {
                let mut framed = format!("{step:x}\r\n").into_bytes();
                framed.extend_from_slice(&data);
                framed.extend_from_slice(b"\r\n");
                writer.write_all(&framed).await
            } else {
                writer.write_all(&data).await
            };
            if written.is_err() {
                return;
            }
            sent += step;
            tokio::time::sleep(attack.pause).await;
        }
        // Nothing more: the connection stays open, waiting.
        std::future::pending::<()>().await;
    });
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    let closed = tokio::time::timeout(attack.give_up_after.saturating_sub(opened.elapsed()), async {
        loop {
            match reader.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buffer[..n]),
            }
        }
    })
    .await
    .is_ok();
    sending.abort();
    let status = String::from_utf8_lossy(&seen)
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok());
    Outcome {
        closed_after: closed.then(|| opened.elapsed()),
        status,
    }
}

/// The resident memory of process `pid` (`VmRSS`), in bytes.
pub fn resident_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kilobytes: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kilobytes * 1024)
}
