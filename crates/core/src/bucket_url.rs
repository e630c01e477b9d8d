//! `s3://BUCKET/PREFIX`: an output in object storage, as a profile's `[download] out` or
//! `--out` names it, checked before anything runs.

use std::path::Path;

/// The scheme of an output in object storage.
pub const SCHEME: &str = "s3://";

/// `s3://bucket/prefix`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketUrl {
    pub bucket: String,
    /// Without slashes at either end; empty for the whole bucket.
    pub prefix: String,
}

impl BucketUrl {
    /// The bucket `out` names, if it is a bucket URL (`Err`: why it is not a valid one).
    pub fn of(out: &Path) -> Option<Result<Self, String>> {
        out.to_str()
            .filter(|text| text.starts_with(SCHEME))
            .map(Self::parse)
    }

    /// `text` as a bucket URL, or why it is not one.
    pub fn parse(text: &str) -> Result<Self, String> {
        let rest = text
            .strip_prefix(SCHEME)
            .ok_or_else(|| "it does not start with s3://".to_owned())?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let named = (3..=63).contains(&bucket.len())
            && bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
            && !bucket.starts_with(['.', '-'])
            && !bucket.ends_with(['.', '-']);
        if !named {
            return Err(
                "a bucket name is 3 to 63 lowercase letters, digits, dots and hyphens".to_owned(),
            );
        }
        let prefix = prefix.trim_end_matches('/');
        if !prefix.is_empty()
            && prefix
                .split('/')
                .any(|part| part.is_empty() || part == "." || part == "..")
        {
            return Err("the prefix has an empty, `.` or `..` part".to_owned());
        }
        Ok(Self {
            bucket: bucket.to_owned(),
            prefix: prefix.to_owned(),
        })
    }
}

impl std::fmt::Display for BucketUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{SCHEME}{}", self.bucket)?;
        if !self.prefix.is_empty() {
            write!(f, "/{}", self.prefix)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_urls_are_checked() {
        let url = BucketUrl::parse("s3://my-bucket/a/b/").unwrap();
        assert_eq!(url.bucket, "my-bucket");
        assert_eq!(url.prefix, "a/b");
        assert_eq!(url.to_string(), "s3://my-bucket/a/b");
        let whole = BucketUrl::parse("s3://bkt").unwrap();
        assert_eq!(
            (whole.prefix.as_str(), whole.to_string().as_str()),
            ("", "s3://bkt")
        );
        for bad in [
            "s3://",
            "s3://ab",
            "s3://Upper",
            "s3://b_x/p",
            "s3://bkt/a//b",
            "s3://bkt/../x",
            "s3://-bkt",
        ] {
            assert!(BucketUrl::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(BucketUrl::of(Path::new("out/images")), None);
        assert!(BucketUrl::of(Path::new("s3://x")).is_some_and(|r| r.is_err()));
    }
}
