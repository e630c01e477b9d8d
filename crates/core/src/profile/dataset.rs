//! How stored images are laid out for training sets: plain files, WebDataset tar shards or a
//! Parquet table (`[download] format`). The keys sit in `[download]`; this module holds their
//! checked form and the checks a key shares with its flag.

use super::resize::{ResizeMode, ResizeSettings};

/// The layout of the output folder (`[download] format`, `--format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputFormat {
    /// One file per distinct image, at the `path` template's name.
    #[default]
    Files,
    /// Tar shards `NNNNN.tar` of `shard_size` samples (`{key}.{ext}` and `{key}.json`), each
    /// with a JSON-lines index `NNNNN.jsonl`.
    WebDataset,
    /// Files, plus `images.parquet`: a row per image URL (and its bytes, with
    /// `parquet_images`).
    Parquet,
}

impl OutputFormat {
    /// Every format, by its name in profiles and on the command line.
    pub const ALL: [Self; 3] = [Self::Files, Self::WebDataset, Self::Parquet];

    pub fn name(self) -> &'static str {
        match self {
            Self::Files => "files",
            Self::WebDataset => "webdataset",
            Self::Parquet => "parquet",
        }
    }

    /// The format named `name`, if one is.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// Samples per WebDataset shard by default, as img2dataset writes them.
pub const DEFAULT_SHARD_SIZE: u64 = 10_000;
/// The most samples in one shard: a million images make a tar of tens of gigabytes already.
pub const MAX_SHARD_SIZE: u64 = 1_000_000;

/// The dataset keys of `[download]`, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatasetSettings {
    pub format: OutputFormat,
    /// Samples per WebDataset shard.
    pub shard_size: u64,
    /// Parquet: the image bytes in a column of their own.
    pub parquet_images: bool,
    /// Perceptual hashes and near-duplicate flags (`near_duplicate_distance`); `None`: off.
    pub near_duplicates: Option<NearDuplicates>,
    /// `[download.resize]`; `None`: images are stored as downloaded.
    pub resize: Option<ResizeSettings>,
}

impl DatasetSettings {
    /// What the stored images are, in words: how they are laid out (files, or tar shards) and
    /// how they were made (as downloaded, or resized, and how). One output folder keeps it from
    /// run to run. `files` and `parquet` store the same files (Parquet adds a table written at
    /// the end of each run), so they share a layout; the shard size and near-duplicate flags
    /// change no stored image.
    pub fn layout(&self) -> String {
        let container = match self.format {
            OutputFormat::Files | OutputFormat::Parquet => "image files",
            OutputFormat::WebDataset => "WebDataset shards",
        };
        let Some(resize) = self.resize else {
            return format!("{container}, as downloaded");
        };
        let mut made = format!(
            "{container}, resized to {} px ({}, {} quality {}",
            resize.size,
            resize.mode.name(),
            resize.format.name(),
            resize.quality
        );
        if resize.upscale {
            made.push_str(", upscaled");
        }
        if resize.mode == ResizeMode::Border {
            let [r, g, b] = resize.border_color;
            made.push_str(&format!(", border #{r:02x}{g:02x}{b:02x}"));
        }
        made.push(')');
        made
    }
}

/// `near_duplicate_distance` and `near_duplicates`, checked: images whose perceptual hashes
/// are at most `distance` bits apart are near-duplicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NearDuplicates {
    pub distance: u32,
    /// A near-duplicate of an image stored before is dropped (recorded as a duplicate of it)
    /// instead of stored and flagged.
    pub drop: bool,
}

/// The largest `near_duplicate_distance`: past it, unrelated pictures match (a 64-bit dHash of
/// two unrelated pictures differs in about 32 bits) and the band index finds too many
/// candidates to be quick.
pub const MAX_NEAR_DUPLICATE_DISTANCE: u64 = 16;

/// `near_duplicate_distance`: from 0 (the same hash) to [`MAX_NEAR_DUPLICATE_DISTANCE`].
pub fn near_duplicate_distance(value: u64) -> Result<u32, String> {
    if value <= MAX_NEAR_DUPLICATE_DISTANCE {
        Ok(value as u32)
    } else {
        Err(format!(
            "`near_duplicate_distance` must be between 0 and {MAX_NEAR_DUPLICATE_DISTANCE} bits, not {value}"
        ))
    }
}

