//! Model parity against sentence-transformers: `tests/golden/embeddinggemma-300m.json` was
//! written by `scripts/make-golden.py` (sentence-transformers, fp32, CPU) on the same model
//! files. Needs the model (`make model`; `DOCPIPE_MODEL` overrides the location).

// Spans are passed as slices of ranges, often of one range each.
#![allow(clippy::single_range_in_vec_init)]

use std::path::PathBuf;

use docpipe_batching::Backend;
use docpipe_model::{AttentionImpl, Precision, SentenceEmbedder};
use serde::Deserialize;
use tch::Device;

mod common;
use common::model_dir;

#[derive(Deserialize)]
struct Golden {
    model_safetensors_sha256: String,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    prompt_name: String,
    text: String,
    input_ids: Vec<u32>,
    embedding: Vec<f32>,
}

fn golden() -> Golden {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden/embeddinggemma-300m.json");
    serde_json::from_str(&std::fs::read_to_string(&path).expect("read golden file")).expect("parse golden file")
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

fn load(precision: Precision) -> SentenceEmbedder {
    SentenceEmbedder::load(&model_dir(), Device::Cpu, precision).expect("load model")
}

/// Each case alone and all cases as one padded batch must match the reference, through
/// `attention`.
fn check(model: &mut SentenceEmbedder, precision: Precision, bound: f64, attention: AttentionImpl) {
    let g = golden();
    assert_eq!(g.model_safetensors_sha256.len(), 64);
    model.set_attention(attention).expect("attention form");
    assert!(g.cases.iter().any(|c| c.input_ids.len() > 1024), "golden set needs a case longer than the 512 window");
    let mut ids = Vec::new();
    for case in &g.cases {
        let got = model.tokenize(Some(&case.prompt_name), &case.text).expect("tokenize");
        assert_eq!(got, case.input_ids, "{}: token ids differ from the reference", case.name);
        ids.push(got);
    }
    let mut worst = 1.0f64;
    for (case, ids) in g.cases.iter().zip(&ids) {
        let emb = model.embed(&[ids.as_slice()]).expect("embed").remove(0);
        let cos = cosine(&emb, &case.embedding);
        eprintln!("{:?} {:<18} {:>5} tokens  cosine {cos:.7}", precision, case.name, ids.len());
        assert!(cos >= bound, "{}: {precision:?} cosine {cos} < {bound}", case.name);
        worst = worst.min(cos);
    }
    let batch: Vec<&[u32]> = ids.iter().map(|v| v.as_slice()).collect();
    let embs = model.embed(&batch).expect("embed batch");
    for (case, emb) in g.cases.iter().zip(&embs) {
        let cos = cosine(emb, &case.embedding);
        assert!(cos >= bound, "{} in a padded batch: {precision:?} cosine {cos} < {bound}", case.name);
        worst = worst.min(cos);
    }
    eprintln!("{precision:?} ({attention}): worst cosine {worst:.7} (bound {bound})");
}

#[test]
fn fp32_matches_sentence_transformers() {
    let mut model = load(Precision::F32);
    assert_eq!(model.attention(), AttentionImpl::PackedBanded, "the CPU default in fp32");
    check(&mut model, Precision::F32, 0.9999, AttentionImpl::PackedBanded);
    check(&mut model, Precision::F32, 0.9999, AttentionImpl::Banded);
}

/// bf16 in the forms the CPU picks: the GEMM attention (no AMX) and packed banded (AMX); and
/// banded on the padded batch (CUDA without FlashAttention).
#[test]
fn bf16_matches_sentence_transformers() {
    let mut model = load(Precision::Bf16);
    let want =
        if docpipe_model::device::cpu_has_amx() { AttentionImpl::PackedBanded } else { AttentionImpl::PackedGemm };
    assert_eq!(model.attention(), want, "the CPU default in bf16");
    check(&mut model, Precision::Bf16, 0.999, AttentionImpl::PackedGemm);
    check(&mut model, Precision::Bf16, 0.999, AttentionImpl::PackedBanded);
    check(&mut model, Precision::Bf16, 0.999, AttentionImpl::Banded);
}

/// Packed tokens (the layout the CUDA path runs FlashAttention on), with libtorch's attention
/// per sequence, with the CPU's GEMM attention and with banded attention per sequence (a long
/// sequence banded with a part-filled last block, shorter ones under a dense window), give
/// the same outputs as the padded dense
/// version: the packing, the positions, the sequence bounds, the band and the scatter back,
/// in a batch of unequal lengths.
#[test]
fn packed_tokens_equal_dense_masked_attention() {
    let g = golden();
    let mut model = load(Precision::F32);
    let long = g.cases.iter().find(|c| c.input_ids.len() > 1024).expect("a long case");
    let prefix: Vec<u32> = long.input_ids[..700].to_vec();
    let short = &g.cases[0].input_ids;
    let batch: Vec<&[u32]> = vec![short, &long.input_ids, &prefix];
    let spans: Vec<&[std::ops::Range<usize>]> = vec![&[0..2], &[10..600, 900..1000], &[]];
    assert!(model.set_attention(AttentionImpl::Packed).is_err(), "no FlashAttention kernel on the CPU");
    model.set_attention(AttentionImpl::Dense).expect("dense attention");
    let dense = model.embed_with_spans(&batch, &spans).expect("dense");
    for attention in [AttentionImpl::PackedReference, AttentionImpl::PackedGemm, AttentionImpl::PackedBanded] {
        model.set_attention(attention).expect("packed layout");
        let packed = model.embed_with_spans(&batch, &spans).expect("packed");
        for (i, ((a, a_spans), (b, b_spans))) in packed.iter().zip(&dense).enumerate() {
            for (x, y) in std::iter::once((a, b)).chain(a_spans.iter().zip(b_spans)) {
                let cos = cosine(x, y);
                let max_diff = x.iter().zip(y).map(|(p, q)| (p - q).abs()).fold(0f32, f32::max);
                eprintln!("sequence {i}: {attention} vs dense cosine {cos:.9}, max |diff| {max_diff:.2e}");
                assert!(cos > 0.999_999 && max_diff < 1e-4, "sequence {i}: {attention} differs from dense");
            }
        }
    }
}

/// The banded sliding-window attention gives the same outputs as the dense masked version,
/// alone and in a padded batch with sequences of different lengths.
#[test]
fn banded_attention_equals_dense_masked_attention() {
    let g = golden();
    let mut model = load(Precision::F32);
    model.set_attention(AttentionImpl::Banded).expect("banded attention");
    let long = g.cases.iter().find(|c| c.input_ids.len() > 1024).expect("a long case");
    // a batch: the long case, a shorter prefix of it, and a short case (padding inside blocks)
    let prefix: Vec<u32> = long.input_ids[..1100].to_vec();
    let short = &g.cases[0].input_ids;
    let batch: Vec<&[u32]> = vec![&long.input_ids, &prefix, short];
    let banded = model.embed(&batch).expect("banded");
    model.set_attention(AttentionImpl::Dense).expect("dense attention");
    let dense = model.embed(&batch).expect("dense");
    for (i, (a, b)) in banded.iter().zip(&dense).enumerate() {
        let cos = cosine(a, b);
        let max_diff = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
        eprintln!("sequence {i}: banded vs dense cosine {cos:.9}, max |diff| {max_diff:.2e}");
        assert!(cos > 0.999_999 && max_diff < 1e-4, "sequence {i}: banded attention differs from dense");
    }
}

/// Late chunking: a span over a whole sequence is its sentence embedding; a span's embedding
/// does not depend on what else is in the batch; spans outside a sequence are refused.
#[test]
fn span_embeddings_pool_inside_the_sequence() {
    let g = golden();
    let model = load(Precision::F32);
    let mut cases: Vec<&Case> = g.cases.iter().filter(|c| c.input_ids.len() < 600).collect();
    cases.sort_by_key(|c| c.input_ids.len());
    let (short, long) = (&cases[0].input_ids, &cases[cases.len() - 1].input_ids);
    assert!(long.len() > short.len() + 10);
    let whole = [0..long.len()];
    let parts = [1..long.len() / 2, long.len() / 3..long.len() - 1];
    let alone = model.embed_with_spans(&[long], &[&parts]).expect("alone");
    let batch = model.embed_with_spans(&[short, long], &[&[0..short.len()], &whole]).expect("batch");
    let sentence = model.embed(&[short]).expect("sentence");
    assert!(cosine(&batch[0].1[0], &sentence[0]) > 0.999_999, "whole span of the padded short sequence");
    assert!(cosine(&batch[1].1[0], &batch[1].0) > 0.999_999, "whole span = sentence embedding");
    let mixed = model.embed_with_spans(&[long, short], &[&parts, &[]]).expect("mixed");
    for (a, b) in alone[0].1.iter().zip(&mixed[0].1) {
        assert!(cosine(a, b) > 0.999_999, "a span's embedding depends on the batch");
    }
    assert!(cosine(&alone[0].1[0], &alone[0].1[1]) < 0.999, "different spans, different embeddings");
    assert!(model.embed_with_spans(&[short], &[&[0..short.len() + 1]]).is_err());
    assert!(model.embed_with_spans(&[short], &[&[3..3]]).is_err());
}
