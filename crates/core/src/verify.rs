//! Is this response body really an image, and how big is it?
//!
//! Part of the download stage: before a downloaded file gets its final name, the
//! stage hands the first bytes of the body (at most 256 KiB) to [`inspect`], which
//! recognises the format from its magic bytes, checks it against the profile's
//! [`VerifyRules`] and reads the dimensions from the header alone. No pixel data
//! is ever decoded, so a hostile file cannot make this module allocate or spin.
//!
//! The module is pure: no I/O, no clock, no global state. Raster dimensions come
//! from [`imagesize`] (BMP excepted, see [`inspect`]); SVG dimensions come from
//! the root element's `width`/`height`/`viewBox` attributes.
//!
//! # When the header does not fit in the head
//!
//! A JPEG with a large EXIF/ICC/XMP block, a TIFF whose directory sits after the
//! pixel data and an AVIF whose `meta` box follows `mdat` can all carry their
//! dimensions beyond the first 256 KiB. [`inspect`] therefore takes `whole`: when
//! the head is the complete body, running out of bytes means the file is
//! truncated ([`VerifyError::BadHeader`]); when it is only a prefix, it returns
//! [`VerifyError::HeaderBeyondHead`] and the caller, once the body is on disk,
//! measures the file with `imagesize::size(path)` and passes the result to
//! [`check_dimensions`], which applies the same rules as [`inspect`].

use std::fmt;
use std::io::ErrorKind;

/// An image format the crawler recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ImageFormat {
    /// JPEG / JFIF / EXIF.
    Jpeg,
    /// PNG, including APNG.
    Png,
    /// GIF87a and GIF89a, animated or not.
    Gif,
    /// WebP (lossy, lossless or extended).
    Webp,
    /// AVIF: an ISO-BMFF file whose `ftyp` box names the `avif` or `avis` brand.
    Avif,
    /// Windows bitmap.
    Bmp,
    /// TIFF, classic or BigTIFF.
    Tiff,
    /// Windows icon.
    Ico,
    /// SVG, a text format; not allowed by [`VerifyRules::default`] because it can carry scripts.
    Svg,
}

impl ImageFormat {
    /// Every format, in a stable order (the order of the enum).
    pub const ALL: [ImageFormat; 9] = [
        ImageFormat::Jpeg,
        ImageFormat::Png,
        ImageFormat::Gif,
        ImageFormat::Webp,
        ImageFormat::Avif,
        ImageFormat::Bmp,
        ImageFormat::Tiff,
        ImageFormat::Ico,
        ImageFormat::Svg,
    ];

    /// The file extension (without the dot) a file of this format is saved under.
    pub const fn extension(self) -> &'static str {
        match self {
            ImageFormat::Jpeg => "jpg",
            ImageFormat::Png => "png",
            ImageFormat::Gif => "gif",
            ImageFormat::Webp => "webp",
            ImageFormat::Avif => "avif",
            ImageFormat::Bmp => "bmp",
            ImageFormat::Tiff => "tiff",
            ImageFormat::Ico => "ico",
            ImageFormat::Svg => "svg",
        }
    }

    /// The MIME type to serve or expect for this format.
    ///
    /// ICO uses the IANA-registered `image/vnd.microsoft.icon` rather than the
    /// informal `image/x-icon`.
    pub const fn content_type(self) -> &'static str {
        match self {
            ImageFormat::Jpeg => "image/jpeg",
            ImageFormat::Png => "image/png",
            ImageFormat::Gif => "image/gif",
            ImageFormat::Webp => "image/webp",
            ImageFormat::Avif => "image/avif",
            ImageFormat::Bmp => "image/bmp",
            ImageFormat::Tiff => "image/tiff",
            ImageFormat::Ico => "image/vnd.microsoft.icon",
            ImageFormat::Svg => "image/svg+xml",
        }
    }

    /// The canonical lower-case name used in profiles (`formats = ["jpeg", "png"]`)
    /// and in error messages.
    pub const fn name(self) -> &'static str {
        match self {
            ImageFormat::Jpeg => "jpeg",
            ImageFormat::Png => "png",
            ImageFormat::Gif => "gif",
            ImageFormat::Webp => "webp",
            ImageFormat::Avif => "avif",
            ImageFormat::Bmp => "bmp",
            ImageFormat::Tiff => "tiff",
            ImageFormat::Ico => "ico",
            ImageFormat::Svg => "svg",
        }
    }

    /// Parses a format name as written by a person: case-insensitive, surrounding
    /// whitespace and one leading dot ignored, common extension aliases accepted
    /// (`jpg`, `jpe`, `jfif`, `tif`, `dib`, `icon`). Returns `None` for anything else.
    pub fn from_name(name: &str) -> Option<ImageFormat> {
        let name = name.trim();
        let name = name.strip_prefix('.').unwrap_or(name).to_ascii_lowercase();
        let format = match name.as_str() {
            "jpeg" | "jpg" | "jpe" | "jfif" => ImageFormat::Jpeg,
            "png" => ImageFormat::Png,
            "gif" => ImageFormat::Gif,
            "webp" => ImageFormat::Webp,
            "avif" => ImageFormat::Avif,
            "bmp" | "dib" => ImageFormat::Bmp,
            "tiff" | "tif" => ImageFormat::Tiff,
            "ico" | "icon" => ImageFormat::Ico,
            "svg" => ImageFormat::Svg,
            _ => return None,
        };
        Some(format)
    }

    /// True for every format except SVG.
    pub const fn is_raster(self) -> bool {
        !matches!(self, ImageFormat::Svg)
    }
}

impl fmt::Display for ImageFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What [`inspect`] learned about an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageInfo {
    /// The format recognised from the magic bytes.
    pub format: ImageFormat,
    /// Width in pixels; 0 only for an SVG that declares no usable size.
    pub width: u32,
    /// Height in pixels; 0 only for an SVG that declares no usable size.
    pub height: u32,
}

/// Why a body was rejected (or, for [`VerifyError::HeaderBeyondHead`], could not be judged yet).
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum VerifyError {
    /// The bytes are not a known image format; `what` says what they look like
    /// instead: `"html"`, `"json"`, `"text"`, `"empty"` or `"unknown"`.
    #[error("not an image (looks like {what})")]
    NotAnImage {
        /// `"html"`, `"json"`, `"text"`, `"empty"` or `"unknown"`.
        what: &'static str,
    },
    /// The format is recognised but the rules do not allow it.
    #[error("`{format}` image is not allowed")]
    FormatNotAllowed {
        /// [`ImageFormat::name`] of the rejected format.
        format: &'static str,
    },
    /// The magic bytes match but the header is malformed, or the whole body ends
    /// before the dimensions.
    #[error("{format} header is corrupt or truncated")]
    BadHeader {
        /// [`ImageFormat::name`] of the recognised format.
        format: &'static str,
    },
    /// Only for `whole == false`: the head ended before the dimensions. Not a
    /// verdict; measure the complete file with `imagesize::size` and pass the
    /// result to [`check_dimensions`]. Only raster formats produce it (in practice
    /// JPEG, TIFF and AVIF, whose headers can legitimately be far into the file).
    #[error("{format} dimensions lie beyond the first {head_len} bytes")]
    HeaderBeyondHead {
        /// [`ImageFormat::name`] of the recognised format.
        format: &'static str,
        /// How many bytes were looked at.
        head_len: usize,
    },
    /// `width * height` exceeds [`VerifyRules::max_pixels`] (a decompression bomb or just huge).
    #[error("image is {width}x{height}, larger than the {max_pixels} pixel limit")]
    TooManyPixels {
        /// Width in pixels.
        width: u32,
        /// Height in pixels.
        height: u32,
        /// The limit that was exceeded.
        max_pixels: u64,
    },
    /// Narrower than [`VerifyRules::min_width`] or lower than [`VerifyRules::min_height`].
    #[error("image is {width}x{height}, smaller than {min_width}x{min_height}")]
    TooSmall {
        /// Width in pixels.
        width: u32,
        /// Height in pixels.
        height: u32,
        /// Required minimum width.
        min_width: u32,
        /// Required minimum height.
        min_height: u32,
    },
}

/// The pixel limit used by [`VerifyRules::default`]: the decompression-bomb
/// threshold common to image libraries (about 0x7FFF_FFFF / 12 pixels).
pub const DEFAULT_MAX_PIXELS: u64 = 178_956_970;

/// What a profile accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyRules {
    /// Formats that may be kept; anything else is [`VerifyError::FormatNotAllowed`].
    pub allowed: Vec<ImageFormat>,
    /// Minimum width in pixels (0 = no minimum).
    pub min_width: u32,
    /// Minimum height in pixels (0 = no minimum).
    pub min_height: u32,
    /// Maximum `width * height`; `u64::MAX` disables the limit.
    pub max_pixels: u64,
}

impl VerifyRules {
    /// Whether `format` is in [`VerifyRules::allowed`].
    pub fn allows(&self, format: ImageFormat) -> bool {
        self.allowed.contains(&format)
    }
}

