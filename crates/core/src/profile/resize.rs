//! `[download.resize]`: stored images resized for training sets (`size`, `mode`, `format`,
//! `quality`, `upscale`, `border_color`), checked, and the geometry each mode gives a picture.
//!
//! Pure: the download stage decodes, scales and encodes; this module says to what size, what
//! part of the scaled picture is kept and where it sits on the output canvas.

/// The largest `size`: a 16384 x 16384 RGB picture is already 768 MiB decoded.
pub const MAX_SIZE: u64 = 16_384;
/// `quality` by default, as img2dataset encodes.
pub const DEFAULT_QUALITY: u8 = 95;

/// How a picture is fitted to `size` (`mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResizeMode {
    /// The longest side becomes `size`, the other keeps the ratio.
    KeepRatio,
    /// The shortest side becomes `size`, and the centre `size` x `size` is kept.
    CenterCrop,
    /// The longest side becomes `size`, and the picture is centred on a `size` x `size`
    /// canvas of `border_color`.
    Border,
}

impl ResizeMode {
    pub const ALL: [Self; 3] = [Self::KeepRatio, Self::CenterCrop, Self::Border];

    pub fn name(self) -> &'static str {
        match self {
            Self::KeepRatio => "keep_ratio",
            Self::CenterCrop => "center_crop",
            Self::Border => "border",
        }
    }
}

/// The format resized pictures are encoded in (`format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResizeFormat {
    /// Baseline JPEG at `quality` (transparency is dropped).
    Jpeg,
    /// Lossless PNG.
    Png,
    /// Lossless WebP (the encoder at hand writes no lossy WebP).
    Webp,
    /// The format the picture came in (a GIF becomes a still GIF of its first frame).
    Keep,
}

impl ResizeFormat {
    pub const ALL: [Self; 4] = [Self::Jpeg, Self::Png, Self::Webp, Self::Keep];

    pub fn name(self) -> &'static str {
        match self {
            Self::Jpeg => "jpeg",
            Self::Png => "png",
            Self::Webp => "webp",
            Self::Keep => "keep",
        }
    }
}

/// `[download.resize]`, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResizeSettings {
    /// The target side, in pixels.
    pub size: u32,
    pub mode: ResizeMode,
    pub format: ResizeFormat,
    /// JPEG quality, 1 to 100.
    pub quality: u8,
    /// Pictures smaller than `size` are enlarged too; by default they never are.
    pub upscale: bool,
    /// The padding of `border`, as RGB.
    pub border_color: [u8; 3],
}

impl ResizeSettings {
    /// The settings of a `[download.resize]` table with only `size`.
    pub fn new(size: u32) -> Self {
        Self {
            size,
            mode: ResizeMode::KeepRatio,
            format: ResizeFormat::Jpeg,
            quality: DEFAULT_QUALITY,
            upscale: false,
            border_color: [0, 0, 0],
        }
    }

    /// What becomes of a `width` x `height` picture.
    pub fn geometry(&self, width: u32, height: u32) -> Geometry {
        let (width, height) = (width.max(1), height.max(1));
        let size = self.size;
        let fit = |side: u32| -> (u32, u32) {
            if side == size || (side < size && !self.upscale) {
                return (width, height);
            }
            let scale = |n: u32| {
                let scaled =
                    (u64::from(n) * u64::from(size) + u64::from(side) / 2) / u64::from(side);
                scaled.clamp(1, u64::from(u32::MAX)) as u32
            };
            (scale(width), scale(height))
        };
        match self.mode {
            ResizeMode::KeepRatio => {
                let scaled = fit(width.max(height));
                Geometry::whole(scaled)
            }
            ResizeMode::CenterCrop => {
                let scaled = fit(width.min(height));
                let kept = (scaled.0.min(size), scaled.1.min(size));
                Geometry {
                    scaled,
                    crop: (
                        (scaled.0 - kept.0) / 2,
                        (scaled.1 - kept.1) / 2,
                        kept.0,
                        kept.1,
                    ),
                    canvas: kept,
                    at: (0, 0),
                }
            }
            ResizeMode::Border => {
                let scaled = fit(width.max(height));
                // A picture kept at its size when it is larger than `size` cannot happen here:
                // `fit` scales every picture whose longest side is over `size`.
                let canvas = (size.max(scaled.0), size.max(scaled.1));
                Geometry {
                    scaled,
                    crop: (0, 0, scaled.0, scaled.1),
                    canvas,
                    at: ((canvas.0 - scaled.0) / 2, (canvas.1 - scaled.1) / 2),
                }
            }
        }
    }
}

/// What a resize does to one picture: scale it to `scaled`, keep the `crop` (x, y, width,
/// height) of the scaled picture, and put it at `at` on a `canvas` (the output's size).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub scaled: (u32, u32),
    pub crop: (u32, u32, u32, u32),
    pub canvas: (u32, u32),
    pub at: (u32, u32),
}

impl Geometry {
    fn whole(scaled: (u32, u32)) -> Self {
        Self {
            scaled,
            crop: (0, 0, scaled.0, scaled.1),
            canvas: scaled,
            at: (0, 0),
        }
    }

    /// The picture comes out as it went in: same size, nothing cut, nothing added.
    pub fn is_identity(&self, width: u32, height: u32) -> bool {
        *self == Self::whole((width, height))
    }
}

