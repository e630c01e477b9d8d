//! Image URLs in inline CSS (`style` attributes).
//!
//! This is part of the extract stage: given the value of an element's `style`
//! attribute, it finds the images set through `background-image` and
//! `background`. It is pure: no I/O, no URL resolution (the caller resolves the
//! returned URLs against the page's base URL), no global state.
//!
//! Rather than pattern-matching `url(...)`, the input is tokenized as the CSS
//! Syntax Module Level 3 specifies, so comments, quotes, escapes and
//! parentheses mean what they mean to a browser: a `url(` inside a comment or
//! inside another property's string is not an image, `url(a\).jpg)` is
//! `a).jpg`, and a `;` inside `url(data:image/png;base64,...)` does not end
//! the declaration.
//!
//! <https://www.w3.org/TR/css-syntax-3/#tokenization>

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
    let tokens = tokenize(style);
    let mut urls = Vec::new();
    let mut rest = tokens.as_slice();
    // "Parse a list of declarations": skip whitespace and stray semicolons; a
    // declaration starts with an identifier; anything else is a parse error
    // whose tokens are skipped up to the next top-level `;`.
    while let Some((first, tail)) = rest.split_first() {
        match first {
            Token::Whitespace | Token::Semicolon => rest = tail,
            Token::Ident(name) => {
                let (declaration, after) = split_at_top_level_semicolon(tail);
                if is_background_property(name)
                    && let Some(value) = declaration_value(declaration)
                {
                    collect_urls(value, &mut urls);
                }
                rest = after;
            }
            _ => rest = split_at_top_level_semicolon(rest).1,
        }
    }
    urls
}

fn is_background_property(name: &str) -> bool {
    name.eq_ignore_ascii_case("background-image") || name.eq_ignore_ascii_case("background")
}

/// The tokens of a declaration after its name: optional whitespace, then a
/// `:`, then the value. `None` when there is no colon (an invalid
/// declaration, which browsers ignore).
fn declaration_value(tokens: &[Token]) -> Option<&[Token]> {
    let start = tokens.iter().position(|t| *t != Token::Whitespace)?;
    match tokens.get(start) {
        Some(Token::Colon) => Some(&tokens[start + 1..]),
        _ => None,
    }
}

/// Splits `tokens` at the first `;` that is not nested inside a function or
/// a `()`, `[]` or `{}` block, dropping that `;`. A declaration's value is a
/// list of component values, so a `;` inside a block belongs to the value.
fn split_at_top_level_semicolon(tokens: &[Token]) -> (&[Token], &[Token]) {
    let mut open: Vec<char> = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        match token {
            Token::Semicolon if open.is_empty() => return (&tokens[..i], &tokens[i + 1..]),
            Token::Function(_) => open.push(')'),
            Token::Open(closer) => open.push(*closer),
            // A closer that does not match the innermost block is an ordinary
            // token inside it.
            Token::Close(closer) if open.last() == Some(closer) => {
                open.pop();
            }
            _ => {}
        }
    }
    (tokens, &[])
}

/// What encloses a token while walking a declaration value.
enum Frame {
    /// `url(` followed by a quoted string, which the tokenizer leaves as a
    /// function. Only its first string is the URL; later ones would be URL
    /// modifiers.
    Url { has_url: bool },
    /// `image-set(` or `-webkit-image-set(`, whose bare strings are URLs.
    ImageSet,
    /// Any other function or block, closed by the given character.
    Other(char),
}

impl Frame {
    fn closer(&self) -> char {
        match self {
            Frame::Url { .. } | Frame::ImageSet => ')',
            Frame::Other(closer) => *closer,
        }
    }
}

fn collect_urls(value: &[Token], urls: &mut Vec<String>) {
    let mut open: Vec<Frame> = Vec::new();
    for token in value {
        match token {
            // An unquoted `url(...)` is a single token wherever it appears,
            // including inside `image-set(...)`.
            Token::Url(url) => push_nonempty(urls, url),
            Token::Function(name) => open.push(if name.eq_ignore_ascii_case("url") {
                Frame::Url { has_url: false }
            } else if name.eq_ignore_ascii_case("image-set")
                || name.eq_ignore_ascii_case("-webkit-image-set")
            {
                Frame::ImageSet
            } else {
                Frame::Other(')')
            }),
            Token::Open(closer) => open.push(Frame::Other(*closer)),
            // As when splitting declarations, a mismatched closer is an
            // ordinary token.
            Token::Close(closer) if open.last().is_some_and(|frame| frame.closer() == *closer) => {
                open.pop();
            }
            Token::String(string) => match open.last_mut() {
                Some(Frame::Url { has_url }) if !*has_url => {
                    *has_url = true;
                    push_nonempty(urls, string);
                }
                // `image-set("a.png" 1x, "b.png" 2x)`: a string option is
                // a URL. Strings nested deeper, such as `type("image/avif")`,
                // are not.
                Some(Frame::ImageSet) => push_nonempty(urls, string),
                _ => {}
            },
            _ => {}
        }
    }
}

