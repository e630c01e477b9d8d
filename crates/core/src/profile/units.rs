//! Durations (`"30s"`, `"1m30s"`, `"500ms"`) and byte sizes (`"50MB"`, `"2 GiB"`) in profiles.

use std::time::Duration;

/// The longest duration a profile or flag may give: a year. Longer ones are mistakes, and
/// would overflow the clock when added to the time now.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// The value of `all` whose name is `name`, or an error naming them all (`what`: "resize
/// mode" gives "unknown resize mode `x`; known modes: ..."): how every profile key that takes a
/// name from a fixed set reads it.
pub fn one_of<T: Copy, const N: usize>(
    name: &str,
    all: [T; N],
    name_of: fn(T) -> &'static str,
    what: &str,
) -> Result<T, String> {
    all.into_iter()
        .find(|v| name_of(*v) == name)
        .ok_or_else(|| {
            let names: Vec<_> = all.into_iter().map(name_of).collect();
            let kind = what.rsplit(' ').next().unwrap_or(what);
            format!(
                "unknown {what} `{name}`; known {kind}s: {}",
                names.join(", ")
            )
        })
}

/// Parses `"500ms"`, `"30s"`, `"5m"`, `"1h"`, or a sum like `"1m30s"`, up to [`MAX_DURATION`].
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration".into());
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("`{text}` has no unit (use ms, s, m or h)"))?;
        let (number, after) = rest.split_at(digits);
        let unit_len = after
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let value: f64 = number
            .parse()
            .map_err(|_| format!("`{text}` is not a duration"))?;
        let seconds = match unit.trim() {
            "ms" => value / 1000.0,
            "s" => value,
            "m" | "min" => value * 60.0,
            "h" => value * 3600.0,
            other => {
                return Err(format!(
                    "unknown duration unit `{other}` (use ms, s, m or h)"
                ));
            }
        };
        total = Duration::try_from_secs_f64(seconds)
            .ok()
            .and_then(|d| total.checked_add(d))
            .filter(|d| *d <= MAX_DURATION)
            .ok_or_else(|| {
                format!(
                    "`{text}` is longer than {}h, the longest duration allowed",
                    MAX_DURATION.as_secs() / 3600
                )
            })?;
        rest = next;
    }
    Ok(total)
}

/// Parses `"50MB"`, `"512 KiB"`, `"1GB"` or a plain number of bytes.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size"))?;
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        other => {
            return Err(format!(
                "unknown size unit `{other}` (use B, KB, MB, GB, KiB, MiB, GiB)"
            ));
        }
    };
    Ok((value * factor as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_accept_units_and_sums() {
        let cases = [
            ("500ms", Duration::from_millis(500)),
            ("30s", Duration::from_secs(30)),
            ("1m30s", Duration::from_secs(90)),
            ("2h", Duration::from_secs(7200)),
            ("1.5s", Duration::from_millis(1500)),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_duration(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn durations_without_unit_are_rejected() {
        assert!(parse_duration("30").unwrap_err().contains("no unit"));
        assert!(
            parse_duration("3 fortnights")
                .unwrap_err()
                .contains("unknown duration unit")
        );
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn durations_too_long_for_a_clock_are_refused() {
        for text in [
            "99999999999999999999999h",
            "10000000000000000000s10000000000000000000s",
            "18446744073709551615s",
            "8761h",
        ] {
            let error = parse_duration(text).unwrap_err();
            assert!(error.contains("longest duration"), "{text}: {error}");
        }
        assert_eq!(parse_duration("8760h"), Ok(MAX_DURATION));
    }

    #[test]
    fn sizes_accept_decimal_and_binary_units() {
        let cases = [
            ("50MB", 50_000_000),
            ("512 KiB", 524_288),
            ("1GiB", 1 << 30),
            ("123", 123),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_bytes(text), Ok(expected), "{text}");
        }
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("5 parsecs").is_err());
    }
}
