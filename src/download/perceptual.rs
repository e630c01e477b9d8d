//! Perceptual hashes of downloaded pictures, for near-duplicate flags: the picture decoded to
//! grey levels (at reduced size when the format allows) and hashed by the core's dHash.
//!
//! Decoding is CPU work: it runs on the blocking pool, at most one decode per core at a time
//! ([`super::decode_slots`]), so it never holds up the network tasks and never takes more than the
//! machine has. A picture that does not decode gets no hash; it is stored all the same.

use std::io::Cursor;

use scrape_core::phash::{Phash, dhash};
use scrape_core::picture::png_without_inflating_chunks;

use crate::verify::ImageFormat;

/// The smallest size, in pixels on each side, a JPEG is decoded at: its DCT scaling (1/2, 1/4,
/// 1/8) picks the smallest scale that still gives this, so a large photo decodes at an eighth
/// of its size (its 8x8 blocks' means, which is what the 9x8 cells of dHash average anyway).
const JPEG_DECODE_SIDE: u16 = 64;

/// Bytes a decoder may allocate for one picture, against decompression bombs beyond what
/// `max_pixels` already refused (a PNG's chunks can claim more than its header says).
const DECODE_ALLOCATION: u64 = 512 * 1024 * 1024;

/// The perceptual hash of `bytes` (a picture in `format`), computed off the async tasks. `None`
/// when it does not decode.
pub async fn hash_off_task(bytes: bytes::Bytes, format: ImageFormat) -> Option<Phash> {
    // Invariant: the semaphore is never closed.
    let _permit = super::decode_slots()
        .acquire()
        .await
        .expect("decode semaphore open");
    // A decoder that panicked: no hash.
    tokio::task::spawn_blocking(move || perceptual_hash(&bytes, format))
        .await
        .ok()
        .flatten()
}

/// The perceptual hash of the picture in the file at `path`, read and decoded off the async
/// tasks. `None` when it cannot be read or does not decode.
pub async fn hash_file_off_task(path: std::path::PathBuf, format: ImageFormat) -> Option<Phash> {
    // Invariant: the semaphore is never closed.
    let _permit = super::decode_slots()
        .acquire()
        .await
        .expect("decode semaphore open");
    tokio::task::spawn_blocking(move || {
        let bytes = std::fs::read(path).ok()?;
        perceptual_hash(&bytes, format)
    })
    .await
    .ok()
    .flatten()
}

/// The perceptual hash of `bytes`, a picture in `format` (JPEG, PNG, GIF's first frame, WebP);
/// `None` for another format or a picture that does not decode.
pub fn perceptual_hash(bytes: &[u8], format: ImageFormat) -> Option<Phash> {
    let (grey, width, height) = match format {
        ImageFormat::Jpeg => jpeg_grey(bytes)?,
        ImageFormat::Png => other_grey(bytes, image::ImageFormat::Png)?,
        ImageFormat::Gif => other_grey(bytes, image::ImageFormat::Gif)?,
        ImageFormat::Webp => other_grey(bytes, image::ImageFormat::WebP)?,
        _ => return None,
    };
    dhash(&grey, width, height)
}

/// A JPEG's grey levels, decoded at reduced size.
fn jpeg_grey(bytes: &[u8]) -> Option<(Vec<u8>, usize, usize)> {
    let mut decoder = jpeg_decoder::Decoder::new(Cursor::new(bytes));
    decoder.read_info().ok()?;
    let (width, height) = decoder.scale(JPEG_DECODE_SIDE, JPEG_DECODE_SIDE).ok()?;
    let pixels = decoder.decode().ok()?;
    let info = decoder.info()?;
    let (width, height) = (usize::from(width), usize::from(height));
    let grey: Vec<u8> = match info.pixel_format {
        jpeg_decoder::PixelFormat::L8 => pixels,
        jpeg_decoder::PixelFormat::L16 => pixels.chunks_exact(2).map(|p| p[0]).collect(),
        jpeg_decoder::PixelFormat::RGB24 => pixels
            .chunks_exact(3)
            .map(|p| luma(p[0], p[1], p[2]))
            .collect(),
        // Adobe CMYK JPEGs are stored inverted: 255 is no ink.
        jpeg_decoder::PixelFormat::CMYK32 => pixels
            .chunks_exact(4)
            .map(|p| {
                let ink = |c: u8| (u16::from(c) * u16::from(p[3]) / 255) as u8;
                luma(ink(p[0]), ink(p[1]), ink(p[2]))
            })
            .collect(),
    };
    Some((grey, width, height))
}

