//! What the worker's integration tests share.

use std::path::PathBuf;

/// The model directory: `DOCPIPE_MODEL`, else `$DOCPIPE_HOME` or `~/.cache/docpipe`.
pub fn model_dir() -> PathBuf {
    let dir = std::env::var_os("DOCPIPE_MODEL").map(PathBuf::from).unwrap_or_else(|| {
        let home = std::env::var_os("DOCPIPE_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/docpipe"));
        home.join("embeddinggemma-300m")
    });
    assert!(
        dir.join("model.safetensors").exists(),
        "model not found at {} — run `make model` or set DOCPIPE_MODEL",
        dir.display()
    );
    dir
}
