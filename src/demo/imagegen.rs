//! Deterministic pictures for the demo site and the tests.
//!
//! Fixture support, not part of a crawl: the demo site serves these images and
//! the tests compare what `scrape` downloaded against them by sha256, so the
//! same arguments must always give byte-identical output. Everything here is
//! integer arithmetic seeded by a SplitMix64 stream, and the encoders are used
//! without CPU-dependent paths (`jpeg-encoder`'s optional `simd` feature would
//! pick an AVX2 path at run time; keep it off, or hashes differ between machines).
//!
//! Each picture is a three-stop colour gradient at a seed-chosen angle with
//! seed-chosen hues, overlaid with a few translucent circles, rings and
//! rectangles, so a person browsing the demo output sees distinct images. The
//! picture depends only on the seed and the size, not on the format.

use crate::verify::ImageFormat;

/// Quality of generated JPEGs (1-100).
pub const JPEG_QUALITY: u8 = 80;

/// Largest width or height [`generate`] accepts: the JPEG and GIF limit (16-bit
/// sizes), applied to PNG too so every format takes the same sizes.
pub const MAX_SIDE: u32 = 65_535;

/// The formats [`generate`] can produce.
pub const SUPPORTED: [ImageFormat; 3] = [ImageFormat::Jpeg, ImageFormat::Png, ImageFormat::Gif];

/// Deterministic image bytes for `seed`: the same arguments always give
/// byte-identical output.
///
/// Returns `None` when `format` is not in [`SUPPORTED`] (there is no encoder for
/// it among the crate's dependencies) or when `width` or `height` is outside
/// `1..=MAX_SIDE`. Memory use is about 4 bytes per pixel plus the encoded output,
/// so keep sizes demo-sized.
pub fn generate(format: ImageFormat, seed: u64, width: u32, height: u32) -> Option<Vec<u8>> {
    if !SUPPORTED.contains(&format)
        || !(1..=MAX_SIDE).contains(&width)
        || !(1..=MAX_SIDE).contains(&height)
    {
        return None;
    }
    let picture = Picture::render(seed, width, height);
    // The encoders only fail on invalid sizes or I/O errors, and neither can
    // happen here (sizes checked above, output is a Vec); `?` rather than a panic
    // keeps that reasoning local.
    match format {
        ImageFormat::Jpeg => encode_jpeg(&picture),
        ImageFormat::Png => encode_png(&picture),
        ImageFormat::Gif => encode_gif(&picture),
        _ => None,
    }
}

/// An RGB8 raster, rows top to bottom.
struct Picture {
    width: u32,
    height: u32,
    rgb: Vec<u8>,
}

impl Picture {
    fn render(seed: u64, width: u32, height: u32) -> Picture {
        let mut rng = SplitMix64(seed);
        let mut picture = Picture {
            width,
            height,
            rgb: vec![0; width as usize * height as usize * 3],
        };
        picture.fill_gradient(&mut rng);
        let shapes = 3 + rng.below(4);
        for _ in 0..shapes {
            picture.draw_shape(&mut rng);
        }
        picture
    }

