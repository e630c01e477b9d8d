//! The profile as written: serde structures over TOML, with spans kept for diagnostics.
//!
//! Nothing here is checked beyond TOML types; `super::validate` turns a [`ProfileToml`] into a
//! [`super::Profile`]. Every table denies unknown keys so typos are reported, not ignored.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

/// A whole profile file, as deserialized.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileToml {
    pub name: Spanned<String>,
    pub start: Spanned<Vec<Spanned<String>>>,
    #[serde(default)]
    pub render: Option<Spanned<RenderToml>>,
    #[serde(default)]
    pub pagination: Option<PaginationToml>,
    #[serde(default)]
    pub images: Vec<ImageRuleToml>,
    #[serde(default)]
    pub api: Vec<ApiRuleToml>,
    #[serde(default)]
    pub browser: Option<BrowserToml>,
    #[serde(default)]
    pub filters: FiltersToml,
    #[serde(default)]
    pub download: DownloadToml,
}

/// `render = "static" | "browser" | "auto"`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RenderToml {
    Static,
    Browser,
    Auto,
}

/// `[pagination]`: one flat table whose `kind` says which other keys apply.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaginationToml {
    pub kind: Spanned<PaginationKindToml>,
    pub selector: Option<Spanned<String>>,
    pub attribute: Option<Spanned<String>>,
    pub template: Option<Spanned<String>>,
    pub start: Option<Spanned<i64>>,
    pub step: Option<Spanned<i64>>,
    pub stop: Option<Spanned<i64>>,
    pub max_pages: Option<Spanned<u64>>,
    pub request: Option<Spanned<String>>,
    pub method: Option<Spanned<MethodToml>>,
    pub body: Option<Spanned<String>>,
    pub headers: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
    pub cursor: Option<Spanned<String>>,
    pub cursor_param: Option<Spanned<String>>,
    pub has_more: Option<Spanned<String>>,
    pub after_id: Option<Spanned<String>>,
    pub order: Option<Spanned<OrderToml>>,
    pub expired_status: Option<Spanned<Vec<Spanned<u64>>>>,
    pub expired_match: Option<Spanned<String>>,
    pub stop_after_known: Option<Spanned<u64>>,
}

/// `method = "GET" | "POST"` for `kind = "json_cursor"`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "UPPERCASE")]
pub enum MethodToml {
    Get,
    Post,
}

/// `order = "ascending" | "descending"`: how an API lists its items by id.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum OrderToml {
    Ascending,
    Descending,
}

/// `kind = "none" | "next_link" | "url_template" | "json_cursor"`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PaginationKindToml {
    None,
    NextLink,
    UrlTemplate,
    JsonCursor,
}

/// One `[[images]]` rule.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageRuleToml {
    pub name: Option<Spanned<String>>,
    pub selector: Spanned<String>,
    pub attributes: Option<Spanned<Vec<Spanned<String>>>>,
    pub pick: Option<Spanned<PickToml>>,
    #[serde(default)]
    pub metadata: BTreeMap<String, Spanned<String>>,
}

/// `pick = "largest" | "all" | "first"`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PickToml {
    Largest,
    All,
    First,
}

/// `[filters]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FiltersToml {
    #[serde(default)]
    pub allow: Vec<Spanned<String>>,
    #[serde(default)]
    pub deny: Vec<Spanned<String>>,
    #[serde(default)]
    pub domains: Vec<Spanned<String>>,
    #[serde(default)]
    pub extensions: Vec<Spanned<String>>,
}

/// `[download]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DownloadToml {
    pub out: Option<Spanned<String>>,
    pub path: Option<Spanned<String>>,
    pub concurrency: Option<Spanned<u64>>,
    pub per_host: Option<Spanned<u64>>,
    pub connect_timeout: Option<Spanned<Quantity>>,
    pub timeout: Option<Spanned<Quantity>>,
    pub first_byte_timeout: Option<Spanned<Quantity>>,
    pub min_speed: Option<Spanned<Quantity>>,
    pub per_host_rps: Option<Spanned<f64>>,
    pub retries: Option<Spanned<u64>>,
    pub user_agent: Option<Spanned<String>>,
    #[serde(default)]
    pub headers: BTreeMap<String, Spanned<String>>,
    pub max_bytes: Option<Spanned<Quantity>>,
    pub formats: Option<Spanned<Vec<Spanned<String>>>>,
    pub min_width: Option<Spanned<u64>>,
    pub min_height: Option<Spanned<u64>>,
    pub max_pixels: Option<Spanned<u64>>,
}

/// A number or a string with a unit (`"30s"`, `"50MB"`), interpreted by the field.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Quantity {
    Number(u64),
    Text(String),
}

/// One `[[api]]` rule: JSON responses the page fetches, and where the images are in them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiRuleToml {
    pub name: Option<Spanned<String>>,
    pub url: Spanned<String>,
    pub items: Spanned<String>,
    pub image: Spanned<String>,
    pub id: Option<Spanned<String>>,
    #[serde(default)]
    pub metadata: BTreeMap<String, Spanned<String>>,
}

/// `[browser]`: how pages are rendered when `render` is `browser` or `auto`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrowserToml {
    pub executable: Option<Spanned<String>>,
    pub tabs: Option<Spanned<u64>>,
    pub recycle_after: Option<Spanned<u64>>,
    pub block_stylesheets: Option<bool>,
    pub page_timeout: Option<Spanned<Quantity>>,
    pub wait: Option<Spanned<WaitToml>>,
    pub wait_for: Option<Spanned<String>>,
    pub delay: Option<Spanned<Quantity>>,
    pub script: Option<Spanned<String>>,
    pub click: Option<Spanned<String>>,
    pub max_clicks: Option<Spanned<u64>>,
    pub scroll: Option<Spanned<u64>>,
    pub settle: Option<Spanned<Quantity>>,
}

/// `wait = "load" | "network_idle"`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum WaitToml {
    Load,
    NetworkIdle,
}
