//! `images.parquet` (`format = "parquet"`): a row per image URL, written from the state database
//! at the end of every run, like the manifest: streamed a row group at a time (so memory stays
//! flat), into a temporary file renamed into place when complete.
//!
//! Columns: `url`, `status` (`stored`, `duplicate`, `failed`, `pending`), `path`, `sha256`,
//! `bytes`, `content_type`, `width`, `height` (of stored images), `page`, `rule`, `metadata`
//! (a JSON object), `failure_class`, `failure_detail` (of failed ones), `phash`,
//! `near_duplicate_of`, `near_duplicate_path`, `near_duplicate_distance` (with near-duplicate
//! flags on), with `parquet_images` the image bytes themselves in `image`, read from the stored
//! files, and `original_sha256`, `original_bytes`, `original_width`, `original_height` (of a
//! resized image: the picture as downloaded), `run`: the run that first found the image (0
//! before runs were numbered, and for workers over Redis), `caption`: the text a reader
//! would take for it (img2dataset's caption column), `license` and `rights` (a JSON object:
//! field → value and source) as the image's page published them.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use parquet::data_type::{ByteArray, ByteArrayType, Int32Type, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::{SerializedColumnWriter, SerializedFileWriter};
use parquet::schema::parser::parse_message_type;

use super::manifest::{JobRecords, file_problem};
use super::shards;
use crate::state::{ImageRecord, ImageStatus, StateError};

/// The file's name in the output folder.
pub const PARQUET: &str = "images.parquet";

/// Rows per row group at most.
const GROUP_ROWS: usize = 8192;
/// Image bytes per row group at most (with `parquet_images`), so memory stays flat.
const GROUP_IMAGE_BYTES: usize = 64 * 1024 * 1024;

const SCHEMA: &str = "message image {
    required binary url (UTF8);
    required binary status (UTF8);
    optional binary path (UTF8);
    optional binary sha256 (UTF8);
    optional int64 bytes;
    optional binary content_type (UTF8);
    optional int32 width;
    optional int32 height;
    required binary page (UTF8);
    required binary rule (UTF8);
    required binary metadata (UTF8);
    optional binary failure_class (UTF8);
    optional binary failure_detail (UTF8);
    optional binary phash (UTF8);
    optional binary near_duplicate_of (UTF8);
    optional binary near_duplicate_path (UTF8);
    optional int32 near_duplicate_distance;
    optional binary image;
    optional binary original_sha256 (UTF8);
    optional int64 original_bytes;
    optional int32 original_width;
    optional int32 original_height;
    required int64 run;
    optional binary caption (UTF8);
    optional binary license (UTF8);
    optional binary rights (UTF8);
}";

/// One row, owned until its row group is written.
#[derive(Default)]
struct Row {
    url: String,
    status: &'static str,
    path: Option<String>,
    sha256: Option<String>,
    bytes: Option<i64>,
    content_type: Option<String>,
    width: Option<i32>,
    height: Option<i32>,
    page: String,
    rule: String,
    metadata: String,
    failure_class: Option<String>,
    failure_detail: Option<String>,
    phash: Option<String>,
    near_duplicate_of: Option<String>,
    near_duplicate_path: Option<String>,
    near_duplicate_distance: Option<i32>,
    original_sha256: Option<String>,
    original_bytes: Option<i64>,
    original_width: Option<i32>,
    original_height: Option<i32>,
    image: Option<Vec<u8>>,
    run: i64,
    caption: Option<String>,
    license: Option<String>,
    rights: Option<String>,
}

