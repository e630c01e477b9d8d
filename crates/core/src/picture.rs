//! A picture's bytes read before a decoder gets them, where the decoders would do wrong: PNG
//! chunks that inflate to far more than the file (a colour profile or compressed text, which
//! resizing and hashing never use), and a JPEG cut off before its end (which a decoder pads
//! with grey instead of refusing).

use std::borrow::Cow;

/// The eight bytes every PNG starts with.
const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

/// Chunks whose data is deflated: a colour profile (`iCCP`) and compressed text (`zTXt`,
/// `iTXt`). Their inflated size is not bounded by the file's, and the pixels never need them.
const INFLATING_CHUNKS: [&[u8; 4]; 3] = [b"iCCP", b"zTXt", b"iTXt"];

/// `png` without its [`INFLATING_CHUNKS`] (every other chunk kept byte for byte, so their
/// checksums hold). Bytes that are not a well-formed run of chunks are returned as they are:
/// the decoder then says what is wrong with them.
pub fn png_without_inflating_chunks(png: &[u8]) -> Cow<'_, [u8]> {
    let Some(mut rest) = png.strip_prefix(PNG_SIGNATURE) else {
        return Cow::Borrowed(png);
    };
    let mut kept = PNG_SIGNATURE.to_vec();
    let mut dropped = false;
    // A chunk: 4 bytes of length, 4 of type, the data, 4 of CRC.
    while rest.len() >= 12 {
        let length = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let Some(end) = length.checked_add(12).filter(|&end| end <= rest.len()) else {
            break;
        };
        let (chunk, after) = rest.split_at(end);
        if INFLATING_CHUNKS.iter().any(|name| chunk[4..8] == name[..]) {
            dropped = true;
        } else {
            kept.extend_from_slice(chunk);
        }
        rest = after;
    }
    if !dropped {
        return Cow::Borrowed(png);
    }
    kept.extend_from_slice(rest);
    Cow::Owned(kept)
}

/// Whether `jpeg` has its end-of-image marker after the start of its first scan: a file cut
/// off (a transfer that stopped, a server that truncated it) has not. The segments before the
/// scan are skipped by their lengths, so an EXIF thumbnail's own end marker does not count.
pub fn jpeg_reaches_its_end(jpeg: &[u8]) -> bool {
    if !jpeg.starts_with(&[0xFF, 0xD8]) {
        return false;
    }
    let mut at = 2;
    let scan = loop {
        // Fill bytes (0xFF) may precede a marker.
        while jpeg.get(at) == Some(&0xFF) && jpeg.get(at + 1) == Some(&0xFF) {
            at += 1;
        }
        let (Some(&0xFF), Some(&marker)) = (jpeg.get(at), jpeg.get(at + 1)) else {
            return false;
        };
        match marker {
            // Start of scan: the entropy-coded data follows its header.
            0xDA => break at,
            // Markers without a length.
            0x01 | 0xD0..=0xD7 => at += 2,
            0xD9 => return false,
            _ => {
                let (Some(&high), Some(&low)) = (jpeg.get(at + 2), jpeg.get(at + 3)) else {
                    return false;
                };
                at += 2 + usize::from(u16::from_be_bytes([high, low]));
            }
        }
    };
    jpeg[scan..].windows(2).any(|pair| pair == [0xFF, 0xD9])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(name: &[u8; 4], data: &[u8]) -> Vec<u8> {
        let mut bytes = (data.len() as u32).to_be_bytes().to_vec();
        bytes.extend_from_slice(name);
        bytes.extend_from_slice(data);
        bytes.extend_from_slice(&[1, 2, 3, 4]);
        bytes
    }

    #[test]
    fn a_png_loses_its_inflating_chunks_and_keeps_the_others_as_they_are() {
        let (header, pixels, end) = (
            chunk(b"IHDR", &[0; 13]),
            chunk(b"IDAT", b"pixels"),
            chunk(b"IEND", b""),
        );
        let mut png = PNG_SIGNATURE.to_vec();
        for part in [
            &header,
            &chunk(b"iCCP", b"profile\0\0deflated"),
            &chunk(b"zTXt", b"k\0\0deflated"),
            &pixels,
            &chunk(b"iTXt", b"k\0\x01\0\0\0deflated"),
            &end,
        ] {
            png.extend_from_slice(part);
        }
        let expected = [PNG_SIGNATURE, &header, &pixels, &end].concat();
        assert_eq!(png_without_inflating_chunks(&png).as_ref(), &expected[..]);
        assert!(matches!(
            png_without_inflating_chunks(&expected),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn bytes_that_are_not_a_run_of_chunks_are_left_to_the_decoder() {
        let cases: [(&str, &[u8]); 2] = [
            ("not a png", b"GIF89a..."),
            (
                "a length past the end",
                b"\x89PNG\r\n\x1a\n\xff\xff\xff\xffIHDR",
            ),
        ];
        for (name, bytes) in cases {
            assert_eq!(
                png_without_inflating_chunks(bytes).as_ref(),
                bytes,
                "{name}"
            );
        }
    }

    #[test]
    fn a_jpeg_reaches_its_end_only_with_its_end_marker_after_its_scan() {
        // SOI, an APP1 segment holding a thumbnail's end marker, SOS, data, EOI.
        let whole: Vec<u8> = [
            &[0xFF, 0xD8][..],
            &[0xFF, 0xE1, 0x00, 0x06, 0xFF, 0xD9, 0x00, 0x00],
            &[0xFF, 0xDA, 0x00, 0x04, 0x01, 0x02],
            &[0x11, 0x22, 0xFF, 0x00, 0x33],
            &[0xFF, 0xD9],
        ]
        .concat();
        let cases = [
            ("whole", whole.clone(), true),
            ("cut in the scan", whole[..whole.len() - 4].to_vec(), false),
            ("cut before the scan", whole[..8].to_vec(), false),
            (
                "trailing bytes after the end",
                [&whole[..], b"\0\0"].concat(),
                true,
            ),
            ("not a jpeg", b"\x89PNG".to_vec(), false),
        ];
        for (name, bytes, ends) in cases {
            assert_eq!(jpeg_reaches_its_end(&bytes), ends, "{name}");
        }
    }
}
