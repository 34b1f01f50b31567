//! A Markdown table as preformatted text: no chat platform draws tables,
//! and a monospaced grid reads well on all of them.

use pulldown_cmark::Alignment;

/// The widest a cell is padded to; a longer cell stays whole and pushes
/// its row out rather than being cut.
const MAX_COLUMN: usize = 40;

/// Rows of cells as aligned columns, `│` between them and a rule under the
/// header rows.
pub(crate) fn lay_out(rows: &[Vec<String>], header_rows: usize, alignments: &[Alignment]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|cell| cell.split_whitespace().collect::<Vec<_>>().join(" "))
                .collect()
        })
        .collect();
    let widths: Vec<usize> = (0..columns)
        .map(|column| {
            cells
                .iter()
                .filter_map(|row| row.get(column))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
                .min(MAX_COLUMN)
        })
        .collect();
    let mut lines = Vec::with_capacity(rows.len() + 1);
    for (index, row) in cells.iter().enumerate() {
        let line: Vec<String> = (0..columns)
            .map(|column| {
                let cell = row.get(column).map(String::as_str).unwrap_or("");
                pad(
                    cell,
                    widths[column],
                    alignments.get(column).copied().unwrap_or(Alignment::None),
                )
            })
            .collect();
        lines.push(line.join(" │ ").trim_end().to_owned());
        if index + 1 == header_rows {
            let rule: Vec<String> = widths.iter().map(|&width| "─".repeat(width.max(1))).collect();
            lines.push(rule.join("─┼─"));
        }
    }
    lines.join("\n")
}

fn pad(cell: &str, width: usize, alignment: Alignment) -> String {
    let missing = width.saturating_sub(cell.chars().count());
    let (left, right) = match alignment {
        Alignment::Right => (missing, 0),
        Alignment::Center => (missing / 2, missing - missing / 2),
        Alignment::Left | Alignment::None => (0, missing),
    };
    format!("{}{cell}{}", " ".repeat(left), " ".repeat(right))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_under_a_rule() {
        let rows = vec![
            vec!["Name".to_owned(), "Qty".to_owned()],
            vec!["apples".to_owned(), "3".to_owned()],
            vec!["kiwi".to_owned(), "12".to_owned()],
        ];
        let text = lay_out(&rows, 1, &[Alignment::Left, Alignment::Right]);
        assert_eq!(text, "Name   │ Qty\n───────┼────\napples │   3\nkiwi   │  12");
    }

    #[test]
    fn ragged_rows_and_long_cells_keep_every_word() {
        let long = "word ".repeat(20);
        let rows = vec![vec!["a".to_owned()], vec!["b".to_owned(), long.clone()]];
        let text = lay_out(&rows, 0, &[]);
        assert!(text.contains(long.trim()), "{text}");
        assert!(text.starts_with("a │\nb │ word"), "{text}");
    }
}
