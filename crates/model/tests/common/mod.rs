//! What the worker's integration tests share.

use std::path::PathBuf;

fn docpipe_home() -> PathBuf {
    docpipe_text::model_dir::docpipe_home().expect("DOCPIPE_HOME or HOME")
}

/// The model directory: `DOCPIPE_MODEL`, else `$DOCPIPE_HOME` or `~/.cache/docpipe`.
#[allow(dead_code)]
pub fn model_dir() -> PathBuf {
    let dir = std::env::var_os("DOCPIPE_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| docpipe_home().join("embeddinggemma-300m"));
    assert!(
        dir.join("model.safetensors").exists(),
        "model not found at {} — run `make model` or set DOCPIPE_MODEL",
        dir.display()
    );
    dir
}

/// The small decoder model for tests: `DOCPIPE_DECODER_SMALL`, else
/// `$DOCPIPE_HOME/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf`.
#[allow(dead_code)]
pub fn small_decoder() -> PathBuf {
    let path = std::env::var_os("DOCPIPE_DECODER_SMALL")
        .map(PathBuf::from)
        .unwrap_or_else(|| docpipe_home().join("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"));
    assert!(path.exists(), "decoder model not found at {} — run `make decoder-small`", path.display());
    path
}