impl Default for VerifyRules {
    /// Every raster format, no SVG (it can carry scripts), no minimum size,
    /// [`DEFAULT_MAX_PIXELS`].
    fn default() -> Self {
        VerifyRules {
            allowed: ImageFormat::ALL
                .into_iter()
                .filter(|format| format.is_raster())
                .collect(),
            min_width: 0,
            min_height: 0,
            max_pixels: DEFAULT_MAX_PIXELS,
        }
    }
}

/// Recognises the format from the magic bytes at the start of `head`.
///
/// Binary formats need only their signature (BMP and ICO, whose two- and
/// four-byte signatures are weak, also need a plausible header field, so BMP
/// needs 18 bytes and ICO 6). SVG is recognised when, after an optional UTF-8 BOM,
/// whitespace, an XML declaration, processing instructions, comments and a
/// DOCTYPE, the root element is `<svg` (or a prefixed `<x:svg`).
///
/// # Errors
///
/// [`VerifyError::NotAnImage`], whose `what` is `"empty"` (no bytes, or only
/// whitespace), `"html"`, `"json"`, `"text"` (printable UTF-8) or `"unknown"`.
pub fn sniff(head: &[u8]) -> Result<ImageFormat, VerifyError> {
    if let Some(format) = sniff_binary(head) {
        return Ok(format);
    }
    let text = skip_bom_and_whitespace(head);
    if text.is_empty() {
        return Err(VerifyError::NotAnImage { what: "empty" });
    }
    let what = match classify_markup(text) {
        Markup::Svg => return Ok(ImageFormat::Svg),
        Markup::Html => "html",
        Markup::Other if text.starts_with(b"{") || text.starts_with(b"[") => "json",
        Markup::Other if is_printable_utf8(head) => "text",
        Markup::Other => "unknown",
    };
    Err(VerifyError::NotAnImage { what })
}

/// Recognises the format, checks it against `rules` and reads the dimensions
/// from the header, never decoding pixels.
///
/// `head` is the start of the body; `whole` says whether it is the entire body.
/// That only matters when the bytes run out before the dimensions: a whole body
/// is then truncated ([`VerifyError::BadHeader`]), a prefix gives
/// [`VerifyError::HeaderBeyondHead`] (see the module docs for what the caller
/// does next). SVG never gives `HeaderBeyondHead`: `imagesize` cannot measure it
/// on disk, and a root start tag longer than the head is not a real picture.
///
/// Raster dimensions come from `imagesize`, except BMP, which is read here
/// because `imagesize` misreads top-down bitmaps (negative height) and the old
/// OS/2 header (16-bit fields). A zero width or height is a
/// [`VerifyError::BadHeader`], except for an SVG with no usable size, which is
/// reported as 0x0 and skips the size checks (it scales to any size).
///
/// Checks run in this order: format recognised, format allowed, header readable,
/// pixel limit, minimum size.
pub fn inspect(head: &[u8], whole: bool, rules: &VerifyRules) -> Result<ImageInfo, VerifyError> {
    let format = sniff(head)?;
    if !rules.allows(format) {
        return Err(VerifyError::FormatNotAllowed {
            format: format.name(),
        });
    }
    let (width, height) = match format {
        ImageFormat::Svg => svg_dimensions(head).ok_or(VerifyError::BadHeader { format: "svg" })?,
        ImageFormat::Bmp => bmp_dimensions(head, whole)?,
        raster => raster_dimensions(raster, head, whole)?,
    };
    check_dimensions(format, width, height, rules)
}

/// Applies the rules to dimensions measured elsewhere, typically
/// `imagesize::size(path)` after [`VerifyError::HeaderBeyondHead`] (`usize`
/// matches `imagesize::ImageSize`). Also checks that `format` is allowed, so its
/// verdict is the one [`inspect`] would have given.
pub fn check_dimensions(
    format: ImageFormat,
    width: usize,
    height: usize,
    rules: &VerifyRules,
) -> Result<ImageInfo, VerifyError> {
    if !rules.allows(format) {
        return Err(VerifyError::FormatNotAllowed {
            format: format.name(),
        });
    }
    let bad_header = VerifyError::BadHeader {
        format: format.name(),
    };
    // An SVG without a usable size is still a picture: it scales to whatever the
    // page asks for, so there is nothing to compare with the limits.
    if format == ImageFormat::Svg && width == 0 && height == 0 {
        return Ok(ImageInfo {
            format,
            width: 0,
            height: 0,
        });
    }
    if width == 0 || height == 0 {
        return Err(bad_header);
    }
    let (Ok(width), Ok(height)) = (u32::try_from(width), u32::try_from(height)) else {
        return Err(bad_header);
    };
    if u64::from(width) * u64::from(height) > rules.max_pixels {
        return Err(VerifyError::TooManyPixels {
            width,
            height,
            max_pixels: rules.max_pixels,
        });
    }
    if width < rules.min_width || height < rules.min_height {
        return Err(VerifyError::TooSmall {
            width,
            height,
            min_width: rules.min_width,
            min_height: rules.min_height,
        });
    }
    Ok(ImageInfo {
        format,
        width,
        height,
    })
}

// ---------------------------------------------------------------------------
// Binary signatures

/// The binary formats, tried in the same order as `imagesize` tries them so that
/// both always agree on what a file is.
fn sniff_binary(head: &[u8]) -> Option<ImageFormat> {
    let format = if head.starts_with(b"\xFF\xD8\xFF") {
        ImageFormat::Jpeg
    } else if head.starts_with(b"\x89PNG\r\n\x1A\n") {
        ImageFormat::Png
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        ImageFormat::Gif
    } else if is_tiff(head) {
        ImageFormat::Tiff
    } else if head.len() >= 12 && head.starts_with(b"RIFF") && &head[8..12] == b"WEBP" {
        ImageFormat::Webp
    } else if is_avif(head) {
        ImageFormat::Avif
    } else if is_bmp(head) {
        ImageFormat::Bmp
    } else if is_ico(head) {
        ImageFormat::Ico
    } else {
        return None;
    };
    Some(format)
}

/// Classic TIFF (`II*\0`, `MM\0*`) and BigTIFF (`II+\0`, `MM\0+`), which
/// `imagesize` also measures.
fn is_tiff(head: &[u8]) -> bool {
    [b"II*\0", b"MM\0*", b"II+\0", b"MM\0+"]
        .iter()
        .any(|magic| head.starts_with(*magic))
}

/// An ISO-BMFF `ftyp` box whose major or compatible brands include `avif`
/// (still image) or `avis` (image sequence). HEIC and MP4 share the box but not
/// the brands.
fn is_avif(head: &[u8]) -> bool {
    if head.len() < 12 || &head[4..8] != b"ftyp" {
        return false;
    }
    let is_avif_brand = |brand: &[u8]| brand == b"avif" || brand == b"avis";
    if is_avif_brand(&head[8..12]) {
        return true;
    }
    // Size 0 means "to the end of the file"; size 1 (64-bit size) is never used for
    // a box this small, and anything under 16 leaves no room for compatible brands.
    let box_len = match be_u32(head, 0) {
        Some(0) => head.len(),
        Some(len) => usize::try_from(len).unwrap_or(usize::MAX).min(head.len()),
        None => return false,
    };
    box_len > 16 && head[16..box_len].chunks_exact(4).any(is_avif_brand)
}

/// `BM` alone matches plenty of text, so also require a known DIB header size
/// (core, OS/2 v2, INFO, V2..V5).
fn is_bmp(head: &[u8]) -> bool {
    head.starts_with(b"BM")
        && le_u32(head, 14).is_some_and(|size| [12, 16, 40, 52, 56, 64, 108, 124].contains(&size))
}

/// `00 00 01 00` followed by a non-zero image count (a cursor has type 2, an
/// MPEG stream `00 00 01 Bx`).
fn is_ico(head: &[u8]) -> bool {
    head.starts_with(&[0, 0, 1, 0]) && le_u16(head, 4).is_some_and(|count| count > 0)
}

// ---------------------------------------------------------------------------
// Raster dimensions

/// The error for a header that continues past the bytes we have.
fn cut_short(format: ImageFormat, head: &[u8], whole: bool) -> VerifyError {
    if whole {
        VerifyError::BadHeader {
            format: format.name(),
        }
    } else {
        VerifyError::HeaderBeyondHead {
            format: format.name(),
            head_len: head.len(),
        }
    }
}

