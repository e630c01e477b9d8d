//! Parsing of `srcset` attributes into image candidates.
//!
//! This is part of the extract stage: given the raw value of an `<img srcset>`
//! or `<source srcset>` attribute, it yields the image candidates a browser
//! would see, and picks the ones the crawler should download. It is pure: no
//! I/O, no URL resolution (the caller resolves the returned URLs against the
//! page's base URL), no global state.
//!
//! The parser follows the HTML Standard's "parse a srcset attribute"
//! algorithm step by step, including its less obvious corners:
//!
//! - only ASCII whitespace (TAB, LF, FF, CR, SPACE) separates tokens, so a
//!   vertical tab or a no-break space is part of a URL or descriptor;
//! - a URL ending in commas has them stripped and then has *no* descriptors
//!   (whatever follows starts the next candidate), while a comma inside a URL
//!   (`a,b.jpg 1x`) is kept;
//! - parentheses in a descriptor hide commas from the splitter, so
//!   `a.jpg (, b.jpg 1x)` is one candidate with one invalid descriptor;
//! - any invalid or duplicate descriptor drops the whole candidate.
//!
//! <https://html.spec.whatwg.org/multipage/images.html#parsing-a-srcset-attribute>

use crate::profile::Pick;

/// The descriptor of one image candidate, after the spec's descriptor parser.
#[derive(Debug, Clone, PartialEq)]
pub enum Descriptor {
    /// No width and no density descriptor; browsers treat this as `1x`.
    None,
    /// A width descriptor (`480w`), in image pixels. Always greater than zero.
    /// Values beyond `u32::MAX` saturate.
    Width(u32),
    /// A pixel density descriptor (`1.5x`). Always finite and `>= 0`
    /// (`-0x` is normalised to `0`).
    Density(f64),
}

/// One valid image candidate of a `srcset` attribute.
#[derive(Debug, Clone, PartialEq)]
pub struct SrcsetCandidate {
    /// The URL exactly as written in the attribute (trailing commas removed),
    /// not resolved against any base URL.
    pub url: String,
    /// The candidate's width or density descriptor, if any.
    pub descriptor: Descriptor,
}

/// Parses a `srcset` attribute value into its valid image candidates, in
/// document order.
///
/// Candidates with invalid or conflicting descriptors are dropped, exactly as
/// the HTML Standard's "parse a srcset attribute" algorithm drops them. A
/// future-compatible `h` descriptor is accepted only together with `w` and is
/// otherwise ignored.
pub fn parse_srcset(input: &str) -> Vec<SrcsetCandidate> {
    let mut candidates = Vec::new();
    let mut rest = input;
    loop {
        // Step 3, splitting loop: skip ASCII whitespace and commas. (Extra
        // commas are a parse error, which is not reported.)
        rest = rest.trim_start_matches(|c: char| is_ascii_whitespace(c) || c == ',');
        // Step 4: nothing left.
        if rest.is_empty() {
            return candidates;
        }

        // Step 5: the URL is the run of non-ASCII-whitespace code points.
        let url_end = rest.find(is_ascii_whitespace).unwrap_or(rest.len());
        let (mut url, after_url) = rest.split_at(url_end);
        rest = after_url;

        // Steps 6-7: a URL ending in a comma ends the candidate right there:
        // strip the commas and skip the descriptor tokenizer entirely. Only
        // otherwise are descriptors tokenized.
        let mut descriptors = Vec::new();
        if url.ends_with(',') {
            url = url.trim_end_matches(',');
        } else {
            rest = tokenize_descriptors(rest, &mut descriptors);
        }

        // Steps 8-11: the descriptor parser; an error drops the candidate.
        if let Some(descriptor) = parse_descriptors(&descriptors) {
            candidates.push(SrcsetCandidate {
                url: url.to_owned(),
                descriptor,
            });
        }
    }
}

/// ASCII whitespace as the Infra standard defines it: TAB, LF, FF, CR and
/// SPACE. Not U+000B (vertical tab), and no Unicode spaces.
fn is_ascii_whitespace(c: char) -> bool {
    // `char::is_ascii_whitespace` uses exactly the WHATWG definition.
    c.is_ascii_whitespace()
}

