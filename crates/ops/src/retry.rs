//! The one retry policy: exponential backoff with jitter (`backon`), in the few shapes the
//! roles need, and [`until_stopped`] for waiting out an outage until shutdown.
//!
//! | shape | used for |
//! |---|---|
//! | [`patient`] | connecting to Postgres or RabbitMQ at start: for up to a given time |
//! | [`bounded`] | a call worth a few more tries (S3, a document after a database blip) |
//! | [`unbounded`] | waiting out an outage while holding a delivery, until shutdown |
//!
//! Delays start at `min` and double up to `max`; with jitter (the first two shapes: many
//! clients may retry the same server at once) each delay gains up to as much again at random.

use std::future::Future;
use std::time::Duration;

use backon::BackoffBuilder;
pub use backon::ExponentialBuilder;
use tokio::sync::watch;

/// Exponential from `min` to `max`: the policy every retry in docpipe uses.
fn backoff(min: Duration, max: Duration) -> ExponentialBuilder {
    ExponentialBuilder::default().with_min_delay(min).with_max_delay(max)
}

/// Retry for up to about `patience` in all, 0.2 s to 5 s apart, with jitter.
pub fn patient(patience: Duration) -> ExponentialBuilder {
    backoff(Duration::from_millis(200), Duration::from_secs(5))
        .with_jitter()
        .with_total_delay(Some(patience))
        .with_max_times(usize::MAX)
}

/// At most `times` retries, `min` to `max` apart, with jitter.
pub fn bounded(min: Duration, max: Duration, times: usize) -> ExponentialBuilder {
    backoff(min, max).with_jitter().with_max_times(times)
}

/// Retries without end, `min` to `max` apart, no jitter: one process waiting for its own
/// connection or database to come back (stopped by the caller: [`until_stopped`]).
pub fn unbounded(min: Duration, max: Duration) -> ExponentialBuilder {
    backoff(min, max).with_max_times(usize::MAX)
}

/// Run `op` until it succeeds or fails with an error `retry` refuses, sleeping by `policy`
/// between attempts (`notify` hears of each failure and the wait before the next try).
/// `None` when `stop` turned true while waiting.
pub async fn until_stopped<T, E, F, Fut>(
    policy: ExponentialBuilder,
    stop: &mut watch::Receiver<bool>,
    mut op: F,
    mut retry: impl FnMut(&E) -> bool,
    mut notify: impl FnMut(&E, Duration),
) -> Option<Result<T, E>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut delays = policy.build();
    loop {
        match op().await {
            Ok(v) => return Some(Ok(v)),
            Err(e) if retry(&e) => {
                let Some(delay) = delays.next() else { return Some(Err(e)) };
                notify(&e, delay);
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = stop.changed() => return None,
                }
            }
            Err(e) => return Some(Err(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn retries_transient_errors_until_success_or_a_permanent_one() {
        let (_tx, mut stop) = watch::channel(false);
        let mut calls = 0;
        let r = until_stopped(
            unbounded(Duration::from_millis(10), Duration::from_millis(20)),
            &mut stop,
            || {
                calls += 1;
                let n = calls;
                async move {
                    if n < 3 {
                        Err("transient")
                    } else {
                        Ok(n)
                    }
                }
            },
            |_| true,
            |_, _| {},
        )
        .await;
        assert_eq!(r, Some(Ok(3)));
        let r: Option<Result<(), &str>> = until_stopped(
            unbounded(Duration::from_millis(10), Duration::from_millis(20)),
            &mut stop,
            || async { Err("bad data") },
            |e| *e != "bad data",
            |_, _| {},
        )
        .await;
        assert_eq!(r, Some(Err("bad data")));
    }

    #[tokio::test]
    async fn stops_waiting_on_shutdown() {
        let (tx, mut stop) = watch::channel(false);
        let waiting = until_stopped(
            unbounded(Duration::from_secs(30), Duration::from_secs(30)),
            &mut stop,
            || async { Err::<(), _>("down") },
            |_| true,
            |_, _| {},
        );
        let (r, _) = tokio::join!(waiting, async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            tx.send(true).unwrap();
        });
        assert_eq!(r, None);
    }
}