fn raster_dimensions(
    format: ImageFormat,
    head: &[u8],
    whole: bool,
) -> Result<(usize, usize), VerifyError> {
    let bad_header = VerifyError::BadHeader {
        format: format.name(),
    };
    // Where the layout tells how many bytes the header needs, check that first:
    // `imagesize` would otherwise give a partial answer for a short ICO directory
    // (the largest entry read so far) or a generic error for a short TIFF directory.
    match header_len(format, head) {
        Needed::Bytes(needed) if head.len() < needed => {
            return Err(cut_short(format, head, whole));
        }
        Needed::Corrupt => return Err(bad_header),
        Needed::Bytes(_) | Needed::Walk => {}
    }
    if format == ImageFormat::Png && head.get(12..16) != Some(b"IHDR".as_slice()) {
        return Err(bad_header);
    }
    let size = imagesize::blob_size(head).map_err(move |err| match err {
        imagesize::ImageError::IoError(io) if io.kind() == ErrorKind::UnexpectedEof => {
            cut_short(format, head, whole)
        }
        _ => bad_header,
    })?;
    let (mut width, mut height) = (size.width, size.height);
    // A lossy (VP8) frame header keeps a 2-bit upscaling hint above the 14-bit
    // size, which `imagesize` does not mask off.
    if format == ImageFormat::Webp && head.get(12..16) == Some(b"VP8 ".as_slice()) {
        width &= 0x3FFF;
        height &= 0x3FFF;
    }
    Ok((width, height))
}

/// How many bytes a header needs, as far as its layout tells up front.
enum Needed {
    /// The dimensions are within the first this many bytes.
    Bytes(usize),
    /// Found by walking the file (JPEG segments, AVIF boxes): `imagesize` tells.
    Walk,
    /// The fields that locate the header are impossible.
    Corrupt,
}

/// How many bytes the header of `format` needs.
fn header_len(format: ImageFormat, head: &[u8]) -> Needed {
    match format {
        // Signature, IHDR length and type, width, height.
        ImageFormat::Png => Needed::Bytes(24),
        // Signature and logical screen size.
        ImageFormat::Gif => Needed::Bytes(10),
        // RIFF header, chunk header and the longest (VP8 and VP8X) size fields.
        ImageFormat::Webp => Needed::Bytes(30),
        // Directory header, then 16 bytes per entry (sniff saw the count).
        ImageFormat::Ico => le_u16(head, 4).map_or(Needed::Corrupt, |count| {
            Needed::Bytes(6 + 16 * usize::from(count))
        }),
        ImageFormat::Tiff => tiff_ifd_end(head),
        // BMP and SVG never get here: they are measured by this module.
        ImageFormat::Jpeg | ImageFormat::Avif | ImageFormat::Bmp | ImageFormat::Svg => Needed::Walk,
    }
}

/// Where the first image file directory ends; it may be anywhere in the file,
/// often after the pixel data. Before the directory offset or entry count is
/// known, asks for enough bytes to read it. Absurd sizes saturate, which reads
/// as "more than the head".
fn tiff_ifd_end(head: &[u8]) -> Needed {
    let little = head.starts_with(b"II");
    let big = head.get(2..4) == Some(if little { b"+\0" } else { b"\0+" });
    let (u16_at, u32_at, u64_at): (ReadU16, ReadU32, ReadU64) = if little {
        (le_u16, le_u32, le_u64)
    } else {
        (be_u16, be_u32, be_u64)
    };
    let to_usize = |value: u64| usize::try_from(value).unwrap_or(usize::MAX);
    let (header_len, count_len, entry_len) = if big { (16, 8, 20) } else { (8, 2, 12) };
    let offset = if big {
        u64_at(head, 8).map(to_usize)
    } else {
        u32_at(head, 4).map(|offset| to_usize(u64::from(offset)))
    };
    let Some(offset) = offset else {
        return Needed::Bytes(header_len);
    };
    // The directory cannot overlap the file header (0 is the classic corrupt value).
    if offset < header_len {
        return Needed::Corrupt;
    }
    let count_end = offset.saturating_add(count_len);
    let count = if big {
        u64_at(head, offset).map(to_usize)
    } else {
        u16_at(head, offset).map(usize::from)
    };
    Needed::Bytes(match count {
        Some(count) => count.saturating_mul(entry_len).saturating_add(count_end),
        None => count_end,
    })
}

/// BMP: BITMAPCOREHEADER has unsigned 16-bit sizes at 18 and 20; every later
/// header has signed 32-bit sizes at 18 and 22, a negative height meaning the
/// rows are stored top-down.
fn bmp_dimensions(head: &[u8], whole: bool) -> Result<(usize, usize), VerifyError> {
    let format = ImageFormat::Bmp;
    let short = || cut_short(format, head, whole);
    let dib_len = le_u32(head, 14).ok_or_else(short)?;
    let (width, height) = if dib_len == 12 {
        let width = le_u16(head, 18).ok_or_else(short)?;
        let height = le_u16(head, 20).ok_or_else(short)?;
        (usize::from(width), usize::from(height))
    } else {
        let width = le_i32(head, 18).ok_or_else(short)?;
        let height = le_i32(head, 22).ok_or_else(short)?;
        if width < 0 {
            return Err(VerifyError::BadHeader {
                format: format.name(),
            });
        }
        // u32 to usize: lossless on every target with a 32-bit or wider usize.
        (
            width.unsigned_abs() as usize,
            height.unsigned_abs() as usize,
        )
    };
    Ok((width, height))
}

/// `N` bytes at `at`, if the slice is long enough.
fn bytes_at<const N: usize>(bytes: &[u8], at: usize) -> Option<[u8; N]> {
    bytes.get(at..at.checked_add(N)?)?.try_into().ok()
}

fn le_u16(bytes: &[u8], at: usize) -> Option<u16> {
    bytes_at(bytes, at).map(u16::from_le_bytes)
}

fn be_u16(bytes: &[u8], at: usize) -> Option<u16> {
    bytes_at(bytes, at).map(u16::from_be_bytes)
}

fn le_u32(bytes: &[u8], at: usize) -> Option<u32> {
    bytes_at(bytes, at).map(u32::from_le_bytes)
}

fn le_i32(bytes: &[u8], at: usize) -> Option<i32> {
    bytes_at(bytes, at).map(i32::from_le_bytes)
}

fn be_u32(bytes: &[u8], at: usize) -> Option<u32> {
    bytes_at(bytes, at).map(u32::from_be_bytes)
}

fn le_u64(bytes: &[u8], at: usize) -> Option<u64> {
    bytes_at(bytes, at).map(u64::from_le_bytes)
}

fn be_u64(bytes: &[u8], at: usize) -> Option<u64> {
    bytes_at(bytes, at).map(u64::from_be_bytes)
}

type ReadU16 = fn(&[u8], usize) -> Option<u16>;
type ReadU32 = fn(&[u8], usize) -> Option<u32>;
type ReadU64 = fn(&[u8], usize) -> Option<u64>;

// ---------------------------------------------------------------------------
// Text: SVG, HTML, JSON

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Elements an HTML page (or an error page) starts with. Anything else that
/// is printable still counts as `"text"`.
const HTML_ROOTS: [&[u8]; 12] = [
    b"html", b"head", b"body", b"title", b"meta", b"link", b"script", b"style", b"div", b"p",
    b"iframe", b"center",
];

enum Markup {
    Svg,
    Html,
    Other,
}

fn skip_bom_and_whitespace(bytes: &[u8]) -> &[u8] {
    bytes
        .strip_prefix(UTF8_BOM)
        .unwrap_or(bytes)
        .trim_ascii_start()
}

fn starts_with_ignore_case(haystack: &[u8], prefix: &[u8]) -> bool {
    haystack
        .get(..prefix.len())
        .is_some_and(|start| start.eq_ignore_ascii_case(prefix))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

fn is_name_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b':' | b'.')
}

/// Splits a leading XML/HTML name off `bytes`; `None` unless something that ends
/// a name (whitespace, `>` or `/`) follows, so a name cut off by the end of the
/// head is never trusted.
fn leading_name(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let len = bytes.iter().position(|&byte| !is_name_byte(byte))?;
    let (name, rest) = bytes.split_at(len);
    let ends_name = |byte: &u8| byte.is_ascii_whitespace() || matches!(byte, b'>' | b'/');
    (len > 0 && rest.first().is_some_and(ends_name)).then_some((name, rest))
}

/// Where the prolog of a markup document leads.
enum Prolog<'a> {
    /// The bytes from the root element's `<` on.
    Root(&'a [u8]),
    /// `<!DOCTYPE html`.
    HtmlDoctype,
    /// A declaration, comment or DOCTYPE that does not end within the bytes.
    Unterminated,
}

/// Skips what may precede the root element: XML declaration, processing
/// instructions, comments, whitespace and a DOCTYPE. `text` starts after the BOM.
fn skip_prolog(mut text: &[u8]) -> Prolog<'_> {
    loop {
        text = text.trim_ascii_start();
        if text.starts_with(b"<?") {
            let Some(end) = find(text, b"?>") else {
                return Prolog::Unterminated;
            };
            text = &text[end + 2..];
        } else if text.starts_with(b"<!--") {
            let Some(end) = find(&text[4..], b"-->") else {
                return Prolog::Unterminated;
            };
            text = &text[4 + end + 3..];
        } else if starts_with_ignore_case(text, b"<!doctype") {
            let rest = &text[b"<!doctype".len()..];
            if leading_name(rest.trim_ascii_start())
                .is_some_and(|(name, _)| name.eq_ignore_ascii_case(b"html"))
            {
                return Prolog::HtmlDoctype;
            }
            let Some(end) = doctype_end(rest) else {
                return Prolog::Unterminated;
            };
            text = &rest[end + 1..];
        } else {
            return Prolog::Root(text);
        }
    }
}

