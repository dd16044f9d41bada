//! One weight matrix of a GGUF file multiplied three ways, for rows of activations from a decode
//! step (1 row per sequence) to a prompt chunk: dense (dequantized at load, libtorch's GEMM),
//! libtorch's int4 kernel (`Q4_K` matrices only), and the k-quant kernel on the file's blocks.
//!
//! `matmul_bench GGUF [TENSOR ...]` prints one line per tensor, format and row count: the median
//! of the timed runs, and the weight bytes read per second. Default tensors: a `Q4_K` and a
//! `Q6_K` matrix of layer 0 and `output.weight`. `BENCH_ROWS=1,8,32,512` sets the row counts;
//! `BENCH_DTYPE` (bf16|fp32, default bf16) the activations; threads: `OMP_NUM_THREADS`.
use std::path::Path;
use std::time::Instant;

use docpipe_model::gguf::{GgmlType, Gguf};
use docpipe_model::int4::Int4Linear;
use docpipe_model::kquant::{self, KQuantLinear};
use tch::{Device, Kind, Tensor};

fn die(msg: String) -> ! {
    eprintln!("matmul_bench: {msg}");
    std::process::exit(1)
}

/// Median seconds of `f` over enough runs to fill about half a second (at least 3).
fn time(mut f: impl FnMut()) -> f64 {
    f();
    let mut runs = Vec::new();
    let start = Instant::now();
    while runs.len() < 3 || (start.elapsed().as_secs_f64() < 0.5 && runs.len() < 200) {
        let t = Instant::now();
        f();
        runs.push(t.elapsed().as_secs_f64());
    }
    runs.sort_by(f64::total_cmp);
    runs[runs.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else { die("usage: matmul_bench GGUF [TENSOR ...]".into()) };
    let g = Gguf::open(Path::new(path)).unwrap_or_else(|e| die(e.to_string()));
    let mut names: Vec<String> = args[2..].to_vec();
    if names.is_empty() {
        for want in [GgmlType::Q4K, GgmlType::Q6K] {
            let found = ["ffn_gate", "ffn_down", "attn_v", "attn_q"]
                .iter()
                .map(|m| format!("blk.0.{m}.weight"))
                .chain((1..4).map(|l| format!("blk.{l}.ffn_down.weight")))
                .find(|n| g.tensor(n).is_some_and(|t| t.kind == want));
            names.extend(found);
        }
        names.push("output.weight".into());
    }
    let kind = match std::env::var("BENCH_DTYPE").as_deref() {
        Ok("fp32") => Kind::Float,
        _ => Kind::BFloat16,
    };
    let rows: Vec<i64> = std::env::var("BENCH_ROWS")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 8, 32, 512]);
    let _guard = tch::no_grad_guard();
    for name in &names {
        let Some(info) = g.tensor(name) else { die(format!("no tensor {name}")) };
        let shape = info.shape(); // [out, in]
        let (out, cols) = (shape[0] as usize, shape[1] as usize);
        let raw = g.read_raw(info).unwrap_or_else(|e| die(e.to_string()));
        let dense = Tensor::from_slice(&g.dequantize(info).unwrap_or_else(|e| die(e.to_string())))
            .view([out as i64, cols as i64])
            .to_kind(kind);
        let int4 = (info.kind == GgmlType::Q4K).then(|| {
            Int4Linear::from_q4_k(&[(&raw, out)], cols, kind, Device::Cpu).unwrap_or_else(|e| die(e.to_string()))
        });
        let kq = kquant::supported(info.kind)
            .then(|| KQuantLinear::new(&[(info.kind, &raw, out)], cols).unwrap_or_else(|e| die(e.to_string())));
        for &m in &rows {
            let x = Tensor::randn([m, cols as i64], (Kind::Float, Device::Cpu)).to_kind(kind);
            let line = |format: &str, bytes: usize, f: &dyn Fn() -> Tensor| {
                let s = time(|| {
                    let _ = f();
                });
                println!(
                    "{name} {} [{out}×{cols}] rows {m:>4} {format:<6} {:>9.3} ms  {:>6.1} GB/s of weights",
                    info.kind.name(),
                    s * 1e3,
                    bytes as f64 / s / 1e9
                );
            };
            line("dense", dense.numel() * kind.elt_size_in_bytes(), &|| x.linear(&dense, None::<Tensor>));
            if let Some(l) = &int4 {
                line("int4", l.bytes(), &|| l.forward(&x).unwrap_or_else(|e| die(e.to_string())));
            }
            if let Some(l) = &kq {
                line("kquant", l.bytes(), &|| l.forward(&x).unwrap_or_else(|e| die(e.to_string())));
            }
        }
    }
}
