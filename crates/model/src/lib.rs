//! **model** — the embedding model in libtorch (through `tch`): the only crate that links it.
//!
//! [`gemma3`] is the encoder, written like its block diagram with a `Config` from
//! `config.json`; [`embedder`] the sentence-transformers pipeline around it (mean pooling,
//! Dense layers, normalisation), which implements [`docpipe_batching::Backend`] — what the
//! worker, labels, search and eval use; [`flash`], [`gemm_attention`], [`cpu_norm`] and
//! [`cpu_geglu`] are the kernels it runs on CUDA and on the CPU; [`device`] picks CPU or CUDA
//! and the precision; [`calibrate`] derives a batch budget from the memory available.
//!
//! The generative side: [`gguf`] reads llama.cpp's model files (metadata, tensors, the
//! quantized block formats) and [`kquant`] multiplies by their 4- and 6-bit matrices as they
//! are; [`cpu_decode`] is the decoder's attention on the CPU (bias, RoPE and the cache store
//! in one call; decode steps read the paged cache in place); [`chat`] builds the tokenizer and renders the chat template they
//! carry; [`qwen2`] is the decoder; [`kv_cache`] the paged KV cache with prefix sharing;
//! [`sampling`] picks tokens, [`beam`] keeps the best hypotheses of a beam search, [`constrain`] keeps them to a JSON schema; [`engine`] schedules
//! requests with continuous batching.

pub mod beam;
pub mod calibrate;
pub mod chat;
pub mod constrain;
pub mod cpu_decode;
pub mod cpu_geglu;
pub mod cpu_norm;
pub mod device;
pub mod embedder;
pub mod engine;
pub mod flash;
pub mod gemm_attention;
pub mod gemma3;
pub mod gguf;
pub mod int4;
pub mod kquant;
pub mod kv_cache;
pub mod qwen2;
pub mod sampling;
#[cfg(cpu_kernels)]
mod shim;

pub use embedder::{EmbedError, Precision, SentenceEmbedder};
pub use gemma3::AttentionImpl;