fn push_nonempty(urls: &mut Vec<String>, url: &str) {
    // A blank URL resolves to the document itself, never to an image.
    if !url.trim_matches(is_whitespace).is_empty() {
        urls.push(url.to_owned());
    }
}

/// The subset of CSS tokens this module needs to tell apart. Every other
/// token (numbers, hashes, delimiters, bad strings, bad URLs, ...) is `Other`.
#[derive(Debug, PartialEq)]
enum Token {
    Ident(String),
    /// A function name; the `(` is part of the token.
    Function(String),
    /// An unquoted `url(...)`, with escapes decoded.
    Url(String),
    /// A quoted string, with escapes decoded.
    String(String),
    Whitespace,
    Colon,
    Semicolon,
    /// `(`, `[` or `{`, holding the character that closes it.
    Open(char),
    /// `)`, `]` or `}`.
    Close(char),
    Other,
}

/// Tokenizes `input` per CSS Syntax Level 3, section 4.3.
fn tokenize(input: &str) -> Vec<Token> {
    let mut tokenizer = Tokenizer {
        chars: preprocess(input),
        pos: 0,
    };
    let mut tokens = Vec::new();
    while let Some(token) = tokenizer.next_token() {
        tokens.push(token);
    }
    tokens
}

/// Section 3.3, preprocessing the input stream: CR, FF and CRLF become LF,
/// and NUL becomes U+FFFD.
fn preprocess(input: &str) -> Vec<char> {
    let mut chars = Vec::with_capacity(input.len());
    let mut iter = input.chars().peekable();
    while let Some(c) = iter.next() {
        chars.push(match c {
            '\r' => {
                iter.next_if_eq(&'\n');
                '\n'
            }
            '\x0C' => '\n',
            '\0' => char::REPLACEMENT_CHARACTER,
            c => c,
        });
    }
    chars
}

/// CSS whitespace after preprocessing: LF, TAB, SPACE.
fn is_whitespace(c: char) -> bool {
    matches!(c, '\n' | '\t' | ' ')
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || !c.is_ascii()
}

fn is_ident_char(c: char) -> bool {
    is_ident_start(c) || c.is_ascii_digit() || c == '-'
}

fn is_non_printable(c: char) -> bool {
    matches!(c, '\0'..='\x08' | '\x0B' | '\x0E'..='\x1F' | '\x7F')
}

/// Section 4.3.8: `\` not followed by a newline starts an escape (even at the
/// end of input, where it decodes to U+FFFD).
fn is_valid_escape(first: Option<char>, second: Option<char>) -> bool {
    first == Some('\\') && second != Some('\n')
}

struct Tokenizer {
    chars: Vec<char>,
    pos: usize,
}

impl Tokenizer {
    fn peek(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek(0);
        if c.is_some() {
            self.pos += 1;
        }
        c
    }

    /// Section 4.3.9: whether the next three code points would start an
    /// ident sequence.
    fn starts_ident_sequence(&self, offset: usize) -> bool {
        match self.peek(offset) {
            Some('-') => match self.peek(offset + 1) {
                Some(c) if is_ident_start(c) || c == '-' => true,
                second => is_valid_escape(second, self.peek(offset + 2)),
            },
            Some(c) if is_ident_start(c) => true,
            first => is_valid_escape(first, self.peek(offset + 1)),
        }
    }

    /// Section 4.3.10: whether the next three code points would start a
    /// number.
    fn starts_number(&self) -> bool {
        let digit_at = |offset: usize| self.peek(offset).is_some_and(|c| c.is_ascii_digit());
        match self.peek(0) {
            Some('+' | '-') => digit_at(1) || (self.peek(1) == Some('.') && digit_at(2)),
            Some('.') => digit_at(1),
            Some(c) => c.is_ascii_digit(),
            None => false,
        }
    }

