//! Which segments are worth embedding on their own. The worker's standalone pass costs about
//! as much model time as the chunk pass; most segments are boilerplate no category wants.
//! [`Candidates`] reads a segment's contextual embedding (which the chunk pass computes
//! anyway) and its position with every category's learned scorer, and keeps the segment when
//! some category scores it a margin above that category's presence threshold (in log-odds:
//! the scorers' probabilities sit in a narrow band around one half, and each category's
//! threshold is calibrated on its own). The others keep their contextual embedding, which
//! labelling scores instead (`coalesce(standalone, embedding)`).
//!
//! The lexical terms are left out: the worker does not have the document's text.

use crate::artifact::Artifact;
use crate::gold::Doc;
use crate::scorer::Scorer;
use crate::ClausesError;

/// The default of `--standalone-margin`, chosen for clause-scorer-v4 (and kept, not chosen again,
/// for v5, whose segment scores come from the same learner on all of each document) on the
/// development split of the training contracts (30 not learned from; see
/// docs/clause-labels.md): with the same scorer learned from the other 400, it kept 7.7 % of
/// their segments, and no margin from 0.5 to 2.0 found more gold clauses in the top five. A
/// margin belongs to a scorer: v3's recipe, learned from the same 400, kept 30 % of the same
/// segments at 1.5.
pub const DEFAULT_MARGIN: f32 = 1.5;

/// The candidate rule (see the module docs): each category's scorer, without its lexical
/// terms, and its presence threshold in log-odds.
pub struct Candidates {
    probes: Vec<(Scorer, f32, f32)>,
    margin: f32,
}

/// Log-odds of a probability, kept finite.
fn logit(p: f32) -> f32 {
    let p = p.clamp(1e-6, 1.0 - 1e-6);
    (p / (1.0 - p)).ln()
}

impl Candidates {
    /// Every category of `artifact`; a segment is kept when some category scores it at least
    /// `margin` (in log-odds) above that category's presence threshold.
    pub fn new(artifact: &Artifact, margin: f32) -> Self {
        let probes = artifact
            .scorers()
            .into_values()
            .filter_map(|mut s| {
                s.terms.clear();
                let (bias, threshold) = (s.bias?, logit(s.threshold));
                Some((s, bias, threshold))
            })
            .collect();
        Candidates { probes, margin }
    }

    /// How far above its presence threshold (in log-odds) the category that likes segment
    /// `index` (its position in the document) best scores it, from its contextual embedding;
    /// minus infinity without categories.
    pub fn best_margin(&self, index: usize, contextual: &[f32]) -> f32 {
        self.probes
            .iter()
            .map(|(s, bias, threshold)| s.log_odds(*bias, index, contextual) - threshold)
            .fold(f32::NEG_INFINITY, f32::max)
    }

    /// Whether segment `index` is embedded on its own.
    pub fn keeps(&self, index: usize, contextual: &[f32]) -> bool {
        self.best_margin(index, contextual) >= self.margin
    }
}

/// How many segments (and characters of them) a candidate rule embeds on its own.
#[derive(Debug, Default, Clone, Copy)]
pub struct Kept {
    pub segments: usize,
    pub kept: usize,
    pub chars: usize,
    pub kept_chars: usize,
}

impl std::fmt::Display for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of {} segments ({:.1} %), {:.1} % of their characters",
            self.kept,
            self.segments,
            100.0 * self.kept as f64 / self.segments.max(1) as f64,
            100.0 * self.kept_chars as f64 / self.chars.max(1) as f64
        )
    }
}

/// What labelling would score had the worker embedded on their own only the segments `c`
/// keeps: each segment of `labelled` (standalone embeddings) that the rule drops takes its
/// contextual embedding from `contextual` (the same documents, loaded with
/// [`crate::stored::Embeddings::Contextual`]).
pub fn simulate(labelled: &mut [Doc], contextual: &[Doc], c: &Candidates) -> Result<Kept, ClausesError> {
    if labelled.len() != contextual.len() {
        return Err(ClausesError::Input(format!(
            "{} documents with standalone embeddings, {} with contextual ones",
            labelled.len(),
            contextual.len()
        )));
    }
    let mut k = Kept::default();
    for (l, x) in labelled.iter_mut().zip(contextual) {
        if l.segments.len() != x.segments.len() {
            return Err(ClausesError::Input("a document's segments differ between the two loads".into()));
        }
        for (s, cx) in l.segments.iter_mut().zip(&x.segments) {
            if s.index != cx.index {
                return Err(ClausesError::Input("a document's segments differ between the two loads".into()));
            }
            let n = s.chars.len();
            k.segments += 1;
            k.chars += n;
            if c.keeps(s.index, &cx.embedding) {
                k.kept += 1;
                k.kept_chars += n;
            } else {
                s.embedding.clone_from(&cx.embedding);
            }
        }
    }
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifact::builtin;
    use crate::scorer::Segment;

    #[test]
    fn the_margin_is_the_best_log_odds_above_a_presence_threshold_without_terms() {
        let (art, _) = builtin().expect("the built-in scorer loads");
        let mut e = vec![0.0f32; art.dim];
        e[3] = 0.6;
        e[10] = -0.8;
        let seg = Segment { index: 7, chars: 0..10, embedding: e.clone(), terms: vec![] };
        let by_scorers = art
            .scorers()
            .values()
            .map(|s: &Scorer| logit(s.score(&seg)) - logit(s.threshold))
            .fold(f32::NEG_INFINITY, f32::max);
        let c = Candidates::new(&art, 0.0);
        assert!((c.best_margin(7, &e) - by_scorers).abs() < 1e-3, "{} vs {by_scorers}", c.best_margin(7, &e));
        assert_eq!(c.keeps(7, &e), by_scorers >= 0.0);
        assert!(Candidates::new(&art, by_scorers - 0.01).keeps(7, &e));
        assert!(!Candidates::new(&art, by_scorers + 0.01).keeps(7, &e));
    }
}
