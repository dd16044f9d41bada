//! **model** — the embedding model in libtorch (through `tch`): the only crate that links it.
//!
//! [`gemma3`] is the encoder, written like its block diagram with a `Config` from
//! `config.json`; [`embedder`] the sentence-transformers pipeline around it (mean pooling,
//! Dense layers, normalisation), which implements [`docpipe_batching::Backend`] — what the
//! worker, labels, search and eval use; [`flash`], [`gemm_attention`], [`cpu_norm`] and
//! [`cpu_geglu`] are the kernels it runs on CUDA and on the CPU; [`device`] picks CPU or CUDA
//! and the precision; [`calibrate`] derives a batch budget from the memory available.

pub mod calibrate;
pub mod cpu_geglu;
pub mod cpu_norm;
pub mod device;
pub mod embedder;
pub mod flash;
pub mod gemm_attention;
pub mod gemma3;
#[cfg(cpu_kernels)]
mod shim;

pub use embedder::{EmbedError, Precision, SentenceEmbedder};
pub use gemma3::AttentionImpl;
