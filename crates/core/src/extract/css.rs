//! Image URLs in inline CSS (`style` attributes).
//!
//! This is part of the extract stage: given the value of an element's `style`
//! attribute, it finds the images set through `background-image` and
//! `background`. It is pure: no I/O, no URL resolution (the caller resolves the
//! returned URLs against the page's base URL), no global state.
//!
//! Rather than pattern-matching `url(...)`, the input is tokenized by
//! `cssparser` (the CSS Syntax Module Level 3 tokenizer that the HTML parser
//! already builds on), so comments, quotes, escapes and parentheses mean what
//! they mean to a browser: a `url(` inside a comment or inside another
//! property's string is not an image, `url(a\).jpg)` is `a).jpg`, and a `;`
//! inside `url(data:image/png;base64,...)` does not end the declaration.
//!
//! <https://www.w3.org/TR/css-syntax-3/#tokenization>

use cssparser::{Delimiter, ParseError, Parser, Token};

/// URLs from `background-image` and `background` declarations of an inline
/// style attribute (e.g. `background-image: url("a.jpg"), url(b.png)`), in
/// order; handles single/double/no quotes, CSS escapes (`\` sequences, hex
/// escapes), whitespace, `!important`, multiple layers,
/// `image-set(...)`/`-webkit-image-set(...)` (returns each url() or string
/// inside it), and ignores other properties and comments. Skips empty urls.
///
/// Every matching declaration contributes, not only the one that wins the
/// cascade: a crawler wants every image the page names. Property and function
/// names match ASCII case-insensitively, as in CSS. Returned URLs have their
/// CSS escapes decoded but are otherwise raw, not resolved.
pub fn background_image_urls(style: &str) -> Vec<String> {
    let mut parser = Parser::new(style);
    let mut urls = Vec::new();
    // "Parse a list of declarations": each runs up to the next top-level `;`
    // (one nested in a function or block belongs to the value). A declaration
    // that does not start with a name and a colon is a parse error, and its
    // tokens are skipped, as a browser does.
    while !parser.is_exhausted() {
        let _ = parser.parse_until_after(Delimiter::Semicolon, |p| {
            let name = p.expect_ident()?.clone();
            p.expect_colon()?;
            if is_background_property(&name) {
                collect_urls(p, Within::Value, &mut urls);
            }
            Ok::<(), ParseError<()>>(())
        });
    }
    urls
}

fn is_background_property(name: &str) -> bool {
    name.eq_ignore_ascii_case("background-image") || name.eq_ignore_ascii_case("background")
}

/// What encloses the tokens being walked.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Within {
    /// The declaration's value, or a function or block other than those below.
    Value,
    /// `image-set(` or `-webkit-image-set(`, whose bare strings are URLs.
    ImageSet,
}

/// Every URL in the component values `p` has left: `url(...)` in either
/// form, and the strings of an `image-set(...)`. Strings nested deeper, such
/// as `type("image/avif")` inside an image set, are not URLs.
fn collect_urls(p: &mut Parser<'_>, within: Within, urls: &mut Vec<String>) {
    while let Ok(token) = p.next() {
        let nested = match token.clone() {
            // An unquoted `url(...)` is a single token wherever it appears.
            Token::UnquotedUrl(url) => {
                push_nonempty(urls, &url);
                continue;
            }
            Token::QuotedString(string) if within == Within::ImageSet => {
                push_nonempty(urls, &string);
                continue;
            }
            // `url("a.jpg")`: only its first string is the URL; later ones
            // would be URL modifiers.
            Token::Function(name) if name.eq_ignore_ascii_case("url") => {
                let _ = p.parse_nested_block(|p| {
                    let url = p.expect_string()?.clone();
                    push_nonempty(urls, &url);
                    Ok::<(), ParseError<()>>(())
                });
                continue;
            }
            Token::Function(name)
                if name.eq_ignore_ascii_case("image-set")
                    || name.eq_ignore_ascii_case("-webkit-image-set") =>
            {
                Within::ImageSet
            }
            Token::Function(_)
            | Token::ParenthesisBlock
            | Token::SquareBracketBlock
            | Token::CurlyBracketBlock => Within::Value,
            _ => continue,
        };
        let _ = p.parse_nested_block(|p| {
            collect_urls(p, nested, urls);
            Ok::<(), ParseError<()>>(())
        });
    }
}

fn push_nonempty(urls: &mut Vec<String>, url: &str) {
    // A blank URL resolves to the document itself, never to an image.
    if !url.trim_matches(is_whitespace).is_empty() {
        urls.push(url.to_owned());
    }
}

