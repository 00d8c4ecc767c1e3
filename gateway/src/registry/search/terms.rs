//! Words as the search index compares them. Tool names are identifiers
//! (`read_text_file`, `get-sum`, `createEntities`), descriptions and queries are prose, and
//! a person asks for "files that changed" where a tool says "Shows changes to a file": so
//! identifiers are split into their words, everything is lowercased, common English words
//! are dropped, and the rest is reduced to its Snowball stem (`changed`, `changes` →
//! `chang`). A query also looks for the common synonyms of its words in tool vocabulary
//! ("folder" finds "directory"), at half weight.

use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};

static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// Words too common to tell tools apart, sorted for binary search.
const STOP_WORDS: &[&str] = &[
    "about", "all", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can",
    "could", "do", "does", "for", "from", "had", "has", "have", "how", "i", "if", "in", "into",
    "is", "it", "its", "just", "me", "my", "of", "on", "or", "our", "please", "should", "so",
    "some", "than", "that", "the", "their", "them", "then", "there", "these", "this", "those",
    "to", "us", "was", "we", "were", "what", "when", "which", "who", "will", "with", "would",
    "you", "your",
];

/// Words that tools and the people asking for them use for the same thing.
const SYNONYMS: &[&[&str]] = &[
    &["folder", "directory", "dir"],
    &["delete", "remove", "erase"],
    &["find", "search", "lookup", "locate"],
    &["big", "biggest", "large", "largest", "size"],
    &["rename", "move"],
    &["show", "display", "view", "print"],
    &["make", "create"],
    &["fetch", "get", "retrieve"],
    &["compare", "diff", "difference"],
    &["picture", "image", "photo"],
    &["history", "log"],
];

/// What a synonym counts for against a word of the query itself.
const SYNONYM_WEIGHT: f32 = 0.5;

/// The stemmed synonym groups.
static SYNONYM_TERMS: LazyLock<Vec<Vec<String>>> = LazyLock::new(|| {
    SYNONYMS
        .iter()
        .map(|group| group.iter().flat_map(|word| terms(word)).collect())
        .collect()
});

/// The distinct terms of a query with their weights: 1 for its own words, then
/// [`SYNONYM_WEIGHT`] for their synonyms that it does not contain already.
pub fn query_terms(query: &str) -> Vec<(String, f32)> {
    let mut own = terms(query);
    own.sort_unstable();
    own.dedup();
    let mut weighted: Vec<(String, f32)> = own.iter().map(|t| (t.clone(), 1.0)).collect();
    for group in SYNONYM_TERMS
        .iter()
        .filter(|g| g.iter().any(|t| own.contains(t)))
    {
        for synonym in group {
            if !weighted.iter().any(|(t, _)| t == synonym) {
                weighted.push((synonym.clone(), SYNONYM_WEIGHT));
            }
        }
    }
    weighted
}

/// Appends the terms of `text` to `out`, in order, repeats kept.
pub fn push_terms(text: &str, out: &mut Vec<String>) {
    for word in words(text) {
        if is_term(&word) {
            out.push(STEMMER.stem(&word).into_owned());
        }
    }
}

/// The terms of `text`.
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    push_terms(text, &mut out);
    out
}

fn is_term(word: &str) -> bool {
    let single_letter =
        word.chars().nth(1).is_none() && !word.starts_with(|c: char| c.is_ascii_digit());
    !single_letter && STOP_WORDS.binary_search(&word).is_err()
}

/// The lowercase words of `text`: runs of letters and digits, with identifiers split at
/// case changes (`createEntities` → `create`, `entities`; `HTTPServer` → `http`, `server`).
pub(super) fn words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current: Vec<char> = Vec::new();
    let flush = |current: &mut Vec<char>, words: &mut Vec<String>| {
        if !current.is_empty() {
            words.push(current.drain(..).flat_map(char::to_lowercase).collect());
        }
    };
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if !c.is_alphanumeric() {
            flush(&mut current, &mut words);
            continue;
        }
        if let Some(&previous) = current.last() {
            let next_is_lower = chars.peek().is_some_and(|n| n.is_lowercase());
            let starts_word = c.is_uppercase()
                && (previous.is_lowercase()
                    || previous.is_ascii_digit()
                    || (previous.is_uppercase() && next_is_lower));
            if starts_word {
                flush(&mut current, &mut words);
            }
        }
        current.push(c);
    }
    flush(&mut current, &mut words);
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_words_are_sorted_for_binary_search() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn identifiers_split_into_words() {
        assert_eq!(words("read_text_file"), ["read", "text", "file"]);
        assert_eq!(words("get-sum"), ["get", "sum"]);
        assert_eq!(words("createEntities"), ["create", "entities"]);
        assert_eq!(
            words("HTTPServer base64 utf8Text"),
            ["http", "server", "base64", "utf8", "text"]
        );
        assert_eq!(words("mcp__git__git_log"), ["mcp", "git", "git", "log"]);
        assert_eq!(words("Zeitzone ändern"), ["zeitzone", "ändern"]);
        assert!(words("  --  ").is_empty());
    }

    #[test]
    fn queries_add_synonyms_at_lower_weight() {
        let weighted = query_terms("make a new folder in the folder");
        assert_eq!(
            &weighted[..2],
            &[("folder".into(), 1.0), ("make".into(), 1.0)][..]
        );
        assert!(weighted.contains(&("new".into(), 1.0)));
        assert!(weighted.contains(&("directori".into(), SYNONYM_WEIGHT)));
        assert!(weighted.contains(&("creat".into(), SYNONYM_WEIGHT)));
        assert!(query_terms("zebra").iter().all(|(_, w)| *w == 1.0));
    }

    #[test]
    fn terms_are_stemmed_without_stop_words() {
        assert_eq!(
            terms("Show me what changed in the files"),
            ["show", "chang", "file"]
        );
        assert_eq!(terms("Shows changes to a file"), ["show", "chang", "file"]);
        assert_eq!(terms("directories"), terms("directory"));
        assert_eq!(
            terms("a b 7 x1"),
            ["7", "x1"],
            "single letters go, digits stay"
        );
    }
}
