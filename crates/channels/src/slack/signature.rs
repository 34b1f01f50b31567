//! Checking that an Events API request came from Slack: `X-Slack-Signature`
//! must be `v0=` + hex(HMAC-SHA256(signing secret, `v0:{timestamp}:{body}`))
//! and `X-Slack-Request-Timestamp` within five minutes of now, so a captured
//! request cannot be replayed later. Pure: the clock is an argument.

use hmac::{Hmac, Mac};
use sha2::Sha256;

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

type HmacSha256 = Hmac<Sha256>;

/// The MAC of Slack's signature base string, `v0:{timestamp}:{body}`.
fn mac(secret: &str, timestamp: &str, body: &[u8]) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    mac
}

/// The signature Slack sends for `body` at `timestamp` (the tests sign with
/// it; the testkit's fake Slack signs alike).
#[cfg(test)]
pub fn sign(secret: &str, timestamp: &str, body: &[u8]) -> String {
    format!(
        "v0={}",
        hex::encode(mac(secret, timestamp, body).finalize().into_bytes())
    )
}

/// What the headers alone can show, checked before the body is read: both
/// are there, the timestamp is within [`MAX_AGE_SECONDS`] of now, and the
/// signature has the form of one (`v0=` and 32 bytes in hex). Returns the
/// signature's bytes.
pub fn plausible(timestamp: Option<&str>, signature: Option<&str>, now_unix: i64) -> Result<Vec<u8>, SignatureError> {
    let (Some(timestamp), Some(signature)) = (timestamp, signature) else {
        return Err(SignatureError::Missing);
    };
    let sent_at: i64 = timestamp.trim().parse().map_err(|_| SignatureError::BadTimestamp)?;
    let age = (now_unix - sent_at).abs();
    if age > MAX_AGE_SECONDS {
        return Err(SignatureError::Stale { age });
    }
    signature
        .trim()
        .strip_prefix("v0=")
        .and_then(|digits| hex::decode(digits).ok())
        .filter(|bytes| bytes.len() == 32)
        .ok_or(SignatureError::Mismatch)
}

/// Accepts a request whose headers prove it is Slack's and recent.
pub fn verify(
    secret: &str,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now_unix: i64,
) -> Result<(), SignatureError> {
    let given = plausible(timestamp, signature, now_unix)?;
    let timestamp = timestamp.unwrap_or_default();
    // `verify_slice` compares in constant time: how long it takes says
    // nothing about how much of a forged signature was right.
    mac(secret, timestamp, body)
        .verify_slice(&given)
        .map_err(|_| SignatureError::Mismatch)
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
