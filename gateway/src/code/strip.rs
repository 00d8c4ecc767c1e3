//! TypeScript in, JavaScript out: the program's types are stripped on the host, before any
//! worker is involved, and positions in the worker's errors are mapped back to the
//! model's own `line:column`.
//!
//! The program is the body of an async function (top-level `await` and `return` work), so
//! it is wrapped in one before parsing. Only erasable syntax is accepted: `enum`,
//! `namespace`/`module` declarations, parameter properties, `import x =` and `export =`
//! would need code generation, so they are rejected with the position of the offending
//! syntax (`declare` forms are pure types and pass). A function body has no imports or
//! exports: those that bring in or export only types are erased, the others are rejected
//! the same way.

use std::path::{Path, PathBuf};

use oxc::allocator::{Allocator, Vec as ArenaVec};
use oxc::ast::AstKind;
use oxc::ast::ast::{
    ExportDefaultDeclarationKind, ImportDeclarationSpecifier, ImportExpression, ImportMeta,
    Statement, TSExternalModuleDeclaration, TSGlobalDeclaration, TSNamespaceDeclaration,
};
use oxc::ast_visit::{VisitMut, walk_mut};
use oxc::codegen::{Codegen, CodegenOptions, CommentOptions};
use oxc::diagnostics::OxcDiagnostic;
use oxc::parser::Parser;
use oxc::semantic::SemanticBuilder;
use oxc::span::{GetSpan, SourceType, Span};
use oxc::transformer::{TransformOptions, Transformer};

use super::deep_stack;
use super::outcome::{CodeRunFailure, FailureKind};

/// The script name the worker gives the stripped program; stack frames naming it are ours.
pub(crate) const PROGRAM_SCRIPT: &str = "program.js";

/// The wrapper that makes the program an async function body. The prefix ends in a
/// newline, so the program's line N is the wrapper's line N + 1 at the same column.
const WRAP_PREFIX: &str = "async function __program() {\n";
const WRAP_SUFFIX: &str = "\n}\n";

/// A program ready for a worker: `js` is an async function declaration, `positions` maps
/// places in `js` back to the model's TypeScript.
#[derive(Debug)]
pub(crate) struct StrippedProgram {
    pub(crate) js: String,
    positions: PositionMap,
}

/// Strip the types from a TypeScript program, returning the JavaScript of the async
/// function that runs it (`async function __program() { … }`).
pub fn strip_types(program_ts: &str) -> Result<String, CodeRunFailure> {
    strip(program_ts).map(|stripped| stripped.js)
}

/// Programs may nest brackets at most this deep. The parser and the later passes recurse
/// on the host's stack, so deeper programs are refused before parsing rather than allowed
/// to overflow it and take the gateway down.
const MAX_NESTING: usize = 256;