/// Names the root element of a markup document. `text` starts after the BOM.
fn classify_markup(text: &[u8]) -> Markup {
    let root = match skip_prolog(text) {
        Prolog::Root(root) => root,
        Prolog::HtmlDoctype => return Markup::Html,
        Prolog::Unterminated => return Markup::Other,
    };
    let Some((name, _)) = root.strip_prefix(b"<").and_then(leading_name) else {
        return Markup::Other;
    };
    // XML names are case-sensitive and browsers reject `<SVG`; an `svg:` (or any)
    // namespace prefix is fine.
    let local_name = name.rsplit(|&byte| byte == b':').next().unwrap_or(name);
    if local_name == b"svg" {
        Markup::Svg
    } else if HTML_ROOTS
        .iter()
        .any(|root| name.eq_ignore_ascii_case(root))
    {
        Markup::Html
    } else {
        Markup::Other
    }
}

/// Index of the `>` closing a DOCTYPE, skipping quoted strings and an internal
/// subset in brackets (which contains `>` of its own).
fn doctype_end(bytes: &[u8]) -> Option<usize> {
    let mut quote = None;
    let mut depth = 0usize;
    for (index, &byte) in bytes.iter().enumerate() {
        match (quote, byte) {
            (Some(open), _) if byte == open => quote = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') => quote = Some(byte),
            (None, b'[') => depth += 1,
            (None, b']') => depth = depth.saturating_sub(1),
            (None, b'>') if depth == 0 => return Some(index),
            (None, _) => {}
        }
    }
    None
}

/// Valid UTF-8 without control characters other than tab, newline, form feed
/// and carriage return. A multi-byte character cut off by the end of the head
/// does not count against it.
fn is_printable_utf8(bytes: &[u8]) -> bool {
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(err) if err.error_len().is_none() => {
            // Cannot fail: the prefix up to `valid_up_to` is valid by definition.
            std::str::from_utf8(&bytes[..err.valid_up_to()]).unwrap_or_default()
        }
        Err(_) => return false,
    };
    text.chars()
        .all(|c| !c.is_control() || matches!(c, '\t' | '\n' | '\r' | '\x0C'))
}

/// The attribute text of the root `<svg ...>` start tag, up to its closing `>`
/// (a `>` inside a quoted value does not count). `None` if the tag never closes.
fn svg_start_tag(head: &[u8]) -> Option<&[u8]> {
    let Prolog::Root(root) = skip_prolog(skip_bom_and_whitespace(head)) else {
        return None;
    };
    let (_, attributes) = leading_name(root.strip_prefix(b"<")?)?;
    let mut quote = None;
    for (index, &byte) in attributes.iter().enumerate() {
        match (quote, byte) {
            (Some(open), _) if byte == open => quote = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') => quote = Some(byte),
            (None, b'>') => return Some(&attributes[..index]),
            (None, _) => {}
        }
    }
    None
}

/// SVG size: `width` and `height` in px or unitless; else the `viewBox` size,
/// scaled to keep its aspect ratio when only one of `width`/`height` is usable;
/// else 0x0 (unknown). Relative or physical units (`%`, `em`, `mm`, ...) count as
/// absent. `None` when the root start tag is cut off.
fn svg_dimensions(head: &[u8]) -> Option<(usize, usize)> {
    let mut rest = svg_start_tag(head)?;
    let (mut width, mut height, mut view_box) = (None, None, None);
    loop {
        rest = rest.trim_ascii_start();
        if rest.is_empty() {
            break;
        }
        let name_len = rest
            .iter()
            .position(|&byte| byte.is_ascii_whitespace() || matches!(byte, b'=' | b'/'))
            .unwrap_or(rest.len());
        if name_len == 0 {
            // A stray `/` (as in `/>`) or `=`: skip it.
            rest = &rest[1..];
            continue;
        }
        let name = &rest[..name_len];
        rest = rest[name_len..].trim_ascii_start();
        let mut value: &[u8] = b"";
        if let Some(after_equals) = rest.strip_prefix(b"=") {
            rest = after_equals.trim_ascii_start();
            match rest.first() {
                Some(&quote @ (b'"' | b'\'')) => {
                    let len = rest[1..].iter().position(|&byte| byte == quote)?;
                    value = &rest[1..1 + len];
                    rest = &rest[len + 2..];
                }
                _ => {
                    let len = rest
                        .iter()
                        .position(|byte| byte.is_ascii_whitespace())
                        .unwrap_or(rest.len());
                    value = &rest[..len];
                    rest = &rest[len..];
                }
            }
        }
        let value = std::str::from_utf8(value).unwrap_or("");
        if name == b"width" {
            width = svg_length(value);
        } else if name == b"height" {
            height = svg_length(value);
        } else if name == b"viewBox" {
            view_box = svg_view_box(value);
        }
    }
    let (width, height) = match (width, height, view_box) {
        (Some(width), Some(height), _) => (width, height),
        (Some(width), None, Some((box_width, box_height))) => {
            (width, width * box_height / box_width)
        }
        (None, Some(height), Some((box_width, box_height))) => {
            (height * box_width / box_height, height)
        }
        (None, None, Some(view_box)) => view_box,
        _ => return Some((0, 0)),
    };
    Some((svg_pixels(width), svg_pixels(height)))
}

/// A positive finite number, optionally followed by `px`.
fn svg_length(value: &str) -> Option<f64> {
    let value = value.trim();
    let number = value.strip_suffix("px").unwrap_or(value).trim_end();
    positive(number.parse().ok()?)
}

/// The width and height of `viewBox="min-x min-y width height"` (whitespace
/// and/or comma separated), if both are positive.
fn svg_view_box(value: &str) -> Option<(f64, f64)> {
    let mut numbers = value
        .split(|c: char| c.is_ascii_whitespace() || c == ',')
        .filter(|part| !part.is_empty())
        .map(str::parse::<f64>);
    let (Some(Ok(_)), Some(Ok(_)), Some(Ok(width)), Some(Ok(height)), None) = (
        numbers.next(),
        numbers.next(),
        numbers.next(),
        numbers.next(),
        numbers.next(),
    ) else {
        return None;
    };
    Some((positive(width)?, positive(height)?))
}

fn positive(number: f64) -> Option<f64> {
    (number.is_finite() && number > 0.0).then_some(number)
}

