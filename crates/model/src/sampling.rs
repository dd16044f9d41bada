//! Choosing the next token from the logits: greedy, or temperature with top-k / top-p from a
//! seeded generator (the same seed gives the same tokens).

use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Sampling {
    /// The most likely token (the lowest id on a tie).
    #[default]
    Greedy,
    /// Softmax of `logits / temperature`, kept to the `top_k` most likely (0: all) and then to
    /// the smallest set whose probability reaches `top_p`, drawn with a generator seeded by
    /// `seed`.
    Random { temperature: f32, top_k: usize, top_p: f32, seed: u64 },
    /// Beam search ([`crate::beam`]): the `width` best hypotheses by summed log-probability,
    /// the answer the best finished one under `sum / len^length_penalty`.
    Beam { width: usize, length_penalty: f32 },
}

impl FromStr for Sampling {
    type Err = String;

    /// `greedy`; `beam:K` with an optional `,lp:X` (length penalty, default 1); or
    /// comma-separated `top-p:P`, `top-k:K`, `t:T` (temperature), `seed:S`, e.g.
    /// `top-p:0.9,t:0.8,seed:1`.
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s == "greedy" {
            return Ok(Self::Greedy);
        }
        if let Some(rest) = s.strip_prefix("beam:") {
            let mut parts = rest.split(',');
            let width: usize = parts
                .next()
                .and_then(|w| w.trim().parse().ok())
                .filter(|&w| w >= 1)
                .ok_or_else(|| format!("{s:?}: beam takes a width of at least 1 (beam:4)"))?;
            let mut length_penalty = 1.0f32;
            for part in parts {
                match part.split_once(':') {
                    Some(("lp" | "length-penalty", v)) => {
                        length_penalty = v
                            .trim()
                            .parse()
                            .ok()
                            .filter(|x: &f32| x.is_finite())
                            .ok_or_else(|| format!("{part:?}: the length penalty takes a number"))?
                    }
                    _ => return Err(format!("{part:?}: beam takes only lp:X (length penalty), e.g. beam:4,lp:1.0")),
                }
            }
            return Ok(Self::Beam { width, length_penalty });
        }
        let (mut temperature, mut top_k, mut top_p, mut seed) = (1.0f32, 0usize, 1.0f32, 0u64);
        for part in s.split(',') {
            let (k, v) =
                part.split_once(':').ok_or_else(|| format!("{part:?}: expected key:value (top-p, top-k, t, seed)"))?;
            let bad = |what: &str| format!("{part:?}: {what}");
            match k.trim() {
                "top-p" => top_p = v.parse().map_err(|_| bad("top-p takes a number in (0, 1]"))?,
                "top-k" => top_k = v.parse().map_err(|_| bad("top-k takes a whole number"))?,
                "t" | "temperature" => temperature = v.parse().map_err(|_| bad("t takes a number > 0"))?,
                "seed" => seed = v.parse().map_err(|_| bad("seed takes a whole number"))?,
                other => return Err(format!("unknown sampling key {other:?} (top-p, top-k, t, seed, or greedy)")),
            }
        }
        if !(top_p > 0.0 && top_p <= 1.0) {
            return Err(format!("top-p {top_p} is not in (0, 1]"));
        }
        if temperature <= 0.0 || !temperature.is_finite() {
            return Err(format!("temperature {temperature} must be > 0 (greedy for deterministic decoding)"));
        }
        Ok(Self::Random { temperature, top_k, top_p, seed })
    }
}

/// SplitMix64: a small, fast, well-mixed generator; reproducible across platforms.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The index of the largest value (the first on a tie); `None` for an empty slice or NaN.
pub fn argmax(logits: &[f32]) -> Option<u32> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &x) in logits.iter().enumerate() {
        if x.is_nan() {
            return None;
        }
        if best.is_none_or(|(_, b)| x > b) {
            best = Some((i, x));
        }
    }
    best.map(|(i, _)| i as u32)
}

/// The `n` most likely tokens with their log-probabilities (`log softmax(logits)`), best
/// first (ties by id); impossible tokens (`-inf`) left out.
pub fn top_log_probs(logits: &[f32], n: usize) -> Vec<(u32, f64)> {
    let max = logits.iter().copied().filter(|v| v.is_finite()).fold(f32::NEG_INFINITY, f32::max) as f64;
    if !max.is_finite() {
        return Vec::new();
    }
    let log_z = max + logits.iter().filter(|v| v.is_finite()).map(|&v| (v as f64 - max).exp()).sum::<f64>().ln();
    let mut cand: Vec<(u32, f32)> =
        logits.iter().enumerate().filter(|(_, x)| x.is_finite()).map(|(i, &x)| (i as u32, x)).collect();
    let by_logit = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if n < cand.len() {
        if n == 0 {
            return Vec::new();
        }
        cand.select_nth_unstable_by(n - 1, by_logit);
        cand.truncate(n);
    }
    cand.sort_unstable_by(by_logit);
    cand.into_iter().map(|(t, x)| (t, x as f64 - log_z)).collect()
}

/// `log softmax(logits)[token]`, in f64; `-inf` for a token outside the row.
pub fn log_prob(logits: &[f32], token: u32) -> f64 {
    let Some(&x) = logits.get(token as usize) else { return f64::NEG_INFINITY };
    let max = logits.iter().copied().filter(|v| v.is_finite()).fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = logits.iter().filter(|v| v.is_finite()).map(|&v| (v as f64 - max).exp()).sum();
    x as f64 - max - sum.ln()
}

