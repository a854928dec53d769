//! The probes: each sends an attack through a cache and judges, from what the clients got and
//! the exact bytes the backend read, whether it worked. Each uses paths of its own, so one
//! backend and one cache serve them all.

use std::future::Future;
use std::pin::Pin;

use crate::common::lenient::{ok, Received, Reply};
use crate::common::wire::{Conn, RawResponse};
use crate::systems::System;

/// A probe's result on one system.
pub struct Verdict {
    /// The attack did not work (or the request was refused).
    pub safe: bool,
    /// What happened, in a few words.
    pub note: String,
}

pub(crate) fn verdict(safe: bool, note: impl Into<String>) -> Verdict {
    Verdict {
        safe,
        note: note.into(),
    }
}

type ProbeFn = for<'a> fn(&'a System) -> Pin<Box<dyn Future<Output = Verdict> + 'a>>;

/// A probe: its name, whether a failure is a security failure (smuggling, poisoning, a leak)
/// rather than a behaviour that differs from kura's, and the probe.
pub struct Probe {
    pub name: &'static str,
    pub security: bool,
    pub run: ProbeFn,
}

macro_rules! probes {
    ($($name:literal => $f:ident $(, $behaviour:ident)?);* $(;)?) => {
        /// Every probe.
        pub const PROBES: &[Probe] = &[$(Probe {
            name: $name,
            security: probes!(@security $($behaviour)?),
            run: |s| Box::pin($f(s)),
        }),*];
    };
    (@security behaviour) => { false };
    (@security) => { true };
}

use crate::poisoning::*;
use crate::smuggling::*;

probes! {
    "get-body-smuggling (1)" => get_body;
    "head-body-smuggling (1)" => head_body;
    "absolute-form-vs-host (2)" => absolute_form;
    "invalid-host (2)" => invalid_host, behaviour;
    "cookie-page-shared (3)" => cookie_page;
    "authorization-page-shared (3)" => authorization_page;
    "unmatched-304-to-plain-get (4)" => unmatched_304;
    "backend-cl-beside-te (5)" => backend_cl_te, behaviour;
    "crlf-lf-head-end-cl-te (6)" => crlf_lf;
    "malformed-chunk (7)" => bad_chunk, behaviour;
    "bare-lf-request (7)" => bare_lf, behaviour;
    "103-early-hints (8)" => early_hints, behaviour;
    "300-header-fields (9)" => many_fields, behaviour;
    "cl-te" => cl_te;
    "te-cl" => te_cl;
    "te-te-xchunked" => te_xchunked;
    "te-te-space-before-colon" => te_space_colon;
    "te-te-tab" => te_tab;
    "te-te-chunked-then-identity" => te_two_lines;
    "te-te-obs-fold" => te_obs_fold;
    "te-http10" => te_http10;
    "cl-cl-different" => cl_cl;
    "cl-list" => cl_list;
    "cl-plus-sign" => cl_plus;
    "obs-fold-field" => obs_fold;
    "nul-in-field" => nul_field;
    "cr-in-field" => cr_field;
    "huge-head" => huge_head, behaviour;
    "x-forwarded-host-poisoning" => forwarded_host;
    "x-original-url-poisoning" => original_url;
    "method-override-poisoning" => method_override;
    "x-forwarded-proto-redirect-poisoning" => forwarded_proto;
    "slow-head" => slow_head, behaviour;
    "backend-never-answers" => backend_hangs, behaviour;
    "backend-never-stops" => backend_endless, behaviour;
    "refused-upgrade-then-request" => refused_upgrade, behaviour;
}

/// The backend's behaviour, by path.
pub fn backend(r: &Received) -> Reply {
    let t = r.target();
    let field = |name| r.field(name).unwrap_or("-");
    if t.contains("/hang/") {
        return Reply::Hang;
    }
    if t.contains("/endless/") {
        return Reply::Endless(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n".to_vec());
    }
    if t.contains("/hints/") {
        let body = format!("hinted {t}");
        return Reply::Bytes(
            format!(
                "HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n\
                 HTTP/1.1 200 OK\r\nContent-Length: {}\r\nCache-Control: max-age=60\r\n\r\n{body}",
                body.len()
            )
            .into_bytes(),
        );
    }
    if t.contains("/clte/") {
        return Reply::Bytes(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\
              Cache-Control: max-age=60\r\n\r\nb\r\nhello world\r\n0\r\n\r\n"
                .to_vec(),
        );
    }
    if t.contains("/304/") {
        if r.field("if-none-match").is_some() {
            return Reply::Bytes(b"HTTP/1.1 304 Not Modified\r\n\r\n".to_vec());
        }
        return ok("full page", &["Cache-Control: max-age=0", "ETag: \"v\""]);
    }
    if t.contains("/override/") {
        let body = match (r.field("x-original-url"), r.field("x-http-method-override")) {
            (Some(url), _) => format!("page for {url}"),
            (None, Some(method)) => format!("did {method}"),
            (None, None) => format!("page for {t}"),
        };
        return ok(&body, &["Cache-Control: max-age=60"]);
    }
    if t.contains("/proto/") {
        if field("x-forwarded-proto") == "http" {
            return Reply::Bytes(
                b"HTTP/1.1 301 Moved Permanently\r\nLocation: https://x/proto/\r\n\
                  Cache-Control: max-age=60\r\nContent-Length: 0\r\n\r\n"
                    .to_vec(),
            );
        }
        return ok("secure page", &["Cache-Control: max-age=60"]);
    }
    let body = format!(
        "page for {t} host={} cookie={} auth={} xfh={} body={}",
        field("host"),
        field("cookie"),
        field("authorization"),
        field("x-forwarded-host"),
        r.body.len()
    );
    if t.contains("/nocc/") {
        ok(&body, &["Content-Type: text/css"])
    } else {
        ok(&body, &["Cache-Control: max-age=60"])
    }
}

/// Sends `bytes` on a new connection and reads up to `n` responses.
pub(crate) async fn exchange(s: &System, bytes: &[u8], n: usize) -> Vec<RawResponse> {
    let mut conn = Conn::open(s.addr).await;
    conn.send(bytes).await;
    let mut out = Vec::new();
    for _ in 0..n {
        match conn.response(false).await {
            Some(response) => out.push(response),
            None => break,
        }
    }
    out
}

pub(crate) async fn get(s: &System, path: &str, fields: &str) -> Option<RawResponse> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{fields}\r\n");
    exchange(s, request.as_bytes(), 1).await.pop()
}

pub(crate) fn seen(s: &System, id: &str) -> Vec<Received> {
    s.backend
        .requests()
        .into_iter()
        .filter(|r| r.head.contains(id))
        .collect()
}

pub(crate) fn statuses(responses: &[RawResponse]) -> String {
    let codes: Vec<String> = responses.iter().map(|r| r.status.to_string()).collect();
    if codes.is_empty() {
        "no answer".into()
    } else {
        codes.join(",")
    }
}

pub(crate) async fn get_host(s: &System, path: &str, host: &str) -> Option<RawResponse> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n");
    exchange(s, request.as_bytes(), 1).await.pop()
}

pub(crate) fn host_in(body: &str) -> String {
    body.split(' ')
        .find(|w| w.starts_with("host="))
        .unwrap_or("?")
        .to_owned()
}
