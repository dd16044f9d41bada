//! **contract** — what the stages of docpipe agree on, defined once: the messages they
//! exchange ([`messages`], with their schema version), where a chunk's tokens sit in its model
//! input ([`layout`]), the status values a document and a failure take ([`status`]), and the
//! defaults every role shares ([`defaults`]). The ownership rule itself is the chunker's
//! ([`docpipe_chunker::owns`]); this crate applies it to the messages.
//!
//! Pure data and arithmetic: no I/O, no async, nothing that a stage does.

pub mod defaults;
pub mod layout;
pub mod messages;
pub mod status;