/// States of the spec's descriptor tokenizer.
#[derive(Clone, Copy)]
enum TokenizerState {
    InDescriptor,
    InParens,
    AfterDescriptor,
}

/// Step 7 of "parse a srcset attribute": splits the descriptors that follow a
/// URL, stopping after the comma that ends the candidate (or at the end of
/// input). Returns the input left for the splitting loop.
///
/// A descriptor is always a contiguous slice of the input (the tokenizer only
/// ever appends the current code point), so it is stored as a `&str`.
fn tokenize_descriptors<'a>(input: &'a str, descriptors: &mut Vec<&'a str>) -> &'a str {
    // Step 7.1: skip ASCII whitespace.
    let input = input.trim_start_matches(is_ascii_whitespace);
    let mut state = TokenizerState::InDescriptor;
    // The current descriptor is `input[start..pos]`.
    let mut start = 0;
    let mut pos = 0;
    loop {
        let c = input[pos..].chars().next();
        match (state, c) {
            (TokenizerState::InDescriptor, Some(c)) if is_ascii_whitespace(c) => {
                push_nonempty(descriptors, &input[start..pos]);
                state = TokenizerState::AfterDescriptor;
            }
            (TokenizerState::InDescriptor, Some(',')) => {
                // The comma ends this candidate; the splitting loop resumes
                // after it.
                push_nonempty(descriptors, &input[start..pos]);
                return &input[pos + 1..];
            }
            (TokenizerState::InDescriptor, Some('(')) => state = TokenizerState::InParens,
            (TokenizerState::InDescriptor | TokenizerState::InParens, None) => {
                // An unclosed parenthesis still yields its (invalid)
                // descriptor, which then drops the candidate.
                push_nonempty(descriptors, &input[start..pos]);
                return "";
            }
            (TokenizerState::InDescriptor, Some(_)) => {}
            (TokenizerState::InParens, Some(')')) => state = TokenizerState::InDescriptor,
            // Inside parentheses, whitespace and commas are descriptor text.
            (TokenizerState::InParens, Some(_)) => {}
            (TokenizerState::AfterDescriptor, Some(c)) if is_ascii_whitespace(c) => {}
            (TokenizerState::AfterDescriptor, None) => return "",
            (TokenizerState::AfterDescriptor, Some(_)) => {
                // "Set state to in descriptor. Set position to the previous
                // character": reconsume this code point as a new descriptor
                // (a comma here ends the candidate with no new descriptor).
                state = TokenizerState::InDescriptor;
                start = pos;
                continue;
            }
        }
        pos += c.map_or(0, char::len_utf8);
    }
}

fn push_nonempty<'a>(descriptors: &mut Vec<&'a str>, descriptor: &'a str) {
    if !descriptor.is_empty() {
        descriptors.push(descriptor);
    }
}

/// Step 9-11 of "parse a srcset attribute": the descriptor parser. Returns
/// `None` when the spec sets `error` to yes, meaning the candidate is dropped.
///
/// The spec keeps looping after an error; returning early gives the same
/// result because an error can never be cleared.
fn parse_descriptors(descriptors: &[&str]) -> Option<Descriptor> {
    let mut width: Option<u32> = None;
    let mut density: Option<f64> = None;
    let mut future_compat_h: Option<u32> = None;

    for descriptor in descriptors {
        // Descriptors are never empty, so there is always a last code point.
        let (last_index, last) = descriptor.char_indices().next_back()?;
        let value = &descriptor[..last_index];
        match last {
            'w' if is_valid_non_negative_integer(value) => {
                // A `w` conflicts with an earlier `w` or `x`, but not with an
                // earlier `h`: `1h 1w` is valid.
                if width.is_some() || density.is_some() {
                    return None;
                }
                match parse_non_negative_integer(value) {
                    0 => return None,
                    w => width = Some(w),
                }
            }
            'x' if is_valid_floating_point_number(value) => {
                if width.is_some() || density.is_some() || future_compat_h.is_some() {
                    return None;
                }
                let x = parse_floating_point_number(value)?;
                // "If the result is less than zero, let error be yes." -0 is
                // not less than zero, and 0x is allowed.
                if x < 0.0 {
                    return None;
                }
                density = Some(x);
            }
            'h' if is_valid_non_negative_integer(value) => {
                if future_compat_h.is_some() || density.is_some() {
                    return None;
                }
                match parse_non_negative_integer(value) {
                    0 => return None,
                    h => future_compat_h = Some(h),
                }
            }
            // Anything else, including `1W`, `1.0w`, `+1x` or `Infinityx`.
            _ => return None,
        }
    }

    // Step 10: `h` only makes sense next to `w`.
    if future_compat_h.is_some() && width.is_none() {
        return None;
    }

    Some(match (width, density) {
        (Some(w), _) => Descriptor::Width(w),
        (None, Some(x)) => Descriptor::Density(x),
        (None, None) => Descriptor::None,
    })
}

