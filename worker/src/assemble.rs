//! Filling a batch: wait for a first chunk, then take more until the token budget is full or
//! `max_wait` has passed since the first — whichever comes first — or shutdown is asked for.
//! Once the batch holds every chunk of each of its documents, more is taken only while it
//! arrives within [`GRACE`] (what the broker has already sent): a document alone is not held
//! back for chunks that may never come, and a full queue still fills the batch.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;

/// Where batch items come from: messages received, then accepted as items or skipped.
pub trait Source {
    type Raw;
    type Item;
    type Error;
    /// Wait for the next message. Cancel-safe: a message is taken only once it has arrived,
    /// so the batch's deadline can cut this wait short without losing one.
    fn recv(&mut self) -> impl Future<Output = Result<Self::Raw, Self::Error>> + Send;
    /// Turn a message into an item, or `None` when it is skipped (a poison message, which
    /// this dead-letters). Always run to completion, outside the deadline.
    fn accept(&mut self, raw: Self::Raw) -> impl Future<Output = Result<Option<Self::Item>, Self::Error>> + Send;
}

/// One assembled batch, and whether shutdown was asked for while assembling it.
#[derive(Debug)]
pub struct Assembled<T> {
    pub items: Vec<T>,
    pub tokens: usize,
    pub stopping: bool,
}

/// How long a batch whose documents are all complete waits for the next item.
pub const GRACE: Duration = Duration::from_millis(2);

/// Collect the next batch from `source` (see the module docs); `tokens` counts an item;
/// `complete` says whether the items hold every chunk of each of their documents.
pub async fn assemble<S: Source>(
    source: &mut S,
    budget: usize,
    max_wait: Duration,
    tokens: impl Fn(&S::Item) -> usize,
    complete: impl Fn(&[S::Item]) -> bool,
    stop: &mut watch::Receiver<bool>,
) -> Result<Assembled<S::Item>, S::Error> {
    let mut batch = Assembled { items: Vec::new(), tokens: 0, stopping: *stop.borrow() };
    if batch.stopping {
        return Ok(batch);
    }
    let first = tokio::select! {
        r = source.recv() => r?,
        _ = stop.changed() => { batch.stopping = true; return Ok(batch) }
    };
    let take = |item: Option<S::Item>, batch: &mut Assembled<S::Item>| {
        if let Some(item) = item {
            batch.tokens += tokens(&item);
            batch.items.push(item);
        }
    };
    take(source.accept(first).await?, &mut batch);
    let deadline = tokio::time::Instant::now() + max_wait;
    while batch.tokens < budget {
        let until = if complete(&batch.items) { deadline.min(tokio::time::Instant::now() + GRACE) } else { deadline };
        let next = tokio::select! {
            r = tokio::time::timeout_at(until, source.recv()) => match r { Ok(r) => r?, Err(_) => break },
            _ = stop.changed() => { batch.stopping = true; break }
        };
        take(source.accept(next).await?, &mut batch);
    }
    Ok(batch)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Items `(tokens, arrives after ms)`; `None` tokens is a skipped message.
    struct Timed(std::collections::VecDeque<(Option<usize>, u64)>);

    impl Source for Timed {
        type Raw = Option<usize>;
        type Item = usize;
        type Error = ();
        /// Cancel-safe, like a broker consumer: an item is taken only once it has arrived.
        async fn recv(&mut self) -> Result<Option<usize>, ()> {
            let Some(&(_, after)) = self.0.front() else { return std::future::pending().await };
            tokio::time::sleep(Duration::from_millis(after)).await;
            Ok(self.0.pop_front().and_then(|(item, _)| item))
        }
        async fn accept(&mut self, raw: Option<usize>) -> Result<Option<usize>, ()> {
            Ok(raw)
        }
    }

    fn source(items: &[(Option<usize>, u64)]) -> Timed {
        Timed(items.iter().copied().collect())
    }

    /// Documents never complete: the batch waits out `max_wait`.
    fn never(_: &[usize]) -> bool {
        false
    }

    #[tokio::test]
    async fn a_complete_batch_waits_only_for_what_is_already_arriving() {
        let (_tx, mut stop) = watch::channel(false);
        // "complete" once it holds two items; the third is already there, the fourth comes late
        let two = |items: &[usize]| items.len() >= 2;
        let mut s = source(&[(Some(100), 5), (Some(100), 1), (Some(100), 0), (Some(100), 30_000)]);
        let started = tokio::time::Instant::now();
        let b = assemble(&mut s, 8192, Duration::from_secs(10), |t| *t, two, &mut stop).await.unwrap();
        assert_eq!(b.items, vec![100, 100, 100], "what arrives at once is still taken");
        let waited = started.elapsed();
        assert!(waited < Duration::from_secs(5), "held back for {waited:?} with its documents complete");
        assert_eq!(s.0.len(), 1);
    }

    #[tokio::test]
    async fn fills_the_budget_then_stops_taking() {
        let (_tx, mut stop) = watch::channel(false);
        let mut s = source(&[(Some(3000), 5), (None, 1), (Some(3000), 1), (Some(3000), 1), (Some(10), 1)]);
        let b = assemble(&mut s, 8192, Duration::from_secs(30), |t| *t, never, &mut stop).await.unwrap();
        assert_eq!(b.items, vec![3000, 3000, 3000]);
        assert_eq!(b.tokens, 9000);
        assert!(!b.stopping);
        // the rest is left for the next batch
        assert_eq!(s.0.len(), 1);
    }

    #[tokio::test]
    async fn waits_at_most_max_wait_after_the_first() {
        let (_tx, mut stop) = watch::channel(false);
        // the first after 50 ms, the second 10 ms later, the third would come 30 s later
        let mut s = source(&[(Some(100), 50), (Some(100), 10), (Some(100), 30_000)]);
        let started = tokio::time::Instant::now();
        let b = assemble(&mut s, 8192, Duration::from_millis(300), |t| *t, never, &mut stop).await.unwrap();
        assert_eq!(b.items, vec![100, 100]);
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(350) && waited < Duration::from_secs(20), "{waited:?}");
        assert_eq!(s.0.len(), 1, "the third is left for the next batch");
    }

    #[tokio::test]
    async fn shutdown_ends_the_wait() {
        let (tx, mut stop) = watch::channel(false);
        let mut s = source(&[]);
        let (b, _) = tokio::join!(assemble(&mut s, 8192, Duration::from_millis(75), |t| *t, never, &mut stop), async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            tx.send(true).unwrap();
        });
        let b = b.unwrap();
        assert!(b.stopping && b.items.is_empty());
    }
}
