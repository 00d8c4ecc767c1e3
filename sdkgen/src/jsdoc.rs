//! JSDoc comments: what a schema says in prose (description, default, format, ranges) and
//! what a tool's annotations promise (read-only, destructive) become the comments the model
//! reads next to each type.
//!
//! Text from upstreams is untrusted: `*/` is escaped so it cannot close the comment, line
//! endings are normalised, and every description is cut to the budget with [`CUT_MARKER`].

use std::borrow::Cow;

use serde_json::Value;

/// Appended where a description was cut to the budget.
pub const CUT_MARKER: &str = " …(truncated)";

/// A comment short enough for one line (`/** text */`) is written on one line.
const ONE_LINE_WIDTH: usize = 96;

/// Schema keywords rendered as `@keyword value` tags, in this order.
const VALUE_TAGS: &[&str] = &[
    "default",
    "format",
    "contentEncoding",
    "contentMediaType",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
];

/// Schema keywords rendered as bare `@keyword` tags when they are `true`.
const FLAG_TAGS: &[(&str, &str)] = &[
    ("uniqueItems", "@uniqueItems"),
    ("readOnly", "@readonly"),
    ("writeOnly", "@writeOnly"),
    ("deprecated", "@deprecated"),
];

/// Where a schema keyword goes: an index into [`VALUE_TAGS`] or [`FLAG_TAGS`].
enum Slot {
    Value(usize),
    Flag(usize),
}

/// The slot of a keyword (one `match`: this runs for every key of every schema).
fn tag_slot(key: &str) -> Option<Slot> {
    let slot = match key {
        "default" => Slot::Value(0),
        "format" => Slot::Value(1),
        "contentEncoding" => Slot::Value(2),
        "contentMediaType" => Slot::Value(3),
        "minimum" => Slot::Value(4),
        "exclusiveMinimum" => Slot::Value(5),
        "maximum" => Slot::Value(6),
        "exclusiveMaximum" => Slot::Value(7),
        "multipleOf" => Slot::Value(8),
        "minLength" => Slot::Value(9),
        "maxLength" => Slot::Value(10),
        "pattern" => Slot::Value(11),
        "minItems" => Slot::Value(12),
        "maxItems" => Slot::Value(13),
        "minProperties" => Slot::Value(14),
        "maxProperties" => Slot::Value(15),
        "uniqueItems" => Slot::Flag(0),
        "readOnly" => Slot::Flag(1),
        "writeOnly" => Slot::Flag(2),
        "deprecated" => Slot::Flag(3),
        _ => return None,
    };
    Some(slot)
}

/// One JSDoc comment: prose, then tags. Text is borrowed from the schema when it needs no
/// change (the common case), so most comments cost no allocation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Doc<'a> {
    /// Normalised prose: lines joined by `\n`, no blank line at either end; empty for none.
    text: Cow<'a, str>,
    tags: Vec<Cow<'a, str>>,
}

