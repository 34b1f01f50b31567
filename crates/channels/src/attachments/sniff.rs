//! What a file's bytes are, from their first bytes: a platform's (or a
//! sender's) claimed type is not trusted. Pure.

/// The type the bytes show, for the kinds Herald reads; `None` for bytes it
/// cannot tell (or that are none of them).
pub fn sniff(bytes: &[u8]) -> Option<&'static str> {
    let starts = |magic: &[u8]| bytes.starts_with(magic);
    Some(if starts(b"\x89PNG\r\n\x1a\n") {
        "image/png"
    } else if starts(b"\xff\xd8\xff") {
        "image/jpeg"
    } else if starts(b"GIF87a") || starts(b"GIF89a") {
        "image/gif"
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        "image/webp"
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WAVE" {
        "audio/wav"
    } else if starts(b"%PDF-") {
        "application/pdf"
    } else if starts(b"OggS") {
        "audio/ogg"
    } else if starts(b"ID3") || (bytes.len() >= 2 && bytes[0] == 0xff && bytes[1] & 0xe0 == 0xe0) {
        "audio/mpeg"
    } else if starts(b"fLaC") {
        "audio/flac"
    } else if bytes.len() >= 12 && &bytes[4..8] == b"ftyp" {
        // MP4 family: audio (M4A) or video, told apart by the brand.
        match &bytes[8..12] {
            b"M4A " | b"M4B " => "audio/mp4",
            _ => "video/mp4",
        }
    } else if bytes.len() >= 4 && &bytes[..4] == b"\x1a\x45\xdf\xa3" {
        "video/webm"
    } else if starts(b"PK\x03\x04") {
        "application/zip"
    } else {
        return None;
    })
}

/// The type to store `bytes` as, given what was claimed; an error says why
/// the bytes are refused. Images, audio and PDFs must be what their bytes
/// show; text must be UTF-8 and show no binary signature.
pub fn confirm(claimed: &str, bytes: &[u8]) -> Result<String, String> {
    let claimed = super::config::essence(claimed);
    let major = claimed.split('/').next().unwrap_or_default();
    let shown = sniff(bytes);
    match (major, shown) {
        ("image" | "audio" | "video", Some(shown)) if shown.split('/').next() == Some(major) => Ok(shown.to_owned()),
        ("application", Some(shown)) if shown == claimed => Ok(shown.to_owned()),
        ("text", None) | ("application", None) if is_text(&claimed) => match std::str::from_utf8(bytes) {
            Ok(_) => Ok(claimed),
            Err(_) => Err(format!("it claimed to be {claimed} but is not UTF-8 text")),
        },
        (_, Some(shown)) => Err(format!("it claimed to be {claimed} but its bytes are {shown}")),
        (_, None) => Err(format!("it claimed to be {claimed} but its bytes are not")),
    }
}

/// Types whose bytes are text Herald can read as it is.
pub fn is_text(content_type: &str) -> bool {
    let essence = super::config::essence(content_type);
    essence.starts_with("text/")
        || matches!(
            essence.as_str(),
            "application/json" | "application/x-ndjson" | "application/xml" | "application/yaml"
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claimed_types_are_checked_against_the_bytes() {
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
        for (claimed, bytes, expected) in [
            ("image/png", &png[..], Ok("image/png")),
            // A platform that says jpeg for a png: the bytes win, it is an image.
            ("image/jpeg", &png[..], Ok("image/png")),
            (
                "image/png",
                b"PK\x03\x04zip",
                Err("it claimed to be image/png but its bytes are application/zip"),
            ),
            (
                "image/png",
                b"<svg/>",
                Err("it claimed to be image/png but its bytes are not"),
            ),
            ("application/pdf", b"%PDF-1.7", Ok("application/pdf")),
            (
                "application/pdf",
                b"MZ\x90\0",
                Err("it claimed to be application/pdf but its bytes are not"),
            ),
            ("text/plain", b"hello", Ok("text/plain")),
            (
                "text/plain",
                b"\x89PNG\r\n\x1a\n",
                Err("it claimed to be text/plain but its bytes are image/png"),
            ),
            (
                "text/csv",
                b"a,\xff\xfe",
                Err("it claimed to be text/csv but is not UTF-8 text"),
            ),
            ("audio/ogg", b"OggS\0\x02", Ok("audio/ogg")),
            ("audio/mpeg", b"OggS\0\x02", Ok("audio/ogg")),
            ("application/json", b"{\"a\":1}", Ok("application/json")),
        ] {
            assert_eq!(
                confirm(claimed, bytes),
                expected.map(str::to_owned).map_err(str::to_owned),
                "{claimed}"
            );
        }
    }
}