    /// Three hues spread around the colour wheel from a seed-chosen start,
    /// blended along a seed-chosen direction through a 256-entry lookup table.
    fn fill_gradient(&mut self, rng: &mut SplitMix64) {
        let hue = rng.below(360) as u32;
        let spread = 60 + rng.below(90) as u32;
        let stops = [
            hsv(hue, 200 + rng.below(56) as u32, 150 + rng.below(106) as u32),
            hsv(
                hue + spread,
                150 + rng.below(106) as u32,
                200 + rng.below(56) as u32,
            ),
            hsv(
                hue + 2 * spread,
                200 + rng.below(56) as u32,
                90 + rng.below(100) as u32,
            ),
        ];
        let mut table = [[0u8; 3]; 256];
        for (t, entry) in table.iter_mut().enumerate() {
            let (from, to, weight) = if t < 128 {
                (stops[0], stops[1], t as u32 * 2)
            } else {
                (stops[1], stops[2], (t as u32 - 128) * 2)
            };
            *entry = mix(from, to, weight);
        }

        // Direction vector with components in -64..=64, never (0, 0).
        let mut dx = rng.below(129) as i64 - 64;
        let dy = rng.below(129) as i64 - 64;
        if dx == 0 && dy == 0 {
            dx = 1;
        }
        let (w, h) = (i64::from(self.width) - 1, i64::from(self.height) - 1);
        let corners = [0, dx * w, dy * h, dx * w + dy * h];
        let low = corners.iter().copied().min().unwrap_or(0);
        let high = corners.iter().copied().max().unwrap_or(0);
        let range = (high - low).max(1);
        // Position along the gradient in 16.16 fixed point, scaled to 0..=255, so
        // the inner loop is an add and a shift.
        let step_x = (dx << 16) * 255 / range;
        let step_y = (dy << 16) * 255 / range;
        let start = (-low << 16) * 255 / range;
        let row_len = self.width as usize * 3;
        for (y, row) in self.rgb.chunks_exact_mut(row_len).enumerate() {
            let mut position = start + step_y * y as i64;
            for pixel in row.chunks_exact_mut(3) {
                let index = (position >> 16).clamp(0, 255) as usize;
                pixel.copy_from_slice(&table[index]);
                position += step_x;
            }
        }
    }

    /// One translucent circle, ring or rectangle, 6-35% of the shorter side.
    fn draw_shape(&mut self, rng: &mut SplitMix64) {
        let short_side = i64::from(self.width.min(self.height));
        let radius = (short_side * (6 + rng.below(30) as i64) / 200).max(1);
        let center_x = rng.below(u64::from(self.width)) as i64;
        let center_y = rng.below(u64::from(self.height)) as i64;
        let color = hsv(
            rng.below(360) as u32,
            120 + rng.below(136) as u32,
            160 + rng.below(96) as u32,
        );
        let opacity = 120 + rng.below(110) as u32;
        let kind = rng.below(3);
        let (half_w, half_h) = if kind == 2 {
            (radius, (radius * (50 + rng.below(100) as i64) / 100).max(1))
        } else {
            (radius, radius)
        };
        let inner = radius * 3 / 5;
        let x_range =
            (center_x - half_w).max(0)..=(center_x + half_w).min(i64::from(self.width) - 1);
        for y in (center_y - half_h).max(0)..=(center_y + half_h).min(i64::from(self.height) - 1) {
            for x in x_range.clone() {
                let (ox, oy) = (x - center_x, y - center_y);
                let distance = ox * ox + oy * oy;
                let inside = match kind {
                    0 => distance <= radius * radius,
                    1 => distance <= radius * radius && distance >= inner * inner,
                    _ => true,
                };
                if inside {
                    let at = (y as usize * self.width as usize + x as usize) * 3;
                    let pixel = &mut self.rgb[at..at + 3];
                    let blended = mix([pixel[0], pixel[1], pixel[2]], color, opacity);
                    pixel.copy_from_slice(&blended);
                }
            }
        }
    }
}

/// Blends `to` over `from`, `weight` out of 256.
fn mix(from: [u8; 3], to: [u8; 3], weight: u32) -> [u8; 3] {
    let channel =
        |a: u8, b: u8| ((u32::from(a) * (256 - weight) + u32::from(b) * weight) >> 8) as u8;
    [
        channel(from[0], to[0]),
        channel(from[1], to[1]),
        channel(from[2], to[2]),
    ]
}

/// Integer HSV to RGB: hue in degrees (any value, taken mod 360), saturation
/// and value in 0..=255.
fn hsv(hue: u32, saturation: u32, value: u32) -> [u8; 3] {
    let hue = hue % 360;
    let sector = hue / 60;
    let fraction = (hue % 60) * 255 / 60;
    let low = value * (255 - saturation) / 255;
    let falling = value * (255 - saturation * fraction / 255) / 255;
    let rising = value * (255 - saturation * (255 - fraction) / 255) / 255;
    let (r, g, b) = match sector {
        0 => (value, rising, low),
        1 => (falling, value, low),
        2 => (low, value, rising),
        3 => (low, falling, value),
        4 => (rising, low, value),
        _ => (value, low, falling),
    };
    [r as u8, g as u8, b as u8]
}

