//! JSON Schema → TypeScript types.
//!
//! One [`convert_document`] call turns one schema document (a tool's inputSchema or
//! outputSchema) into a [`Ty`]. `type`, `enum`, `const`, `oneOf`/`anyOf` (unions), `allOf`
//! (intersections), `nullable`, objects (required vs optional, `additionalProperties` and
//! `patternProperties` as index signatures), arrays and tuples (`prefixItems`, or `items`
//! as an array) are mapped; anything else is `unknown`.
//!
//! Local `$ref`s are inlined when their target is used once; a target used twice, the
//! document root, or a target met again while it is being inlined (recursion) becomes a
//! named type in [`Defs`], shared across tools when its source is identical. Named bodies
//! are converted from a queue, never from inside one another, so recursion in the schema is
//! never recursion here. Depth is bounded by `Options::max_depth` and work by
//! [`NODE_BUDGET`]; past either the type is `unknown`.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde_json::{Map, Value};

use crate::Options;
use crate::jsdoc::Doc;
use crate::names::{self, NameAllocator};
use crate::refs::{self, Pointer};
use crate::ts::{Index, Object, Prop, Tuple, Ty};

/// Schema nodes converted per document at most; past it every type is `unknown`. It bounds
/// the work (and the output) for any input, including a small schema whose `$ref`s would
/// fan out when inlined.
pub const NODE_BUDGET: usize = 20_000;

/// The named types of one SDK, by name (so they print in lexicographic order).
#[derive(Debug, Default)]
pub(crate) struct Defs<'a> {
    names: NameAllocator,
    /// Source key (see [`refs::source_key`]) → name, to share identical definitions.
    by_source: HashMap<String, String>,
    entries: BTreeMap<String, NamedType<'a>>,
}

#[derive(Debug)]
pub(crate) struct NamedType<'a> {
    pub(crate) doc: Option<Doc<'a>>,
    pub(crate) ty: Ty<'a>,
}

impl<'a> Defs<'a> {
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&String, &NamedType<'a>)> {
        self.entries.iter()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// TypeScript rejects a type alias that reaches itself through unions and intersections
    /// alone (`type A = A | null`, `type A = B; type B = A`); recursion is allowed only
    /// through objects, arrays and tuples. Such a reference is replaced by `unknown`.
    pub(crate) fn break_alias_cycles(&mut self) {
        while let Some((from, to)) = self.find_alias_cycle() {
            if let Some(entry) = self.entries.get_mut(&from) {
                let ty = std::mem::replace(&mut entry.ty, Ty::Unknown);
                entry.ty = without_alias(ty, &to);
            }
        }
    }

    /// An edge `from → to` closing a cycle of alias references, searched depth first in
    /// name order (so the same cycle is always cut at the same place).
    fn find_alias_cycle(&self) -> Option<(String, String)> {
        // 1 = on the current path, 2 = finished.
        let mut state: HashMap<&str, u8> = HashMap::new();
        for start in self.entries.keys() {
            if state.contains_key(start.as_str()) {
                continue;
            }
            state.insert(start, 1);
            let mut path: Vec<(&str, Vec<&str>)> = vec![(start, self.aliases_of(start))];
            while let Some((node, next)) = path.last_mut() {
                let node = *node;
                match next.pop() {
                    Some(succ) => match state.get(succ) {
                        Some(1) => return Some((node.to_owned(), succ.to_owned())),
                        Some(_) => {}
                        None => {
                            state.insert(succ, 1);
                            path.push((succ, self.aliases_of(succ)));
                        }
                    },
                    None => {
                        state.insert(node, 2);
                        path.pop();
                    }
                }
            }
        }
        None
    }

    /// The named types `name`'s body refers to directly (through unions/intersections).
    fn aliases_of(&self, name: &str) -> Vec<&str> {
        let mut out = Vec::new();
        if let Some(entry) = self.entries.get(name) {
            collect_aliases(&entry.ty, &mut out);
        }
        out.retain(|n| self.entries.contains_key(*n));
        out.reverse();
        out
    }
}

