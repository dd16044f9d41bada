//! `docpipe status [--run R] [--watch]`: documents by status and their failures; with
//! `--watch`, the run's progress until it finishes.

use std::time::Duration;

use anyhow::{Context, Result};
use docpipe_contract::status::DocStatus;
use docpipe_store::progress::{self, Progress};
use docpipe_store::PgPool;
use tokio::sync::watch;
use uuid::Uuid;

use crate::cli::Common;
use crate::setup;

/// Widest document key shown; longer keys keep their end.
const KEY_WIDTH: usize = 44;
/// Characters of an error shown per document.
const ERROR_WIDTH: usize = 120;

pub async fn run(c: &Common, run: Option<Uuid>, watch: bool, interval_s: u64) -> Result<()> {
    let pool = setup::db(c).await?;
    let Some(run_id) = resolve_run(&pool, run).await? else {
        println!("no runs yet");
        return Ok(());
    };
    if watch {
        watch_run(&pool, run_id, Duration::from_secs(interval_s.max(1)), docpipe_ops::shutdown_signal()).await?;
    }
    print(&pool, run_id).await
}

/// The run given, or the latest one.
pub async fn resolve_run(pool: &PgPool, run: Option<Uuid>) -> Result<Option<Uuid>> {
    match run {
        Some(r) => Ok(Some(r)),
        None => Ok(progress::latest_run(pool).await?),
    }
}

/// Print the run's documents, their status and errors, and the totals.
pub async fn print(pool: &PgPool, run_id: Uuid) -> Result<()> {
    let rows = progress::documents(pool, run_id).await?;
    println!("run {run_id}");
    println!(
        "{:<44} {:<10} {:>5} {:>4} {:>7} {:<8}  error / warning",
        "document", "status", "pages", "ocr", "chunks", "fields"
    );
    for d in &rows {
        let chunks = match d.chunk_count {
            Some(n) => format!("{}/{n}", d.chunks_done),
            None => "-".into(),
        };
        let pages = d.pages.map(|p| p.to_string()).unwrap_or_else(|| "-".into());
        let err = match (&d.error, &d.warning, &d.fields_error) {
            (Some(e), ..) => e.clone(),
            (None, _, Some(f)) => format!("fields: {f}"),
            (None, Some(w), None) => format!("warning: {w}"),
            (None, None, None) => String::new(),
        };
        let fields = d.fields_status.as_deref().unwrap_or("-");
        let key = if d.key.chars().count() > KEY_WIDTH {
            format!(
                "…{}",
                d.key.chars().rev().take(KEY_WIDTH - 1).collect::<Vec<_>>().into_iter().rev().collect::<String>()
            )
        } else {
            d.key.clone()
        };
        println!(
            "{key:<44} {:<10} {pages:>5} {:>4} {chunks:>7} {fields:<8}  {}",
            d.status,
            d.ocr_pages,
            err.chars().take(ERROR_WIDTH).collect::<String>()
        );
    }
    let count = |s: DocStatus| rows.iter().filter(|r| r.status == s.as_str()).count();
    let (done, failed) = (count(DocStatus::Done), count(DocStatus::Failed));
    let flagged = rows.iter().filter(|r| r.warning.is_some()).count();
    let ocr: i32 = rows.iter().map(|r| r.ocr_pages).sum();
    println!(
        "{} documents: {done} done ({flagged} flagged), {failed} failed, {} in progress; {ocr} page(s) read by OCR",
        rows.len(),
        rows.len() - done - failed
    );
    Ok(())
}

/// Follow a run until it is finished: a progress bar on a terminal, a plain line per change
/// (at most every `interval`) otherwise.
pub async fn watch_run(pool: &PgPool, run_id: Uuid, interval: Duration, mut stop: watch::Receiver<bool>) -> Result<()> {
    use std::io::IsTerminal;
    let bar = match std::io::stderr().is_terminal() {
        true => Some(progress_bar()?),
        false => None,
    };
    let mut last: Option<Progress> = None;
    loop {
        let p = Progress::load(pool, run_id).await?.with_context(|| format!("no run {run_id}"))?;
        match &bar {
            Some(bar) => {
                bar.set_length(u64::try_from(p.chunks_total).unwrap_or(0));
                bar.set_position(u64::try_from(p.chunks_done).unwrap_or(0));
                bar.set_message(p.line());
                bar.tick();
            }
            None if last.as_ref() != Some(&p) => {
                println!("{} run {run_id}: {}", chrono::Utc::now().format("%H:%M:%S"), p.line())
            }
            None => {}
        }
        if p.finished_at.is_some() {
            if let Some(bar) = &bar {
                bar.finish_with_message(p.line());
            }
            return Ok(());
        }
        last = Some(p);
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = stop.changed() => return Ok(()),
        }
    }
}

fn progress_bar() -> Result<indicatif::ProgressBar> {
    let bar = indicatif::ProgressBar::new(0);
    let style =
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} chunks\n{msg}")
            .context("progress bar template")?;
    bar.set_style(style);
    Ok(bar)
}