/// The next token under `s` (`rng` advances only for random sampling).
pub fn sample(logits: &[f32], s: &Sampling, rng: &mut Rng) -> Option<u32> {
    match *s {
        // beams are chosen by the engine from every beam's candidates; alone, the best token
        Sampling::Greedy | Sampling::Beam { .. } => argmax(logits),
        Sampling::Random { temperature, top_k, top_p, .. } => {
            let mut cand: Vec<(u32, f32)> = logits
                .iter()
                .enumerate()
                .filter(|(_, x)| x.is_finite())
                .map(|(i, &x)| (i as u32, x / temperature))
                .collect();
            if cand.is_empty() {
                return None;
            }
            // most likely first; ties by id so the order is reproducible
            let by_logit = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
            if top_k > 0 && top_k < cand.len() {
                cand.select_nth_unstable_by(top_k - 1, by_logit);
                cand.truncate(top_k);
            }
            cand.sort_unstable_by(by_logit);
            let max = cand[0].1;
            let mut probs: Vec<f64> = cand.iter().map(|&(_, x)| ((x - max) as f64).exp()).collect();
            let total: f64 = probs.iter().sum();
            probs.iter_mut().for_each(|p| *p /= total);
            let mut keep = probs.len();
            let mut acc = 0.0;
            for (i, p) in probs.iter().enumerate() {
                acc += p;
                if acc >= top_p as f64 {
                    keep = i + 1;
                    break;
                }
            }
            let mass: f64 = probs[..keep].iter().sum();
            let mut u = rng.next_f64() * mass;
            for (i, p) in probs[..keep].iter().enumerate() {
                if u < *p {
                    return Some(cand[i].0);
                }
                u -= p;
            }
            Some(cand[keep - 1].0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_cli_forms() {
        assert_eq!("greedy".parse::<Sampling>().unwrap(), Sampling::Greedy);
        assert_eq!(
            "top-p:0.9,t:0.8,seed:1".parse::<Sampling>().unwrap(),
            Sampling::Random { temperature: 0.8, top_k: 0, top_p: 0.9, seed: 1 }
        );
        assert!("top-p:1.5".parse::<Sampling>().unwrap_err().contains("not in (0, 1]"));
        assert!("t:0".parse::<Sampling>().unwrap_err().contains("> 0"));
        assert_eq!("beam:4".parse::<Sampling>().unwrap(), Sampling::Beam { width: 4, length_penalty: 1.0 });
        assert_eq!("beam:2,lp:0.5".parse::<Sampling>().unwrap(), Sampling::Beam { width: 2, length_penalty: 0.5 });
        assert!("beam:0".parse::<Sampling>().unwrap_err().contains("at least 1"));
        assert!("beam:4,t:1".parse::<Sampling>().unwrap_err().contains("only lp"));
        assert!("temp=1".parse::<Sampling>().unwrap_err().contains("key:value"));
    }

    #[test]
    fn top_log_probs_are_normalised_and_ordered() {
        let got = top_log_probs(&[0.0, 2.0, f32::NEG_INFINITY, 1.0], 2);
        assert_eq!(got.iter().map(|x| x.0).collect::<Vec<_>>(), vec![1, 3]);
        assert!((got[0].1 - log_prob(&[0.0, 2.0, f32::NEG_INFINITY, 1.0], 1)).abs() < 1e-12);
        let all = top_log_probs(&[0.0, 2.0, f32::NEG_INFINITY, 1.0], 10);
        assert_eq!(all.len(), 3);
        assert!((all.iter().map(|x| x.1.exp()).sum::<f64>() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn greedy_takes_the_first_maximum() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, -1.0]), Some(1));
        assert_eq!(argmax(&[]), None);
        assert_eq!(argmax(&[0.0, f32::NAN]), None);
    }

    #[test]
    fn a_seed_reproduces_the_draws_and_top_k_one_is_greedy() {
        let logits: Vec<f32> = (0..50).map(|i| ((i * 37) % 11) as f32 * 0.3).collect();
        let s = Sampling::Random { temperature: 1.0, top_k: 0, top_p: 0.95, seed: 7 };
        let draw = |seed| {
            let mut rng = Rng::new(seed);
            (0..64).map(|_| sample(&logits, &s, &mut rng).unwrap()).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        let k1 = Sampling::Random { temperature: 0.5, top_k: 1, top_p: 1.0, seed: 3 };
        assert_eq!(sample(&logits, &k1, &mut Rng::new(3)), argmax(&logits));
    }

    #[test]
    fn top_p_keeps_only_the_nucleus() {
        // token 0 has ~0.88 of the mass; with top-p 0.8 only it may be drawn
        let logits = [4.0f32, 2.0, 0.0, 0.0];
        let s = Sampling::Random { temperature: 1.0, top_k: 0, top_p: 0.8, seed: 0 };
        let mut rng = Rng::new(11);
        assert!((0..200).all(|_| sample(&logits, &s, &mut rng) == Some(0)));
        // with top-p 1 the others appear
        let s = Sampling::Random { temperature: 1.0, top_k: 0, top_p: 1.0, seed: 0 };
        assert!((0..400).any(|_| sample(&logits, &s, &mut rng) != Some(0)));
    }
}
