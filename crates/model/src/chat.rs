//! The tokenizer and chat template a GGUF file carries, for the generative model.
//!
//! A `gpt2`-type GGUF vocabulary is byte-level BPE: `tokenizer.ggml.tokens` (ids in order),
//! `tokenizer.ggml.merges` ("a b" per merge, by rank) and `tokenizer.ggml.token_type`
//! (1 normal, 3 control, 4 user-defined, 5 unused). `tokenizer.ggml.pre` names the
//! pre-tokenizer's split pattern; control and user-defined tokens (`<|im_start|>`, …) are
//! matched whole in the text. `tokenizer.chat_template` is a Jinja template, rendered here
//! with `minijinja` exactly as transformers' `apply_chat_template` renders it.

use std::sync::Arc;

use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::normalizers::unicode::NFC;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};

use crate::constrain::TokenTexts;
use crate::gguf::{Gguf, GgufError};

#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("chat template: {0}")]
    Template(String),
}

/// The split patterns of the pre-tokenizers we know, by `tokenizer.ggml.pre`.
fn split_pattern(pre: &str) -> Option<&'static str> {
    match pre {
        // Qwen2: GPT-4's pattern with single digits
        "qwen2" => Some(
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ),
        _ => None,
    }
}

/// One chat message.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn new(role: &str, content: &str) -> Self {
        Self { role: role.into(), content: content.into() }
    }
}

pub struct ChatTokenizer {
    tokenizer: Tokenizer,
    template: Option<String>,
    /// Tokens that end a generation.
    pub stop_ids: Vec<u32>,
    pub vocab_size: usize,
    /// Control, user-defined and unused tokens.
    special: std::collections::HashSet<u32>,
}

