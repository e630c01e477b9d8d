//! The pure half of record and replay: the HAR file format and the rules that decide which
//! recorded request answers a live one. The I/O crate's `replay` serves answers from them.

pub mod har;
pub mod matching;
