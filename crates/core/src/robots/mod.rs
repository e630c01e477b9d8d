//! What a site allows a crawler to do: robots.txt rules for pages and API requests, and the
//! opt-out signals on pages and images. Pure: the I/O crate fetches robots.txt and headers and
//! asks these modules what they mean.
//!
//! - [`txt`]: robots.txt (RFC 9309): groups, longest match, `*` and `$`, `Crawl-delay`
//! - [`opt_out`]: `X-Robots-Tag` and `<meta name="robots">` directives such as `noai`
//! - [`tdmrep`]: TDMRep's `/.well-known/tdmrep.json` rules

pub mod opt_out;
pub mod tdmrep;
pub mod txt;

pub use opt_out::{
    OptOutSource, PageOptOut, header_opt_out, may_opt_out, meta_opt_out, page_opt_out,
};
pub use tdmrep::{MAX_TDMREP_BYTES, Reservation, TDMREP_PATH, TdmRep};
pub use txt::{AgentRules, MAX_ROBOTS_BYTES, RobotsTxt, product_token};
