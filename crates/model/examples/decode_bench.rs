//! Decode-engine throughput on fixed prompts (`make bench-decode` runs it beside llama.cpp).
//!
//! `decode_bench prompts GGUF SAMPLES_DIR OUT.json` writes the prompts as token ids: `prefill`,
//! a contract prompt of 1,500 tokens, and `questions`, 256 chat prompts (a contract excerpt and
//! one of several questions each), so the reference runs the very same ids.
//!
//! `decode_bench run GGUF DTYPE PROMPTS.json` prints JSON lines: prefill tokens/s on the
//! 1,500-token prompt; decode tokens/s at batch 1 (64 new tokens after a question prompt,
//! decode steps only); and, for 8, 32 and 64 concurrent sequences (the first N questions, 64
//! new tokens each, no stop token), generated tokens per second of wall time including their
//! prefill. `BENCH_SEQUENCES=8,32` changes the set (up to 256); `BENCH_MAX_RUNNING` (64),
//! `BENCH_MAX_BATCH_TOKENS` (2048) and `BENCH_KV_BLOCKS` (2048 of 16 tokens) the engine's
//! budget; `BENCH_WEIGHTS=gguf|q4|dense|hybrid[:ROWS]|auto` how the weights are held (gguf, the default here: `Q4_K`/`Q6_K` in the file's blocks; q4:
//! `Q4_K` in libtorch's int4; auto: what the pipeline chooses, its choice printed as `chosen`). Threads: libtorch's (`OMP_NUM_THREADS`).
//! `BENCH_DEVICE=cpu|cuda[:N]` picks the device (on CUDA every choice of weights is dense, and
//! is named so).
//!
//! For a machine the model file cannot reach (the GPU machine: `deploy/gpu-decode-bench.sh`):
//! `decode_bench skeleton GGUF OUT` copies the file's header alone (metadata, the tokenizer,
//! the tensor table: a few MB), and `decode_bench random SKELETON OUT.gguf [SEED]` writes a
//! GGUF of that layout with seeded random weights (blocks with small scales, norms near 1),
//! so speed and memory are those of the real model. `decode_bench check GGUF PROMPTS.json`
//! runs 8 question prompts greedily (16 new tokens, fp32, dense weights) on the CPU and on
//! `BENCH_DEVICE` and prints how many continuations and first tokens are the same.
use std::path::Path;
use std::time::Instant;

use docpipe_model::chat::{ChatTokenizer, Message};
use docpipe_model::engine::{Engine, EngineConfig, Request};
use docpipe_model::gguf::Gguf;
use docpipe_model::qwen2::{Qwen2, Weights};
use docpipe_model::sampling::Sampling;
use docpipe_model::{device, Precision};
use serde_json::json;

const PREFILL: usize = 1500;
const NEW: usize = 64;
const QUESTIONS: [&str; 8] = [
    "Who are the parties?",
    "Which law governs this agreement?",
    "When does it take effect?",
    "When does it expire?",
    "Does it renew automatically?",
    "What is the notice period for termination?",
    "Can either party assign it?",
    "Where are disputes resolved?",
];

fn main() {
    let keep_heap = device::keep_freed_memory();
    std::thread::spawn(move || run(keep_heap)).join().expect("bench thread panicked");
}

fn die(msg: String) -> ! {
    eprintln!("decode_bench: {msg}");
    std::process::exit(1)
}

fn run(keep_heap: bool) {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("prompts") if args.len() == 5 => prompts(&args[2], &args[3], &args[4]),
        Some("run") if args.len() == 5 => bench(&args[2], &args[3], &args[4], keep_heap),
        Some("skeleton") if args.len() == 4 => skeleton(&args[2], &args[3]),
        Some("random") if (4..=5).contains(&args.len()) => random(
            &args[2],
            &args[3],
            args.get(4).map_or(1, |s| s.parse().unwrap_or_else(|e| die(format!("SEED: {e}")))),
        ),
        Some("check") if args.len() == 4 => check(&args[2], &args[3]),
        _ => die("usage: decode_bench prompts GGUF SAMPLES_DIR OUT.json | run GGUF fp32|bf16 PROMPTS.json \
                  | skeleton GGUF OUT | random SKELETON OUT.gguf [SEED] | check GGUF PROMPTS.json"
            .into()),
    }
}

fn bench_device() -> tch::Device {
    let choice = std::env::var("BENCH_DEVICE").unwrap_or_else(|_| "cpu".into());
    device::resolve(choice.parse().unwrap_or_else(|e: String| die(format!("BENCH_DEVICE: {e}"))))
        .unwrap_or_else(|e| die(e.to_string()))
}

