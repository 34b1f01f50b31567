//! An image for the model: decoded under limits (a small file that claims
//! enormous dimensions is refused before anything is allocated for it),
//! downscaled to `image_max_side`, and encoded as a JPEG `data:` URL. The
//! decoding runs in a reader process ([`super::sandbox`]), so its pixels
//! never count against Herald's own memory, however many arrive at once.

use std::io::Cursor;

use base64::Engine as _;
use herald_core::ImagePart;
use image::{ImageReader, Limits};

use super::sandbox::{Answer, Job, Slot};

/// Pixels an image may have before Herald refuses to decode it: 40
/// megapixels, more than any phone camera, far less than a decompression
/// bomb asks for.
pub const MAX_PIXELS: u64 = 40_000_000;

/// How long an image may take to be read.
const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// The image as a part for the model, or why it cannot be one, read in a
/// reader process.
pub async fn read_part(reader: Slot, bytes: Vec<u8>, max_side: u32) -> Result<ImagePart, String> {
    match reader.run(Job::Image { max_side }, bytes, READ_TIMEOUT).await? {
        Answer::Image { data_url } => Ok(ImagePart { data_url }),
        Answer::Refused(why) => Err(why),
        Answer::PdfText(_) => Err("its reader gave no answer".to_owned()),
    }
}

/// The image as a part for the model, or why it cannot be one, on the
/// calling thread. Blocking.
pub fn to_part(bytes: &[u8], max_side: u32) -> Result<ImagePart, String> {
    let reader = || {
        ImageReader::new(Cursor::new(bytes))
            .with_guessed_format()
            .map_err(|err| format!("it could not be read: {err}"))
    };
    // The header alone first: its dimensions decide whether to decode.
    let (width, height) = reader()?
        .into_dimensions()
        .map_err(|err| format!("it could not be read: {err}"))?;
    if u64::from(width) * u64::from(height) > MAX_PIXELS {
        return Err(format!("it claims {width}×{height} pixels, more than Herald decodes"));
    }
    let mut reader = reader()?;
    let mut limits = Limits::default();
    limits.max_image_width = Some(width);
    limits.max_image_height = Some(height);
    limits.max_alloc = Some(MAX_PIXELS * 4 + 1024 * 1024);
    reader.limits(limits);
    let decoded = reader
        .decode()
        .map_err(|err| format!("it could not be decoded: {err}"))?;
    let resized = if width.max(height) > max_side {
        decoded.thumbnail(max_side, max_side)
    } else {
        decoded
    };
    let mut encoded = Vec::new();
    resized
        .to_rgb8()
        .write_to(&mut Cursor::new(&mut encoded), image::ImageFormat::Jpeg)
        .map_err(|err| format!("it could not be encoded: {err}"))?;
    let data = base64::engine::general_purpose::STANDARD.encode(&encoded);
    Ok(ImagePart {
        data_url: format!("data:image/jpeg;base64,{data}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(width: u32, height: u32) -> Vec<u8> {
        let image = image::RgbImage::from_pixel(width, height, image::Rgb([200, 30, 30]));
        let mut bytes = Vec::new();
        image
            .write_to(&mut Cursor::new(&mut bytes), image::ImageFormat::Png)
            .unwrap();
        bytes
    }

    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = 0xffff_ffffu32;
        for byte in bytes {
            crc ^= u32::from(*byte);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xedb8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    fn decoded(part: &ImagePart) -> image::DynamicImage {
        let data = part.data_url.strip_prefix("data:image/jpeg;base64,").unwrap();
        let bytes = base64::engine::general_purpose::STANDARD.decode(data).unwrap();
        image::load_from_memory(&bytes).unwrap()
    }

    #[test]
    fn large_images_are_downscaled_and_small_ones_kept() {
        let big = decoded(&to_part(&png(3000, 1500), 1024).unwrap());
        assert_eq!((big.width(), big.height()), (1024, 512));
        let small = decoded(&to_part(&png(300, 200), 1024).unwrap());
        assert_eq!((small.width(), small.height()), (300, 200));
    }

    #[test]
    fn a_small_file_claiming_huge_dimensions_is_refused_without_decoding() {
        // A real PNG header that claims 100000×100000 pixels, and nothing behind it.
        let mut bomb = png(1, 1);
        bomb[16..20].copy_from_slice(&100_000u32.to_be_bytes());
        bomb[20..24].copy_from_slice(&100_000u32.to_be_bytes());
        // The IHDR chunk's CRC, over its type and data, so only the size lies.
        let crc = crc32(&bomb[12..29]);
        bomb[29..33].copy_from_slice(&crc.to_be_bytes());
        let refused = to_part(&bomb, 1024).unwrap_err();
        assert!(refused.contains("100000×100000"), "{refused}");
        assert!(to_part(b"not an image", 1024).is_err());
    }
}
