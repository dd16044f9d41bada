//! `docpipe report [--run R] [-o FILE]`: one self-contained HTML page about a run.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use uuid::Uuid;

use crate::cli::Common;
use crate::cmd::status::resolve_run;
use crate::report::Report;
use crate::setup;

pub async fn run(c: &Common, run: Option<Uuid>, out: Option<PathBuf>) -> Result<()> {
    let pool = setup::db(c).await?;
    let Some(run_id) = resolve_run(&pool, run).await? else {
        bail!("no runs yet: nothing to report");
    };
    let figures = docpipe_store::report::load(&pool, run_id).await?.with_context(|| format!("no run {run_id}"))?;
    let html = Report::new(run_id, figures).html();
    match out {
        Some(p) if p.as_os_str() == "-" => print!("{html}"),
        out => {
            let out = out.unwrap_or_else(|| PathBuf::from(format!("docpipe-report-{run_id}.html")));
            std::fs::write(&out, html).with_context(|| format!("writing {}", out.display()))?;
            println!("{}", out.display());
        }
    }
    Ok(())
}
