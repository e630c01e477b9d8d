//! `[download]`: where images go, how many are fetched at once, timeouts, limits and checks.

use std::path::PathBuf;
use std::time::Duration;

use toml::Spanned;

use super::Validator;
use crate::bucket_url::BucketUrl;
use crate::profile::dataset::{self, DatasetSettings, NearDuplicates};
use crate::profile::raw::{DownloadToml, Quantity, ResizeToml};
use crate::profile::resize::{self, ResizeSettings};
use crate::profile::{
    DEFAULT_USER_AGENT, Diagnostic, DownloadSettings, PathTemplate, Politeness, ProxySettings,
    did_you_mean, limits, parse_bytes,
};
use crate::verify::{ImageFormat, VerifyRules};

/// The raw dataset keys of `[download]`.
struct DatasetKeys {
    format: Option<Spanned<String>>,
    shard_size: Option<Spanned<u64>>,
    parquet_images: Option<Spanned<bool>>,
    near_duplicate_distance: Option<Spanned<u64>>,
    near_duplicates: Option<Spanned<String>>,
}

/// Downloads in flight over all hosts by default: enough for one distant host to fill its
/// window, or for many hosts side by side.
const DEFAULT_CONCURRENCY: u64 = 256;
/// The default cap of a host's window. The window itself starts at 8 and grows only while the
/// host answers quickly, so a small site never sees this many.
const DEFAULT_PER_HOST: u64 = 256;

