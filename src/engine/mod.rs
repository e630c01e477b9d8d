//! The engine: what every driver of a job does with a page, written once. A one-process run
//! (`crawl`, with the state writer) and a worker (`cluster`, with Redis) both take pages from
//! the one [`source`], analyse them with [`analyse`] and decide what each leads to with
//! [`page`], and read sitemaps with [`sitemap`]; they differ only in where they keep what was decided.

pub mod analyse;
pub mod page;
pub mod sitemap;
pub mod source;
pub mod stages;

pub use analyse::{ApiReply, analyse, api_images, read_api_reply};
pub use page::{
    Fetched, PagePlace, PageStep, PageYield, ends_on_missing, failure_record, merged,
    other_failure, page_step, revisited_levels,
};