fn encode_jpeg(picture: &Picture) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let encoder = jpeg_encoder::Encoder::new(&mut out, JPEG_QUALITY);
    encoder
        .encode(
            &picture.rgb,
            u16::try_from(picture.width).ok()?,
            u16::try_from(picture.height).ok()?,
            jpeg_encoder::ColorType::Rgb,
        )
        .ok()?;
    Some(out)
}

fn encode_png(picture: &Picture) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, picture.width, picture.height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    // Fast (fdeflate) keeps a 640x480 picture in the low milliseconds; the
    // gradients still compress well.
    encoder.set_compression(png::Compression::Fast);
    let mut writer = encoder.write_header().ok()?;
    writer.write_image_data(&picture.rgb).ok()?;
    writer.finish().ok()?;
    Some(out)
}

/// Levels per channel of the fixed GIF palette: 6 x 7 x 6 = 252 colours (the
/// eye is most sensitive to green), padded to 256 with greys.
const GIF_LEVELS: [u32; 3] = [6, 7, 6];

/// 4x4 Bayer matrix for ordered dithering: unlike error diffusion it needs no
/// state between pixels, and unlike NeuQuant it is fast and trivially deterministic.
const BAYER: [[u32; 4]; 4] = [[0, 8, 2, 10], [12, 4, 14, 6], [3, 11, 1, 9], [15, 7, 13, 5]];

fn encode_gif(picture: &Picture) -> Option<Vec<u8>> {
    let [red_levels, green_levels, blue_levels] = GIF_LEVELS;
    let mut palette = Vec::with_capacity(256 * 3);
    for red in 0..red_levels {
        for green in 0..green_levels {
            for blue in 0..blue_levels {
                palette.push((red * 255 / (red_levels - 1)) as u8);
                palette.push((green * 255 / (green_levels - 1)) as u8);
                palette.push((blue * 255 / (blue_levels - 1)) as u8);
            }
        }
    }
    for grey in [64u8, 128, 192, 224] {
        palette.extend_from_slice(&[grey, grey, grey]);
    }

    let width = picture.width as usize;
    let mut indices = Vec::with_capacity(picture.rgb.len() / 3);
    for (at, pixel) in picture.rgb.chunks_exact(3).enumerate() {
        let (x, y) = (at % width, at / width);
        // A threshold strictly inside (0, 255) so that flat areas between two
        // levels come out as a pattern of both.
        let threshold = (BAYER[y % 4][x % 4] * 2 + 1) * 255 / 32;
        let quantize = |value: u8, levels: u32| {
            ((u32::from(value) * (levels - 1) + threshold) / 255).min(levels - 1)
        };
        let red = quantize(pixel[0], red_levels);
        let green = quantize(pixel[1], green_levels);
        let blue = quantize(pixel[2], blue_levels);
        indices.push(((red * green_levels + green) * blue_levels + blue) as u8);
    }

    let width = u16::try_from(picture.width).ok()?;
    let height = u16::try_from(picture.height).ok()?;
    let mut out = Vec::new();
    let mut encoder = gif::Encoder::new(&mut out, width, height, &palette).ok()?;
    encoder
        .write_frame(&gif::Frame::from_indexed_pixels(
            width, height, indices, None,
        ))
        .ok()?;
    // into_inner writes the trailer and reports its error, unlike drop.
    encoder.into_inner().ok()?;
    Some(out)
}