/// "A string is a valid non-negative integer if it consists of one or more
/// ASCII digits."
fn is_valid_non_negative_integer(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// The rules for parsing non-negative integers, applied to a string already
/// known to be a valid non-negative integer. The spec's integers are
/// unbounded; widths that do not fit in a `u32` saturate rather than drop the
/// (valid) candidate.
fn parse_non_negative_integer(s: &str) -> u32 {
    s.bytes().fold(0u32, |acc, b| {
        acc.saturating_mul(10).saturating_add(u32::from(b - b'0'))
    })
}

/// A valid floating-point number: an optional `-`, then digits, or digits,
/// `.` and digits, or `.` and digits, then optionally `e` or `E`, an optional
/// `-` or `+`, and digits.
///
/// This is stricter than Rust's `f64::from_str`: no leading `+`, no trailing
/// `.` (`1.`), no `inf` or `NaN`.
fn is_valid_floating_point_number(s: &str) -> bool {
    let bytes = s.as_bytes();
    let mut i = 0;
    let digits_from = |mut i: usize| {
        while bytes.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    };

    if bytes.first() == Some(&b'-') {
        i += 1;
    }
    let integer_end = digits_from(i);
    let has_integer = integer_end > i;
    i = integer_end;
    let mut has_fraction = false;
    if bytes.get(i) == Some(&b'.') {
        let fraction_end = digits_from(i + 1);
        // A `.` must be followed by at least one digit.
        if fraction_end == i + 1 {
            return false;
        }
        has_fraction = true;
        i = fraction_end;
    }
    if !has_integer && !has_fraction {
        return false;
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'-' | b'+')) {
            i += 1;
        }
        let exponent_end = digits_from(i);
        if exponent_end == i {
            return false;
        }
        i = exponent_end;
    }
    i == bytes.len()
}

/// The rules for parsing floating-point number values, applied to a string
/// already known to be a valid floating-point number.
///
/// Rust's parser rounds to the nearest double like the spec's "conversion"
/// step. Two details of that step need handling here: a value that rounds to
/// ±2^1024 (Rust gives an infinity) is an error, and the set of values the
/// spec rounds into excludes -0, so `-0` yields +0.
fn parse_floating_point_number(s: &str) -> Option<f64> {
    let value: f64 = s.parse().ok()?;
    if !value.is_finite() {
        return None;
    }
    // -0.0 + 0.0 is +0.0 under round-to-nearest; other values are unchanged.
    Some(value + 0.0)
}

/// Largest: by width when any candidate has a `w` descriptor (candidates
/// without one are ranked below), else by density (no descriptor = 1x); ties
/// keep the earlier candidate. First: the first candidate. All: every
/// candidate in order.
///
/// Returns at most one candidate for `Largest` and `First`, and nothing when
/// `candidates` is empty.
pub fn pick_candidates(candidates: Vec<SrcsetCandidate>, pick: Pick) -> Vec<SrcsetCandidate> {
    pick_by(candidates, pick, |c| &c.descriptor)
}