/// Rewrites `images.parquet` in `out` from `records` (a one-process state, or a job's records
/// in Redis), the image bytes included when `images`; returns the rows written.
pub fn export_parquet(
    records: &impl JobRecords,
    out: &Path,
    images: bool,
) -> Result<u64, StateError> {
    let target = out.join(PARQUET);
    let temp = out.join(format!("{PARQUET}.tmp"));
    let failed = |source: parquet::errors::ParquetError| StateError::Io {
        path: temp.clone(),
        source: std::io::Error::other(source),
    };
    let file = File::create(&temp).map_err(|e| failed(e.into()))?;
    // Invariant: the schema above is a constant that parses.
    let schema = Arc::new(parse_message_type(SCHEMA).expect("the Parquet schema parses"));
    let properties = Arc::new(WriterProperties::builder().build());
    let mut writer = SerializedFileWriter::new(file, schema, properties).map_err(failed)?;
    let mut rows = Vec::new();
    let mut image_bytes = 0;
    let mut written = 0u64;
    let mut error = None;
    records.for_each_image(|url, record| {
        let row = row(out, url, record, images);
        image_bytes += row.image.as_ref().map_or(0, Vec::len);
        rows.push(row);
        if rows.len() >= GROUP_ROWS || image_bytes >= GROUP_IMAGE_BYTES {
            written += rows.len() as u64;
            if let Err(e) = write_group(&mut writer, &std::mem::take(&mut rows)) {
                error.get_or_insert(e);
            }
            image_bytes = 0;
        }
        Ok(())
    })?;
    if let Some(e) = error {
        return Err(failed(e));
    }
    if !rows.is_empty() {
        written += rows.len() as u64;
        write_group(&mut writer, &rows).map_err(failed)?;
    }
    let file = writer.into_inner().map_err(failed)?;
    file.sync_all().map_err(|e| failed(e.into()))?;
    std::fs::rename(&temp, &target).map_err(|e| failed(e.into()))?;
    Ok(written)
}

fn row(out: &Path, url: &str, record: &ImageRecord, images: bool) -> Row {
    let mut row = Row {
        url: url.to_owned(),
        status: match record.status {
            ImageStatus::Pending => "pending",
            ImageStatus::Stored => "stored",
            ImageStatus::Duplicate => "duplicate",
            ImageStatus::Failed => "failed",
        },
        page: record.page.clone(),
        rule: record.rule.clone(),
        // Invariant: a map of strings serializes.
        metadata: serde_json::to_string(&record.metadata).expect("metadata serializes"),
        run: i64::from(record.run),
        caption: record.caption.clone(),
        license: record
            .rights
            .as_ref()
            .and_then(|r| r.get("license"))
            .map(|l| l.value.clone()),
        // Invariant: strings in a map serialize.
        rights: record
            .rights
            .as_ref()
            .map(|r| serde_json::to_string(r).expect("rights serialize")),
        ..Row::default()
    };
    if let Some(file) = &record.stored {
        row.path = Some(file.path.clone());
        row.sha256 = Some(file.sha256.clone());
        row.bytes = i64::try_from(file.bytes).ok();
        row.content_type = Some(file.content_type.clone());
        row.width = i32::try_from(file.width).ok();
        row.height = i32::try_from(file.height).ok();
        row.phash = file.phash.clone();
        if let Some(near) = &file.near_duplicate_of {
            row.near_duplicate_of = Some(near.sha256.clone());
            row.near_duplicate_path = Some(near.path.clone());
            row.near_duplicate_distance = i32::try_from(near.distance).ok();
        }
        if let Some(original) = &file.original {
            row.original_sha256 = Some(original.sha256.clone());
            row.original_bytes = i64::try_from(original.bytes).ok();
            row.original_width = i32::try_from(original.width).ok();
            row.original_height = i32::try_from(original.height).ok();
        }
        if images
            && shards::member_of(&file.path).is_none()
            && file_problem(out, &file.path, Some(file.bytes)).is_none()
        {
            row.image = std::fs::read(out.join(&file.path)).ok();
        }
    }
    if let Some(failure) = &record.failure {
        row.failure_class = Some(failure.class.clone());
        row.failure_detail = Some(failure.detail.clone());
    }
    row
}

