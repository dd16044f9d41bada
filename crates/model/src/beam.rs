//! Beam search, apart from the model: which hypotheses live on after each step.
//!
//! A search keeps at most `width` live hypotheses (beams), each scored by the sum of its
//! tokens' log-probabilities. At every step each live beam offers its best next tokens
//! ([`BeamSearch::candidates`] of its log-probabilities); of all extensions, best first, the
//! first `width` that do not end are the next beams, and an extension that ends (a stop token,
//! or the `max_new_tokens`-th token) among the best `width` becomes a finished hypothesis,
//! scored `sum / len^length_penalty` (`len`: the tokens scored, a stop token included; a
//! penalty above 0 favours longer answers, 0 compares plain sums). An answer that ended on a
//! stop token ranks above any answer cut at the length limit.
//!
//! The search is over when `width` hypotheses are finished and no live beam can still beat the
//! worst of them: a beam's sum only falls as it grows, so its best possible final score is
//! known (the bound is exact, not a heuristic: with a width as large as the number of possible
//! answers, the search returns the best answer there is — a test checks it against exhaustive
//! enumeration).
//!
//! The engine ([`crate::engine`]) runs the beams of a request as sequences of its continuous
//! batch: a beam with two children gets a copy of its last, partly filled KV block, and shares
//! the full ones.

/// A finished hypothesis.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// The generated tokens (a stop token not included).
    pub tokens: Vec<u32>,
    /// Sum of the scored tokens' log-probabilities (a stop token included).
    pub logprob: f64,
    /// `logprob / len^length_penalty`.
    pub score: f64,
    /// A second sum carried along and not searched on (the engine's: the log-probabilities
    /// under the model's own, unconstrained distribution).
    pub raw: f64,
    /// Ended by a stop token (else by the length limit).
    pub stopped: bool,
}

/// A live beam as the search sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Beam {
    pub tokens: Vec<u32>,
    pub logprob: f64,
    /// See [`Finished::raw`].
    pub raw: f64,
}

/// One candidate next token of a beam.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Offer {
    pub token: u32,
    /// Its log-probability, what the search ranks by.
    pub logprob: f64,
    /// Added to the beam's [`Beam::raw`].
    pub raw: f64,
}

/// What became of one live beam's extension in a step: the next beams, in order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Next {
    /// Index of the beam extended (into the step's `beams`).
    pub parent: usize,
    pub token: u32,
    /// The new beam's sums.
    pub logprob: f64,
    pub raw: f64,
}

#[derive(Debug, Clone)]
pub struct BeamSearch {
    width: usize,
    length_penalty: f64,
    max_new_tokens: usize,
    finished: Vec<Finished>,
    done: bool,
}

impl BeamSearch {
    pub fn new(width: usize, length_penalty: f32, max_new_tokens: usize) -> Self {
        Self {
            width: width.max(1),
            length_penalty: length_penalty as f64,
            max_new_tokens: max_new_tokens.max(1),
            finished: Vec::new(),
            done: false,
        }
    }

    pub fn width(&self) -> usize {
        self.width
    }

    /// How many candidates each beam must offer a step: `width` extensions may end, so twice
    /// as many leave `width` that go on.
    pub fn candidates(&self) -> usize {
        2 * self.width
    }

    fn score(&self, logprob: f64, len: usize) -> f64 {
        logprob / (len.max(1) as f64).powf(self.length_penalty)
    }

    /// One step: `beams` (their tokens generated so far, all of the same length) and, for each,
    /// its best next tokens with their log-probabilities (at most [`Self::candidates`], any
    /// order; `-inf` for impossible ones). Returns the next beams, best first; empty when the
    /// search is over ([`Self::is_done`]).
    pub fn step(&mut self, beams: &[Beam], offers: &[Vec<Offer>], stop: &[u32]) -> Vec<Next> {
        if self.done {
            return Vec::new();
        }
        let mut all: Vec<Next> = beams
            .iter()
            .zip(offers)
            .enumerate()
            .flat_map(|(parent, (b, cands))| {
                cands.iter().filter(|o| o.logprob.is_finite()).map(move |o| Next {
                    parent,
                    token: o.token,
                    logprob: b.logprob + o.logprob,
                    raw: b.raw + o.raw,
                })
            })
            .collect();
        // best first; ties by parent then token, so the search is reproducible
        all.sort_by(|a, b| b.logprob.total_cmp(&a.logprob).then(a.parent.cmp(&b.parent)).then(a.token.cmp(&b.token)));
        let mut next = Vec::with_capacity(self.width);
        for (rank, n) in all.into_iter().enumerate() {
            if next.len() == self.width {
                break;
            }
            let parent = &beams[n.parent];
            let stopped = stop.contains(&n.token);
            let len = parent.tokens.len() + 1;
            if stopped || len >= self.max_new_tokens {
                // only an extension among the best `width` may finish the search's answers
                if rank < self.width {
                    let mut tokens = parent.tokens.clone();
                    if !stopped {
                        tokens.push(n.token);
                    }
                    let score = self.score(n.logprob, len);
                    self.finished.push(Finished { tokens, logprob: n.logprob, score, stopped, raw: n.raw });
                }
                continue;
            }
            next.push(n);
        }
        // an answer that stopped beats one cut at the length limit (a JSON document cut short
        // does not parse), then the higher score
        self.finished.sort_by(|a, b| b.stopped.cmp(&a.stopped).then(b.score.total_cmp(&a.score)));
        self.finished.truncate(self.width);
        let len = beams.first().map_or(0, |b| b.tokens.len()) + 1;
        self.done = next.is_empty() || (self.finished.len() == self.width && !self.can_improve(&next, len));
        if self.done {
            next.clear();
        }
        next
    }

