//! A shield for calls into redb that can panic on a damaged file.
//!
//! redb checks a page's checksum only when asked, and decodes some bytes it trusts with
//! `unwrap`: a flipped bit in a file that was closed cleanly can panic inside
//! `Database::open` itself. Such a panic, caught here, becomes [`StateError::Unreadable`]
//! (damage: the user is told about `--fresh`), and its message is kept out of the terminal.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

use super::StateError;

thread_local! {
    /// Set while this thread runs a shielded call: its panics are reported as errors.
    static SHIELDED: Cell<bool> = const { Cell::new(false) };
}

/// Runs `call`; a panic inside it is [`StateError::Unreadable`] naming `path`.
pub(super) fn shielded<T>(
    path: &std::path::Path,
    call: impl FnOnce() -> Result<T, StateError>,
) -> Result<T, StateError> {
    install_hook();
    let was = SHIELDED.replace(true);
    let result = catch_unwind(AssertUnwindSafe(call));
    SHIELDED.set(was);
    result.unwrap_or_else(|payload| {
        Err(StateError::Unreadable {
            path: path.to_owned(),
            detail: panic_message(payload),
        })
    })
}

/// The text of a panic's payload (`panic!` with a literal or a formatted message).
pub fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned())
}

/// Wraps the panic hook once, so that a shielded panic prints nothing: it is an error the
/// caller reports.
fn install_hook() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !SHIELDED.get() {
                previous(info);
            }
        }));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_inside_a_shielded_call_is_an_unreadable_state() {
        let error = shielded::<()>(std::path::Path::new("state.redb"), || {
            panic!("slice index starts at 2309 but ends at 309")
        })
        .unwrap_err();
        assert!(error.is_damage());
        let message = error.to_string();
        assert!(message.contains("`state.redb`"), "{message}");
        assert!(message.contains("2309"), "{message}");
        assert_eq!(shielded(std::path::Path::new("x"), || Ok(7)).unwrap(), 7);
    }
}
