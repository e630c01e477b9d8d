//! (filled in by its feature's tests)