/// The header of `gguf` (up to its data section) into `out`.
fn skeleton(gguf: &str, out: &str) {
    use std::io::Read;
    let g = Gguf::open(Path::new(gguf)).unwrap_or_else(|e| die(e.to_string()));
    let mut header = Vec::new();
    std::fs::File::open(gguf)
        .and_then(|f| f.take(g.data_start()).read_to_end(&mut header))
        .unwrap_or_else(|e| die(format!("{gguf}: {e}")));
    std::fs::write(out, &header).unwrap_or_else(|e| die(format!("{out}: {e}")));
    println!("{}", json!({"what": "skeleton", "bytes": header.len(), "tensors": g.tensors.len()}));
}

/// A GGUF with `skeleton`'s header and seeded random data: each block's scales are set small
/// (f16 6.1e-5, so weights stay within a few hundredths), F32/F16 tensors get 1 ± 0.01 for
/// norms and ± 0.01 elsewhere.
fn random(skeleton: &str, out: &str, seed: u64) {
    use docpipe_model::gguf::GgmlType as T;
    use std::io::{Seek, SeekFrom, Write};
    let g = Gguf::open_header(Path::new(skeleton)).unwrap_or_else(|e| die(e.to_string()));
    let header = std::fs::read(skeleton).unwrap_or_else(|e| die(format!("{skeleton}: {e}")));
    let start = g.data_start() as usize;
    if header.len() < start {
        die(format!("{skeleton}: {} bytes, shorter than its header ({start})", header.len()));
    }
    let mut f = std::fs::File::create(out).unwrap_or_else(|e| die(format!("{out}: {e}")));
    f.write_all(&header[..start]).unwrap_or_else(|e| die(format!("{out}: {e}")));
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        // xorshift64*
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let small = half::f16::from_bits(0x0400).to_bits().to_le_bytes(); // 6.1e-5, the least normal f16
    for t in &g.tensors {
        let mut data = vec![0u8; t.bytes() as usize];
        for chunk in data.chunks_mut(8) {
            let r = next().to_le_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
        let norm = t.name.contains("norm");
        let value = |r: u64| -> f32 {
            let u = (r >> 40) as f32 / (1u64 << 24) as f32 * 0.02 - 0.01;
            if norm {
                1.0 + u
            } else {
                u
            }
        };
        let (_, block) = t.kind.block();
        match t.kind {
            T::F32 => data.chunks_mut(4).for_each(|c| c.copy_from_slice(&value(next()).to_le_bytes())),
            T::F16 => {
                data.chunks_mut(2).for_each(|c| c.copy_from_slice(&half::f16::from_f32(value(next())).to_le_bytes()))
            }
            T::BF16 => {
                data.chunks_mut(2).for_each(|c| c.copy_from_slice(&half::bf16::from_f32(value(next())).to_le_bytes()))
            }
            // d (and dmin) first
            T::Q4_0 | T::Q5_0 | T::Q8_0 => data.chunks_mut(block).for_each(|b| b[..2].copy_from_slice(&small)),
            T::Q4K | T::Q5K => data.chunks_mut(block).for_each(|b| {
                b[..2].copy_from_slice(&small);
                b[2..4].copy_from_slice(&small);
            }),
            // ql, qh, 16 signed scales, then d
            T::Q6K => data.chunks_mut(block).for_each(|b| b[block - 2..].copy_from_slice(&small)),
        }
        f.seek(SeekFrom::Start(start as u64 + t.offset)).unwrap_or_else(|e| die(format!("{out}: {e}")));
        f.write_all(&data).unwrap_or_else(|e| die(format!("{out}: {e}")));
    }
    f.flush().unwrap_or_else(|e| die(format!("{out}: {e}")));
    drop(f);
    let check = Gguf::open(Path::new(out)).unwrap_or_else(|e| die(e.to_string()));
    println!("{}", json!({"what": "random", "tensors": check.tensors.len(), "seed": seed}));
}

/// Greedy continuations of 8 question prompts on the CPU and on `BENCH_DEVICE`, fp32, dense.
fn check(gguf: &str, prompts: &str) {
    let questions = read_prompts(prompts).1;
    let g = Gguf::open(Path::new(gguf)).unwrap_or_else(|e| die(e.to_string()));
    let run_on = |device: tch::Device| -> Vec<Vec<u32>> {
        let model = Qwen2::load(&g, device, tch::Kind::Float, Weights::Dense).unwrap_or_else(|e| die(e.to_string()));
        let cfg = EngineConfig {
            block_size: 16,
            blocks: 8 * 512 / 16,
            max_batch_tokens: 2048,
            max_running: 8,
            kv_kind: tch::Kind::Float,
            prefix_reuse: true,
        };
        let mut engine = Engine::new(model, cfg).unwrap_or_else(|e| die(e.to_string()));
        for (i, q) in questions.iter().take(8).enumerate() {
            engine.add(greedy(i as u64, q, 16)).unwrap_or_else(|e| die(e.to_string()));
        }
        let mut out = vec![Vec::new(); questions.len().min(8)];
        for e in engine.run().unwrap_or_else(|e| die(e.to_string())) {
            if let docpipe_model::engine::Event::Done { id, tokens, .. } = e {
                out[id as usize] = tokens;
            }
        }
        out
    };
    let device = bench_device();
    let (cpu, dev) = (run_on(tch::Device::Cpu), run_on(device));
    let same = cpu.iter().zip(&dev).filter(|(a, b)| a == b).count();
    let first = cpu.iter().zip(&dev).filter(|(a, b)| a.first() == b.first()).count();
    println!(
        "{}",
        json!({"what": "check", "device": format!("{device:?}"), "prompts": cpu.len(), "identical": same,
               "first_token_same": first})
    );
}

/// `new` tokens greedily after `prompt`, no stop token.
fn greedy(id: u64, prompt: &[u32], new: usize) -> Request {
    Request {
        id,
        prompt: prompt.to_vec(),
        sampling: Sampling::Greedy,
        max_new_tokens: new,
        stop: vec![],
        constraint: None,
    }
}

/// The prefill prompt and the question prompts of a `prompts` file.
fn read_prompts(prompts: &str) -> (Vec<u32>, Vec<Vec<u32>>) {
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(prompts).unwrap_or_else(|e| die(format!("{prompts}: {e}"))))
            .unwrap_or_else(|e| die(format!("{prompts}: {e}")));
    let ids = |v: &serde_json::Value| -> Vec<u32> {
        v.as_array().map(|a| a.iter().filter_map(|x| x.as_u64()).map(|x| x as u32).collect()).unwrap_or_default()
    };
    let questions = doc["questions"].as_array().map(|a| a.iter().map(ids).collect()).unwrap_or_default();
    (ids(&doc["prefill"]), questions)
}

