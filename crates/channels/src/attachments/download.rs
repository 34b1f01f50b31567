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

/// Whether `url` is served over HTTP(S) by one of `hosts` (or a subdomain
/// of one): a file URL that points anywhere else is not fetched, so a forged
/// attachment cannot make Herald fetch from (or send a token to) another host.
pub fn on_hosts(url: &str, hosts: &[String]) -> bool {
    let Ok(url) = url::Url::parse(url) else {
        return false;
    };
    if !matches!(url.scheme(), "https" | "http") || !url.username().is_empty() || url.password().is_some() {
        return false;
    }
    let Some(host) = url.host_str().map(str::to_ascii_lowercase) else {
        return false;
    };
    let port = url.port_or_known_default();
    hosts.iter().any(|allowed| {
        let (name, allowed_port) = match allowed.rsplit_once(':') {
            Some((name, port)) if port.parse::<u16>().is_ok() => (name, port.parse::<u16>().ok()),
            _ => (allowed.as_str(), None),
        };
        let name = name.to_ascii_lowercase();
        (host == name || host.ends_with(&format!(".{name}"))) && allowed_port.is_none_or(|p| Some(p) == port)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_urls_on_the_platforms_hosts_are_fetched() {
        let hosts = vec!["cdn.discordapp.com".to_owned(), "127.0.0.1:8080".to_owned()];
        for (url, fetched) in [
            ("https://cdn.discordapp.com/attachments/1/2/a.png?ex=1", true),
            ("https://media.cdn.discordapp.com/a.png", true),
            ("https://cdn.discordapp.com.evil.example/a.png", false),
            ("https://evil.example/cdn.discordapp.com/a.png", false),
            ("https://user@cdn.discordapp.com/a.png", false),
            ("file:///etc/passwd", false),
            ("http://127.0.0.1:8080/a.png", true),
            ("http://127.0.0.1:9090/a.png", false),
            ("http://169.254.169.254/latest/meta-data", false),
            ("not a url", false),
        ] {
            assert_eq!(on_hosts(url, &hosts), fetched, "{url}");
        }
    }
}
