//! The pure core of `scrape`: everything that turns input into decisions without touching the
//! network, a database or a browser. The I/O crate (`scrape`) sits on top of it.
//!
//! - [`profile`]: TOML site profiles, checked, with `file:line:col` diagnostics
//! - [`bucket_url`]: `s3://BUCKET/PREFIX`, an output in object storage
//! - [`page`]: a fetched or rendered page as the pure stages see it
//! - [`extract`]: image URLs from a page by the profile's rules (DOM, srcset, CSS, JSONPath)
//! - [`paginate`]: the next page of a chain; [`analyze`] runs a page through both
//! - [`fate`]: what a verified image comes to (stored, duplicate, near-duplicate dropped)
//! - [`form`]: sign-in forms filled as a browser fills them, and whether a sign-in worked
//! - [`failure`]: failure classes, by the names the state and `failures.jsonl` keep
//! - [`phash`]: perceptual hashes, their distance and the bands a near-duplicate search uses
//! - [`verify`]: is a body really an image, and how big is it (magic bytes and header)
//! - [`picture`]: a picture's bytes made safe to decode (inflating PNG chunks, cut-off JPEGs)
//! - [`draft`]: a first profile for a new site, drafted from its pages
//! - [`replay`]: the HAR format and which recorded request answers a request
//! - [`proxy`]: proxy endpoints and their rotation
//! - [`robots`]: robots.txt (RFC 9309) and the opt-out signals of pages and images
//! - [`sitemap`]: sitemap files (sitemaps.org, with the image extension): the pages they list
//! - [`wall`]: sign-in walls and bot challenges told from pages
//! - [`redact`]: secrets out of URLs before they are shown (a leaf: imports nothing of the crate)

pub mod analyze;
pub mod bucket_url;
pub mod draft;
pub mod embedded;
pub mod extract;
pub mod failure;
pub mod fate;
pub mod form;
#[doc(hidden)]
pub mod fuzz;
pub mod page;
pub mod paginate;
pub mod phash;
pub mod picture;
pub mod profile;
pub mod proxy;
pub mod redact;
pub mod replay;
pub mod robots;
pub mod sitemap;
pub mod verify;
pub mod wall;
