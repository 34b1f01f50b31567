//! Whether a mail's `From` is authenticated: read from the
//! `Authentication-Results` header (RFC 8601) that the receiving mail server
//! Herald trusts wrote on top of the mail. Pure.
//!
//! `From` is whatever the sender typed; only a server that checked DKIM and
//! DMARC can vouch for it. A mail counts as authenticated when the topmost
//! `Authentication-Results` header(s) of the trusted server (its authserv-id,
//! `channels.email.trusted_authserv_id`) say `dmarc=pass` for the From
//! domain, or `dkim=pass` with a signing domain (`header.d`) aligned with
//! it: the same domain, or one a parent of the other (relaxed alignment).
//!
//! Architecture invariant: only the trusted server's headers that come first
//! count. A receiving server adds its header on top of the mail as it
//! arrived; anything lower — an `Authentication-Results` the sender wrote
//! into their own mail, claiming any authserv-id — was there before the
//! server saw the mail. Headers of other authserv-ids are never read, and
//! without a configured authserv-id nothing is authenticated.

/// What the trusted server said about a mail's sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// DMARC passed for the From domain, or an aligned DKIM signature did.
    Authenticated,
    /// No such result: the sender is unknown, whatever `From` says.
    Unverified,
}

/// The unfolded fields of a raw mail's header block, in order, as
/// `(lower-case name, value)`.
pub fn header_fields(raw: &[u8]) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(raw);
    let mut fields: Vec<(String, String)> = Vec::new();
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            if let Some((_, value)) = fields.last_mut() {
                value.push(' ');
                value.push_str(line.trim());
            }
            continue;
        }
        match line.split_once(':') {
            Some((name, value)) => fields.push((name.trim().to_ascii_lowercase(), value.trim().to_owned())),
            // Not a header line: the header block is malformed; stop reading it.
            None => break,
        }
    }
    fields
}

/// Whether the mail whose header block is `fields`, from `from_domain`, is
/// authenticated by the server whose authserv-id is `trusted`.
pub fn verdict(fields: &[(String, String)], trusted: Option<&str>, from_domain: &str) -> Verdict {
    let Some(trusted) = trusted.map(str::trim).filter(|t| !t.is_empty()) else {
        return Verdict::Unverified;
    };
    // Two From fields: DMARC judged one of them, Herald would read the other.
    if fields.iter().filter(|(name, _)| name == "from").count() != 1 {
        return Verdict::Unverified;
    }
    let from_domain = from_domain.trim().trim_end_matches('.').to_ascii_lowercase();
    if from_domain.is_empty() {
        return Verdict::Unverified;
    }
    let is_trusted = |name: &str, value: &str| {
        name == "authentication-results"
            && parse(value).is_some_and(|results| results.authserv_id.eq_ignore_ascii_case(trusted))
    };
    // The topmost run of the trusted server's headers; the run ends at the
    // first field that is not one of them.
    let Some(start) = fields.iter().position(|(name, value)| is_trusted(name, value)) else {
        return Verdict::Unverified;
    };
    let passed = fields[start..]
        .iter()
        .take_while(|(name, value)| is_trusted(name, value))
        .filter_map(|(_, value)| parse(value))
        .flat_map(|results| results.methods)
        .any(|result| result.vouches_for(&from_domain));
    if passed {
        Verdict::Authenticated
    } else {
        Verdict::Unverified
    }
}

/// One `Authentication-Results` field.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Results {
    authserv_id: String,
    methods: Vec<MethodResult>,
}

/// One `method=result` with its properties (`header.d=…`), lower-cased.
#[derive(Clone, Debug, PartialEq, Eq)]
struct MethodResult {
    method: String,
    result: String,
    properties: Vec<(String, String)>,
}

impl MethodResult {
    fn property(&self, name: &str) -> Option<&str> {
        self.properties
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    fn vouches_for(&self, from_domain: &str) -> bool {
        if self.result != "pass" {
            return false;
        }
        match self.method.as_str() {
            "dmarc" => self
                .property("header.from")
                .is_some_and(|domain| domain.trim_end_matches('.') == from_domain),
            "dkim" => {
                let signer = self.property("header.d").or_else(|| {
                    self.property("header.i")
                        .and_then(|identity| identity.rsplit_once('@').map(|(_, domain)| domain))
                });
                signer.is_some_and(|signer| aligned(signer.trim_end_matches('.'), from_domain))
            }
            _ => false,
        }
    }
}

/// Relaxed alignment without a public-suffix list: the same domain, or one
/// a subdomain of the other, where the shorter has at least two labels (so
/// a bare `com` aligns with nothing).
fn aligned(signer: &str, from_domain: &str) -> bool {
    if signer.is_empty() {
        return false;
    }
    if signer == from_domain {
        return true;
    }
    let child_of = |child: &str, parent: &str| parent.contains('.') && child.ends_with(&format!(".{parent}"));
    child_of(from_domain, signer) || child_of(signer, from_domain)
}

/// `value` without RFC 5322 comments (parentheses, nested, with
/// backslash escapes), outside quoted strings.
fn strip_comments(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let (mut depth, mut quoted, mut escaped) = (0u32, false, false);
    for c in value.chars() {
        if escaped {
            escaped = false;
            if depth == 0 {
                out.push(c);
            }
            continue;
        }
        match c {
            '\\' if quoted || depth > 0 => escaped = true,
            '"' if depth == 0 => {
                quoted = !quoted;
                out.push(c);
            }
            '(' if !quoted => depth += 1,
            ')' if !quoted && depth > 0 => {
                depth -= 1;
                out.push(' ');
            }
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// Splits on `;` outside quoted strings.
fn split_outside_quotes(value: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut quoted = false;
    for c in value.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                parts.last_mut().expect("one part").push(c);
            }
            ';' if !quoted => parts.push(String::new()),
            _ => parts.last_mut().expect("one part").push(c),
        }
    }
    parts
}

/// `key=value` tokens of one result, with spaces around `=` closed up.
fn tokens(resinfo: &str) -> Vec<String> {
    let mut closed = String::with_capacity(resinfo.len());
    for word in resinfo.split_whitespace() {
        let joins = closed.ends_with('=') || word.starts_with('=');
        if !closed.is_empty() && !joins {
            closed.push(' ');
        }
        closed.push_str(word);
    }
    closed.split(' ').filter(|t| !t.is_empty()).map(str::to_owned).collect()
}

fn parse(value: &str) -> Option<Results> {
    let cleaned = strip_comments(value);
    let mut parts = split_outside_quotes(&cleaned).into_iter();
    let authserv_id = parts.next()?.split_whitespace().next()?.to_ascii_lowercase();
    let mut methods = Vec::new();
    for part in parts {
        let mut words = tokens(&part).into_iter();
        let Some(first) = words.next() else { continue };
        let Some((method, result)) = first.split_once('=') else {
            continue; // `none`, or not a result
        };
        let method = method.split('/').next().unwrap_or_default().to_ascii_lowercase();
        let properties = words
            .filter_map(|word| {
                let (key, value) = word.split_once('=')?;
                Some((key.to_ascii_lowercase(), value.trim_matches('"').to_ascii_lowercase()))
            })
            .collect();
        methods.push(MethodResult {
            method,
            result: result.to_ascii_lowercase(),
            properties,
        });
    }
    Some(Results { authserv_id, methods })
}

#[cfg(test)]
mod tests;
