//! A `tools/call` result as the model reads it: text blocks as they are,
//! every other kind of content described in one line (never dropped
//! silently), structured content when there is nothing else, all within
//! the cap every tool result has (the beginning and the end kept).

use base64::Engine as _;
use herald_core::ToolOutput;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// The most of a result the model is given, in bytes, as for every tool.
pub const MAX_OUTPUT_BYTES: usize = 16 * 1024;

pub fn into_output(result: CallToolResult) -> ToolOutput {
    let mut parts: Vec<String> = result.content.iter().map(describe).collect();
    if parts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        parts.push(structured.to_string());
    }
    let text = if parts.is_empty() {
        "(the tool returned nothing)".to_owned()
    } else {
        parts.join("\n")
    };
    let text = cut_middle(&text, MAX_OUTPUT_BYTES);
    if result.is_error == Some(true) {
        ToolOutput::error(text)
    } else {
        ToolOutput::ok(text)
    }
}

fn describe(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => format!(
            "[an image ({}, {} bytes) that Herald does not show to the model]",
            image.mime_type,
            decoded_len(&image.data)
        ),
        ContentBlock::Audio(audio) => format!(
            "[audio ({}, {} bytes) that Herald does not pass on]",
            audio.mime_type,
            decoded_len(&audio.data)
        ),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => format!("[resource {uri}]\n{text}"),
            ResourceContents::BlobResourceContents {
                uri, mime_type, blob, ..
            } => format!(
                "[resource {uri} ({}, {} bytes) that Herald does not show to the model]",
                mime_type.as_deref().unwrap_or("binary"),
                decoded_len(blob)
            ),
            _ => "[a resource of a kind Herald does not know]".to_owned(),
        },
        ContentBlock::ResourceLink(link) => format!("[link to resource {} ({})]", link.uri, link.name),
        _ => "[content of a kind Herald does not know]".to_owned(),
    }
}

fn decoded_len(data: &str) -> usize {
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_or(data.len() * 3 / 4, |bytes| bytes.len())
}

/// `text` within `max_bytes`: the beginning and the end, the gap marked.
pub fn cut_middle(text: &str, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_owned();
    }
    let room = max_bytes.saturating_sub(64);
    let head = floor(text, room * 3 / 4);
    let tail = ceil(text, text.len() - (room - head));
    format!(
        "{}\n[… {} bytes left out …]\n{}",
        &text[..head],
        tail - head,
        &text[tail..]
    )
}

fn floor(text: &str, mut index: usize) -> usize {
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

fn ceil(text: &str, mut index: usize) -> usize {
    while !text.is_char_boundary(index) {
        index += 1;
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(json: serde_json::Value) -> CallToolResult {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn every_kind_of_content_is_shown_or_described() {
        let output = into_output(result(serde_json::json!({
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "inside"}},
                {"type": "resource_link", "uri": "file:///b", "name": "b"}
            ]
        })));
        assert!(!output.is_error);
        for expected in [
            "hello",
            "image/png, 3 bytes",
            "[resource file:///a.txt]\ninside",
            "file:///b",
        ] {
            assert!(output.content.contains(expected), "{expected}: {}", output.content);
        }
        let error = into_output(result(
            serde_json::json!({"content": [{"type": "text", "text": "no"}], "isError": true}),
        ));
        assert!(error.is_error);
        let structured = into_output(result(
            serde_json::json!({"content": [], "structuredContent": {"sum": 3}}),
        ));
        assert_eq!(structured.content, r#"{"sum":3}"#);
    }

    #[test]
    fn huge_results_keep_their_ends_within_the_cap() {
        let text = format!("BEGIN{}END", "é".repeat(100_000));
        let cut = cut_middle(&text, MAX_OUTPUT_BYTES);
        assert!(cut.len() <= MAX_OUTPUT_BYTES, "{}", cut.len());
        assert!(cut.starts_with("BEGIN") && cut.ends_with("END") && cut.contains("bytes left out"));
    }
}
