//! Perceptual hashes for near-duplicate detection: a 64-bit difference hash (dHash) of an image's
//! grey levels, the Hamming distance between two hashes, and the bands multi-index hashing
//! searches by.
//!
//! dHash shrinks the picture to 9x8 cells (each the mean of the pixels it covers) and sets one
//! bit per cell pair: is the left cell brighter than its right neighbour. Re-encoding, resizing
//! and a uniform change of brightness keep the gradients, so they keep most bits.
//!
//! A hash that says nothing is not used. A picture of (nearly) one grey level has no
//! gradients: [`dhash`] gives it no hash. And a hash within the search distance of all zeros or
//! all ones ([`is_informative`]) is what any evenly shaded picture gets (no cell brighter than
//! its right neighbour, or every one), whatever its colours and shapes: such a hash is neither
//! indexed nor matched, so distinct flat or plain gradient pictures are not near-duplicates.
//!
//! Search without scanning every earlier hash: split the 64 bits into `d + 1` bands; two hashes
//! at most `d` bits apart differ in at most `d` bands, so (pigeonhole) at least one band is equal.
//! An index of `(band number, band value)` finds the candidates, and only they are compared.

/// A 64-bit perceptual hash.
pub type Phash = u64;

/// Least difference between the brightest and the darkest of the 9x8 cells, in grey levels
/// (times 1024, as the cells are kept), for a picture to have gradients worth hashing.
const MIN_CELL_CONTRAST: u64 = 2 * 1024;

/// The dHash of a `width` x `height` grey-level image (`pixels` row by row, one byte each).
/// `None` for an empty image, a buffer of another size, or a picture of (nearly) one grey
/// level, whose bits would be noise or all zero.
pub fn dhash(pixels: &[u8], width: usize, height: usize) -> Option<Phash> {
    if width == 0 || height == 0 || pixels.len() != width.checked_mul(height)? {
        return None;
    }
    const COLUMNS: usize = 9;
    const ROWS: usize = 8;
    let mut cells = [[0u64; COLUMNS]; ROWS];
    for (row, line) in cells.iter_mut().enumerate() {
        let (top, bottom) = span(row, ROWS, height);
        for (column, cell) in line.iter_mut().enumerate() {
            let (left, right) = span(column, COLUMNS, width);
            let mut sum = 0u64;
            for y in top..bottom {
                sum += pixels[y * width + left..y * width + right]
                    .iter()
                    .map(|&p| u64::from(p))
                    .sum::<u64>();
            }
            // Means compared as sums over equal areas would be unfair at the edges: normalise.
            let area = ((bottom - top) * (right - left)) as u64;
            *cell = sum * 1024 / area;
        }
    }
    let levels = cells.iter().flatten();
    let (darkest, brightest) = (levels.clone().min()?, levels.max()?);
    if brightest - darkest < MIN_CELL_CONTRAST {
        return None;
    }
    let mut hash = 0u64;
    for line in &cells {
        for pair in line.windows(2) {
            hash = (hash << 1) | u64::from(pair[0] > pair[1]);
        }
    }
    Some(hash)
}

/// The pixel range `[start, end)` of cell `index` of `cells` over `size` pixels; never empty
/// (a picture smaller than the grid repeats its pixels).
fn span(index: usize, cells: usize, size: usize) -> (usize, usize) {
    let start = index * size / cells;
    let end = ((index + 1) * size / cells).max(start + 1).min(size);
    (start.min(size - 1), end)
}

/// Whether `hash` tells pictures apart in a search within `distance` bits: not when it is
/// within `distance` of all zeros or all ones, which every evenly shaded picture is near.
pub fn is_informative(hash: Phash, distance: u32) -> bool {
    let ones = hash.count_ones();
    ones > distance && 64 - ones > distance
}

/// Bits in which `a` and `b` differ.
pub fn distance(a: Phash, b: Phash) -> u32 {
    (a ^ b).count_ones()
}