fn prompts(gguf: &str, samples: &str, out: &str) {
    let g = Gguf::open(Path::new(gguf)).unwrap_or_else(|e| die(e.to_string()));
    let tok = ChatTokenizer::from_gguf(&g).unwrap_or_else(|e| die(e.to_string()));
    let mut files: Vec<_> = std::fs::read_dir(samples)
        .unwrap_or_else(|e| die(format!("{samples}: {e}")))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    let texts: Vec<String> = files.iter().map(|p| std::fs::read_to_string(p).unwrap_or_default()).collect();
    let all = texts.join("\n\n");
    let contract = tok
        .chat_prompt(&[Message::new("user", &format!("{all}\n\nSummarise this agreement."))])
        .unwrap_or_else(|e| die(e.to_string()));
    let mut prefill = tok.encode(&contract).unwrap_or_else(|e| die(e.to_string()));
    if prefill.len() < PREFILL {
        die(format!("the samples give {} tokens, fewer than {PREFILL}", prefill.len()));
    }
    prefill.truncate(PREFILL);
    // each question about a 400-character excerpt of a sample, cycling through both
    let mut questions = Vec::new();
    // 256 questions: the GPU takes more concurrent sequences (the first 64 are as they were)
    for i in 0..256 {
        let text = &texts[i % texts.len()];
        let start = (i * 97) % text.len().saturating_sub(400).max(1);
        let excerpt: String = text.chars().skip(start).take(400).collect();
        let q = QUESTIONS[i % QUESTIONS.len()];
        let p = tok
            .chat_prompt(&[Message::new("user", &format!("{excerpt}\n\n{q}"))])
            .unwrap_or_else(|e| die(e.to_string()));
        questions.push(tok.encode(&p).unwrap_or_else(|e| die(e.to_string())));
    }
    let doc = json!({ "prefill": prefill, "questions": questions, "new_tokens": NEW });
    std::fs::write(out, doc.to_string()).unwrap_or_else(|e| die(format!("{out}: {e}")));
}

