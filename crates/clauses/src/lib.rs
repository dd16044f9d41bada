//! **clauses** — clause intelligence: which segments of a contract are which CUAD clause.
//!
//! - [`taxonomy`]: the 41 categories, each embedded as a search query;
//! - [`candidates`]: which segments the worker's standalone pass embeds;
//! - [`scorer`]: how a category scores a segment — zero-shot cosine, or a learned probe — the
//!   Rust mirror of the SQL `clause_score` that labels documents in Postgres;
//! - [`gold`]: labelled contracts (`cuad_labels.tsv`), gold clauses located in the text;
//! - [`learn`]: learning every category's scorer from labelled documents;
//! - [`calibrate`]: presence thresholds and expected figures from out-of-fold scores;
//! - [`eval`]: recall@1/@5 and presence precision/recall, as a table;
//! - [`stored`]: categories and scorers in Postgres, labelled documents read back;
//! - [`artifact`]: learned scorers as a versioned file, the shipped one built in;
//! - [`train`]: the segments a training document embeds (positives, a weighted sample);
//! - [`backfill`]: what segments stored by an older docpipe lack.
//!
//! The embedding model comes in through [`docpipe_batching::Backend`].

pub mod artifact;
pub mod backfill;
pub mod calibrate;
pub mod candidates;
pub mod eval;
pub mod gold;
pub mod learn;
pub mod scorer;
pub mod stored;
pub mod taxonomy;
pub mod train;

pub use taxonomy::DEFAULT_THRESHOLD;

/// An error from any path of this library, with what it was doing.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

#[derive(Debug, thiserror::Error)]
pub enum ClausesError {
    #[error("database error while {what}: {source}")]
    Db {
        what: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("{path}: {message}")]
    Labels { path: String, message: String },
    #[error("{what}: {message}")]
    Model { what: String, message: String },
    #[error("{what}: {source}")]
    Load {
        what: String,
        #[source]
        source: BoxError,
    },
    #[error("{0}")]
    Input(String),
}

/// Attach what a statement was doing to its error.
pub(crate) fn db(what: impl Into<String>) -> impl FnOnce(sqlx::Error) -> ClausesError {
    let what = what.into();
    move |source| ClausesError::Db { what, source }
}
