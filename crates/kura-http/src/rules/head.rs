//! Borrowed views of a request's and a response's head (start line and header fields), the
//! only parts of a message the rules read. They are built from `http`'s `Parts`, `Request` or
//! `Response` without copying, so a caller holding a `hyper` request need not take it apart.

use http::{request, response, HeaderMap, Method, Request, Response, StatusCode, Uri};

/// A request's method, target and header fields.
#[derive(Debug, Clone, Copy)]
pub struct RequestHead<'a> {
    /// The method.
    pub method: &'a Method,
    /// The target URI, as received.
    pub uri: &'a Uri,
    /// The header fields.
    pub headers: &'a HeaderMap,
}

impl<'a> From<&'a request::Parts> for RequestHead<'a> {
    fn from(parts: &'a request::Parts) -> Self {
        Self {
            method: &parts.method,
            uri: &parts.uri,
            headers: &parts.headers,
        }
    }
}

impl<'a, B> From<&'a Request<B>> for RequestHead<'a> {
    fn from(request: &'a Request<B>) -> Self {
        Self {
            method: request.method(),
            uri: request.uri(),
            headers: request.headers(),
        }
    }
}

/// A response's status and header fields.
#[derive(Debug, Clone, Copy)]
pub struct ResponseHead<'a> {
    /// The status code.
    pub status: StatusCode,
    /// The header fields.
    pub headers: &'a HeaderMap,
}

impl<'a> From<&'a response::Parts> for ResponseHead<'a> {
    fn from(parts: &'a response::Parts) -> Self {
        Self {
            status: parts.status,
            headers: &parts.headers,
        }
    }
}

impl<'a, B> From<&'a Response<B>> for ResponseHead<'a> {
    fn from(response: &'a Response<B>) -> Self {
        Self {
            status: response.status(),
            headers: response.headers(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_of_parts_and_messages() {
        let request = Request::get("/a").header("x", "1").body(()).unwrap();
        let head = RequestHead::from(&request);
        assert_eq!(head.method, Method::GET);
        assert_eq!(head.uri.path(), "/a");
        let (parts, ()) = request.into_parts();
        assert_eq!(RequestHead::from(&parts).headers["x"], "1");
        let response = Response::builder().status(404).body(()).unwrap();
        assert_eq!(ResponseHead::from(&response).status, StatusCode::NOT_FOUND);
        let (parts, ()) = response.into_parts();
        assert_eq!(ResponseHead::from(&parts).status, StatusCode::NOT_FOUND);
    }
}