    /// Section 4.3.1, consume a token. Comments are consumed (and dropped)
    /// first, as the spec's "consume comments" step does.
    fn next_token(&mut self) -> Option<Token> {
        self.skip_comments();
        let c = self.bump()?;
        Some(match c {
            c if is_whitespace(c) => {
                while self.peek(0).is_some_and(is_whitespace) {
                    self.pos += 1;
                }
                Token::Whitespace
            }
            '"' | '\'' => self.consume_string(c),
            '(' => Token::Open(')'),
            '[' => Token::Open(']'),
            '{' => Token::Open('}'),
            ')' | ']' | '}' => Token::Close(c),
            ':' => Token::Colon,
            ';' => Token::Semicolon,
            '#' => {
                if self.peek(0).is_some_and(is_ident_char)
                    || is_valid_escape(self.peek(0), self.peek(1))
                {
                    self.consume_ident_sequence();
                }
                Token::Other
            }
            '+' | '.' => {
                self.pos -= 1;
                if self.starts_number() {
                    self.consume_numeric();
                } else {
                    self.pos += 1;
                }
                Token::Other
            }
            '-' => {
                self.pos -= 1;
                if self.starts_number() {
                    self.consume_numeric();
                    Token::Other
                } else if self.peek(1) == Some('-') && self.peek(2) == Some('>') {
                    // CDC `-->`.
                    self.pos += 3;
                    Token::Other
                } else if self.starts_ident_sequence(0) {
                    self.consume_ident_like()
                } else {
                    self.pos += 1;
                    Token::Other
                }
            }
            '@' => {
                // An at-keyword: its name is irrelevant here, but it must be
                // consumed whole so `@url(` is not taken for `url(`.
                if self.starts_ident_sequence(0) {
                    self.consume_ident_sequence();
                }
                Token::Other
            }
            '\\' if is_valid_escape(Some('\\'), self.peek(0)) => {
                self.pos -= 1;
                self.consume_ident_like()
            }
            c if c.is_ascii_digit() => {
                self.pos -= 1;
                self.consume_numeric();
                Token::Other
            }
            c if is_ident_start(c) => {
                self.pos -= 1;
                self.consume_ident_like()
            }
            // `<!--`, `,`, `<`, a lone `\` and other delimiters.
            _ => Token::Other,
        })
    }

    /// Section 4.3.2: comments run from `/*` to the next `*/` or the end.
    fn skip_comments(&mut self) {
        while self.peek(0) == Some('/') && self.peek(1) == Some('*') {
            self.pos += 2;
            loop {
                match self.bump() {
                    Some('*') if self.peek(0) == Some('/') => {
                        self.pos += 1;
                        break;
                    }
                    Some(_) => {}
                    None => return,
                }
            }
        }
    }

