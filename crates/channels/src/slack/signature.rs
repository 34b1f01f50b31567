//! Checking that an Events API request came from Slack: `X-Slack-Signature`
//! must be `v0=` + hex(HMAC-SHA256(signing secret, `v0:{timestamp}:{body}`))
//! and `X-Slack-Request-Timestamp` within five minutes of now, so a captured
//! request cannot be replayed later. Pure: the clock is an argument.

use sha2::{Digest, Sha256};

/// Slack's replay window.
pub const MAX_AGE_SECONDS: i64 = 5 * 60;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the X-Slack-Signature or X-Slack-Request-Timestamp header is missing")]
    Missing,
    #[error("the request timestamp is not a number")]
    BadTimestamp,
    #[error("the request timestamp is {age} s away from now (at most {MAX_AGE_SECONDS} s allowed)")]
    Stale { age: i64 },
    #[error("the signature does not match the body")]
    Mismatch,
}

/// HMAC-SHA256 (RFC 2104) of `message` under `key`.
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut block_key = [0u8; BLOCK];
    if key.len() > BLOCK {
        block_key[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block_key[..key.len()].copy_from_slice(key);
    }
    let inner_pad: Vec<u8> = block_key.iter().map(|b| b ^ 0x36).collect();
    let outer_pad: Vec<u8> = block_key.iter().map(|b| b ^ 0x5c).collect();
    let inner = Sha256::new().chain_update(&inner_pad).chain_update(message).finalize();
    Sha256::new()
        .chain_update(&outer_pad)
        .chain_update(inner)
        .finalize()
        .into()
}

/// The signature Slack sends for `body` at `timestamp`.
pub fn sign(secret: &str, timestamp: &str, body: &[u8]) -> String {
    let mut base = format!("v0:{timestamp}:").into_bytes();
    base.extend_from_slice(body);
    format!("v0={}", hex::encode(hmac_sha256(secret.as_bytes(), &base)))
}

/// Compares without stopping at the first difference, so the time taken
/// says nothing about how much of a forged signature was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Accepts a request whose headers prove it is Slack's and recent.
pub fn verify(
    secret: &str,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now_unix: i64,
) -> Result<(), SignatureError> {
    let (Some(timestamp), Some(signature)) = (timestamp, signature) else {
        return Err(SignatureError::Missing);
    };
    let sent_at: i64 = timestamp.trim().parse().map_err(|_| SignatureError::BadTimestamp)?;
    let age = (now_unix - sent_at).abs();
    if age > MAX_AGE_SECONDS {
        return Err(SignatureError::Stale { age });
    }
    if constant_time_eq(sign(secret, timestamp, body).as_bytes(), signature.trim().as_bytes()) {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example in Slack's "Verifying requests from Slack" guide.
    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const TIMESTAMP: &str = "1531420618";
    const BODY: &str = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    const SIGNATURE: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

    #[test]
    fn slacks_example_request_verifies() {
        assert_eq!(sign(SECRET, TIMESTAMP, BODY.as_bytes()), SIGNATURE);
        assert_eq!(
            verify(
                SECRET,
                Some(TIMESTAMP),
                Some(SIGNATURE),
                BODY.as_bytes(),
                1_531_420_618 + 10
            ),
            Ok(())
        );
    }

    #[test]
    fn forged_stale_and_incomplete_requests_are_refused() {
        let now = 1_531_420_618;
        let tampered = BODY.replace("roadrunner", "coyote");
        for (timestamp, signature, body, now, expected) in [
            (
                Some(TIMESTAMP),
                Some(SIGNATURE),
                tampered.as_str(),
                now,
                SignatureError::Mismatch,
            ),
            (Some(TIMESTAMP), Some("v0=00"), BODY, now, SignatureError::Mismatch),
            (
                Some(TIMESTAMP),
                Some(SIGNATURE),
                BODY,
                now + 301,
                SignatureError::Stale { age: 301 },
            ),
            (
                Some(TIMESTAMP),
                Some(SIGNATURE),
                BODY,
                now - 400,
                SignatureError::Stale { age: 400 },
            ),
            (
                Some("yesterday"),
                Some(SIGNATURE),
                BODY,
                now,
                SignatureError::BadTimestamp,
            ),
            (None, Some(SIGNATURE), BODY, now, SignatureError::Missing),
            (Some(TIMESTAMP), None, BODY, now, SignatureError::Missing),
        ] {
            assert_eq!(
                verify(SECRET, timestamp, signature, body.as_bytes(), now),
                Err(expected.clone()),
                "{expected}"
            );
        }
        // A different secret signs differently.
        assert_eq!(
            verify("another-secret", Some(TIMESTAMP), Some(SIGNATURE), BODY.as_bytes(), now),
            Err(SignatureError::Mismatch)
        );
    }
}