/// The bands of `hash` for a search within `max_distance` bits: `max_distance + 1` bands as
/// equal as 64 bits allow, each as `(band number, value)`. Two hashes within `max_distance` share
/// at least one of them exactly.
pub fn bands(hash: Phash, max_distance: u32) -> Vec<(u32, u64)> {
    let count = max_distance + 1;
    let mut bands = Vec::with_capacity(count as usize);
    let mut start = 0;
    for band in 0..count {
        let width = (64 - start) / (count - band);
        let mask = if width == 64 {
            u64::MAX
        } else {
            (1u64 << width) - 1
        };
        bands.push((band, (hash >> start) & mask));
        start += width;
    }
    bands
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 64x48 picture: a diagonal gradient with a bright square, brightened by `lift`.
    fn picture(lift: u8) -> Vec<u8> {
        let (w, h) = (64, 48);
        (0..h)
            .flat_map(|y| {
                (0..w).map(move |x| {
                    let base = ((x * 3 + y * 2) % 200) as u8;
                    let square = if (20..40).contains(&x) && (10..30).contains(&y) {
                        50
                    } else {
                        0
                    };
                    base.saturating_add(square).saturating_add(lift)
                })
            })
            .collect()
    }

    #[test]
    fn a_brightened_copy_hashes_alike_and_another_picture_does_not() {
        let original = dhash(&picture(0), 64, 48).unwrap();
        let brighter = dhash(&picture(10), 64, 48).unwrap();
        assert!(
            distance(original, brighter) <= 4,
            "{}",
            distance(original, brighter)
        );
        let other: Vec<u8> = (0..64 * 48).map(|i| ((i * 7919) % 251) as u8).collect();
        let other = dhash(&other, 64, 48).unwrap();
        assert!(
            distance(original, other) > 10,
            "{}",
            distance(original, other)
        );
    }

    #[test]
    fn images_smaller_than_the_grid_and_bad_buffers() {
        assert!(dhash(&[1, 2, 3, 4], 2, 2).is_some());
        assert_eq!(dhash(&[], 0, 0), None);
        assert_eq!(dhash(&[1, 2, 3], 2, 2), None);
    }

    #[test]
    fn a_picture_of_one_grey_level_has_no_hash_whatever_the_level() {
        for level in [0u8, 90, 255] {
            assert_eq!(dhash(&vec![level; 64 * 48], 64, 48), None, "{level}");
        }
        let almost_flat: Vec<u8> = (0..64 * 48).map(|i| 100 + (i % 2) as u8).collect();
        assert_eq!(dhash(&almost_flat, 64, 48), None);
    }

    #[test]
    fn a_hash_near_all_zeros_or_all_ones_is_not_informative() {
        let cases: [(&str, u64, u32, bool); 6] = [
            ("an even gradient", u64::MAX, 4, false),
            ("all zeros", 0, 4, false),
            ("four bits off all zeros", 0b1111, 4, false),
            ("five bits off all zeros", 0b11111, 4, true),
            ("four bits off all ones", !0b1111, 4, false),
            ("a picture's hash", 0x0123_4567_89ab_cdef, 4, true),
        ];
        for (name, hash, distance, informative) in cases {
            assert_eq!(is_informative(hash, distance), informative, "{name}");
        }
        // Every picture shaded evenly from left to right hashes alike, whatever its colours.
        let gradient = |from: u8, to: u8| -> Vec<u8> {
            (0..48)
                .flat_map(|_| {
                    (0..64).map(move |x| (from as i32 + (to as i32 - from as i32) * x / 63) as u8)
                })
                .collect()
        };
        for (from, to) in [(220, 0), (160, 40)] {
            let hash = dhash(&gradient(from, to), 64, 48).unwrap();
            assert!(!is_informative(hash, 4), "{from}..{to}: {hash:x}");
        }
        let picture = dhash(&picture(0), 64, 48).unwrap();
        assert!(is_informative(picture, 4), "{picture:x}");
    }

    #[test]
    fn hashes_within_the_distance_share_a_band() {
        let cases: [(u64, u64, u32); 4] = [
            (0, 0b1111, 4),
            (u64::MAX, u64::MAX ^ (1 << 63 | 1 << 17 | 1), 3),
            (
                0x0123_4567_89ab_cdef,
                0x0123_4567_89ab_cdef ^ 0x8000_0000_0000_0001,
                15,
            ),
            (0xdead_beef, 0xdead_beef, 0),
        ];
        for (a, b, d) in cases {
            assert!(distance(a, b) <= d);
            let shared = bands(a, d).iter().zip(bands(b, d)).any(|(x, y)| *x == y);
            assert!(shared, "{a:x} {b:x} within {d}");
        }
        assert_eq!(bands(u64::MAX, 0), vec![(0, u64::MAX)]);
        assert_eq!(bands(0, 3).len(), 4);
    }
}