impl<'a> Doc<'a> {
    /// The comment for a schema: its description (or, lacking one, its title) and tags for
    /// default, format, ranges and flags. `None` when the schema says nothing of the kind.
    pub(crate) fn from_schema(schema: &'a Value, budget: usize) -> Option<Doc<'a>> {
        let map = schema.as_object()?;
        // One pass over the schema, then the tags in their fixed order.
        let mut description = None;
        let mut title = None;
        let mut values: [Option<&Value>; VALUE_TAGS.len()] = [None; VALUE_TAGS.len()];
        let mut flags = [false; FLAG_TAGS.len()];
        for (key, value) in map {
            match key.as_str() {
                "description" => description = prose(value),
                "title" => title = prose(value),
                key => match tag_slot(key) {
                    Some(Slot::Value(i)) => values[i] = Some(value),
                    Some(Slot::Flag(i)) => flags[i] = value == &Value::Bool(true),
                    None => {}
                },
            }
        }
        let mut doc = Doc::default();
        if let Some(text) = description.or(title) {
            doc.push_text(Cow::Borrowed(text), budget);
        }
        for (key, value) in VALUE_TAGS.iter().zip(values) {
            let Some(value) = value else { continue };
            // A default keeps its JSON form (`"1"` is not `1`); the others are prose.
            let mut tag = String::with_capacity(key.len() + 16);
            tag.push('@');
            tag.push_str(key);
            tag.push(' ');
            match value {
                Value::String(s) if *key != "default" => push_one_line(s, &mut tag),
                Value::Number(n) => tag.push_str(&n.to_string()),
                Value::Bool(b) => tag.push_str(if *b { "true" } else { "false" }),
                other => push_one_line(&compact_json(other), &mut tag),
            }
            if tag.len() > budget + key.len() + 2 {
                let value = tag.split_off(key.len() + 2);
                tag.push_str(&cut(&value, budget));
            }
            doc.push_tag(Cow::Owned(tag));
        }
        for ((_, tag), set) in FLAG_TAGS.iter().zip(flags) {
            if set {
                doc.push_tag(Cow::Borrowed(tag));
            }
        }
        (!doc.is_empty()).then_some(doc)
    }

    /// Adds prose, normalised and cut to `budget` characters.
    pub(crate) fn push_text(&mut self, text: Cow<'a, str>, budget: usize) {
        let simple = !text.contains(['\n', '\r']) && !text.contains("*/");
        let text = if simple && text.len() <= budget {
            // The common case: one short line (bytes ≥ chars, so it is within budget).
            match text {
                Cow::Borrowed(t) => Cow::Borrowed(t.trim_end()),
                Cow::Owned(t) => Cow::Owned(t.trim_end().to_owned()),
            }
        } else {
            let cut = cut(&normalise(&text), budget);
            let lines: Vec<String> = cut.lines().map(|l| escape(l.trim_end())).collect();
            Cow::Owned(lines.join("\n"))
        };
        if text.is_empty() {
            return;
        }
        if self.text.is_empty() {
            self.text = text;
        } else {
            let joined = self.text.to_mut();
            joined.push('\n');
            joined.push_str(&text);
        }
    }

    /// Adds a tag (`@readOnly`, `@default 3`); `*/` inside it is escaped.
    pub(crate) fn push_tag(&mut self, tag: Cow<'a, str>) {
        if tag.contains("*/") {
            self.tags.push(Cow::Owned(escape(&tag)));
        } else {
            self.tags.push(tag);
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.text.is_empty() && self.tags.is_empty()
    }

    /// Writes the comment at `indent` (a prefix of spaces), ending with a newline.
    pub(crate) fn render(&self, indent: &str, out: &mut String) {
        let text = (!self.text.is_empty()).then_some(self.text.as_ref());
        let pieces = || text.into_iter().chain(self.tags.iter().map(Cow::as_ref));
        if !self.text.contains('\n') {
            let width: usize = pieces().map(|p| p.chars().count() + 1).sum();
            if width <= ONE_LINE_WIDTH + 1 {
                out.push_str(indent);
                out.push_str("/**");
                for piece in pieces() {
                    out.push(' ');
                    out.push_str(piece);
                }
                out.push_str(" */\n");
                return;
            }
        }
        out.push_str(indent);
        out.push_str("/**\n");
        let lines = text.into_iter().flat_map(|t| t.split('\n'));
        for line in lines.chain(self.tags.iter().map(Cow::as_ref)) {
            out.push_str(indent);
            if line.is_empty() {
                out.push_str(" *\n");
            } else {
                out.push_str(" * ");
                out.push_str(line);
                out.push('\n');
            }
        }
        out.push_str(indent);
        out.push_str(" */\n");
    }
}

fn prose(value: &Value) -> Option<&str> {
    value.as_str().filter(|s| !s.trim().is_empty())
}

/// Compact JSON of a value (serialising a `Value` cannot fail; an empty string if it did).
pub(crate) fn compact_json(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// Line endings made `\n`, trailing spaces dropped, runs of blank lines collapsed to one and
/// blank lines at either end removed.
fn normalise(text: &str) -> String {
    let unified = if text.contains('\r') {
        text.replace("\r\n", "\n").replace('\r', "\n")
    } else {
        text.to_owned()
    };
    let mut out: Vec<&str> = Vec::new();
    for line in unified.lines().map(str::trim_end) {
        if line.is_empty() && out.last().is_none_or(|l| l.is_empty()) {
            continue;
        }
        out.push(line);
    }
    while out.last().is_some_and(|l| l.is_empty()) {
        out.pop();
    }
    out.join("\n")
}

/// `text` with every run of whitespace made one space, appended to `out`.
fn push_one_line(text: &str, out: &mut String) {
    for (i, word) in text.split_whitespace().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(word);
    }
}

/// `*/` would end the comment early: `*\/` reads the same and cannot.
fn escape(text: &str) -> String {
    if text.contains("*/") {
        text.replace("*/", "*\\/")
    } else {
        text.to_owned()
    }
}

/// `text` cut to at most `budget` characters plus [`CUT_MARKER`], at a word boundary when
/// one is near the cut.
pub(crate) fn cut(text: &str, budget: usize) -> String {
    let Some((byte_end, _)) = text.char_indices().nth(budget) else {
        return text.to_owned();
    };
    let head = &text[..byte_end];
    // Back up to the last whitespace when it keeps at least 80% of the budget.
    let head = match head.rfind(char::is_whitespace) {
        Some(ws) if head[..ws].chars().count() * 5 >= budget * 4 => &head[..ws],
        _ => head,
    };
    match head.trim_end() {
        "" => CUT_MARKER.trim_start().to_owned(),
        head => format!("{head}{CUT_MARKER}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rendered(doc: &Doc, indent: &str) -> String {
        let mut out = String::new();
        doc.render(indent, &mut out);
        out
    }

    #[test]
    fn short_docs_fit_on_one_line_with_their_tags() {
        let schema = json!({"description": "First number", "minimum": 0, "default": 1});
        let doc = Doc::from_schema(&schema, 100).unwrap();
        assert_eq!(
            rendered(&doc, "  "),
            "  /** First number @default 1 @minimum 0 */\n"
        );
    }

    #[test]
    fn multi_line_docs_are_star_prefixed_and_normalised() {
        let schema = json!({"description": "Line one\r\n\r\n\r\nLine two  \n\n", "format": "uri"});
        let doc = Doc::from_schema(&schema, 100).unwrap();
        assert_eq!(
            rendered(&doc, ""),
            "/**\n * Line one\n *\n * Line two\n * @format uri\n */\n"
        );
    }

    #[test]
    fn comment_terminators_are_escaped_everywhere() {
        let schema = json!({"description": "ends */ here", "pattern": "^a*/b$", "default": "*/"});
        let out = rendered(&Doc::from_schema(&schema, 100).unwrap(), "");
        assert_eq!(out.matches("*/").count(), 1, "{out}");
        assert!(out.ends_with("*/\n"));
        assert!(out.contains("ends *\\/ here"));
    }

    #[test]
    fn title_is_used_only_without_description_and_empty_schemas_have_no_doc() {
        let both = json!({"title": "T", "description": "D"});
        let doc = Doc::from_schema(&both, 100).unwrap();
        assert_eq!(rendered(&doc, ""), "/** D */\n");
        let title = json!({"title": "T"});
        let doc = Doc::from_schema(&title, 100).unwrap();
        assert_eq!(rendered(&doc, ""), "/** T */\n");
        assert!(Doc::from_schema(&json!({"type": "string", "description": "  "}), 100).is_none());
        assert!(Doc::from_schema(&json!(true), 100).is_none());
    }

    #[test]
    fn every_tag_has_its_slot() {
        for (i, key) in VALUE_TAGS.iter().enumerate() {
            assert!(
                matches!(tag_slot(key), Some(Slot::Value(j)) if j == i),
                "{key}"
            );
        }
        for (i, (key, _)) in FLAG_TAGS.iter().enumerate() {
            assert!(
                matches!(tag_slot(key), Some(Slot::Flag(j)) if j == i),
                "{key}"
            );
        }
        assert!(tag_slot("type").is_none());
    }

    #[test]
    fn flags_become_bare_tags() {
        let schema = json!({"deprecated": true, "readOnly": false, "uniqueItems": true});
        let doc = Doc::from_schema(&schema, 100).unwrap();
        assert_eq!(rendered(&doc, ""), "/** @uniqueItems @deprecated */\n");
    }

    #[test]
    fn cut_keeps_the_budget_prefers_word_boundaries_and_is_utf8_safe() {
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("exactly10!", 10), "exactly10!");
        assert_eq!(
            cut("alpha beta gamma delta", 12),
            format!("alpha beta{CUT_MARKER}")
        );
        assert_eq!(cut("ééééééééé", 4), format!("éééé{CUT_MARKER}"));
        assert_eq!(cut("abc", 0), "…(truncated)");
        let long = "word ".repeat(200);
        let out = cut(&long, 100);
        assert!(out.ends_with(CUT_MARKER));
        assert!(out.chars().count() <= 100 + CUT_MARKER.chars().count());
    }
}
