//! Resizing for training sets (`[download.resize]`): a verified body is decoded, scaled
//! (Lanczos3, with SIMD where the CPU has it), cropped or padded as the mode says, and encoded again; the stored file is the
//! result, and its record keeps the downloaded picture's sha256, size and dimensions
//! ([`OriginalFile`]).
//!
//! It runs after the transfer, once the download has given back its connection slot and its
//! host's turn, on the blocking pool under the same one-per-core limit as the perceptual
//! hashes ([`super::decode_slots`]), so the network goes on while pictures wait for a core. A
//! picture waiting holds its body where the transfer left it: in its part file, or in memory
//! within the hold budget (WebDataset), and a download task, so the tasks' limit bounds them.
//!
//! A picture that does not decode, or a JPEG cut off before its end, is that image's failure
//! (`undecodable`). An animated GIF is
//! resized from its first frame. A picture the geometry leaves as it is, kept in its own
//! format, is stored as downloaded.

use std::borrow::Cow;
use std::io::Cursor;

use fast_image_resize::{FilterType, ResizeAlg, ResizeOptions, Resizer};
use image::{DynamicImage, ImageDecoder, RgbImage, RgbaImage};
use scrape_core::picture::{jpeg_reaches_its_end, png_without_inflating_chunks};
use sha2::{Digest, Sha256};

use super::fetch_image::{AttemptError, Fetched, stored_path};
use crate::net::{Failure, FailureClass};
use crate::profile::{DownloadSettings, ResizeFormat, ResizeSettings};
use crate::state::OriginalFile;
use crate::verify::ImageFormat;

/// Bytes a decoder may allocate for one picture, against decompression bombs beyond what
/// `max_pixels` already refused; a picture that needs more fails alone (`too_large`). A PNG's
/// colour profile and compressed text, which could inflate past it, are not decoded at all.
const DECODE_ALLOCATION: u64 = 1024 * 1024 * 1024;

/// A picture as the resize left it.
#[derive(Debug)]
pub struct Resized {
    pub bytes: Vec<u8>,
    pub format: ImageFormat,
    pub width: u32,
    pub height: u32,
}

/// Resizes the verified body of `fetched` by `rules`, in place (its part file, or its held
/// bytes), and records the original in its file. The picture's failure when it does not
/// decode; the part file is then gone.
pub async fn resize_fetched(
    mut fetched: Fetched,
    rules: ResizeSettings,
    settings: &DownloadSettings,
    profile: &str,
) -> Result<Fetched, AttemptError> {
    // Invariant: the semaphore is never closed.
    let _core = super::decode_slots()
        .acquire()
        .await
        .expect("decode semaphore open");
    let held = fetched.held.as_mut().map(|h| std::mem::take(&mut h.bytes));
    let (part, format, max_pixels) = (
        fetched.part.clone(),
        fetched.format,
        settings.verify.max_pixels,
    );
    let done = tokio::task::spawn_blocking(move || -> Result<_, AttemptError> {
        let in_part = held.is_none();
        let bytes = match held {
            Some(bytes) => bytes,
            None => std::fs::read(&part)
                .map_err(|source| AttemptError::Disk {
                    path: part.clone(),
                    source,
                })?
                .into(),
        };
        let resized = match resize_picture(&bytes, format, &rules, max_pixels) {
            Ok(resized) => resized,
            Err(failure) => {
                if in_part {
                    let _ = std::fs::remove_file(&part);
                }
                return Err(AttemptError::Failed(failure));
            }
        };
        let Some(resized) = resized else {
            return Ok((bytes, None));
        };
        if in_part {
            std::fs::write(&part, &resized.bytes).map_err(|source| AttemptError::Disk {
                path: part.clone(),
                source,
            })?;
        }
        let sha256 = hex::encode(Sha256::digest(&resized.bytes));
        Ok((bytes::Bytes::new(), Some((resized, sha256))))
    })
    .await
    .map_err(|e| Failure::new(FailureClass::Other, e.to_string()))??;
    let file = &mut fetched.file;
    let original = OriginalFile {
        sha256: file.sha256.clone(),
        bytes: file.bytes,
        width: file.width,
        height: file.height,
    };
    match done {
        (original_bytes, None) => {
            if let Some(held) = &mut fetched.held {
                held.bytes = original_bytes;
            }
        }
        (_, Some((resized, sha256))) => {
            file.path = stored_path(
                settings,
                profile,
                &fetched.final_url,
                &sha256,
                resized.format,
            );
            file.sha256 = sha256;
            file.bytes = resized.bytes.len() as u64;
            file.content_type = resized.format.content_type().to_owned();
            file.width = resized.width;
            file.height = resized.height;
            fetched.format = resized.format;
            if let Some(held) = &mut fetched.held {
                held.bytes = resized.bytes.into();
            }
        }
    }
    file.original = Some(Box::new(original));
    Ok(fetched)
}

