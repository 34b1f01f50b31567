use super::*;

const TRUSTED: &str = "mx.example.net";

fn fields(head: &str) -> Vec<(String, String)> {
    header_fields(format!("{head}\n\nbody\n").as_bytes())
}

#[test]
fn the_header_block_is_read_unfolded_and_ends_at_the_blank_line() {
    let read = header_fields(
        b"Authentication-Results: mx.example.net;\r\n\tdkim=pass header.d=example.com\r\nFrom: a@example.com\r\n\r\nAuthentication-Results: in the body\r\n",
    );
    assert_eq!(
        read,
        [
            (
                "authentication-results".to_owned(),
                "mx.example.net; dkim=pass header.d=example.com".to_owned()
            ),
            ("from".to_owned(), "a@example.com".to_owned()),
        ]
    );
}

#[test]
fn only_the_trusted_servers_topmost_results_vouch_for_the_from_domain() {
    use Verdict::{Authenticated, Unverified};
    let from = "From: Alice <alice@example.com>";
    for (head, expected, why) in [
        (
            format!("Authentication-Results: mx.example.net; dmarc=pass (p=none) header.from=example.com\n{from}"),
            Authenticated,
            "DMARC passed for the From domain",
        ),
        (
            format!("Authentication-Results: MX.Example.NET; DMARC=Pass header.from=Example.COM\n{from}"),
            Authenticated,
            "ids, methods and domains compare without case",
        ),
        (
            format!(
                "Authentication-Results: mx.example.net;\n dkim=pass (2048-bit key; unprotected) header.d=example.com header.i=@example.com header.b=\"Ab;c\"\n{from}"
            ),
            Authenticated,
            "an aligned DKIM signature, with a comment and a quoted value",
        ),
        (
            format!("Authentication-Results: mx.example.net; dkim=pass header.d=mail.example.com\n{from}"),
            Authenticated,
            "relaxed alignment: the signer is a subdomain",
        ),
        (
            format!("Authentication-Results: mx.example.net; dkim = pass header.i=@example.com\n{from}"),
            Authenticated,
            "header.i when header.d is missing, spaces around =",
        ),
        (
            format!(
                "Authentication-Results: mx.example.net; dmarc=none header.from=example.com\nAuthentication-Results: mx.example.net; dkim=pass header.d=example.com\nReceived: from x by mx.example.net\n{from}"
            ),
            Authenticated,
            "the server's several topmost headers count together (OpenDMARC above OpenDKIM)",
        ),
        (from.to_owned(), Unverified, "no results at all"),
        (
            format!("Authentication-Results: mx.example.net; none\n{from}"),
            Unverified,
            "the server checked nothing",
        ),
        (
            format!("Authentication-Results: mx.attacker.example; dmarc=pass header.from=example.com\n{from}"),
            Unverified,
            "another authserv-id",
        ),
        (
            format!(
                "Authentication-Results: mx.example.net; dmarc=fail header.from=example.com\nReceived: from attacker by mx.example.net\nAuthentication-Results: mx.example.net; dmarc=pass header.from=example.com\n{from}"
            ),
            Unverified,
            "a pass the sender wrote lower in their own mail",
        ),
        (
            format!("Authentication-Results: mx.example.net; dmarc=pass header.from=attacker.example\n{from}"),
            Unverified,
            "DMARC passed for another domain",
        ),
        (
            format!("Authentication-Results: mx.example.net; dkim=pass header.d=attacker.example\n{from}"),
            Unverified,
            "a valid signature of an unaligned domain",
        ),
        (
            format!("Authentication-Results: mx.example.net; dkim=pass header.d=com\n{from}"),
            Unverified,
            "a bare top-level domain aligns with nothing",
        ),
        (
            format!("Authentication-Results: mx.example.net; dkim=pass header.d=notexample.com\n{from}"),
            Unverified,
            "a suffix that is not a parent domain",
        ),
        (
            format!("Authentication-Results: mx.example.net; spf=pass smtp.mailfrom=example.com\n{from}"),
            Unverified,
            "SPF alone says nothing about From",
        ),
        (
            format!("Authentication-Results: mx.example.net; dmarc=pass\n{from}"),
            Unverified,
            "a pass that does not name the domain",
        ),
        (
            format!("Authentication-Results: mx.example.net (dmarc=pass header.from=example.com); none\n{from}"),
            Unverified,
            "a result inside a comment",
        ),
        (
            format!(
                "Authentication-Results: mx.example.net; dmarc=pass header.from=example.com\n{from}\nFrom: mallory@attacker.example"
            ),
            Unverified,
            "two From fields",
        ),
    ] {
        assert_eq!(verdict(&fields(&head), Some(TRUSTED), "example.com"), expected, "{why}");
    }
}

#[test]
fn without_a_trusted_server_nothing_is_authenticated() {
    let head =
        fields("Authentication-Results: mx.example.net; dmarc=pass header.from=example.com\nFrom: a@example.com");
    assert_eq!(verdict(&head, None, "example.com"), Verdict::Unverified);
    assert_eq!(verdict(&head, Some("  "), "example.com"), Verdict::Unverified);
    assert_eq!(verdict(&head, Some(TRUSTED), "example.com"), Verdict::Authenticated);
}
