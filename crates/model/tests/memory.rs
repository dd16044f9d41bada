//! The batch budget derived from memory (`--max-batch-tokens auto`), measured on the CPU:
//! the calibration's cost per token predicts what a larger pass needs. Needs the model
//! (`make model`; `DOCPIPE_MODEL` overrides the location).

use docpipe_batching::Backend;
use docpipe_model::calibrate::calibrate_budget;
use docpipe_model::{device, Precision, SentenceEmbedder};
use tch::Device;

mod common;

#[test]
fn calibration_predicts_the_memory_of_a_larger_pass() {
    let model = SentenceEmbedder::load(&common::model_dir(), Device::Cpu, Precision::F32).unwrap();
    let seq_len = 512;
    let c = calibrate_budget(&model, seq_len, 0.5, 1 << 20).unwrap();
    eprintln!("{c:?}");
    assert!(c.available > 0, "available memory read");
    assert!(c.budget >= seq_len && c.budget.is_multiple_of(seq_len), "whole sequences: {c:?}");

    // a pass of 6 sequences needs about 4 more sequences' worth than one of 2
    let seq: Vec<u32> = (0..seq_len).map(|t| 1000 + t as u32).collect();
    let peak = |n: usize| {
        device::reset_peak(Device::Cpu);
        let before = device::in_use(Device::Cpu).unwrap();
        model.embed(&vec![seq.as_slice(); n]).unwrap();
        device::peak_since_reset(Device::Cpu).unwrap().saturating_sub(before)
    };
    let (two, six) = (peak(2), peak(6));
    let predicted = 4 * seq_len as u64 * c.bytes_per_token;
    let measured = six.saturating_sub(two);
    eprintln!("4 more sequences: predicted {predicted} bytes, measured {measured}");
    assert!(
        measured <= 2 * predicted && predicted <= 4 * measured.max(1),
        "per-token cost {} B does not predict a larger pass: predicted {predicted}, measured {measured}",
        c.bytes_per_token
    );
}
