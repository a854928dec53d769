//! The admin endpoints of bans and tags, behind `Authorization: Bearer <[bans] token>`:
//! - `POST /ban` (body: an expression; `?soft` for a soft ban) → `{"seq": N}`;
//! - `POST /tags` (body: tags separated by spaces; `?soft`) → one ban per tag;
//! - `GET /bans` → the list.

use std::sync::Arc;

use http::header::{AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;

use super::proxy::Proxy;
use super::purge::same;
use crate::bans::Expr;
use crate::body::Body;

/// Largest request body taken.
const MAX_BODY: usize = 64 << 10;

/// Whether `path` is one of these endpoints.
pub fn handles(path: &str) -> bool {
    matches!(path, "/ban" | "/tags" | "/bans")
}

/// Answers a request to one of these endpoints.
pub async fn handle(proxy: Arc<Proxy>, request: Request<Incoming>) -> Response<Body> {
    let Some(token) = &proxy.config.bans.token else {
        return text(
            StatusCode::FORBIDDEN,
            "bans are not enabled: set [bans] token".into(),
        );
    };
    let sent = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
    if !sent.is_some_and(|sent| same(sent, token.as_bytes())) {
        let mut response = text(
            StatusCode::UNAUTHORIZED,
            "send the [bans] token as Authorization: Bearer <token>".into(),
        );
        response.headers_mut().insert(
            http::header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer"),
        );
        return response;
    }
    let path = request.uri().path().to_owned();
    let soft = request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "soft" || p == "soft=1"));
    let bans = proxy.cache.bans();
    match (request.method().clone(), path.as_str()) {
        (Method::GET, "/bans") => {
            let list: Vec<_> = bans
                .snapshot()
                .iter()
                .map(|ban| {
                    serde_json::json!({
                        "seq": ban.seq,
                        "expr": ban.expr.text(),
                        "soft": ban.soft,
                    })
                })
                .collect();
            json(serde_json::json!({ "head": bans.head(), "bans": list }))
        }
        (Method::POST, "/ban" | "/tags") => {
            let body = match Limited::new(request.into_body(), MAX_BODY).collect().await {
                Ok(body) => body.to_bytes(),
                Err(_) => {
                    return text(
                        StatusCode::BAD_REQUEST,
                        format!("the body must be at most {MAX_BODY} bytes"),
                    )
                }
            };
            let Ok(body) = std::str::from_utf8(&body) else {
                return text(StatusCode::BAD_REQUEST, "the body must be UTF-8".into());
            };
            if path == "/ban" {
                match Expr::parse(body) {
                    Ok(expr) => {
                        let seq = bans.add(expr, soft);
                        json(serde_json::json!({ "seq": seq, "soft": soft }))
                    }
                    Err(error) => text(StatusCode::BAD_REQUEST, format!("bad ban: {error}")),
                }
            } else {
                let tags: Vec<&str> = body.split_ascii_whitespace().collect();
                if tags.is_empty() {
                    return text(StatusCode::BAD_REQUEST, "no tags in the body".into());
                }
                let seqs: Vec<u32> = tags.iter().map(|t| bans.add(Expr::tag(t), soft)).collect();
                json(serde_json::json!({ "seqs": seqs, "soft": soft }))
            }
        }
        _ => text(
            StatusCode::METHOD_NOT_ALLOWED,
            "POST /ban, POST /tags or GET /bans".into(),
        ),
    }
}

fn json(value: serde_json::Value) -> Response<Body> {
    let mut response = Response::new(Body::full(value.to_string()));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn text(status: StatusCode, message: String) -> Response<Body> {
    let mut response = Response::new(Body::full(format!("{message}\n")));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