/// `size`: from 1 to [`MAX_SIZE`] pixels.
pub fn size(value: u64) -> Result<u32, String> {
    if (1..=MAX_SIZE).contains(&value) {
        Ok(value as u32)
    } else {
        Err(format!(
            "`size` must be between 1 and {MAX_SIZE} pixels, not {value}"
        ))
    }
}

/// `mode`: one of [`ResizeMode::ALL`] by name.
pub fn mode(name: &str) -> Result<ResizeMode, String> {
    super::units::one_of(name, ResizeMode::ALL, ResizeMode::name, "resize mode")
}

/// `format`: one of [`ResizeFormat::ALL`] by name (`jpg` is `jpeg`).
pub fn format(name: &str) -> Result<ResizeFormat, String> {
    let name = if name == "jpg" { "jpeg" } else { name };
    super::units::one_of(name, ResizeFormat::ALL, ResizeFormat::name, "resize format")
}

/// `quality`: from 1 to 100.
pub fn quality(value: u64) -> Result<u8, String> {
    if (1..=100).contains(&value) {
        Ok(value as u8)
    } else {
        Err(format!("`quality` must be between 1 and 100, not {value}"))
    }
}

/// `border_color`: `#rrggbb`.
pub fn border_color(text: &str) -> Result<[u8; 3], String> {
    let digits = text.strip_prefix('#').unwrap_or_default();
    let channel = |i: usize| {
        digits
            .get(i..i + 2)
            .and_then(|d| u8::from_str_radix(d, 16).ok())
    };
    match (digits.len(), channel(0), channel(2), channel(4)) {
        (6, Some(r), Some(g), Some(b)) => Ok([r, g, b]),
        _ => Err(format!(
            "`border_color` is a colour written `#rrggbb`, not `{text}`"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(size: u32, mode: ResizeMode, upscale: bool) -> ResizeSettings {
        ResizeSettings {
            mode,
            upscale,
            ..ResizeSettings::new(size)
        }
    }

    #[test]
    fn each_mode_gives_its_output_size() {
        use ResizeMode::{Border, CenterCrop, KeepRatio};
        // (mode, upscale, picture, output)
        let cases = [
            (KeepRatio, false, (640, 480), (256, 192)),
            (KeepRatio, false, (480, 640), (192, 256)),
            (KeepRatio, false, (100, 50), (100, 50)),
            (KeepRatio, true, (100, 50), (256, 128)),
            (KeepRatio, false, (10_000, 1), (256, 1)),
            (CenterCrop, false, (640, 480), (256, 256)),
            (CenterCrop, false, (300, 100), (256, 100)),
            (CenterCrop, true, (300, 100), (256, 256)),
            (Border, false, (640, 480), (256, 256)),
            (Border, false, (100, 50), (256, 256)),
            (Border, true, (100, 50), (256, 256)),
        ];
        for (mode, upscale, (w, h), expected) in cases {
            let g = settings(256, mode, upscale).geometry(w, h);
            assert_eq!(g.canvas, expected, "{mode:?} {upscale} {w}x{h}");
            assert!(g.crop.0 + g.crop.2 <= g.scaled.0 && g.crop.1 + g.crop.3 <= g.scaled.1);
            assert!(g.at.0 + g.crop.2 <= g.canvas.0 && g.at.1 + g.crop.3 <= g.canvas.1);
        }
    }

    #[test]
    fn centre_crop_and_border_centre_the_picture() {
        let crop = settings(256, ResizeMode::CenterCrop, false).geometry(640, 480);
        assert_eq!(crop.scaled, (341, 256));
        assert_eq!(crop.crop, (42, 0, 256, 256));
        let border = settings(256, ResizeMode::Border, false).geometry(640, 480);
        assert_eq!((border.scaled, border.at), ((256, 192), (0, 32)));
        let small = settings(256, ResizeMode::Border, false).geometry(100, 50);
        assert_eq!((small.scaled, small.at), ((100, 50), (78, 103)));
    }

    #[test]
    fn a_picture_already_at_size_is_left_alone() {
        let g = settings(256, ResizeMode::KeepRatio, false).geometry(256, 100);
        assert!(g.is_identity(256, 100));
        let g = settings(256, ResizeMode::Border, false).geometry(256, 100);
        assert!(!g.is_identity(256, 100), "padded");
    }

    #[test]
    fn keys_are_bounded_and_named() {
        assert!(size(0).is_err());
        assert_eq!(size(16_384), Ok(16_384));
        assert!(size(16_385).is_err());
        assert!(quality(0).is_err());
        assert_eq!(quality(100), Ok(100));
        assert!(quality(101).is_err());
        assert_eq!(mode("center_crop"), Ok(ResizeMode::CenterCrop));
        assert!(
            mode("crop")
                .unwrap_err()
                .contains("keep_ratio, center_crop, border")
        );
        assert_eq!(format("jpg"), Ok(ResizeFormat::Jpeg));
        assert!(
            format("avif")
                .unwrap_err()
                .contains("jpeg, png, webp, keep")
        );
        assert_eq!(border_color("#ff8000"), Ok([255, 128, 0]));
        for bad in ["ff8000", "#ff80", "#gg8000", "#ff8000aa"] {
            assert!(border_color(bad).is_err(), "{bad}");
        }
    }
}
