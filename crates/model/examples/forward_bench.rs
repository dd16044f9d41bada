//! Forward-pass throughput of the worker's model on fixed inputs.
//!
//! `cargo run -p docpipe-model --example forward_bench -- MODEL_DIR DTYPE BATCH SEQ_LEN REPS [IDS.jsonl]`
//! Inputs are the first BATCH lines of IDS.jsonl (`{"input_ids": [...]}`, e.g. real contract
//! chunks), or synthetic ids when absent. `BENCH_DEVICE` picks the device (`cpu`, default, or
//! `cuda[:N]`). Prints one JSON line; `peak_bytes` is the memory held at the end (CUDA) or the
//! peak resident memory of the timed passes (CPU); `keep_heap` whether the allocator keeps freed
//! memory, as `docpipe` sets it up for its model commands (`DOCPIPE_CPU_KEEP_HEAP=0` to not).
//! `BENCH_ATTENTION=packed|packed-gemm|packed-reference|banded|dense` overrides the model's
//! choice of attention (packed FlashAttention on CUDA in fp16/bf16, packed-gemm on the CPU in
//! bf16 without AMX, else banded; dense is the reference form, to compare speed);
//! `BENCH_SPANS=N` also pools N equal spans of each sequence from the same pass, as the worker's
//! chunk pass pools its segments (late chunking); `first_pass_seconds` is the untimed first pass.
//! `BENCH_EXECUTORS=N` runs N copies of the model on threads of their own, each with its share
//! of the intra-op threads, and prints their summed rate: a layout the worker does not use (it
//! runs one model with all the threads), measured against it in docs/benchmarks.md.
//! `BENCH_DUMP=FILE` writes the warm-up pass's sentence embeddings, one JSON array per line, for a parity check
//! against the reference.
use std::time::Instant;

use docpipe_batching::Backend;
use docpipe_model::{device, Precision, SentenceEmbedder};

fn main() {
    // as `docpipe` sets the allocator up, and on a thread of its own, as the worker runs its model
    let keep_heap = device::keep_freed_memory();
    std::thread::spawn(move || run(keep_heap)).join().expect("bench thread panicked");
}

fn run(keep_heap: bool) {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 6 {
        eprintln!("usage: forward_bench MODEL_DIR fp32|bf16 BATCH SEQ_LEN REPS [IDS.jsonl]");
        std::process::exit(2);
    }
    let precision: Precision = args[2].parse().expect("dtype");
    let (batch, seq, reps): (usize, usize, usize) =
        (args[3].parse().unwrap(), args[4].parse().unwrap(), args[5].parse().unwrap());
    let choice = std::env::var("BENCH_DEVICE").unwrap_or_else(|_| "cpu".into());
    let device = device::resolve(choice.parse().expect("BENCH_DEVICE")).expect("device");
    let mut model = SentenceEmbedder::load(std::path::Path::new(&args[1]), device, precision).expect("load");
    if let Ok(a) = std::env::var("BENCH_ATTENTION") {
        model.set_attention(a.parse().expect("BENCH_ATTENTION")).expect("BENCH_ATTENTION");
    }
    let seqs: Vec<Vec<u32>> = match args.get(6) {
        Some(path) => std::fs::read_to_string(path)
            .expect("read ids")
            .lines()
            .take(batch)
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["input_ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_u64().unwrap() as u32)
                    .take(seq)
                    .collect()
            })
            .collect(),
        None => (0..batch)
            .map(|b| (0..seq).map(|t| if t == 0 { 2 } else { 1000 + ((t * 7919 + b * 31) % 200_000) as u32 }).collect())
            .collect(),
    };
    let refs: Vec<&[u32]> = seqs.iter().map(|s| s.as_slice()).collect();
    let tokens: usize = seqs.iter().map(|s| s.len()).sum();
    let n_spans: usize = std::env::var("BENCH_SPANS").map(|v| v.parse().expect("BENCH_SPANS")).unwrap_or(0);
    let spans: Vec<Vec<std::ops::Range<usize>>> = seqs
        .iter()
        .map(|s| {
            let n = n_spans.min(s.len());
            (0..n).map(|i| i * s.len() / n..(i + 1) * s.len() / n).collect()
        })
        .collect();
    let span_refs: Vec<&[std::ops::Range<usize>]> = spans.iter().map(|s| s.as_slice()).collect();
    let embed = |model: &SentenceEmbedder| -> Vec<Vec<f32>> {
        if n_spans == 0 {
            model.embed(&refs).expect("embed")
        } else {
            model.embed_with_spans(&refs, &span_refs).expect("embed").into_iter().map(|(e, _)| e).collect()
        }
    };
    let executors: usize = std::env::var("BENCH_EXECUTORS").map(|v| v.parse().expect("BENCH_EXECUTORS")).unwrap_or(1);
    if executors > 1 {
        // each thread its own copy of the model (loaded again: a model is not shared across
        // threads) and its share of the intra-op threads, all timed from a common start
        drop(model);
        let threads = (tch::get_num_threads() as usize / executors).max(1) as i32;
        let start = std::sync::Barrier::new(executors + 1);
        let secs = std::thread::scope(|s| {
            let runs: Vec<_> = (0..executors)
                .map(|_| {
                    s.spawn(|| {
                        tch::set_num_threads(threads);
                        let model =
                            SentenceEmbedder::load(std::path::Path::new(&args[1]), device, precision).expect("load");
                        embed(&model);
                        start.wait();
                        for _ in 0..reps {
                            embed(&model);
                        }
                    })
                })
                .collect();
            start.wait();
            let t0 = Instant::now();
            runs.into_iter().for_each(|r| r.join().expect("executor panicked"));
            t0.elapsed().as_secs_f64()
        });
        println!(
            "{{\"impl\":\"docpipe\",\"dtype\":\"{}\",\"device\":\"{choice}\",\"executors\":{executors},\"threads\":{threads},\"batch\":{batch},\"tokens\":{},\"seconds\":{secs:.3},\"tokens_per_s\":{:.1},\"keep_heap\":{keep_heap}}}",
            precision.name(),
            tokens * reps * executors,
            (tokens * reps * executors) as f64 / secs
        );
        return;
    }
    // the first pass also pays the one-time costs (kernel selection, first-touch allocation)
    let t_warm = Instant::now();
    let warm = embed(&model);
    let warm_secs = t_warm.elapsed().as_secs_f64();
    if let Ok(path) = std::env::var("BENCH_DUMP") {
        let lines: Vec<String> = warm.iter().map(|e| serde_json::to_string(e).expect("json")).collect();
        std::fs::write(&path, lines.join("\n") + "\n").unwrap_or_else(|e| panic!("write {path}: {e}"));
    }
    device::reset_peak(device);
    let t0 = Instant::now();
    for _ in 0..reps {
        embed(&model);
    }
    let secs = t0.elapsed().as_secs_f64();
    let peak = device::peak_since_reset(device).unwrap_or(0);
    println!(
        "{{\"impl\":\"docpipe\",\"dtype\":\"{}\",\"device\":\"{choice}\",\"attention\":\"{}\",\"threads\":{},\"batch\":{batch},\"tokens\":{},\"seconds\":{secs:.3},\"tokens_per_s\":{:.1},\"peak_bytes\":{peak},\"keep_heap\":{keep_heap},\"first_pass_seconds\":{warm_secs:.3}}}",
        precision.name(),
        model.attention(),
        tch::get_num_threads(),
        tokens * reps,
        (tokens * reps) as f64 / secs
    );
}