fn collect_aliases<'t>(ty: &'t Ty<'_>, out: &mut Vec<&'t str>) {
    match ty {
        Ty::Named(name) => out.push(name),
        Ty::Union(members) | Ty::Intersection(members) => {
            members.iter().for_each(|m| collect_aliases(m, out));
        }
        _ => {}
    }
}

fn without_alias<'a>(ty: Ty<'a>, name: &str) -> Ty<'a> {
    match ty {
        Ty::Named(n) if n == name => Ty::Unknown,
        Ty::Union(members) => Ty::union(members.into_iter().map(|m| without_alias(m, name))),
        Ty::Intersection(members) => {
            Ty::intersection(members.into_iter().map(|m| without_alias(m, name)))
        }
        other => other,
    }
}

/// How to name a document's root should it be referenced (`#`) from inside itself:
/// PascalCase of the tool name, then a suffix (`directory_tree`, `Input` →
/// `DirectoryTreeInput`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RootName<'a> {
    pub(crate) tool: &'a str,
    pub(crate) suffix: &'static str,
}

impl RootName<'_> {
    fn hint(&self) -> String {
        match names::pascal_case(self.tool) {
            stem if stem.is_empty() => format!("Tool{}", self.suffix),
            stem => format!("{stem}{}", self.suffix),
        }
    }
}

/// Converts one schema document. Named types are added to `defs`.
pub(crate) fn convert_document<'a>(
    root: &'a Value,
    root_name: RootName<'a>,
    options: &Options,
    defs: &mut Defs<'a>,
) -> Ty<'a> {
    let mut converter = Converter {
        root,
        root_name,
        options,
        defs,
        counts: None,
        local: HashMap::new(),
        inlining: Vec::new(),
        queue: VecDeque::new(),
        budget: NODE_BUDGET,
    };
    let ty = converter.convert(root, 0);
    while let Some((pointer, name)) = converter.queue.pop_front() {
        const ANYTHING: &Value = &Value::Bool(true);
        let target = pointer.resolve(root).unwrap_or(ANYTHING);
        let body = converter.convert(target, 0);
        let doc = Doc::from_schema(target, options.description_budget);
        converter
            .defs
            .entries
            .insert(name, NamedType { doc, ty: body });
    }
    ty
}

struct Converter<'a, 'd> {
    root: &'a Value,
    root_name: RootName<'a>,
    options: &'d Options,
    defs: &'d mut Defs<'a>,
    /// How often each `$ref` target is referenced in the document (counted when the first
    /// `$ref` is met: most documents have none).
    counts: Option<HashMap<String, usize>>,
    /// Targets of this document already given a name.
    local: HashMap<String, String>,
    /// Targets being inlined right now (a repeat means recursion).
    inlining: Vec<String>,
    /// Named targets whose body is still to convert.
    queue: VecDeque<(Pointer, String)>,
    /// Schema nodes left to convert.
    budget: usize,
}

