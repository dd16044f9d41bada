//! The values a document's `status` and a failure's `stage` and `class` take, as stored in
//! Postgres (the `documents` and `failures` tables).

use std::fmt;

/// Where a document is in the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocStatus {
    /// Ingest is downloading and extracting it.
    Extracting,
    /// Its chunks are published; the aggregator counts them in.
    Embedding,
    /// Every chunk is stored (the transition happens once).
    Done,
    /// It failed with a reason (see `failures`).
    Failed,
}

impl DocStatus {
    pub const ALL: [DocStatus; 4] = [DocStatus::Extracting, DocStatus::Embedding, DocStatus::Done, DocStatus::Failed];

    pub fn as_str(self) -> &'static str {
        match self {
            DocStatus::Extracting => "extracting",
            DocStatus::Embedding => "embedding",
            DocStatus::Done => "done",
            DocStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<DocStatus> {
        Self::ALL.into_iter().find(|d| d.as_str() == s)
    }
}

impl fmt::Display for DocStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The stage a document failed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Fetch,
    Extract,
    Tokenize,
    Embed,
    Store,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Fetch => "fetch",
            Stage::Extract => "extract",
            Stage::Tokenize => "tokenize",
            Stage::Embed => "embed",
            Stage::Store => "store",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether trying again could help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    Retryable,
    Permanent,
}

impl FailureClass {
    pub fn of(retryable: bool) -> Self {
        if retryable {
            FailureClass::Retryable
        } else {
            FailureClass::Permanent
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::Retryable => "retryable",
            FailureClass::Permanent => "permanent",
        }
    }
}

/// Why a document failed, as recorded in `documents.error` (`stage: message`) and `failures`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub stage: Stage,
    pub class: FailureClass,
    pub message: String,
    /// Attempts made (a retryable failure is recorded once its retries are exhausted).
    pub attempts: u32,
}

impl Failure {
    pub fn permanent(stage: Stage, message: impl Into<String>) -> Self {
        Self { stage, class: FailureClass::Permanent, message: message.into(), attempts: 1 }
    }

    /// What `documents.error` holds.
    pub fn summary(&self) -> String {
        format!("{}: {}", self.stage, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_round_trips() {
        for s in DocStatus::ALL {
            assert_eq!(DocStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(DocStatus::parse("queued"), None);
        assert_eq!(Failure::permanent(Stage::Extract, "no text").summary(), "extract: no text");
    }
}