    /// Section 4.3.3, consume a numeric token. The value is irrelevant; what
    /// matters is consuming a dimension's unit, so `1url(` is a dimension
    /// followed by `(`, not a `url(`.
    fn consume_numeric(&mut self) {
        if matches!(self.peek(0), Some('+' | '-')) {
            self.pos += 1;
        }
        self.skip_digits();
        if self.peek(0) == Some('.') && self.peek(1).is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
            self.skip_digits();
        }
        if matches!(self.peek(0), Some('e' | 'E')) {
            let sign = usize::from(matches!(self.peek(1), Some('+' | '-')));
            if self.peek(1 + sign).is_some_and(|c| c.is_ascii_digit()) {
                self.pos += 1 + sign;
                self.skip_digits();
            }
        }
        if self.starts_ident_sequence(0) {
            self.consume_ident_sequence();
        } else if self.peek(0) == Some('%') {
            self.pos += 1;
        }
    }

    fn skip_digits(&mut self) {
        while self.peek(0).is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
    }

    /// Section 4.3.4, consume an ident-like token: an identifier, a function,
    /// or an unquoted URL.
    fn consume_ident_like(&mut self) -> Token {
        let name = self.consume_ident_sequence();
        if self.peek(0) != Some('(') {
            return Token::Ident(name);
        }
        self.pos += 1;
        if !name.eq_ignore_ascii_case("url") {
            return Token::Function(name);
        }
        // "While the next two input code points are whitespace, consume the
        // next input code point": at most one whitespace is left before a
        // quote, which makes `url( "a" )` a function holding a string.
        while self.peek(0).is_some_and(is_whitespace) && self.peek(1).is_some_and(is_whitespace) {
            self.pos += 1;
        }
        let quote_follows = match self.peek(0) {
            Some('"' | '\'') => true,
            Some(c) if is_whitespace(c) => matches!(self.peek(1), Some('"' | '\'')),
            _ => false,
        };
        if quote_follows {
            Token::Function(name)
        } else {
            self.consume_url()
        }
    }

    /// Section 4.3.6, consume a url token, after `url(`.
    fn consume_url(&mut self) -> Token {
        let mut url = String::new();
        while self.peek(0).is_some_and(is_whitespace) {
            self.pos += 1;
        }
        loop {
            match self.bump() {
                // An unclosed `url(` at the end of input is still a URL.
                Some(')') | None => return Token::Url(url),
                Some(c) if is_whitespace(c) => {
                    while self.peek(0).is_some_and(is_whitespace) {
                        self.pos += 1;
                    }
                    // Whitespace may only trail the URL.
                    if matches!(self.peek(0), Some(')') | None) {
                        self.bump();
                        return Token::Url(url);
                    }
                    self.consume_bad_url_remnants();
                    return Token::Other;
                }
                Some('\\') if is_valid_escape(Some('\\'), self.peek(0)) => {
                    url.push(self.consume_escape());
                }
                Some(c) if matches!(c, '"' | '\'' | '(' | '\\') || is_non_printable(c) => {
                    self.consume_bad_url_remnants();
                    return Token::Other;
                }
                Some(c) => url.push(c),
            }
        }
    }

    /// Section 4.3.14: skip to the `)` that ends a bad URL, honouring escapes
    /// so that `\)` does not end it.
    fn consume_bad_url_remnants(&mut self) {
        loop {
            match self.bump() {
                Some(')') | None => return,
                Some('\\') if is_valid_escape(Some('\\'), self.peek(0)) => {
                    self.consume_escape();
                }
                Some(_) => {}
            }
        }
    }

    /// Section 4.3.5, consume a string token, after its opening quote.
    fn consume_string(&mut self, quote: char) -> Token {
        let mut string = String::new();
        loop {
            match self.bump() {
                Some(c) if c == quote => return Token::String(string),
                // An unclosed string at the end of input is still a string.
                None => return Token::String(string),
                Some('\n') => {
                    // A raw newline makes a bad string; the newline is
                    // reconsumed as whitespace.
                    self.pos -= 1;
                    return Token::Other;
                }
                Some('\\') => match self.peek(0) {
                    None => {}
                    // An escaped newline is a line continuation.
                    Some('\n') => self.pos += 1,
                    Some(_) => string.push(self.consume_escape()),
                },
                Some(c) => string.push(c),
            }
        }
    }

    /// Section 4.3.11, consume an ident sequence.
    fn consume_ident_sequence(&mut self) -> String {
        let mut name = String::new();
        loop {
            match self.peek(0) {
                Some(c) if is_ident_char(c) => {
                    name.push(c);
                    self.pos += 1;
                }
                first if is_valid_escape(first, self.peek(1)) => {
                    self.pos += 1;
                    name.push(self.consume_escape());
                }
                _ => return name,
            }
        }
    }

    /// Section 4.3.7, consume an escaped code point, after the `\`: up to six
    /// hex digits and one optional whitespace, or any other single code
    /// point. Zero, surrogates, values past U+10FFFF and end of input give
    /// U+FFFD.
    fn consume_escape(&mut self) -> char {
        let Some(c) = self.bump() else {
            return char::REPLACEMENT_CHARACTER;
        };
        let Some(mut value) = c.to_digit(16) else {
            return c;
        };
        for _ in 1..6 {
            match self.peek(0).and_then(|c| c.to_digit(16)) {
                Some(digit) => {
                    value = value * 16 + digit;
                    self.pos += 1;
                }
                None => break,
            }
        }
        if self.peek(0).is_some_and(is_whitespace) {
            self.pos += 1;
        }
        match char::from_u32(value) {
            Some('\0') | None => char::REPLACEMENT_CHARACTER,
            Some(c) => c,
        }
    }
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

    #[test]
    fn tokens_cover_structure_characters() {
        assert_eq!(
            tokenize("a:b(c)[;]{}"),
            [
                Token::Ident("a".into()),
                Token::Colon,
                Token::Function("b".into()),
                Token::Ident("c".into()),
                Token::Close(')'),
                Token::Open(']'),
                Token::Semicolon,
                Token::Close(']'),
                Token::Open('}'),
                Token::Close('}'),
            ]
        );
    }
}
