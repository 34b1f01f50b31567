//! One capped download, shared by every channel's fetcher: the body is read
//! chunk by chunk and abandoned the moment it passes the cap, whatever the
//! server claimed its length to be. The caller bounds the time.

use super::FetchError;

/// The body of `request`'s answer, at most `cap` bytes of it.
pub async fn capped(request: reqwest::RequestBuilder, cap: u64) -> Result<Vec<u8>, FetchError> {
    let mut response = request
        .send()
        .await
        .map_err(|err| FetchError::Failed(err.without_url().to_string()))?;
    let status = response.status();
    if !status.is_success() {
        return Err(FetchError::Failed(format!("the platform answered {status}")));
    }
    if let Some(length) = response.content_length()
        && length > cap
    {
        return Err(FetchError::TooLarge { cap });
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|err| FetchError::Failed(err.without_url().to_string()))?
    {
        if (body.len() + chunk.len()) as u64 > cap {
            return Err(FetchError::TooLarge { cap });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Whether `url` is served by one of `hosts`: a platform host name (`cdn.discordapp.com`)
/// allows that host and its subdomains over `https` on the default port
/// only; an origin (`http://127.0.0.1:8080`, a configured stand-in API)
/// allows exactly that scheme, host and port. A file URL that points
/// anywhere else, or at the right host over plain HTTP or another port, is
/// not fetched, so a forged attachment cannot make Herald fetch from (or
/// send a token to) another server or in the clear.
pub fn on_hosts(url: &str, hosts: &[String]) -> bool {
    let Ok(url) = url::Url::parse(url) else {
        return false;
    };
    if !url.username().is_empty() || url.password().is_some() {
        return false;
    }
    let Some(host) = url.host_str().map(str::to_ascii_lowercase) else {
        return false;
    };
    hosts.iter().any(|allowed| {
        if allowed.contains("://") {
            return url::Url::parse(allowed).is_ok_and(|origin| {
                origin.scheme() == url.scheme()
                    && origin.host_str().map(str::to_ascii_lowercase).as_deref() == Some(host.as_str())
                    && origin.port_or_known_default() == url.port_or_known_default()
            });
        }
        let name = allowed.to_ascii_lowercase();
        url.scheme() == "https"
            && url.port_or_known_default() == Some(443)
            && (host == name || host.ends_with(&format!(".{name}")))
    })
}

/// The origin of a configured API URL (`scheme://host:port`), allowed as a
/// file host when it is not the platform's own (a local stand-in).
pub fn origin_of(api_url: &str) -> Option<String> {
    let url = url::Url::parse(api_url).ok()?;
    url.host_str()?;
    Some(url.origin().ascii_serialization())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_urls_on_the_platforms_hosts_are_fetched() {
        let hosts = vec!["cdn.discordapp.com".to_owned(), "http://127.0.0.1:8080".to_owned()];
        for (url, fetched) in [
            ("https://cdn.discordapp.com/attachments/1/2/a.png?ex=1", true),
            ("https://media.cdn.discordapp.com/a.png", true),
            ("https://cdn.discordapp.com:443/a.png", true),
            ("http://cdn.discordapp.com/a.png", false),
            ("https://cdn.discordapp.com:8443/a.png", false),
            ("https://cdn.discordapp.com.evil.example/a.png", false),
            ("https://evil.example/cdn.discordapp.com/a.png", false),
            ("https://user@cdn.discordapp.com/a.png", false),
            ("file:///etc/passwd", false),
            ("http://127.0.0.1:8080/a.png", true),
            ("https://127.0.0.1:8080/a.png", false),
            ("http://127.0.0.1:9090/a.png", false),
            ("http://sub.127.0.0.1:8080/a.png", false),
            ("http://169.254.169.254/latest/meta-data", false),
            ("not a url", false),
        ] {
            assert_eq!(on_hosts(url, &hosts), fetched, "{url}");
        }
        assert_eq!(
            origin_of("http://127.0.0.1:8080/api/").as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(
            origin_of("https://slack.com/api/").as_deref(),
            Some("https://slack.com")
        );
    }
}
