//! Decode-engine throughput on fixed prompts (`make bench-decode` runs it beside llama.cpp).
//!
//! `decode_bench prompts GGUF SAMPLES_DIR OUT.json` writes the prompts as token ids: `prefill`,
//! a contract prompt of 1,500 tokens, and `questions`, 64 chat prompts (a contract excerpt and
//! one of several questions each), so the reference runs the very same ids.
//!
//! `decode_bench run GGUF DTYPE PROMPTS.json` prints JSON lines: prefill tokens/s on the
//! 1,500-token prompt; decode tokens/s at batch 1 (64 new tokens after a question prompt,
//! decode steps only); and, for 8, 32 and 64 concurrent sequences (the first N questions, 64
//! new tokens each, no stop token), generated tokens per second of wall time including their
//! prefill. `BENCH_SEQUENCES=8,32` changes the set; `BENCH_WEIGHTS=gguf|q4|dense|hybrid[:ROWS]|auto`
//! how the weights are held (gguf, the default here: `Q4_K`/`Q6_K` in the file's blocks; q4:
//! `Q4_K` in libtorch's int4; auto: what the pipeline chooses, its choice printed as `chosen`). Threads: libtorch's (`OMP_NUM_THREADS`).
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
        _ => die("usage: decode_bench prompts GGUF SAMPLES_DIR OUT.json | run GGUF fp32|bf16 PROMPTS.json".into()),
    }
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
    for i in 0..64 {
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
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(prompts).unwrap_or_else(|e| die(format!("{prompts}: {e}"))))
            .unwrap_or_else(|e| die(format!("{prompts}: {e}")));
    let ids = |v: &serde_json::Value| -> Vec<u32> {
        v.as_array().map(|a| a.iter().filter_map(|x| x.as_u64()).map(|x| x as u32).collect()).unwrap_or_default()
    };
    let prefill = ids(&doc["prefill"]);
    let questions: Vec<Vec<u32>> = doc["questions"].as_array().map(|a| a.iter().map(ids).collect()).unwrap_or_default();
    let precision: Precision = dtype.parse().unwrap_or_else(|e: String| die(e));
    let t0 = Instant::now();
    let g = Gguf::open(Path::new(gguf)).unwrap_or_else(|e| die(e.to_string()));
    let weights: Weights =
        std::env::var("BENCH_WEIGHTS").unwrap_or_else(|_| "gguf".into()).parse().unwrap_or_else(|e: String| die(e));
    let model = Qwen2::load(&g, tch::Device::Cpu, precision.kind(), weights).unwrap_or_else(|e| die(e.to_string()));
    let weight_bytes = model.weight_bytes();
    let load_s = t0.elapsed().as_secs_f64();
    let sequences: Vec<usize> = std::env::var("BENCH_SEQUENCES")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![8, 32, 64]);
    let cfg = EngineConfig {
        block_size: 16,
        blocks: 64 * 512 / 16,
        max_batch_tokens: 2048,
        max_running: 64,
        kv_kind: std::env::var("BENCH_KV_DTYPE")
            .unwrap_or_else(|_| "auto".into())
            .parse::<docpipe_model::kv_cache::KvDtype>()
            .unwrap_or_else(|e| die(e))
            .kind(precision.kind()),
        prefix_reuse: true,
    };
    let mut engine = Engine::new(model, cfg).unwrap_or_else(|e| die(e.to_string()));
    let kv_bytes_per_token = engine.cache().bytes_per_token();
    let req = |id: u64, prompt: &[u32], new: usize| Request {
        id,
        prompt: prompt.to_vec(),
        sampling: Sampling::Greedy,
        max_new_tokens: new,
        stop: vec![],
        constraint: None,
    };
    let (weights_name, chosen) = (weights.to_string(), engine.model().weights().to_string());
    let line = |mut v: serde_json::Value| {
        v["weights"] = json!(weights_name);
        v["chosen"] = json!(chosen);
        println!("{v}")
    };
    line(json!({"impl": "docpipe", "dtype": dtype, "what": "load", "seconds": load_s, "weight_bytes": weight_bytes,
                "kv_bytes_per_token": kv_bytes_per_token, "keep_heap": keep_heap}));
    // warm-up
    engine.add(req(0, &questions[0], 4)).unwrap_or_else(|e| die(e.to_string()));
    engine.run().unwrap_or_else(|e| die(e.to_string()));

    // prefill: the 1,500-token prompt in one pass, one token generated
    engine.stats = Default::default();
    engine.add(req(1, &prefill, 1)).unwrap_or_else(|e| die(e.to_string()));
    let t = Instant::now();
    engine.run().unwrap_or_else(|e| die(e.to_string()));
    let s = t.elapsed().as_secs_f64();
    line(json!({"impl": "docpipe", "dtype": dtype, "what": "prefill", "tokens": prefill.len(), "seconds": s,
                "tokens_per_s": prefill.len() as f64 / s}));

    // decode at batch 1: decode steps only
    engine.stats = Default::default();
    engine.add(req(2, &questions[0], NEW)).unwrap_or_else(|e| die(e.to_string()));
    engine.run().unwrap_or_else(|e| die(e.to_string()));
    let st = &engine.stats;
    line(json!({"impl": "docpipe", "dtype": dtype, "what": "decode", "sequences": 1, "tokens": st.decode_tokens,
                "seconds": st.decode_time.as_secs_f64(),
                "tokens_per_s": st.decode_tokens as f64 / st.decode_time.as_secs_f64()}));

    for &n in &sequences {
        engine.stats = Default::default();
        let n = n.min(questions.len());
        for (i, q) in questions.iter().take(n).enumerate() {
            engine.add(req(100 + i as u64, q, NEW)).unwrap_or_else(|e| die(e.to_string()));
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