/// Rounds a positive SVG length to whole pixels, at least 1; `as` saturates
/// lengths beyond `u32::MAX`, which the pixel limit then rejects.
fn svg_pixels(length: f64) -> usize {
    length.round().max(1.0) as u32 as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    type Verdict = Result<ImageInfo, VerifyError>;

    // -- Fixtures: the smallest headers each format's readers accept. --------

    fn jpeg(width: u16, height: u16, exif_len: usize) -> Vec<u8> {
        let mut bytes = vec![0xFF, 0xD8];
        bytes.extend_from_slice(&[0xFF, 0xE0, 0, 16]);
        bytes.extend_from_slice(b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0");
        if exif_len > 0 {
            let segment_len = u16::try_from(exif_len + 2).unwrap();
            bytes.extend_from_slice(&[0xFF, 0xE1]);
            bytes.extend_from_slice(&segment_len.to_be_bytes());
            bytes.extend(std::iter::repeat_n(0x45, exif_len));
        }
        bytes.extend_from_slice(&[0xFF, 0xC0, 0, 17, 8]);
        bytes.extend_from_slice(&height.to_be_bytes());
        bytes.extend_from_slice(&width.to_be_bytes());
        bytes.extend_from_slice(&[3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]);
        bytes.extend_from_slice(&[0xFF, 0xDA, 0, 8, 1, 1, 0, 0, 0x3F, 0, 0x12, 0x34]);
        bytes.extend_from_slice(&[0xFF, 0xD9]);
        bytes
    }

    fn png(width: u32, height: u32) -> Vec<u8> {
        let mut bytes = b"\x89PNG\r\n\x1A\n\0\0\0\x0DIHDR".to_vec();
        bytes.extend_from_slice(&width.to_be_bytes());
        bytes.extend_from_slice(&height.to_be_bytes());
        bytes.extend_from_slice(&[8, 2, 0, 0, 0, 0, 0, 0, 0]);
        bytes
    }

    fn gif(version: &[u8; 6], width: u16, height: u16) -> Vec<u8> {
        let mut bytes = version.to_vec();
        bytes.extend_from_slice(&width.to_le_bytes());
        bytes.extend_from_slice(&height.to_le_bytes());
        bytes.extend_from_slice(&[0, 0, 0, 0x3B]);
        bytes
    }

    fn riff_webp(chunk: &[u8; 4], payload: &[u8]) -> Vec<u8> {
        let mut bytes = b"RIFF".to_vec();
        bytes.extend_from_slice(&(u32::try_from(payload.len()).unwrap() + 12).to_le_bytes());
        bytes.extend_from_slice(b"WEBP");
        bytes.extend_from_slice(chunk);
        bytes.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_le_bytes());
        bytes.extend_from_slice(payload);
        bytes
    }

    /// Lossy: frame tag, start code, 14-bit sizes with 2 scale bits on top.
    fn webp_vp8(width: u16, height: u16) -> Vec<u8> {
        let mut payload = vec![0x30, 0x01, 0x00, 0x9D, 0x01, 0x2A];
        payload.extend_from_slice(&width.to_le_bytes());
        payload.extend_from_slice(&height.to_le_bytes());
        payload.extend_from_slice(&[0; 4]);
        riff_webp(b"VP8 ", &payload)
    }

    fn webp_vp8l(width: u32, height: u32) -> Vec<u8> {
        let packed = (width - 1) | ((height - 1) << 14);
        let mut payload = vec![0x2F];
        payload.extend_from_slice(&packed.to_le_bytes());
        payload.extend_from_slice(&[0; 5]);
        riff_webp(b"VP8L", &payload)
    }

    fn webp_vp8x(width: u32, height: u32) -> Vec<u8> {
        let mut payload = vec![0; 4];
        payload.extend_from_slice(&(width - 1).to_le_bytes()[..3]);
        payload.extend_from_slice(&(height - 1).to_le_bytes()[..3]);
        riff_webp(b"VP8X", &payload)
    }

    fn mp4_box(kind: &[u8; 4], payload: &[u8]) -> Vec<u8> {
        let mut bytes = (u32::try_from(payload.len()).unwrap() + 8)
            .to_be_bytes()
            .to_vec();
        bytes.extend_from_slice(kind);
        bytes.extend_from_slice(payload);
        bytes
    }

    fn ftyp(major: &[u8; 4], compatible: &[&[u8; 4]]) -> Vec<u8> {
        let mut payload = major.to_vec();
        payload.extend_from_slice(&[0; 4]);
        for brand in compatible {
            payload.extend_from_slice(*brand);
        }
        mp4_box(b"ftyp", &payload)
    }

    /// ftyp, then meta > (hdlr, iprp > ipco > ispe), as an AVIF encoder writes it.
    fn avif(major: &[u8; 4], compatible: &[&[u8; 4]], width: u32, height: u32) -> Vec<u8> {
        let mut ispe = vec![0; 4];
        ispe.extend_from_slice(&width.to_be_bytes());
        ispe.extend_from_slice(&height.to_be_bytes());
        let ipco = mp4_box(b"ipco", &mp4_box(b"ispe", &ispe));
        let iprp = mp4_box(b"iprp", &ipco);
        let mut meta = vec![0; 4];
        meta.extend(mp4_box(b"hdlr", &[0; 25]));
        meta.extend(iprp);
        let mut bytes = ftyp(major, compatible);
        bytes.extend(mp4_box(b"meta", &meta));
        bytes.extend(mp4_box(b"mdat", &[0; 16]));
        bytes
    }

    fn bmp_info(width: i32, height: i32) -> Vec<u8> {
        let mut bytes = b"BM".to_vec();
        bytes.extend_from_slice(&[0x46, 0, 0, 0, 0, 0, 0, 0, 54, 0, 0, 0]);
        bytes.extend_from_slice(&40u32.to_le_bytes());
        bytes.extend_from_slice(&width.to_le_bytes());
        bytes.extend_from_slice(&height.to_le_bytes());
        bytes.extend_from_slice(&[1, 0, 24, 0]);
        bytes.extend_from_slice(&[0; 24]);
        bytes
    }

    fn bmp_core(width: u16, height: u16) -> Vec<u8> {
        let mut bytes = b"BM".to_vec();
        bytes.extend_from_slice(&[0x2A, 0, 0, 0, 0, 0, 0, 0, 26, 0, 0, 0]);
        bytes.extend_from_slice(&12u32.to_le_bytes());
        bytes.extend_from_slice(&width.to_le_bytes());
        bytes.extend_from_slice(&height.to_le_bytes());
        bytes.extend_from_slice(&[1, 0, 24, 0]);
        bytes
    }

    /// A classic TIFF with `gap` bytes of "pixel data" before its directory, as
    /// writers that put the directory last produce.
    fn tiff(little: bool, width: u32, height: u32, gap: usize) -> Vec<u8> {
        let u16_bytes = |value: u16| {
            if little {
                value.to_le_bytes()
            } else {
                value.to_be_bytes()
            }
        };
        let u32_bytes = |value: u32| {
            if little {
                value.to_le_bytes()
            } else {
                value.to_be_bytes()
            }
        };
        let mut bytes = if little {
            b"II*\0".to_vec()
        } else {
            b"MM\0*".to_vec()
        };
        bytes.extend_from_slice(&u32_bytes(8 + u32::try_from(gap).unwrap()));
        bytes.extend(std::iter::repeat_n(0x77, gap));
        bytes.extend_from_slice(&u16_bytes(2));
        // ImageWidth as SHORT (value left-aligned in the 4-byte field), ImageLength as LONG.
        bytes.extend_from_slice(&u16_bytes(0x100));
        bytes.extend_from_slice(&u16_bytes(3));
        bytes.extend_from_slice(&u32_bytes(1));
        bytes.extend_from_slice(&u16_bytes(u16::try_from(width).unwrap()));
        bytes.extend_from_slice(&[0, 0]);
        bytes.extend_from_slice(&u16_bytes(0x101));
        bytes.extend_from_slice(&u16_bytes(4));
        bytes.extend_from_slice(&u32_bytes(1));
        bytes.extend_from_slice(&u32_bytes(height));
        bytes.extend_from_slice(&u32_bytes(0));
        bytes
    }

    /// Entries as (width, height) bytes, 0 meaning 256.
    fn ico(entries: &[(u8, u8)]) -> Vec<u8> {
        let mut bytes = vec![0, 0, 1, 0];
        bytes.extend_from_slice(&u16::try_from(entries.len()).unwrap().to_le_bytes());
        for &(width, height) in entries {
            bytes.extend_from_slice(&[width, height, 0, 0, 1, 0, 32, 0]);
            bytes.extend_from_slice(&[0x10, 0, 0, 0, 0x16, 0, 0, 0]);
        }
        bytes
    }

    fn info(format: ImageFormat, width: u32, height: u32) -> Verdict {
        Ok(ImageInfo {
            format,
            width,
            height,
        })
    }

    fn bad(format: ImageFormat) -> Verdict {
        Err(VerifyError::BadHeader {
            format: format.name(),
        })
    }

    fn not_an_image(what: &'static str) -> Result<ImageFormat, VerifyError> {
        Err(VerifyError::NotAnImage { what })
    }

    fn all_formats() -> VerifyRules {
        VerifyRules {
            allowed: ImageFormat::ALL.to_vec(),
            ..VerifyRules::default()
        }
    }

    // -- Recognition ---------------------------------------------------------

    #[test]
    fn every_format_is_recognised_by_its_magic_bytes() {
        use ImageFormat::*;
        let cases: Vec<(&str, Vec<u8>, ImageFormat)> = vec![
            ("jpeg soi and marker", b"\xFF\xD8\xFF\xE0".to_vec(), Jpeg),
            ("png signature", b"\x89PNG\r\n\x1A\n".to_vec(), Png),
            ("gif87a", b"GIF87a".to_vec(), Gif),
            ("gif89a", b"GIF89a".to_vec(), Gif),
            ("webp riff", b"RIFF\0\0\0\0WEBPVP8 ".to_vec(), Webp),
            ("avif ftyp", ftyp(b"avif", &[]), Avif),
            ("bmp with info header", bmp_info(1, 1), Bmp),
            ("bmp with core header", bmp_core(1, 1), Bmp),
            ("tiff little endian", b"II*\0\x08\0\0\0".to_vec(), Tiff),
            ("tiff big endian", b"MM\0*\0\0\0\x08".to_vec(), Tiff),
            ("bigtiff little endian", b"II+\0\x08\0\0\0".to_vec(), Tiff),
            ("ico", ico(&[(16, 16)]), Ico),
            (
                "svg",
                b"<svg xmlns=\"http://www.w3.org/2000/svg\"/>".to_vec(),
                Svg,
            ),
        ];
        for (name, bytes, format) in cases {
            assert_eq!(sniff(&bytes), Ok(format), "{name}");
        }
    }

    #[test]
    fn bodies_that_are_not_images_say_what_they_look_like() {
        let mpeg = b"\0\0\x01\xBA\x44\0\x04\0\x04\x01".to_vec();
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            ("no bytes", b"".to_vec(), "empty"),
            ("only whitespace and a bom", b"\xEF\xBB\xBF \r\n\t ".to_vec(), "empty"),
            ("html5 doctype", b"<!DOCTYPE html><html>".to_vec(), "html"),
            ("lower-case doctype after bom", b"\xEF\xBB\xBF\n<!doctype html>".to_vec(), "html"),
            ("xhtml doctype after xml declaration", b"<?xml version=\"1.0\"?>\n<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.0 Strict//EN\" \"x\">".to_vec(), "html"),
            ("bare html element", b"  <HTML lang=en>".to_vec(), "html"),
            ("nginx error page", b"<html>\r\n<head><title>404 Not Found</title></head>".to_vec(), "html"),
            ("head element", b"<head>".to_vec(), "html"),
            ("body element", b"<BODY onload=x>".to_vec(), "html"),
            ("comment then html", b"<!-- generated --><html>".to_vec(), "html"),
            ("json object", b" {\"error\": \"not found\"}".to_vec(), "json"),
            ("json array", b"[1, 2, 3]".to_vec(), "json"),
            ("plain text", b"Access denied\n".to_vec(), "text"),
            ("utf-8 text", "Zugriff verweigert – bitte anmelden".as_bytes().to_vec(), "text"),
            ("text cut inside a character", "café".as_bytes()[..4].to_vec(), "text"),
            ("text that starts like a bitmap", b"BMW 3 series wallpaper, 1920x1080".to_vec(), "text"),
            ("xml that is not svg", b"<?xml version=\"1.0\"?><rss version=\"2.0\">".to_vec(), "text"),
            ("upper-case svg is not svg", b"<SVG width=\"1\">".to_vec(), "text"),
            ("binary garbage", vec![0x00, 0xFF, 0x13, 0x37, 0x80, 0x81], "unknown"),
            ("heic", ftyp(b"heic", &[b"mif1", b"heic"]), "unknown"),
            ("mp4", ftyp(b"isom", &[b"isom", b"mp41"]), "unknown"),
            ("mpeg program stream", mpeg, "unknown"),
            ("cursor, not icon", vec![0, 0, 2, 0, 1, 0, 16, 16], "unknown"),
            ("icon header with no images", vec![0, 0, 1, 0, 0, 0], "unknown"),
            ("jpeg signature cut short", vec![0xFF, 0xD8], "unknown"),
        ];
        for (name, bytes, what) in cases {
            assert_eq!(sniff(&bytes), not_an_image(what), "{name}");
            let verdict = inspect(&bytes, true, &all_formats());
            assert_eq!(verdict, Err(VerifyError::NotAnImage { what }), "{name}");
        }
    }

    #[test]
    fn avif_is_recognised_by_its_major_or_a_compatible_brand() {
        let cases: Vec<(&str, Vec<u8>, Result<ImageFormat, VerifyError>)> = vec![
            (
                "major brand avif",
                ftyp(b"avif", &[b"mif1", b"miaf"]),
                Ok(ImageFormat::Avif),
            ),
            (
                "major brand avis",
                ftyp(b"avis", &[b"msf1"]),
                Ok(ImageFormat::Avif),
            ),
            (
                "compatible brand avif",
                ftyp(b"mif1", &[b"mif1", b"avif"]),
                Ok(ImageFormat::Avif),
            ),
            (
                "compatible brand avis",
                ftyp(b"msf1", &[b"iso8", b"avis"]),
                Ok(ImageFormat::Avif),
            ),
            (
                "heif brands only",
                ftyp(b"mif1", &[b"mif1", b"heic"]),
                not_an_image("unknown"),
            ),
            (
                "brand past the end of the ftyp box",
                {
                    let mut bytes = ftyp(b"mif1", &[b"mif1"]);
                    bytes.extend(mp4_box(b"free", b"avif"));
                    bytes
                },
                not_an_image("unknown"),
            ),
            (
                "ftyp box running to the end of the file",
                {
                    let mut bytes = ftyp(b"mif1", &[b"avif"]);
                    bytes[..4].copy_from_slice(&[0; 4]);
                    bytes
                },
                Ok(ImageFormat::Avif),
            ),
        ];
        for (name, bytes, expected) in cases {
            assert_eq!(sniff(&bytes), expected, "{name}");
        }
    }

    #[test]
    fn svg_is_recognised_after_bom_declaration_comments_and_doctype() {
        let cases: [(&str, &str); 6] = [
            ("bare root", "<svg width=\"10\" height=\"20\"></svg>"),
            (
                "bom and whitespace",
                "\u{FEFF}\n  <svg width=\"10\" height=\"20\">",
            ),
            (
                "xml declaration",
                "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n<svg width=\"10\" height=\"20\">",
            ),
            (
                "comments and a stylesheet instruction",
                "<?xml version=\"1.0\"?><!-- Created with Inkscape -->\n<?xml-stylesheet href=\"a.css\"?><!-- <svg width=\"1\"> --><svg width=\"10\" height=\"20\">",
            ),
            (
                "doctype with an internal subset",
                "<?xml version=\"1.0\"?>\n<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\" \"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd\" [\n<!ENTITY ns \"http://www.w3.org/2000/svg\">\n]>\n<svg width=\"10\" height=\"20\">",
            ),
            (
                "namespace prefix",
                "<svg:svg xmlns:svg=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"20\">",
            ),
        ];
        for (name, text) in cases {
            assert_eq!(sniff(text.as_bytes()), Ok(ImageFormat::Svg), "{name}");
            assert_eq!(
                inspect(text.as_bytes(), true, &all_formats()),
                info(ImageFormat::Svg, 10, 20),
                "{name}"
            );
        }
    }

    // -- Dimensions ----------------------------------------------------------

    #[test]
    fn inspect_reads_dimensions_from_every_raster_header() {
        use ImageFormat::*;
        let cases: Vec<(&str, Vec<u8>, ImageFormat, u32, u32)> = vec![
            ("jpeg", jpeg(640, 480, 0), Jpeg, 640, 480),
            ("jpeg with exif", jpeg(3000, 2000, 5000), Jpeg, 3000, 2000),
            ("png", png(1920, 1080), Png, 1920, 1080),
            ("gif87a", gif(b"GIF87a", 320, 200), Gif, 320, 200),
            ("gif89a", gif(b"GIF89a", 1, 65535), Gif, 1, 65535),
            ("webp lossy", webp_vp8(800, 600), Webp, 800, 600),
            (
                "webp lossy scale bits ignored",
                webp_vp8(0xC000 | 800, 0x4000 | 600),
                Webp,
                800,
                600,
            ),
            ("webp lossless", webp_vp8l(16383, 7), Webp, 16383, 7),
            ("webp extended", webp_vp8x(5000, 4000), Webp, 5000, 4000),
            (
                "avif",
                avif(b"avif", &[b"mif1", b"miaf"], 1200, 800),
                Avif,
                1200,
                800,
            ),
            (
                "avif by compatible brand",
                avif(b"mif1", &[b"avif"], 64, 48),
                Avif,
                64,
                48,
            ),
            ("bmp bottom-up", bmp_info(100, 50), Bmp, 100, 50),
            ("bmp top-down", bmp_info(100, -50), Bmp, 100, 50),
            ("bmp os/2 core header", bmp_core(300, 200), Bmp, 300, 200),
            (
                "tiff little endian",
                tiff(true, 2048, 1536, 0),
                Tiff,
                2048,
                1536,
            ),
            ("tiff big endian", tiff(false, 17, 9, 0), Tiff, 17, 9),
            (
                "ico largest entry",
                ico(&[(16, 16), (0, 0), (48, 48)]),
                Ico,
                256,
                256,
            ),
            ("ico single entry", ico(&[(32, 24)]), Ico, 32, 24),
        ];
        for (name, bytes, format, width, height) in cases {
            let expected = info(format, width, height);
            assert_eq!(inspect(&bytes, true, &all_formats()), expected, "{name}");
            assert_eq!(
                inspect(&bytes, false, &all_formats()),
                expected,
                "{name} (prefix)"
            );
        }
    }

    #[test]
    fn svg_dimensions_come_from_width_and_height_then_the_viewbox() {
        let cases: [(&str, &str, u32, u32); 14] = [
            (
                "unitless width and height",
                r#"<svg width="300" height="150">"#,
                300,
                150,
            ),
            (
                "px units",
                r#"<svg width="300px" height=" 150px ">"#,
                300,
                150,
            ),
            (
                "fractions round",
                r#"<svg width="99.5" height="0.2">"#,
                100,
                1,
            ),
            (
                "single quotes, odd spacing",
                "<svg\n  width = '64'\theight='32'\n>",
                64,
                32,
            ),
            ("viewbox only", r#"<svg viewBox="0 0 24 12">"#, 24, 12),
            (
                "viewbox with commas",
                r#"<svg viewBox="-5,-5, 40,30">"#,
                40,
                30,
            ),
            (
                "width and viewbox keep the aspect ratio",
                r#"<svg width="100" viewBox="0 0 50 25">"#,
                100,
                50,
            ),
            (
                "height and viewbox keep the aspect ratio",
                r#"<svg height="100" viewBox="0 0 50 25">"#,
                200,
                100,
            ),
            (
                "percentages fall back to the viewbox",
                r#"<svg width="100%" height="100%" viewBox="0 0 640 480">"#,
                640,
                480,
            ),
            (
                "a quoted > does not end the tag",
                r#"<svg data-x="a>b" width="7" height="8">"#,
                7,
                8,
            ),
            ("self-closing", r#"<svg width="5" height="6"/>"#, 5, 6),
            (
                "neither",
                r#"<svg xmlns="http://www.w3.org/2000/svg">"#,
                0,
                0,
            ),
            (
                "physical units are unknown",
                r#"<svg width="10cm" height="5cm">"#,
                0,
                0,
            ),
            (
                "zero and negative sizes are unknown",
                r#"<svg width="0" height="-3" viewBox="0 0 0 10">"#,
                0,
                0,
            ),
        ];
        for (name, text, width, height) in cases {
            let verdict = inspect(text.as_bytes(), true, &all_formats());
            assert_eq!(verdict, info(ImageFormat::Svg, width, height), "{name}");
        }
    }

    #[test]
    fn an_svg_without_a_size_skips_the_size_checks_but_a_sized_one_does_not() {
        let rules = VerifyRules {
            min_width: 100,
            min_height: 100,
            ..all_formats()
        };
        let unsized_svg = b"<svg xmlns=\"http://www.w3.org/2000/svg\"></svg>";
        assert_eq!(
            inspect(unsized_svg, true, &rules),
            info(ImageFormat::Svg, 0, 0)
        );
        let small_svg = b"<svg width=\"16\" height=\"16\"></svg>";
        assert!(matches!(
            inspect(small_svg, true, &rules),
            Err(VerifyError::TooSmall { .. })
        ));
    }

    #[test]
    fn an_svg_start_tag_that_never_closes_is_a_bad_header_even_in_a_prefix() {
        let cut = b"<svg width=\"10\" height=\"10\" style=\"fill: red";
        assert_eq!(inspect(cut, true, &all_formats()), bad(ImageFormat::Svg));
        assert_eq!(inspect(cut, false, &all_formats()), bad(ImageFormat::Svg));
    }

    #[test]
    fn zero_width_or_height_is_a_bad_header() {
        use ImageFormat::*;
        let cases: Vec<(&str, Vec<u8>, ImageFormat)> = vec![
            ("png zero width", png(0, 10), Png),
            ("gif zero height", gif(b"GIF89a", 10, 0), Gif),
            (
                "jpeg zero height (size in a DNL marker)",
                jpeg(10, 0, 0),
                Jpeg,
            ),
            ("bmp zero width", bmp_info(0, 10), Bmp),
            ("tiff zero width", tiff(true, 0, 10, 0), Tiff),
            ("avif zero size", avif(b"avif", &[], 0, 0), Avif),
        ];
        for (name, bytes, format) in cases {
            assert_eq!(inspect(&bytes, true, &all_formats()), bad(format), "{name}");
        }
    }

    #[test]
    fn corrupt_headers_are_bad_headers_whole_or_not() {
        use ImageFormat::*;
        let mut png_without_ihdr = png(10, 10);
        png_without_ihdr[12..16].copy_from_slice(b"IDAT");
        let mut jpeg_with_junk_between_segments = jpeg(10, 10, 0);
        jpeg_with_junk_between_segments[20] = 0x00;
        let mut tiff_with_no_directory = b"II*\0".to_vec();
        tiff_with_no_directory.extend_from_slice(&[0; 12]);
        let cases: Vec<(&str, Vec<u8>, ImageFormat)> = vec![
            ("png whose first chunk is not IHDR", png_without_ihdr, Png),
            (
                "jpeg with junk where a marker belongs",
                jpeg_with_junk_between_segments,
                Jpeg,
            ),
            (
                "tiff with a zero directory offset",
                tiff_with_no_directory,
                Tiff,
            ),
            ("bmp with a negative width", bmp_info(-5, 5), Bmp),
            (
                "webp with an unknown chunk",
                riff_webp(b"VP8Q", &[0; 20]),
                Webp,
            ),
        ];
        for (name, bytes, format) in cases {
            assert_eq!(inspect(&bytes, true, &all_formats()), bad(format), "{name}");
            assert_eq!(
                inspect(&bytes, false, &all_formats()),
                bad(format),
                "{name} (prefix)"
            );
        }
    }

    #[test]
    fn truncated_headers_are_bad_when_whole_and_beyond_the_head_when_not() {
        use ImageFormat::*;
        let cases: Vec<(&str, Vec<u8>, ImageFormat)> = vec![
            ("jpeg signature only", jpeg(10, 10, 0)[..4].to_vec(), Jpeg),
            (
                "jpeg cut inside the frame header",
                jpeg(10, 10, 0)[..24].to_vec(),
                Jpeg,
            ),
            ("png cut before the height", png(10, 10)[..20].to_vec(), Png),
            (
                "gif cut before the height",
                gif(b"GIF89a", 10, 10)[..8].to_vec(),
                Gif,
            ),
            (
                "webp cut before the size",
                webp_vp8x(10, 10)[..26].to_vec(),
                Webp,
            ),
            (
                "avif cut inside the meta box",
                avif(b"avif", &[], 10, 10)[..40].to_vec(),
                Avif,
            ),
            (
                "bmp cut before the height",
                bmp_info(10, 10)[..20].to_vec(),
                Bmp,
            ),
            (
                "tiff cut before the directory offset",
                b"II*\0\x08".to_vec(),
                Tiff,
            ),
            (
                "tiff cut inside the directory",
                tiff(true, 10, 10, 0)[..20].to_vec(),
                Tiff,
            ),
            (
                "ico cut inside its second entry",
                ico(&[(16, 16), (32, 32)])[..30].to_vec(),
                Ico,
            ),
        ];
        for (name, bytes, format) in cases {
            assert_eq!(inspect(&bytes, true, &all_formats()), bad(format), "{name}");
            let beyond = Err(VerifyError::HeaderBeyondHead {
                format: format.name(),
                head_len: bytes.len(),
            });
            assert_eq!(
                inspect(&bytes, false, &all_formats()),
                beyond,
                "{name} (prefix)"
            );
        }
    }

    #[test]
    fn a_jpeg_frame_header_past_a_large_exif_block_is_read_from_the_file_instead() {
        const HEAD: usize = 256 * 1024;
        let mut body = jpeg(4000, 3000, 60_000);
        // Several APP segments (EXIF, ICC, XMP) can push the frame header far out.
        let app_segment = [&[0xFF, 0xE2, 0xFF, 0xFF][..], &[0x11; 0xFFFD]].concat();
        for _ in 0..5 {
            body.splice(2..2, app_segment.iter().copied());
        }
        assert!(body.len() > HEAD);
        let rules = VerifyRules::default();
        assert_eq!(
            inspect(&body[..HEAD], false, &rules),
            Err(VerifyError::HeaderBeyondHead {
                format: "jpeg",
                head_len: HEAD
            })
        );
        // What the caller does next: measure the whole file (here: the whole body).
        let size = imagesize::blob_size(&body).unwrap();
        let measured = check_dimensions(ImageFormat::Jpeg, size.width, size.height, &rules);
        assert_eq!(measured, info(ImageFormat::Jpeg, 4000, 3000));
        assert_eq!(inspect(&body, true, &rules), measured);
    }

    #[test]
    fn a_tiff_directory_after_the_pixel_data_is_read_from_the_file_instead() {
        let body = tiff(false, 800, 600, 300_000);
        let head = &body[..256 * 1024];
        assert_eq!(
            inspect(head, false, &VerifyRules::default()),
            Err(VerifyError::HeaderBeyondHead {
                format: "tiff",
                head_len: head.len()
            })
        );
        assert_eq!(
            inspect(head, true, &VerifyRules::default()),
            bad(ImageFormat::Tiff)
        );
        assert_eq!(
            inspect(&body, true, &VerifyRules::default()),
            info(ImageFormat::Tiff, 800, 600)
        );
    }

    // -- Rules ---------------------------------------------------------------

    #[test]
    fn the_pixel_limit_rejects_decompression_bombs() {
        let rules = VerifyRules::default();
        let cases: [(&str, u32, u32, bool); 5] = [
            ("ordinary photo", 6000, 4000, true),
            ("exactly at the limit", 178_956_970, 1, true),
            ("one pixel over the limit", 178_956_971, 1, false),
            ("classic bomb", 50_000, 50_000, false),
            ("largest png", u32::MAX >> 1, u32::MAX >> 1, false),
        ];
        for (name, width, height, passes) in cases {
            let expected = if passes {
                info(ImageFormat::Png, width, height)
            } else {
                Err(VerifyError::TooManyPixels {
                    width,
                    height,
                    max_pixels: DEFAULT_MAX_PIXELS,
                })
            };
            assert_eq!(
                inspect(&png(width, height), true, &rules),
                expected,
                "{name}"
            );
        }
    }

    #[test]
    fn images_under_the_minimum_size_are_too_small() {
        let rules = VerifyRules {
            min_width: 200,
            min_height: 100,
            ..VerifyRules::default()
        };
        let cases: [(&str, u32, u32, bool); 5] = [
            ("exactly the minimum", 200, 100, true),
            ("larger", 1000, 1000, true),
            ("too narrow", 199, 1000, false),
            ("too low", 1000, 99, false),
            ("tracking pixel", 1, 1, false),
        ];
        for (name, width, height, passes) in cases {
            let expected = if passes {
                info(ImageFormat::Gif, width, height)
            } else {
                Err(VerifyError::TooSmall {
                    width,
                    height,
                    min_width: 200,
                    min_height: 100,
                })
            };
            let bytes = gif(b"GIF89a", width as u16, height as u16);
            assert_eq!(inspect(&bytes, true, &rules), expected, "{name}");
        }
    }

    #[test]
    fn formats_outside_the_rules_are_refused_before_their_header_is_read() {
        let defaults = VerifyRules::default();
        let only_png = VerifyRules {
            allowed: vec![ImageFormat::Png],
            ..VerifyRules::default()
        };
        let cases: Vec<(&str, Vec<u8>, &VerifyRules, &str)> = vec![
            (
                "svg by default",
                b"<svg width=\"1\" height=\"1\"/>".to_vec(),
                &defaults,
                "svg",
            ),
            (
                "jpeg when only png is allowed",
                jpeg(10, 10, 0),
                &only_png,
                "jpeg",
            ),
            (
                "truncated jpeg when only png is allowed",
                vec![0xFF, 0xD8, 0xFF],
                &only_png,
                "jpeg",
            ),
        ];
        for (name, bytes, rules, format) in cases {
            let expected = Err(VerifyError::FormatNotAllowed { format });
            assert_eq!(inspect(&bytes, true, rules), expected, "{name}");
        }
        assert_eq!(
            inspect(&png(3, 4), true, &only_png),
            info(ImageFormat::Png, 3, 4)
        );
    }

    #[test]
    fn the_default_rules_allow_every_raster_format_and_not_svg() {
        let rules = VerifyRules::default();
        for format in ImageFormat::ALL {
            assert_eq!(rules.allows(format), format != ImageFormat::Svg, "{format}");
        }
        assert_eq!((rules.min_width, rules.min_height), (0, 0));
        assert_eq!(rules.max_pixels, 178_956_970);
    }

    #[test]
    fn check_dimensions_applies_the_rules_to_sizes_measured_on_disk() {
        let rules = VerifyRules::default();
        let cases: [(&str, ImageFormat, usize, usize, Verdict); 5] = [
            (
                "ordinary",
                ImageFormat::Jpeg,
                800,
                600,
                info(ImageFormat::Jpeg, 800, 600),
            ),
            ("zero", ImageFormat::Tiff, 0, 600, bad(ImageFormat::Tiff)),
            (
                "wider than u32",
                ImageFormat::Tiff,
                1 << 40,
                1,
                bad(ImageFormat::Tiff),
            ),
            (
                "not allowed",
                ImageFormat::Svg,
                10,
                10,
                Err(VerifyError::FormatNotAllowed { format: "svg" }),
            ),
            (
                "too many pixels",
                ImageFormat::Avif,
                20_000,
                20_000,
                Err(VerifyError::TooManyPixels {
                    width: 20_000,
                    height: 20_000,
                    max_pixels: DEFAULT_MAX_PIXELS,
                }),
            ),
        ];
        for (name, format, width, height, expected) in cases {
            assert_eq!(
                check_dimensions(format, width, height, &rules),
                expected,
                "{name}"
            );
        }
    }

    // -- Names and robustness --------------------------------------------------

    #[test]
    fn format_names_extensions_and_aliases_parse_back() {
        for format in ImageFormat::ALL {
            assert_eq!(
                ImageFormat::from_name(format.name()),
                Some(format),
                "{format}"
            );
            assert_eq!(
                ImageFormat::from_name(format.extension()),
                Some(format),
                "{format}"
            );
            assert!(format.content_type().starts_with("image/"), "{format}");
            assert_eq!(format.to_string(), format.name());
        }
        let cases: [(&str, Option<ImageFormat>); 10] = [
            ("jpg", Some(ImageFormat::Jpeg)),
            ("JPEG", Some(ImageFormat::Jpeg)),
            (" .Jpg ", Some(ImageFormat::Jpeg)),
            ("jfif", Some(ImageFormat::Jpeg)),
            ("tif", Some(ImageFormat::Tiff)),
            ("WebP", Some(ImageFormat::Webp)),
            ("dib", Some(ImageFormat::Bmp)),
            ("heic", None),
            ("", None),
            ("image/png", None),
        ];
        for (name, expected) in cases {
            assert_eq!(ImageFormat::from_name(name), expected, "{name:?}");
        }
    }

    #[test]
    fn error_messages_read_as_sentences() {
        let cases: [(VerifyError, &str); 6] = [
            (
                VerifyError::NotAnImage { what: "html" },
                "not an image (looks like html)",
            ),
            (
                VerifyError::FormatNotAllowed { format: "svg" },
                "`svg` image is not allowed",
            ),
            (
                VerifyError::BadHeader { format: "png" },
                "png header is corrupt or truncated",
            ),
            (
                VerifyError::HeaderBeyondHead {
                    format: "jpeg",
                    head_len: 262_144,
                },
                "jpeg dimensions lie beyond the first 262144 bytes",
            ),
            (
                VerifyError::TooManyPixels {
                    width: 50_000,
                    height: 50_000,
                    max_pixels: 178_956_970,
                },
                "image is 50000x50000, larger than the 178956970 pixel limit",
            ),
            (
                VerifyError::TooSmall {
                    width: 1,
                    height: 1,
                    min_width: 64,
                    min_height: 64,
                },
                "image is 1x1, smaller than 64x64",
            ),
        ];
        for (error, message) in cases {
            assert_eq!(error.to_string(), message);
        }
    }

    #[test]
    fn no_prefix_of_a_valid_header_panics_or_gives_a_wrong_size() {
        let fixtures: Vec<(Vec<u8>, ImageInfo)> = vec![
            (
                jpeg(640, 480, 300),
                ImageInfo {
                    format: ImageFormat::Jpeg,
                    width: 640,
                    height: 480,
                },
            ),
            (
                png(5, 6),
                ImageInfo {
                    format: ImageFormat::Png,
                    width: 5,
                    height: 6,
                },
            ),
            (
                gif(b"GIF89a", 5, 6),
                ImageInfo {
                    format: ImageFormat::Gif,
                    width: 5,
                    height: 6,
                },
            ),
            (
                webp_vp8(5, 6),
                ImageInfo {
                    format: ImageFormat::Webp,
                    width: 5,
                    height: 6,
                },
            ),
            (
                avif(b"avif", &[], 5, 6),
                ImageInfo {
                    format: ImageFormat::Avif,
                    width: 5,
                    height: 6,
                },
            ),
            (
                bmp_info(5, -6),
                ImageInfo {
                    format: ImageFormat::Bmp,
                    width: 5,
                    height: 6,
                },
            ),
            (
                tiff(false, 5, 6, 10),
                ImageInfo {
                    format: ImageFormat::Tiff,
                    width: 5,
                    height: 6,
                },
            ),
            (
                ico(&[(5, 6), (4, 4)]),
                ImageInfo {
                    format: ImageFormat::Ico,
                    width: 5,
                    height: 6,
                },
            ),
            (
                b"<svg width=\"5\" height=\"6\">".to_vec(),
                ImageInfo {
                    format: ImageFormat::Svg,
                    width: 5,
                    height: 6,
                },
            ),
        ];
        for (bytes, expected) in fixtures {
            for len in 0..=bytes.len() {
                for whole in [true, false] {
                    match inspect(&bytes[..len], whole, &all_formats()) {
                        Ok(found) => assert_eq!(found, expected, "{expected:?} cut at {len}"),
                        Err(
                            VerifyError::BadHeader { .. } | VerifyError::HeaderBeyondHead { .. },
                        ) => {}
                        Err(VerifyError::NotAnImage { .. }) => {}
                        Err(other) => panic!("{expected:?} cut at {len}: {other}"),
                    }
                }
            }
        }
    }

    #[test]
    fn random_bytes_after_every_signature_never_panic() {
        let signatures: [&[u8]; 10] = [
            b"\xFF\xD8\xFF",
            b"\x89PNG\r\n\x1A\n",
            b"GIF89a",
            b"II*\0",
            b"MM\0+",
            b"RIFF\0\0\0\0WEBPVP8X",
            b"\0\0\0\x14ftypavif",
            b"BM\0\0\0\0\0\0\0\0\0\0\0\0\x28\0\0\0",
            b"\0\0\x01\0\x02\0",
            b"<svg ",
        ];
        // SplitMix64, so the test is reproducible.
        let mut state = 0x5EED_u64;
        let mut next = move || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        for signature in signatures {
            for round in 0..500 {
                let len = (next() % 96) as usize;
                let mut bytes = signature.to_vec();
                bytes.extend((0..len).map(|_| next() as u8));
                let _ = inspect(&bytes, round % 2 == 0, &all_formats());
            }
        }
    }
}
