//! `docpipe-extract extract-pdf [--max-pages N]`: the text-layer extractor child
//! ([`docpipe_text::extract`]), as a binary of its own. `docpipe extract-pdf` does the same, but
//! starting the docpipe binary initialises libtorch first (about 0.2 s of CPU on every
//! document); this one links no model. Ingest runs it when it lies beside the docpipe binary
//! (or `DOCPIPE_EXTRACTOR` names it).
//!
//! It allocates through mimalloc: pdf-extract's content-stream parsing allocates small and
//! often, and glibc's malloc and free took about 28 % of the child's time on a heavy contract
//! (docs/benchmarks.md, "The text extractor's allocator").

use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let mut max_pages = docpipe_contract::defaults::MAX_PAGES;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "extract-pdf" => {}
            "--max-pages" => match args.next().and_then(|v| v.parse().ok()) {
                Some(n) => max_pages = n,
                None => return usage("--max-pages needs a number"),
            },
            other => return usage(&format!("unexpected argument {other:?}")),
        }
    }
    match docpipe_text::extract::child_main(max_pages) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("docpipe-extract: {e}");
            ExitCode::FAILURE
        }
    }
}

fn usage(why: &str) -> ExitCode {
    eprintln!("docpipe-extract: {why}\nusage: docpipe-extract extract-pdf [--max-pages N] < file.pdf");
    ExitCode::from(2)
}
