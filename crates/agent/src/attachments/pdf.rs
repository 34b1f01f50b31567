//! A PDF's text layer, read with `lopdf` (default features off: no rayon,
//! no clock), out of Herald's process and within bounds.
//!
//! A PDF is a sender's file, so it is read as hostile:
//! - before it is parsed, every compressed stream is inflated into nothing,
//!   counting, and a document whose streams together would inflate to more
//!   than [`MAX_INFLATED_BYTES`] is refused (a Flate "zip bomb" costs a
//!   bounded read, never its size in memory);
//! - `lopdf` then decodes each stream against [`MAX_STREAM_BYTES`], for the
//!   filters the pre-scan does not count as well;
//! - at most [`MAX_PAGES`] pages are read, and reading stops once the text
//!   fills the room the prompt has for it;
//! - the whole read has [`READ_TIMEOUT`], and runs in a reader process of
//!   its own with a memory limit ([`super::sandbox`]): a document of many
//!   small objects, which no pre-scan can weigh, costs that process.
//!
//! Scanned PDFs have no text layer: they are described as such.

use std::io::Read;
use std::time::Duration;

use super::sandbox::{Answer, Job, Slot};

/// What every compressed stream of one PDF may inflate to, together.
pub(super) const MAX_INFLATED_BYTES: u64 = 32 * 1024 * 1024;
/// What `lopdf` may decode one stream (or one page's content) to. A page of
/// text is tens of kilobytes; the bound is low because the decoded content
/// is parsed into operands, which take several times its size.
const MAX_STREAM_BYTES: usize = 4 * 1024 * 1024;
/// Pages read at most; the rest of a longer document is left out, and the
/// model is told.
pub(super) const MAX_PAGES: usize = 200;
pub(super) const READ_TIMEOUT: Duration = Duration::from_secs(15);

/// What was read of a PDF.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct PdfText {
    pub text: String,
    pub pages_read: usize,
    pub pages: usize,
}

/// The text of the PDF `bytes`, at most about `max_chars` characters of
/// it; or why it could not be read, as a phrase for the model.
pub(super) async fn read_text(reader: Slot, bytes: Vec<u8>, max_chars: usize) -> Result<PdfText, String> {
    match reader.run(Job::PdfText { max_chars }, bytes, READ_TIMEOUT).await? {
        Answer::PdfText(text) => Ok(text),
        Answer::Refused(why) => Err(why),
        Answer::Image { .. } => Err("its reader gave no answer".to_owned()),
    }
}

/// [`read_text`] on the calling thread, unconfined. Blocking.
pub(super) fn read_text_blocking(bytes: &[u8], max_chars: usize) -> Result<PdfText, String> {
    let inflated = inflated_size(bytes, MAX_INFLATED_BYTES);
    if inflated > MAX_INFLATED_BYTES {
        return Err(format!(
            "its compressed streams would expand to more than {}, so it was not read",
            herald_core::human_size(MAX_INFLATED_BYTES)
        ));
    }
    let options = lopdf::LoadOptions {
        max_decompressed_size: Some(MAX_STREAM_BYTES),
        ..lopdf::LoadOptions::default()
    };
    let document = lopdf::Document::load_mem_with_options(bytes, options).map_err(|err| describe(&err))?;
    if document.is_encrypted() {
        return Err("it is encrypted".to_owned());
    }
    let pages = document.get_pages();
    let mut text = String::new();
    let mut chars = 0;
    let mut pages_read = 0;
    for &number in pages.keys().take(MAX_PAGES) {
        if chars >= max_chars {
            break;
        }
        pages_read += 1;
        for chunk in document.extract_text_chunks_with_limit(&[number], MAX_STREAM_BYTES) {
            match chunk {
                Ok(piece) => {
                    chars += piece.chars().count();
                    text.push_str(&piece);
                }
                Err(err @ lopdf::Error::Decompress(_)) => return Err(describe(&err)),
                // A font or an operator it cannot decode costs that piece, not the page.
                Err(_) => {}
            }
        }
    }
    Ok(PdfText {
        text,
        pages_read,
        pages: pages.len(),
    })
}

/// Why `lopdf` could not read it, without its internals.
fn describe(err: &lopdf::Error) -> String {
    match err {
        lopdf::Error::Decompress(_) => format!(
            "a stream in it would expand to more than {}, so it was not read",
            herald_core::human_size(MAX_STREAM_BYTES as u64)
        ),
        lopdf::Error::Decryption(_) | lopdf::Error::InvalidPassword => "it is encrypted".to_owned(),
        _ => "it is not a PDF Herald can read (damaged or malformed)".to_owned(),
    }
}

