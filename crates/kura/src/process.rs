//! Process-level duties of memcached's flags: daemonizing (`-d`), switching
//! user (`-u`), core dumps (`-r`), locking memory (`-k`), the open-file
//! limit for `-c`, and stopping on SIGTERM/SIGINT.

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

/// Blocks until SIGTERM, SIGINT or a client's `shutdown`.
pub fn wait_for_stop(shared: &Shared) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    rt.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).ok();
        let mut int = signal(SignalKind::interrupt()).ok();
        let mut usr1 = signal(SignalKind::user_defined1()).ok();
        let mut rx = shared.watch();
        async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
            match s {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            _ = recv(&mut term) => tracing::info!("SIGTERM: shutting down"),
            _ = recv(&mut int) => tracing::info!("SIGINT: shutting down"),
            _ = recv(&mut usr1) => tracing::info!("SIGUSR1: graceful shutdown"),
            _ = rx.wait_for(|s| *s == RunState::Stopping) => {}
        }
    });
}
