//! One file per subcommand; each exposes `run` (or the few functions its subcommand needs).

pub mod aggregate;
pub mod chunks;
pub mod eval;
pub mod eval_ocr;
pub mod fields;
pub mod generate;
pub mod ingest;
pub mod labels;
pub mod publish_raw;
pub mod put;
pub mod report;
pub mod run;
pub mod search;
pub mod status;
pub mod train_clauses;
pub mod worker;