impl ChatTokenizer {
    pub fn from_gguf(g: &Gguf) -> Result<Self, ChatError> {
        let model = g.str("tokenizer.ggml.model")?;
        if model != "gpt2" {
            return Err(ChatError::Tokenizer(format!("tokenizer.ggml.model {model:?} (only byte-level BPE, gpt2)")));
        }
        let pre = g.get("tokenizer.ggml.pre").and_then(|v| v.as_str()).unwrap_or("default");
        let pattern = split_pattern(pre)
            .ok_or_else(|| ChatError::Tokenizer(format!("pre-tokenizer {pre:?} is not one docpipe knows")))?;
        let tokens = g.strings("tokenizer.ggml.tokens")?;
        let types = g.ints("tokenizer.ggml.token_type")?;
        if types.len() != tokens.len() {
            return Err(ChatError::Tokenizer(format!("{} token types for {} tokens", types.len(), tokens.len())));
        }
        let merges = g
            .strings("tokenizer.ggml.merges")?
            .into_iter()
            .map(|m| {
                m.split_once(' ')
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .ok_or_else(|| ChatError::Tokenizer(format!("merge {m:?} is not two tokens")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let vocab: Vocab = tokens.iter().enumerate().map(|(i, t)| (t.to_string(), i as u32)).collect();
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(|e| ChatError::Tokenizer(format!("building the BPE model: {e}")))?;
        let mut tokenizer = Tokenizer::new(bpe);
        let split = Split::new(SplitPattern::Regex(pattern.into()), SplitDelimiterBehavior::Isolated, false)
            .map_err(|e| ChatError::Tokenizer(format!("split pattern: {e}")))?;
        tokenizer
            .with_normalizer(Some(NFC))
            .map_err(|e| ChatError::Tokenizer(e.to_string()))?
            .with_pre_tokenizer(Some(Sequence::new(vec![split.into(), ByteLevel::new(false, false, false).into()])))
            .with_decoder(Some(ByteLevelDecoder::default()));
        let special: Vec<AddedToken> = tokens
            .iter()
            .zip(&types)
            .filter(|(_, &t)| t == 3 || t == 4)
            .map(|(tok, &t)| AddedToken::from(tok.to_string(), t == 3).normalized(false))
            .collect();
        tokenizer.add_special_tokens(special).map_err(|e| ChatError::Tokenizer(format!("special tokens: {e}")))?;
        let id = |key: &str| g.get(key).and_then(|v| v.as_u64()).map(|v| v as u32);
        let mut stop_ids: Vec<u32> =
            [id("tokenizer.ggml.eos_token_id"), id("tokenizer.ggml.eot_token_id")].into_iter().flatten().collect();
        // the end-of-text control token ends a generation too (llama.cpp's end-of-generation set)
        for name in ["<|endoftext|>", "<|im_end|>"] {
            if let Some(i) = tokens.iter().position(|t| *t == name) {
                if types[i] == 3 && !stop_ids.contains(&(i as u32)) {
                    stop_ids.push(i as u32);
                }
            }
        }
        let template = g.get("tokenizer.chat_template").and_then(|v| v.as_str()).map(str::to_string);
        let special = types.iter().enumerate().filter(|(_, &t)| t != 1).map(|(i, _)| i as u32).collect();
        Ok(Self { tokenizer, template, stop_ids, vocab_size: tokens.len(), special })
    }

    /// Token ids of `text`; control tokens written in it (`<|im_start|>`) are single tokens.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, ChatError> {
        let enc = self.tokenizer.encode(text, false).map_err(|e| ChatError::Tokenizer(e.to_string()))?;
        Ok(enc.get_ids().to_vec())
    }

    /// The text of `ids`, control tokens included.
    pub fn decode(&self, ids: &[u32]) -> Result<String, ChatError> {
        self.tokenizer.decode(ids, false).map_err(|e| ChatError::Tokenizer(e.to_string()))
    }

    /// Each token's text alone, for constrained decoding: `None` for control and unused
    /// tokens and for byte-level pieces that are not whole UTF-8 characters.
    pub fn token_texts(&self) -> TokenTexts {
        let texts = (0..self.vocab_size as u32)
            .map(|id| {
                if self.special.contains(&id) {
                    return None;
                }
                self.tokenizer.decode(&[id], false).ok().filter(|t| !t.contains('\u{fffd}'))
            })
            .collect();
        Arc::new(texts)
    }

    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.tokenizer.token_to_id(token)
    }

    /// The prompt for `messages` by the model's chat template, ending with the assistant's
    /// turn opened (`add_generation_prompt`).
    pub fn chat_prompt(&self, messages: &[Message]) -> Result<String, ChatError> {
        let template = self
            .template
            .as_deref()
            .ok_or_else(|| ChatError::Template("the GGUF has no tokenizer.chat_template".into()))?;
        let mut env = minijinja::Environment::new();
        env.add_template("chat", template).map_err(|e| ChatError::Template(e.to_string()))?;
        let t = env.get_template("chat").map_err(|e| ChatError::Template(e.to_string()))?;
        t.render(minijinja::context! { messages => messages, add_generation_prompt => true })
            .map_err(|e| ChatError::Template(e.to_string()))
    }
}

/// Turns generated token ids into text as they come: holds back tokens until they decode to
/// whole UTF-8 characters (a byte-level token can end inside one). Byte-level text is the
/// concatenation of its tokens' bytes, so only the tokens not yet shown are decoded.
pub struct TextStream {
    pending: Vec<u32>,
}

impl Default for TextStream {
    fn default() -> Self {
        Self::new()
    }
}

impl TextStream {
    pub fn new() -> Self {
        Self { pending: Vec::new() }
    }

    /// The new text that `id` completes (may be empty).
    pub fn push(&mut self, tok: &ChatTokenizer, id: u32) -> Result<String, ChatError> {
        self.pending.push(id);
        let text = tok.decode(&self.pending)?;
        // an incomplete character decodes to U+FFFD; wait for the rest (at most 3 more bytes)
        if text.ends_with('\u{fffd}') && self.pending.len() < 4 {
            return Ok(String::new());
        }
        self.pending.clear();
        Ok(text)
    }
}