/// Writes `rows` as one row group, column by column in the schema's order.
fn write_group(
    writer: &mut SerializedFileWriter<File>,
    rows: &[Row],
) -> parquet::errors::Result<()> {
    let mut group = writer.next_row_group()?;
    let mut index = 0;
    while let Some(mut column) = group.next_column()? {
        match index {
            0 => required_text(&mut column, rows.iter().map(|r| r.url.as_bytes()))?,
            1 => required_text(&mut column, rows.iter().map(|r| r.status.as_bytes()))?,
            2 => optional_bytes(
                &mut column,
                rows.iter().map(|r| r.path.as_deref().map(str::as_bytes)),
            )?,
            3 => optional_bytes(
                &mut column,
                rows.iter().map(|r| r.sha256.as_deref().map(str::as_bytes)),
            )?,
            4 => optional_number::<Int64Type>(&mut column, rows.iter().map(|r| r.bytes))?,
            5 => optional_bytes(
                &mut column,
                rows.iter()
                    .map(|r| r.content_type.as_deref().map(str::as_bytes)),
            )?,
            6 => optional_number::<Int32Type>(&mut column, rows.iter().map(|r| r.width))?,
            7 => optional_number::<Int32Type>(&mut column, rows.iter().map(|r| r.height))?,
            8 => required_text(&mut column, rows.iter().map(|r| r.page.as_bytes()))?,
            9 => required_text(&mut column, rows.iter().map(|r| r.rule.as_bytes()))?,
            10 => required_text(&mut column, rows.iter().map(|r| r.metadata.as_bytes()))?,
            11 => optional_bytes(
                &mut column,
                rows.iter()
                    .map(|r| r.failure_class.as_deref().map(str::as_bytes)),
            )?,
            12 => optional_bytes(
                &mut column,
                rows.iter()
                    .map(|r| r.failure_detail.as_deref().map(str::as_bytes)),
            )?,
            13 => optional_bytes(
                &mut column,
                rows.iter().map(|r| r.phash.as_deref().map(str::as_bytes)),
            )?,
            14 => optional_bytes(
                &mut column,
                rows.iter()
                    .map(|r| r.near_duplicate_of.as_deref().map(str::as_bytes)),
            )?,
            15 => optional_bytes(
                &mut column,
                rows.iter()
                    .map(|r| r.near_duplicate_path.as_deref().map(str::as_bytes)),
            )?,
            16 => optional_number::<Int32Type>(
                &mut column,
                rows.iter().map(|r| r.near_duplicate_distance),
            )?,
            17 => optional_bytes(&mut column, rows.iter().map(|r| r.image.as_deref()))?,
            18 => optional_bytes(
                &mut column,
                rows.iter()
                    .map(|r| r.original_sha256.as_deref().map(str::as_bytes)),
            )?,
            19 => optional_number::<Int64Type>(&mut column, rows.iter().map(|r| r.original_bytes))?,
            20 => optional_number::<Int32Type>(&mut column, rows.iter().map(|r| r.original_width))?,
            21 => {
                optional_number::<Int32Type>(&mut column, rows.iter().map(|r| r.original_height))?
            }
            22 => {
                let runs: Vec<i64> = rows.iter().map(|r| r.run).collect();
                column.typed::<Int64Type>().write_batch(&runs, None, None)?;
            }
            23 => optional_bytes(
                &mut column,
                rows.iter().map(|r| r.caption.as_deref().map(str::as_bytes)),
            )?,
            24 => optional_bytes(
                &mut column,
                rows.iter().map(|r| r.license.as_deref().map(str::as_bytes)),
            )?,
            _ => optional_bytes(
                &mut column,
                rows.iter().map(|r| r.rights.as_deref().map(str::as_bytes)),
            )?,
        }
        column.close()?;
        index += 1;
    }
    group.close()?;
    Ok(())
}

fn required_text<'a>(
    column: &mut SerializedColumnWriter<'_>,
    values: impl Iterator<Item = &'a [u8]>,
) -> parquet::errors::Result<()> {
    let values: Vec<ByteArray> = values.map(ByteArray::from).collect();
    column
        .typed::<ByteArrayType>()
        .write_batch(&values, None, None)?;
    Ok(())
}

fn optional_bytes<'a>(
    column: &mut SerializedColumnWriter<'_>,
    values: impl Iterator<Item = Option<&'a [u8]>>,
) -> parquet::errors::Result<()> {
    let mut present = Vec::new();
    let mut levels = Vec::new();
    for value in values {
        levels.push(i16::from(value.is_some()));
        present.extend(value.map(ByteArray::from));
    }
    column
        .typed::<ByteArrayType>()
        .write_batch(&present, Some(&levels), None)?;
    Ok(())
}

fn optional_number<T>(
    column: &mut SerializedColumnWriter<'_>,
    values: impl Iterator<Item = Option<T::T>>,
) -> parquet::errors::Result<()>
where
    T: parquet::data_type::DataType,
{
    let mut present = Vec::new();
    let mut levels = Vec::new();
    for value in values {
        levels.push(i16::from(value.is_some()));
        present.extend(value);
    }
    column
        .typed::<T>()
        .write_batch(&present, Some(&levels), None)?;
    Ok(())
}