impl Validator<'_> {
    /// `[download]` for the job `profile_name`; the proxy is filled in from `[proxy]`.
    pub(super) fn download(
        &mut self,
        raw: DownloadToml,
        profile_name: &str,
    ) -> Option<DownloadSettings> {
        let mut ok = true;
        if let Some(text) = &raw.out
            && let Some(Err(reason)) = BucketUrl::of(std::path::Path::new(text.get_ref()))
        {
            self.error(text.span(), format!("`out` is not a bucket URL: {reason}"));
            ok = false;
        }
        let out = raw.out.map_or_else(
            || PathBuf::from("downloads").join(profile_name),
            |o| PathBuf::from(o.into_inner()),
        );
        let path = match raw.path {
            None => PathTemplate::parse("{shard}/{sha256}.{ext}").ok(),
            Some(text) => self.path_template(&text),
        };
        let mut count = |value: Option<Spanned<u64>>, default: u64, name: &str| match value {
            None => default,
            Some(v) => match limits::count(name, *v.get_ref(), limits::MAX_DOWNLOADS_IN_FLIGHT) {
                Ok(n) => n,
                Err(message) => {
                    self.diagnostics
                        .push(Diagnostic::error(Some(v.span()), message));
                    ok = false;
                    default
                }
            },
        };
        let concurrency = count(raw.concurrency, DEFAULT_CONCURRENCY, "concurrency") as usize;
        let per_host = count(raw.per_host, DEFAULT_PER_HOST, "per_host") as usize;
        let adaptive = raw.adaptive.is_none_or(|a| *a.get_ref());
        let mut duration = |value: Option<Spanned<Quantity>>, default: Duration| match value {
            None => default,
            Some(v) => self.timeout(&v).unwrap_or_else(|| {
                ok = false;
                default
            }),
        };
        let connect_timeout = duration(raw.connect_timeout, Duration::from_secs(10));
        let timeout = duration(raw.timeout, Duration::from_secs(60));
        let first_byte_timeout = duration(raw.first_byte_timeout, Duration::from_secs(30));
        let retries = match raw.retries {
            None => 4,
            Some(v) => limits::retries(*v.get_ref()).unwrap_or_else(|message| {
                self.error(v.span(), message);
                ok = false;
                4
            }),
        };
        let max_bytes = match raw.max_bytes {
            None => 100_000_000,
            Some(v) => self.max_bytes(&v).unwrap_or_else(|| {
                ok = false;
                0
            }),
        };
        let verify = self
            .verify_rules(raw.formats, raw.min_width, raw.min_height, raw.max_pixels)
            .unwrap_or_else(|| {
                ok = false;
                VerifyRules::default()
            });
        let user_agent = raw
            .user_agent
            .map_or(DEFAULT_USER_AGENT.to_owned(), |u| u.into_inner());
        let headers = self.headers(raw.headers).unwrap_or_else(|| {
            ok = false;
            Vec::new()
        });
        let min_speed_bytes = match raw.min_speed {
            None => 1_000,
            Some(v) => self.min_speed(&v).unwrap_or_else(|| {
                ok = false;
                0
            }),
        };
        let per_host_rps = self.per_host_rps(raw.per_host_rps, &mut ok);
        let mut dataset = self.dataset(
            DatasetKeys {
                format: raw.format,
                shard_size: raw.shard_size,
                parquet_images: raw.parquet_images,
                near_duplicate_distance: raw.near_duplicate_distance,
                near_duplicates: raw.near_duplicates,
            },
            &mut ok,
        );
        dataset.resize = raw.resize.and_then(|r| {
            let checked = self.resize(r);
            ok &= checked.is_some();
            checked
        });
        Some(DownloadSettings {
            out,
            path: path?,
            concurrency,
            per_host,
            adaptive,
            connect_timeout,
            timeout,
            first_byte_timeout,
            min_speed_bytes,
            per_host_rps,
            retries,
            user_agent,
            headers,
            max_bytes,
            verify,
            proxy: ProxySettings::default(),
            politeness: Politeness::default(),
            dataset,
        })
        .filter(|_| ok)
    }

    /// `path`: a template for where each image goes in `out`; one without `{shard}` is a
    /// warning.
    fn path_template(&mut self, text: &Spanned<String>) -> Option<PathTemplate> {
        match PathTemplate::parse(text.get_ref()) {
            Ok(t) => {
                if !t.is_sharded() {
                    self.diagnostics.push(
                        Diagnostic::warning(
                            Some(text.span()),
                            "path template has no `{shard}`: one folder may hold very many files",
                        )
                        .with_hint(
                            "start it with \"{shard}/\" to keep folders under ~10,000 files",
                        ),
                    );
                }
                Some(t)
            }
            Err(message) => {
                self.error(text.span(), message);
                None
            }
        }
    }

    /// A timeout: a duration with a unit, longer than zero. `None` when invalid (reported).
    fn timeout(&mut self, v: &Spanned<Quantity>) -> Option<Duration> {
        match v.get_ref() {
            Quantity::Text(t) => limits::timeout(t)
                .map_err(|m| self.diagnostics.push(Diagnostic::error(Some(v.span()), m)))
                .ok(),
            Quantity::Number(_) => {
                self.diagnostics.push(
                    Diagnostic::error(Some(v.span()), "a duration needs a unit")
                        .with_hint("write e.g. \"30s\" or \"500ms\""),
                );
                None
            }
        }
    }

    /// `max_bytes`: a size above zero. `None` when invalid (reported).
    fn max_bytes(&mut self, v: &Spanned<Quantity>) -> Option<u64> {
        let parsed = match v.get_ref() {
            Quantity::Number(n) => Ok(*n),
            Quantity::Text(t) => parse_bytes(t),
        };
        parsed
            .and_then(|n| limits::above_zero("max_bytes", n))
            .map_err(|m| self.error(v.span(), m))
            .ok()
    }

    /// `min_speed`: a size, optionally followed by `/s`. `None` when invalid (reported).
    fn min_speed(&mut self, v: &Spanned<Quantity>) -> Option<u64> {
        let parsed = match v.get_ref() {
            Quantity::Number(n) => Ok(*n),
            Quantity::Text(t) => parse_bytes(t.trim_end_matches("/s")),
        };
        parsed
            .map_err(|m| {
                self.error(v.span(), m);
            })
            .ok()
    }

    /// The checks of each downloaded image: `formats`, `min_width`, `min_height` and
    /// `max_pixels`. `None` when any is invalid (each is reported).
    fn verify_rules(
        &mut self,
        formats: Option<Spanned<Vec<Spanned<String>>>>,
        min_width: Option<Spanned<u64>>,
        min_height: Option<Spanned<u64>>,
        max_pixels: Option<Spanned<u64>>,
    ) -> Option<VerifyRules> {
        let mut ok = true;
        let mut verify = VerifyRules::default();
        if let Some(formats) = formats {
            if formats.get_ref().is_empty() {
                self.diagnostics.push(
                    Diagnostic::error(
                        Some(formats.span()),
                        "`formats` is empty: no image could be kept",
                    )
                    .with_hint("leave it out to keep every raster format"),
                );
                ok = false;
            }
            let mut allowed = Vec::new();
            for f in formats.get_ref() {
                match ImageFormat::from_name(f.get_ref()) {
                    Some(format) => allowed.push(format),
                    None => {
                        self.unknown_format(f);
                        ok = false;
                    }
                }
            }
            verify.allowed = allowed;
        }
        verify.min_width = min_width.map_or(0, |v| (*v.get_ref()).min(u32::MAX as u64) as u32);
        verify.min_height = min_height.map_or(0, |v| (*v.get_ref()).min(u32::MAX as u64) as u32);
        if let Some(max) = max_pixels {
            if let Err(message) = limits::above_zero("max_pixels", *max.get_ref()) {
                self.error(max.span(), message);
                ok = false;
            }
            verify.max_pixels = *max.get_ref();
        }
        ok.then_some(verify)
    }

    /// The dataset keys: `format`, `shard_size`, `parquet_images`. Each invalid one is
    /// reported and clears `ok`.
    fn dataset(&mut self, keys: DatasetKeys, ok: &mut bool) -> DatasetSettings {
        let mut settings = DatasetSettings::default();
        let mut check = |span: std::ops::Range<usize>, checked: Result<(), String>| {
            if let Err(message) = checked {
                self.error(span, message);
                *ok = false;
            }
        };
        if let Some(v) = keys.format {
            check(
                v.span(),
                dataset::format(v.get_ref()).map(|f| settings.format = f),
            );
        }
        if let Some(v) = keys.shard_size {
            check(
                v.span(),
                dataset::shard_size(*v.get_ref()).map(|n| settings.shard_size = n),
            );
        }
        settings.parquet_images = keys.parquet_images.is_some_and(|v| *v.get_ref());
        let mut drop = false;
        if let Some(v) = &keys.near_duplicates {
            check(
                v.span(),
                dataset::near_duplicates_drop(v.get_ref()).map(|d| drop = d),
            );
        }
        match keys.near_duplicate_distance {
            Some(v) => check(
                v.span(),
                dataset::near_duplicate_distance(*v.get_ref()).map(|distance| {
                    settings.near_duplicates = Some(NearDuplicates { distance, drop });
                }),
            ),
            None => {
                if let Some(v) = keys.near_duplicates.filter(|_| drop) {
                    check(
                        v.span(),
                        Err("`near_duplicates = \"drop\"` needs `near_duplicate_distance`".into()),
                    );
                }
            }
        }
        settings
    }

    /// `[download.resize]`. `None` when a key is invalid (each is reported).
    fn resize(&mut self, raw: ResizeToml) -> Option<ResizeSettings> {
        let mut ok = true;
        let mut check = |span: std::ops::Range<usize>, checked: Result<(), String>| {
            if let Err(message) = checked {
                self.error(span, message);
                ok = false;
            }
        };
        let mut settings = ResizeSettings::new(1);
        check(
            raw.size.span(),
            resize::size(*raw.size.get_ref()).map(|n| settings.size = n),
        );
        if let Some(v) = raw.mode {
            check(
                v.span(),
                resize::mode(v.get_ref()).map(|m| settings.mode = m),
            );
        }
        if let Some(v) = raw.format {
            check(
                v.span(),
                resize::format(v.get_ref()).map(|f| settings.format = f),
            );
        }
        if let Some(v) = raw.quality {
            check(
                v.span(),
                resize::quality(*v.get_ref()).map(|q| settings.quality = q),
            );
        }
        if let Some(v) = raw.border_color {
            check(
                v.span(),
                resize::border_color(v.get_ref()).map(|c| settings.border_color = c),
            );
        }
        settings.upscale = raw.upscale.is_some_and(|v| *v.get_ref());
        ok.then_some(settings)
    }

    /// Reports `f`, which names no image format, with the nearest name or the list of them.
    fn unknown_format(&mut self, f: &Spanned<String>) {
        let names = ImageFormat::ALL.map(ImageFormat::name);
        let mut d = Diagnostic::error(
            Some(f.span()),
            format!("unknown image format `{}`", f.get_ref()),
        );
        d = match did_you_mean(f.get_ref(), names) {
            Some(best) => d.with_hint(format!("did you mean `{best}`?")),
            None => d.with_hint(format!("known formats: {}", names.join(", "))),
        };
        self.diagnostics.push(d);
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{HEAD, messages};
    use crate::profile::{ResizeFormat, ResizeMode, ResizeSettings, check};

    #[test]
    fn resize_defaults_to_keep_ratio_jpeg_at_95() {
        let checked = check(&format!("{HEAD}[download.resize]\nsize = 256\n"));
        let resize = checked.profile.unwrap().download.dataset.resize;
        assert_eq!(resize, Some(ResizeSettings::new(256)));
        assert_eq!(check(HEAD).profile.unwrap().download.dataset.resize, None);
        let source = format!(
            "{HEAD}[download.resize]\nsize = 64\nmode = \"border\"\nformat = \"png\"\n\
             quality = 80\nupscale = true\nborder_color = \"#ffffff\"\n"
        );
        let resize = check(&source)
            .profile
            .unwrap()
            .download
            .dataset
            .resize
            .unwrap();
        assert_eq!(
            (resize.mode, resize.format, resize.quality, resize.upscale),
            (ResizeMode::Border, ResizeFormat::Png, 80, true)
        );
        assert_eq!(resize.border_color, [255, 255, 255]);
    }

    #[test]
    fn an_output_in_a_bucket_is_checked_where_it_is_written() {
        let ok = check(&format!("{HEAD}[download]\nout = \"s3://datasets/a/b\"\n"));
        let out = ok.profile.expect("a valid profile").download.out;
        assert_eq!(out, std::path::PathBuf::from("s3://datasets/a/b"));
        let bad = check(&format!("{HEAD}[download]\nout = \"s3://Datasets\"\n"));
        assert!(bad.profile.is_none());
        let said = messages("[download]\nout = \"s3://Datasets\"\n");
        assert!(
            said.iter()
                .any(|m| m.starts_with("`out` is not a bucket URL: a bucket name is")),
            "{said:?}"
        );
    }

    #[test]
    fn bad_resize_keys_point_at_their_value() {
        let cases = [
            (
                "size = 0",
                "p.toml:6:8: error: `size` must be between 1 and 16384 pixels, not 0",
            ),
            (
                "size = 1\nquality = 0",
                "p.toml:7:11: error: `quality` must be between 1 and 100, not 0",
            ),
            (
                "size = 1\nquality = 101",
                "p.toml:7:11: error: `quality` must be between 1 and 100, not 101",
            ),
            (
                "size = 1\nmode = \"stretch\"",
                "p.toml:7:8: error: unknown resize mode `stretch`; known modes: keep_ratio, \
                 center_crop, border",
            ),
            (
                "size = 1\nformat = \"avif\"",
                "p.toml:7:10: error: unknown resize format `avif`",
            ),
            (
                "size = 1\nborder_color = \"black\"",
                "p.toml:7:16: error: `border_color` is a colour written `#rrggbb`",
            ),
            (
                "size = 1\nsizes = 2",
                "p.toml:7:1: error: unknown key `sizes`",
            ),
        ];
        for (lines, expected) in cases {
            let source = format!("{HEAD}[download.resize]\n{lines}\n");
            let found = check(&source).diagnostics;
            assert_eq!(found.len(), 1, "{lines}: {found:?}");
            let rendered = found[0].render("p.toml", &source).to_string();
            assert!(rendered.starts_with(expected), "{lines}: {rendered}");
        }
    }

    #[test]
    fn settings_that_would_reject_everything_are_errors() {
        let cases = [
            ("max_bytes = 0", "`max_bytes` of 0"),
            ("max_bytes = \"0MB\"", "`max_bytes` of 0"),
            ("max_pixels = 0", "`max_pixels` of 0"),
            ("formats = []", "`formats` is empty"),
            ("timeout = \"0s\"", "would fail every request"),
            ("connect_timeout = \"0ms\"", "would fail every request"),
            ("concurrency = 0", "between 1 and 4096"),
            ("per_host = 0", "between 1 and 4096"),
            ("format = \"tar\"", "unknown output format `tar`"),
            ("shard_size = 0", "`shard_size` must be between 1"),
            (
                "near_duplicate_distance = 40",
                "`near_duplicate_distance` must be between 0 and 16",
            ),
            (
                "near_duplicates = \"drop\"",
                "needs `near_duplicate_distance`",
            ),
            (
                "near_duplicate_distance = 4\nnear_duplicates = \"all\"",
                "`keep` or `drop`",
            ),
        ];
        for (line, expected) in cases {
            let found = messages(&format!("[download]\n{line}\n"));
            assert!(
                found.len() == 1 && found[0].contains(expected),
                "{line}: {found:?}"
            );
        }
    }
}
