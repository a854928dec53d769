//! Process-level duties of memcached's flags: daemonizing (`-d`), switching
//! user (`-u`), core dumps (`-r`), locking memory (`-k`), the open-file
//! limit for `-c`, and the signals: stopping on SIGTERM/SIGINT/SIGUSR1,
//! reloading on SIGHUP.

use std::ffi::CString;

use anyhow::{anyhow, bail};
use kura_server::shared::{RunState, Shared};

/// Forks into the background, as memcached's `-d`. Must run before any
/// thread is started.
pub fn daemonize() -> anyhow::Result<()> {
    // SAFETY: called from main before any other thread exists, so fork()
    // cannot leave another thread's lock held in the child; the parent exits
    // at once without running destructors that could touch shared state.
    unsafe {
        match libc::fork() {
            -1 => bail!("fork failed: {}", std::io::Error::last_os_error()),
            0 => {}
            _ => libc::_exit(0),
        }
        if libc::setsid() == -1 {
            bail!("setsid failed: {}", std::io::Error::last_os_error());
        }
        let devnull = CString::new("/dev/null")?;
        let fd = libc::open(devnull.as_ptr(), libc::O_RDWR);
        if fd >= 0 {
            libc::dup2(fd, 0);
            libc::dup2(fd, 1);
            libc::dup2(fd, 2);
            if fd > 2 {
                libc::close(fd);
            }
        }
    }
    Ok(())
}

/// Raises the open-file limit so `-c` connections fit, as memcached does.
pub fn raise_fd_limit(max_connections: usize) {
    let want = (max_connections as u64).saturating_add(64);
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        let mut rl: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) != 0 || rl.rlim_cur >= want {
            return;
        }
        rl.rlim_cur = want.min(rl.rlim_max);
        if libc::setrlimit(libc::RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < want {
            tracing::warn!(
                "open file limit is {}; fewer than {max_connections} connections may fit",
                rl.rlim_cur
            );
        }
    }
}

/// `-r`: the largest core file allowed.
pub fn enable_coredumps() {
    // SAFETY: as above.
    unsafe {
        let mut rl: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_CORE, &mut rl) == 0 {
            rl.rlim_cur = rl.rlim_max;
            libc::setrlimit(libc::RLIMIT_CORE, &rl);
        }
    }
}

/// `-k`: lock current and future pages in memory.
pub fn lock_memory() {
    // SAFETY: mlockall takes flags only.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
        tracing::warn!("failed to lock memory: {}", std::io::Error::last_os_error());
    }
}

/// `-u`: drops root for `user` after the listeners are bound.
pub fn switch_user(user: &str) -> anyhow::Result<()> {
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        return Ok(());
    }
    let name = CString::new(user)?;
    // SAFETY: getpwnam returns a pointer to static storage or null; we copy
    // the ids out before any other call could overwrite it.
    let (uid, gid) = unsafe {
        let pw = libc::getpwnam(name.as_ptr());
        if pw.is_null() {
            bail!("can't find the user {user} to switch to");
        }
        ((*pw).pw_uid, (*pw).pw_gid)
    };
    // SAFETY: plain system calls on integers.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0
            && std::io::Error::last_os_error().raw_os_error() != Some(libc::EPERM)
        {
            return Err(anyhow!(
                "setgroups failed: {}",
                std::io::Error::last_os_error()
            ));
        }
        if libc::setgid(gid) != 0 || libc::setuid(uid) != 0 {
            bail!(
                "failed to assume identity of user {user}: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    Ok(())
}

/// The signals a server answers, caught from as early as possible (before
/// the listeners are bound), so that a SIGHUP sent while it starts (an init
/// script's reload, logrotate) never ends it.
pub struct Signals {
    rt: tokio::runtime::Runtime,
    term: Signal,
    int: Signal,
    usr1: Signal,
    hup: Signal,
}

type Signal = Option<tokio::signal::unix::Signal>;

impl Signals {
    /// Catches SIGTERM, SIGINT, SIGUSR1 and SIGHUP from now on.
    ///
    /// # Errors
    /// The runtime that waits for them cannot be made.
    pub fn catch() -> anyhow::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let _entered = rt.enter();
        let catch = |kind| signal(kind).ok();
        Ok(Signals {
            term: catch(SignalKind::terminate()),
            int: catch(SignalKind::interrupt()),
            usr1: catch(SignalKind::user_defined1()),
            hup: catch(SignalKind::hangup()),
            rt,
        })
    }

    /// Blocks until SIGTERM, SIGINT, SIGUSR1 or a client's `shutdown`;
    /// each SIGHUP meanwhile reads the server's files again
    /// (kura_server::reload) and the server goes on.
    pub fn wait_for_stop(mut self, shared: &Shared) {
        async fn recv(s: &mut Signal) {
            match s {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        let mut rx = shared.watch();
        self.rt.block_on(async {
            loop {
                tokio::select! {
                    _ = recv(&mut self.term) => tracing::info!("SIGTERM: shutting down"),
                    _ = recv(&mut self.int) => tracing::info!("SIGINT: shutting down"),
                    _ = recv(&mut self.usr1) => tracing::info!("SIGUSR1: graceful shutdown"),
                    _ = recv(&mut self.hup) => {
                        tracing::info!("SIGHUP: reading the auth and TLS files again");
                        kura_service::reloading();
                        let done = kura_server::reload::reload(shared);
                        kura_service::reloaded(&kura_server::reload::summary(&done));
                        continue;
                    }
                    _ = rx.wait_for(|s| *s == RunState::Stopping) => {}
                }
                break;
            }
        });
        kura_service::stopping();
    }
}
