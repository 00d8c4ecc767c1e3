//! A line diff of two texts, for showing an operator what changed in a tool definition
//! before they approve it (the console and `mcp-gateway tools held`).

/// Beyond this many line pairs the diff gives up finding common lines and shows the old
/// text removed and the new one added (a definition is rarely more than a few hundred
/// lines).
const MAX_PAIRS: usize = 1 << 20;

/// The lines of `old` and `new`, each marked `' '` (in both), `'-'` (only in `old`) or
/// `'+'` (only in `new`), in order: a longest common subsequence of lines is kept.
pub fn lines(old: &str, new: &str) -> Vec<String> {
    let old: Vec<&str> = old.lines().collect();
    let new: Vec<&str> = new.lines().collect();
    let marked = |mark: char, line: &str| format!("{mark}{line}");
    if old.len().saturating_mul(new.len()) > MAX_PAIRS {
        return old
            .iter()
            .map(|line| marked('-', line))
            .chain(new.iter().map(|line| marked('+', line)))
            .collect();
    }
    // common[i][j]: the longest common subsequence of old[i..] and new[j..].
    let mut common = vec![vec![0u32; new.len() + 1]; old.len() + 1];
    for i in (0..old.len()).rev() {
        for j in (0..new.len()).rev() {
            common[i][j] = if old[i] == new[j] {
                common[i + 1][j + 1] + 1
            } else {
                common[i + 1][j].max(common[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(old.len().max(new.len()));
    while i < old.len() || j < new.len() {
        if i < old.len() && j < new.len() && old[i] == new[j] {
            out.push(marked(' ', old[i]));
            i += 1;
            j += 1;
        } else if i < old.len() && (j == new.len() || common[i + 1][j] >= common[i][j + 1]) {
            out.push(marked('-', old[i]));
            i += 1;
        } else {
            out.push(marked('+', new[j]));
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_lines_are_marked_and_the_rest_kept() {
        assert_eq!(
            lines("a\nb\nc\n", "a\nB\nc\nd\n"),
            [" a", "-b", "+B", " c", "+d"]
        );
        assert_eq!(lines("", "x"), ["+x"]);
        assert_eq!(lines("x", ""), ["-x"]);
    }
}