/// Grey levels of a PNG, GIF or WebP, decoded whole (their formats have no reduced decode).
fn other_grey(bytes: &[u8], format: image::ImageFormat) -> Option<(Vec<u8>, usize, usize)> {
    // The hash never uses a colour profile or text: chunks that would inflate them go first.
    let bytes = match format {
        image::ImageFormat::Png => png_without_inflating_chunks(bytes),
        _ => std::borrow::Cow::Borrowed(bytes),
    };
    let mut reader = image::ImageReader::with_format(Cursor::new(&*bytes), format);
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(DECODE_ALLOCATION);
    reader.limits(limits);
    let picture = reader.decode().ok()?.into_rgb8();
    let (width, height) = (picture.width() as usize, picture.height() as usize);
    let grey = picture
        .pixels()
        .map(|p| luma(p.0[0], p.0[1], p.0[2]))
        .collect();
    Some((grey, width, height))
}

/// The grey level of a colour (ITU-R BT.601 weights), the same for every format, so a PNG copy
/// of a JPEG hashes alike.
fn luma(r: u8, g: u8, b: u8) -> u8 {
    ((u32::from(r) * 299 + u32::from(g) * 587 + u32::from(b) * 114) / 1000) as u8
}

#[cfg(test)]
mod tests {
    use super::*;
    use scrape_core::phash::distance;

    /// A `width` x `height` RGB picture: a gradient with a bright disc at (`cx`, `cy`).
    fn picture(width: u32, height: u32, cx: f32, cy: f32) -> Vec<u8> {
        let mut rgb = Vec::with_capacity((width * height * 3) as usize);
        for y in 0..height {
            for x in 0..width {
                let (u, v) = (x as f32 / width as f32, y as f32 / height as f32);
                let disc = ((u - cx).powi(2) + (v - cy).powi(2)).sqrt() < 0.2;
                let base = (u * 180.0 + v * 40.0) as u8;
                let level = if disc { 250 } else { base };
                rgb.extend_from_slice(&[level, base / 2, 255 - level]);
            }
        }
        rgb
    }

    fn jpeg(width: u32, height: u32, rgb: &[u8], quality: u8) -> Vec<u8> {
        let mut out = Vec::new();
        jpeg_encoder::Encoder::new(&mut out, quality)
            .encode(
                rgb,
                width as u16,
                height as u16,
                jpeg_encoder::ColorType::Rgb,
            )
            .unwrap();
        out
    }

    fn png(width: u32, height: u32, rgb: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut encoder = png::Encoder::new(&mut out, width, height);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().unwrap();
        writer.write_image_data(rgb).unwrap();
        writer.finish().unwrap();
        out
    }

    #[test]
    fn a_re_encoded_smaller_png_copy_hashes_alike_and_another_picture_does_not() {
        let original = jpeg(640, 480, &picture(640, 480, 0.3, 0.4), 90);
        let copy = png(160, 120, &picture(160, 120, 0.3, 0.4));
        // The same scene seen in a mirror: its gradients run the other way.
        let mirrored: Vec<u8> = picture(640, 480, 0.3, 0.4)
            .chunks_exact(640 * 3)
            .flat_map(|row| {
                row.chunks_exact(3)
                    .rev()
                    .flatten()
                    .copied()
                    .collect::<Vec<_>>()
            })
            .collect();
        let other = jpeg(640, 480, &mirrored, 90);
        let hash = |bytes: &[u8], format| perceptual_hash(bytes, format).expect("decodes");
        let original = hash(&original, ImageFormat::Jpeg);
        let copy = hash(&copy, ImageFormat::Png);
        let other = hash(&other, ImageFormat::Jpeg);
        assert!(
            distance(original, copy) <= 4,
            "{}",
            distance(original, copy)
        );
        assert!(
            distance(original, other) > 16,
            "{}",
            distance(original, other)
        );
    }

    #[test]
    fn bytes_that_do_not_decode_get_no_hash() {
        assert_eq!(
            perceptual_hash(b"\xff\xd8\xff\xe0 not a jpeg", ImageFormat::Jpeg),
            None
        );
        assert_eq!(
            perceptual_hash(b"\x89PNG\r\n\x1a\n", ImageFormat::Png),
            None
        );
        let rgb = picture(32, 32, 0.5, 0.5);
        assert_eq!(perceptual_hash(&png(32, 32, &rgb), ImageFormat::Bmp), None);
    }
}