fn bench(gguf: &str, dtype: &str, prompts: &str, keep_heap: bool) {
    let (prefill, questions) = read_prompts(prompts);
    let precision: Precision = dtype.parse().unwrap_or_else(|e: String| die(e));
    let t0 = Instant::now();
    let g = Gguf::open(Path::new(gguf)).unwrap_or_else(|e| die(e.to_string()));
    let weights: Weights =
        std::env::var("BENCH_WEIGHTS").unwrap_or_else(|_| "gguf".into()).parse().unwrap_or_else(|e: String| die(e));
    let device = bench_device();
    let model = Qwen2::load(&g, device, precision.kind(), weights).unwrap_or_else(|e| die(e.to_string()));
    let weight_bytes = model.weight_bytes();
    let load_s = t0.elapsed().as_secs_f64();
    let sequences: Vec<usize> = std::env::var("BENCH_SEQUENCES")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![8, 32, 64]);
    let knob = |name: &str, default: usize| -> usize {
        std::env::var(name).map_or(default, |v| v.parse().unwrap_or_else(|e| die(format!("{name}: {e}"))))
    };
    let cfg = EngineConfig {
        block_size: 16,
        blocks: knob("BENCH_KV_BLOCKS", 64 * 512 / 16),
        max_batch_tokens: knob("BENCH_MAX_BATCH_TOKENS", 2048),
        max_running: knob("BENCH_MAX_RUNNING", 64),
        kv_kind: std::env::var("BENCH_KV_DTYPE")
            .unwrap_or_else(|_| "auto".into())
            .parse::<docpipe_model::kv_cache::KvDtype>()
            .unwrap_or_else(|e| die(e))
            .kind(precision.kind()),
        prefix_reuse: true,
    };
    let mut engine = Engine::new(model, cfg).unwrap_or_else(|e| die(e.to_string()));
    let kv_bytes_per_token = engine.cache().bytes_per_token();
    let (weights_name, chosen) = (weights.to_string(), engine.model().weights().to_string());
    let line = |mut v: serde_json::Value| {
        v["weights"] = json!(weights_name);
        v["chosen"] = json!(chosen);
        v["device"] = json!(format!("{device:?}"));
        println!("{v}")
    };
    line(json!({"impl": "docpipe", "dtype": dtype, "what": "load", "seconds": load_s, "weight_bytes": weight_bytes,
                "kv_bytes_per_token": kv_bytes_per_token, "keep_heap": keep_heap}));
    // warm-up; on a GPU also a prompt as long as the timed one (reversed, so that no block of
    // it is in the prefix cache), so that first-use costs (the allocator's growth, kernel
    // selection for the shape) stay out of the timed pass
    engine.add(greedy(0, &questions[0], 4)).unwrap_or_else(|e| die(e.to_string()));
    if device != tch::Device::Cpu {
        let reversed: Vec<u32> = prefill.iter().rev().copied().collect();
        engine.add(greedy(u64::MAX, &reversed, 1)).unwrap_or_else(|e| die(e.to_string()));
    }
    engine.run().unwrap_or_else(|e| die(e.to_string()));

    // prefill: the 1,500-token prompt in one pass, one token generated
    engine.stats = Default::default();
    engine.add(greedy(1, &prefill, 1)).unwrap_or_else(|e| die(e.to_string()));
    let t = Instant::now();
    engine.run().unwrap_or_else(|e| die(e.to_string()));
    let s = t.elapsed().as_secs_f64();
    line(json!({"impl": "docpipe", "dtype": dtype, "what": "prefill", "tokens": prefill.len(), "seconds": s,
                "tokens_per_s": prefill.len() as f64 / s}));

    // decode at batch 1: decode steps only
    engine.stats = Default::default();
    engine.add(greedy(2, &questions[0], NEW)).unwrap_or_else(|e| die(e.to_string()));
    engine.run().unwrap_or_else(|e| die(e.to_string()));
    let st = &engine.stats;
    line(json!({"impl": "docpipe", "dtype": dtype, "what": "decode", "sequences": 1, "tokens": st.decode_tokens,
                "seconds": st.decode_time.as_secs_f64(),
                "tokens_per_s": st.decode_tokens as f64 / st.decode_time.as_secs_f64()}));

    for &n in &sequences {
        engine.stats = Default::default();
        let n = n.min(questions.len());
        for (i, q) in questions.iter().take(n).enumerate() {
            engine.add(greedy(100 + i as u64, q, NEW)).unwrap_or_else(|e| die(e.to_string()));
        }
        let t = Instant::now();
        engine.run().unwrap_or_else(|e| die(e.to_string()));
        let s = t.elapsed().as_secs_f64();
        let generated = (n * NEW) as f64;
        let st = &engine.stats;
        line(json!({"impl": "docpipe", "dtype": dtype, "what": "concurrent", "sequences": n, "generated": generated,
                    "seconds": s, "tokens_per_s": generated / s, "preemptions": st.preemptions,
                    "decode_steps_s": st.decode_time.as_secs_f64(), "prefill_s": st.prefill_time.as_secs_f64()}));
    }
}
