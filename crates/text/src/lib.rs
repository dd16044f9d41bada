//! **text** — from PDF bytes to model inputs: text extraction page by page in an isolated
//! child process ([`extract`]) with OCR for pages without a usable text layer ([`ocr`]), the model directory's tokenizer, prompts and limits read in one
//! place ([`model_dir`]), and the document text cut into chunks and clause segments with the
//! pure arithmetic of `docpipe-chunker` ([`prepare`]).

pub mod extract;
pub mod model_dir;
pub mod ocr;
pub mod prepare;

pub use model_dir::{ModelDir, ModelDirError};