/// SplitMix64: tiny, fast, and its output for a given seed is fixed forever,
/// unlike a library RNG whose algorithm may change between versions.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..bound` (`bound` > 0); the modulo bias is irrelevant here.
    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::{ImageInfo, VerifyRules, inspect};
    use sha2::{Digest, Sha256};

    fn sha256(bytes: &[u8]) -> [u8; 32] {
        Sha256::digest(bytes).into()
    }

    #[test]
    fn every_generated_image_passes_inspect_with_its_format_and_size() {
        let sizes: [(&str, u32, u32); 6] = [
            ("single pixel", 1, 1),
            ("odd sizes that do not fill a jpeg block", 17, 9),
            ("one row", 300, 1),
            ("tall strip", 3, 200),
            ("demo thumbnail", 160, 120),
            ("demo picture", 640, 480),
        ];
        for format in SUPPORTED {
            for (name, width, height) in sizes {
                let bytes = generate(format, 7, width, height).unwrap();
                let expected = Ok(ImageInfo {
                    format,
                    width,
                    height,
                });
                let verdict = inspect(&bytes, true, &VerifyRules::default());
                assert_eq!(verdict, expected, "{format} {name}");
            }
        }
    }

    #[test]
    fn generation_is_deterministic() {
        for format in SUPPORTED {
            for seed in [0, 1, u64::MAX] {
                let first = sha256(&generate(format, seed, 123, 77).unwrap());
                let second = sha256(&generate(format, seed, 123, 77).unwrap());
                assert_eq!(first, second, "{format} seed {seed}");
            }
        }
    }

    #[test]
    fn different_seeds_give_different_images() {
        for format in SUPPORTED {
            let mut hashes: Vec<[u8; 32]> = (0..16)
                .map(|seed| sha256(&generate(format, seed, 64, 48).unwrap()))
                .collect();
            hashes.sort_unstable();
            hashes.dedup();
            assert_eq!(hashes.len(), 16, "{format}");
        }
    }

    #[test]
    fn different_seeds_give_different_pictures_not_just_different_bytes() {
        // Compare the rasters: at least a tenth of the pixels must differ clearly.
        let pictures: Vec<Picture> = (0..8).map(|seed| Picture::render(seed, 64, 48)).collect();
        for (index, first) in pictures.iter().enumerate() {
            for second in &pictures[index + 1..] {
                let differing = first
                    .rgb
                    .chunks_exact(3)
                    .zip(second.rgb.chunks_exact(3))
                    .filter(|(a, b)| a.iter().zip(b.iter()).any(|(x, y)| x.abs_diff(*y) > 24))
                    .count();
                assert!(differing > 64 * 48 / 10, "only {differing} pixels differ");
            }
        }
    }

    #[test]
    fn pictures_are_gradients_with_many_colours_not_flat_fills() {
        for seed in 0..8 {
            let picture = Picture::render(seed, 200, 150);
            let mut colours: Vec<&[u8]> = picture.rgb.chunks_exact(3).collect();
            colours.sort_unstable();
            colours.dedup();
            assert!(
                colours.len() > 100,
                "seed {seed}: {} colours",
                colours.len()
            );
        }
    }

    #[test]
    fn the_picture_for_a_seed_never_changes() {
        // Pins the raster (our own integer code, independent of encoder versions)
        // so an accidental change, or anything platform-dependent, shows up here
        // rather than as a hash mismatch in some end-to-end test. Update the
        // constant only when changing the picture on purpose.
        let digest = sha256(&Picture::render(42, 64, 48).rgb);
        let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
        assert_eq!(
            hex,
            "84ad9f86cad7651324da8aa29e2fbfbe3a8f933b67b3ef81c5a02944cf98e0f9"
        );
    }

    #[test]
    fn unsupported_formats_and_sizes_give_none() {
        let cases: [(&str, ImageFormat, u32, u32); 8] = [
            ("webp has no encoder", ImageFormat::Webp, 10, 10),
            ("avif has no encoder", ImageFormat::Avif, 10, 10),
            ("bmp has no encoder", ImageFormat::Bmp, 10, 10),
            ("tiff has no encoder", ImageFormat::Tiff, 10, 10),
            ("ico has no encoder", ImageFormat::Ico, 10, 10),
            ("svg has no encoder", ImageFormat::Svg, 10, 10),
            ("zero width", ImageFormat::Png, 0, 10),
            ("taller than 16 bits", ImageFormat::Jpeg, 10, MAX_SIDE + 1),
        ];
        for (name, format, width, height) in cases {
            assert_eq!(generate(format, 1, width, height), None, "{name}");
        }
    }

    #[test]
    fn gifs_carry_a_full_256_colour_global_palette_and_a_trailer() {
        let bytes = generate(ImageFormat::Gif, 3, 32, 32).unwrap();
        // Logical screen descriptor: global colour table flag set, size 2^(7+1).
        assert_eq!(bytes[10] & 0x87, 0x87);
        assert_eq!(bytes.last(), Some(&0x3B), "trailer");
    }
}
