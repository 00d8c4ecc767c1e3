//! Names in the generated code: when a server, tool or property name may stay bare and how
//! it is quoted otherwise, how strings become literals, and how schema definition names
//! become type identifiers that are valid and never a reserved word.
//!
//! Upstream names are arbitrary strings (`get-sum`, `my server`, `class`, `__proto__`), so
//! every name that reaches TypeScript or JavaScript goes through this module.

use std::collections::HashSet;

/// Words that cannot name a type alias: JavaScript's reserved words, TypeScript's
/// predefined types and its contextual keywords (kept out to stay unambiguous for readers).
const RESERVED: &[&str] = &[
    "abstract",
    "any",
    "as",
    "asserts",
    "async",
    "await",
    "bigint",
    "boolean",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "constructor",
    "continue",
    "debugger",
    "declare",
    "default",
    "delete",
    "do",
    "else",
    "enum",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "from",
    "function",
    "get",
    "global",
    "if",
    "implements",
    "import",
    "in",
    "infer",
    "instanceof",
    "interface",
    "is",
    "keyof",
    "let",
    "module",
    "namespace",
    "never",
    "new",
    "null",
    "number",
    "object",
    "of",
    "package",
    "private",
    "protected",
    "public",
    "readonly",
    "require",
    "return",
    "satisfies",
    "set",
    "static",
    "string",
    "super",
    "switch",
    "symbol",
    "this",
    "throw",
    "true",
    "try",
    "type",
    "typeof",
    "undefined",
    "unique",
    "unknown",
    "var",
    "void",
    "while",
    "with",
    "yield",
];

/// Whether `s` is an ASCII identifier (`[A-Za-z_$][A-Za-z0-9_$]*`). Non-ASCII names are
/// quoted even where JavaScript would accept them, so readers never guess.
pub(crate) fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '$' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// Whether `s` is reserved as a type name (see [`RESERVED`]).
pub(crate) fn is_reserved(s: &str) -> bool {
    RESERVED.binary_search(&s).is_ok()
}

/// Appends a property key of an object type or literal: bare when it is an identifier
/// (reserved words are valid property names), else a string literal.
pub(crate) fn push_property_key(s: &str, out: &mut String) {
    if is_identifier(s) {
        out.push_str(s);
    } else {
        push_string_literal(s, out);
    }
}

/// A double-quoted string literal valid in both JSON and JavaScript. Control characters and
/// the line separators U+2028/U+2029 are escaped so the literal never spans lines.
pub(crate) fn string_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    push_string_literal(s, &mut out);
    out
}

/// [`string_literal`], appended to `out`.
pub(crate) fn push_string_literal(s: &str, out: &mut String) {
    out.push('"');
    let plain = |c: char| c >= ' ' && !matches!(c, '"' | '\\' | '\u{7f}' | '\u{2028}' | '\u{2029}');
    if s.chars().all(plain) {
        out.push_str(s);
        out.push('"');
        return;
    }
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if plain(c) => out.push(c),
            c => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
        }
    }
    out.push('"');
}

/// A type identifier for a schema name: kept as written when it is already a usable
/// identifier, else PascalCased from its alphanumeric runs (`get-sum` → `GetSum`), with `_`
/// before a leading digit and after a reserved word. Never empty.
pub(crate) fn type_name(raw: &str) -> String {
    if is_identifier(raw) && !is_reserved(raw) {
        return raw.to_owned();
    }
    let mut out = String::new();
    for word in raw
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
        .filter(|w| !w.is_empty())
    {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            out.push(first.to_ascii_uppercase());
            out.extend(chars);
        }
    }
    if out.is_empty() {
        out.push_str("Type");
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    if is_reserved(&out) {
        out.push('_');
    }
    out
}

/// PascalCase of the alphanumeric runs of `raw` (`directory_tree` → `DirectoryTree`), used
/// to derive type names from tool names. May be empty.
pub(crate) fn pascal_case(raw: &str) -> String {
    let mut out = String::new();
    for word in raw
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            out.push(first.to_ascii_uppercase());
            out.extend(chars);
        }
    }
    out
}

/// Allocates type names that are unique within one SDK: the first `Node` keeps its name,
/// the next ones become `Node2`, `Node3`, … in allocation order.
#[derive(Debug, Default)]
pub(crate) struct NameAllocator {
    used: HashSet<String>,
}

impl NameAllocator {
    /// A fresh name derived from `base` (already a valid identifier).
    pub(crate) fn allocate(&mut self, base: &str) -> String {
        if self.used.insert(base.to_owned()) {
            return base.to_owned();
        }
        let mut n = 2usize;
        loop {
            let candidate = format!("{base}{n}");
            if self.used.insert(candidate.clone()) {
                return candidate;
            }
            n += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_list_is_sorted_for_binary_search() {
        let mut sorted = RESERVED.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, RESERVED);
    }

    fn property_key(s: &str) -> String {
        let mut out = String::new();
        push_property_key(s, &mut out);
        out
    }

    #[test]
    fn identifiers_stay_bare_and_others_are_quoted() {
        assert_eq!(property_key("path"), "path");
        assert_eq!(property_key("$schema"), "$schema");
        assert_eq!(property_key("class"), "class");
        assert_eq!(property_key("get-sum"), "\"get-sum\"");
        assert_eq!(property_key("9lives"), "\"9lives\"");
        assert_eq!(property_key(""), "\"\"");
        assert_eq!(property_key("naïve"), "\"naïve\"");
    }

    #[test]
    fn string_literals_escape_what_would_break_a_line_or_quote() {
        assert_eq!(string_literal("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(
            string_literal("x\ny\u{2028}z\u{1}"),
            r#""x\ny\u2028z\u0001""#
        );
        let v: String = serde_json::from_str(&string_literal("é\t\"\u{7f}")).unwrap();
        assert_eq!(v, "é\t\"\u{7f}");
    }

    #[test]
    fn type_names_are_valid_and_never_reserved() {
        assert_eq!(type_name("TreeNode"), "TreeNode");
        assert_eq!(type_name("node_info"), "node_info");
        assert_eq!(type_name("get-sum"), "GetSum");
        assert_eq!(type_name("my type.v2"), "MyTypeV2");
        assert_eq!(type_name("2d point"), "_2dPoint");
        assert_eq!(type_name("string"), "String");
        assert_eq!(type_name("default"), "Default");
        assert_eq!(type_name("---"), "Type");
        assert_eq!(type_name(""), "Type");
        assert_eq!(type_name("class"), "Class");
    }

    #[test]
    fn pascal_case_joins_words() {
        assert_eq!(pascal_case("directory_tree"), "DirectoryTree");
        assert_eq!(pascal_case("get-sum"), "GetSum");
        assert_eq!(pascal_case("--"), "");
    }

    #[test]
    fn allocator_suffixes_repeated_names() {
        let mut names = NameAllocator::default();
        assert_eq!(names.allocate("Node"), "Node");
        assert_eq!(names.allocate("Node"), "Node2");
        assert_eq!(names.allocate("Node2"), "Node22");
        assert_eq!(names.allocate("Node"), "Node3");
    }
}