/// CSS whitespace: space, tab, line feed, carriage return, form feed.
fn is_whitespace(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0C')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The project's own table of named cases: (name, style, expected URLs).
    #[test]
    fn named_cases() {
        let cases: &[(&str, &str, &[&str])] = &[
            (
                "quoted_and_unquoted_urls",
                r#"background-image: url("a.jpg"), url('b.png'), url(c.gif)"#,
                &["a.jpg", "b.png", "c.gif"],
            ),
            (
                "shorthand_background",
                "background: #fff url(hero.webp) no-repeat center / cover",
                &["hero.webp"],
            ),
            (
                "ignores_other_properties",
                r#"color: red; content: "url(x.jpg)"; list-style-image: url(bullet.png); --bg: url(var.png); border-image: url(b.png) 30"#,
                &[],
            ),
            (
                "ignores_comments",
                "/* background: url(no.jpg) */ background-image: /* url(nope.png) */ url(yes.png)",
                &["yes.png"],
            ),
            (
                "whitespace_inside_url",
                "background-image: url(  a.jpg  ), url(\n\"b.jpg\"\t)",
                &["a.jpg", "b.jpg"],
            ),
            (
                "important_and_case_insensitive_names",
                "BACKGROUND-IMAGE: URL(a.jpg) !important; Background: Url('b.jpg')!IMPORTANT",
                &["a.jpg", "b.jpg"],
            ),
            (
                "multiple_declarations_in_order",
                "background: url(1.jpg); margin: 0; background-image: url(2.jpg);",
                &["1.jpg", "2.jpg"],
            ),
            (
                "image_set_lists_every_candidate",
                r#"background-image: image-set("a.png" 1x, url(b.png) 2x, 'c.avif' type("image/avif"))"#,
                &["a.png", "b.png", "c.avif"],
            ),
            (
                "webkit_image_set_and_quoted_url_inside",
                r#"background-image: -webkit-image-set(url("a.png") 1x, url(b.png) 2x)"#,
                &["a.png", "b.png"],
            ),
            (
                "backslash_escapes_are_decoded",
                r#"background-image: url(a\).jpg), url("b\"q.jpg"), url('c\\d.jpg')"#,
                &["a).jpg", "b\"q.jpg", "c\\d.jpg"],
            ),
            (
                "hex_escapes_are_decoded",
                r#"background-image: url(caf\e9 .jpg), url("\41 \42.png"), url(\0 x.png)"#,
                &["café.jpg", "AB.png", "\u{FFFD}x.png"],
            ),
            (
                "escaped_property_name_still_matches",
                r"backgr\6f und-image: url(a.jpg)",
                &["a.jpg"],
            ),
            (
                "skips_empty_urls",
                r#"background-image: url(), url(""), url(' '), url(a.jpg)"#,
                &["a.jpg"],
            ),
            (
                "semicolon_inside_data_url_does_not_end_declaration",
                "background: url(data:image/png;base64,AAAA) repeat-x; color: red",
                &["data:image/png;base64,AAAA"],
            ),
            (
                "semicolon_inside_quoted_url",
                r#"background: url("a;b.jpg"), url(c.jpg)"#,
                &["a;b.jpg", "c.jpg"],
            ),
            (
                "bad_url_is_skipped",
                r#"background-image: url(a b.jpg), url(c"d.jpg), url(e.jpg)"#,
                &["e.jpg"],
            ),
            (
                "gradients_are_not_urls",
                "background-image: linear-gradient(to right, red, blue), url(over.png)",
                &["over.png"],
            ),
            (
                "invalid_declarations_are_skipped",
                "background url(no-colon.jpg); 1px: url(no.jpg); background-image: url(ok.jpg)",
                &["ok.jpg"],
            ),
            (
                "unclosed_url_at_end_of_input",
                "background-image: url(a.jpg",
                &["a.jpg"],
            ),
            (
                "dimension_is_not_a_url_function",
                "background: 1url(a.jpg)",
                &[],
            ),
            ("empty_style", "", &[]),
        ];

        let mut failures = Vec::new();
        for (name, style, expected) in cases {
            let got = background_image_urls(style);
            if got != *expected {
                failures.push(format!(
                    "{name}: {style:?}\n  got      {got:?}\n  expected {expected:?}"
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn quoted_and_unquoted_urls() {
        assert_eq!(
            background_image_urls(r#"background-image: url("a.jpg"), url(b.png)"#),
            ["a.jpg", "b.png"]
        );
    }

    #[test]
    fn ignores_other_properties() {
        assert!(
            background_image_urls("mask-image: url(m.png); cursor: url(c.cur), auto").is_empty()
        );
    }

    #[test]
    fn image_set_lists_every_candidate() {
        assert_eq!(
            background_image_urls(r#"background-image: image-set("lo.jpg" 1x, "hi.jpg" 2x)"#),
            ["lo.jpg", "hi.jpg"]
        );
    }

    #[test]
    fn carriage_returns_and_form_feeds_are_whitespace() {
        assert_eq!(
            background_image_urls("background-image:\r\nurl(\x0Ca.jpg\r)"),
            ["a.jpg"]
        );
    }
}
