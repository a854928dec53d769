//! Device classes instead of User-Agent (seed 002): an ordered rule list maps a request's
//! `User-Agent` to a class (by default: contains `iPad` -> `pc`, contains `Mobile` -> `sp`,
//! otherwise `pc`), sent to the backend in a header of the proxy's own (`X-Device-Class`), so
//! that a backend that answers `Vary: X-Device-Class` has its pages stored once per class
//! instead of once per browser version. A client's own copy of that header is overwritten.
//! Optionally a backend's `Vary: User-Agent` is read as `Vary` on the class header.

use http::header::{USER_AGENT, VARY};
use http::{HeaderMap, HeaderName, HeaderValue};
use memchr::memmem::Finder;
use regex::bytes::Regex;

/// How a rule looks at the `User-Agent`.
#[derive(Debug, Clone)]
pub enum UaMatch {
    /// It contains this text (case-sensitive, as seed 002's rules); made by
    /// [`UaMatch::contains`], searched with memchr's substring search (every request is
    /// classified: a byte-by-byte scan of each rule was a tenth of a hit's instructions).
    Contains(Box<Finder<'static>>),
    /// It matches this regular expression somewhere.
    Pattern(Regex),
}

impl UaMatch {
    /// A rule that the `User-Agent` contains `text`.
    pub fn contains(text: &[u8]) -> UaMatch {
        UaMatch::Contains(Box::new(Finder::new(text).into_owned()))
    }

    fn matches(&self, agent: &[u8]) -> bool {
        match self {
            UaMatch::Contains(text) => text.find(agent).is_some(),
            UaMatch::Pattern(regex) => regex.is_match(agent),
        }
    }
}

/// One rule: a `User-Agent` condition and the class it gives.
#[derive(Debug, Clone)]
pub struct DeviceRule {
    /// The condition.
    pub matcher: UaMatch,
    /// The class.
    pub class: HeaderValue,
}

/// The device classes.
#[derive(Debug, Clone)]
pub struct DeviceRules {
    /// The request header the class is sent in.
    pub header: HeaderName,
    /// Tried in order; the first that matches gives the class.
    pub rules: Vec<DeviceRule>,
    /// The class when no rule matches (or there is no `User-Agent`).
    pub default: HeaderValue,
    /// A backend's `Vary: User-Agent` is read as `Vary` on [`Self::header`].
    pub vary_user_agent: bool,
}

impl Default for DeviceRules {
    /// Seed 002's rules.
    fn default() -> Self {
        let rule = |text: &str, class: &'static str| DeviceRule {
            matcher: UaMatch::contains(text.as_bytes()),
            class: HeaderValue::from_static(class),
        };
        DeviceRules {
            header: HeaderName::from_static("x-device-class"),
            rules: vec![rule("iPad", "pc"), rule("Mobile", "sp")],
            default: HeaderValue::from_static("pc"),
            vary_user_agent: false,
        }
    }
}

impl DeviceRules {
    /// The class of a request with `User-Agent` `agent`.
    pub fn class(&self, agent: Option<&[u8]>) -> &HeaderValue {
        let Some(agent) = agent else {
            return &self.default;
        };
        self.rules
            .iter()
            .find(|rule| rule.matcher.matches(agent))
            .map_or(&self.default, |rule| &rule.class)
    }

    /// Sets the class header of a request's fields, replacing whatever the client sent.
    pub fn classify(&self, request: &mut HeaderMap) {
        let class = self
            .class(request.get(USER_AGENT).map(HeaderValue::as_bytes))
            .clone();
        request.insert(self.header.clone(), class);
    }

    /// A backend response's `Vary`: `User-Agent` becomes the class header when
    /// `vary_user_agent` is on.
    pub fn from_backend(&self, response: &mut HeaderMap) {
        if self.vary_user_agent {
            rename_vary(response, &USER_AGENT, &self.header);
        }
    }

    /// A response's `Vary` as a client sees it: the class header becomes `User-Agent`, which
    /// the class is made of, so that caches downstream (which never see the class header)
    /// keep one copy per `User-Agent` rather than one for every device.
    pub fn to_client(&self, response: &mut HeaderMap) {
        rename_vary(response, &self.header, &USER_AGENT);
    }
}

