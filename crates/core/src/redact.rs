//! Connection strings as they may be shown: in a log line, an error message,
//! `herald doctor`. A database URL or a model endpoint can carry a password in
//! its userinfo (`postgres://herald:s3cret@db/herald`) or in its query
//! (`?password=…`, `?api_key=…`); [`url`] hides both and keeps the rest
//! (scheme, user, host, port, path, harmless parameters) readable, so an
//! operator still sees which database or endpoint a message is about.
//!
//! Architecture invariant: this is the one redaction of URLs in Herald. It is
//! pure and total: it never fails and never panics, whatever the text, and
//! where the text is ambiguous it hides more rather than less.

/// What a hidden value is replaced with.
pub const HIDDEN: &str = "***";

/// A connection string that may carry a password (the storage URL): shown
/// only redacted, by `Display` and `Debug` alike, so it can go into an error
/// or a log line as it is; the raw text only through [`SecretUrl::expose`],
/// for the one call that connects.
#[derive(Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(transparent)]
pub struct SecretUrl(String);

impl SecretUrl {
    pub fn new(url: impl Into<String>) -> Self {
        Self(url.into())
    }

    /// The URL as written, password and all: for connecting, never for
    /// showing.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the URL as written starts with `prefix` (its scheme, say).
    pub fn starts_with(&self, prefix: &str) -> bool {
        self.0.starts_with(prefix)
    }
}

impl From<String> for SecretUrl {
    fn from(url: String) -> Self {
        Self(url)
    }
}

impl From<&str> for SecretUrl {
    fn from(url: &str) -> Self {
        Self(url.to_owned())
    }
}

impl std::fmt::Display for SecretUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&url(&self.0))
    }
}

impl std::fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", url(&self.0))
    }
}

/// `text` with the userinfo password and the values of secret-looking query
/// (and fragment) parameters replaced by [`HIDDEN`].
///
/// A password should be percent-encoded, but a hand-written one may hold a
/// raw `/`, `?` or `#`; the userinfo therefore ends at the last `@` before the
/// query, or failing that at the last `@` before the first `/`. A `:` and an
/// `@` in a path of a URL without userinfo can thus hide part of that path,
/// never reveal a password.
pub fn url(text: &str) -> String {
    let mut shown = String::with_capacity(text.len());
    let rest = match authority_start(text) {
        Some(start) => {
            let (scheme, rest) = text.split_at(start);
            shown.push_str(scheme);
            match userinfo_end(rest) {
                Some(at) => {
                    let (userinfo, rest) = rest.split_at(at);
                    match userinfo.split_once(':') {
                        Some((user, _password)) => {
                            shown.push_str(user);
                            shown.push(':');
                            shown.push_str(HIDDEN);
                        }
                        None => shown.push_str(userinfo),
                    }
                    rest
                }
                None => rest,
            }
        }
        None => text,
    };
    let (before_fragment, fragment) = match rest.split_once('#') {
        Some((before, fragment)) => (before, Some(fragment)),
        None => (rest, None),
    };
    match before_fragment.split_once('?') {
        Some((path, query)) => {
            shown.push_str(path);
            shown.push('?');
            push_parameters(&mut shown, query);
        }
        None => shown.push_str(before_fragment),
    }
    if let Some(fragment) = fragment {
        shown.push('#');
        push_parameters(&mut shown, fragment);
    }
    shown
}

/// Where the authority begins: just after the first `://`, when nothing
/// before it belongs to a path, query or fragment.
fn authority_start(text: &str) -> Option<usize> {
    let at = text.find("://")?;
    (!text[..at].contains(['/', '?', '#', '@'])).then_some(at + 3)
}

/// The byte offset of the `@` that ends the userinfo in `rest` (the text
/// after `://`), if there is a userinfo.
fn userinfo_end(rest: &str) -> Option<usize> {
    let query = rest.find(['?', '#']).unwrap_or(rest.len());
    rest[..query].rfind('@').or_else(|| {
        let path = rest.find('/').unwrap_or(rest.len());
        rest[..path].rfind('@')
    })
}

/// `name=value` pairs separated by `&`, with secret values hidden.
fn push_parameters(shown: &mut String, parameters: &str) {
    for (index, pair) in parameters.split('&').enumerate() {
        if index > 0 {
            shown.push('&');
        }
        match pair.split_once('=') {
            Some((name, _value)) if is_secret(name) => {
                shown.push_str(name);
                shown.push('=');
                shown.push_str(HIDDEN);
            }
            _ => shown.push_str(pair),
        }
    }
}