/// [`pick_candidates`] over items that each carry a candidate's descriptor, so
/// a caller choosing among candidates of several attributes (the `<source>`s
/// and `<img>` of a `<picture>`) keeps where each came from.
pub fn pick_by<T>(items: Vec<T>, pick: Pick, descriptor: impl Fn(&T) -> &Descriptor) -> Vec<T> {
    match pick {
        Pick::All => items,
        Pick::First => items.into_iter().take(1).collect(),
        Pick::Largest => {
            let by_width = items
                .iter()
                .any(|item| matches!(descriptor(item), Descriptor::Width(_)));
            let mut best: Option<(T, LargestKey)> = None;
            for item in items {
                let key = LargestKey::of(descriptor(&item), by_width);
                // Strictly greater, so ties keep the earlier candidate.
                if best.as_ref().is_none_or(|(_, best_key)| key > *best_key) {
                    best = Some((item, key));
                }
            }
            best.map(|(item, _)| item).into_iter().collect()
        }
    }
}

/// Ranking key for [`Pick::Largest`]: a tier (1 for candidates of the ranking
/// kind, 0 for those ranked below them), then the size within the tier.
#[derive(PartialEq, PartialOrd)]
struct LargestKey {
    tier: u8,
    size: f64,
}

impl LargestKey {
    fn of(descriptor: &Descriptor, by_width: bool) -> Self {
        match (descriptor, by_width) {
            (Descriptor::Width(w), _) => Self {
                tier: 1,
                size: f64::from(*w),
            },
            // Without any width to compare, rank by density.
            (Descriptor::Density(x), false) => Self { tier: 1, size: *x },
            (Descriptor::None, false) => Self { tier: 1, size: 1.0 },
            // Candidates without a width sit below every width candidate,
            // ordered among themselves by density.
            (Descriptor::Density(x), true) => Self { tier: 0, size: *x },
            (Descriptor::None, true) => Self { tier: 0, size: 1.0 },
        }
    }
}

/// Viewport width, in CSS pixels, assumed by [`select_at_density_one`]: the
/// 800x600 window that web-platform-tests runs in.
const ASSUMED_VIEWPORT_WIDTH: f64 = 800.0;

