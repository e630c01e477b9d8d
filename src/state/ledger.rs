//! The image step over a job's ledger: what becomes of an image's verified bytes, asked of what
//! the job holds in the same order by every driver. A one-process run's ledger is its database,
//! asked inside the state writer's transaction; a worker's is the job in Redis. The decisions
//! themselves are pure, in the core (`scrape_core::fate`).

use std::future::Future;

use scrape_core::fate::{ImageFate, image_fate, near_search};

use super::records::{NearDuplicateOf, StoredFile, phash_value};
use crate::profile::NearDuplicates;

/// What the image step asks of a job's ledger.
pub trait ImageLedger {
    type Error;

    /// Where the job stored the bytes whose content key is `key`, if it did.
    fn stored_path(&self, key: &str) -> impl Future<Output = Result<Option<String>, Self::Error>>;

    /// The picture stored before that is nearest to `hash`, within `rule.distance` bits, with
    /// where its bytes are. A ledger several workers share enters `file` (of `url`) in its
    /// index in the same step, so two workers with near pictures cannot both miss each other;
    /// a one-process run enters it once its bytes are placed.
    fn nearest(
        &self,
        url: &str,
        file: &StoredFile,
        rule: NearDuplicates,
        hash: u64,
    ) -> impl Future<Output = Result<Option<NearDuplicateOf>, Self::Error>>;
}

/// What the image step decided for an image's verified bytes.
#[derive(Debug)]
pub struct ImageDecision {
    pub fate: ImageFate,
    /// The near-duplicate search made, its rule and the picture's hash: the bytes, once
    /// stored, join the index under them.
    pub searched: Option<(NearDuplicates, u64)>,
}

/// The image step: the bytes of `file` (of `url`) are the same as bytes stored already, or
/// near a picture stored before (recorded in `file`), or new; `rule` is the job's
/// `near_duplicates`.
pub async fn image_step<L: ImageLedger>(
    ledger: &L,
    url: &str,
    file: &mut StoredFile,
    rule: Option<NearDuplicates>,
) -> Result<ImageDecision, L::Error> {
    let stored_at = ledger.stored_path(file.content_key()).await?;
    let phash = file.phash.as_deref().and_then(phash_value);
    let searched = near_search(stored_at.is_some(), rule, phash);
    if let Some((near, hash)) = searched {
        file.near_duplicate_of = ledger.nearest(url, file, near, hash).await?;
    }
    let earlier = file.near_duplicate_of.as_ref().map(|n| n.path.as_str());
    Ok(ImageDecision {
        fate: image_fate(stored_at, earlier, rule),
        searched,
    })
}
