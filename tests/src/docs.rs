//! The documentation as tests read it: README.md and the pages under docs/, and their
//! fenced code blocks.

use crate::repo;

/// One fenced block of a documentation file.
pub struct Block {
    /// The file, relative to the repository (`README.md`, `docs/run-code.md`).
    pub file: String,
    /// The info string after the opening fence (`toml`, `sh`, …); empty for a diagram.
    pub lang: String,
    pub text: String,
    /// The line of the opening fence, for messages.
    pub line: usize,
}

impl Block {
    /// Where the block starts, for messages: `docs/oauth.md line 12`.
    pub fn place(&self) -> String {
        format!("{} line {}", self.file, self.line)
    }
}

/// README.md and every Markdown page under docs/, as (path relative to the repository,
/// text); the pages in name order.
pub fn documents() -> Vec<(String, String)> {
    let read = |file: &str| std::fs::read_to_string(repo().join(file)).unwrap();
    let mut pages: Vec<String> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    pages.sort();
    assert!(!pages.is_empty(), "docs/ has no Markdown page");
    std::iter::once("README.md".to_owned())
        .chain(pages)
        .map(|file| {
            let text = read(&file);
            (file, text)
        })
        .collect()
}

/// Every fenced block of every document, those indented in a list item too (their lines
/// without the fence's indentation).
pub fn blocks() -> Vec<Block> {
    let mut blocks = Vec::new();
    for (file, text) in documents() {
        let mut open: Option<(Block, usize)> = None;
        for (index, line) in text.lines().enumerate() {
            let indent = line.len() - line.trim_start().len();
            match (open.take(), line.trim_start().strip_prefix("```")) {
                (None, Some(lang)) => {
                    let block = Block {
                        file: file.clone(),
                        lang: lang.trim().to_owned(),
                        text: String::new(),
                        line: index + 1,
                    };
                    open = Some((block, indent));
                }
                (Some((block, _)), Some(_)) => blocks.push(block),
                (Some((mut block, indent)), None) => {
                    let unindented = line
                        .get(indent..)
                        .filter(|_| line.chars().take(indent).all(char::is_whitespace));
                    block.text.push_str(unindented.unwrap_or(line.trim_start()));
                    block.text.push('\n');
                    open = Some((block, indent));
                }
                (None, None) => {}
            }
        }
        assert!(open.is_none(), "{file} has an unclosed code block");
    }
    blocks
}

/// The rows of the first Markdown table after `heading` in `text`: its cells, the
/// header row and the separator left out.
pub fn table_after(text: &str, heading: &str) -> (String, Vec<Vec<String>>) {
    let section = text
        .split_once(heading)
        .unwrap_or_else(|| panic!("no `{heading}`"))
        .1;
    let section = section.split("\n## ").next().unwrap_or_default();
    let rows = section
        .lines()
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .skip(2)
        .map(|line| {
            let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
            // `\|` is a bar inside a cell.
            inner
                .replace("\\|", "\u{0}")
                .split('|')
                .map(|cell| cell.trim().replace('\u{0}', "|"))
                .collect()
        })
        .collect();
    (section.to_owned(), rows)
}
