//! What the rules' unit tests share.

use http::{HeaderMap, HeaderValue};

/// A header map of static names and values, in order (repeated names
/// append).
pub(crate) fn map(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        headers.append(*name, HeaderValue::from_static(value));
    }
    headers
}