/// `near_duplicates`: `keep` (flagged in the manifest) or `drop`; `Ok(true)` for `drop`.
pub fn near_duplicates_drop(name: &str) -> Result<bool, String> {
    match name {
        "keep" => Ok(false),
        "drop" => Ok(true),
        other => Err(format!(
            "`near_duplicates` is `keep` or `drop`, not `{other}`"
        )),
    }
}

impl Default for DatasetSettings {
    fn default() -> Self {
        Self {
            format: OutputFormat::Files,
            shard_size: DEFAULT_SHARD_SIZE,
            parquet_images: false,
            near_duplicates: None,
            resize: None,
        }
    }
}

/// `format`: one of [`OutputFormat::ALL`] by name.
pub fn format(name: &str) -> Result<OutputFormat, String> {
    super::units::one_of(name, OutputFormat::ALL, OutputFormat::name, "output format")
}

/// `shard_size`: from 1 to [`MAX_SHARD_SIZE`].
pub fn shard_size(value: u64) -> Result<u64, String> {
    if (1..=MAX_SHARD_SIZE).contains(&value) {
        Ok(value)
    } else {
        Err(format!(
            "`shard_size` must be between 1 and {MAX_SHARD_SIZE}, not {value}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_read_by_name_and_unknown_ones_list_the_known() {
        assert_eq!(format("webdataset"), Ok(OutputFormat::WebDataset));
        assert_eq!(format("files"), Ok(OutputFormat::Files));
        let error = format("tar").unwrap_err();
        assert!(error.contains("files, webdataset, parquet"), "{error}");
    }

    #[test]
    fn near_duplicate_keys_are_bounded_and_named() {
        assert_eq!(near_duplicate_distance(0), Ok(0));
        assert_eq!(near_duplicate_distance(16), Ok(16));
        assert!(near_duplicate_distance(17).is_err());
        assert_eq!(near_duplicates_drop("drop"), Ok(true));
        assert_eq!(near_duplicates_drop("keep"), Ok(false));
        assert!(
            near_duplicates_drop("remove")
                .unwrap_err()
                .contains("`keep` or `drop`")
        );
    }

    #[test]
    fn shard_sizes_are_bounded() {
        assert!(shard_size(0).is_err());
        assert_eq!(shard_size(10_000), Ok(10_000));
        assert!(shard_size(MAX_SHARD_SIZE + 1).is_err());
    }

    #[test]
    fn a_layout_names_what_changes_the_stored_images_and_nothing_else() {
        let plain = DatasetSettings {
            format: OutputFormat::Files,
            shard_size: DEFAULT_SHARD_SIZE,
            parquet_images: false,
            near_duplicates: None,
            resize: None,
        };
        let with = |change: &dyn Fn(&mut DatasetSettings)| {
            let mut settings = plain;
            change(&mut settings);
            settings.layout()
        };
        assert_eq!(plain.layout(), "image files, as downloaded");
        // Parquet stores the same files; shard size and flags change no stored image.
        assert_eq!(with(&|s| s.format = OutputFormat::Parquet), plain.layout());
        assert_eq!(with(&|s| s.shard_size = 10), plain.layout());
        assert_eq!(
            with(&|s| s.near_duplicates = Some(NearDuplicates {
                distance: 4,
                drop: false
            })),
            plain.layout()
        );
        assert_eq!(
            with(&|s| s.format = OutputFormat::WebDataset),
            "WebDataset shards, as downloaded"
        );
        let resized = ResizeSettings::new(256);
        assert_eq!(
            with(&|s| s.resize = Some(resized)),
            "image files, resized to 256 px (keep_ratio, jpeg quality 95)"
        );
        let border = ResizeSettings {
            mode: ResizeMode::Border,
            upscale: true,
            border_color: [255, 0, 16],
            ..resized
        };
        assert_eq!(
            with(&|s| s.resize = Some(border)),
            "image files, resized to 256 px (border, jpeg quality 95, upscaled, border #ff0010)"
        );
    }
}
