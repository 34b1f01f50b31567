//! The bounds, against a real listener on 127.0.0.1 and raw TCP clients.

use std::time::{Duration, Instant};

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;

const LIMITS: PublicLimits = PublicLimits {
    max_connections: 4,
    header_timeout: Duration::from_millis(400),
    body_timeout: Duration::from_millis(400),
    max_body_bytes: 1024,
    body_budget_bytes: 1500,
};

/// Answers the body's length; refuses requests without `x-key: open`
/// before reading anything.
async fn endpoint(request: axum::extract::Request) -> Response {
    let (parts, body) = request.into_parts();
    if !has_key(&parts.headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    match read_body(&parts.extensions, body).await {
        Ok(read) => {
            // Holds its budget a little, as a handler storing it would.
            tokio::time::sleep(Duration::from_millis(200)).await;
            read.len().to_string().into_response()
        }
        Err(err) => err.into_response(),
    }
}

fn has_key(headers: &HeaderMap) -> bool {
    headers.get("x-key").is_some_and(|v| v == "open")
}

async fn start() -> (std::net::SocketAddr, CancellationToken) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let app = Router::new().route("/hook", post(endpoint));
    tokio::spawn(serve(listener, app, LIMITS, shutdown.clone()));
    (address, shutdown)
}

/// The status code of what the server answered, or `None` when it closed
/// without answering.
async fn answer(stream: &mut TcpStream) -> Option<u16> {
    let mut seen = Vec::new();
    let mut buffer = [0u8; 1024];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                seen.extend_from_slice(&buffer[..n]);
                if seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
        }
    }
    let text = String::from_utf8_lossy(&seen);
    text.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}

/// Whether the server closed the connection (reads end) within `within`.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buffer = [0u8; 1024];
    tokio::time::timeout(within, async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

fn head(key: bool, length: usize) -> String {
    let key = if key { "x-key: open\r\n" } else { "" };
    format!("POST /hook HTTP/1.1\r\nhost: x\r\n{key}content-length: {length}\r\n\r\n")
}

#[tokio::test]
async fn a_request_without_the_key_is_refused_unread_and_its_connection_closed() {
    let (address, _shutdown) = start().await;
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream.write_all(head(false, 1000).as_bytes()).await.unwrap();
    stream.write_all(b"x").await.unwrap();
    assert_eq!(answer(&mut stream).await, Some(401));
    assert!(closed_within(&mut stream, Duration::from_millis(300)).await);
}

#[tokio::test]
async fn a_body_is_read_when_the_headers_allow_it() {
    let (address, _shutdown) = start().await;
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream.write_all(head(true, 5).as_bytes()).await.unwrap();
    stream.write_all(b"hello").await.unwrap();
    assert_eq!(answer(&mut stream).await, Some(200));
}

#[tokio::test]
async fn a_declared_length_over_the_cap_is_refused_before_the_body_comes() {
    let (address, _shutdown) = start().await;
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream.write_all(head(true, 4096).as_bytes()).await.unwrap();
    assert_eq!(answer(&mut stream).await, Some(413));
}

#[tokio::test]
async fn a_chunked_body_over_the_cap_is_cut_off() {
    let (address, _shutdown) = start().await;
    let mut stream = TcpStream::connect(address).await.unwrap();
    let chunk = format!("400\r\n{}\r\n", "y".repeat(1024));
    let request = format!(
        "POST /hook HTTP/1.1\r\nhost: x\r\nx-key: open\r\ntransfer-encoding: chunked\r\n\r\n{chunk}{chunk}0\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    assert_eq!(answer(&mut stream).await, Some(413));
}

#[tokio::test]
async fn a_trickled_body_is_cut_off_at_the_body_timeout_however_steady_it_is() {
    let (address, _shutdown) = start().await;
    let stream = TcpStream::connect(address).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    writer.write_all(head(true, 1000).as_bytes()).await.unwrap();
    let started = Instant::now();
    // A byte every 50 ms: no pause is long, the whole is slow.
    let trickle = tokio::spawn(async move {
        for _ in 0..100 {
            if writer.write_all(b"z").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let mut seen = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(3), reader.read_to_end(&mut seen)).await;
    let took = started.elapsed();
    trickle.abort();
    assert!(
        String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&seen)
    );
    assert!(took < Duration::from_secs(2), "closed after {took:?}");
}

#[tokio::test]
async fn headers_that_never_end_are_cut_off_at_the_header_timeout() {
    let (address, _shutdown) = start().await;
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream.write_all(b"POST /hook HTTP/1.1\r\nhost: x\r\n").await.unwrap();
    assert!(closed_within(&mut stream, Duration::from_secs(2)).await);
    // An idle connection is closed the same way.
    let mut idle = TcpStream::connect(address).await.unwrap();
    assert!(closed_within(&mut idle, Duration::from_secs(2)).await);
}

#[tokio::test]
async fn bodies_read_at_once_share_one_budget() {
    let (address, _shutdown) = start().await;
    // Two bodies of 1,000 bytes do not fit a 1,500-byte budget together.
    let mut first = TcpStream::connect(address).await.unwrap();
    first.write_all(head(true, 1000).as_bytes()).await.unwrap();
    first.write_all(&[b'a'; 1000]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut second = TcpStream::connect(address).await.unwrap();
    second.write_all(head(true, 1000).as_bytes()).await.unwrap();
    second.write_all(&[b'b'; 1000]).await.unwrap();
    assert_eq!(answer(&mut second).await, Some(503));
    assert_eq!(answer(&mut first).await, Some(200));
    // Once the first is done, its share is free again.
    let mut third = TcpStream::connect(address).await.unwrap();
    third.write_all(head(true, 1000).as_bytes()).await.unwrap();
    third.write_all(&[b'c'; 1000]).await.unwrap();
    assert_eq!(answer(&mut third).await, Some(200));
}

#[tokio::test]
async fn connections_over_the_cap_are_closed_at_once_and_room_comes_back() {
    let (address, _shutdown) = start().await;
    let mut held = Vec::new();
    for _ in 0..LIMITS.max_connections {
        let mut stream = TcpStream::connect(address).await.unwrap();
        // Half a request line: the connection is open and waiting.
        stream.write_all(b"POST /ho").await.unwrap();
        held.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut over = TcpStream::connect(address).await.unwrap();
    assert!(closed_within(&mut over, Duration::from_millis(300)).await);
    drop(held);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream.write_all(head(true, 2).as_bytes()).await.unwrap();
    stream.write_all(b"ok").await.unwrap();
    assert_eq!(answer(&mut stream).await, Some(200));
}

#[tokio::test]
async fn shutdown_stops_accepting() {
    let (address, shutdown) = start().await;
    shutdown.cancel();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(TcpStream::connect(address).await.is_err());
}

#[test]
fn errors_are_http_answers() {
    assert_eq!(BodyError::TooLarge.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(BodyError::TimedOut.status(), StatusCode::REQUEST_TIMEOUT);
    assert_eq!(BodyError::Busy.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(BodyError::Failed.status(), StatusCode::BAD_REQUEST);
}
