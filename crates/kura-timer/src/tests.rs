use super::*;

/// An event loop like the proxy's workers': I/O, no time driver.
fn io_only() -> Runtime {
    Builder::new_current_thread().enable_io().build().unwrap()
}

#[test]
fn a_sleep_ends_at_its_deadline_on_a_loop_without_timers() {
    let t = Instant::now();
    io_only().block_on(sleep(Duration::from_millis(50)));
    assert!(t.elapsed() >= Duration::from_millis(50));
}

#[test]
fn a_timeout_gives_the_work_or_none() {
    let rt = io_only();
    assert_eq!(
        rt.block_on(timeout(Duration::from_secs(5), async { 7 })),
        Some(7)
    );
    let never = std::future::pending::<()>();
    let t = Instant::now();
    assert_eq!(rt.block_on(timeout(Duration::from_millis(50), never)), None);
    assert!(t.elapsed() >= Duration::from_millis(50));
}

#[test]
fn a_dropped_sleep_cancels_its_timer() {
    let rt = io_only();
    let mut s = Box::pin(sleep(Duration::from_secs(3600)));
    let polled = rt.block_on(std::future::poll_fn(|cx| Poll::Ready(s.as_mut().poll(cx))));
    assert!(polled.is_pending());
    let h = match &s.armed {
        Some(Armed::Remote(h)) => h.abort_handle(),
        _ => panic!("a loop without a time driver arms its sleep on the timer thread"),
    };
    drop(s);
    rt.block_on(async {
        while !h.is_finished() {
            tokio::task::yield_now().await;
        }
    });
}

/// A worker without a time driver sleeps on the timer thread; work that is
/// ready at once arms no timer.
#[test]
fn a_worker_without_a_time_driver_still_times_out() {
    std::thread::spawn(|| {
        let rt = worker_runtime(false).unwrap();
        rt.block_on(async {
            assert_eq!(timeout(Duration::from_secs(60), async { 7 }).await, Some(7));
            let never = std::future::pending::<()>();
            assert_eq!(timeout(Duration::from_millis(1), never).await, None);
            sleep(Duration::from_millis(1)).await;
        });
    })
    .join()
    .unwrap();
}

/// A worker with its own time driver arms its sleeps there.
#[test]
fn a_worker_with_local_timers_sleeps_on_its_own_driver() {
    std::thread::spawn(|| {
        let rt = worker_runtime(true).unwrap();
        rt.block_on(async {
            let mut s = Box::pin(sleep(Duration::from_millis(5)));
            let first = std::future::poll_fn(|cx| Poll::Ready(s.as_mut().poll(cx))).await;
            assert!(first.is_pending());
            assert!(matches!(s.armed, Some(Armed::Local(_))));
            s.await;
        });
    })
    .join()
    .unwrap();
}

/// Work spawned on the timer thread can sleep with tokio's own timers.
#[test]
fn spawned_work_runs_with_timers() {
    let rt = io_only();
    let out = rt.block_on(async {
        spawn(async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            5
        })
        .await
    });
    assert_eq!(out.unwrap(), 5);
}