impl<'a> Converter<'a, '_> {
    fn convert(&mut self, schema: &'a Value, depth: usize) -> Ty<'a> {
        if depth > self.options.max_depth || self.budget == 0 {
            return Ty::Unknown;
        }
        self.budget -= 1;
        match schema {
            Value::Bool(false) => Ty::Never,
            Value::Object(map) => self.convert_map(&Keywords::of(map), depth),
            _ => Ty::Unknown,
        }
    }

    fn convert_map(&mut self, s: &Keywords<'a>, depth: usize) -> Ty<'a> {
        let composed = s.one_of.is_some() || s.any_of.is_some() || s.all_of.is_some();
        let ty = if let Some(Value::String(reference)) = s.reference {
            self.reference(reference, depth)
        } else if !composed {
            self.base(s, depth).unwrap_or(Ty::Unknown)
        } else {
            let base = self.base(s, depth);
            let mut parts = Vec::new();
            for list in [s.one_of, s.any_of] {
                if let Some(Value::Array(members)) = list {
                    let members: Vec<Ty> =
                        members.iter().map(|m| self.convert(m, depth + 1)).collect();
                    parts.push(Ty::union(members));
                }
            }
            if let Some(Value::Array(members)) = s.all_of {
                for member in members {
                    parts.push(self.convert(member, depth + 1));
                }
            }
            match base {
                // `{type: "object", anyOf: [...]}`: the open object adds nothing.
                Some(base) if parts.is_empty() || base != open_object() => {
                    parts.insert(0, base);
                }
                _ => {}
            }
            Ty::intersection(parts)
        };
        if s.nullable == Some(&Value::Bool(true)) {
            return Ty::union([ty, Ty::Keyword("null")]);
        }
        ty
    }

    /// The type from `const`, `enum` or `type` (inferred from object and array keywords
    /// when absent); `None` when the schema says nothing about it.
    fn base(&mut self, s: &Keywords<'a>, depth: usize) -> Option<Ty<'a>> {
        if let Some(value) = s.constant {
            return Some(self.literal(value, depth));
        }
        if let Some(Value::Array(values)) = s.enumeration {
            let members: Vec<Ty> = values.iter().map(|v| self.literal(v, depth)).collect();
            return Some(Ty::union(members));
        }
        let types: Vec<&str> = match s.types {
            Some(Value::String(t)) => return Some(self.typed(t, s, depth)),
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ if s.properties.is_some()
                || s.additional_properties.is_some()
                || s.pattern_properties.is_some()
                || s.required.is_some() =>
            {
                vec!["object"]
            }
            _ if s.items.is_some() || s.prefix_items.is_some() => vec!["array"],
            _ => return None,
        };
        if types.is_empty() {
            return None;
        }
        let members: Vec<Ty> = types.into_iter().map(|t| self.typed(t, s, depth)).collect();
        Some(Ty::union(members))
    }

    fn typed(&mut self, type_name: &str, s: &Keywords<'a>, depth: usize) -> Ty<'a> {
        match type_name {
            "string" => Ty::Keyword("string"),
            "number" | "integer" => Ty::Keyword("number"),
            "boolean" => Ty::Keyword("boolean"),
            "null" => Ty::Keyword("null"),
            "object" => self.object(s, depth),
            "array" => self.array(s, depth),
            _ => Ty::Unknown,
        }
    }

    /// The literal type of a JSON value (`const`, `enum` members).
    fn literal(&mut self, value: &'a Value, depth: usize) -> Ty<'a> {
        if depth > self.options.max_depth || self.budget == 0 {
            return Ty::Unknown;
        }
        self.budget -= 1;
        match value {
            Value::Null => Ty::Keyword("null"),
            Value::Bool(b) => Ty::Literal(b.to_string()),
            Value::Number(n) => Ty::Literal(n.to_string()),
            Value::String(s) => Ty::Literal(names::string_literal(s)),
            Value::Array(items) => {
                let items: Vec<Ty> = items.iter().map(|v| self.literal(v, depth + 1)).collect();
                Ty::Tuple(Tuple {
                    required: items.len(),
                    items,
                    rest: None,
                })
            }
            Value::Object(map) => {
                let mut entries: Vec<(&'a String, &'a Value)> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                let mut props = Vec::with_capacity(entries.len());
                for (key, value) in entries {
                    let ty = self.literal(value, depth + 1);
                    props.push(Prop {
                        name: key,
                        optional: false,
                        ty,
                        doc: None,
                    });
                }
                let index = props.is_empty().then_some(Index {
                    ty: Box::new(Ty::Never),
                    doc: None,
                });
                Ty::Object(Object { props, index })
            }
        }
    }

    fn object(&mut self, s: &Keywords<'a>, depth: usize) -> Ty<'a> {
        let mut required: Vec<&'a str> = match s.required {
            Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        required.sort_unstable();
        required.dedup();
        let properties = s.properties.and_then(Value::as_object);
        let mut all: Vec<&'a str> = required.clone();
        if let Some(properties) = properties {
            all.extend(properties.keys().map(String::as_str));
        }
        all.sort_unstable();
        all.dedup();
        let mut props = Vec::with_capacity(all.len());
        for name in all {
            let (ty, doc) = match properties.and_then(|p| p.get(name)) {
                Some(schema) => {
                    let ty = self.convert(schema, depth + 1);
                    let doc = self.doc_for(schema, &ty);
                    (ty, doc)
                }
                None => (Ty::Unknown, None),
            };
            props.push(Prop {
                name,
                optional: required.binary_search(&name).is_err(),
                ty,
                doc,
            });
        }

        let mut members = Vec::new();
        let mut patterns = Vec::new();
        let additional = match s.additional_properties {
            None | Some(Value::Bool(true)) => Additional::Open,
            Some(Value::Bool(false)) => Additional::Closed,
            Some(schema) => {
                members.push(self.convert(schema, depth + 1));
                Additional::Typed
            }
        };
        if let Some(Value::Object(by_pattern)) = s.pattern_properties {
            let mut entries: Vec<(&'a String, &'a Value)> = by_pattern.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            for (pattern, schema) in entries {
                members.push(self.convert(schema, depth + 1));
                patterns.push(pattern.as_str());
            }
        }
        let index = if !members.is_empty() {
            // Every property must fit the index signature.
            members.extend(props.iter().map(|p| p.ty.clone()));
            if props.iter().any(|p| p.optional) {
                members.push(Ty::Keyword("undefined"));
            }
            let doc = (!patterns.is_empty()).then(|| {
                let mut doc = Doc::default();
                let others = if additional == Additional::Typed {
                    " (and any other key)"
                } else {
                    ""
                };
                let text = format!("Keys matching {}{others}", patterns.join(", "));
                doc.push_text(text.into(), self.options.description_budget);
                doc
            });
            Some(Index {
                ty: Box::new(Ty::union(members)),
                doc,
            })
        } else if props.is_empty() {
            let ty = match additional {
                Additional::Closed => Ty::Never,
                _ => Ty::Unknown,
            };
            Some(Index {
                ty: Box::new(ty),
                doc: None,
            })
        } else {
            None
        };
        Ty::Object(Object { props, index })
    }

    fn array(&mut self, s: &Keywords<'a>, depth: usize) -> Ty<'a> {
        let tuple = match (s.prefix_items, s.items) {
            (Some(Value::Array(items)), rest) => Some((items, rest)),
            (_, Some(Value::Array(items))) => Some((items, s.additional_items)),
            _ => None,
        };
        let Some((items, rest)) = tuple else {
            let item = match s.items {
                Some(schema) => self.convert(schema, depth + 1),
                None => Ty::Unknown,
            };
            return Ty::Array(Box::new(item));
        };
        let items: Vec<Ty> = items.iter().map(|i| self.convert(i, depth + 1)).collect();
        let count = |value: Option<&Value>| {
            value
                .and_then(Value::as_u64)
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
        };
        let closed = count(s.max_items).is_some_and(|max| max <= items.len());
        let rest = match rest {
            _ if closed => None,
            Some(Value::Bool(false)) => None,
            None | Some(Value::Bool(true)) => Some(Ty::Unknown),
            Some(schema) => match self.convert(schema, depth + 1) {
                Ty::Never => None,
                ty => Some(ty),
            },
        };
        Ty::Tuple(Tuple {
            required: count(s.min_items).unwrap_or(0).min(items.len()),
            items,
            rest: rest.map(Box::new),
        })
    }

    fn reference(&mut self, reference: &str, depth: usize) -> Ty<'a> {
        let Some(pointer) = Pointer::parse(reference) else {
            return Ty::Unknown;
        };
        let key = pointer.key();
        if let Some(name) = self.local.get(&key) {
            return Ty::Named(name.clone());
        }
        let Some(target) = pointer.resolve(self.root) else {
            return Ty::Unknown;
        };
        let root = self.root;
        let counts = self
            .counts
            .get_or_insert_with(|| refs::count_refs(root, NODE_BUDGET));
        let shared = pointer.is_root()
            || counts.get(&key).copied().unwrap_or(0) >= 2
            || self.inlining.contains(&key);
        if shared {
            return Ty::Named(self.name(pointer, key));
        }
        self.inlining.push(key);
        let ty = self.convert(target, depth + 1);
        self.inlining.pop();
        ty
    }

    /// The name of a shared target: the one an identical definition already has, or a
    /// new one (whose body is queued).
    fn name(&mut self, pointer: Pointer, key: String) -> String {
        let hint = match pointer.name_hint() {
            Some(hint) => names::type_name(hint),
            None => names::type_name(&self.root_name.hint()),
        };
        let source = refs::source_key(self.root, &pointer, NODE_BUDGET)
            .map(|source| format!("{hint}\0{source}"));
        if let Some(name) = source.as_ref().and_then(|s| self.defs.by_source.get(s)) {
            self.local.insert(key, name.clone());
            return name.clone();
        }
        let name = self.defs.names.allocate(&hint);
        if let Some(source) = source {
            self.defs.by_source.insert(source, name.clone());
        }
        self.local.insert(key, name.clone());
        self.queue.push_back((pointer, name.clone()));
        name
    }

    /// A property's comment: its own, or, for an inlined `$ref`, its target's.
    fn doc_for(&self, schema: &'a Value, ty: &Ty<'a>) -> Option<Doc<'a>> {
        let budget = self.options.description_budget;
        Doc::from_schema(schema, budget).or_else(|| {
            if matches!(ty, Ty::Named(_)) {
                return None;
            }
            let reference = schema.get("$ref")?.as_str()?;
            let target = Pointer::parse(reference)?.resolve(self.root)?;
            Doc::from_schema(target, budget)
        })
    }
}

/// The keywords the converter reads, gathered in one pass over a schema object.
#[derive(Default)]
struct Keywords<'a> {
    reference: Option<&'a Value>,
    constant: Option<&'a Value>,
    enumeration: Option<&'a Value>,
    types: Option<&'a Value>,
    one_of: Option<&'a Value>,
    any_of: Option<&'a Value>,
    all_of: Option<&'a Value>,
    nullable: Option<&'a Value>,
    properties: Option<&'a Value>,
    required: Option<&'a Value>,
    additional_properties: Option<&'a Value>,
    pattern_properties: Option<&'a Value>,
    items: Option<&'a Value>,
    prefix_items: Option<&'a Value>,
    additional_items: Option<&'a Value>,
    min_items: Option<&'a Value>,
    max_items: Option<&'a Value>,
}

impl<'a> Keywords<'a> {
    fn of(map: &'a Map<String, Value>) -> Keywords<'a> {
        let mut k = Keywords::default();
        for (key, value) in map {
            let slot = match key.as_str() {
                "$ref" => &mut k.reference,
                "const" => &mut k.constant,
                "enum" => &mut k.enumeration,
                "type" => &mut k.types,
                "oneOf" => &mut k.one_of,
                "anyOf" => &mut k.any_of,
                "allOf" => &mut k.all_of,
                "nullable" => &mut k.nullable,
                "properties" => &mut k.properties,
                "required" => &mut k.required,
                "additionalProperties" => &mut k.additional_properties,
                "patternProperties" => &mut k.pattern_properties,
                "items" => &mut k.items,
                "prefixItems" => &mut k.prefix_items,
                "additionalItems" => &mut k.additional_items,
                "minItems" => &mut k.min_items,
                "maxItems" => &mut k.max_items,
                _ => continue,
            };
            *slot = Some(value);
        }
        k
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Additional {
    Open,
    Closed,
    Typed,
}

/// `{ [key: string]: unknown }`: any object.
fn open_object() -> Ty<'static> {
    Ty::Object(Object {
        props: Vec::new(),
        index: Some(Index {
            ty: Box::new(Ty::Unknown),
            doc: None,
        }),
    })
}

#[cfg(test)]
mod tests;
