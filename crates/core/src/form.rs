//! Sign-in forms: what a browser submits when a person fills a form's fields and presses its
//! button (the form's hidden fields, a CSRF token among them, go along), and whether the page
//! that came back says the sign-in worked. Pure: the session's sign-in sends and reads.

use url::Url;

use crate::profile::LoginSuccess;

/// How a form is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormMethod {
    /// The fields in the query.
    Get,
    /// The fields as an `application/x-www-form-urlencoded` body.
    Post,
}

/// A filled form, ready to be sent.
#[derive(Clone, PartialEq, Eq)]
pub struct Submission {
    pub method: FormMethod,
    pub action: Url,
    /// Name and value of every field sent, in the form's order; the filled ones are secrets.
    pub fields: Vec<(String, String)>,
}

impl std::fmt::Debug for Submission {
    /// Field names only: their values may be passwords.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.fields.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Submission")
            .field("method", &self.method)
            .field("action", &self.action.as_str())
            .field("fields", &names)
            .finish()
    }
}

/// The submission of the form on `page` (at `url`) that `form` selects, or else the first
/// form holding a field of every name in `fill`, with those fields set to their values.
pub fn fill_form(
    url: &Url,
    page: &scraper::Html,
    form: Option<&scraper::Selector>,
    fill: &[(String, String)],
) -> Result<Submission, String> {
    static FORM: std::sync::LazyLock<scraper::Selector> =
        std::sync::LazyLock::new(|| scraper::Selector::parse("form").expect("valid selector"));
    static CONTROLS: std::sync::LazyLock<scraper::Selector> = std::sync::LazyLock::new(|| {
        scraper::Selector::parse("input, textarea, select, button").expect("valid selector")
    });
    let wanted: Vec<&str> = fill.iter().map(|(n, _)| n.as_str()).collect();
    let names_in = |element: scraper::ElementRef| -> Vec<String> {
        element
            .select(&CONTROLS)
            .filter_map(|c| c.value().attr("name").map(str::to_owned))
            .collect()
    };
    let chosen = page.select(form.unwrap_or(&FORM)).find(|candidate| {
        let names = names_in(*candidate);
        wanted.iter().all(|w| names.iter().any(|n| n == w))
    });
    let Some(chosen) = chosen else {
        let forms: Vec<String> = page
            .select(&FORM)
            .map(|f| format!("[{}]", names_in(f).join(", ")))
            .collect();
        return Err(format!(
            "no form on `{url}` has fields named {}; its forms have {}",
            wanted
                .iter()
                .map(|w| format!("`{w}`"))
                .collect::<Vec<_>>()
                .join(", "),
            if forms.is_empty() {
                "none: the page has no form".to_owned()
            } else {
                forms.join(" and ")
            }
        ));
    };
    let mut fields: Vec<(String, String)> = Vec::new();
    let mut submit_taken = false;
    for control in chosen.select(&CONTROLS) {
        let element = control.value();
        let Some(name) = element.attr("name") else {
            continue;
        };
        if element.attr("disabled").is_some() {
            continue;
        }
        let kind = element
            .attr("type")
            .unwrap_or(if element.name() == "button" {
                "submit"
            } else {
                "text"
            })
            .to_ascii_lowercase();
        let value = match (element.name(), kind.as_str()) {
            ("textarea", _) => control.text().collect(),
            ("select", _) => selected_option(control),
            // The first submit control with a name is the one pressed.
            (_, "submit") if !submit_taken => {
                submit_taken = true;
                element.attr("value").unwrap_or_default().to_owned()
            }
            (_, "submit" | "button" | "reset" | "image" | "file") => continue,
            (_, "checkbox" | "radio") if element.attr("checked").is_none() => continue,
            (_, "checkbox" | "radio") => element.attr("value").unwrap_or("on").to_owned(),
            _ => element.attr("value").unwrap_or_default().to_owned(),
        };
        fields.push((name.to_owned(), value));
    }
    for (name, value) in fill {
        match fields.iter_mut().find(|(n, _)| n == name) {
            Some(field) => field.1 = value.clone(),
            None => fields.push((name.clone(), value.clone())),
        }
    }
    let action = match chosen.value().attr("action").map(str::trim) {
        None | Some("") => url.clone(),
        Some(action) => url
            .join(action)
            .map_err(|_| format!("the form's action `{action}` is not a URL"))?,
    };
    let method = match chosen.value().attr("method") {
        Some(m) if m.eq_ignore_ascii_case("post") => FormMethod::Post,
        _ => FormMethod::Get,
    };
    Ok(Submission {
        method,
        action,
        fields,
    })
}

fn selected_option(select: scraper::ElementRef) -> String {
    static OPTION: std::sync::LazyLock<scraper::Selector> =
        std::sync::LazyLock::new(|| scraper::Selector::parse("option").expect("valid selector"));
    let options: Vec<scraper::ElementRef> = select.select(&OPTION).collect();
    options
        .iter()
        .find(|o| o.value().attr("selected").is_some())
        .or(options.first())
        .map(|o| {
            o.value()
                .attr("value")
                .map_or_else(|| o.text().collect(), str::to_owned)
        })
        .unwrap_or_default()
}