/// Refuses programs whose `(`, `[` and `{` nest deeper than [`MAX_NESTING`]. Brackets in
/// strings and comments count too, which can only make the check stricter.
fn check_nesting(program_ts: &str) -> Result<(), CodeRunFailure> {
    let mut depth = 0usize;
    for (offset, byte) in program_ts.bytes().enumerate() {
        match byte {
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    let place = Place::of_offset(program_ts, (WRAP_PREFIX.len() + offset) as u32);
                    return Err(CodeRunFailure::new(
                        FailureKind::Parse,
                        format!(
                            "{place}: the program nests brackets deeper than {MAX_NESTING} levels"
                        ),
                    ));
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// [`strip_types`], keeping the position map the runtime uses for error messages.
pub(crate) fn strip(program_ts: &str) -> Result<StrippedProgram, CodeRunFailure> {
    if program_ts.len() > MAX_PROGRAM_BYTES {
        return Err(CodeRunFailure::new(
            FailureKind::Parse,
            format!("the program is longer than {MAX_PROGRAM_BYTES} bytes"),
        ));
    }
    check_nesting(program_ts)?;
    on_own_stack(program_ts)
}

/// Strip on a stack of its own. The parser and the transform passes recurse; nesting
/// without brackets (`!!!…`, `Array<Array<…>>`) is bounded only by the program's length,
/// so they run on a stack that fits the longest program ([`deep_stack`]), switched to on
/// the caller's thread: no hop to another thread. A panic in the parser is this
/// program's failure.
fn on_own_stack(program_ts: &str) -> Result<StrippedProgram, CodeRunFailure> {
    let stripped =
        std::panic::catch_unwind(|| deep_stack::on_deep_stack(|| strip_on_this_stack(program_ts)));
    match stripped {
        Ok(Ok(stripped)) => stripped,
        Ok(Err(error)) => Err(CodeRunFailure::new(
            FailureKind::Died,
            format!("no stack to parse the program on: {error}"),
        )),
        Err(_) => Err(CodeRunFailure::new(
            FailureKind::Parse,
            "the program could not be parsed: the parser failed on it",
        )),
    }
}

/// The longest program accepted (far more than a model writes).
const MAX_PROGRAM_BYTES: usize = 256 * 1024;

fn strip_on_this_stack(program_ts: &str) -> Result<StrippedProgram, CodeRunFailure> {
    let wrapped = format!("{WRAP_PREFIX}{program_ts}{WRAP_SUFFIX}");
    let place = |offset: u32| Place::of_offset(program_ts, offset);
    let allocator = Allocator::default();
    let parsed = Parser::new(&allocator, &wrapped, SourceType::ts()).parse();
    if let Some(diagnostic) = parsed.diagnostics.errors().next() {
        if diagnostic.labels.is_empty() && diagnostic.message == BINARY_FILE {
            return Err(replacement_character_failure(&wrapped, place));
        }
        return Err(parse_failure(diagnostic, place));
    }
    if parsed.panicked {
        return Err(CodeRunFailure::new(
            FailureKind::Parse,
            "the program could not be parsed",
        ));
    }
    let mut program = parsed.program;
    check_single_body(&program.body, wrapped.len(), place)?;
    let mut module_syntax = ModuleSyntax::default();
    module_syntax.visit_program(&mut program);
    if let Some((span, why)) = module_syntax.refusal {
        return Err(CodeRunFailure::new(
            FailureKind::Parse,
            format!("{}: {why}", place(span.start)),
        ));
    }

    let semantic = SemanticBuilder::new()
        .with_check_syntax_error(true)
        .with_build_nodes(true)
        .with_enum_eval(true)
        .build(&program);
    if let Some(diagnostic) = semantic.diagnostics.errors().next() {
        return Err(parse_failure(diagnostic, place));
    }
    for node in semantic.semantic.nodes().iter() {
        if let Some((span, why)) = non_erasable(node.kind()) {
            let at = place(span.start);
            return Err(CodeRunFailure::new(
                FailureKind::Parse,
                format!(
                    "{at}: {why}; only TypeScript whose types can simply be erased is accepted"
                ),
            ));
        }
    }

    let scoping = semantic.semantic.into_scoping();
    let options = TransformOptions::default();
    let transformed = Transformer::new(&allocator, Path::new("program.ts"), &options)
        .build_with_scoping(scoping, &mut program);
    if let Some(diagnostic) = transformed.diagnostics.errors().next() {
        return Err(parse_failure(diagnostic, place));
    }

    let generated = Codegen::new()
        .with_options(CodegenOptions {
            comments: CommentOptions::disabled(),
            source_map_path: Some(PathBuf::from("program.ts")),
            ..CodegenOptions::default()
        })
        .with_scoping(Some(transformed.scoping))
        .build(&program);
    let tokens = generated
        .map
        .map(|map| {
            map.get_tokens()
                .map(|t| {
                    (
                        (t.get_dst_line(), t.get_dst_col()),
                        (t.get_src_line(), t.get_src_col()),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(StrippedProgram {
        js: generated.code,
        positions: PositionMap::new(tokens, program_ts.lines().count().max(1) as u32),
    })
}

impl StrippedProgram {
    /// Rewrite every `program.js:LINE:COLUMN` in a worker's message (QuickJS stack
    /// frames, syntax errors) to the model's own `LINE:COLUMN`; frames that fall in the
    /// wrapper become `<program>`.
    pub(crate) fn map_positions(&self, message: &str) -> String {
        let needle = format!("{PROGRAM_SCRIPT}:");
        let mut out = String::with_capacity(message.len());
        let mut rest = message;
        while let Some(found) = rest.find(&needle) {
            out.push_str(&rest[..found]);
            let after = &rest[found + needle.len()..];
            match parse_line_column(after) {
                Some((line, column, used)) => {
                    match self.positions.original(line, column) {
                        Some(place) => out.push_str(&place.to_string()),
                        None => out.push_str("<program>"),
                    }
                    rest = &after[used..];
                }
                None => {
                    out.push_str(&needle);
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }
}

/// A 1-based line and column in the model's program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Place {
    line: u32,
    column: u32,
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

impl Place {
    /// The place of a byte offset in the wrapped source, clamped into the program.
    fn of_offset(program_ts: &str, wrapped_offset: u32) -> Place {
        let offset = (wrapped_offset as usize)
            .saturating_sub(WRAP_PREFIX.len())
            .min(program_ts.len());
        let mut offset = offset;
        while !program_ts.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &program_ts[..offset];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Place {
            line: 1 + before.matches('\n').count() as u32,
            column: 1 + before[line_start..].chars().count() as u32,
        }
    }
}

/// Source-map tokens of the generated code: ((js line, js column), (ts line, ts column)),
/// all 0-based, the TypeScript side in wrapped coordinates.
#[derive(Debug)]
struct PositionMap {
    tokens: Vec<((u32, u32), (u32, u32))>,
    program_lines: u32,
}

impl PositionMap {
    fn new(mut tokens: Vec<((u32, u32), (u32, u32))>, program_lines: u32) -> Self {
        tokens.sort_unstable();
        Self {
            tokens,
            program_lines,
        }
    }

    /// The model's place for a 1-based generated `line:column`: the nearest mapped token
    /// at or before it. `None` when it falls in the wrapper.
    fn original(&self, line: u32, column: u32) -> Option<Place> {
        let key = (line.checked_sub(1)?, column.saturating_sub(1));
        let index = self.tokens.partition_point(|(dst, _)| *dst <= key);
        let (_, (src_line, src_column)) = *self.tokens.get(index.checked_sub(1)?)?;
        // Wrapped line 0 is the prefix; wrapped line N is the program's line N.
        if src_line == 0 || src_line > self.program_lines {
            return None;
        }
        Some(Place {
            line: src_line,
            column: src_column + 1,
        })
    }
}

/// `LINE:COLUMN` at the start of `text`: the two numbers and how many bytes they used.
fn parse_line_column(text: &str) -> Option<(u32, u32, usize)> {
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let line_len = digits(text);
    let rest = text.get(line_len..)?.strip_prefix(':')?;
    let column_len = digits(rest);
    if line_len == 0 || column_len == 0 {
        return None;
    }
    let line = text[..line_len].parse().ok()?;
    let column = rest[..column_len].parse().ok()?;
    Some((line, column, line_len + 1 + column_len))
}

fn parse_failure(diagnostic: &OxcDiagnostic, place: impl Fn(u32) -> Place) -> CodeRunFailure {
    // The primary label, else the last: for a redeclaration that is the second one.
    let label = diagnostic
        .labels
        .iter()
        .find(|label| label.primary())
        .or(diagnostic.labels.last());
    let message = match label {
        Some(label) => format!("{}: {}", place(label.offset()), diagnostic.message),
        None => diagnostic.message.to_string(),
    };
    CodeRunFailure::new(FailureKind::Parse, message)
}

/// What oxc says, with no position, when it meets U+FFFD (the replacement character, the
/// mark of badly decoded bytes) outside a string, comment, template or regular expression.
const BINARY_FILE: &str = "File appears to be binary.";

/// The failure for a U+FFFD outside a string, at its place. oxc stops there without a
/// position, so the source is parsed again with every U+FFFD swapped for U+FFFF (as long
/// in UTF-8), which it reports as an invalid character where it stands.
fn replacement_character_failure(wrapped: &str, place: impl Fn(u32) -> Place) -> CodeRunFailure {
    let swapped = wrapped.replace('\u{fffd}', "\u{ffff}");
    let allocator = Allocator::default();
    let reparsed = Parser::new(&allocator, &swapped, SourceType::ts()).parse();
    let offset = reparsed
        .diagnostics
        .errors()
        .flat_map(|diagnostic| diagnostic.labels.iter().map(|label| label.offset()))
        .find(|&offset| {
            wrapped
                .get(offset as usize..)
                .is_some_and(|rest| rest.starts_with('\u{fffd}'))
        })
        .or_else(|| wrapped.find('\u{fffd}').map(|offset| offset as u32))
        .unwrap_or(0);
    CodeRunFailure::new(
        FailureKind::Parse,
        format!(
            "{}: unexpected U+FFFD (the replacement character) outside a string; the \
             program looks like binary or badly decoded text",
            place(offset)
        ),
    )
}

/// `import` outside a module, for the model.
const IMPORT_REFUSED: &str = "`import` declarations are not supported in run_code: the \
     program is the body of an async function, and the SDK (`tools`, `callTool`) is \
     already in scope";

/// `export` outside a module, for the model.
const EXPORT_REFUSED: &str = "`export` declarations are not supported in run_code: the \
     program is the body of an async function; `return` a value instead";

const IMPORT_META_REFUSED: &str =
    "`import.meta` is not available in run_code: the program is not a module";

const DYNAMIC_IMPORT_REFUSED: &str = "`import()` is not available in run_code: there are no \
     modules to load, and the SDK (`tools`, `callTool`) is already in scope";

/// Module syntax in the program, which is the body of a function. Declarations that bring
/// in or export only types are erased from the statement lists they stand in; any other
/// `import` or `export` declaration (a type-only one included, when it is the body of an
/// `if` or a loop), `import.meta` and `import()` are refused, the first in source order.
#[derive(Default)]
struct ModuleSyntax {
    refusal: Option<(Span, &'static str)>,
}

impl<'a> VisitMut<'a> for ModuleSyntax {
    fn visit_statements(&mut self, statements: &mut ArenaVec<'a, Statement<'a>>) {
        statements.retain(|statement| !is_type_only_module_declaration(statement));
        walk_mut::walk_statements(self, statements);
    }

    fn visit_statement(&mut self, statement: &mut Statement<'a>) {
        if self.refusal.is_some() {
            return;
        }
        if let Some(why) = module_declaration(statement) {
            self.refusal = Some((statement.span(), why));
            return;
        }
        walk_mut::walk_statement(self, statement);
    }

    fn visit_import_meta(&mut self, meta: &mut ImportMeta) {
        self.refusal.get_or_insert((meta.span, IMPORT_META_REFUSED));
    }

    fn visit_import_expression(&mut self, import: &mut ImportExpression<'a>) {
        self.refusal
            .get_or_insert((import.span, DYNAMIC_IMPORT_REFUSED));
    }

    // `export` is how a namespace or module declaration says what it holds; the
    // declaration itself is refused later, with its own message.
    fn visit_ts_namespace_declaration(&mut self, _: &mut TSNamespaceDeclaration<'a>) {}

    fn visit_ts_external_module_declaration(&mut self, _: &mut TSExternalModuleDeclaration<'a>) {}

    fn visit_ts_global_declaration(&mut self, _: &mut TSGlobalDeclaration<'a>) {}
}

/// Whether `statement` is an `import` or `export` declaration, and which.
/// (`export =` and `import x =` are left to [`non_erasable`].)
fn module_declaration(statement: &Statement<'_>) -> Option<&'static str> {
    match statement {
        Statement::ImportDeclaration(_) => Some(IMPORT_REFUSED),
        Statement::ExportAllDeclaration(_)
        | Statement::ExportDefaultDeclaration(_)
        | Statement::ExportDeclaration(_)
        | Statement::ExportNamedDeclaration(_)
        | Statement::ExportFromDeclaration(_)
        | Statement::TSNamespaceExportDeclaration(_) => Some(EXPORT_REFUSED),
        _ => None,
    }
}

/// An `import` or `export` that only concerns types, which erasing leaves nothing of:
/// `import type …`, `import { type A, type B } …`, `export type …`, `export interface …`,
/// `export declare …`, `export {}`, `export as namespace …`, `import type X = …`.
fn is_type_only_module_declaration(statement: &Statement<'_>) -> bool {
    match statement {
        Statement::ImportDeclaration(import) => {
            import.import_kind.is_type()
                || import.specifiers.as_ref().is_some_and(|specifiers| {
                    !specifiers.is_empty()
                        && specifiers.iter().all(|specifier| {
                            matches!(specifier, ImportDeclarationSpecifier::ImportSpecifier(s)
                                if s.import_kind.is_type())
                        })
                })
        }
        Statement::ExportNamedDeclaration(export) => {
            export.export_kind.is_type()
                || export.specifiers.iter().all(|s| s.export_kind.is_type())
        }
        Statement::ExportFromDeclaration(export) => {
            export.export_kind.is_type()
                || (!export.specifiers.is_empty()
                    && export.specifiers.iter().all(|s| s.export_kind.is_type()))
        }
        Statement::ExportAllDeclaration(export) => export.export_kind.is_type(),
        Statement::ExportDeclaration(export) => {
            export.declaration.is_type() || export.declaration.declare()
        }
        Statement::ExportDefaultDeclaration(export) => matches!(
            export.declaration,
            ExportDefaultDeclarationKind::TSInterfaceDeclaration(_)
        ),
        Statement::TSNamespaceExportDeclaration(_) => true,
        Statement::TSImportEqualsDeclaration(import) => import.import_kind.is_type(),
        _ => false,
    }
}

/// The wrapped source must parse to exactly the one wrapper function: a stray `}` in the
/// program would otherwise close the wrapper and put code at the top level.
fn check_single_body(
    body: &[Statement<'_>],
    wrapped_len: usize,
    place: impl Fn(u32) -> Place,
) -> Result<(), CodeRunFailure> {
    let whole = body.len() == 1
        && matches!(&body[0], Statement::FunctionDeclaration(f)
            if f.span.start == 0 && f.span.end as usize + 1 == wrapped_len);
    if whole {
        return Ok(());
    }
    let stray = body
        .iter()
        .find_map(|statement| match statement {
            Statement::FunctionDeclaration(f) if f.span.start == 0 => {
                Some(f.span.end.saturating_sub(1))
            }
            _ => None,
        })
        .unwrap_or(0);
    Err(CodeRunFailure::new(
        FailureKind::Parse,
        format!("{}: unexpected `}}` closes the program", place(stray)),
    ))
}

/// Syntax that TypeScript would have to compile into code, with a short reason.
fn non_erasable(kind: AstKind<'_>) -> Option<(Span, &'static str)> {
    match kind {
        AstKind::TSEnumDeclaration(e) if !e.declare => {
            Some((e.span, "`enum` is not erasable (use a union of literal types or a plain object)"))
        }
        AstKind::TSNamespaceDeclaration(n) if !n.declare => Some((
            n.span,
            "`namespace`/`module` declarations are not erasable (use plain objects or functions)",
        )),
        AstKind::TSExternalModuleDeclaration(m) if !m.declare => {
            Some((m.span, "`module` declarations are not erasable"))
        }
        AstKind::FormalParameter(p) if p.accessibility.is_some() || p.readonly || p.r#override => Some((
            p.span,
            "parameter properties are not erasable (declare the field and assign it in the constructor)",
        )),
        AstKind::TSImportEqualsDeclaration(i) if i.import_kind.is_value() => {
            Some((i.span, "`import … =` is not erasable"))
        }
        AstKind::TSExportAssignment(e) => Some((e.span, "`export =` is not erasable")),
        _ => None,
    }
    .map(|(span, why)| (span.span(), why))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_error(program: &str) -> String {
        let failure = strip(program).expect_err("should be rejected");
        assert_eq!(failure.kind, FailureKind::Parse);
        failure.message
    }

    #[test]
    fn strips_annotations_interfaces_and_assertions() {
        let js = strip_types(
            "interface P { x: number }\nconst p: P = { x: 1 } as P;\nlet n = <number>p.x;\nfunction f<T>(a: T): T { return a!; }\nreturn f(n satisfies number);",
        )
        .unwrap();
        assert!(js.starts_with("async function __program() {"), "{js}");
        assert!(!js.contains("interface"), "{js}");
        assert!(!js.contains(": number"), "{js}");
        assert!(js.contains("return f(n)"), "{js}");
    }

    #[test]
    fn top_level_await_and_return_are_legal() {
        let js = strip_types("const x = await Promise.resolve(2);\nreturn x * 2;").unwrap();
        assert!(js.contains("await Promise.resolve(2)"), "{js}");
        assert!(js.contains("return x * 2"), "{js}");
    }

    #[test]
    fn declare_forms_are_erasable() {
        let js = strip_types(
            "declare enum E { A }\ndeclare const x: number;\ndeclare function f(): void;\ntype T = E;\nreturn 1;",
        )
        .unwrap();
        assert!(!js.contains("enum") && !js.contains("declare"), "{js}");
    }

    #[test]
    fn enum_is_rejected_with_its_position() {
        let message = parse_error("const a = 1;\n  enum Color { Red }\nreturn a;");
        assert!(message.starts_with("2:3: `enum`"), "{message}");
    }

    #[test]
    fn namespace_is_rejected() {
        // Inside the program's function body the parser itself refuses namespaces.
        let message = parse_error("const a = 1;\nnamespace N { export const x = 1 }");
        assert!(message.starts_with("2:1: "), "{message}");
    }

    #[test]
    fn parameter_properties_are_rejected() {
        let message = parse_error("class A {\n  constructor(private x: number) {}\n}");
        assert!(
            message.starts_with("2:15: parameter properties"),
            "{message}"
        );
    }

    #[test]
    fn import_equals_and_export_assignment_are_rejected() {
        assert!(parse_error("import fs = require('fs');").starts_with("1:1"));
        assert!(parse_error("export = 1;").starts_with("1:1"));
    }

    #[test]
    fn type_only_imports_and_exports_are_erased() {
        let js = strip_types(
            "import type { T } from \"t\";\nimport { type A, type B as C } from \"a\";\n\
             export type X = T;\nexport interface I { a: A }\nexport type { C };\n\
             export declare const d: number;\nexport {};\n\
             function f() { import type Y from \"y\"; export type Z = Y; return 1; }\n\
             { export type * from \"s\"; }\nreturn f();",
        )
        .unwrap();
        assert!(!js.contains("import") && !js.contains("export"), "{js}");
        assert!(js.contains("return f()"), "{js}");
    }

    #[test]
    fn value_imports_and_exports_are_refused_with_their_position() {
        let cases = [
            (
                "return 1;\nimport x from \"y\";",
                "2:1: `import` declarations",
            ),
            (
                "const a = 1;\n  import \"side-effect\";",
                "2:3: `import` declarations",
            ),
            (
                "import { type A, b } from \"a\";",
                "1:1: `import` declarations",
            ),
            (
                "function f() {\n  export const a = 1;\n}",
                "2:3: `export` declarations",
            ),
            ("export default 1;", "1:1: `export` declarations"),
            ("const a = 1;\nexport { a };", "2:1: `export` declarations"),
            ("export * from \"x\";", "1:1: `export` declarations"),
            // Erasing would leave the `if` without a body.
            (
                "if (1) import type { T } from \"t\";",
                "1:8: `import` declarations",
            ),
            ("return import.meta.url;", "1:8: `import.meta`"),
            (
                "const fs = await import(\"node:fs\");",
                "1:18: `import()` is not available",
            ),
        ];
        for (program, expected) in cases {
            let message = parse_error(program);
            assert!(message.starts_with(expected), "{program:?}: {message}");
        }
        assert!(parse_error("import x from \"y\";").contains("already in scope"));
    }

    #[test]
    fn a_replacement_character_outside_a_string_has_its_position() {
        let message = parse_error("const a = \"\u{fffd}\";\nconst b = \u{fffd};\nreturn a;");
        assert!(message.starts_with("2:11: unexpected U+FFFD"), "{message}");
        let js = strip_types("// \u{fffd}\nreturn `\u{fffd}` + \"\u{fffd}\";").unwrap();
        assert!(js.contains('\u{fffd}'), "{js}");
    }

    #[test]
    fn syntax_errors_carry_the_models_position() {
        let message = parse_error("let a = 1;\nlet b = ;\n");
        assert!(message.starts_with("2:9: "), "{message}");
    }

    #[test]
    fn early_errors_are_parse_failures() {
        let message = parse_error("let a = 1;\nlet a = 2;");
        assert!(message.starts_with("2:5: "), "{message}");
    }

    #[test]
    fn a_stray_brace_cannot_escape_the_wrapper() {
        let message = parse_error("return 1;\n}\nfunction outside() {");
        assert!(message.contains("closes the program"), "{message}");
    }

    #[test]
    fn runtime_positions_map_back_to_the_program() {
        let stripped = strip("const a: number = 1;\n\nthrow new Error('x' + a);").unwrap();
        let line = stripped
            .js
            .lines()
            .position(|l| l.contains("throw"))
            .unwrap() as u32
            + 1;
        let column = stripped
            .js
            .lines()
            .nth(line as usize - 1)
            .unwrap()
            .find("throw")
            .unwrap() as u32
            + 1;
        let mapped = stripped.map_positions(&format!(
            "Error: x1\n    at __program (program.js:{line}:{column})"
        ));
        assert_eq!(mapped, "Error: x1\n    at __program (3:1)");
        assert_eq!(stripped.map_positions("at program.js:1:1"), "at <program>");
        assert_eq!(stripped.map_positions("program.js:x"), "program.js:x");
    }
}
