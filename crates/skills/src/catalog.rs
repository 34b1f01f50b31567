//! The prompt catalog: what the model learns about Agent Skills every turn,
//! which is their names and descriptions and nothing else, within
//! `skills.catalog_chars`.
//!
//! When everything does not fit, descriptions are shortened to one common
//! length (the longest that fits), then skills past the budget are left out
//! and counted. The same inputs always give the same text, so the prompt
//! prefix stays cacheable.

/// The text of a catalog and what it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Catalog {
    pub text: String,
    pub listed: usize,
    pub left_out: usize,
    /// Descriptions shortened to fit.
    pub trimmed: usize,
}

/// The first line of the catalog section.
pub const CATALOG_HEADER: &str = "Skills (call activate_skill with a name to load its instructions):\n";
/// Descriptions are never shortened below this; skills are left out instead.
pub const MIN_DESCRIPTION_CHARS: usize = 40;

/// Renders `entries` (name, description), in the order given, within `budget` characters.
pub fn render_catalog(entries: &[(&str, &str)], budget: usize) -> Catalog {
    let longest = entries.iter().map(|(_, d)| d.chars().count()).max().unwrap_or(0);
    let full = render(entries, usize::MAX, entries.len());
    if chars(&full.0) <= budget {
        return catalog(full, entries.len(), 0);
    }
    // The longest common description length that fits, by bisection.
    let (mut low, mut high) = (MIN_DESCRIPTION_CHARS.min(longest), longest);
    if chars(&render(entries, low, entries.len()).0) <= budget {
        while low < high {
            let mid = (low + high).div_ceil(2);
            if chars(&render(entries, mid, entries.len()).0) <= budget {
                low = mid;
            } else {
                high = mid - 1;
            }
        }
        return catalog(render(entries, low, entries.len()), entries.len(), 0);
    }
    // Even short descriptions do not fit: list as many as fit, count the rest.
    let mut listed = entries.len();
    loop {
        let attempt = render(entries, low, listed);
        if chars(&attempt.0) <= budget || listed == 0 {
            return catalog(attempt, listed, entries.len() - listed);
        }
        listed -= 1;
    }
}

fn catalog((text, trimmed): (String, usize), listed: usize, left_out: usize) -> Catalog {
    Catalog {
        text,
        listed,
        left_out,
        trimmed,
    }
}

fn chars(text: &str) -> usize {
    text.chars().count()
}

/// The catalog of the first `listed` entries with descriptions cut to
/// `cap` characters, and how many were cut.
fn render(entries: &[(&str, &str)], cap: usize, listed: usize) -> (String, usize) {
    let mut text = String::from(CATALOG_HEADER);
    let mut trimmed = 0;
    for (name, description) in &entries[..listed] {
        text.push_str("- ");
        text.push_str(name);
        text.push_str(": ");
        if description.chars().count() > cap {
            trimmed += 1;
            let cut: String = description.chars().take(cap.saturating_sub(1)).collect();
            text.push_str(cut.trim_end());
            text.push('…');
        } else {
            text.push_str(description);
        }
        text.push('\n');
    }
    let left_out = entries.len() - listed;
    if left_out > 0 {
        text.push_str(&format!("({left_out} more not listed; $name still works)\n"));
    }
    (text, trimmed)
}

/// A skill's instructions as one block, the same in the prompt, in an
/// expanded `/name` message and in `activate_skill`'s answer.
pub fn skill_block(name: &str, body: &str) -> String {
    format!("<skill name=\"{name}\">\n{}\n</skill>", body.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(n: usize, description_chars: usize) -> Vec<(String, String)> {
        (0..n)
            .map(|i| {
                (
                    format!("skill-{i:02}"),
                    format!("{i:02}{}", "d".repeat(description_chars - 2)),
                )
            })
            .collect()
    }

    fn borrow(entries: &[(String, String)]) -> Vec<(&str, &str)> {
        entries.iter().map(|(n, d)| (n.as_str(), d.as_str())).collect()
    }

    #[test]
    fn a_catalog_that_fits_is_complete() {
        let catalog = render_catalog(&[("notes", "Keep notes."), ("pdf", "Read PDFs.")], 1000);
        assert_eq!(
            catalog.text,
            format!("{CATALOG_HEADER}- notes: Keep notes.\n- pdf: Read PDFs.\n")
        );
        assert_eq!((catalog.listed, catalog.left_out, catalog.trimmed), (2, 0, 0));
    }

    /// Rows: skills, description length, budget → listed, left out, trimmed.
    #[test]
    fn budget_trims_descriptions_then_leaves_skills_out() {
        for (n, description_chars, budget, listed, left_out, trimmed) in [
            (10, 100, 100_000, 10, 0, 0),
            (10, 100, 1000, 10, 0, 10),
            (10, 100, 700, 10, 0, 10),
            (10, 100, 400, 5, 5, 5),
            (10, 100, 60, 0, 10, 0),
            (0, 10, 10, 0, 0, 0),
        ] {
            let owned = entries(n, description_chars);
            let catalog = render_catalog(&borrow(&owned), budget);
            assert_eq!(
                (catalog.listed, catalog.left_out, catalog.trimmed),
                (listed, left_out, trimmed),
                "{n} x {description_chars} in {budget}: {}",
                catalog.text
            );
            if n > 0 && listed > 0 {
                assert!(catalog.text.chars().count() <= budget, "{}", catalog.text);
            }
            if left_out > 0 {
                assert!(catalog.text.contains(&format!("({left_out} more not listed")));
            }
        }
    }

    #[test]
    fn trimming_is_deterministic_and_uses_the_budget() {
        let owned = entries(20, 300);
        let a = render_catalog(&borrow(&owned), 3000);
        let b = render_catalog(&borrow(&owned), 3000);
        assert_eq!(a, b);
        assert!(a.text.chars().count() <= 3000);
        // One more character per description would not fit.
        assert!(a.text.chars().count() > 3000 - 20 - 1, "{}", a.text.chars().count());
        assert!(a.text.lines().nth(1).unwrap().ends_with('…'));
    }

    #[test]
    fn overhead_per_skill_is_small() {
        let owned = entries(100, 50);
        let catalog = render_catalog(&borrow(&owned), usize::MAX);
        let content: usize = owned.iter().map(|(n, d)| n.len() + d.len()).sum();
        let overhead = catalog.text.chars().count() - CATALOG_HEADER.chars().count() - content;
        assert!(overhead / 100 < 20, "{} chars per skill", overhead / 100);
    }

    #[test]
    fn skill_blocks_wrap_the_body() {
        assert_eq!(
            skill_block("pdf", "\nUse it.\n"),
            "<skill name=\"pdf\">\nUse it.\n</skill>"
        );
    }
}
