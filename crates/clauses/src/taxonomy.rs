//! The clause taxonomy: CUAD's 41 categories with our descriptions (`cuad_categories.tsv`).
//! A category is the text `"<name>: <description>"`, embedded once with the model's query
//! prompt: its zero-shot scorer, and the prior a learned scorer starts from.

const BUILTIN: &str = include_str!("cuad_categories.tsv");

/// Presence threshold of a category scored by its query alone (chosen on the shared CUAD
/// contracts by `make eval`; `--label-threshold` overrides it).
pub const DEFAULT_THRESHOLD: f32 = 0.42;

#[derive(Debug, Clone)]
pub struct Category {
    pub name: String,
    pub description: String,
}

impl Category {
    /// What gets embedded.
    pub fn query(&self) -> String {
        format!("{}: {}", self.name, self.description)
    }
}

/// The built-in taxonomy: CUAD's 41 categories with our descriptions.
pub fn builtin() -> Vec<Category> {
    BUILTIN
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once('\t'))
        .map(|(n, d)| Category { name: n.trim().to_string(), description: d.trim().to_string() })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn builtin_taxonomy_is_cuad_41() {
        let cats = super::builtin();
        assert_eq!(cats.len(), 41);
        assert!(cats.iter().all(|c| !c.name.is_empty() && c.description.split_whitespace().count() >= 10));
        assert!(cats.iter().any(|c| c.name == "Governing Law"));
    }
}
