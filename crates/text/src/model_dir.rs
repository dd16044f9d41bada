//! A sentence-transformers model directory, read in one place: where it is, its tokenizer
//! (with any bundled truncation and padding turned off: chunking needs every token), its named
//! prompts (`config_sentence_transformers.json`) and its longest sequence (`config.json`).

use std::path::{Path, PathBuf};

use tokenizers::Tokenizer;

/// The model directory's name under `$DOCPIPE_HOME` when none is given.
pub const DEFAULT_MODEL: &str = "embeddinggemma-300m";

#[derive(Debug, thiserror::Error)]
pub enum ModelDirError {
    #[error("no model at {path} (set DOCPIPE_MODEL or --model to a sentence-transformers directory; `make model` fetches EmbeddingGemma-300M)")]
    Missing { path: PathBuf },
    #[error("neither DOCPIPE_MODEL nor HOME is set")]
    NoHome,
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("bad {path}: {message}")]
    Config { path: PathBuf, message: String },
    #[error("cannot load tokenizer {path}: {message}")]
    Tokenizer { path: PathBuf, message: String },
}

/// Where provisioning puts models: `$DOCPIPE_HOME`, else `~/.cache/docpipe` (`None` without
/// either variable).
pub fn docpipe_home() -> Option<PathBuf> {
    std::env::var_os("DOCPIPE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/docpipe")))
}

/// A model directory that has a `config.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelDir {
    path: PathBuf,
}

impl ModelDir {
    /// `explicit` (`--model`, `DOCPIPE_MODEL`), else `$DOCPIPE_HOME/embeddinggemma-300m`, else
    /// `~/.cache/docpipe/embeddinggemma-300m`.
    pub fn resolve(explicit: Option<&Path>) -> Result<Self, ModelDirError> {
        let path = match explicit {
            Some(d) => d.to_path_buf(),
            None => docpipe_home().ok_or(ModelDirError::NoHome)?.join(DEFAULT_MODEL),
        };
        Self::open(&path)
    }

    /// This directory, if it has a `config.json`.
    pub fn open(path: &Path) -> Result<Self, ModelDirError> {
        if !path.join("config.json").exists() {
            return Err(ModelDirError::Missing { path: path.to_path_buf() });
        }
        Ok(Self { path: path.to_path_buf() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn join(&self, file: impl AsRef<Path>) -> PathBuf {
        self.path.join(file)
    }

    /// The directory's name: how the model is labelled on what it produces.
    pub fn name(&self) -> String {
        self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into())
    }

    fn json(&self, file: &str) -> Result<serde_json::Value, ModelDirError> {
        let path = self.join(file);
        let raw =
            std::fs::read_to_string(&path).map_err(|source| ModelDirError::Read { path: path.clone(), source })?;
        serde_json::from_str(&raw).map_err(|e| ModelDirError::Config { path, message: e.to_string() })
    }

    /// `tokenizer.json`, with truncation and padding off.
    pub fn tokenizer(&self) -> Result<Tokenizer, ModelDirError> {
        let path = self.join("tokenizer.json");
        let err = |e: tokenizers::Error| ModelDirError::Tokenizer { path: path.clone(), message: e.to_string() };
        let mut tokenizer = Tokenizer::from_file(&path).map_err(err)?;
        tokenizer.with_truncation(None).map_err(err)?;
        tokenizer.with_padding(None);
        Ok(tokenizer)
    }

    /// The named prompts (`document`, `query`, ...); none when the file is absent.
    pub fn prompts(&self) -> Result<serde_json::Map<String, serde_json::Value>, ModelDirError> {
        if !self.join("config_sentence_transformers.json").exists() {
            return Ok(Default::default());
        }
        let v = self.json("config_sentence_transformers.json")?;
        Ok(v.get("prompts").and_then(|p| p.as_object()).cloned().unwrap_or_default())
    }

    /// One named prompt (empty when the model has none by that name).
    pub fn prompt(&self, name: &str) -> Result<String, ModelDirError> {
        Ok(self.prompts()?.get(name).and_then(|p| p.as_str()).unwrap_or_default().to_string())
    }

    /// `max_position_embeddings` from `config.json`: the longest sequence the model takes.
    pub fn max_positions(&self) -> Result<usize, ModelDirError> {
        let v = self.json("config.json")?;
        v.get("max_position_embeddings").and_then(|m| m.as_u64()).map(|m| m as usize).ok_or_else(|| {
            ModelDirError::Config { path: self.join("config.json"), message: "no max_position_embeddings".into() }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_without_config_is_refused_with_the_way_out() {
        let dir = std::env::temp_dir().join(format!("docpipe-no-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = ModelDir::open(&dir).unwrap_err().to_string();
        assert!(e.contains("DOCPIPE_MODEL") && e.contains("make model"), "{e}");
        std::fs::write(dir.join("config.json"), r#"{"max_position_embeddings": 2048}"#).unwrap();
        std::fs::write(
            dir.join("config_sentence_transformers.json"),
            r#"{"prompts": {"query": "task: search result | query: ", "document": "title: none | text: "}}"#,
        )
        .unwrap();
        let m = ModelDir::open(&dir).unwrap();
        assert_eq!(m.max_positions().unwrap(), 2048);
        assert_eq!(m.prompt("document").unwrap(), "title: none | text: ");
        assert_eq!(m.prompt("classification").unwrap(), "");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