/// `bytes`, a picture in `format`, resized by `rules`; `None` when it stays as it is (the
/// geometry changes nothing and its format is kept). Blocking: CPU work.
pub fn resize_picture(
    bytes: &[u8],
    format: ImageFormat,
    rules: &ResizeSettings,
    max_pixels: u64,
) -> Result<Option<Resized>, Failure> {
    let undecodable = |detail: String| Failure::new(FailureClass::Undecodable, detail);
    let decoder_format = match format {
        ImageFormat::Jpeg => image::ImageFormat::Jpeg,
        ImageFormat::Png => image::ImageFormat::Png,
        ImageFormat::Gif => image::ImageFormat::Gif,
        ImageFormat::Webp => image::ImageFormat::WebP,
        other => {
            return Err(undecodable(format!(
                "{other} pictures cannot be decoded for resizing (JPEG, PNG, GIF and WebP can)"
            )));
        }
    };
    let output = match rules.format {
        ResizeFormat::Jpeg => ImageFormat::Jpeg,
        ResizeFormat::Png => ImageFormat::Png,
        ResizeFormat::Webp => ImageFormat::Webp,
        ResizeFormat::Keep => format,
    };
    // A JPEG decoder pads a file cut off mid-scan with grey instead of refusing it.
    if format == ImageFormat::Jpeg && !jpeg_reaches_its_end(bytes) {
        return Err(undecodable(
            "the JPEG picture is cut off: no end-of-image marker after its scan".to_owned(),
        ));
    }
    // Resizing never uses a colour profile or text: chunks that would inflate them go first.
    let bytes = match format {
        ImageFormat::Png => png_without_inflating_chunks(bytes),
        _ => Cow::Borrowed(bytes),
    };
    let mut reader = image::ImageReader::with_format(Cursor::new(&*bytes), decoder_format);
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(DECODE_ALLOCATION);
    reader.limits(limits.clone());
    let decode_failure = |e: image::ImageError| match e {
        image::ImageError::Limits(_) => Failure::new(
            FailureClass::TooLarge,
            format!(
                "the {format} picture needs more than {} MiB to decode",
                DECODE_ALLOCATION >> 20
            ),
        ),
        e => undecodable(format!("the {format} picture does not decode: {e}")),
    };
    let mut decoder = reader.into_decoder().map_err(decode_failure)?;
    limits
        .reserve(decoder.total_bytes())
        .map_err(decode_failure)?;
    // A phone's portrait photo is stored landscape with an EXIF orientation: turned the way it
    // is shown before the geometry is worked out.
    let orientation = decoder
        .orientation()
        .unwrap_or(image::metadata::Orientation::NoTransforms);
    let mut picture = DynamicImage::from_decoder(decoder).map_err(decode_failure)?;
    picture.apply_orientation(orientation);
    let (width, height) = (picture.width(), picture.height());
    let geometry = rules.geometry(width, height);
    let canvas_pixels = u64::from(geometry.canvas.0) * u64::from(geometry.canvas.1);
    if canvas_pixels > max_pixels {
        return Err(Failure::new(
            FailureClass::TooLarge,
            format!("resized to {canvas_pixels} pixels, over `max_pixels` ({max_pixels})"),
        ));
    }
    if output == format && geometry.is_identity(width, height) {
        return Ok(None);
    }
    let keeps_alpha = output != ImageFormat::Jpeg && picture.color().has_alpha();
    // 8-bit RGB, or RGBA for a format with transparency, from here on: the scaler works on the
    // pixels as they are (alpha weighted in), and the encoders take these two.
    let picture = if keeps_alpha {
        DynamicImage::ImageRgba8(picture.into_rgba8())
    } else {
        DynamicImage::ImageRgb8(picture.into_rgb8())
    };
    let scaled = if geometry.scaled == (width, height) {
        picture
    } else {
        let mut scaled = DynamicImage::new(geometry.scaled.0, geometry.scaled.1, picture.color());
        let lanczos = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::Lanczos3));
        Resizer::new()
            .resize(&picture, &mut scaled, &lanczos)
            .map_err(|e| {
                Failure::new(
                    FailureClass::Other,
                    format!("the picture cannot be scaled: {e}"),
                )
            })?;
        scaled
    };
    let (x, y, w, h) = geometry.crop;
    let kept = if (x, y, w, h) == (0, 0, scaled.width(), scaled.height()) {
        scaled
    } else {
        scaled.crop_imm(x, y, w, h)
    };
    let [r, g, b] = rules.border_color;
    let (canvas_w, canvas_h) = geometry.canvas;
    let placed = |kept: DynamicImage| -> DynamicImage {
        if (canvas_w, canvas_h) == (kept.width(), kept.height()) {
            return kept;
        }
        let (at_x, at_y) = (i64::from(geometry.at.0), i64::from(geometry.at.1));
        if keeps_alpha {
            let mut canvas = RgbaImage::from_pixel(canvas_w, canvas_h, image::Rgba([r, g, b, 255]));
            image::imageops::overlay(&mut canvas, &kept.into_rgba8(), at_x, at_y);
            DynamicImage::ImageRgba8(canvas)
        } else {
            let mut canvas = RgbImage::from_pixel(canvas_w, canvas_h, image::Rgb([r, g, b]));
            image::imageops::overlay(&mut canvas, &kept.into_rgb8(), at_x, at_y);
            DynamicImage::ImageRgb8(canvas)
        }
    };
    let picture = placed(kept);
    let bytes = encode(&picture, output, rules.quality)?;
    Ok(Some(Resized {
        bytes,
        format: output,
        width: picture.width(),
        height: picture.height(),
    }))
}

