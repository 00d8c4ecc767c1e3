//! A small TypeScript type syntax tree and its one printer.
//!
//! Schemas are first converted to [`Ty`] and only then printed, so that simplification
//! (flattening unions, `unknown` absorbing a union, `never` vanishing from one) and layout
//! (one line or several, parentheses, indentation) are decided in one place and the output
//! is the same for the same tree, byte for byte.

use crate::jsdoc::Doc;
use crate::names;

/// An object type printed on one line only when it has no comments and fits this width.
const INLINE_WIDTH: usize = 72;

/// Indentation per nesting level.
const INDENT: &str = "  ";

/// The namespace that holds named (recursive or shared) schema types.
pub(crate) const DEFS_NAMESPACE: &str = "$defs";

/// A TypeScript type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ty<'a> {
    Unknown,
    Never,
    /// `string`, `number`, `boolean`, `null`, `undefined`.
    Keyword(&'static str),
    /// A literal type, already printed (`"a"`, `3`, `true`).
    Literal(String),
    /// A named type in the [`DEFS_NAMESPACE`] namespace.
    Named(String),
    Array(Box<Ty<'a>>),
    Tuple(Tuple<'a>),
    Object(Object<'a>),
    Union(Vec<Ty<'a>>),
    Intersection(Vec<Ty<'a>>),
}

/// `[A, B?, ...C[]]`: the first `required` items are required, the rest optional.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tuple<'a> {
    pub(crate) items: Vec<Ty<'a>>,
    pub(crate) required: usize,
    pub(crate) rest: Option<Box<Ty<'a>>>,
}

/// An object type: properties in the order given (callers sort them), then an optional
/// index signature.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Object<'a> {
    pub(crate) props: Vec<Prop<'a>>,
    pub(crate) index: Option<Index<'a>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Prop<'a> {
    /// The property name, borrowed from the schema.
    pub(crate) name: &'a str,
    pub(crate) optional: bool,
    pub(crate) ty: Ty<'a>,
    pub(crate) doc: Option<Doc<'a>>,
}

/// `[key: string]: ty`, with a comment (for example the key patterns it stands for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Index<'a> {
    pub(crate) ty: Box<Ty<'a>>,
    pub(crate) doc: Option<Doc<'a>>,
}

impl<'a> Ty<'a> {
    /// `A | B | …`, flattened and deduplicated; `unknown` absorbs it, `never` members drop
    /// out, no members is `never`.
    pub(crate) fn union(members: impl IntoIterator<Item = Ty<'a>>) -> Ty<'a> {
        let mut out: Vec<Ty<'a>> = Vec::new();
        for member in members {
            let flat = match member {
                Ty::Union(inner) => inner,
                other => vec![other],
            };
            for ty in flat {
                match ty {
                    Ty::Unknown => return Ty::Unknown,
                    Ty::Never => {}
                    ty if out.contains(&ty) => {}
                    ty => out.push(ty),
                }
            }
        }
        match out.len() {
            0 => Ty::Never,
            1 => out.pop().unwrap_or(Ty::Never),
            _ => Ty::Union(out),
        }
    }

    /// `A & B & …`, flattened and deduplicated; `unknown` members drop out, `never`
    /// absorbs it, no members is `unknown`.
    pub(crate) fn intersection(members: impl IntoIterator<Item = Ty<'a>>) -> Ty<'a> {
        let mut out: Vec<Ty<'a>> = Vec::new();
        for member in members {
            let flat = match member {
                Ty::Intersection(inner) => inner,
                other => vec![other],
            };
            for ty in flat {
                match ty {
                    Ty::Never => return Ty::Never,
                    Ty::Unknown => {}
                    ty if out.contains(&ty) => {}
                    ty => out.push(ty),
                }
            }
        }
        match out.len() {
            0 => Ty::Unknown,
            1 => out.pop().unwrap_or(Ty::Unknown),
            _ => Ty::Intersection(out),
        }
    }

    /// The type printed at nesting `level` (continuation lines are indented to it).
    #[cfg(test)]
    pub(crate) fn render(&self, level: usize) -> String {
        let mut out = String::new();
        self.write(level, &mut out);
        out
    }

    /// Writes the type at nesting `level` (continuation lines are indented to it).
    pub(crate) fn write(&self, level: usize, out: &mut String) {
        match self {
            Ty::Unknown => out.push_str("unknown"),
            Ty::Never => out.push_str("never"),
            Ty::Keyword(k) => out.push_str(k),
            Ty::Literal(l) => out.push_str(l),
            Ty::Named(name) => {
                out.push_str(DEFS_NAMESPACE);
                out.push('.');
                out.push_str(name);
            }
            Ty::Array(item) => {
                item.write_operand(level, out, true);
                out.push_str("[]");
            }
            Ty::Tuple(tuple) => tuple.write(level, out),
            Ty::Object(object) => object.write(level, out),
            Ty::Union(members) => write_joined(members, " | ", level, out),
            Ty::Intersection(members) => write_joined(members, " & ", level, out),
        }
    }

    /// Writes the type where it is an operand: parenthesised when it is a union (or an
    /// intersection, for `[]` and `?`, which bind tighter than both).
    fn write_operand(&self, level: usize, out: &mut String, in_postfix: bool) {
        let wrap = match self {
            Ty::Union(_) => true,
            Ty::Intersection(_) => in_postfix,
            _ => false,
        };
        if wrap {
            out.push('(');
            self.write(level, out);
            out.push(')');
        } else {
            self.write(level, out);
        }
    }

    /// Whether the type prints without comments (so an object holding it may be inline).
    fn is_plain(&self) -> bool {
        match self {
            Ty::Object(o) => o.is_plain(),
            Ty::Array(item) => item.is_plain(),
            Ty::Tuple(t) => {
                t.items.iter().all(Ty::is_plain) && t.rest.as_ref().is_none_or(|r| r.is_plain())
            }
            Ty::Union(m) | Ty::Intersection(m) => m.iter().all(Ty::is_plain),
            _ => true,
        }
    }
}

fn write_joined(members: &[Ty<'_>], sep: &str, level: usize, out: &mut String) {
    for (i, member) in members.iter().enumerate() {
        if i > 0 {
            out.push_str(sep);
        }
        // Inside an intersection a union needs parentheses; inside a union nothing does.
        member.write_operand(level, out, false);
    }
}

impl Tuple<'_> {
    fn write(&self, level: usize, out: &mut String) {
        out.push('[');
        for (i, item) in self.items.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            if i < self.required {
                item.write(level, out);
            } else {
                item.write_operand(level, out, true);
                out.push('?');
            }
        }
        if let Some(rest) = &self.rest {
            if !self.items.is_empty() {
                out.push_str(", ");
            }
            out.push_str("...");
            rest.write_operand(level, out, true);
            out.push_str("[]");
        }
        out.push(']');
    }
}

impl Object<'_> {
    fn is_plain(&self) -> bool {
        self.props
            .iter()
            .all(|p| p.doc.is_none() && p.ty.is_plain())
            && self
                .index
                .as_ref()
                .is_none_or(|i| i.doc.is_none() && i.ty.is_plain())
    }

    fn write(&self, level: usize, out: &mut String) {
        if self.props.is_empty() && self.index.is_none() {
            out.push_str("{}");
            return;
        }
        if self.is_plain() {
            // Written in place, and taken back if it turns out too wide or multi-line.
            let start = out.len();
            if self.write_inline(level, out, start + INLINE_WIDTH) && !out[start..].contains('\n') {
                return;
            }
            out.truncate(start);
        }
        let inner = INDENT.repeat(level + 1);
        out.push_str("{\n");
        for prop in &self.props {
            if let Some(doc) = &prop.doc {
                doc.render(&inner, out);
            }
            out.push_str(&inner);
            prop.write_head(out);
            prop.ty.write(level + 1, out);
            out.push_str(";\n");
        }
        if let Some(index) = &self.index {
            if let Some(doc) = &index.doc {
                doc.render(&inner, out);
            }
            out.push_str(&inner);
            out.push_str("[key: string]: ");
            index.ty.write(level + 1, out);
            out.push_str(";\n");
        }
        for _ in 0..level {
            out.push_str(INDENT);
        }
        out.push('}');
    }

    /// Writes the one-line form; `false` (stopping early) once `out` passes `limit` bytes.
    fn write_inline(&self, level: usize, out: &mut String, limit: usize) -> bool {
        out.push_str("{ ");
        for (i, prop) in self.props.iter().enumerate() {
            if i > 0 {
                out.push_str("; ");
            }
            prop.write_head(out);
            prop.ty.write(level, out);
            if out.len() > limit {
                return false;
            }
        }
        if let Some(index) = &self.index {
            if !self.props.is_empty() {
                out.push_str("; ");
            }
            out.push_str("[key: string]: ");
            index.ty.write(level, out);
        }
        out.push_str(" }");
        out.len() <= limit
    }
}

impl Prop<'_> {
    fn write_head(&self, out: &mut String) {
        names::push_property_key(self.name, out);
        out.push_str(if self.optional { "?: " } else { ": " });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prop<'a>(name: &'a str, optional: bool, ty: Ty<'a>) -> Prop<'a> {
        Prop {
            name,
            optional,
            ty,
            doc: None,
        }
    }

    const STRING: Ty<'static> = Ty::Keyword("string");
    const NUMBER: Ty<'static> = Ty::Keyword("number");

    #[test]
    fn unions_flatten_dedupe_and_absorb() {
        let u = Ty::union([STRING, Ty::union([NUMBER, STRING]), Ty::Never]);
        assert_eq!(u.render(0), "string | number");
        assert_eq!(Ty::union([STRING, Ty::Unknown]), Ty::Unknown);
        assert_eq!(Ty::union([]), Ty::Never);
        assert_eq!(Ty::union([Ty::Never, NUMBER]), NUMBER);
    }

    #[test]
    fn intersections_drop_unknown_and_collapse_on_never() {
        assert_eq!(Ty::intersection([STRING, Ty::Unknown]), STRING);
        assert_eq!(Ty::intersection([STRING, Ty::Never]), Ty::Never);
        assert_eq!(Ty::intersection([]), Ty::Unknown);
        let i = Ty::intersection([Ty::Named("A".into()), Ty::union([STRING, NUMBER])]);
        assert_eq!(i.render(0), "$defs.A & (string | number)");
    }

    #[test]
    fn postfix_operators_parenthesise_unions() {
        let arr = Ty::Array(Box::new(Ty::union([STRING, Ty::Keyword("null")])));
        assert_eq!(arr.render(0), "(string | null)[]");
        let tuple = Ty::Tuple(Tuple {
            items: vec![STRING, Ty::union([STRING, NUMBER])],
            required: 1,
            rest: Some(Box::new(Ty::union([NUMBER, Ty::Keyword("boolean")]))),
        });
        assert_eq!(
            tuple.render(0),
            "[string, (string | number)?, ...(number | boolean)[]]"
        );
        let empty_rest = Ty::Tuple(Tuple {
            items: vec![],
            required: 0,
            rest: Some(Box::new(NUMBER)),
        });
        assert_eq!(empty_rest.render(0), "[...number[]]");
    }

    #[test]
    fn plain_short_objects_are_inline_others_multi_line() {
        let obj = Ty::Object(Object {
            props: vec![prop("a", false, NUMBER), prop("get-b", true, STRING)],
            index: None,
        });
        assert_eq!(obj.render(0), r#"{ a: number; "get-b"?: string }"#);
        let mut documented = Object {
            props: vec![prop("a", false, NUMBER)],
            index: Some(Index {
                ty: Box::new(Ty::Unknown),
                doc: None,
            }),
        };
        let mut doc = Doc::default();
        doc.push_text("The a".into(), 100);
        documented.props[0].doc = Some(doc);
        let nested = Ty::Object(Object {
            props: vec![prop("inner", false, Ty::Object(documented))],
            index: None,
        });
        assert_eq!(
            nested.render(1),
            "{\n    inner: {\n      /** The a */\n      a: number;\n      [key: string]: unknown;\n    };\n  }"
        );
    }
}