/// The browser's choice at device pixel ratio 1 with no `sizes` (sizes = 100vw
/// is irrelevant when only one candidate): used only to check conformance.
///
/// The rule implemented, following the spec's "select an image source" and
/// what Chromium, Gecko and WebKit do at a device pixel ratio of 1:
///
/// 1. Every candidate gets a density: its `x` value, `1` without a
///    descriptor, or for `w` its width divided by the source size. With no
///    `sizes` the source size is `100vw`; the viewport is taken to be 800 CSS
///    pixels wide (the web-platform-tests window). Width candidates only
///    compare with each other by width, so the viewport only matters when
///    `w` and `x` candidates are mixed.
/// 2. A later candidate with the same density as an earlier one is removed
///    (the spec's duplicate-removal step), so ties go to the earlier one.
/// 3. The chosen candidate is the one with the smallest density that is at
///    least 1 (the device pixel ratio); when every density is below 1, the
///    one with the largest density.
///
/// Returns `None` when there are no candidates.
pub fn select_at_density_one(candidates: &[SrcsetCandidate]) -> Option<&SrcsetCandidate> {
    let mut smallest_sufficient: Option<(&SrcsetCandidate, f64)> = None;
    let mut largest_insufficient: Option<(&SrcsetCandidate, f64)> = None;
    for candidate in candidates {
        let density = match candidate.descriptor {
            Descriptor::None => 1.0,
            Descriptor::Density(x) => x,
            Descriptor::Width(w) => f64::from(w) / ASSUMED_VIEWPORT_WIDTH,
        };
        // Strict comparisons keep the earlier of two equal densities.
        if density >= 1.0 {
            if smallest_sufficient.is_none_or(|(_, best)| density < best) {
                smallest_sufficient = Some((candidate, density));
            }
        } else if largest_insufficient.is_none_or(|(_, best)| density > best) {
            largest_insufficient = Some((candidate, density));
        }
    }
    smallest_sufficient
        .or(largest_insufficient)
        .map(|(candidate, _)| candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(url: &str, descriptor: Descriptor) -> SrcsetCandidate {
        SrcsetCandidate {
            url: url.to_owned(),
            descriptor,
        }
    }

    fn urls(candidates: &[SrcsetCandidate]) -> Vec<&str> {
        candidates.iter().map(|c| c.url.as_str()).collect()
    }

    /// The project's own table of named parse cases.
    #[test]
    fn named_parse_cases() {
        use Descriptor::{Density, None, Width};
        // (name, srcset, expected candidates as (url, descriptor)).
        type NamedCase = (
            &'static str,
            &'static str,
            &'static [(&'static str, Descriptor)],
        );
        let cases: &[NamedCase] = &[
            (
                "widths_in_order",
                "small.jpg 480w, large.jpg 1080w",
                &[("small.jpg", Width(480)), ("large.jpg", Width(1080))],
            ),
            (
                "densities_and_bare_url",
                "a.jpg, b.jpg 2x, c.jpg 1.5x",
                &[
                    ("a.jpg", None),
                    ("b.jpg", Density(2.0)),
                    ("c.jpg", Density(1.5)),
                ],
            ),
            (
                "commas_inside_url_are_kept",
                "a,b.jpg 1x, /img?w=1,2 2x",
                &[("a,b.jpg", Density(1.0)), ("/img?w=1,2", Density(2.0))],
            ),
            (
                "trailing_commas_end_the_url_and_its_candidate",
                "a.jpg,, 2x",
                // `2x` is not a descriptor of `a.jpg`: it is the next URL.
                &[("a.jpg", None), ("2x", None)],
            ),
            (
                "comma_after_descriptor_needs_no_space",
                "a.jpg 1x,b.jpg 2x",
                &[("a.jpg", Density(1.0)), ("b.jpg", Density(2.0))],
            ),
            (
                "invalid_descriptor_drops_candidate",
                "a.jpg 1.0w, b.jpg foo, c.jpg 2x",
                &[("c.jpg", Density(2.0))],
            ),
            (
                "duplicate_descriptor_drops_candidate",
                "a.jpg 1x 2x, b.jpg 10w 20w, c.jpg",
                &[("c.jpg", None)],
            ),
            (
                "width_and_density_together_drop_candidate",
                "a.jpg 100w 2x, b.jpg",
                &[("b.jpg", None)],
            ),
            (
                "height_is_kept_only_with_width",
                "a.jpg 100w 50h, b.jpg 50h, c.jpg 50h 100w",
                &[("a.jpg", Width(100)), ("c.jpg", Width(100))],
            ),
            (
                "zero_width_is_invalid_but_zero_density_is_valid",
                "a.jpg 0w, b.jpg 0x, c.jpg -0x",
                &[("b.jpg", Density(0.0)), ("c.jpg", Density(0.0))],
            ),
            (
                "float_density_forms",
                "a 1e1x, b .5x, c 1.x, d +1x, e 1e400x",
                &[("a", Density(10.0)), ("b", Density(0.5))],
            ),
            (
                "parentheses_hide_commas",
                "a.jpg (1x, b.jpg 2x), c.jpg",
                &[("c.jpg", None)],
            ),
            (
                "vertical_tab_is_not_whitespace",
                "a.jpg\u{b}1x",
                &[("a.jpg\u{b}1x", None)],
            ),
            (
                "unicode_space_is_part_of_descriptor",
                "a.jpg 1x\u{a0}, b.jpg",
                &[("b.jpg", None)],
            ),
            (
                "huge_width_saturates",
                "a.jpg 99999999999w",
                &[("a.jpg", Width(u32::MAX))],
            ),
            ("empty_and_commas_only", " , ,, ", &[]),
        ];

        let mut failures = Vec::new();
        for (name, input, expected) in cases {
            let expected: Vec<SrcsetCandidate> = expected
                .iter()
                .map(|(url, d)| candidate(url, d.clone()))
                .collect();
            let got = parse_srcset(input);
            if got != expected {
                failures.push(format!(
                    "{name}: {input:?}\n  got      {got:?}\n  expected {expected:?}"
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn negative_zero_density_becomes_positive_zero() {
        let got = parse_srcset("a.jpg -0x");
        let Some(SrcsetCandidate {
            descriptor: Descriptor::Density(x),
            ..
        }) = got.first()
        else {
            panic!("expected one density candidate, got {got:?}");
        };
        assert!(x.is_sign_positive());
    }

    #[test]
    fn largest_prefers_widest_descriptor() {
        let candidates = parse_srcset("a.jpg 2x, b.jpg 1600w, c.jpg 800w, d.jpg 1600w");
        assert_eq!(
            pick_candidates(candidates, Pick::Largest),
            vec![candidate("b.jpg", Descriptor::Width(1600))]
        );
    }

    #[test]
    fn largest_falls_back_to_density() {
        let candidates = parse_srcset("a.jpg, b.jpg 3x, c.jpg 2x");
        assert_eq!(
            urls(&pick_candidates(candidates, Pick::Largest)),
            vec!["b.jpg"]
        );
    }

    #[test]
    fn largest_counts_a_bare_url_as_one_x() {
        let candidates = parse_srcset("a.jpg 0.5x, b.jpg");
        assert_eq!(
            urls(&pick_candidates(candidates, Pick::Largest)),
            vec!["b.jpg"]
        );
        let candidates = parse_srcset("a.jpg, b.jpg 1x");
        assert_eq!(
            urls(&pick_candidates(candidates, Pick::Largest)),
            vec!["a.jpg"]
        );
    }

    #[test]
    fn largest_ranks_non_width_candidates_below_width_candidates() {
        let candidates = parse_srcset("a.jpg 4x, b.jpg 10w, c.jpg 20w");
        assert_eq!(
            urls(&pick_candidates(candidates, Pick::Largest)),
            vec!["c.jpg"]
        );
    }

    #[test]
    fn first_and_all_keep_attribute_order() {
        let candidates = parse_srcset("a.jpg 2x, b.jpg 1x, c.jpg 3x");
        assert_eq!(
            urls(&pick_candidates(candidates.clone(), Pick::First)),
            vec!["a.jpg"]
        );
        assert_eq!(
            urls(&pick_candidates(candidates, Pick::All)),
            vec!["a.jpg", "b.jpg", "c.jpg"]
        );
    }

    #[test]
    fn picks_of_nothing_are_empty() {
        for pick in [Pick::Largest, Pick::All, Pick::First] {
            assert!(pick_candidates(Vec::new(), pick).is_empty());
        }
        assert!(select_at_density_one(&[]).is_none());
    }

    #[test]
    fn density_one_selection_prefers_smallest_sufficient_density() {
        let candidates = parse_srcset("a.jpg 0.5x, b.jpg 3x, c.jpg 1.5x");
        assert_eq!(
            select_at_density_one(&candidates).map(|c| c.url.as_str()),
            Some("c.jpg")
        );
        let candidates = parse_srcset("a.jpg 0.25x, b.jpg 0.5x");
        assert_eq!(
            select_at_density_one(&candidates).map(|c| c.url.as_str()),
            Some("b.jpg")
        );
    }

    /// Reads a third-party conformance table from the shared folder beside
    /// the project checkout. `None` means the test should be skipped.
    fn read_conformance_table(path: &str) -> Option<serde_json::Value> {
        match std::fs::read_to_string(path) {
            Ok(text) => Some(serde_json::from_str(&text).expect("conformance table is JSON")),
            Err(error) if std::env::var_os("CI").is_some() => {
                panic!("conformance table {path} is required in CI: {error}")
            }
            Err(error) => {
                eprintln!("skipping: conformance table {path} not readable: {error}");
                None
            }
        }
    }

    fn str_field<'a>(case: &'a serde_json::Value, field: &str) -> &'a str {
        case[field]
            .as_str()
            .unwrap_or_else(|| panic!("case field {field} is a string: {case}"))
    }

    #[test]
    fn wpt_srcset_parse_cases_all_pass() {
        const PATH: &str = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/conformance/wpt/srcset-parse-cases.json"
        );
        let Some(table) = read_conformance_table(PATH) else {
            return;
        };
        let cases = table["cases"].as_array().expect("cases is an array");
        assert!(!cases.is_empty(), "no cases in {PATH}");

        let mut failures = Vec::new();
        for case in cases {
            let srcset = str_field(case, "srcset");
            let expect_current_src = str_field(case, "expect_current_src");
            let whole_attribute_is_url = case["expect_is_relative_url_resolved_against_document"]
                .as_bool()
                .expect("resolved flag is a bool");

            // currentSrc is the selected URL resolved against the document.
            // When the flag is set, the expectation is the whole attribute
            // resolved the same way. Resolution is a function of the raw
            // string, and the parser never rewrites a URL except by trimming
            // ASCII whitespace and commas (which these cases do not end in),
            // so the selected raw URL must be the whole attribute. Otherwise
            // the expectation is already the serialised URL, and for the
            // `data:` URLs used here serialising is the identity, so the raw
            // URL must equal it.
            let expected = if whole_attribute_is_url {
                Some(srcset)
            } else if expect_current_src.is_empty() {
                None
            } else {
                Some(expect_current_src)
            };

            let candidates = parse_srcset(srcset);
            let got = select_at_density_one(&candidates).map(|c| c.url.as_str());
            if got != expected {
                failures.push(format!(
                    "[{}] srcset={srcset:?}: selected {got:?}, expected {expected:?} (candidates {candidates:?})",
                    str_field(case, "group"),
                ));
            }
        }
        for failure in &failures {
            eprintln!("{failure}");
        }
        assert!(
            failures.is_empty(),
            "{} of {} wpt srcset parse cases failed",
            failures.len(),
            cases.len()
        );
        eprintln!(
            "{} of {} wpt srcset parse cases passed",
            cases.len(),
            cases.len()
        );
    }

    #[test]
    fn wpt_srcset_select_cases_all_pass() {
        const PATH: &str = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/conformance/wpt/srcset-select-cases.json"
        );
        let Some(table) = read_conformance_table(PATH) else {
            return;
        };
        let cases = table["cases"].as_array().expect("cases is an array");
        assert!(!cases.is_empty(), "no cases in {PATH}");

        let mut failures = Vec::new();
        let mut checked = 0;
        let mut skipped = 0;
        for case in cases {
            let expect_current_src = str_field(case, "expect_current_src");
            // A `<picture>` uses its first `<source>` whose media and type
            // match; one with only a srcset always matches.
            let srcset = match case["picture_sources"].as_array() {
                Some(sources) => sources
                    .iter()
                    .find(|s| s.as_object().is_some_and(|o| o.len() == 1))
                    .and_then(|s| s["srcset"].as_str()),
                None => case["img_srcset"].as_str(),
            };
            let Some(srcset) = srcset else {
                failures.push(format!("case without a usable srcset: {case}"));
                continue;
            };
            let candidates = parse_srcset(srcset);

            // The table's own rule for scrapers listing every candidate:
            // they still list both URLs.
            let all = pick_candidates(candidates.clone(), Pick::All);
            if all.len() != 2 || !all.iter().any(|c| c.url == expect_current_src) {
                failures.push(format!("All for {srcset:?} gave {all:?}"));
            }

            // A `sizes` attribute changes what `w` means; selection here has
            // no `sizes`, so those cases only check the listing above.
            if !case["img_sizes"].is_null() {
                skipped += 1;
                continue;
            }
            checked += 1;
            let selected = select_at_density_one(&candidates).map(|c| c.url.as_str());
            if selected != Some(expect_current_src) {
                failures.push(format!(
                    "select for {srcset:?} gave {selected:?}, expected {expect_current_src:?}"
                ));
            }
            // These are all equal-size duplicates, so "largest" must also
            // settle the tie on the earlier candidate.
            let largest = pick_candidates(candidates, Pick::Largest);
            if urls(&largest) != [expect_current_src] {
                failures.push(format!(
                    "Largest for {srcset:?} gave {largest:?}, expected {expect_current_src:?}"
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        eprintln!(
            "{checked} wpt srcset select cases passed, {skipped} with `sizes` checked for listing only"
        );
    }
}
