use crate::fixture::Run;
use crate::support::docpipe;

/// `docpipe search` finds the termination clauses of the long contract, and refuses a clause
/// category that does not exist.
pub async fn search_finds_clauses_and_refuses_unknown_categories(run: &Run) {
    let out = docpipe(&["search", "termination on written notice", "--bucket", &run.bucket, "--top", "3"], &run.prefix);
    let hits = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && hits.contains("long-supply-agreement.pdf  page"), "{hits}");
    let out = docpipe(&["search", "x", "--category", "No Such Clause"], &run.prefix);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("unknown clause category"), "{stderr}");
}