/// Whether a parameter name looks like it carries a credential. Names are
/// compared without case, with `-` read as `_`.
fn is_secret(name: &str) -> bool {
    const EXACT: &[&str] = &[
        "pass",
        "pwd",
        "key",
        "apikey",
        "auth",
        "authorization",
        "sig",
        "signature",
        "credential",
        "credentials",
    ];
    const ANYWHERE: &[&str] = &["password", "passwd", "passphrase", "secret", "token"];
    let name = name.trim().to_ascii_lowercase().replace('-', "_");
    EXACT.contains(&name.as_str()) || ANYWHERE.iter().any(|part| name.contains(part)) || name.ends_with("_key")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_and_secret_parameters_are_hidden_and_the_rest_stays() {
        for (text, shown) in [
            // Userinfo.
            (
                "postgres://herald:s3cret@db:5432/herald",
                "postgres://herald:***@db:5432/herald",
            ),
            ("postgresql://u:p@h", "postgresql://u:***@h"),
            ("postgres://:p@h/db", "postgres://:***@h/db"),
            ("postgres://u:@h/db", "postgres://u:***@h/db"),
            ("postgres://herald@db/herald", "postgres://herald@db/herald"),
            ("postgres://u:p@[::1]:5432/db", "postgres://u:***@[::1]:5432/db"),
            // A hand-written password with characters a URL should encode.
            ("postgres://u:pa/ss@h/db", "postgres://u:***@h/db"),
            ("postgres://u:pa@ss@h/db", "postgres://u:***@h/db"),
            ("postgres://u:p?ss@h/db", "postgres://u:***@h/db"),
            // Query parameters, by name, without case.
            (
                "postgres://db/herald?user=u&password=p&sslmode=require",
                "postgres://db/herald?user=u&password=***&sslmode=require",
            ),
            (
                "postgres://db/h?PassWord=p&sslpassword=q&sslkey=/etc/k.pem",
                "postgres://db/h?PassWord=***&sslpassword=***&sslkey=/etc/k.pem",
            ),
            (
                "https://api.example/v1?api_key=k&api-key=k&apikey=k&key=k&model=m",
                "https://api.example/v1?api_key=***&api-key=***&apikey=***&key=***&model=m",
            ),
            (
                "https://h/cb?access_token=t&refresh_token=r&client_secret=s&pass=p&state=42",
                "https://h/cb?access_token=***&refresh_token=***&client_secret=***&pass=***&state=42",
            ),
            ("https://h/cb#access_token=t&x=1", "https://h/cb#access_token=***&x=1"),
            (
                "postgres://u:p@h/db?token=t#secret=s",
                "postgres://u:***@h/db?token=***#secret=***",
            ),
            // Parameters without a scheme's authority still count.
            ("sqlite:herald.db?key=k&mode=rwc", "sqlite:herald.db?key=***&mode=rwc"),
            // Nothing secret: unchanged.
            ("sqlite://herald.db", "sqlite://herald.db"),
            ("sqlite::memory:", "sqlite::memory:"),
            ("sqlite://data/herald.db?mode=rwc", "sqlite://data/herald.db?mode=rwc"),
            ("https://api.openai.com/v1", "https://api.openai.com/v1"),
            ("https://h/a@b", "https://h/a@b"),
            ("https://h/x?flag&password", "https://h/x?flag&password"),
            ("not a url", "not a url"),
            ("", ""),
        ] {
            assert_eq!(url(text), shown, "{text}");
        }
    }

    #[test]
    fn odd_input_neither_panics_nor_shows_the_password() {
        let cases = [
            "postgres://ü:pässwörd@hö/ß?password=pässwörd#token=pässwörd",
            "://:pässwörd@",
            "a://b:pässwörd@@@?&&==#?#@",
            "@:pässwörd@://?password=pässwörd=x",
            "x:/y://z:pässwörd@w",
        ];
        for text in cases {
            // Every prefix, too: text cut anywhere is still handled.
            for (end, _) in text.char_indices().chain([(text.len(), ' ')]) {
                let _ = url(&text[..end]);
            }
        }
        for text in &cases[..3] {
            assert!(!url(text).contains("pässwörd"), "{text} -> {}", url(text));
        }
    }

    #[test]
    fn a_secret_url_shows_itself_redacted_whichever_way_it_is_formatted() {
        let secret = SecretUrl::new("postgres://herald:s3cret@db/herald?password=other");
        for shown in [secret.to_string(), format!("{secret:?}"), format!("{secret:#?}")] {
            assert!(!shown.contains("s3cret") && !shown.contains("other"), "{shown}");
            assert!(shown.contains("postgres://herald:***@db/herald"), "{shown}");
        }
        assert_eq!(secret.expose(), "postgres://herald:s3cret@db/herald?password=other");
        let parsed: SecretUrl = serde_json::from_str("\"sqlite://herald.db\"").unwrap();
        assert_eq!(parsed.expose(), "sqlite://herald.db");
    }
}
