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
pub struct RenderedCatalog {
    pub text: String,
    pub listed: usize,
    pub left_out: usize,
    /// Descriptions shortened to fit.
    pub trimmed: usize,
}

/// The first line of the catalog section.
pub const CATALOG_HEADER: &str = "Skills (call activate_skill with a name to load its instructions or tools):\n";
/// Descriptions are never shortened below this; skills are left out instead.
pub const MIN_DESCRIPTION_CHARS: usize = 40;

/// Renders `entries` (name, description), in the order given, within `budget` characters.
///
/// Sizes are computed per line, never by rendering candidates: with
/// thousands of skills every turn pays for this, so it stays O(n log n).
pub fn render_catalog(entries: &[(&str, &str)], budget: usize) -> RenderedCatalog {
    let longest = entries.iter().map(|(_, d)| chars(d)).max().unwrap_or(0);
    let fits = |cap: usize| size(entries, cap) <= budget;
    if fits(usize::MAX) {
        return render(entries, usize::MAX, entries.len());
    }
    // The longest common description length that fits, by bisection.
    let (mut low, mut high) = (MIN_DESCRIPTION_CHARS.min(longest), longest);
    if fits(low) {
        while low < high {
            let mid = (low + high).div_ceil(2);
            if fits(mid) {
                low = mid;
            } else {
                high = mid - 1;
            }
        }
        return render(entries, low, entries.len());
    }
    // Even short descriptions do not fit: list as many as fit, count the rest.
    let lines: Vec<usize> = entries.iter().map(|(n, d)| line_chars(n, d, low)).collect();
    let mut used = chars(CATALOG_HEADER) + lines.iter().sum::<usize>();
    let mut listed = entries.len();
    while listed > 0 && used + chars(&trailer(entries.len() - listed)) > budget {
        listed -= 1;
        used -= lines[listed];
    }
    render(entries, low, listed)
}

fn chars(text: &str) -> usize {
    text.chars().count()
}

/// A description cut to `cap` characters, the cut marked.
fn shortened(description: &str, cap: usize) -> Option<String> {
    (chars(description) > cap).then(|| {
        let cut: String = description.chars().take(cap.saturating_sub(1)).collect();
        format!("{}…", cut.trim_end())
    })
}

/// Characters of one entry's line (`- name: description\n`).
fn line_chars(name: &str, description: &str, cap: usize) -> usize {
    let description = shortened(description, cap).map_or_else(|| chars(description), |cut| chars(&cut));
    2 + chars(name) + 2 + description + 1
}

/// The last line when skills are left out.
fn trailer(left_out: usize) -> String {
    if left_out == 0 {
        String::new()
    } else {
        format!("({left_out} more not listed; $name still works)\n")
    }
}

/// Characters of the catalog of every entry, descriptions cut to `cap`.
fn size(entries: &[(&str, &str)], cap: usize) -> usize {
    chars(CATALOG_HEADER)
        + entries
            .iter()
            .map(|(name, description)| line_chars(name, description, cap))
            .sum::<usize>()
}

/// The catalog of the first `listed` entries with descriptions cut to `cap` characters.
fn render(entries: &[(&str, &str)], cap: usize, listed: usize) -> RenderedCatalog {
    let mut text = String::from(CATALOG_HEADER);
    let mut trimmed = 0;
    for (name, description) in &entries[..listed] {
        text.push_str("- ");
        text.push_str(name);
        text.push_str(": ");
        match shortened(description, cap) {
            Some(cut) => {
                trimmed += 1;
                text.push_str(&cut);
            }
            None => text.push_str(description),
        }
        text.push('\n');
    }
    let left_out = entries.len() - listed;
    text.push_str(&trailer(left_out));
    RenderedCatalog {
        text,
        listed,
        left_out,
        trimmed,
    }
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

    /// The sizes the budget is checked with are the sizes rendered, also
    /// with multi-byte text and spaces where a cut falls.
    #[test]
    fn measured_sizes_are_the_rendered_sizes() {
        let owned: Vec<(String, String)> = (0..30)
            .map(|i| {
                (
                    format!("skill-é{i}"),
                    format!("{}  ü ünd {}", "ß".repeat(i * 3), "x ".repeat(i)),
                )
            })
            .collect();
        let entries = borrow(&owned);
        for cap in [1, 2, 5, 6, 7, 40, 80, usize::MAX] {
            for listed in [0, 1, 17, 30] {
                let rendered = render(&entries[..listed], cap, listed);
                assert_eq!(
                    chars(&rendered.text),
                    size(&entries[..listed], cap),
                    "cap {cap}, listed {listed}"
                );
            }
        }
        for budget in [0, 100, 500, 900, 1500, 3000, 100_000] {
            let catalog = render_catalog(&entries, budget);
            if catalog.listed > 0 {
                assert!(chars(&catalog.text) <= budget, "{budget}: {}", catalog.text);
            }
            assert_eq!(catalog.listed + catalog.left_out, entries.len());
        }
    }

    /// Many skills over a small budget: the first that fit are listed, the
    /// rest counted, and one more would not have fitted.
    #[test]
    fn thousands_of_skills_list_what_fits() {
        let owned = entries(5_000, 120);
        let catalog = render_catalog(&borrow(&owned), 4_000);
        assert!(catalog.listed > 0 && catalog.left_out > 0, "{catalog:?}");
        assert!(chars(&catalog.text) <= 4_000);
        assert!(catalog.text.contains(&format!("({} more not listed", catalog.left_out)));
        let one_more = render(&borrow(&owned), MIN_DESCRIPTION_CHARS, catalog.listed + 1);
        assert!(chars(&one_more.text) > 4_000);
    }

    #[test]
    fn skill_blocks_wrap_the_body() {
        assert_eq!(
            skill_block("pdf", "\nUse it.\n"),
            "<skill name=\"pdf\">\nUse it.\n</skill>"
        );
    }
}
