//! memcached's ASCII authentication (`-Y` without `-S`): until a connection
//! has authenticated, its bytes are framed by
//! [`kura_proto::ascii_auth::parse_auth`], not as text commands. A `set`
//! line's length says how many bytes hold `user password`; the answer is
//! `STORED` or `CLIENT_ERROR authentication failure`, and anything else
//! `CLIENT_ERROR unauthenticated`. kura closes the connection after
//! [`MAX_AUTH_FAILURES`] failures (memcached never does).

use kura_proto::ascii_auth::{parse_auth, user_password, AuthFrame};
use kura_proto::reply;

use super::{Next, Session, Step, UNAUTHENTICATED};
use crate::auth::MAX_AUTH_FAILURES;
use crate::metrics::incr;

impl Session<'_> {
    /// Answers the request at the front of `buf` on a connection that has
    /// not authenticated yet.
    pub fn step_auth(&mut self, buf: &[u8]) -> Step {
        let (len, token) = match parse_auth(buf) {
            AuthFrame::Incomplete { needed } => return Step::More { needed },
            AuthFrame::Close => return Step::Garbage,
            AuthFrame::NotAuth { len } => {
                self.out.extend_from_slice(UNAUTHENTICATED);
                return done(len, Next::Continue);
            }
            AuthFrame::Token { len, token } => (len, token),
        };
        let Some(token) = token else {
            self.out
                .extend_from_slice(b"CLIENT_ERROR bad command line termination\r\n");
            return done(len, Next::Continue);
        };
        let Some((user, pass)) = user_password(token) else {
            self.out
                .extend_from_slice(b"CLIENT_ERROR bad authentication token format\r\n");
            return done(len, Next::Continue);
        };
        let ok = self
            .shared
            .credentials
            .as_ref()
            .is_some_and(|c| c.current().check(user, pass));
        incr(&self.stats.auth_cmds);
        if ok {
            self.authenticated = true;
            self.out.extend_from_slice(reply::STORED);
            return done(len, Next::Continue);
        }
        incr(&self.stats.auth_errors);
        self.auth_failures += 1;
        tracing::warn!(
            user = %String::from_utf8_lossy(user),
            "ASCII authentication failed"
        );
        self.out
            .extend_from_slice(b"CLIENT_ERROR authentication failure\r\n");
        if self.auth_failures >= MAX_AUTH_FAILURES {
            tracing::warn!("closing a connection after repeated authentication failures");
            return done(len, Next::Close);
        }
        done(len, Next::Continue)
    }
}

fn done(len: usize, next: Next) -> Step {
    Step::Done { len, next }
}