    /// Whether any of `next` (each `len` tokens long) could still end better than the worst
    /// finished hypothesis. Its sum can only fall, so its best final score is its sum over the
    /// length that favours it most: the next one, or the longest allowed.
    fn can_improve(&self, next: &[Next], len: usize) -> bool {
        let Some(worst) = self.finished.last() else { return true };
        if !worst.stopped {
            // a live beam may still stop
            return true;
        }
        next.iter().any(|n| {
            let best = self.score(n.logprob, len + 1).max(self.score(n.logprob, self.max_new_tokens));
            best > worst.score
        })
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The best finished hypothesis: the best-scored that stopped, else the best cut at the
    /// length limit.
    pub fn best(&self) -> Option<&Finished> {
        self.finished.first()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampling::Rng;

    const VOCAB: u32 = 4;
    const STOP: u32 = 3;

    /// A made-up model over a 4-token vocabulary (token 3 stops): the log-probabilities of the
    /// next token depend on the whole prefix, through a hash.
    fn model(prefix: &[u32], seed: u64) -> Vec<f64> {
        let mut h = seed;
        for &t in prefix {
            h = h.wrapping_mul(0x100_0000_01b3).wrapping_add(t as u64 + 1);
        }
        let mut rng = Rng::new(h);
        let logits: Vec<f64> = (0..VOCAB).map(|_| rng.next_f64() * 4.0).collect();
        let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let z: f64 = logits.iter().map(|l| (l - max).exp()).sum::<f64>().ln() + max;
        logits.iter().map(|l| l - z).collect()
    }

    fn run(width: usize, lp: f32, max_new: usize, seed: u64) -> Finished {
        let mut s = BeamSearch::new(width, lp, max_new);
        let mut beams = vec![Beam { tokens: vec![], logprob: 0.0, raw: 0.0 }];
        while !s.is_done() {
            let offers: Vec<Vec<Offer>> = beams
                .iter()
                .map(|b| {
                    let mut c: Vec<Offer> = model(&b.tokens, seed)
                        .into_iter()
                        .enumerate()
                        .map(|(t, l)| Offer { token: t as u32, logprob: l, raw: 2.0 * l })
                        .collect();
                    c.sort_by(|a, b| b.logprob.total_cmp(&a.logprob));
                    c.truncate(s.candidates());
                    c
                })
                .collect();
            let next = s.step(&beams, &offers, &[STOP]);
            beams = next
                .iter()
                .map(|n| {
                    let mut tokens = beams[n.parent].tokens.clone();
                    tokens.push(n.token);
                    Beam { tokens, logprob: n.logprob, raw: n.raw }
                })
                .collect();
        }
        s.best().cloned().expect("a finished hypothesis")
    }

    /// Every answer of at most `max_new` tokens, with its score: the best that stopped, else the
    /// best cut at the limit.
    fn exhaustive(lp: f64, max_new: usize, seed: u64) -> (Vec<u32>, f64) {
        let mut best = (Vec::new(), f64::NEG_INFINITY);
        let mut best_cut = (Vec::new(), f64::NEG_INFINITY);
        let mut stack = vec![(Vec::<u32>::new(), 0.0f64)];
        while let Some((prefix, sum)) = stack.pop() {
            let probs = model(&prefix, seed);
            for t in 0..VOCAB {
                let s = sum + probs[t as usize];
                let len = prefix.len() + 1;
                let score = s / (len as f64).powf(lp);
                if t == STOP || len == max_new {
                    let mut tokens = prefix.clone();
                    let slot = if t == STOP { &mut best } else { &mut best_cut };
                    if t != STOP {
                        tokens.push(t);
                    }
                    if score > slot.1 {
                        *slot = (tokens, score);
                    }
                } else {
                    let mut p = prefix.clone();
                    p.push(t);
                    stack.push((p, s));
                }
            }
        }
        if best.1.is_finite() {
            best
        } else {
            best_cut
        }
    }

    #[test]
    fn a_wide_enough_beam_finds_the_best_answer_there_is() {
        for seed in 0..40 {
            for &lp in &[0.0f32, 1.0, 2.0] {
                let (tokens, score) = exhaustive(lp as f64, 5, seed);
                // 3 live tokens per step: 3^4 = 81 beams hold every unfinished prefix
                let got = run(81, lp, 5, seed);
                assert_eq!(got.tokens, tokens, "seed {seed} length penalty {lp}");
                assert!((got.score - score).abs() < 1e-9, "seed {seed}: {} vs {score}", got.score);
                assert!((got.raw - 2.0 * got.logprob).abs() < 1e-9, "the second sum is carried along");
            }
        }
    }

    #[test]
    fn width_one_is_greedy_and_no_beam_beats_the_best_answer() {
        for seed in 0..40 {
            // greedy by hand
            let mut tokens = Vec::new();
            let mut sum = 0.0;
            loop {
                let probs = model(&tokens, seed);
                let (t, l) = probs
                    .iter()
                    .enumerate()
                    .fold((0, f64::NEG_INFINITY), |a, (i, &l)| if l > a.1 { (i, l) } else { a });
                sum += l;
                if t as u32 == STOP {
                    break;
                }
                tokens.push(t as u32);
                if tokens.len() == 6 {
                    break;
                }
            }
            let one = run(1, 0.0, 6, seed);
            assert_eq!(one.tokens, tokens, "seed {seed}");
            assert!((one.logprob - sum).abs() < 1e-9);
            let (_, best) = exhaustive(0.0, 6, seed);
            for width in [1, 2, 4] {
                let got = run(width, 0.0, 6, seed);
                assert!(!got.stopped || got.score <= best + 1e-12, "seed {seed} width {width}");
            }
        }
    }
}
