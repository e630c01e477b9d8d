//! The checks a profile key shares with the command-line flag that overrides it: one function
//! per kind of value, so a flag accepts exactly what the key accepts and refuses the rest with
//! the same message. The profile adds the key's `file:line:col`, a flag its name.

use std::time::Duration;

use super::parse_duration;

/// The most downloads in flight, in all or per host.
pub const MAX_DOWNLOADS_IN_FLIGHT: u64 = 4096;
/// The most pages in flight, in all or per host.
pub const MAX_PAGES_IN_FLIGHT: u64 = 1024;
/// The most attempts after the first.
pub const MAX_RETRIES: u64 = 100;
/// The slowest pace per host: one request every 1,000 seconds. Slower ones are mistakes, and
/// their intervals do not fit a clock.
pub const MIN_PER_HOST_RPS: f64 = 0.001;

/// A count of things in flight: from 1 to `max`.
pub fn count(key: &str, value: u64, max: u64) -> Result<u64, String> {
    if (1..=max).contains(&value) {
        Ok(value)
    } else {
        Err(format!("`{key}` must be between 1 and {max}, not {value}"))
    }
}

/// Attempts after the first: at most [`MAX_RETRIES`].
pub fn retries(value: u64) -> Result<u32, String> {
    match u32::try_from(value) {
        Ok(n) if value <= MAX_RETRIES => Ok(n),
        _ => Err(format!(
            "`retries` must be at most {MAX_RETRIES}, not {value}"
        )),
    }
}

/// Request starts per second per host: a number of at least [`MIN_PER_HOST_RPS`].
pub fn per_host_rps(value: f64) -> Result<f64, String> {
    if value.is_finite() && value >= MIN_PER_HOST_RPS {
        Ok(value)
    } else {
        Err(format!(
            "`per_host_rps` must be a positive number of at least {MIN_PER_HOST_RPS}, not {value}"
        ))
    }
}

/// A timeout: a duration with a unit, longer than zero.
pub fn timeout(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        d if d.is_zero() => Err(format!("a timeout of `{text}` would fail every request")),
        d => Ok(d),
    }
}

/// A time a page is given (`[browser] page_timeout`, `settle`): a duration longer than zero.
pub fn page_time(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        d if d.is_zero() => Err("a duration of zero would end every page at once".to_owned()),
        d => Ok(d),
    }
}

/// A CSS selector, as every selector key (`selector`, `wait_for`, `click`) takes it.
pub fn css_selector(text: &str) -> Result<scraper::Selector, String> {
    scraper::Selector::parse(text).map_err(|e| format!("invalid CSS selector `{text}`: {e}"))
}

/// An interval between two events (progress lines): a duration longer than zero.
pub fn interval(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        d if d.is_zero() => Err(format!("an interval of `{text}` never ends")),
        d => Ok(d),
    }
}

/// A size limit that would otherwise reject everything: above zero.
pub fn above_zero(key: &str, value: u64) -> Result<u64, String> {
    if value == 0 {
        Err(format!("`{key}` of 0 would reject every image"))
    } else {
        Ok(value)
    }
}

/// A request header: a token for a name (RFC 9110), a value without control characters
/// (a CR or LF would end the header early, or start another one).
pub fn header(name: &str, value: &str) -> Result<(), String> {
    let name_ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    let value_ok = value
        .bytes()
        .all(|b| b == b'\t' || (b' '..=b'~').contains(&b) || b >= 0x80);
    if name_ok && value_ok {
        Ok(())
    } else {
        Err(format!("header `{name}` has an invalid name or value"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_outside_their_range_are_refused_with_the_range() {
        assert_eq!(count("concurrency", 8, 4096), Ok(8));
        for bad in [0, 4097, u64::MAX] {
            let error = count("concurrency", bad, 4096).unwrap_err();
            assert!(error.contains("between 1 and 4096"), "{error}");
        }
    }

    #[test]
    fn a_pace_too_slow_for_a_clock_is_refused() {
        assert_eq!(per_host_rps(0.5), Ok(0.5));
        for bad in [0.0, -1.0, 1e-19, 1e-300, f64::NAN, f64::INFINITY] {
            assert!(per_host_rps(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn zero_timeouts_and_intervals_are_refused() {
        assert!(timeout("0s").unwrap_err().contains("fail every request"));
        assert!(interval("0s").unwrap_err().contains("never ends"));
        assert_eq!(interval("2s"), Ok(Duration::from_secs(2)));
    }

    #[test]
    fn a_header_value_with_a_line_break_is_refused() {
        assert!(header("X-Custom", "a").is_ok());
        assert!(header("X-Custom", "a\r\nInjected: 1").is_err());
        assert!(header("Bad Name", "a").is_err());
        assert!(header("", "a").is_err());
    }

    #[test]
    fn retries_over_the_maximum_are_refused() {
        assert_eq!(retries(100), Ok(100));
        assert!(retries(101).is_err());
        assert!(retries(u64::MAX).is_err());
    }
}