/// Replaces the member `from` of `headers`' `Vary` by `to` (once, without duplicates).
/// Nothing changes when `from` is not named.
fn rename_vary(headers: &mut HeaderMap, from: &HeaderName, to: &HeaderName) {
    let named = headers.get_all(VARY).iter().any(|line| {
        line.as_bytes().split(|&b| b == b',').any(|m| {
            m.trim_ascii()
                .eq_ignore_ascii_case(from.as_str().as_bytes())
        })
    });
    if !named {
        return;
    }
    let mut members: Vec<String> = Vec::new();
    for line in headers.get_all(VARY) {
        for member in line.as_bytes().split(|&b| b == b',') {
            let member = member.trim_ascii();
            if member.is_empty() {
                continue;
            }
            let name = if member.eq_ignore_ascii_case(from.as_str().as_bytes()) {
                to.as_str().to_owned()
            } else {
                String::from_utf8_lossy(member).to_ascii_lowercase()
            };
            if !members.contains(&name) {
                members.push(name);
            }
        }
    }
    if let Ok(value) = HeaderValue::from_str(&members.join(", ")) {
        headers.insert(VARY, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IPAD_IOS12: &str = "Mozilla/5.0 (iPad; CPU OS 12_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/12.1 Mobile/15E148 Safari/604.1";
    const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1";
    const ANDROID_PHONE: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Mobile Safari/537.36";
    const ANDROID_TABLET: &str = "Mozilla/5.0 (Linux; Android 13; SM-X700) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36";
    const DESKTOP: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36";

    // Seed 002: iPad -> pc (even iOS 12's, which says Mobile), Mobile -> sp, else pc.
    #[test]
    fn seed_rules() {
        let rules = DeviceRules::default();
        for (agent, class) in [
            (IPAD_IOS12, "pc"),
            (IPHONE, "sp"),
            (ANDROID_PHONE, "sp"),
            (ANDROID_TABLET, "pc"),
            (DESKTOP, "pc"),
            ("mobile lowercase", "pc"),
        ] {
            assert_eq!(rules.class(Some(agent.as_bytes())), class, "{agent}");
        }
        assert_eq!(rules.class(None), "pc");
    }

    #[test]
    fn a_clients_class_header_is_overwritten() {
        let rules = DeviceRules::default();
        let mut request = HeaderMap::new();
        request.insert(USER_AGENT, HeaderValue::from_static(IPHONE));
        request.append("x-device-class", HeaderValue::from_static("pc"));
        request.append("x-device-class", HeaderValue::from_static("admin"));
        rules.classify(&mut request);
        let values: Vec<_> = request.get_all("x-device-class").iter().collect();
        assert_eq!(values, ["sp"]);
    }

    #[test]
    fn contains_finds_its_text_anywhere_and_only_whole() {
        let mobile = UaMatch::contains(b"Mobile");
        for agent in [&b"Mobile"[..], b"Mobile Safari", b"x Mobile", b"aMobileb"] {
            assert!(mobile.matches(agent), "{agent:?}");
        }
        for agent in [&b""[..], b"Mobil", b"mobile", b"Mob ile", b"obile"] {
            assert!(!mobile.matches(agent), "{agent:?}");
        }
    }

    #[test]
    fn patterns_in_order() {
        let rules = DeviceRules {
            rules: vec![
                DeviceRule {
                    matcher: UaMatch::Pattern(Regex::new("(?i)bot|crawler").unwrap()),
                    class: HeaderValue::from_static("bot"),
                },
                DeviceRule {
                    matcher: UaMatch::contains(b"Mobile"),
                    class: HeaderValue::from_static("sp"),
                },
            ],
            ..DeviceRules::default()
        };
        assert_eq!(rules.class(Some(b"Googlebot Mobile")), "bot");
        assert_eq!(rules.class(Some(IPHONE.as_bytes())), "sp");
        assert_eq!(rules.class(Some(DESKTOP.as_bytes())), "pc");
    }

    #[test]
    fn vary_is_renamed_both_ways() {
        let mut rules = DeviceRules::default();
        let mut response = HeaderMap::new();
        response.append(
            VARY,
            HeaderValue::from_static("Accept-Encoding, User-Agent"),
        );
        response.append(VARY, HeaderValue::from_static("x-device-class"));
        let untouched = response.clone();
        rules.from_backend(&mut response);
        assert_eq!(response, untouched, "off by default");
        rules.vary_user_agent = true;
        rules.from_backend(&mut response);
        assert_eq!(
            response.get(VARY).unwrap(),
            "accept-encoding, x-device-class"
        );
        assert_eq!(response.get_all(VARY).iter().count(), 1);
        rules.to_client(&mut response);
        assert_eq!(response.get(VARY).unwrap(), "accept-encoding, user-agent");
        let mut plain = HeaderMap::new();
        plain.insert(VARY, HeaderValue::from_static("Accept-Encoding"));
        rules.to_client(&mut plain);
        assert_eq!(plain.get(VARY).unwrap(), "Accept-Encoding");
    }
}