/// Whether the page that came back from a sign-in, at `landed`, says it worked: by what
/// `success` names (every one given must hold; `has_cookie` says whether the cookie it names
/// was set), or else by not being a sign-in page itself. `Err` says why not.
pub fn signed_in(
    success: &LoginSuccess,
    landed: &Url,
    page: &scraper::Html,
    has_cookie: bool,
) -> Result<(), String> {
    if let Some(cookie) = &success.cookie
        && !has_cookie
    {
        return Err(format!("no cookie `{cookie}` was set"));
    }
    if let Some(selector) = &success.selector
        && page.select(&selector.selector).next().is_none()
    {
        return Err(format!(
            "the page it led to (`{landed}`) does not show `{}`",
            selector.text
        ));
    }
    if let Some(part) = &success.url
        && !landed.as_str().contains(part.as_str())
    {
        return Err(format!("it led to `{landed}`, not to a URL with `{part}`"));
    }
    let named = success.cookie.is_some() || success.selector.is_some() || success.url.is_some();
    if !named {
        static PASSWORD: std::sync::LazyLock<scraper::Selector> = std::sync::LazyLock::new(|| {
            scraper::Selector::parse("input[type=password i]").expect("valid selector")
        });
        if page.select(&PASSWORD).next().is_some() {
            return Err(format!(
                "it led to `{landed}`, which asks for a password again"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::CssRule;

    const PAGE: &str = r#"<form id="search" action="/search"><input name="q"></form>
<form method="POST" action="session?x=1">
  <input type="hidden" name="csrf" value="c0ffee">
  <input name="user" value="guest">
  <input type="password" name="password">
  <input type="checkbox" name="remember" checked>
  <input type="checkbox" name="newsletter" value="yes">
  <select name="lang"><option value="en">English</option><option value="fr" selected>French</option></select>
  <textarea name="note">hi</textarea>
  <input name="off" value="x" disabled>
  <button name="go" value="1">Sign in</button>
  <button name="other" value="2">Other</button>
</form>"#;

    fn fill(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_form_with_the_fields_is_filled_and_keeps_its_hidden_ones() {
        let url = Url::parse("http://a.test/members/login?next=/p/3").unwrap();
        let page = scraper::Html::parse_document(PAGE);
        let filled = fill_form(
            &url,
            &page,
            None,
            &fill(&[("user", "ana"), ("password", "s3cret")]),
        )
        .unwrap();
        assert_eq!(filled.method, FormMethod::Post);
        assert_eq!(filled.action.as_str(), "http://a.test/members/session?x=1");
        assert_eq!(
            filled.fields,
            fill(&[
                ("csrf", "c0ffee"),
                ("user", "ana"),
                ("password", "s3cret"),
                ("remember", "on"),
                ("lang", "fr"),
                ("note", "hi"),
                ("go", "1"),
            ])
        );
        assert!(!format!("{filled:?}").contains("s3cret"));
    }

    #[test]
    fn a_page_without_the_fields_names_the_forms_it_has() {
        let url = Url::parse("http://a.test/login").unwrap();
        let page = scraper::Html::parse_document(PAGE);
        let error = fill_form(&url, &page, None, &fill(&[("email", "a")])).unwrap_err();
        assert!(
            error.contains("no form on `http://a.test/login` has fields named `email`"),
            "{error}"
        );
        assert!(error.contains("[q] and [csrf, user, password"), "{error}");
        let none = scraper::Html::parse_document("<p>hi</p>");
        let error = fill_form(&url, &none, None, &fill(&[("user", "a")])).unwrap_err();
        assert!(error.contains("the page has no form"), "{error}");
    }

    #[test]
    fn a_form_chosen_by_selector_without_an_action_goes_to_its_page_by_get() {
        let url = Url::parse("http://a.test/find").unwrap();
        let page = scraper::Html::parse_document(r#"<form class="f"><input name="q"></form>"#);
        let selector = scraper::Selector::parse("form.f").unwrap();
        let filled = fill_form(&url, &page, Some(&selector), &fill(&[("q", "cats")])).unwrap();
        assert_eq!(
            (filled.method, filled.action.as_str()),
            (FormMethod::Get, "http://a.test/find")
        );
    }

    #[test]
    fn success_is_what_the_profile_names_or_else_no_password_asked_again() {
        let landed = Url::parse("http://a.test/members/page/1").unwrap();
        let welcome = scraper::Html::parse_document("<p class=account>ana</p>");
        let again = scraper::Html::parse_document("<input type=password name=p>");
        let none = LoginSuccess::default();
        assert_eq!(signed_in(&none, &landed, &welcome, false), Ok(()));
        assert!(
            signed_in(&none, &landed, &again, false)
                .unwrap_err()
                .contains("asks for a password again")
        );
        let named = LoginSuccess {
            cookie: Some("sid".into()),
            selector: Some(CssRule::parse(".account").unwrap()),
            url: Some("/members/".into()),
        };
        assert_eq!(signed_in(&named, &landed, &welcome, true), Ok(()));
        assert!(
            signed_in(&named, &landed, &welcome, false)
                .unwrap_err()
                .contains("no cookie `sid`")
        );
        assert!(
            signed_in(&named, &landed, &again, true)
                .unwrap_err()
                .contains("does not show `.account`")
        );
        let elsewhere = Url::parse("http://a.test/login").unwrap();
        assert!(
            signed_in(&named, &elsewhere, &welcome, true)
                .unwrap_err()
                .contains("not to a URL with `/members/`")
        );
    }
}
