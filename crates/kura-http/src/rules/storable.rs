//! Whether a response may be stored (RFC 9111 §3, §3.5, §5.2), and which of its fields are left
//! out of the stored copy.
//!
//! A response is stored only if all of these hold, checked in this order (the first failure is
//! the reason given):
//! 1. the request method is GET (HEAD is answered from a stored GET; POST responses are not
//!    stored: §3 allows it only in forms this cache does not use);
//! 2. the status is final, not 206 (partial content is not stored) nor 304, and understood when
//!    the response says `must-understand`;
//! 3. no `no-store` in the request (always honoured) or the response (unless `must-understand`
//!    with an understood status, §5.2.2.3);
//! 4. no `private`, qualified or not (the qualified form may allow storing the rest; §5.2.2.7
//!    notes it is rarely implemented so, and kura reads it as unqualified);
//! 5. no `Authorization` in the request, unless the response has `public`, `s-maxage` or
//!    `must-revalidate` (§3.5);
//! 6. explicit freshness (`max-age`, `s-maxage`, `Expires`), `public`, or a heuristically
//!    cacheable status (§3, last condition);
//! 7. not `Vary: *` (it could be stored but would never match, §4.1);
//! 8. no `Set-Cookie` left after stripping, unless the operator's [`SetCookie`] says otherwise.

use http::header::{AUTHORIZATION, COOKIE, EXPIRES, SET_COOKIE};
use http::{HeaderName, Method, StatusCode};

use super::cache_control::{FieldScope, RequestDirectives};
use super::head::{RequestHead, ResponseHead};
use super::policy::{CachePolicy, SetCookie};
use super::status;
use super::targeted::ResponseControl;
use super::vary::Vary;

/// Why a response is not stored (for the proxy's pass counters and access log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotStorable {
    /// The request method is not GET.
    Method,
    /// A 1xx status.
    NotFinal,
    /// 206 Partial Content.
    PartialContent,
    /// 304 Not Modified (it updates stored responses instead, §4.3.4).
    NotModified,
    /// `must-understand` with a status this cache does not understand.
    NotUnderstood,
    /// `no-store` in the request.
    RequestNoStore,
    /// `no-store` in the response.
    NoStore,
    /// `private` in the response.
    Private,
    /// `Authorization` in the request without `public`, `s-maxage` or `must-revalidate`.
    Authorization,
    /// Neither explicit freshness, `public`, nor a heuristically cacheable status.
    NoFreshness,
    /// A request with `Cookie` or `Authorization`, a response without explicit freshness.
    Credentials,
    /// `Vary: *`.
    VaryStar,
    /// `Set-Cookie`, under [`SetCookie::Pass`].
    SetCookie,
}

/// A response that may be stored.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Storable {
    /// Fields to leave out of the stored copy: those named by `no-cache="..."` (they must not
    /// be served without validation, §5.2.2.4), and `Set-Cookie` under [`SetCookie::Strip`].
    pub strip: Vec<HeaderName>,
}

/// Decides whether `response`, fetched for `request`, may be stored, given its governing
/// directives `control` (see [`ResponseControl::from_headers`]).
///
/// # Errors
/// [`NotStorable`] with the first rule the response breaks.
pub fn storable(
    policy: &CachePolicy,
    request: RequestHead<'_>,
    response: ResponseHead<'_>,
    control: &ResponseControl,
) -> Result<Storable, NotStorable> {
    let directives = &control.directives;
    let status = response.status;
    if *request.method != Method::GET {
        return Err(NotStorable::Method);
    }
    if !status::is_final(status) {
        return Err(NotStorable::NotFinal);
    }
    if status == StatusCode::PARTIAL_CONTENT {
        return Err(NotStorable::PartialContent);
    }
    if status == StatusCode::NOT_MODIFIED {
        return Err(NotStorable::NotModified);
    }
    let understood = status::is_understood(status);
    if directives.must_understand && !understood {
        return Err(NotStorable::NotUnderstood);
    }
    if RequestDirectives::from_headers(request.headers).no_store {
        return Err(NotStorable::RequestNoStore);
    }
    if directives.no_store && !(directives.must_understand && understood) {
        return Err(NotStorable::NoStore);
    }
    if directives.private.is_present() {
        return Err(NotStorable::Private);
    }
    if request.headers.contains_key(AUTHORIZATION)
        && !(directives.public || directives.s_maxage.is_present() || directives.must_revalidate)
    {
        return Err(NotStorable::Authorization);
    }
    let explicit = directives.max_age.is_present()
        || directives.s_maxage.is_present()
        || (control.uses_expires() && response.headers.contains_key(EXPIRES));
    if !(explicit || directives.public || status::is_heuristically_cacheable(status)) {
        return Err(NotStorable::NoFreshness);
    }
    if Vary::from_headers(response.headers).is_star() {
        return Err(NotStorable::VaryStar);
    }
    let mut strip = match &directives.no_cache {
        FieldScope::Fields(fields) => fields.clone(),
        FieldScope::Absent | FieldScope::All => Vec::new(),
    };
    if response.headers.contains_key(SET_COOKIE) && !strip.contains(&SET_COOKIE) {
        match policy.set_cookie {
            SetCookie::Pass => return Err(NotStorable::SetCookie),
            SetCookie::Strip => strip.push(SET_COOKIE),
            SetCookie::Store => {}
        }
    }
    Ok(Storable { strip })
}

/// kura's rule beyond the RFC's, checked after [`storable`]: a response to a request with
/// credentials (`Cookie` or `Authorization`) is stored only with explicit freshness
/// (`max-age`, `s-maxage`, `Expires`), unless [`CachePolicy::heuristic_with_credentials`]: a
/// page that says nothing about caching may be that user's own, and a heuristic or default
/// lifetime would hand it to everyone.
///
/// # Errors
/// [`NotStorable::Credentials`].
pub fn credentials(
    policy: &CachePolicy,
    request: RequestHead<'_>,
    response: ResponseHead<'_>,
    control: &ResponseControl,
) -> Result<(), NotStorable> {
    let directives = &control.directives;
    let explicit = directives.max_age.is_present()
        || directives.s_maxage.is_present()
        || (control.uses_expires() && response.headers.contains_key(EXPIRES));
    let with_credentials =
        request.headers.contains_key(AUTHORIZATION) || request.headers.contains_key(COOKIE);
    if with_credentials && !explicit && !policy.heuristic_with_credentials {
        return Err(NotStorable::Credentials);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
