//! Small PDFs written by hand for tests: a one-page document with a text
//! object, a decompression bomb (a Flate stream of many MiB of zeros, a few
//! KiB on the wire), and a document of millions of tiny objects (nothing
//! compressed, each a few bytes on the wire and many in a parser's memory).

use std::io::Write;

/// A one-page PDF that shows `text` (plain ASCII without parentheses or
/// backslashes) in a compressed content stream.
pub fn pdf_with_text(text: &str) -> Vec<u8> {
    pdf_with_content(format!("BT /F1 12 Tf 72 700 Td ({text}) Tj ET").as_bytes(), true)
}

/// A one-page PDF whose page shows `content` (a content stream) with
/// Helvetica as /F1, cross-reference table and all.
pub fn pdf_with_content(content: &[u8], flate: bool) -> Vec<u8> {
    if flate {
        let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(content).unwrap();
        pdf_with_stream(&encoder.finish().unwrap(), " /Filter /FlateDecode")
    } else {
        pdf_with_stream(content, "")
    }
}

/// A one-page PDF whose content stream is `stream`, encoded as `filter`
/// says (` /Filter /FlateDecode`, or nothing).
fn pdf_with_stream(stream: &[u8], filter: &str) -> Vec<u8> {
    pdf_with_objects(stream, filter, Vec::new())
}

/// A one-page PDF that says `text`, with one more object: an array of
/// `zeros` zeros, two bytes each on the wire (ten million make 20 MB).
pub fn many_objects_pdf(text: &str, zeros: usize) -> Vec<u8> {
    let mut array = Vec::with_capacity(zeros * 2 + 2);
    array.push(b'[');
    for _ in 0..zeros {
        array.extend_from_slice(b"0 ");
    }
    array.push(b']');
    let content = format!("BT /F1 12 Tf 72 700 Td ({text}) Tj ET");
    pdf_with_objects(content.as_bytes(), "", vec![array])
}

/// [`pdf_with_stream`] with `extra` objects after the five of the page.
fn pdf_with_objects(stream: &[u8], filter: &str, extra: Vec<Vec<u8>>) -> Vec<u8> {
    let mut objects: Vec<Vec<u8>> = vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R \
          /Resources << /Font << /F1 5 0 R >> >> >>"
            .to_vec(),
    ];
    let mut content_object = format!("<< /Length {}{filter} >>\nstream\n", stream.len()).into_bytes();
    content_object.extend_from_slice(stream);
    content_object.extend_from_slice(b"\nendstream");
    objects.push(content_object);
    objects.push(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".to_vec());
    objects.extend(extra);
    let mut pdf = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (index, object) in objects.iter().enumerate() {
        offsets.push(pdf.len());
        pdf.extend_from_slice(format!("{} 0 obj\n", index + 1).as_bytes());
        pdf.extend_from_slice(object);
        pdf.extend_from_slice(b"\nendobj\n");
    }
    let xref = pdf.len();
    pdf.extend_from_slice(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes());
    for offset in offsets {
        pdf.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    pdf.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    pdf
}

/// A PDF whose page content is a Flate stream of `megabytes` MiB of the
/// digit zero, about 1 KiB on the wire per MiB. The stream is one
/// compressed MiB repeated (each ends with a full flush, so each stands
/// alone), closed by an empty final block and the zlib checksum: a valid
/// stream of any size, made in milliseconds.
pub fn bomb_pdf(megabytes: usize) -> Vec<u8> {
    pdf_with_stream(&zlib_of_zeros(megabytes), " /Filter /FlateDecode")
}

fn zlib_of_zeros(megabytes: usize) -> Vec<u8> {
    let chunk = vec![b'0'; 1024 * 1024];
    let mut compress = flate2::Compress::new(flate2::Compression::best(), false);
    let mut block = Vec::with_capacity(64 * 1024);
    compress
        .compress_vec(&chunk, &mut block, flate2::FlushCompress::Full)
        .unwrap();
    assert_eq!(compress.total_in(), chunk.len() as u64, "one call took the whole MiB");
    let mut stream = vec![0x78, 0xda];
    for _ in 0..megabytes {
        stream.extend_from_slice(&block);
    }
    // An empty final block with fixed codes: BFINAL=1, BTYPE=01, end of block.
    stream.extend_from_slice(&[0x03, 0x00]);
    let n = (megabytes * chunk.len()) as u128;
    let (a, b) = (1 + n * 48, n + 48 * n * (n + 1) / 2);
    let adler = ((b % 65521) << 16 | (a % 65521)) as u32;
    stream.extend_from_slice(&adler.to_be_bytes());
    stream
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn the_bomb_stream_is_valid_zlib_of_the_size_it_says() {
        let stream = zlib_of_zeros(3);
        let mut inflated = Vec::new();
        flate2::read::ZlibDecoder::new(&stream[..])
            .read_to_end(&mut inflated)
            .unwrap();
        assert_eq!(inflated.len(), 3 * 1024 * 1024);
        assert!(inflated.iter().all(|&byte| byte == b'0'));
        assert!(
            bomb_pdf(1024).len() < 2 * 1024 * 1024,
            "a GiB bomb is small on the wire"
        );
    }
}