/// `picture` (8-bit RGB, or RGBA for a format with transparency) encoded as `format`.
fn encode(picture: &DynamicImage, format: ImageFormat, quality: u8) -> Result<Vec<u8>, Failure> {
    let failed = |e: String| {
        Failure::new(
            FailureClass::Other,
            format!("the resized picture cannot be encoded as {format}: {e}"),
        )
    };
    let mut out = Vec::new();
    let (width, height) = (picture.width(), picture.height());
    match format {
        ImageFormat::Jpeg => {
            let rgb = picture.to_rgb8();
            let side = |n: u32| u16::try_from(n).map_err(|_| failed(format!("{n} pixels")));
            jpeg_encoder::Encoder::new(&mut out, quality)
                .encode(
                    rgb.as_raw(),
                    side(width)?,
                    side(height)?,
                    jpeg_encoder::ColorType::Rgb,
                )
                .map_err(|e| failed(e.to_string()))?;
        }
        ImageFormat::Png => picture
            .write_with_encoder(image::codecs::png::PngEncoder::new(&mut out))
            .map_err(|e| failed(e.to_string()))?,
        ImageFormat::Webp => picture
            .write_with_encoder(image::codecs::webp::WebPEncoder::new_lossless(&mut out))
            .map_err(|e| failed(e.to_string()))?,
        ImageFormat::Gif => {
            let rgba = picture.to_rgba8();
            image::codecs::gif::GifEncoder::new(&mut out)
                .encode(
                    rgba.as_raw(),
                    width,
                    height,
                    image::ExtendedColorType::Rgba8,
                )
                .map_err(|e| failed(e.to_string()))?;
        }
        other => return Err(failed(format!("{other} is not written"))),
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ResizeMode;

    fn png(width: u32, height: u32, alpha: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let picture = if alpha {
            DynamicImage::ImageRgba8(RgbaImage::from_fn(width, height, |x, y| {
                image::Rgba([(x % 256) as u8, (y % 256) as u8, 90, 128])
            }))
        } else {
            DynamicImage::ImageRgb8(RgbImage::from_fn(width, height, |x, y| {
                image::Rgb([(x % 256) as u8, (y % 256) as u8, 90])
            }))
        };
        picture
            .write_with_encoder(image::codecs::png::PngEncoder::new(&mut out))
            .unwrap();
        out
    }

    fn rules(mode: ResizeMode, format: ResizeFormat) -> ResizeSettings {
        ResizeSettings {
            mode,
            format,
            ..ResizeSettings::new(64)
        }
    }

    fn decoded(resized: &Resized) -> DynamicImage {
        image::load_from_memory(&resized.bytes).unwrap()
    }

    #[test]
    fn every_output_format_decodes_at_the_size_the_mode_gives() {
        let source = png(200, 100, true);
        let cases = [
            (
                ResizeMode::KeepRatio,
                ResizeFormat::Jpeg,
                ImageFormat::Jpeg,
                (64, 32),
            ),
            (
                ResizeMode::CenterCrop,
                ResizeFormat::Png,
                ImageFormat::Png,
                (64, 64),
            ),
            (
                ResizeMode::Border,
                ResizeFormat::Webp,
                ImageFormat::Webp,
                (64, 64),
            ),
            (
                ResizeMode::KeepRatio,
                ResizeFormat::Keep,
                ImageFormat::Png,
                (64, 32),
            ),
        ];
        for (mode, format, expected, size) in cases {
            let resized = resize_picture(&source, ImageFormat::Png, &rules(mode, format), u64::MAX)
                .unwrap()
                .expect("resized");
            assert_eq!(resized.format, expected, "{mode:?} {format:?}");
            assert_eq!(crate::verify::sniff(&resized.bytes).ok(), Some(expected));
            let picture = decoded(&resized);
            assert_eq!((picture.width(), picture.height()), size, "{mode:?}");
            assert_eq!((resized.width, resized.height), size);
        }
    }

    #[test]
    fn a_border_is_painted_in_its_colour() {
        let source = png(200, 100, false);
        let rules = ResizeSettings {
            mode: ResizeMode::Border,
            format: ResizeFormat::Png,
            border_color: [255, 0, 0],
            ..ResizeSettings::new(64)
        };
        let resized = resize_picture(&source, ImageFormat::Png, &rules, u64::MAX)
            .unwrap()
            .unwrap();
        let picture = decoded(&resized).into_rgb8();
        assert_eq!(picture.get_pixel(0, 0).0, [255, 0, 0], "top band");
        assert_eq!(picture.get_pixel(0, 63).0, [255, 0, 0], "bottom band");
        assert_ne!(picture.get_pixel(32, 32).0, [255, 0, 0], "the picture");
    }

    #[test]
    fn a_small_picture_kept_in_its_format_is_left_as_downloaded() {
        let source = png(40, 30, false);
        let keep = rules(ResizeMode::KeepRatio, ResizeFormat::Keep);
        assert!(
            resize_picture(&source, ImageFormat::Png, &keep, u64::MAX)
                .unwrap()
                .is_none()
        );
        let jpeg = rules(ResizeMode::KeepRatio, ResizeFormat::Jpeg);
        let resized = resize_picture(&source, ImageFormat::Png, &jpeg, u64::MAX)
            .unwrap()
            .expect("re-encoded");
        assert_eq!((resized.width, resized.height), (40, 30));
    }

    #[test]
    fn an_animated_gif_is_resized_from_its_first_frame() {
        let frame = |colour: [u8; 4]| {
            image::Frame::new(RgbaImage::from_pixel(100, 50, image::Rgba(colour)))
        };
        let mut gif = Vec::new();
        {
            let mut encoder = image::codecs::gif::GifEncoder::new(&mut gif);
            encoder
                .encode_frames([frame([255, 0, 0, 255]), frame([0, 0, 255, 255])])
                .unwrap();
        }
        let resized = resize_picture(
            &gif,
            ImageFormat::Gif,
            &rules(ResizeMode::KeepRatio, ResizeFormat::Keep),
            u64::MAX,
        )
        .unwrap()
        .expect("resized");
        assert_eq!(resized.format, ImageFormat::Gif);
        let picture = decoded(&resized).into_rgb8();
        assert_eq!((picture.width(), picture.height()), (64, 32));
        let [r, _, b] = picture.get_pixel(32, 16).0;
        assert!(r > 200 && b < 50, "the first (red) frame: {r} {b}");
    }

    #[test]
    fn a_picture_that_does_not_decode_or_is_cut_off_is_undecodable() {
        let mut source = png(200, 100, false);
        source.truncate(source.len() / 2);
        let failure = resize_picture(
            &source,
            ImageFormat::Png,
            &rules(ResizeMode::KeepRatio, ResizeFormat::Jpeg),
            u64::MAX,
        )
        .unwrap_err();
        assert_eq!(
            failure.class,
            FailureClass::Undecodable,
            "{}",
            failure.detail
        );
        let mut jpeg = Vec::new();
        DynamicImage::ImageRgb8(RgbImage::from_fn(640, 480, |x, y| {
            image::Rgb([(x % 256) as u8, (y % 256) as u8, 90])
        }))
        .write_with_encoder(image::codecs::jpeg::JpegEncoder::new(&mut jpeg))
        .unwrap();
        jpeg.truncate(jpeg.len() / 2);
        let failure = resize_picture(
            &jpeg,
            ImageFormat::Jpeg,
            &rules(ResizeMode::KeepRatio, ResizeFormat::Jpeg),
            u64::MAX,
        )
        .expect_err("a JPEG cut in half is not resized");
        assert_eq!(
            failure.class,
            FailureClass::Undecodable,
            "{}",
            failure.detail
        );
        let failure = resize_picture(
            b"BM....",
            ImageFormat::Bmp,
            &rules(ResizeMode::KeepRatio, ResizeFormat::Jpeg),
            u64::MAX,
        )
        .unwrap_err();
        assert_eq!(failure.class, FailureClass::Undecodable);
    }

    /// A zlib stream of fixed-Huffman deflate that inflates to `1 + 258 * matches` zero bytes
    /// (a literal 0, then matches of 258 bytes at distance 1): 13 bits per 258 bytes.
    fn zlib_of_zeros(matches: usize) -> Vec<u8> {
        let mut bytes = vec![0x78, 0x01];
        let (mut bits, mut count) = (0u64, 0u32);
        let mut put = |value: u64, n: u32, bytes: &mut Vec<u8>| {
            bits |= value << count;
            count += n;
            while count >= 8 {
                bytes.push(bits as u8);
                bits >>= 8;
                count -= 8;
            }
        };
        // Huffman codes go most significant bit first.
        let code = |code: u64, n: u32| (code.reverse_bits() >> (64 - n), n);
        put(0b011, 3, &mut bytes); // the last block, fixed Huffman codes
        let (zero, n) = code(0x30, 8);
        put(zero, n, &mut bytes);
        let (length_258, n) = code(0xC5, 8);
        for _ in 0..matches {
            put(length_258, n, &mut bytes);
            put(0, 5, &mut bytes); // distance 1
        }
        put(0, 7, &mut bytes); // end of block
        put(0, 7, &mut bytes); // to the byte
        bytes.extend_from_slice(&[0, 0, 0, 0]); // Adler-32: read after the inflation
        bytes
    }

    /// `png` with chunk `name` of `data` after its header chunk.
    fn with_chunk(png: &[u8], name: &[u8; 4], data: &[u8]) -> Vec<u8> {
        let after_header = 8 + 25;
        let mut crc = flate2::Crc::new();
        crc.update(name);
        crc.update(data);
        let mut out = png[..after_header].to_vec();
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        out.extend_from_slice(name);
        out.extend_from_slice(data);
        out.extend_from_slice(&crc.sum().to_be_bytes());
        out.extend_from_slice(&png[after_header..]);
        out
    }

    /// The process's peak resident memory in bytes (`VmHWM`), reset first when Linux allows.
    fn peak_memory(reset: bool) -> Option<u64> {
        if reset {
            let _ = std::fs::write("/proc/self/clear_refs", "5");
        }
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    }

    #[test]
    fn a_colour_profile_inflating_past_the_decode_cap_costs_no_memory() {
        // 4.2 million matches: a 7 MB chunk that inflates to 1.08 GB, past DECODE_ALLOCATION.
        let mut profile = b"bomb\0\0".to_vec();
        profile.extend_from_slice(&zlib_of_zeros(4_200_000));
        let source = with_chunk(&png(8, 4, false), b"iCCP", &profile);
        let Some(before) = peak_memory(true) else {
            eprintln!("skipping: no /proc/self/status to read the peak memory from");
            return;
        };
        let resized = resize_picture(
            &source,
            ImageFormat::Png,
            &rules(ResizeMode::KeepRatio, ResizeFormat::Jpeg),
            u64::MAX,
        )
        .expect("the pixels decode")
        .expect("re-encoded");
        assert_eq!((resized.width, resized.height), (8, 4));
        let after = peak_memory(false).expect("read before");
        let grown = after.saturating_sub(before);
        assert!(
            grown < 256 * 1024 * 1024,
            "the peak memory grew by {} MiB",
            grown >> 20
        );
    }

    #[test]
    fn a_photo_is_turned_by_its_exif_orientation_before_it_is_resized() {
        // Left half red, right half blue, with EXIF orientation 6: shown turned a quarter
        // clockwise, 100 x 200, red above blue.
        let picture = RgbImage::from_fn(200, 100, |x, _| {
            if x < 100 {
                image::Rgb([255, 0, 0])
            } else {
                image::Rgb([0, 0, 255])
            }
        });
        let exif = [
            b"II\x2a\0\x08\0\0\0".as_slice(),
            b"\x01\0",                             // one entry
            b"\x12\x01\x03\0\x01\0\0\0\x06\0\0\0", // Orientation (SHORT) = 6
            b"\0\0\0\0",                           // no next directory
        ]
        .concat();
        let mut jpeg = Vec::new();
        let mut encoder = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 95);
        image::ImageEncoder::set_exif_metadata(&mut encoder, exif).unwrap();
        DynamicImage::ImageRgb8(picture)
            .write_with_encoder(encoder)
            .unwrap();
        let resized = resize_picture(
            &jpeg,
            ImageFormat::Jpeg,
            &rules(ResizeMode::KeepRatio, ResizeFormat::Png),
            u64::MAX,
        )
        .unwrap()
        .expect("resized");
        assert_eq!((resized.width, resized.height), (32, 64));
        let shown = decoded(&resized).into_rgb8();
        let [r, _, b] = shown.get_pixel(16, 8).0;
        assert!(r > 200 && b < 60, "red on top: {r} {b}");
        let [r, _, b] = shown.get_pixel(16, 56).0;
        assert!(r < 60 && b > 200, "blue below: {r} {b}");
    }

    #[test]
    fn a_picture_needing_more_than_the_decode_cap_fails_alone_as_too_large() {
        // A PNG header of 20000 x 20000 RGB pixels: 1.2 GB decoded, past DECODE_ALLOCATION.
        let mut header = 20_000u32.to_be_bytes().to_vec();
        header.extend_from_slice(&20_000u32.to_be_bytes());
        header.extend_from_slice(&[8, 2, 0, 0, 0]);
        let small = png(8, 4, false);
        let mut source = small[..8].to_vec();
        let mut crc = flate2::Crc::new();
        crc.update(b"IHDR");
        crc.update(&header);
        source.extend_from_slice(&13u32.to_be_bytes());
        source.extend_from_slice(b"IHDR");
        source.extend_from_slice(&header);
        source.extend_from_slice(&crc.sum().to_be_bytes());
        source.extend_from_slice(&small[8 + 25..]);
        let failure = resize_picture(
            &source,
            ImageFormat::Png,
            &rules(ResizeMode::KeepRatio, ResizeFormat::Jpeg),
            u64::MAX,
        )
        .expect_err("past the cap");
        assert_eq!(failure.class, FailureClass::TooLarge, "{}", failure.detail);
    }
}
