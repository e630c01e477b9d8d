//! The image step: what a verified image comes to, decided once for every driver of a job from
//! what the job already holds. A one-process run asks its database (in the state writer's
//! thread), a worker asks the job in Redis; both hand the answers here and record what this
//! says. Pure and table-tested.

use crate::phash::{self, Phash};
use crate::profile::NearDuplicates;

/// What a verified image comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageFate {
    /// New content: stored under its own name (flagged when a near-duplicate was found and
    /// kept).
    Store,
    /// The same bytes are stored already, under `path`: recorded as a duplicate of them, its
    /// own bytes not kept.
    Duplicate { path: String },
    /// A near-duplicate of the picture stored at `path`, with `near_duplicates = "drop"`:
    /// recorded as a duplicate of it, its own bytes not kept.
    Dropped { path: String },
}

impl ImageFate {
    /// Whether the image's own bytes are kept.
    pub fn keeps_bytes(&self) -> bool {
        matches!(self, Self::Store)
    }

    /// Where the image's bytes are, when they are another picture's.
    pub fn earlier_path(&self) -> Option<&str> {
        match self {
            Self::Store => None,
            Self::Duplicate { path } | Self::Dropped { path } => Some(path),
        }
    }
}

/// The rule and perceptual hash to look for near-duplicates with: only for new content
/// (`content_known` false), with near-duplicate flags on, and a hash that tells pictures apart
/// (one near all zeros or all ones is neither searched nor indexed).
pub fn near_search(
    content_known: bool,
    rule: Option<NearDuplicates>,
    hash: Option<Phash>,
) -> Option<(NearDuplicates, Phash)> {
    let rule = rule.filter(|_| !content_known)?;
    let hash = hash?;
    phash::is_informative(hash, rule.distance).then_some((rule, hash))
}

/// The fate of a verified image: `stored_at` is where the job holds the same bytes already (by
/// content hash), `near` the path of the nearest picture stored before within the rule's
/// distance.
pub fn image_fate(
    stored_at: Option<String>,
    near: Option<&str>,
    rule: Option<NearDuplicates>,
) -> ImageFate {
    if let Some(path) = stored_at {
        return ImageFate::Duplicate { path };
    }
    match (near, rule) {
        (Some(near), Some(rule)) if rule.drop => ImageFate::Dropped {
            path: near.to_owned(),
        },
        _ => ImageFate::Store,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEEP: NearDuplicates = NearDuplicates {
        distance: 6,
        drop: false,
    };
    const DROP: NearDuplicates = NearDuplicates {
        distance: 6,
        drop: true,
    };
    /// A hash with about as many ones as zeros: informative at distance 6.
    const HASH: Phash = 0x9a3c_5e71_c2d4_8b6f;

    #[test]
    fn near_duplicates_are_searched_only_for_new_content_with_an_informative_hash() {
        // (case, content known, rule, hash, searched)
        type Case = (
            &'static str,
            bool,
            Option<NearDuplicates>,
            Option<Phash>,
            bool,
        );
        let cases: [Case; 7] = [
            ("new content, flagging", false, Some(KEEP), Some(HASH), true),
            ("new content, dropping", false, Some(DROP), Some(HASH), true),
            (
                "content stored already",
                true,
                Some(KEEP),
                Some(HASH),
                false,
            ),
            ("flags off", false, None, Some(HASH), false),
            ("no hash (did not decode)", false, Some(DROP), None, false),
            (
                "an evenly shaded picture",
                false,
                Some(DROP),
                Some(0),
                false,
            ),
            ("its negative", false, Some(DROP), Some(!0b11), false),
        ];
        for (name, known, rule, hash, searched) in cases {
            let found = near_search(known, rule, hash);
            assert_eq!(found.map(|(_, h)| h), searched.then_some(HASH), "{name}");
        }
    }

    #[test]
    fn the_fate_of_an_image_follows_what_the_job_holds() {
        let dup = |path: &str| ImageFate::Duplicate { path: path.into() };
        // (case, stored at, nearest picture, rule, fate)
        type Case = (
            &'static str,
            Option<&'static str>,
            Option<&'static str>,
            Option<NearDuplicates>,
            ImageFate,
        );
        let cases: [Case; 6] = [
            ("new content", None, None, None, ImageFate::Store),
            (
                "same bytes stored",
                Some("cd/same.jpg"),
                None,
                None,
                dup("cd/same.jpg"),
            ),
            (
                "same bytes win over a near picture",
                Some("cd/same.jpg"),
                Some("00/earlier.jpg"),
                Some(DROP),
                dup("cd/same.jpg"),
            ),
            (
                "a near picture, dropping",
                None,
                Some("00/earlier.jpg"),
                Some(DROP),
                ImageFate::Dropped {
                    path: "00/earlier.jpg".into(),
                },
            ),
            (
                "a near picture, flagging",
                None,
                Some("00/earlier.jpg"),
                Some(KEEP),
                ImageFate::Store,
            ),
            (
                "no rule",
                None,
                Some("00/earlier.jpg"),
                None,
                ImageFate::Store,
            ),
        ];
        for (name, stored_at, near, rule, fate) in cases {
            let decided = image_fate(stored_at.map(str::to_owned), near, rule);
            assert_eq!(
                decided.keeps_bytes(),
                decided.earlier_path().is_none(),
                "{name}"
            );
            assert_eq!(decided, fate, "{name}");
        }
    }
}
