//! Failure classes: why a request or an image gave no usable result, by the stable names kept
//! in the state, `failures.jsonl` and the summary; and an error's causes as one line. Pure:
//! the state records classes without knowing the network edge that found them.

/// Why a request did not give a usable result; kept distinct in state, failures and summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureClass {
    Http(u16),
    Timeout,
    Connect,
    Dns,
    Reset,
    Redirect,
    Truncated,
    NotAnImage,
    TooLarge,
    TooSmall,
    /// The header checked out but the picture does not decode (found when it is resized).
    Undecodable,
    Disk,
    /// robots.txt disallows the page or API request.
    Robots,
    /// The response opts its content out (`X-Robots-Tag: noai`, ...).
    OptedOut,
    /// The browser rendering the page passed its memory limit (`[browser] memory_limit`).
    Memory,
    /// The site answered with a sign-in wall: the session is missing or has ended.
    LoginRequired,
    /// The site answered with a bot challenge.
    Blocked,
    Other,
}

impl FailureClass {
    /// The stable name stored in state and `failures.jsonl`: `http_404`, `timeout`, ...
    pub fn name(self) -> String {
        match self {
            Self::Http(code) => format!("http_{code}"),
            Self::Timeout => "timeout".into(),
            Self::Connect => "connect".into(),
            Self::Dns => "dns".into(),
            Self::Reset => "reset".into(),
            Self::Redirect => "redirect".into(),
            Self::Truncated => "truncated".into(),
            Self::NotAnImage => "not_an_image".into(),
            Self::TooLarge => "too_large".into(),
            Self::TooSmall => "too_small".into(),
            Self::Undecodable => "undecodable".into(),
            Self::Disk => "disk".into(),
            Self::Robots => "robots".into(),
            Self::OptedOut => "opted_out".into(),
            Self::Memory => "memory".into(),
            Self::LoginRequired => "login_required".into(),
            Self::Blocked => "blocked".into(),
            Self::Other => "other".into(),
        }
    }

    /// Whether trying again later may succeed (time-outs, resets, 429, 5xx).
    pub fn is_transient(self) -> bool {
        match self {
            Self::Http(code) => matches!(code, 408 | 425 | 429 | 500..=599),
            Self::Timeout | Self::Connect | Self::Reset | Self::Truncated => true,
            Self::Dns
            | Self::Redirect
            | Self::NotAnImage
            | Self::TooLarge
            | Self::TooSmall
            | Self::Undecodable
            | Self::Disk
            | Self::Robots
            | Self::OptedOut
            | Self::Memory
            | Self::LoginRequired
            | Self::Blocked
            | Self::Other => false,
        }
    }
}

/// `error` and its sources, joined with `: `, each cause once. URLs in the text are left as
/// they are: [`classify`] removes a reqwest error's credentials.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![error.to_string()];
    let mut source = error.source();
    while let Some(e) = source {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = e.source();
    }
    parts.join(": ")
}