/// How many bytes the zlib (Flate) streams of `bytes` inflate to, counted
/// without keeping them, stopping once past `limit`. Streams are found by
/// their `stream` and `endstream` keywords; one that is not zlib counts its
/// raw length. Image streams (`/Image` in the dictionary before the
/// keyword) are not counted: reading text never decodes them, and a
/// document's pictures may well inflate to more than its text ever does. A
/// content stream that claims to be an image is still bounded by the
/// parser's [`MAX_STREAM_BYTES`].
pub(super) fn inflated_size(bytes: &[u8], limit: u64) -> u64 {
    let mut total: u64 = 0;
    let mut rest = bytes;
    let mut sink = vec![0u8; 64 * 1024];
    while let Some(start) = find(rest, b"stream") {
        let mut body = &rest[start + b"stream".len()..];
        // `endstream` also contains `stream`; skip it.
        if start >= 3 && &rest[start - 3..start] == b"end" {
            rest = body;
            continue;
        }
        let dictionary_start = rfind(&rest[..start], b"obj").map_or(0, |at| at + 3);
        let is_image = find(&rest[dictionary_start..start], b"/Image").is_some();
        body = body
            .strip_prefix(b"\r\n")
            .or_else(|| body.strip_prefix(b"\n"))
            .unwrap_or(body);
        let end = find(body, b"endstream").unwrap_or(body.len());
        // The end of line before `endstream` is not part of the data.
        let raw = body[..end]
            .strip_suffix(b"\r\n")
            .or_else(|| body[..end].strip_suffix(b"\n"))
            .unwrap_or(&body[..end]);
        rest = &body[end..];
        if is_image {
            continue;
        }
        let mut decoder = flate2::read::ZlibDecoder::new(raw);
        let mut inflated: u64 = 0;
        loop {
            match decoder.read(&mut sink) {
                Ok(0) => break,
                Ok(n) => {
                    inflated += n as u64;
                    if total + inflated > limit {
                        return total + inflated;
                    }
                }
                Err(_) => break,
            }
        }
        total += inflated.max(raw.len() as u64);
        if total > limit {
            return total;
        }
    }
    total
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

fn rfind(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).rposition(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use herald_testkit::pdf::{bomb_pdf, pdf_with_content};

    use super::*;

    #[test]
    fn the_text_layer_is_read_plain_or_compressed() {
        for flate in [false, true] {
            let pdf = pdf_with_content(b"BT /F1 12 Tf 72 700 Td (Hello PDF) Tj ET", flate);
            let read = read_text_blocking(&pdf, 1000).unwrap();
            assert_eq!(read.text.trim(), "Hello PDF", "flate: {flate}");
            assert_eq!((read.pages_read, read.pages), (1, 1));
        }
    }

    #[test]
    fn a_bomb_is_refused_before_it_is_parsed() {
        let pdf = bomb_pdf(40);
        assert!(pdf.len() < 1024 * 1024, "{} bytes", pdf.len());
        assert!(inflated_size(&pdf, MAX_INFLATED_BYTES) > MAX_INFLATED_BYTES);
        let why = read_text_blocking(&pdf, 1000).unwrap_err();
        assert!(why.contains("would expand to more than 32 MB"), "{why}");
    }

    #[test]
    fn a_stream_over_the_per_stream_bound_is_refused_by_the_parser() {
        // 8 MiB: under the document's total, over one stream's bound.
        let pdf = bomb_pdf(8);
        let why = read_text_blocking(&pdf, 1000).unwrap_err();
        assert!(why.contains("a stream in it would expand to more than 4 MB"), "{why}");
    }

    #[test]
    fn corrupt_and_empty_files_are_described() {
        let mut truncated = pdf_with_content(b"BT /F1 12 Tf (Hi) Tj ET", false);
        truncated.truncate(truncated.len() / 2);
        for bytes in [b"%PDF-1.4\ngarbage".to_vec(), Vec::new(), b"not a pdf".to_vec()] {
            let why = read_text_blocking(&bytes, 1000).unwrap_err();
            assert!(why.contains("not a PDF Herald can read"), "{why}");
        }
        // A damaged file may still be repaired by the lenient parser; either
        // way it is an answer, not a crash.
        let _ = read_text_blocking(&truncated, 1000);
    }

    #[test]
    fn image_streams_are_not_counted() {
        let mut pdf = pdf_with_content(b"BT /F1 12 Tf (Hi) Tj ET", false);
        let image = bomb_pdf(40);
        let at = find(&image, b"4 0 obj").unwrap();
        let mut picture = b"6 0 obj\n<< /Type /XObject /Subtype /Image /Filter /FlateDecode >>".to_vec();
        let stream = find(&image[at..], b"\nstream").unwrap();
        picture.extend_from_slice(&image[at + stream..]);
        pdf.extend_from_slice(&picture);
        assert_eq!(inflated_size(&pdf, u64::MAX), b"BT /F1 12 Tf (Hi) Tj ET".len() as u64);
    }

    #[test]
    fn stream_keywords_are_counted_once() {
        let pdf = pdf_with_content(b"BT /F1 12 Tf (Hi) Tj ET", false);
        assert_eq!(inflated_size(&pdf, u64::MAX), b"BT /F1 12 Tf (Hi) Tj ET".len() as u64);
    }
}
